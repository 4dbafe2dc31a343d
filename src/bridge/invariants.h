// SPDX-License-Identifier: Apache-2.0
//
// bridge/invariants.h
//
// The invariants that must hold between Kubernetes and Slurm whenever the bridge has had time to
// catch up, checked from one snapshot of both sides (pure: no I/O, the time is an argument).
// `slurm-bridge check` and every end-to-end test run it (check/check.h reads the snapshot).
//
//   1. kUnboundJob: every bound pod of ours that is not finished (phase Succeeded/Failed) and not
//      being deleted sits on a node of a RUNNING Slurm job whose tag is this bridge's and lists
//      the pod's UID (the pod's job-id label names that job).
//   2. kTwoLiveJobs: no group (and no pod UID) has two live Slurm jobs.
//   3. kOrphanJob: no live tagged job outlives its pods: a job of ours that is not over while
//      none of the pods its tag lists is alive. A pod stops being alive when it is gone (or has
//      another UID), finished, or being deleted and either released by the bridge (no finalizer)
//      or past its grace period with its node gone or not Ready, or `stuck_after` past it.
//   4. kNoAllocation: no pod is bound where Slurm allocated nothing: its node is among the
//      job's nodes (by the node's Slurm name: label slinky.slurm.net/slurm-nodename, else its
//      own name); a heterogeneous job's pod, among its component's (its het-job-offset label).
//   5. kWaitingOnRunningJob: no pod waits (unbound) while its job is RUNNING.
//   6. kTwoPodsOnANode: one pod per node of a job (of a heterogeneous job's component): no two
//      alive pods labelled with one job are bound to the same node (a replacement bound beside
//      a predecessor that still terminates).
//   7. kNoJobState: a job of ours has a state; one Slurm answered without a readable state is
//      not taken for ended (it could then be neither an orphan nor a duplicate).
//   8. kWaitingWithoutJob (liveness, with `max_wait` only): no pod of ours waits unbound,
//      ungated, longer than max_wait with no Slurm job (no job-id label, no live tag listing
//      it). Off by default: a gang short of members waits without a job on purpose.
//
// Each check is a snapshot: right after a change the bridge needs a moment (a poll, a sweep)
// to catch up, so callers re-check until no violation is left or a settle deadline passes
// (CheckUntilSettled in check/check.h) and report what remains.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kube/types.h"
#include "slurm/types.h"

namespace sb::bridge {

struct InvariantOptions {
  std::string scheduler_name{"slurm-bridge-scheduler"};
  std::string cluster_name{"kubernetes"};
  // Only pods of this namespace and jobs whose tag lists a pod of it; empty: all.
  std::string namespace_;
  // A pod being deleted whose kubelet never reports it gone counts as alive this long past its
  // grace period (the pod controller's stuck_after).
  std::chrono::seconds stuck_after{120};
  // Invariant 8: the longest a pod may wait without a job (from its creationTimestamp); 0: off.
  std::chrono::seconds max_wait{0};
};

enum class Invariant {
  kUnboundJob,
  kTwoLiveJobs,
  kOrphanJob,
  kNoAllocation,
  kWaitingOnRunningJob,
  kTwoPodsOnANode,
  kNoJobState,
  kWaitingWithoutJob,
};

// "unbound-job", "two-live-jobs", ...
[[nodiscard]] std::string_view InvariantName(Invariant i);

struct Violation {
  Invariant invariant;
  std::string subject;  // "pod ns/name" or "Slurm job 42"
  std::string text;     // the whole sentence, subject included
  bool operator==(const Violation&) const = default;
};

struct Snapshot {
  std::vector<kube::Pod> pods;    // may include other schedulers' pods: they are skipped
  std::vector<kube::Node> nodes;  // every node of the cluster
  std::vector<slurm::JobInfo> jobs;
};

// The violations in `s` at `now`, in a stable order (by invariant, then subject).
[[nodiscard]] std::vector<Violation> CheckInvariants(const Snapshot& s,
                                                     std::chrono::system_clock::time_point now,
                                                     const InvariantOptions& options);

}  // namespace sb::bridge
