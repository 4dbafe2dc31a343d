// SPDX-License-Identifier: Apache-2.0
//
// scheduler/group_table.h
//
// What the scheduler knows of each group of pods (bridge/group.h), by group key, and which
// group each resolved pod belongs to. A group is made when its first pod is resolved and
// forgotten (Forget) when it has no member left: everything the scheduler remembers of a group
// lives in its GroupState, so that one call ends it.
//
// Not here: the group's Slurm job. The tracked jobs are scheduler/slurm_jobs.h's, the interest
// set of the process's job poll, and a job may outlive its group's pods (it is cancelled then).
//
// Thread model: loop-confined (the scheduler's executor). Pointers returned are valid until
// the next Join, Leave or Forget, i.e. until the caller's next co_await.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "async/clock.h"
#include "bridge/group.h"
#include "kube/types.h"

namespace sb::scheduler {

struct GroupState {
  bridge::GroupSpec spec;
  std::set<std::string> members;                            // pod keys ("ns/name")
  std::optional<async::Clock::TimePoint> incomplete_since;  // short of pods since
  // The outcome of its last submit is unknown (timeout, lost connection) since.
  std::optional<async::Clock::TimePoint> submit_doubt;
  std::set<std::string> excluded;  // Slurm nodes an earlier job got that Kubernetes lacks
  bool ran = false;                // a job of it was bound (N-9)
  std::optional<async::Clock::TimePoint> since;  // made then (GroupInput::group_since)
  // A Workload API PodGroup's condition (PodGroupScheduled or PodGroupInitiallyScheduled) last
  // written or read, and the observedGeneration it carries.
  std::optional<kube::Condition> pod_group_condition;
  std::int64_t pod_group_generation = 0;
  // A coscheduling PodGroup: the start of the shortfall whose spec.scheduleTimeoutSeconds its
  // pods were told of (a PodGroupTimedOut event once per shortfall).
  std::optional<async::Clock::TimePoint> timeout_told;
};

class GroupTable {
 public:
  // The group `key`, or nullptr.
  [[nodiscard]] GroupState* Find(const std::string& key);
  [[nodiscard]] const GroupState* Find(const std::string& key) const;
  // The group pod `pod_key` was resolved into, or nullptr when none.
  [[nodiscard]] const std::string* GroupOf(const std::string& pod_key) const;

  // Pod `pod_key` resolved into the group `spec` describes (made at `now` if new; its spec is
  // replaced). Returns the group it left, when it moved (its pod-group label changed).
  std::optional<std::string> Join(const std::string& pod_key, bridge::GroupSpec spec,
                                  async::Clock::TimePoint now);
  // Pod `pod_key` is gone: it leaves its group, whose key is returned (none: it had none).
  std::optional<std::string> Leave(const std::string& pod_key);
  // Everything remembered of the group goes.
  void Forget(const std::string& key);

  [[nodiscard]] const std::map<std::string, GroupState>& groups() const { return groups_; }

 private:
  std::map<std::string, GroupState> groups_;
  std::unordered_map<std::string, std::string> group_of_pod_;  // pod key -> group key
};

}  // namespace sb::scheduler
