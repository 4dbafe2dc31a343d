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

std::string RemoveConditionPatch() {
  return fmt::format(R"({{"status":{{"conditions":[{{"$patch":"delete","type":{}}}]}}}})",
                     kube::JsonQuote(kSlurmNodeReadyCondition));
}

}  // namespace sb::controllers
