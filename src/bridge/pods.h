// SPDX-License-Identifier: Apache-2.0
//
// bridge/pods.h
//
// Small pure facts about the bridge's pods and jobs that the scheduler and the controllers
// share: when a Slurm job holds nothing any more, whether a pod carries the bridge's finalizer,
// and the patch that takes it off.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kube/types.h"

namespace sb::bridge {

// True for Slurm base states after which the job holds nothing (COMPLETED, CANCELLED, FAILED,
// TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY), and for "GONE": Slurm no
// longer knows the job.
[[nodiscard]] bool JobEnded(std::string_view base_state);

// Whether the pod's phase is terminal (Succeeded or Failed): its containers ran to the end.
[[nodiscard]] bool PodFinished(const kube::Pod& pod);

// Whether `pod` carries scheduler.slinky.slurm.net/finalizer.
[[nodiscard]] bool HasFinalizer(const kube::Pod& pod);

// Whether a toleration (key, operator, value, effect, as the API has them) tolerates the
// bridge's managed-node taint (slinky.slurm.net/managed-node=<scheduler>:NoExecute), as the
// kubelet and the taint manager match them: an empty effect matches every effect, operator
// Exists with an empty key every taint.
[[nodiscard]] bool ToleratesManagedNode(std::string_view key, std::string_view op,
                                        std::string_view value, std::string_view effect,
                                        std::string_view scheduler);
// Whether one of the pod's tolerations does.
[[nodiscard]] bool ToleratesManagedNode(const kube::Pod& pod, std::string_view scheduler);

// The toleration the bridge gives its pods, as a JSON object.
[[nodiscard]] std::string ManagedNodeTolerationJson(std::string_view scheduler);

// A JSON merge patch that removes the bridge's finalizer and keeps the others, conditional on
// the pod's resourceVersion (a concurrent change answers 409). nullopt when the pod has none.
[[nodiscard]] std::optional<std::string> FinalizerRemovalPatch(const kube::Pod& pod);

}  // namespace sb::bridge
