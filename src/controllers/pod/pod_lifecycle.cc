// SPDX-License-Identifier: Apache-2.0
#include "controllers/pod/pod_lifecycle.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/dra/claims.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/translate.h"
#include "common/time_format.h"

namespace sb::controllers {

PodVerdict JudgePod(const kube::Pod& pod, const kube::Node* node, bool node_exists, WallTime now,
                    const LifecycleOptions& options) {
  if (bridge::PodFinished(pod)) {
    return {PodState::kDone, std::nullopt, pod.status.phase};
  }
  if (pod.metadata.deletion_timestamp.empty()) return {PodState::kActive, std::nullopt, ""};
  // deletionTimestamp is when the grace period ends (the apiserver sets it to now + grace).
  std::optional<WallTime> deadline = ParseTime(pod.metadata.deletion_timestamp);
  if (!deadline) return {PodState::kDone, std::nullopt, "being deleted (unreadable deadline)"};
  if (now < *deadline) return {PodState::kWaiting, deadline, "grace period not over"};
  if (pod.spec.node_name.empty()) return {PodState::kDone, std::nullopt, "deleted before binding"};
  if (!node_exists || node == nullptr) {
    return {PodState::kDone, std::nullopt,
            fmt::format("grace period over and node {} is gone", pod.spec.node_name)};
  }
  if (!bridge::NodeIsReady(*node)) {
    return {PodState::kDone, std::nullopt,
            fmt::format("grace period over and node {} is not Ready", pod.spec.node_name)};
  }
  const WallTime stuck = *deadline + options.stuck_after;
  if (now >= stuck) {
    return {
        PodState::kDone, std::nullopt,
        fmt::format("still terminating {}s after its grace period", options.stuck_after.count())};
  }
  // The kubelet is there and will report the end; look again when it would count as stuck.
  return {PodState::kWaiting, stuck, "terminating"};
}

NudgeVerdict JudgeKubeletNudge(const kube::Pod& pod, WallTime now,
                               const LifecycleOptions& options) {
  if (options.kubelet_nudge_after.count() <= 0 || pod.spec.node_name.empty() ||
      !pod.metadata.deletion_timestamp.empty() ||
      (!pod.status.phase.empty() && pod.status.phase != "Pending")) {
    return {};
  }
  const auto& annotations = pod.metadata.annotations;
  const bool has_claims = !pod.status.resource_claim_statuses.empty() ||
                          annotations.contains(std::string(bridge::kResourceClaimAnnotation));
  if (!has_claims || annotations.contains(std::string(bridge::kKubeletNudgeAnnotation))) return {};
  if (const kube::Condition* ready =
          kube::FindCondition(pod.status.conditions, "PodReadyToStartContainers");
      ready != nullptr && ready->status == "True") {
    return {};
  }
  const kube::Condition* scheduled = kube::FindCondition(pod.status.conditions, "PodScheduled");
  if (scheduled == nullptr || scheduled->status != "True") return {};
  std::optional<WallTime> bound = ParseTime(scheduled->last_transition_time);
  if (!bound) return {};
  const WallTime due = *bound + options.kubelet_nudge_after;
  if (now < due) return {.nudge = false, .recheck_at = due};
  return {.nudge = true, .recheck_at = std::nullopt};
}

namespace {

bool RunningLike(std::string_view state) {
  // CONFIGURING (nodes booting) and COMPLETING are RUNNING's neighbours, not a lost allocation.
  return state == "RUNNING" || state == "CONFIGURING" || state == "COMPLETING";
}

// "CANCELLED (Reason): description", or "Slurm no longer knows it".
std::string Words(const JobFacts& job) {
  if (job.state == "GONE") return "Slurm no longer knows it";
  std::string words = job.state;
  if (!job.reason.empty() && job.reason != "None") words += " (" + job.reason + ")";
  if (!job.description.empty()) words += ": " + job.description;
  return words;
}

// The deletion of a bound, running member of an ended job, in words that say why.
PodDeletion EndedDeletion(std::int64_t job_id, const JobFacts& job, const kube::Pod* pod) {
  if (job.state == "PREEMPTED") {
    return {pod, "SlurmJobPreempted",
            fmt::format("Slurm preempted job {} ({}); deleting the pod", job_id, Words(job)),
            "PreemptionByScheduler"};
  }
  if (job.state == "TIMEOUT") {
    return {pod, "SlurmJobEnded",
            fmt::format("Slurm job {} reached its time limit ({}); deleting the pod", job_id,
                        Words(job))};
  }
  return {pod, "SlurmJobEnded",
          fmt::format("Slurm job {} ended: {}; deleting the pod", job_id, Words(job))};
}

// A bound member of an ended job that is terminating within a grace period longer than the
// cap, still running: to be deleted again with the cap.
std::optional<PodDeletion> GraceCut(std::int64_t job_id, const JobFacts& job, const kube::Pod* pod,
                                    WallTime now, const LifecycleOptions& options) {
  const std::int64_t cap = options.max_termination_grace_seconds;
  const std::optional<std::int64_t> grace = pod->metadata.deletion_grace_period_seconds;
  if (cap <= 0 || !grace || *grace <= cap || pod->spec.node_name.empty() ||
      bridge::PodFinished(*pod)) {
    return std::nullopt;
  }
  // deletionTimestamp is the end of the grace period: once over, the kubelet has killed it.
  const std::optional<WallTime> deadline = ParseTime(pod->metadata.deletion_timestamp);
  if (!deadline || now >= *deadline) return std::nullopt;
  return PodDeletion{
      .pod = pod,
      .reason = "SlurmJobEnded",
      .message = fmt::format(
          "Slurm job {} ended ({}) while the pod was being deleted with a grace period of {}s, "
          "above maxTerminationGracePeriodSeconds ({}s, as long as the node is held for it): "
          "deleting it again with {}s",
          job_id, Words(job), *grace, cap, cap),
      .grace_period_seconds = cap};
}

}  // namespace

std::string WhyNotMember(std::int64_t job_id, const JobFacts& job, const kube::Pod& pod,
                         const Owner& owner) {
  if (job.state == "GONE") return "";
  if (!job.tag) return fmt::format("Slurm job {} has no slurm-bridge tag", job_id);
  const bridge::JobTag& tag = *job.tag;
  if (!tag.ours)
    return fmt::format("Slurm job {} has no slurm-bridge tag (upstream's only)", job_id);
  if (tag.cluster != owner.cluster || tag.scheduler != owner.scheduler) {
    return fmt::format("Slurm job {} belongs to cluster \"{}\", scheduler \"{}\"", job_id,
                       tag.cluster, tag.scheduler);
  }
  if (!pod.metadata.uid.empty() &&
      std::ranges::find(tag.uids, pod.metadata.uid) != tag.uids.end()) {
    return "";
  }
  // A tag without UIDs for some of its pods (not this bridge's writing) names those by name.
  const std::string key = pod.metadata.namespace_ + "/" + pod.metadata.name;
  for (std::size_t i = tag.uids.size(); i < tag.pods.size(); ++i) {
    if (tag.pods[i] == key) return "";
  }
  return fmt::format("Slurm job {} was not submitted for this pod (its tag does not list UID {})",
                     job_id, pod.metadata.uid);
}

std::string WhyClaimNotReleased(const kube::GenericObject& claim, const kube::Pod& pod) {
  const bool owned =
      !pod.metadata.uid.empty() &&
      std::ranges::any_of(claim.metadata.owner_references, [&](const kube::OwnerReference& o) {
        return o.kind == "Pod" && o.controller && o.uid == pod.metadata.uid;
      });
  if (!owned) {
    return fmt::format("it is not owned by the pod (no controller owner reference to UID {})",
                       pod.metadata.uid);
  }
  auto mark =
      claim.metadata.annotations.find(std::string(bridge::kExtendedResourceClaimAnnotation));
  if (mark == claim.metadata.annotations.end() || mark->second != "true") {
    return fmt::format("it lacks the annotation {}=true of the claims made for extended resources",
                       bridge::kExtendedResourceClaimAnnotation);
  }
  return "";
}

JobPlan PlanJob(std::int64_t job_id, const JobFacts& job, const Owner& owner,
                const std::vector<const kube::Pod*>& pods,
                const std::map<std::string, const kube::Node*>& nodes, WallTime now,
                const LifecycleOptions& options) {
  JobPlan plan;
  // A job Slurm does not know ("GONE") is taken as ended once a read showed it so for
  // confirm_after: a slurmctld back without its state, or a proxy in front of the wrong one,
  // must not delete every workload at the first poll. Until then nothing is done for it.
  bool gone_unconfirmed = false;
  if (job.state == "GONE") {
    plan.gone_since = job.gone_since.value_or(now);
    const WallTime due = *plan.gone_since + options.confirm_after;
    if (now < due) {
      gone_unconfirmed = true;
      plan.recheck_at = due;
    }
  }
  const bool ended = bridge::JobEnded(job.state) && !gone_unconfirmed;
  const bool ours = (job.state == "GONE" && !gone_unconfirmed) ||
                    (job.tag && job.tag->BelongsTo(owner.cluster, owner.scheduler));
  bool all_done = true;
  std::vector<std::string> reasons;
  std::vector<const kube::Pod*> member_release;
  std::vector<const kube::Pod*> bound_active;
  auto earlier = [&plan](std::optional<WallTime> t) {
    if (t && (!plan.recheck_at || *t < *plan.recheck_at)) plan.recheck_at = t;
  };
  for (const kube::Pod* pod : pods) {
    const kube::Node* node = nullptr;
    bool exists = false;
    if (!pod->spec.node_name.empty()) {
      auto it = nodes.find(pod->spec.node_name);
      exists = it != nodes.end();
      node = exists ? it->second : nullptr;
    }
    PodVerdict v = JudgePod(*pod, node, exists, now, options);
    const bool has_finalizer = bridge::HasFinalizer(*pod);
    if (std::string why = WhyNotMember(job_id, job, *pod, owner); !why.empty()) {
      // Not the job's: nothing is done to the job for it. Bound and running, it is the sweep's
      // (JudgeBoundPod); done, no job of ours holds its finalizer.
      plan.strays.push_back({pod, std::move(why)});
      if (v.state != PodState::kActive && has_finalizer) plan.release_pods.push_back(pod);
      continue;
    }
    if (v.state == PodState::kDone) {
      reasons.push_back(pod->metadata.name + ": " + v.why);
    } else {
      all_done = false;
      earlier(v.recheck_at);
    }
    if (v.state == PodState::kActive && !pod->spec.node_name.empty()) bound_active.push_back(pod);
    if (ended) {
      if (v.state == PodState::kActive && !pod->spec.node_name.empty()) {
        plan.delete_pods.push_back(EndedDeletion(job_id, job, pod));
      } else if (std::optional<PodDeletion> d = GraceCut(job_id, job, pod, now, options)) {
        plan.delete_pods.push_back(std::move(*d));
      }
      // The job is over: nothing left to hold the pod for.
      if (has_finalizer && (v.state != PodState::kActive || !pod->spec.node_name.empty())) {
        member_release.push_back(pod);
      }
    } else if (v.state == PodState::kDone && has_finalizer) {
      member_release.push_back(pod);  // released once the job is cancelled (caller's order)
    }
  }
  // A requeued job whose bound pods are gone waits for its group's new pods a while (the
  // scheduler adopts it for them); a bare pod's job has none to wait for.
  const bool group_may_return = job.tag && !job.tag->group.empty() &&
                                !job.tag->group.starts_with("Pod/") && job.state == "PENDING";
  if (!ended && ours && bound_active.empty() && group_may_return && job.not_running_since) {
    plan.not_running_since = job.not_running_since;
    const WallTime due = *job.not_running_since + options.requeue_grace;
    if (all_done && now < due) {
      all_done = false;
      earlier(due);
    }
  }
  if (!ended && ours && all_done) {
    plan.cancel_job = true;
    plan.cancel_reason = reasons.empty()
                             ? "its pods are gone"
                             : fmt::format("all its pods are done ({})", fmt::join(reasons, "; "));
  }
  // The job still holds them, unless it was requeued: then their allocation is gone, and the
  // job waits for the group's new pods, not for them.
  const bool requeued_now = !ended && ours && job.state == "PENDING" &&
                            (job.requeued || job.preempted || job.not_running_since);
  if (!ended && !all_done && !requeued_now) member_release.clear();
  plan.release_pods.insert(plan.release_pods.end(), member_release.begin(), member_release.end());

  // A live job that no longer runs: its bound pods hold nodes Slurm may give to others.
  if (!ended && ours && !bound_active.empty()) {
    if (!RunningLike(job.state)) {
      plan.not_running_since = job.not_running_since.value_or(now);
      plan.requeued = job.requeued || job.state == "PENDING";
      const WallTime due = *plan.not_running_since + options.confirm_after;
      if (job.preempted) {
        // The nodes are the preemptor's now: no confirmation to wait for.
        const std::string msg = fmt::format(
            "Slurm preempted job {} and {} it ({}); deleting the pod{}", job_id,
            job.state == "SUSPENDED" ? "suspended" : "requeued", Words(job),
            group_may_return ? "; the job keeps its id and its place in Slurm's queue for the "
                               "group's new pods"
                             : "");
        for (const kube::Pod* pod : bound_active) {
          plan.delete_pods.push_back({pod, "SlurmJobPreempted", msg, "PreemptionByScheduler"});
        }
      } else if (now >= due) {
        const std::string msg =
            plan.requeued
                ? fmt::format(
                      "Slurm job {} was requeued ({}) after its pods were bound; "
                      "deleting the pod",
                      job_id, Words(job))
                : fmt::format("Slurm job {} is {}, not RUNNING, for {}s; deleting the pod", job_id,
                              Words(job), options.confirm_after.count());
        for (const kube::Pod* pod : bound_active) {
          plan.delete_pods.push_back({pod, "SlurmJobNotRunning", msg});
        }
      } else {
        earlier(due);
      }
    } else if (!job.requeued) {
      // Running: a kubelet refused the pods' claims does not ask again for a minute.
      for (const kube::Pod* pod : bound_active) {
        NudgeVerdict n = JudgeKubeletNudge(*pod, now, options);
        if (n.nudge) plan.nudge_pods.push_back(pod);
        earlier(n.recheck_at);
      }
    } else {
      // Requeued, then started again: on nodes of its own choosing, not the pods'.
      plan.not_running_since = job.not_running_since;
      plan.requeued = true;
      const std::string msg = fmt::format(
          "Slurm job {} was requeued after its pods were bound and runs again as a new "
          "allocation; deleting the pod",
          job_id);
      for (const kube::Pod* pod : bound_active) {
        plan.delete_pods.push_back({pod, "SlurmJobNotRunning", msg});
      }
    }
  }
  if (!ended && ours && group_may_return && plan.not_running_since) {
    plan.hold_until = *plan.not_running_since + options.requeue_grace;
  }
  return plan;
}

bool MayBeStray(const kube::Pod& pod, const std::set<std::string>& held) {
  if (pod.spec.node_name.empty() || !pod.metadata.deletion_timestamp.empty()) return false;
  if (bridge::PodFinished(pod)) return false;
  return pod.metadata.uid.empty() || !held.contains(pod.metadata.uid);
}

std::optional<std::string> JudgeBoundPod(const kube::Pod& pod, const std::set<std::string>& held,
                                         const JobFacts* labelled_job, std::int64_t labelled_id,
                                         const Owner& owner) {
  if (!MayBeStray(pod, held)) return std::nullopt;
  if (labelled_id <= 0) {
    return fmt::format("bound to {} without a Slurm job (no {} label)", pod.spec.node_name,
                       bridge::kJobIdLabel);
  }
  if (labelled_job == nullptr || labelled_job->state == "GONE") {
    return fmt::format("bound to {}, but Slurm does not know its job {}", pod.spec.node_name,
                       labelled_id);
  }
  const std::string& state = labelled_job->state;
  if (bridge::JobEnded(state)) {
    return fmt::format("bound to {}, but its Slurm job {} ended ({})", pod.spec.node_name,
                       labelled_id, state);
  }
  const std::optional<bridge::JobTag>& tag = labelled_job->tag;
  const std::string key = pod.metadata.namespace_ + "/" + pod.metadata.name;
  if (tag && !tag->ours && std::ranges::find(tag->pods, key) != tag->pods.end()) {
    return std::nullopt;  // upstream's job for this pod
  }
  JobFacts facts{.state = state, .tag = tag};
  std::string why = WhyNotMember(labelled_id, facts, pod, owner);
  if (why.empty()) {
    // Listed by a live job of ours that `held` missed (learned since): not a stray.
    return std::nullopt;
  }
  return fmt::format("bound to {}, but {}", pod.spec.node_name, why);
}

std::vector<std::int64_t> ForeignLookingJobs(
    const std::vector<slurm::JobInfo>& jobs, const Owner& owner,
    const std::function<bool(const std::string&, const std::string&)>& pod_exists,
    const std::function<bool(const std::string&)>& namespace_missing) {
  std::vector<std::int64_t> out;
  for (const slurm::JobInfo& j : jobs) {
    if (bridge::JobEnded(j.BaseState()) || j.BaseState().empty()) continue;
    std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
    if (!tag || !tag->BelongsTo(owner.cluster, owner.scheduler) || tag->pods.empty()) continue;
    bool here = false;
    for (std::size_t i = 0; i < tag->pods.size() && !here; ++i) {
      here = pod_exists(tag->pods[i], i < tag->uids.size() ? tag->uids[i] : "");
    }
    if (here) continue;
    bool all_missing = true;
    for (const std::string& p : tag->pods) {
      const std::string ns = p.substr(0, p.find('/'));
      all_missing = all_missing && namespace_missing(ns);
    }
    if (all_missing) out.push_back(j.job_id);
  }
  return out;
}

}  // namespace sb::controllers
