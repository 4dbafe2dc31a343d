// SPDX-License-Identifier: Apache-2.0
#include "controllers/node/node_logic.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/names.h"
#include "bridge/translate.h"
#include "kube/codec.h"
#include "kube/quantity.h"

namespace sb::controllers {
namespace {

bool IsOurs(const kube::Taint& t) {
  return t.key == bridge::kManagedNodeTaint || t.key == kSlurmUnavailableTaint;
}

kube::Condition ReadyCondition(const HealthStatus& h) {
  kube::Condition c;
  c.type = std::string(kSlurmNodeReadyCondition);
  c.status = h.health == SlurmHealth::kReady ? "True" : "False";
  c.reason = h.reason;
  c.message = h.message;
  return c;
}

}  // namespace

std::string CordonDrainReason(std::string_view k8s_node) {
  return fmt::format("slurm-bridge: Corresponding Kubernetes node ({}) is unschedulable", k8s_node);
}

std::string CapacityGap(const kube::Node& node, const slurm::NodeInfo& slurm_node) {
  std::vector<std::string> gaps;
  if (auto cpu = node.allocatable.find("cpu");
      cpu != node.allocatable.end() && slurm_node.cpus > 0) {
    Result<std::int64_t> milli = kube::ParseQuantityMilli(cpu->second);
    if (milli && slurm_node.cpus * 1000 > *milli) {
      gaps.push_back(fmt::format("{} CPUs (allocatable cpu {})", slurm_node.cpus, cpu->second));
    }
  }
  if (auto mem = node.allocatable.find("memory");
      mem != node.allocatable.end() && slurm_node.real_memory > 0) {
    Result<std::int64_t> bytes = kube::ParseQuantityValue(mem->second);
    if (bytes && slurm_node.real_memory * (std::int64_t{1} << 20) > *bytes) {
      gaps.push_back(fmt::format("RealMemory {} MiB (allocatable memory {})",
                                 slurm_node.real_memory, mem->second));
    }
  }
  if (gaps.empty()) return "";
  return fmt::format(
      "Slurm counts {} on node {}, more than the kubelet offers: a job Slurm places here may get "
      "pods the kubelet refuses. Set the Slurm node's CPUs/RealMemory (or CoreSpecCount, "
      "MemSpecLimit) to what Kubernetes leaves allocatable",
      fmt::join(gaps, " and "), slurm_node.name);
}

bool SuspiciousShrink(std::size_t known, std::size_t lost) { return lost >= 2 && lost * 2 > known; }

bool IsBridgeOrEmptyReason(std::string_view reason) {
  return reason.empty() || reason.find(kBridgeReasonMarker) != std::string_view::npos;
}

HealthStatus SlurmNodeHealth(const slurm::NodeInfo& info) {
  auto sentence = [&](std::string_view what) {
    return info.reason.empty() ? fmt::format("Slurm node {} is {}", info.name, what) : info.reason;
  };
  if (info.HasState("DOWN")) {
    return {SlurmHealth::kDown, "down", std::string(kReasonSlurmNodeDown), sentence("down"),
            "down"};
  }
  if (info.HasState("FAIL")) {
    return {SlurmHealth::kFailing, "fail", std::string(kReasonSlurmNodeFailing),
            sentence("failing"), "failing"};
  }
  // A drain the bridge made for a cordon mirrors Kubernetes; it is not Slurm's verdict. An
  // empty reason is not the bridge's here: Slurm requires a reason for an administrator's drain,
  // so an empty one is unusual, and reporting it is the safe side.
  if (info.HasState("DRAIN") &&
      (info.reason.empty() || info.reason.find(kBridgeReasonMarker) == std::string::npos)) {
    return {SlurmHealth::kDrained, "drain", std::string(kReasonSlurmNodeDrained),
            sentence("drained"), "drained"};
  }
  return {SlurmHealth::kReady, "", std::string(kReasonSlurmNodeReady),
          fmt::format("Slurm node {} is available", info.name), "available"};
}

NodePlan PlanNode(const kube::Node& node, const slurm::NodeInfo* slurm_node,
                  std::string_view scheduler_name, std::string_view now) {
  NodePlan plan;
  plan.slurm_name = bridge::SlurmNodeName(node);
  plan.is_slurm_node = slurm_node != nullptr;
  const std::string& name = node.metadata.name;

  // Kubernetes -> Slurm (upstream's syncState). Decided first: health is judged on the Slurm
  // state this step leads to, so that a drain or undrain does not flap the condition.
  std::optional<slurm::NodeInfo> after;
  if (slurm_node != nullptr) {
    after = *slurm_node;
    const bool drained = slurm_node->HasState("DRAIN");
    if (node.unschedulable) {
      if (!drained) {
        plan.drain = DrainAction::kDrain;
        plan.slurm_update =
            slurm::NodeUpdate{.state = {"DRAIN"}, .reason = CordonDrainReason(name)};
        plan.drain_event = PlannedEvent{
            .warning = false,
            .reason = std::string(kEventDrained),
            .message = fmt::format("Drained Slurm node {}: Kubernetes node {} is unschedulable",
                                   plan.slurm_name, name)};
        after->state.emplace_back("DRAIN");
        after->reason = plan.slurm_update->reason;
      }
    } else if (drained && IsRegistrationDrainReason(slurm_node->reason)) {
      // Draining an external node for its re-creation or removal: PlanRegistration's.
    } else if (drained) {
      if (IsBridgeOrEmptyReason(slurm_node->reason)) {
        plan.drain = DrainAction::kUndrain;
        plan.slurm_update = slurm::NodeUpdate{.state = {"UNDRAIN"}};
        plan.drain_event = PlannedEvent{
            .warning = false,
            .reason = std::string(kEventUndrained),
            .message = fmt::format("Undrained Slurm node {}: Kubernetes node {} is schedulable",
                                   plan.slurm_name, name)};
        std::erase(after->state, std::string("DRAIN"));
        after->reason.clear();
      } else {
        plan.drain = DrainAction::kKeepAdminDrain;
        plan.drain_event = PlannedEvent{
            .warning = false,
            .reason = std::string(kEventAdminDrainKept),
            .message = fmt::format(
                "Slurm node {} stays drained although Kubernetes node {} is schedulable: its "
                "drain was not made by slurm-bridge (reason: {})",
                plan.slurm_name, name, slurm_node->reason)};
      }
    }
  }
  std::optional<HealthStatus> health;
  if (after) health = SlurmNodeHealth(*after);

  // Taints: drop every taint of ours that is not wanted exactly, then add the missing ones.
  std::vector<kube::Taint> wanted;
  if (health) {
    wanted.push_back({std::string(bridge::kManagedNodeTaint), std::string(scheduler_name),
                      std::string(kManagedNodeEffect)});
    if (health->health != SlurmHealth::kReady) {
      wanted.push_back({std::string(kSlurmUnavailableTaint), health->taint_value,
                        std::string(kSlurmUnavailableEffect)});
    }
  }
  std::vector<kube::Taint> taints;
  std::vector<kube::Taint> kept_ours;
  for (const kube::Taint& t : node.taints) {
    if (!IsOurs(t)) {
      taints.push_back(t);
      continue;
    }
    const bool want = std::ranges::find(wanted, t) != wanted.end();
    if (want && std::ranges::find(kept_ours, t) == kept_ours.end()) {
      kept_ours.push_back(t);
      taints.push_back(t);
    } else {
      plan.taints_removed.push_back(t);
    }
  }
  for (const kube::Taint& t : wanted) {
    if (std::ranges::find(kept_ours, t) == kept_ours.end()) {
      taints.push_back(t);
      plan.taints_added.push_back(t);
    }
  }
  if (!plan.taints_added.empty() || !plan.taints_removed.empty()) plan.taints = std::move(taints);

  // Slurm -> Kubernetes: the SlurmNodeReady condition.
  const kube::Condition* current = kube::FindCondition(node.conditions, kSlurmNodeReadyCondition);
  if (health) {
    kube::Condition want = ReadyCondition(*health);
    const bool same = current != nullptr && current->status == want.status &&
                      current->reason == want.reason && current->message == want.message;
    if (!same) {
      const bool status_changed = current == nullptr || current->status != want.status;
      want.last_transition_time = status_changed || current->last_transition_time.empty()
                                      ? std::string(now)
                                      : current->last_transition_time;
      if (health->health != SlurmHealth::kReady) {
        std::string message = fmt::format("Slurm node {} is {}", plan.slurm_name, health->word);
        if (!after->reason.empty()) message += ": " + after->reason;
        plan.health_event =
            PlannedEvent{.warning = true, .reason = health->reason, .message = std::move(message)};
      } else if (current != nullptr && current->status != "True") {
        plan.health_event = PlannedEvent{
            .warning = false,
            .reason = std::string(kEventSlurmNodeReady),
            .message = fmt::format("Slurm node {} is available again", plan.slurm_name)};
      }
      plan.condition = std::move(want);
    }
  } else if (current != nullptr) {
    plan.remove_condition = true;
  }
  return plan;
}

bool HasExternalNodeLabel(const kube::Node& node) {
  return node.metadata.labels.contains(std::string(kExternalNodeLabel));
}

std::string ExternalNodeComment(std::string_view k8s_node) {
  return fmt::format("{} of Kubernetes node {}", kRegistrationDrainMarker, k8s_node);
}

std::string RegistrationDrainReason(std::string_view k8s_node, std::string_view why) {
  return fmt::format("{}: {}", ExternalNodeComment(k8s_node), why);
}

bool IsRegistrationDrainReason(std::string_view reason) {
  return reason.starts_with(kRegistrationDrainMarker);
}

bool SlurmNodeBusy(const slurm::NodeInfo& info) {
  return info.HasState("ALLOCATED") || info.HasState("MIXED") || info.HasState("COMPLETING");
}

namespace {

// What may go into a node_conf value unquoted: a space or a quote in an annotation would add
// parameters of its own (Gres=, State=) to the line.
bool SafeConfWord(std::string_view s, std::string_view extra) {
  if (s.empty()) return false;
  return std::ranges::all_of(s, [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || extra.find(c) != std::string_view::npos;
  });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::ranges::sort(v);
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// What differs between the Node's wish and the Slurm node, in a way only a re-creation changes.
std::vector<std::string> RecreateDifferences(const ExternalNodeSpec& want,
                                             const slurm::NodeInfo& have) {
  std::vector<std::string> out;
  if (want.cpus != have.cpus) out.push_back(fmt::format("CPUs {} -> {}", have.cpus, want.cpus));
  if (want.real_memory != have.real_memory) {
    out.push_back(fmt::format("RealMemory {} -> {} MiB", have.real_memory, want.real_memory));
  }
  if (std::string gres = ExternalNodeGres(want); gres != have.gres) {
    out.push_back(fmt::format("Gres \"{}\" -> \"{}\"", have.gres, gres));
  }
  if (Sorted(want.partitions) != Sorted(have.features)) {
    out.push_back(fmt::format("features [{}] -> [{}]", fmt::join(have.features, ","),
                              fmt::join(want.partitions, ",")));
  }
  return out;
}

// Drain, wait, delete: the way out of Slurm (for good, or to come back re-created).
void PlanDrainSteps(RegistrationPlan& plan, std::string_view k8s_name,
                    const slurm::NodeInfo& slurm_node, const ExternalNodeSpec* desired) {
  const std::string_view goal = plan.recreate ? "re-create it" : "remove it";
  const bool drained = slurm_node.HasState("DRAIN") && !slurm_node.HasState("UNDRAIN");
  if (!drained) {
    plan.action = RegistrationAction::kDrain;
    plan.update = slurm::NodeUpdate{
        .state = {"DRAIN"},
        .reason = RegistrationDrainReason(
            k8s_name,
            fmt::format("{} ({})", plan.recreate ? "re-creating" : "removing", plan.why))};
    plan.event = PlannedEvent{
        .warning = false,
        .reason = std::string(kEventExternalDraining),
        .message = fmt::format("Draining Slurm external node {} to {} once its jobs end: {}",
                               plan.slurm_name, goal, plan.why)};
    return;
  }
  if (SlurmNodeBusy(slurm_node)) {
    plan.action = RegistrationAction::kWait;
    return;
  }
  plan.action = RegistrationAction::kDelete;
  if (plan.recreate && desired != nullptr) {
    plan.node_conf = ExternalNodeConf(*desired);
    if (!slurm_node.reason.empty() && !IsRegistrationDrainReason(slurm_node.reason)) {
      plan.keep_drain_reason = slurm_node.reason;
    }
    plan.event = PlannedEvent{
        .warning = false,
        .reason = std::string(kEventExternalRecreated),
        .message = fmt::format("Re-created Slurm external node {}: {}", plan.slurm_name, plan.why)};
  } else {
    plan.event = PlannedEvent{
        .warning = false,
        .reason = std::string(kEventExternalRemoved),
        .message = fmt::format("Removed Slurm external node {}: {}", plan.slurm_name, plan.why)};
  }
}

}  // namespace

ExternalNodeSpec DesiredExternalNode(const kube::Node& node) {
  ExternalNodeSpec spec;
  spec.slurm_name = bridge::SlurmNodeName(node);
  const std::string& name = node.metadata.name;

  for (const kube::NodeAddress& a : node.addresses) {
    if (a.type != "InternalIP") continue;
    if (SafeConfWord(a.address, ":")) {
      spec.address = a.address;
      break;
    }
    spec.problems.push_back(fmt::format("InternalIP \"{}\" is not an address", a.address));
  }
  if (spec.address.empty()) {
    // No usable InternalIP: NodeAddr falls back to the node's name, which slurmctld resolves
    // whenever it starts a job there (~10 s of getaddrinfo retries per node when it does not
    // resolve, stalling its scheduler: measured on Slurm 26.05). Said, not refused.
    spec.address = name;
    spec.address_is_name = true;
    spec.problems.push_back(
        "no InternalIP in status.addresses: NodeAddr is the node's name, which slurmctld must "
        "resolve");
  }

  if (auto cpu = node.capacity.find("cpu"); cpu == node.capacity.end()) {
    spec.problems.push_back("no cpu in status.capacity");
  } else if (Result<std::int64_t> milli = kube::ParseQuantityMilli(cpu->second); !milli) {
    spec.problems.push_back(fmt::format("capacity cpu \"{}\" is not a quantity", cpu->second));
  } else {
    spec.cpus = *milli / 1000;
    if (*milli % 1000 != 0) {
      spec.problems.push_back(fmt::format("capacity cpu \"{}\" is fractional: {} CPUs registered",
                                          cpu->second, spec.cpus));
    }
    if (spec.cpus < 1) {
      spec.problems.push_back(fmt::format("capacity cpu \"{}\" is less than 1", cpu->second));
    }
  }
  if (auto mem = node.capacity.find("memory"); mem == node.capacity.end()) {
    spec.problems.push_back("no memory in status.capacity");
  } else if (Result<std::int64_t> bytes = kube::ParseQuantityValue(mem->second); !bytes) {
    spec.problems.push_back(fmt::format("capacity memory \"{}\" is not a quantity", mem->second));
  } else {
    spec.real_memory = *bytes / (std::int64_t{1} << 20);
    if (spec.real_memory < 1) {
      spec.problems.push_back(
          fmt::format("capacity memory \"{}\" is less than 1 MiB", mem->second));
    }
  }
  if (auto gpu = node.capacity.find(std::string(kGpuResource)); gpu != node.capacity.end()) {
    Result<std::int64_t> n = kube::ParseQuantityValue(gpu->second);
    if (!n || *n < 0) {
      spec.problems.push_back(fmt::format("capacity {} \"{}\" is not a count: no GPUs registered",
                                          kGpuResource, gpu->second));
    } else {
      spec.gpus = *n;
    }
  }
  spec.valid = spec.cpus >= 1 && spec.real_memory >= 1;

  const auto& annotations = node.metadata.annotations;
  if (auto it = annotations.find(std::string(kExternalNodePartitionsAnnotation));
      it != annotations.end()) {
    std::string_view rest = it->second;
    while (true) {
      const std::size_t comma = rest.find(',');
      const std::string_view part = Trim(rest.substr(0, comma));
      if (!part.empty()) {
        if (!SafeConfWord(part, "")) {
          spec.problems.push_back(
              fmt::format("partition \"{}\" of {} is not a partition name: left out", part,
                          kExternalNodePartitionsAnnotation));
        } else if (std::ranges::find(spec.partitions, part) == spec.partitions.end()) {
          spec.partitions.emplace_back(part);
        }
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (auto it = annotations.find(std::string(kTopologyAnnotation)); it != annotations.end()) {
    const std::string_view topo = Trim(it->second);
    if (topo.empty()) {
      // Absent and empty say the same: no topology.
    } else if (SafeConfWord(topo, ":,")) {
      spec.topology = std::string(topo);
    } else {
      spec.problems.push_back(fmt::format("{} \"{}\" is not a topology spec: left out",
                                          kTopologyAnnotation, it->second));
    }
  }
  return spec;
}

std::string ExternalNodeGres(const ExternalNodeSpec& spec) {
  return spec.gpus > 0 ? fmt::format("gpu:{}", spec.gpus) : std::string();
}

std::string ExternalNodeConf(const ExternalNodeSpec& spec) {
  std::string conf = fmt::format("NodeName={} NodeAddr={} CPUs={} RealMemory={} State=External",
                                 spec.slurm_name, spec.address, spec.cpus, spec.real_memory);
  if (!spec.partitions.empty()) conf += fmt::format(" Feature={}", fmt::join(spec.partitions, ","));
  if (!spec.topology.empty()) conf += fmt::format(" Topology={}", spec.topology);
  if (spec.gpus > 0) {
    // Slurm 26.05 drops a GPU without a device file ("Ignoring file-less GPU") and refuses the
    // node; the files are nominal (no slurmd reads them: the kubelet's device plugin picks the
    // devices, as upstream says for nvidia.com/gpu).
    const std::string files = spec.gpus == 1 ? std::string("/dev/nvidia0")
                                             : fmt::format("/dev/nvidia[0-{}]", spec.gpus - 1);
    conf += fmt::format(" Gres=gpu:{} GresConf=\"count={},name=gpu,file={}\"", spec.gpus, spec.gpus,
                        files);
  }
  return conf;
}

bool NeedsPartitionCheck(const ExternalNodeSpec& desired, const slurm::NodeInfo* slurm_node) {
  if (!desired.valid || desired.partitions.empty()) return false;
  if (slurm_node == nullptr) return true;
  return slurm_node->HasState("EXTERNAL") &&
         Sorted(desired.partitions) != Sorted(slurm_node->features);
}

RegistrationPlan PlanRegistration(std::string_view k8s_name, bool deleted,
                                  const ExternalNodeSpec* desired,
                                  const slurm::NodeInfo* slurm_node) {
  RegistrationPlan plan;
  if (desired != nullptr) {
    plan.slurm_name = desired->slurm_name;
    if (!desired->problems.empty()) {
      plan.warning =
          PlannedEvent{.warning = true,
                       .reason = std::string(kEventExternalInvalid),
                       .message = fmt::format("External node {}: {}{}", k8s_name,
                                              fmt::join(desired->problems, "; "),
                                              desired->valid ? "" : "; not registered in Slurm")};
    }
    if (slurm_node == nullptr) {
      if (!desired->valid) return plan;
      plan.action = RegistrationAction::kCreate;
      plan.node_conf = ExternalNodeConf(*desired);
      plan.event = PlannedEvent{
          .warning = false,
          .reason = std::string(kEventExternalRegistered),
          .message = fmt::format(
              "Registered Slurm external node {} (CPUs={} RealMemory={} features [{}]{}{})",
              plan.slurm_name, desired->cpus, desired->real_memory,
              fmt::join(desired->partitions, ","), desired->gpus > 0 ? " Gres=" : "",
              ExternalNodeGres(*desired))};
      return plan;
    }
    if (!slurm_node->HasState("EXTERNAL")) {
      plan.action = RegistrationAction::kIgnored;
      plan.warning = PlannedEvent{
          .warning = true,
          .reason = std::string(kEventExternalNotExternal),
          .message = fmt::format(
              "Slurm node {} is not an external node: label {} ignored (slurm-bridge never "
              "re-creates or deletes a Slurm node that is not external)",
              plan.slurm_name, kExternalNodeLabel)};
      return plan;
    }
    // Only an external node the bridge registered for this Node (its mark) is updated, drained or
    // re-created: Node labels are the kubelet's to write, so a labelled Node must not take over
    // an external node registered by someone else or for another Node (review R-6).
    if (slurm_node->comment != ExternalNodeComment(k8s_name)) {
      plan.action = RegistrationAction::kIgnored;
      plan.warning = PlannedEvent{
          .warning = true,
          .reason = std::string(kEventExternalNotOurs),
          .message = fmt::format(
              "Slurm external node {} was not registered by slurm-bridge for this Node (its "
              "comment is \"{}\"): left alone; delete it in Slurm (scontrol delete nodename={}) "
              "to have it registered for this Node",
              plan.slurm_name, slurm_node->comment, plan.slurm_name)};
      return plan;
    }
    if (!desired->valid) return plan;  // the Slurm node stays as it is; the warning says why
    std::vector<std::string> diffs = RecreateDifferences(*desired, *slurm_node);
    if (!diffs.empty()) {
      plan.recreate = true;
      plan.why = fmt::format("{}", fmt::join(diffs, ", "));
      PlanDrainSteps(plan, k8s_name, *slurm_node, desired);
      return plan;
    }
    // Registered as wanted: what can change in place.
    slurm::NodeUpdate update;
    std::vector<std::string> changes;
    if (desired->topology != slurm_node->topology) {
      update.topology_str = desired->topology;
      changes.push_back(
          fmt::format("topology \"{}\" -> \"{}\"", slurm_node->topology, desired->topology));
    }
    if (slurm_node->HasState("DRAIN") && IsRegistrationDrainReason(slurm_node->reason)) {
      update.state = {"UNDRAIN"};
      changes.emplace_back("undrained (no longer re-created or removed)");
    }
    if (!changes.empty()) {
      plan.action = RegistrationAction::kUpdate;
      plan.update = std::move(update);
      plan.why = fmt::format("{}", fmt::join(changes, ", "));
      plan.event = PlannedEvent{
          .warning = false,
          .reason = std::string(kEventExternalUpdated),
          .message = fmt::format("Updated Slurm external node {}: {}", plan.slurm_name, plan.why)};
    }
    return plan;
  }

  // Not labelled, or deleted: only an external node this bridge registered for this Node goes.
  if (slurm_node == nullptr || !slurm_node->HasState("EXTERNAL") ||
      slurm_node->comment != ExternalNodeComment(k8s_name)) {
    return plan;
  }
  plan.slurm_name = slurm_node->name;
  plan.remove = true;
  plan.why =
      deleted ? fmt::format("Kubernetes node {} was deleted", k8s_name)
              : fmt::format("Kubernetes node {} lost the label {}", k8s_name, kExternalNodeLabel);
  PlanDrainSteps(plan, k8s_name, *slurm_node, nullptr);
  return plan;
}

std::string TaintsPatch(const std::vector<kube::Taint>& taints, std::string_view resource_version) {
  std::string list;
  for (const kube::Taint& t : taints) {
    if (!list.empty()) list += ',';
    list += fmt::format("{{\"key\":{}", kube::JsonQuote(t.key));
    if (!t.value.empty()) list += fmt::format(",\"value\":{}", kube::JsonQuote(t.value));
    list += fmt::format(",\"effect\":{}", kube::JsonQuote(t.effect));
    // Kept, so that tolerationSeconds of other controllers' NoExecute taints still count from
    // when they were added.
    if (!t.time_added.empty())
      list += fmt::format(",\"timeAdded\":{}", kube::JsonQuote(t.time_added));
    list += '}';
  }
  return fmt::format(R"({{"metadata":{{"resourceVersion":{}}},"spec":{{"taints":[{}]}}}})",
                     kube::JsonQuote(resource_version), list);
}

std::string ConditionPatch(const kube::Condition& c, std::string_view heartbeat) {
  return fmt::format(
      R"({{"status":{{"conditions":[{{"type":{},"status":{},"reason":{},"message":{},)"
      R"("lastTransitionTime":{},"lastHeartbeatTime":{}}}]}}}})",
      kube::JsonQuote(c.type), kube::JsonQuote(c.status), kube::JsonQuote(c.reason),
      kube::JsonQuote(c.message), kube::JsonQuote(c.last_transition_time),
      kube::JsonQuote(heartbeat));
}

std::string RemoveConditionPatch(std::string_view type) {
  return fmt::format(R"({{"status":{{"conditions":[{{"$patch":"delete","type":{}}}]}}}})",
                     kube::JsonQuote(type));
}

GresPlan PlanGresCondition(const kube::Node& node, const slurm::NodeInfo* slurm_node,
                           const std::vector<bridge::ResourceSliceInfo>* slices,
                           const std::vector<bridge::DeviceProfile>& profiles,
                           std::string_view now) {
  GresPlan plan;
  const kube::Condition* current = kube::FindCondition(node.conditions, kGresCompatibleCondition);
  if (slurm_node == nullptr || profiles.empty()) {
    plan.remove_condition = current != nullptr;
    return plan;
  }
  if (slices == nullptr) return plan;
  kube::Condition want{.type = std::string(kGresCompatibleCondition)};
  Result<bridge::NodeInventory> inventory =
      bridge::BuildNodeInventory(node.metadata.name, *slices, profiles);
  if (!inventory) {
    want.status = "Unknown";
    want.reason = std::string(kReasonGresVerificationError);
    want.message = "Could not verify Slurm GRES compatibility: " + inventory.error().message;
  } else {
    bridge::GresAgreement agreement = bridge::CheckGresAgreement(*inventory, *slurm_node, profiles);
    want.status = agreement.agrees ? "True" : "False";
    want.reason = std::string(agreement.agrees ? kReasonGresCompatible : kReasonGresIncompatible);
    want.message = std::move(agreement.reason);
  }
  if (current != nullptr && current->status == want.status && current->reason == want.reason &&
      current->message == want.message) {
    return plan;
  }
  const bool transition = current == nullptr || current->status != want.status;
  want.last_transition_time = transition ? std::string(now) : current->last_transition_time;
  if (transition && want.status == "False") {
    plan.event = PlannedEvent{
        .warning = true,
        .reason = std::string(kReasonGresIncompatible),
        .message = fmt::format("the ResourceSlices of node {} disagree with the GRES of Slurm node "
                               "{}: {}",
                               node.metadata.name, slurm_node->name, want.message)};
  }
  plan.condition = std::move(want);
  return plan;
}

std::vector<std::string> ResourceSliceNodes(const kube::GenericObject& slice) {
  std::vector<std::string> out;
  Result<bridge::ResourceSliceInfo> info = bridge::ParseResourceSlice(slice);
  if (!info) return out;
  if (!info->node_name.empty()) out.push_back(info->node_name);
  if (info->per_device_node_selection) {
    for (const bridge::SliceDevice& d : info->devices) {
      if (!d.node_name.empty()) out.push_back(d.node_name);
    }
  }
  std::ranges::sort(out);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace sb::controllers
