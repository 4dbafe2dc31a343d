// SPDX-License-Identifier: Apache-2.0
//
// bridge/translate.h
//
// Pure translation of a group of pods into the Slurm job that holds their place, and of the
// Kubernetes-side placement constraints into the Slurm nodes the job must avoid. No I/O.
//
// Resources, per pod as kube-scheduler counts them (the containers' sum, sidecar init containers
// — restartPolicy Always — added to it, the larger of that and each plain init container with
// the sidecars started before it; pod-level spec.resources instead for cpu, memory and
// hugepages; plus overhead), the larger of request and limit, then the maximum over the group's
// pods, because Slurm gets one pod per node:
//   cpu              -> cpus_per_task (whole CPUs, rounded up; omitted when 0)
//   memory           -> memory_per_node in MiB (rounded up, so at least 1; omitted when 0)
//   extended         -> tres_per_node through the resource->TRES table (Config::resource_tres;
//                       nvidia.com/gpu and amd.com/gpu -> gres/gpu by default), e.g. "gres/gpu=1"
//   DRA (bridge/dra/): deviceclass.resource.kubernetes.io/<class>, or a DeviceClass's
//                    extendedResourceName, resolved to a device profile: indexed-gres -> the
//                    profile's GRES in tres_per_node ("gres/gpu=1"), core-bitmap -> CPUs in
//                    cpus_per_task; a class no profile covers fails the translation; the same
//                    for the requests of spec.resourceClaims' templates (claim_templates)
// One node per pod: nodes = minimum_nodes = maximum_nodes = group size, tasks_per_node = 1.
//
// Annotations on the group's root object (prefix slurmjob.slinky.slurm.net/, or the pre-1.0
// slinky.slurm.net/) override: account, constraints, cpu-per-task (quantity), exclusive ("false"
// shares nodes), gres (raw tres_per_node), group-id, job-name, licenses, max-nodes, min-nodes,
// mem-per-node (quantity), partition, priority, qos, reservation, timelimit (ParseTimeLimit),
// user-id, wckey; and ours: comment. A bad value is an error naming the annotation and the value.
// user-id, group-id, account, qos, partition, reservation, wckey and priority are honoured only
// as far as the namespace's identity policy allows (bridge/identity.h); the policy also sets the
// user and group a namespace's jobs run as.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bridge/config.h"
#include "bridge/dra/requests.h"
#include "bridge/identity.h"
#include "common/error.h"
#include "kube/types.h"
#include "slurm/types.h"

namespace sb::bridge {

// A group of pods that Slurm allocates as one job (group.h decides who belongs).
struct GroupSpec {
  std::string key;   // "Pod/ns/name", "Job/ns/name", "PodGroup/ns/name", ...
  std::string kind;  // the root's kind: Pod, Job, JobSet, LeaderWorkerSet, PodGroup
  std::string namespace_;
  std::string name;             // the default Slurm job name
  int size = 1;                 // pods the group needs before it is submitted (gang size)
  kube::StringMap annotations;  // the root object's
  std::optional<std::int64_t> time_limit_minutes;  // e.g. from a Job's activeDeadlineSeconds
  bool operator==(const GroupSpec&) const = default;
};

// The MCS label of MCS-shared jobs when config mcsLabel is empty (upstream's default mcsLabel).
inline constexpr std::string_view kDefaultMcsLabel = "kubernetes";

struct TranslateOptions {
  std::string partition;  // default partition
  std::string mcs_label;
  std::string cluster_name;
  std::string scheduler_name;
  JobMode mode = JobMode::kExternal;
  // kCoResident (config nodeSharing): jobs are non-exclusive (no `shared` value), so Slurm packs
  // them core by core beside native jobs; the `exclusive` annotation still decides per workload.
  NodeSharing node_sharing = NodeSharing::kExclusive;
  // With kExclusive (config mcsSharing): a job the `exclusive` annotation makes non-exclusive is
  // submitted with shared=mcs and the MCS label (mcs_label, else kDefaultMcsLabel), so that with
  // slurm.conf's MCSPlugin=mcs/label it shares nodes only with jobs of that label: never with
  // native jobs (upstream's fix of its #53, time-only sharing).
  bool mcs_sharing = true;
  std::map<std::string, std::string> resource_tres;
  // When neither the group nor an annotation gives one (config defaultTimeLimit); 0: none.
  std::int64_t default_time_limit_minutes = 0;
  // Who the jobs run as and which identity and priority annotations the namespace may use
  // (config identityPolicy): annotations outside it make Translate fail (kPermissionDenied).
  IdentityPolicy identity;
  // DRA: the device profiles (config deviceProfiles), the DeviceClasses the caller read (by
  // name; pointers valid while Translate runs; a class not read is resolved by driver name) and
  // their extendedResourceNames.
  std::vector<DeviceProfile> device_profiles;
  ObjectsByName device_classes;
  std::set<std::string, std::less<>> dra_resource_names;
  // The ResourceClaimTemplates each pod's spec.resourceClaims name, by pod ("ns/name") and then
  // template name; a template absent here was not read (the pod's translation fails).
  std::map<std::string, ObjectsByName> claim_templates;
};

// Whether the pod asks for devices through DRA: extended resources (the implicit
// deviceclass.resource.kubernetes.io/ names, or one of `dra_resource_names`) or
// spec.resourceClaims.
[[nodiscard]] bool HasDraResources(const kube::Pod& pod,
                                   const std::set<std::string, std::less<>>& dra_resource_names);

// The whole-pod resource use (kube-scheduler's PodRequests, with limits where larger), in
// milli-units for cpu and whole units otherwise.
[[nodiscard]] Result<std::map<std::string, std::int64_t>> PodResources(const kube::Pod& pod);
// The same from requests only (kube-scheduler's PodRequests): what a node must have allocatable.
[[nodiscard]] Result<std::map<std::string, std::int64_t>> PodRequests(const kube::Pod& pod);

// The `timelimit` annotation, as upstream 1.3 reads it: bare minutes ("90"), a duration ("90s",
// "2h", "1h30m"; rounded up to whole minutes) or a Slurm --time string ("MM:SS", "HH:MM:SS",
// "D-HH", "D-HH:MM", "D-HH:MM:SS"; seconds rounded up, as Slurm does); "UNLIMITED" or
// "INFINITE": no limit. At least 1 minute; kInvalidArgument naming the annotation otherwise.
[[nodiscard]] Result<slurm::NoValNumber> ParseTimeLimit(std::string_view raw);

// With nodeSharing coResident, why `partition`'s OverSubscribe makes sharing unsafe ("" when it
// is safe or unknown): more than one job may then hold the same core or GPU (YES:N or FORCE:N
// with N > 1), so Slurm's allocation no longer says what a pod may use. EXCLUSIVE (whole nodes),
// NO and FORCE:1 are safe (upstream 1.3 accepts NO and EXCLUSIVE).
[[nodiscard]] std::string CoResidentSharingRisk(const slurm::PartitionInfo& partition);

// The job for `pods` (the group's members, already complete) of `group`.
[[nodiscard]] Result<slurm::JobDescription> Translate(const GroupSpec& group,
                                                      const std::vector<const kube::Pod*>& pods,
                                                      const TranslateOptions& options);

// The Slurm name of a Kubernetes node: its slinky.slurm.net/slurm-nodename label, else its name.
[[nodiscard]] std::string SlurmNodeName(const kube::Node& node);

// Why a Slurm node is excluded for a group.
struct Exclusion {
  std::string slurm_node;
  std::string reason;  // "no Kubernetes node", "unschedulable", "not Ready", "taint
                       // x=y:NoSchedule", "node selector", "node affinity", "insufficient cpu"
  bool operator==(const Exclusion&) const = default;
};

// The Slurm nodes the group's job must avoid: those with no Kubernetes node, and those whose
// Kubernetes node any pod of the group could not run on (unschedulable, not Ready, a taint the
// pod does not tolerate — the bridge's own managed-node taint excepted —, nodeSelector, required
// node affinity, allocatable less what other pods request smaller than the pod's requests
// (PodRequests; limits do not count, as for kube-scheduler)). Sorted by Slurm name.
// `k8s_nodes_by_slurm_name` maps Slurm names to Kubernetes nodes (SlurmNodeName).
// `used_by_others`: what pods Slurm does not know of (other schedulers' pods bound to the
// nodes: DaemonSets, mirror pods) request per Kubernetes node; it is taken from the node's
// allocatable before the group's pods are compared with it (N-13). nullptr: nothing.
// `ports_in_use`: the host ports the pods bound to each Kubernetes node open (PortsOf); a node
// where one of them conflicts with a host port of the group's pods is excluded, as
// kube-scheduler's NodePorts filter does. nullptr: nothing.
// DRA extended resources (deviceclass.resource.kubernetes.io/<class>, and `dra_resource_names`:
// the DeviceClasses' extendedResourceNames) count only on a node that advertises them (a device
// plugin's); elsewhere Slurm counts the devices and the claim names them.
using NodeUsage = std::map<std::string, std::map<std::string, std::int64_t>>;
using NodePorts = std::map<std::string, std::vector<kube::HostPort>>;
[[nodiscard]] std::vector<Exclusion> ExcludedNodes(
    const std::vector<const kube::Pod*>& pods, const std::vector<std::string>& slurm_nodes,
    const std::map<std::string, const kube::Node*>& k8s_nodes_by_slurm_name,
    const NodeUsage* used_by_others = nullptr, const NodePorts* ports_in_use = nullptr,
    const std::set<std::string, std::less<>>* dra_resource_names = nullptr);
// The requests (PodRequests) of the bound pods, summed per Kubernetes node.
[[nodiscard]] NodeUsage UsageOf(const std::vector<const kube::Pod*>& pods);
// The host ports a pod opens on its node: its containers' and its sidecars' (init containers
// with restartPolicy Always), as kube-scheduler counts them.
[[nodiscard]] std::vector<kube::HostPort> HostPortsOf(const kube::Pod& pod);
// The host ports of the bound pods, per Kubernetes node.
[[nodiscard]] NodePorts PortsOf(const std::vector<const kube::Pod*>& pods);
// Two host ports conflict when port and protocol are equal and their addresses overlap (equal,
// or either one is every address: "" or 0.0.0.0).
[[nodiscard]] bool PortsConflict(const kube::HostPort& a, const kube::HostPort& b);

// What ExcludedNodes reads of the pods, as one string: per pod its tolerations, nodeSelector,
// required node affinity, requests (PodRequests) and host ports, nothing else (not its name). For
// the same nodes, pods with equal keys have equal exclusions, so a caller may keep the result per
// key until a node changes (thousands of pods of one shape cost one walk over the nodes).
[[nodiscard]] std::string ExclusionKey(const std::vector<const kube::Pod*>& pods);

// Matching helpers (exposed for tests).
[[nodiscard]] bool Tolerates(const std::vector<kube::Toleration>& tolerations,
                             const kube::Taint& taint);
[[nodiscard]] bool MatchesNodeSelector(const kube::Pod& pod, const kube::Node& node);
[[nodiscard]] bool NodeIsReady(const kube::Node& node);
// A NodeSelector's terms (ORed; an empty list matches every node, a term without requirements
// none), as a pod's required node affinity or a PersistentVolume's nodeAffinity.required.
[[nodiscard]] bool MatchesNodeSelectorTerms(const std::vector<kube::NodeSelectorTerm>& terms,
                                            const kube::Node& node);

}  // namespace sb::bridge
