// SPDX-License-Identifier: Apache-2.0
#include "app/epilog_logic.h"

#include <algorithm>
#include <set>

namespace sb::app {

std::optional<std::int64_t> ParseEpilogJobId(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  std::int64_t id = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + (c - '0');
  }
  if (id <= 0) return std::nullopt;
  return id;
}

std::string KubeNodeOfPod(const kube::Pod& pod) { return pod.spec.node_name; }

bool PodFinished(const kube::Pod& pod) {
  return pod.status.phase == "Succeeded" || pod.status.phase == "Failed";
}

NodeHold PodsHoldingNode(const std::vector<kube::Pod>& pods, std::string_view slurm_node,
                         const std::map<std::string, std::string>& slurm_name_of,
                         std::string_view scheduler_name) {
  NodeHold out;
  std::set<std::string> unknown;
  for (const kube::Pod& pod : pods) {
    if (pod.spec.scheduler_name != scheduler_name || PodFinished(pod)) continue;
    const std::string node = KubeNodeOfPod(pod);
    if (node.empty()) continue;
    bool here = false;
    if (auto s = slurm_name_of.find(node); s != slurm_name_of.end()) {
      here = s->second == slurm_node;
    } else if (node == slurm_node) {
      // The common case: the Kubernetes node is named as the Slurm node (no label needed).
      here = true;
    } else {
      unknown.insert(node);
      here = true;
    }
    if (here) out.holding.push_back(pod.metadata.namespace_ + "/" + pod.metadata.name);
  }
  std::ranges::sort(out.holding);
  out.unknown_nodes.assign(unknown.begin(), unknown.end());
  return out;
}

std::chrono::seconds DefaultEpilogMaxWait(
    std::optional<std::int64_t> max_termination_grace_seconds) {
  constexpr std::int64_t kDefaultGrace = 300;
  constexpr std::int64_t kMargin = 30;
  std::int64_t grace = max_termination_grace_seconds.value_or(kDefaultGrace);
  if (grace <= 0) grace = kDefaultGrace;
  return std::chrono::seconds(grace + kMargin);
}

}  // namespace sb::app
