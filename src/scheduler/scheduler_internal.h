// SPDX-License-Identifier: Apache-2.0
//
// scheduler/scheduler_internal.h (the scheduler's .cc files only)
//
// What scheduler.cc, scheduler_job.cc and scheduler_slurm.cc share beside the class: the work
// queue's item prefixes and the pod key.
#pragma once

#include <string>
#include <string_view>

#include "kube/client.h"
#include "kube/types.h"

namespace sb::scheduler::internal {

// Work queue items: "p:<ns/name>" (a pod to resolve into its group), "g:<group key>".
constexpr std::string_view kPodItem = "p:";
constexpr std::string_view kGroupItem = "g:";

inline std::string PodKey(const kube::Pod& pod) { return kube::ObjectKey(pod.metadata); }

}  // namespace sb::scheduler::internal
