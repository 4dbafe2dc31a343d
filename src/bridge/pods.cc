// SPDX-License-Identifier: Apache-2.0
#include "bridge/pods.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/names.h"
#include "kube/codec.h"

namespace sb::bridge {

bool JobEnded(std::string_view s) {
  const JobPhase p = PhaseOf(s);
  return p == JobPhase::kEnded || p == JobPhase::kGone;
}

JobPhase PhaseOf(std::string_view s) {
  if (s.empty()) return JobPhase::kUnknown;
  if (s == "PENDING") return JobPhase::kPending;
  if (s == "RUNNING") return JobPhase::kRunning;
  if (s == "COMPLETING") return JobPhase::kEnding;
  if (s == "GONE") return JobPhase::kGone;
  if (s == "COMPLETED" || s == "CANCELLED" || s == "FAILED" || s == "TIMEOUT" || s == "NODE_FAIL" ||
      s == "PREEMPTED" || s == "BOOT_FAIL" || s == "DEADLINE" || s == "OUT_OF_MEMORY") {
    return JobPhase::kEnded;
  }
  return JobPhase::kOther;
}

bool PodFinished(const kube::Pod& pod) {
  return pod.status.phase == "Succeeded" || pod.status.phase == "Failed";
}

bool HasFinalizer(const kube::Pod& pod) {
  return std::ranges::find(pod.metadata.finalizers, kFinalizer) != pod.metadata.finalizers.end();
}

bool ToleratesManagedNode(std::string_view key, std::string_view op, std::string_view value,
                          std::string_view effect, std::string_view scheduler) {
  if (!effect.empty() && effect != kManagedNodeTaintEffect) return false;
  if (op == "Exists") return key.empty() || key == kManagedNodeTaint;
  return key == kManagedNodeTaint && value == scheduler;
}

bool ToleratesManagedNode(const kube::Pod& pod, std::string_view scheduler) {
  return std::ranges::any_of(pod.spec.tolerations, [&](const kube::Toleration& t) {
    return ToleratesManagedNode(t.key, t.operator_, t.value, t.effect, scheduler);
  });
}

std::string ManagedNodeTolerationJson(std::string_view scheduler) {
  return fmt::format(R"({{"key":{},"operator":"Equal","value":{},"effect":{}}})",
                     kube::JsonQuote(kManagedNodeTaint), kube::JsonQuote(scheduler),
                     kube::JsonQuote(kManagedNodeTaintEffect));
}

std::optional<std::string> FinalizerRemovalPatch(const kube::Pod& pod) {
  if (!HasFinalizer(pod)) return std::nullopt;
  std::vector<std::string> keep;
  for (const std::string& f : pod.metadata.finalizers) {
    if (f != kFinalizer) keep.push_back(kube::JsonQuote(f));
  }
  return fmt::format(R"({{"metadata":{{"resourceVersion":{},"finalizers":[{}]}}}})",
                     kube::JsonQuote(pod.metadata.resource_version), fmt::join(keep, ","));
}

}  // namespace sb::bridge
