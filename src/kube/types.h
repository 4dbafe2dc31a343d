// SPDX-License-Identifier: Apache-2.0
//
// kube/types.h
//
// The Kubernetes objects the bridge reads and writes, as plain structs with value semantics.
// Each holds only the fields someone needs; decoding (codec.h) ignores everything else.
// Quantities stay strings here ("500m", "1Gi"); quantity.h turns them into numbers.
// Timestamps stay RFC 3339 strings, as the apiserver sends them ("" when unset).
//
// Thread model: plain values. The informer cache shares them as shared_ptr<const T>.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sb::kube {

using StringMap = std::map<std::string, std::string>;
// Resource name -> quantity string ("cpu" -> "500m").
using ResourceList = std::map<std::string, std::string>;

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
  bool block_owner_deletion = false;
  bool operator==(const OwnerReference&) const = default;
};

struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string namespace_;
  std::string uid;
  std::string resource_version;
  std::int64_t generation = 0;
  StringMap labels;
  StringMap annotations;
  std::vector<OwnerReference> owner_references;
  std::vector<std::string> finalizers;
  std::string creation_timestamp;
  std::string deletion_timestamp;
  std::optional<std::int64_t> deletion_grace_period_seconds;
  bool operator==(const ObjectMeta&) const = default;
};

struct Condition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
  std::string last_transition_time;
  bool operator==(const Condition&) const = default;
};

// The condition of `type` among `conditions` (a pod's or a node's); nullptr when there is none.
[[nodiscard]] inline const Condition* FindCondition(const std::vector<Condition>& conditions,
                                                    std::string_view type) {
  auto it = std::ranges::find(conditions, type, &Condition::type);
  return it == conditions.end() ? nullptr : &*it;
}

struct ResourceRequirements {
  ResourceList requests;
  ResourceList limits;
  bool operator==(const ResourceRequirements&) const = default;
};

// A container port that is also opened on the node (ports[] entries with hostPort > 0).
struct HostPort {
  std::int64_t port = 0;  // hostPort
  std::int64_t container_port = 0;
  std::string protocol = "TCP";  // TCP, UDP, SCTP ("" reads as TCP)
  std::string host_ip;           // "" or 0.0.0.0: every address of the node
  bool operator==(const HostPort&) const = default;
};

struct Container {
  std::string name;
  std::string image;
  ResourceRequirements resources;
  std::string restart_policy;  // init containers: "Always" makes a sidecar; "" otherwise
  std::vector<HostPort> host_ports;
  bool operator==(const Container&) const = default;
};

struct Toleration {
  std::string key;
  std::string operator_;  // "Exists" or "Equal" ("" means Equal)
  std::string value;
  std::string effect;  // "" means all effects
  std::optional<std::int64_t> toleration_seconds;
  bool operator==(const Toleration&) const = default;
};

struct NodeSelectorRequirement {
  std::string key;
  std::string operator_;  // In, NotIn, Exists, DoesNotExist, Gt, Lt
  std::vector<std::string> values;
  bool operator==(const NodeSelectorRequirement&) const = default;
};

// One term of requiredDuringSchedulingIgnoredDuringExecution; terms are ORed, expressions ANDed.
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;
  std::vector<NodeSelectorRequirement> match_fields;
  bool operator==(const NodeSelectorTerm&) const = default;
};

// A pod volume backed by a PersistentVolumeClaim: its own (persistentVolumeClaim.claimName) or
// a generic ephemeral volume's (the claim "<pod>-<volume>" that the ephemeral volume controller
// creates). Other volume kinds are not kept.
struct ClaimVolume {
  std::string name;        // the volume's name
  std::string claim_name;  // persistentVolumeClaim.claimName; "" for an ephemeral volume
  bool ephemeral = false;
  bool operator==(const ClaimVolume&) const = default;
};

// spec.resourceClaims[] of a pod (DRA, resource.k8s.io): the pod's name for a claim and the
// claim itself (shared) or the template each pod gets its own claim from.
struct PodClaim {
  std::string name;
  std::string resource_claim_name;
  std::string resource_claim_template_name;
  bool operator==(const PodClaim&) const = default;
};

struct PodSpec {
  std::string scheduler_name;
  std::string node_name;
  std::optional<std::int32_t> priority;
  std::string priority_class_name;
  std::vector<Container> containers;
  std::vector<Container> init_containers;
  std::vector<Toleration> tolerations;
  StringMap node_selector;
  std::vector<NodeSelectorTerm> required_node_affinity;
  // How many required (requiredDuringSchedulingIgnoredDuringExecution) pod affinity and
  // anti-affinity terms the pod has; the terms themselves are not read.
  std::size_t required_pod_affinity = 0;
  std::size_t required_pod_anti_affinity = 0;
  ResourceList overhead;
  ResourceRequirements resources;  // pod-level spec.resources (cpu, memory, hugepages-*)
  // spec.schedulingGates[].name (GA in Kubernetes 1.30): no scheduler may place the pod while
  // any is left.
  std::vector<std::string> scheduling_gates;
  // spec.schedulingGroup.podGroupName (Kubernetes 1.36, feature GenericWorkload): the
  // scheduling.k8s.io/v1alpha2 PodGroup of the Workload API the pod belongs to; "" when unset.
  std::string scheduling_group;
  std::vector<ClaimVolume> claim_volumes;  // spec.volumes backed by claims
  std::vector<PodClaim> resource_claims;   // spec.resourceClaims (DRA)
  bool operator==(const PodSpec&) const = default;
};

struct PodStatus {
  std::string phase;  // Pending, Running, Succeeded, Failed, Unknown
  std::vector<Condition> conditions;
  std::string reason;
  std::string message;
  std::string nominated_node_name;
  // status.resourceClaimStatuses: the pod's claim name -> the claim the resourceclaim controller
  // made from its template.
  StringMap resource_claim_statuses;
  bool operator==(const PodStatus&) const = default;
};

struct Pod {
  ObjectMeta metadata;
  PodSpec spec;
  PodStatus status;
  bool operator==(const Pod&) const = default;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;      // NoSchedule, PreferNoSchedule, NoExecute
  std::string time_added;  // timeAdded (NoExecute taints), RFC 3339; "" when unset
  bool operator==(const Taint&) const = default;
};

// status.addresses[] of a Node.
struct NodeAddress {
  std::string type;  // InternalIP, ExternalIP, Hostname, InternalDNS, ExternalDNS
  std::string address;
  bool operator==(const NodeAddress&) const = default;
};

struct Node {
  ObjectMeta metadata;
  // spec
  bool unschedulable = false;
  std::vector<Taint> taints;
  std::string provider_id;
  // status
  ResourceList capacity;
  ResourceList allocatable;
  std::vector<Condition> conditions;
  std::vector<NodeAddress> addresses;
  bool operator==(const Node&) const = default;
};

struct Namespace {
  ObjectMeta metadata;
  std::string phase;  // Active, Terminating
  bool operator==(const Namespace&) const = default;
};

struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::string field_path;
  bool operator==(const ObjectReference&) const = default;
};

// core/v1 Event.
struct Event {
  ObjectMeta metadata;
  ObjectReference involved_object;
  std::string reason;
  std::string message;
  std::string type;  // Normal, Warning
  std::int32_t count = 0;
  std::string first_timestamp;
  std::string last_timestamp;
  std::string source_component;
  std::string source_host;
  std::string reporting_component;
  std::string reporting_instance;
  std::string action;
  bool operator==(const Event&) const = default;
};

// coordination.k8s.io/v1 Lease. Times are RFC 3339 with microseconds (MicroTime).
struct Lease {
  ObjectMeta metadata;
  std::optional<std::string> holder_identity;
  std::optional<std::int32_t> lease_duration_seconds;
  std::optional<std::string> acquire_time;
  std::optional<std::string> renew_time;
  std::optional<std::int32_t> lease_transitions;
  bool operator==(const Lease&) const = default;
};

// batch/v1 Job: what grouping and status tracking need.
struct Job {
  ObjectMeta metadata;
  std::optional<std::int32_t> parallelism;
  std::optional<std::int32_t> completions;
  std::optional<std::int32_t> backoff_limit;
  std::optional<bool> suspend;
  std::string completion_mode;
  PodSpec template_spec;  // spec.template.spec
  StringMap template_labels;
  StringMap template_annotations;
  std::int32_t active = 0;
  std::int32_t succeeded = 0;
  std::int32_t failed = 0;
  std::vector<Condition> conditions;
  bool operator==(const Job&) const = default;
};

// Any object: the envelope decoded, spec and status kept as raw JSON text so that typed accessors
// (JobSet, LeaderWorkerSet, PodGroup) can read what they need with the codec helpers.
struct GenericObject {
  std::string api_version;
  std::string kind;
  ObjectMeta metadata;
  std::string spec_json;    // "" when absent
  std::string status_json;  // "" when absent
  bool operator==(const GenericObject&) const = default;
};

// metav1.Status, as the apiserver sends with errors and in watch ERROR events.
struct Status {
  std::string status;  // "Success", "Failure"
  std::string message;
  std::string reason;  // "NotFound", "Conflict", "Expired", "Gone", ...
  std::int32_t code = 0;
  bool operator==(const Status&) const = default;
};

// One page of a LIST.
template <typename T>
struct List {
  std::string resource_version;  // metadata.resourceVersion
  std::string continue_token;    // metadata.continue; "" on the last page
  std::optional<std::int64_t> remaining_item_count;
  std::vector<T> items;
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

template <typename T>
struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  T object;       // for kAdded, kModified, kDeleted, kBookmark (only the RV is set then)
  Status status;  // for kError
};

// "ns/name", or "name" for a cluster-scoped object: the cache key, as client-go's
// MetaNamespaceKeyFunc.
inline std::string ObjectKey(const ObjectMeta& m) {
  return m.namespace_.empty() ? m.name : m.namespace_ + "/" + m.name;
}

}  // namespace sb::kube
