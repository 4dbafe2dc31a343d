// SPDX-License-Identifier: Apache-2.0
//
// controllers/pod_lifecycle.h
//
// Pure decisions of the pod controller: what to do with one Slurm job and the pods it holds a
// place for (the pods labelled scheduler.slinky.slurm.net/slurm-jobid=<job>). No I/O.
//
//   - The job ended (COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL,
//     DEADLINE, OUT_OF_MEMORY) or Slurm no longer knows it: every bound pod still running is
//     deleted (its allocation is gone: scancel, preemption, time limit, node failure); pods not
//     bound yet are left to the scheduler, which submits a new job.
//   - The job is alive (pending, running, suspended, ...) and every one of its pods is done: the
//     job is cancelled. A pod is done when it Succeeded or Failed, or when it is being deleted
//     and its grace period is over (upstream #16: never while the pod may still be running),
//     and its kubelet is gone (node deleted or not Ready) or it is stuck long past the grace
//     period (upstream #49).
//   - A done pod keeps the bridge's finalizer until its job is over; then the finalizer goes.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kube/types.h"

namespace sb::controllers {

using WallTime = std::chrono::system_clock::time_point;

// "2026-01-01T00:00:00Z" (fractions and numeric offsets accepted); nullopt when malformed.
[[nodiscard]] std::optional<WallTime> ParseTime(std::string_view rfc3339);

struct LifecycleOptions {
  // A pod being deleted on a Ready node counts as done this long after its grace period, even
  // if the kubelet never reports it terminated.
  std::chrono::seconds stuck_after{120};
};

enum class PodState {
  kActive,  // may still be running: the job must stay
  kDone,    // finished, or past its grace period with no kubelet to finish it
  kWaiting  // being deleted, grace period not over yet (re-check at `recheck_at`)
};

struct PodVerdict {
  PodState state = PodState::kActive;
  std::optional<WallTime> recheck_at;
  std::string why;  // for logs and events: "Succeeded", "grace period over, node n1 is gone"
};

// `node`: the pod's node, nullptr when it is not bound or the node does not exist
// (`node_exists` tells them apart for a bound pod).
[[nodiscard]] PodVerdict JudgePod(const kube::Pod& pod, const kube::Node* node, bool node_exists,
                                  WallTime now, const LifecycleOptions& options);

struct JobPlan {
  bool cancel_job = false;
  std::string cancel_reason;
  std::vector<const kube::Pod*> delete_pods;   // bound, running, their job is over
  std::vector<const kube::Pod*> release_pods;  // drop the finalizer
  std::optional<WallTime> recheck_at;          // earliest time a waiting pod is done
};

// `job_state`: Slurm's base state of the job ("GONE" when Slurm does not know it).
// `pods`: the pods labelled with the job; `nodes`: the cluster's nodes by name.
[[nodiscard]] JobPlan PlanJob(std::string_view job_state, const std::vector<const kube::Pod*>& pods,
                              const std::map<std::string, const kube::Node*>& nodes, WallTime now,
                              const LifecycleOptions& options);

}  // namespace sb::controllers
