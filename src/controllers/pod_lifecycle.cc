// SPDX-License-Identifier: Apache-2.0
#include "controllers/pod_lifecycle.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/translate.h"

namespace sb::controllers {

std::optional<WallTime> ParseTime(std::string_view text) {
  if (text.size() < 20) return std::nullopt;
  std::string s(text);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0, used = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &used) != 6 ||
      used != 19) {
    return std::nullopt;
  }
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  }
  long offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh = 0, om = 0;
    if (std::sscanf(s.c_str() + i + 1, "%2d:%2d", &oh, &om) != 2) return std::nullopt;
    offset = (s[i] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size() || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  const std::time_t t = ::timegm(&tm) - offset;
  return std::chrono::system_clock::from_time_t(t);
}

PodVerdict JudgePod(const kube::Pod& pod, const kube::Node* node, bool node_exists, WallTime now,
                    const LifecycleOptions& options) {
  if (pod.status.phase == "Succeeded" || pod.status.phase == "Failed") {
    return {PodState::kDone, std::nullopt, pod.status.phase};
  }
  if (pod.metadata.deletion_timestamp.empty()) return {PodState::kActive, std::nullopt, ""};
  // deletionTimestamp is when the grace period ends (the apiserver sets it to now + grace).
  std::optional<WallTime> deadline = ParseTime(pod.metadata.deletion_timestamp);
  if (!deadline) return {PodState::kDone, std::nullopt, "being deleted (unreadable deadline)"};
  if (now < *deadline) return {PodState::kWaiting, deadline, "grace period not over"};
  if (pod.spec.node_name.empty()) return {PodState::kDone, std::nullopt, "deleted before binding"};
  if (!node_exists || node == nullptr) {
    return {PodState::kDone, std::nullopt,
            fmt::format("grace period over and node {} is gone", pod.spec.node_name)};
  }
  if (!bridge::NodeIsReady(*node)) {
    return {PodState::kDone, std::nullopt,
            fmt::format("grace period over and node {} is not Ready", pod.spec.node_name)};
  }
  const WallTime stuck = *deadline + options.stuck_after;
  if (now >= stuck) {
    return {
        PodState::kDone, std::nullopt,
        fmt::format("still terminating {}s after its grace period", options.stuck_after.count())};
  }
  // The kubelet is there and will report the end; look again when it would count as stuck.
  return {PodState::kWaiting, stuck, "terminating"};
}

JobPlan PlanJob(std::string_view job_state, const std::vector<const kube::Pod*>& pods,
                const std::map<std::string, const kube::Node*>& nodes, WallTime now,
                const LifecycleOptions& options) {
  JobPlan plan;
  const bool ended = bridge::JobEnded(job_state);
  bool all_done = true;
  std::vector<std::string> reasons;
  for (const kube::Pod* pod : pods) {
    const kube::Node* node = nullptr;
    bool exists = false;
    if (!pod->spec.node_name.empty()) {
      auto it = nodes.find(pod->spec.node_name);
      exists = it != nodes.end();
      node = exists ? it->second : nullptr;
    }
    PodVerdict v = JudgePod(*pod, node, exists, now, options);
    const bool has_finalizer = bridge::HasFinalizer(*pod);
    if (v.state == PodState::kDone) {
      reasons.push_back(pod->metadata.name + ": " + v.why);
    } else {
      all_done = false;
      if (v.recheck_at && (!plan.recheck_at || *v.recheck_at < *plan.recheck_at)) {
        plan.recheck_at = v.recheck_at;
      }
    }
    if (ended) {
      if (v.state == PodState::kActive && !pod->spec.node_name.empty()) {
        plan.delete_pods.push_back(pod);
      }
      // The job is over: nothing left to hold the pod for.
      if (has_finalizer && (v.state != PodState::kActive || !pod->spec.node_name.empty())) {
        plan.release_pods.push_back(pod);
      }
    } else if (v.state == PodState::kDone && has_finalizer) {
      plan.release_pods.push_back(pod);  // released once the job is cancelled (caller's order)
    }
  }
  if (!ended && all_done) {
    plan.cancel_job = true;
    plan.cancel_reason = pods.empty()
                             ? "its pods are gone"
                             : fmt::format("all its pods are done ({})", fmt::join(reasons, "; "));
  }
  if (!ended && !all_done) plan.release_pods.clear();  // the job still holds them
  return plan;
}

}  // namespace sb::controllers
