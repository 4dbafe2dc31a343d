// SPDX-License-Identifier: Apache-2.0
//
// scheduler/work_item.h
//
// The scheduler's work queue items and what one pass over an item asks next.
//   - WorkItem: a pod to resolve into its group (its key "ns/name"), or a group to reconcile
//     (its group key, bridge/group.h).
//   - Next: a pass's answer, applied by the worker (Scheduler::Process) as controller-runtime
//     applies a Result's RequeueAfter: nothing (the item waits for a watch event), this item
//     again after `after` (zero: as soon as this pass ends), or, with `via_pod`, that pod's
//     item instead of the group: it reads the pod and its owners anew before the group is
//     looked at (the fix of a problem is usually an edit of the pod or of its owner).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "async/clock.h"
#include "kube/client.h"
#include "kube/types.h"

namespace sb::scheduler {

struct WorkItem {
  enum class Kind : std::uint8_t { kPod, kGroup };
  Kind kind = Kind::kGroup;
  std::string key;

  static WorkItem Pod(std::string pod_key) { return {Kind::kPod, std::move(pod_key)}; }
  static WorkItem Group(std::string group_key) { return {Kind::kGroup, std::move(group_key)}; }
  friend bool operator==(const WorkItem&, const WorkItem&) = default;
};

struct Next {
  std::optional<async::Clock::Duration> after;  // none: not again (until an event)
  std::optional<std::string> via_pod;           // the pod whose item is queued instead

  static Next Done() { return {}; }
  static Next Now() { return {.after = async::Clock::Duration::zero()}; }
  static Next After(async::Clock::Duration d) { return {.after = d}; }
  static Next ViaPod(std::string pod_key, async::Clock::Duration d) {
    return {.after = d, .via_pod = std::move(pod_key)};
  }
};

// The one of `a` and `b` that looks again first (none: never).
inline Next Sooner(Next a, Next b) {
  if (!b.after) return a;
  if (!a.after) return b;
  return *b.after < *a.after ? b : a;
}

inline std::string PodKey(const kube::Pod& pod) { return kube::ObjectKey(pod.metadata); }

}  // namespace sb::scheduler

template <>
struct std::hash<sb::scheduler::WorkItem> {
  std::size_t operator()(const sb::scheduler::WorkItem& item) const noexcept {
    return std::hash<std::string>{}(item.key) ^ static_cast<std::size_t>(item.kind);
  }
};
