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

// A JSON merge patch that removes the bridge's finalizer and keeps the others, conditional on
// the pod's resourceVersion (a concurrent change answers 409). nullopt when the pod has none.
[[nodiscard]] std::optional<std::string> FinalizerRemovalPatch(const kube::Pod& pod);

}  // namespace sb::bridge
