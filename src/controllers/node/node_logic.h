// SPDX-License-Identifier: Apache-2.0
//
// controllers/node/node_logic.h
//
// The node controller's decisions, as pure functions: given a Kubernetes Node, what Slurm says
// about the node it maps to (or nothing: not a Slurm node) and the scheduler name, what should
// change. No I/O, no clock (the time is an argument), no state between calls; node_controller.h
// does the writes.
//
// What is decided (upstream's syncTaint and syncState, plus Slurm -> Kubernetes health):
//   1. Taints. A Slurm node carries the bridge taint slinky.slurm.net/managed-node=<scheduler
//      name>:NoExecute; any other node loses it. A Slurm node that Slurm cannot use (DOWN, the
//      DRAIN flag set by someone other than the bridge, the FAIL flag) also carries
//      slinky.slurm.net/slurm-node-unavailable=<down|drain|fail>:NoSchedule; it loses that taint
//      once Slurm clears, and so does every non-Slurm node. Other taints are kept as they are, in
//      their order; the full list is written only when it differs.
//   2. Kubernetes -> Slurm. A cordoned node (spec.unschedulable) gets its Slurm node drained with
//      the reason "slurm-bridge: Corresponding Kubernetes node (<node>) is unschedulable"
//      (upstream's words), unless Slurm has it drained already. An uncordoned node gets it
//      undrained, but only when the drain's reason is empty or one the bridge wrote (contains
//      "slurm-bridge:"): an administrator's drain is kept. A drain for the re-creation or
//      removal of an external node (4.) is left to that step.
//   3. Slurm -> Kubernetes. Every Slurm node has the condition SlurmNodeReady: False with reason
//      SlurmNodeDown / SlurmNodeDrained / SlurmNodeFailing and Slurm's reason as message, or
//      True with reason SlurmNodeReady. The bridge's own cordon drain counts as ready (the node
//      is cordoned in Kubernetes already). lastTransitionTime changes only when the status
//      changes, as kubelet and the node lifecycle controller do. A node that is no longer a
//      Slurm node loses the condition.
//
//   4. External nodes (upstream's syncNodeRegistration, issue #26), PlanRegistration. A Node
//      labelled scheduler.slinky.slurm.net/external-node (presence) is registered as a Slurm
//      external node (no slurmd; the bridge's placeholder jobs run on it): POST /new/node/ with
//      ExternalNodeConf: NodeName=<SlurmNodeName> NodeAddr=<InternalIP> CPUs= RealMemory= (MiB,
//      from status.capacity, as upstream) State=External, Feature=<the partitions of the
//      annotation scheduler.slinky.slurm.net/external-node-partitions that exist in Slurm>,
//      Topology=<annotation topology.slinky.slurm.net/spec>, and for an nvidia.com/gpu capacity
//      N: Gres=gpu:N with a GresConf of N device files (Slurm 26.05 refuses a file-less GPU).
//      The bridge then marks the Slurm node as its own: comment ExternalNodeComment(node).
//      - A registered node whose CPUs, RealMemory, GRES or features (partitions) differ from the
//        Node is re-created: drained (reason "slurm-bridge: external node of Kubernetes node
//        <node>: ..."), and once drained and empty (DRAIN, not ALLOCATED/MIXED/COMPLETING)
//        deleted and registered again. Features are part of this: Slurm 26.05 keeps a node in
//        the NodeSet partitions it had at creation when its features are updated (measured), so
//        an in-place update would not move it. A different topology is updated in place
//        (topology_str). A drain of an earlier re-creation or removal that is no longer wanted
//        (the label came back, the capacity went back) is undrained.
//      - A Node that is not labelled (any more), or was deleted, whose Slurm node is external
//        AND carries the bridge's mark for that Node is drained the same way and then deleted.
//        External nodes the bridge did not register for that very Node (no mark, or another
//        Node's: `scontrol create`, a benchmark's, upstream's) and every non-external node are
//        never updated, drained, deleted or re-created by this step; a labelled Node that maps
//        to one gets a Warning (review R-6: labels are the kubelet's to write).
//      - A labelled Node whose Slurm node is not external is left alone (one Warning).
//      - Bad input (no cpu or memory capacity, a malformed partition or topology, a fractional
//        cpu) is reported (Warning) and never crashes; a Node without usable cpu/memory is not
//        registered.
//      The cordon logic (2.) leaves drains of this step alone (IsRegistrationDrainReason).
//
//   5. DRA inventory vs Slurm's GRES (upstream 1.3's node condition, gres_condition.h),
//      PlanGresCondition. With device profiles (config deviceProfiles) every Slurm node gets
//      SlinkySlurmGRESCompatible from its ResourceSlices (bridge::BuildNodeInventory) and its
//      Slurm node (bridge::CheckGresAgreement): True (SlurmGRESCompatible), also for a node
//      without ResourceSlices (nothing to disagree, as upstream's hybrid nodes); False
//      (IncompatibleSlurmGRES) with a Warning Event when it turns False; Unknown
//      (SlurmGRESVerificationError) when the inventory cannot be built. The message says why
//      (GresAgreement.reason). A node that is no longer a Slurm node, or every node once the
//      profiles are gone, loses the condition. Unknown slices (resource.k8s.io/v1 not served,
//      not listed yet) change nothing.
//
// Thread model: pure functions over plain values.
//
// Example:
//   NodePlan plan = PlanNode(node, slurm_info ? &*slurm_info : nullptr, "slurm-bridge-scheduler",
//                            FormatTime(clock.WallNow()));
//   if (plan.taints) { ... PATCH TaintsPatch(*plan.taints, node.metadata.resource_version) ... }
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/config.h"
#include "bridge/dra/gres_agreement.h"
#include "bridge/dra/inventory.h"
#include "bridge/gres_condition.h"
#include "kube/types.h"
#include "slurm/types.h"

namespace sb::controllers {

// The GRES condition's names live in bridge/ (the scheduler reads the condition too).
using bridge::GresIncompatible;
using bridge::kGresCompatibleCondition;
using bridge::kReasonGresCompatible;
using bridge::kReasonGresIncompatible;
using bridge::kReasonGresVerificationError;

// Taint key set on Slurm nodes that Slurm will not run jobs on (ours, beyond upstream). The
// value is the Slurm state in lower case ("down", "drain", "fail"), the effect NoSchedule: new
// pods of any scheduler stay away, running pods stay.
inline constexpr std::string_view kSlurmUnavailableTaint =
    "slinky.slurm.net/slurm-node-unavailable";
inline constexpr std::string_view kSlurmUnavailableEffect = "NoSchedule";
// The effect of the bridge's managed-node taint (bridge::kManagedNodeTaint), as upstream.
inline constexpr std::string_view kManagedNodeEffect = "NoExecute";

// Node condition type reflecting Slurm's view of the node (ours, beyond upstream).
inline constexpr std::string_view kSlurmNodeReadyCondition = "SlurmNodeReady";
// Its reasons: True, and False for DOWN, DRAIN (drained or draining) and FAIL (failing).
inline constexpr std::string_view kReasonSlurmNodeReady = "SlurmNodeReady";
inline constexpr std::string_view kReasonSlurmNodeDown = "SlurmNodeDown";
inline constexpr std::string_view kReasonSlurmNodeDrained = "SlurmNodeDrained";
inline constexpr std::string_view kReasonSlurmNodeFailing = "SlurmNodeFailing";

// Marks a Slurm drain reason as written by the bridge (upstream's test: strings.Contains).
inline constexpr std::string_view kBridgeReasonMarker = "slurm-bridge:";

// Event reasons (on the Node).
inline constexpr std::string_view kEventDrained = "SlurmNodeDrained";
inline constexpr std::string_view kEventUndrained = "SlurmNodeUndrained";
inline constexpr std::string_view kEventAdminDrainKept = "SlurmNodeDrainKept";
inline constexpr std::string_view kEventSlurmNodeReady = "SlurmNodeReady";

// "slurm-bridge: Corresponding Kubernetes node (<k8s_node>) is unschedulable".
[[nodiscard]] std::string CordonDrainReason(std::string_view k8s_node);
// True when `reason` is empty or was written by the bridge.
[[nodiscard]] bool IsBridgeOrEmptyReason(std::string_view reason);

// N-13: what Slurm counts on a node beyond what the kubelet offers (allocatable: capacity less
// the system and kube reservations): Slurm may then place jobs whose pods the kubelet refuses
// (OutOfcpu, OutOfmemory). A message naming both, or "" when Slurm's CPUs and RealMemory fit
// in the node's allocatable cpu and memory (or the node does not say).
[[nodiscard]] std::string CapacityGap(const kube::Node& node, const slurm::NodeInfo& slurm_node);
inline constexpr std::string_view kEventCapacityGap = "SlurmCapacityExceedsAllocatable";

// Whether a successful Slurm node list that no longer has `lost` of the `known` Slurm nodes is
// too sudden to act on at once (N-18): more than half of them, and at least 2. A token whose
// view hides nodes (PrivateData=nodes) or a slurmrestd answering `nodes: []` would otherwise
// strip the managed-node taint from every node, and default-scheduler pods would land on them.
[[nodiscard]] bool SuspiciousShrink(std::size_t known, std::size_t lost);
// How many successive lists must agree before such a shrink is believed.
inline constexpr int kShrinkConfirmations = 3;

// Slurm's view of one node, as the controller reports it.
enum class SlurmHealth { kReady, kDown, kDrained, kFailing };

struct HealthStatus {
  SlurmHealth health = SlurmHealth::kReady;
  std::string taint_value;  // "down", "drain", "fail"; "" when ready
  std::string reason;       // the condition reason (kReasonSlurmNode*)
  std::string message;      // Slurm's reason, or a sentence when Slurm gives none
  std::string word;         // "down", "failing", "drained", "available"
  bool operator==(const HealthStatus&) const = default;
};

// DOWN wins over FAIL, FAIL over DRAIN. A DRAIN whose reason the bridge wrote is ready.
// Other flags (NOT_RESPONDING, POWERED_DOWN, MAINTENANCE, ...) do not count.
[[nodiscard]] HealthStatus SlurmNodeHealth(const slurm::NodeInfo& info);

enum class DrainAction {
  kNone,
  kDrain,           // cordoned, Slurm node not drained: DRAIN with CordonDrainReason
  kUndrain,         // schedulable, Slurm node drained by the bridge (or without reason)
  kKeepAdminDrain,  // schedulable, Slurm node drained by someone else: nothing sent
};

// An Event to record on the Node once the write it describes succeeded.
struct PlannedEvent {
  bool warning = false;
  std::string reason;
  std::string message;
  bool operator==(const PlannedEvent&) const = default;
};

struct NodePlan {
  std::string slurm_name;      // bridge::SlurmNodeName(node)
  bool is_slurm_node = false;  // Slurm knows slurm_name
  // The node's full new taint list; nullopt when it is right already.
  std::optional<std::vector<kube::Taint>> taints;
  std::vector<kube::Taint> taints_added;    // for counters and logs
  std::vector<kube::Taint> taints_removed;  // for counters and logs
  DrainAction drain = DrainAction::kNone;
  std::optional<slurm::NodeUpdate> slurm_update;  // for kDrain and kUndrain
  // After slurm_update succeeded; for kKeepAdminDrain, when the controller saw the uncordon.
  std::optional<PlannedEvent> drain_event;
  // The SlurmNodeReady condition to write; nullopt when it is right already.
  std::optional<kube::Condition> condition;
  bool remove_condition = false;             // not a Slurm node, but has the condition
  std::optional<PlannedEvent> health_event;  // after the condition write: status changed
};

// Decides what to change for `node`. The taints and the condition are judged on the Slurm state
// the planned drain or undrain leads to. `slurm_node` is what Slurm says about SlurmNodeName(node),
// or null when Slurm does not know it. `now` (RFC 3339) becomes lastTransitionTime when the
// condition's status changes.
[[nodiscard]] NodePlan PlanNode(const kube::Node& node, const slurm::NodeInfo* slurm_node,
                                std::string_view scheduler_name, std::string_view now);

// --- External nodes (4.) ------------------------------------------------------------------

// The label (presence) that makes a Node a Slurm external node, and its annotations.
inline constexpr std::string_view kExternalNodeLabel = "scheduler.slinky.slurm.net/external-node";
inline constexpr std::string_view kExternalNodePartitionsAnnotation =
    "scheduler.slinky.slurm.net/external-node-partitions";
inline constexpr std::string_view kTopologyAnnotation = "topology.slinky.slurm.net/spec";
// The device-plugin resource counted as Slurm GRES gpu.
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
// Drain reasons of re-creation and removal start with this (and so contain "slurm-bridge:").
inline constexpr std::string_view kRegistrationDrainMarker = "slurm-bridge: external node";

// Event reasons (on the Node).
inline constexpr std::string_view kEventExternalRegistered = "SlurmExternalNodeRegistered";
inline constexpr std::string_view kEventExternalUpdated = "SlurmExternalNodeUpdated";
inline constexpr std::string_view kEventExternalDraining = "SlurmExternalNodeDraining";
inline constexpr std::string_view kEventExternalRecreated = "SlurmExternalNodeRecreated";
inline constexpr std::string_view kEventExternalRemoved = "SlurmExternalNodeRemoved";
inline constexpr std::string_view kEventExternalInvalid = "SlurmExternalNodeInvalid";  // Warning
inline constexpr std::string_view kEventExternalNotExternal =
    "SlurmNodeNotExternal";  // Warning: labelled, but the Slurm node has a slurmd
inline constexpr std::string_view kEventExternalFailed = "SlurmExternalNodeFailed";  // Warning
// Warning: labelled, but the external Slurm node is not one the bridge registered for this Node.
inline constexpr std::string_view kEventExternalNotOurs = "SlurmExternalNodeNotOurs";

[[nodiscard]] bool HasExternalNodeLabel(const kube::Node& node);
// "slurm-bridge: external node of Kubernetes node <k8s_node>": the mark (Slurm node comment)
// of the external nodes the bridge registered.
[[nodiscard]] std::string ExternalNodeComment(std::string_view k8s_node);
// "slurm-bridge: external node of Kubernetes node <k8s_node>: <why>".
[[nodiscard]] std::string RegistrationDrainReason(std::string_view k8s_node, std::string_view why);
[[nodiscard]] bool IsRegistrationDrainReason(std::string_view reason);
// ALLOCATED, MIXED or COMPLETING: jobs still hold (part of) the node.
[[nodiscard]] bool SlurmNodeBusy(const slurm::NodeInfo& info);

// What a labelled Node asks of Slurm.
struct ExternalNodeSpec {
  std::string slurm_name;        // bridge::SlurmNodeName(node)
  std::string address;           // status.addresses InternalIP; else the node's name
  bool address_is_name = false;  // no InternalIP: slurmctld will resolve the name
  std::int64_t cpus = 0;         // whole CPUs of capacity.cpu
  std::int64_t real_memory = 0;  // MiB of capacity.memory
  std::int64_t gpus = 0;         // capacity nvidia.com/gpu
  // The partitions annotation, split at commas, trimmed, without empty and duplicate entries
  // and without malformed names (reported in `problems`), in its order. The controller drops
  // those Slurm does not know before planning.
  std::vector<std::string> partitions;
  std::string topology;               // the topology annotation; "" when absent or malformed
  bool valid = false;                 // cpus >= 1 and real_memory >= 1: can be registered
  std::vector<std::string> problems;  // bad input, one sentence each (for a Warning Event)
  bool operator==(const ExternalNodeSpec&) const = default;
};
[[nodiscard]] ExternalNodeSpec DesiredExternalNode(const kube::Node& node);
// "gpu:<n>", or "" for no GPUs: what Slurm reports as the node's gres.
[[nodiscard]] std::string ExternalNodeGres(const ExternalNodeSpec& spec);
// The node_conf of POST /new/node/ for `spec` (its partitions become the features), e.g.
// "NodeName=ext-1 NodeAddr=10.0.0.7 CPUs=8 RealMemory=16384 State=External Feature=ext
// Gres=gpu:2 GresConf=\"count=2,name=gpu,file=/dev/nvidia[0-1]\"".
[[nodiscard]] std::string ExternalNodeConf(const ExternalNodeSpec& spec);

enum class RegistrationAction {
  kNone,     // nothing to do (or nothing the bridge may do)
  kCreate,   // POST /new/node/ node_conf, then mark it (comment)
  kUpdate,   // POST /node/{name} `update` (topology, mark, undrain of our own drain)
  kDrain,    // POST /node/{name} `update`: DRAIN for a re-creation or removal
  kWait,     // drained, jobs still on it: wait for them to end
  kDelete,   // DELETE /node/{name}; then, when `recreate`, kCreate
  kIgnored,  // labelled, but the Slurm node is not external: left alone (`warning`)
};

struct RegistrationPlan {
  RegistrationAction action = RegistrationAction::kNone;
  std::string slurm_name;
  bool recreate = false;  // kDrain / kWait / kDelete on the way to registering it again
  bool remove = false;    // ... on the way to removing it
  std::string why;        // what differs ("CPUs 4 -> 8"), or why it goes
  std::optional<std::string> node_conf;     // kCreate, and kDelete when recreate
  std::optional<slurm::NodeUpdate> update;  // kUpdate, kDrain
  // kDelete when recreate: an administrator's (or cordon's) drain to put back on the new node.
  std::string keep_drain_reason;
  std::optional<PlannedEvent> event;    // after the action succeeded
  std::optional<PlannedEvent> warning;  // bad input or kIgnored: said when it changes
};

// Whether the partitions of `desired` must be checked against Slurm (GET /partition/{name})
// before PlanRegistration: the node is to be created, or its features differ. Never for a Slurm
// node that is not external.
[[nodiscard]] bool NeedsPartitionCheck(const ExternalNodeSpec& desired,
                                       const slurm::NodeInfo* slurm_node);

// Decides the registration step for the Kubernetes node `k8s_name`. `desired` is
// DesiredExternalNode(node) with the partitions Slurm does not know removed (and said in its
// problems); null when the node is not labelled, or was deleted (`deleted`). `slurm_node` is
// what Slurm says about its Slurm name, null when Slurm does not know it.
[[nodiscard]] RegistrationPlan PlanRegistration(std::string_view k8s_name, bool deleted,
                                                const ExternalNodeSpec* desired,
                                                const slurm::NodeInfo* slurm_node);

// Request bodies.
// JSON merge patch of spec.taints with metadata.resourceVersion (a concurrent change answers
// 409): {"metadata":{"resourceVersion":"7"},"spec":{"taints":[{"key":..,"value":..,"effect":..}]}}.
[[nodiscard]] std::string TaintsPatch(const std::vector<kube::Taint>& taints,
                                      std::string_view resource_version);
// Strategic merge patch of nodes/{name}/status: conditions merge by type, so only ours changes.
// `heartbeat` becomes lastHeartbeatTime (the time of this write).
[[nodiscard]] std::string ConditionPatch(const kube::Condition& condition,
                                         std::string_view heartbeat);
// Strategic merge patch that deletes our condition `type` ({"$patch":"delete"} by type).
[[nodiscard]] std::string RemoveConditionPatch(std::string_view type = kSlurmNodeReadyCondition);

// --- DRA inventory vs Slurm's GRES (5.) -----------------------------------------------------

struct GresPlan {
  // The SlinkySlurmGRESCompatible condition to write; nullopt when it is right already.
  std::optional<kube::Condition> condition;
  bool remove_condition = false;      // not judged any more, but has the condition
  std::optional<PlannedEvent> event;  // Warning, after the write: it turned False
};

// Decides the condition of `node`. `slurm_node`: what Slurm says about SlurmNodeName(node), null
// when it is not a Slurm node. `slices`: ResourceSlices that may belong to the node
// (BuildNodeInventory picks the node's), null when they are not known: nothing changes then.
// `now` (RFC 3339) becomes lastTransitionTime when the status changes.
[[nodiscard]] GresPlan PlanGresCondition(const kube::Node& node, const slurm::NodeInfo* slurm_node,
                                         const std::vector<bridge::ResourceSliceInfo>* slices,
                                         const std::vector<bridge::DeviceProfile>& profiles,
                                         std::string_view now);

// The Kubernetes nodes a ResourceSlice is local to: spec.nodeName, or its devices' nodeName
// under perDeviceNodeSelection (sorted, unique); none for a malformed slice or a pool shared
// through allNodes or a nodeSelector.
[[nodiscard]] std::vector<std::string> ResourceSliceNodes(const kube::GenericObject& slice);

}  // namespace sb::controllers
