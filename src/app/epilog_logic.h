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

// The Kubernetes node a pod runs on: spec.nodeName; "" when it is not bound. The node
// annotation (slinky.slurm.net/slurm-node, written by the scheduler with the Binding) is not
// read: anyone who may create a pod can write it on one that is never bound (review R-3).
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
// `slurm_node`: those of the bridge's scheduler (spec.schedulerName `scheduler_name`), not
// finished, whose Kubernetes node (KubeNodeOfPod) is `slurm_node` itself, or whose Slurm name in
// `slurm_name_of` (Kubernetes node -> Slurm node) is. A pod on no node (never bound) holds
// nothing; a pod on a Kubernetes node missing from `slurm_name_of` is listed in unknown_nodes and
// counts as holding (when in doubt, wait).
// Any tenant can label a pod with any job id (the webhook sees only the bridge's pods), so the
// other schedulers' pods and unbound pods are not believed (review R-3). The bridge's own pods
// are: the webhook keeps their job-id label for the bridge, and only the scheduler binds them.
// (The job's tag, which lists its pods' UIDs, would be a stronger test, but it lives in Slurm's
// admin_comment: reading it takes a slurmrestd token the epilog on a compute node does not have.)
[[nodiscard]] NodeHold PodsHoldingNode(const std::vector<kube::Pod>& pods,
                                       std::string_view slurm_node,
                                       const std::map<std::string, std::string>& slurm_name_of,
                                       std::string_view scheduler_name);

// The default --max-wait: the longest grace period a pod of a batch placeholder may have
// (`max_termination_grace_seconds`, config maxTerminationGracePeriodSeconds; nullopt without a
// config file, and 0 (no cap) both mean 300 s, the config's default) plus a 30 s margin for the
// kubelet's and the controllers' own delays.
[[nodiscard]] std::chrono::seconds DefaultEpilogMaxWait(
    std::optional<std::int64_t> max_termination_grace_seconds);

}  // namespace sb::app
