// SPDX-License-Identifier: Apache-2.0
//
// app/epilog_logic.h
//
// The decisions of `slurm-bridge epilog` (app/epilog_cmd.h), free of I/O: which of a Slurm
// job's pods still hold the node the epilog runs on, and how long the epilog may wait for them.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/types.h"

namespace sb::app {

// SLURM_JOB_ID as Slurm sets it for the epilog ("1234"): the job id when it is a positive
// decimal number (no sign, no spaces, no het-job "+offset"), else nullopt.
[[nodiscard]] std::optional<std::int64_t> ParseEpilogJobId(std::string_view text);

// The Kubernetes node a pod of the bridge runs on: its slinky.slurm.net/slurm-node annotation
// (the scheduler writes it with the bind), else spec.nodeName; "" when neither is set.
[[nodiscard]] std::string KubeNodeOfPod(const kube::Pod& pod);

// Whether a pod's containers have ended for good (phase Succeeded or Failed): such a pod no
// longer uses its node, whether or not its object still exists.
[[nodiscard]] bool PodFinished(const kube::Pod& pod);

struct NodeHold {
  // "namespace/name" of each pod that still holds the node, sorted.
  std::vector<std::string> holding;
  // Kubernetes nodes (sorted, unique) whose Slurm name is not known yet: the caller reads each
  // Node and adds its Slurm name (bridge::SlurmNodeName) to `slurm_name_of`, then asks again.
  // Their pods count as holding until then.
  std::vector<std::string> unknown_nodes;

  [[nodiscard]] bool Released() const { return holding.empty(); }
};

// Which of `pods` (the pods labelled with the job's id, from every namespace) hold Slurm node
// `slurm_node`: those not finished whose Kubernetes node (KubeNodeOfPod) is `slurm_node`
// itself, or whose Slurm name in `slurm_name_of` (Kubernetes node -> Slurm node) is. A pod on
// no node (never bound) holds nothing; a pod on a Kubernetes node missing from `slurm_name_of`
// is listed in unknown_nodes and counts as holding (when in doubt, wait).
[[nodiscard]] NodeHold PodsHoldingNode(const std::vector<kube::Pod>& pods,
                                       std::string_view slurm_node,
                                       const std::map<std::string, std::string>& slurm_name_of);

// The default --max-wait: the longest grace period a pod of a batch placeholder may have
// (`max_termination_grace_seconds`, config maxTerminationGracePeriodSeconds; nullopt without a
// config file, and 0 (no cap) both mean 300 s, the config's default) plus a 30 s margin for the
// kubelet's and the controllers' own delays.
[[nodiscard]] std::chrono::seconds DefaultEpilogMaxWait(
    std::optional<std::int64_t> max_termination_grace_seconds);

}  // namespace sb::app
