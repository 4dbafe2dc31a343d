// SPDX-License-Identifier: Apache-2.0
//
// controllers/pod/pod_lifecycle.h
//
// Pure decisions of the pod controller: what to do with one Slurm job and the pods it holds a
// place for, and with bound pods that no job of this bridge holds a place for. No I/O.
//
// Which pods a job holds a place for (its members): the job's admin_comment tag must be this
// bridge's (this clusterName and schedulerName) and list the pod's UID. A pod's job-id label is
// only a hint of where to look: users can write labels, and Slurm reuses job ids. A pod labelled
// with a job that is untagged, another cluster's or scheduler's, or that does not list the pod is
// a stray of that job: the job is never cancelled and no pod is deleted for it; the stray is
// reported (and, once bound, handled by the sweep: see JudgeBoundPod). A job Slurm no longer
// knows ("GONE") has no tag to read: its labelled pods are taken as its members (it holds
// nothing, so nothing in Slurm is touched).
//
//   - The job ended (COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL,
//     DEADLINE, OUT_OF_MEMORY) or Slurm no longer knows it: every bound member still running is
//     deleted (its allocation is gone: scancel, preemption, time limit, node failure); members
//     not bound yet are left to the scheduler, which submits a new job. A bound member already
//     being deleted, within a grace period longer than max_termination_grace_seconds (a
//     `kubectl delete --grace-period=86400` while the job ran), is deleted again with that cap
//     (review R-5): it would run on after the node epilog let the node go.
//   - The job is alive but not RUNNING (PENDING after a requeue, SUSPENDED, ...): its bound
//     members are deleted once a fresh read has shown it so for `confirm_after` (upstream deleted
//     a bound pod whose job was not RUNNING). A job seen PENDING after its pods were bound was
//     requeued: its allocation is gone even if it runs again, so its bound pods go all the same.
//     A job Slurm preempted (PREEMPTED, or requeued or suspended with a preempt_time) has given
//     its nodes to the preemptor: its bound members go at once, with the DisruptionTarget
//     condition and a SlurmJobPreempted event. A requeued job whose members are all gone is kept
//     `requeue_grace` for its group's new pods (not for a bare pod's), which the scheduler binds
//     when Slurm starts the same job again.
//   - The job is alive and every member is done: the job is cancelled. A pod is done when it
//     Succeeded or Failed, or when it is being deleted and its grace period is over (upstream
//     #16: never while the pod may still be running), and its kubelet is gone (node deleted or
//     not Ready) or it is stuck long past the grace period (upstream #49). No member left at all
//     (their pods were deleted) counts as every member done.
//   - A done member keeps the bridge's finalizer until its job is over; then the finalizer goes.
//     A done stray loses it at once: no job of ours holds it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bridge/tag.h"
#include "kube/types.h"
#include "slurm/types.h"

namespace sb::controllers {

using WallTime = std::chrono::system_clock::time_point;

struct LifecycleOptions {
  // A pod being deleted on a Ready node counts as done this long after its grace period, even
  // if the kubelet never reports it terminated.
  std::chrono::seconds stuck_after{120};
  // How long a job must stay alive but not RUNNING before its bound pods are deleted, and how
  // long a bound pod must stay without a job of this bridge before it is deleted.
  std::chrono::seconds confirm_after{10};
  // How long a requeued job whose bound pods are all gone is kept for its group's new pods
  // (the pods of a Job, JobSet, LeaderWorkerSet or PodGroup come back; the scheduler adopts the
  // job for them, and it keeps its id and its place in Slurm's queue). A bare pod's job is
  // cancelled at once: nothing re-creates the pod.
  std::chrono::seconds requeue_grace{120};
  // How long after its Binding a bound pod with DRA claims may stay Pending without
  // PodReadyToStartContainers=True before its kubelet is nudged (bridge::kKubeletNudgeAnnotation);
  // 0: never.
  std::chrono::seconds kubelet_nudge_after{5};
  // With batch placeholders, config maxTerminationGracePeriodSeconds (0: none): the longest grace
  // period a member of an ended job may still run for (the node epilog holds the node this long,
  // and 30 s more). The webhook caps it at CREATE and on DELETE, but not for every writer
  // (privileged users, a webhook that was off): see PlanJob.
  std::int64_t max_termination_grace_seconds = 0;
};

// This bridge, as job tags name it.
struct Owner {
  std::string cluster;    // clusterName
  std::string scheduler;  // schedulerName
};

// What the controller knows of one Slurm job.
struct JobFacts {
  std::string state;                  // Slurm's base state; "GONE" when Slurm does not know it
  std::optional<bridge::JobTag> tag;  // its admin_comment, parsed; nullopt when it has none
  std::string reason;                 // Slurm's state_reason and state_description, for events
  std::string description;
  // Slurm preempted it: state PREEMPTED (CANCEL mode), or a preempt_time while it waits again
  // (REQUEUE) or is suspended (SUSPEND).
  bool preempted = false;
  // When a fresh read first found the job alive but not RUNNING while it held a bound pod;
  // `requeued`: that read found it PENDING (requeued after its pods were bound).
  std::optional<WallTime> not_running_since;
  bool requeued = false;
  // When a fresh read first found Slurm without the job ("GONE"): its bound pods are deleted
  // only confirm_after later.
  std::optional<WallTime> gone_since;
};

// Why `pod` is not a member of the job `job` describes (see the top of this file); "" when it
// is. For messages: "Slurm job 5 has no slurm-bridge tag".
[[nodiscard]] std::string WhyNotMember(std::int64_t job_id, const JobFacts& job,
                                       const kube::Pod& pod, const Owner& owner);

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

// Whether to nudge the kubelet of `pod`, a member of a RUNNING job: bound, not being deleted,
// with DRA claims (the bridge's extended-resource claim or claims made from its templates),
// still Pending without PodReadyToStartContainers=True `kubelet_nudge_after` after its Binding
// (PodScheduled's lastTransitionTime), and not nudged before. While it is too early,
// `recheck_at` says when to look again.
struct NudgeVerdict {
  bool nudge = false;
  std::optional<WallTime> recheck_at;
  bool operator==(const NudgeVerdict&) const = default;
};
[[nodiscard]] NudgeVerdict JudgeKubeletNudge(const kube::Pod& pod, WallTime now,
                                             const LifecycleOptions& options);

// Why the ResourceClaim `claim`, which `pod`'s annotation bridge::kResourceClaimAnnotation
// names, is not the one the binder made for the pod's extended resources
// (bridge::PlanExtendedResourceClaim), so that releasing the pod must leave it alone; "" when it
// is: an owner reference of kind Pod with the pod's UID as controller, and the annotation
// bridge::kExtendedResourceClaimAnnotation "true". The pod's annotation is its author's to write
// (the Binding overwrites it only for pods that get a claim): without this, the controllers
// deleted any claim of the namespace a pod named (review R-4).
[[nodiscard]] std::string WhyClaimNotReleased(const kube::GenericObject& claim,
                                              const kube::Pod& pod);

// A pod to delete, with the Event to write on it first.
struct PodDeletion {
  const kube::Pod* pod = nullptr;
  std::string reason;   // "SlurmJobEnded", "SlurmJobNotRunning", "SlurmJobPreempted"
  std::string message;  // without Slurm's own words, which the caller appends
  // Non-empty: the pod gets the condition DisruptionTarget=True with this reason and `message`
  // before it is deleted, as Kubernetes' own preemption and eviction do (a Job's
  // podFailurePolicy can then tell a preempted pod from a failed one).
  std::string disruption;
  // Set: the pod is being deleted already, with a longer grace period; delete it again with this
  // one (the apiserver shortens a terminating pod's grace period, never lengthens it). Unset:
  // the pod's own (spec.terminationGracePeriodSeconds).
  std::optional<std::int64_t> grace_period_seconds;
  bool operator==(const PodDeletion&) const = default;
};

// A pod labelled with a job that does not hold a place for it.
struct StrayPod {
  const kube::Pod* pod = nullptr;
  std::string why;  // WhyNotMember
  bool operator==(const StrayPod&) const = default;
};

struct JobPlan {
  bool cancel_job = false;
  std::string cancel_reason;
  std::vector<PodDeletion> delete_pods;        // bound members, running, the job no longer runs
  std::vector<const kube::Pod*> release_pods;  // drop the finalizer
  std::vector<StrayPod> strays;                // report (never act on the job for them)
  std::vector<const kube::Pod*> nudge_pods;    // annotate (JudgeKubeletNudge)
  std::optional<WallTime> recheck_at;          // earliest time something may change
  // The job's not-RUNNING record to keep (JobFacts' fields) for the next call.
  std::optional<WallTime> not_running_since;
  bool requeued = false;
  std::optional<WallTime> gone_since;  // JobFacts' gone_since to keep ("GONE" only)
  // A requeued job of a group (not a bare pod's): it waits for the group's new pods until then
  // (not_running_since + requeue_grace), and the orphan sweep, which sees no pod of its tag
  // once the old ones are gone, must leave it alone until then too.
  std::optional<WallTime> hold_until;

  // Whether the plan writes to Slurm or deletes a pod (the caller confirms its facts first).
  [[nodiscard]] bool Acts() const { return cancel_job || !delete_pods.empty(); }
};

// `job`: what is known of the job; `pods`: the pods labelled with it and the pods its tag names
// (each once); `nodes`: the cluster's nodes by name.
[[nodiscard]] JobPlan PlanJob(std::int64_t job_id, const JobFacts& job, const Owner& owner,
                              const std::vector<const kube::Pod*>& pods,
                              const std::map<std::string, const kube::Node*>& nodes, WallTime now,
                              const LifecycleOptions& options);

// Bound pods no job of this bridge holds a place for (upstream's syncKubernetes deleted them):
// why `pod` (a pod of this scheduler) is such a pod, or nullopt when it is not. `held`: the UIDs
// that this bridge's live jobs list in their tags (the jobs the sweep knows, with their last
// states); `labelled_job`: what is known of the job the pod's label names (its state and tag),
// or nullptr when the pod has no label or Slurm does not know the job (a state "GONE" counts
// the same). Only a bound pod that is neither done nor being deleted can be one. A pod whose
// label names a live job that is not this bridge's but whose tag lists the pod by name
// (upstream's tag: a job of the bridge this one replaced) is left alone.
[[nodiscard]] std::optional<std::string> JudgeBoundPod(const kube::Pod& pod,
                                                       const std::set<std::string>& held,
                                                       const JobFacts* labelled_job,
                                                       std::int64_t labelled_id,
                                                       const Owner& owner);
// Whether JudgeBoundPod may find `pod` a stray at all (bound, neither done nor being deleted,
// its UID not in `held`): the sweep reads a labelled job only for such pods.
[[nodiscard]] bool MayBeStray(const kube::Pod& pod, const std::set<std::string>& held);

// Start-up check for a clusterName shared by two bridges: the live jobs tagged for `owner` none
// of whose pods exists here (`pod_exists(ns/name, uid)`) and whose namespaces do not exist here
// (`namespace_missing(ns)`: true only when the apiserver said NotFound). Such jobs are another
// cluster's with the same clusterName (or this cluster's from a namespace deleted while the
// bridge was down); the orphan sweep would cancel them.
[[nodiscard]] std::vector<std::int64_t> ForeignLookingJobs(
    const std::vector<slurm::JobInfo>& jobs, const Owner& owner,
    const std::function<bool(const std::string&, const std::string&)>& pod_exists,
    const std::function<bool(const std::string&)>& namespace_missing);

}  // namespace sb::controllers
