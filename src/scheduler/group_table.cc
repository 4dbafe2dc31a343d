// SPDX-License-Identifier: Apache-2.0
#include "scheduler/group_table.h"

#include <utility>

namespace sb::scheduler {

GroupState* GroupTable::Find(const std::string& key) {
  auto it = groups_.find(key);
  return it == groups_.end() ? nullptr : &it->second;
}

const GroupState* GroupTable::Find(const std::string& key) const {
  auto it = groups_.find(key);
  return it == groups_.end() ? nullptr : &it->second;
}

const std::string* GroupTable::GroupOf(const std::string& pod_key) const {
  auto it = group_of_pod_.find(pod_key);
  return it == group_of_pod_.end() ? nullptr : &it->second;
}

std::optional<std::string> GroupTable::Join(const std::string& pod_key, bridge::GroupSpec spec,
                                            async::Clock::TimePoint now) {
  std::optional<std::string> left;
  const std::string key = spec.key;
  if (auto old = group_of_pod_.find(pod_key); old != group_of_pod_.end() && old->second != key) {
    if (GroupState* g = Find(old->second)) g->members.erase(pod_key);
    left = old->second;
  }
  GroupState& g = groups_[key];
  if (!g.since) g.since = now;
  g.spec = std::move(spec);
  g.members.insert(pod_key);
  group_of_pod_[pod_key] = key;
  return left;
}

std::optional<std::string> GroupTable::Leave(const std::string& pod_key) {
  auto it = group_of_pod_.find(pod_key);
  if (it == group_of_pod_.end()) return std::nullopt;
  std::string group = std::move(it->second);
  group_of_pod_.erase(it);
  if (GroupState* g = Find(group)) g->members.erase(pod_key);
  return group;
}

void GroupTable::Forget(const std::string& key) { groups_.erase(key); }

}  // namespace sb::scheduler
