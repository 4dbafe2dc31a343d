// SPDX-License-Identifier: Apache-2.0
//
// One group's job (see scheduler.h): described, submitted (one submit line), updated while it
// waits, and its pods bound when it runs (binder.h's steps, their results applied here).
#include "scheduler/scheduler.h"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bridge/gres.h"
#include "bridge/gres_condition.h"
#include "bridge/group.h"
#include "bridge/hostlist.h"
#include "bridge/job_update.h"
#include "bridge/names.h"
#include "bridge/parts.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "common/time_format.h"
#include "kube/codec.h"

namespace sb::scheduler {
namespace asio = boost::asio;
using asio::awaitable;
using bridge::GroupSpec;
using kube::Pod;

namespace {

// After a group is bound, its duplicates are looked for this long, and at least this many job
// lists (a submit slurmrestd gave up on can reach slurmctld minutes later).
constexpr auto kDuplicateWatch = std::chrono::minutes(5);
constexpr int kDuplicateWatchLists = 5;

}  // namespace

Scheduler::Wanted Scheduler::Describe(const GroupSpec& spec,
                                      const std::vector<const Pod*>& pods) const {
  Wanted w;
  Result<bridge::GroupJob> translated = bridge::TranslateGroup(spec, pods, translate_);
  if (!translated) {
    // The fix is an edit of the pod or of the root object: look again later.
    w.problem = translated.error().message;
    w.retry = std::chrono::seconds(30);
    return w;
  }
  // Each component avoids the nodes its own pods cannot run on (an ordinary job: all the pods).
  for (std::size_t k = 0; k < translated->components.size(); ++k) {
    slurm::JobDescription& desc = translated->components[k];
    const std::vector<const Pod*>& members = translated->pods[k];
    std::vector<bridge::Exclusion> excluded =
        kube_nodes_.Excluded(members, slurm_jobs_.nodes(), translate_.dra_resource_names);
    // DRA: a node whose ResourceSlices disagree with Slurm's GRES (the node controller's
    // SlinkySlurmGRESCompatible=False) cannot name Slurm's devices in a claim.
    if (std::ranges::any_of(members, [&](const Pod* p) {
          return bridge::HasDraResources(*p, translate_.dra_resource_names);
        })) {
      for (const auto& [slurm_name, node] : kube_nodes_.BySlurmName()) {
        if (!bridge::GresIncompatible(*node)) continue;
        if (std::ranges::find(excluded, slurm_name, &bridge::Exclusion::slurm_node) !=
            excluded.end()) {
          continue;
        }
        excluded.push_back({slurm_name, "DRA devices disagree with Slurm's GRES (" +
                                            std::string(bridge::kGresCompatibleCondition) +
                                            "=False)"});
      }
    }
    // N-5: nodes a bound claim's PersistentVolume cannot attach to (local and zonal volumes).
    std::set<std::string> out_already;  // filled only for pods with such volumes
    for (const Pod* p : members) {
      auto va = volume_affinity_.find(PodKey(*p));
      if (va == volume_affinity_.end() || va->second.empty()) continue;
      if (out_already.empty()) {
        for (const bridge::Exclusion& e : excluded) out_already.insert(e.slurm_node);
      }
      for (const auto& [pv, terms] : va->second) {
        for (const std::string& slurm_name : slurm_jobs_.nodes()) {
          auto node = kube_nodes_.BySlurmName().find(slurm_name);
          if (node == kube_nodes_.BySlurmName().end())
            continue;  // excluded already: no Kubernetes node
          if (bridge::MatchesNodeSelectorTerms(terms, *node->second)) continue;
          if (!out_already.insert(slurm_name).second) continue;
          excluded.push_back({slurm_name, "volume node affinity (PersistentVolume " + pv + ")"});
        }
      }
    }
    if (!slurm_jobs_.nodes().empty() && excluded.size() == slurm_jobs_.nodes().size()) {
      std::vector<std::string> why;
      for (const bridge::Exclusion& e : excluded) why.push_back(e.slurm_node + ": " + e.reason);
      w.problem =
          fmt::format("no Slurm node can run the pod{} in Kubernetes ({})",
                      translated->heterogeneous() ? fmt::format(" of part {}", translated->parts[k])
                                                  : std::string(),
                      fmt::join(why, ", "));
      w.retry = std::chrono::seconds(10);
      return w;
    }
    for (const bridge::Exclusion& e : excluded) desc.excluded_nodes.push_back(e.slurm_node);
    // Slurm nodes an earlier job of the group was allocated but Kubernetes lacks.
    // (Only names Slurm still has: Slurm refuses a job that excludes a node it does not know.)
    if (const GroupState* g = groups_.Find(spec.key)) {
      for (const std::string& n : g->excluded) {
        if (std::ranges::find(slurm_jobs_.nodes(), n) != slurm_jobs_.nodes().end() &&
            std::ranges::find(desc.excluded_nodes, n) == desc.excluded_nodes.end()) {
          desc.excluded_nodes.push_back(n);
        }
      }
    }
    // One pod per node: a node range from the annotations could never be bound.
    const int count = translated->heterogeneous()
                          ? static_cast<int>(members.size())
                          : std::max(spec.size, static_cast<int>(pods.size()));
    if (std::optional<std::string> note = FitNodeCount(desc, count)) {
      w.note = std::move(*note);
    }
  }
  if (translated->heterogeneous()) {
    for (const Pod* p : pods) {
      if (!bridge::HasDraResources(*p, translate_.dra_resource_names)) continue;
      w.problem = fmt::format(
          "pod {}: DRA devices (deviceclass.resource.kubernetes.io/...) are not supported in a "
          "heterogeneous job yet; ask for GPUs with nvidia.com/gpu there, or run the parts as "
          "separate groups",
          p->metadata.name);
      w.retry = std::chrono::seconds(30);
      return w;
    }
    w.job = translated->components.front();
    w.components = std::move(translated->components);
    w.parts = std::move(translated->parts);
    for (const std::vector<const Pod*>& members : translated->pods) {
      w.pods.insert(w.pods.end(), members.begin(), members.end());
    }
  } else {
    w.job = std::move(translated->components.front());
  }
  return w;
}

awaitable<Result<Next>> Scheduler::Submit(const GroupSpec& spec, std::vector<const Pod*> pods) {
  Wanted wanted = Describe(spec, pods);
  if (!wanted.problem.empty()) {
    spdlog::warn("{}: {}", spec.key, wanted.problem);
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, wanted.problem);
    co_await WritePodGroupStatus(spec, false, "Unschedulable", wanted.problem);
    co_return RetryLater(pods, wanted.retry);
  }
  // At most maxConcurrentSubmits submits at once (in the queue's order), and at most as many
  // workers wait for a slot: beyond that a group waits in a line that holds no worker, and is
  // queued again when a waiter gets its slot (review N-20). So the other workers go on binding
  // and reporting however slow slurmctld is with submits.
  if (submit_slots_.available() == 0 &&
      submit_slots_.waiting() >= static_cast<std::size_t>(config_.max_concurrent_submits)) {
    if (std::ranges::find(submit_line_, spec.key) == submit_line_.end()) {
      submit_line_.push_back(spec.key);
    }
    co_return Next::Done();
  }
  std::optional<async::Semaphore::Permit> permit = co_await submit_slots_.Acquire();
  CallSubmitLine();
  // A scheduler that stops (lost leadership) submits nothing more: the next leader does.
  if (!permit || stopping_ || !MayWrite()) co_return Next::Done();
  const std::string partition = wanted.job.partition;
  const async::Clock::TimePoint sent = clock_.Now();
  Result<slurm::JobSubmitResult> submitted;
  if (wanted.components.empty()) {
    submitted = co_await slurm_.SubmitJob(wanted.job);
  } else {
    submitted = co_await slurm_.SubmitHetJob(wanted.components);
  }
  permit.reset();
  CallSubmitLine();
  if (!submitted) {
    ++stats_.submit_errors;
    const Error& e = submitted.error();
    if (SubmitOutcomeUnknown(e.code)) {
      // Slurm may have made the job: Slurm's jobs are read before the group is looked at again.
      if (GroupState* g = groups_.Find(spec.key)) g->submit_doubt = clock_.Now();
      slurm_jobs_.Doubt();
      spdlog::warn("{}: submit outcome unknown ({}); Slurm's jobs are read before trying again",
                   spec.key, e.ToString());
    }
    // Only an answer from Slurm is a refusal: a submit that did not get through (slurmrestd
    // down, a reply lost) says so, not "Slurm refused" (seen in the chaos runs, issue #14).
    const std::string msg =
        SubmitOutcomeUnknown(e.code)
            ? "submitting the Slurm job failed: " + ErrorWords(e) + "; trying again"
            : "Slurm refused the job: " + ErrorWords(e);
    spdlog::warn("{}: {}", spec.key, msg);
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, msg);
    if (!SubmitOutcomeUnknown(e.code)) {
      co_await WritePodGroupStatus(spec, false, "Unschedulable", msg);
    }
    if (e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kPermissionDenied) {
      co_return RetryLater(pods, std::chrono::seconds(30));
    }
    co_return tl::unexpected(e);
  }
  ++stats_.jobs_submitted;
  stats_.submit_latency.Observe(std::chrono::duration<double>(clock_.Now() - sent).count());
  if (GroupState* g = groups_.Find(spec.key)) g->submit_doubt.reset();
  TrackedJob job{.id = submitted->job_id,
                 .group = spec.key,
                 .state = "PENDING",
                 .partition = partition,
                 .submitted = clock_.Now(),
                 .submit_sent = sent,
                 .sent = std::move(wanted.job),
                 .parts = wanted.parts};
  if (GroupState* g = groups_.Find(spec.key); g != nullptr && g->spec.size != spec.size) {
    job.size = spec.size;
  }
  // The job's pods in its tag's order: a heterogeneous job's by component.
  if (!wanted.pods.empty()) pods = wanted.pods;
  for (const Pod* pod : pods) {
    if (auto it = seen_.find(pod->metadata.uid); it != seen_.end()) {
      if (job.pod_seen == async::Clock::TimePoint{} || it->second < job.pod_seen) {
        job.pod_seen = it->second;
      }
    }
    job.uids.push_back(pod->metadata.uid);
    job.pods.push_back(pod->metadata.namespace_ + "/" + pod->metadata.name);
  }
  const std::int64_t id = job.id;
  const std::vector<std::string> parts = job.parts;
  slurm_jobs_.Track(std::move(job), /*submitted=*/true);
  if (parts.empty()) {
    spdlog::info("{}: submitted Slurm job {} for {} pod(s)", spec.key, id, pods.size());
  } else {
    std::vector<std::string> shape;
    for (std::size_t k = 0; k < wanted.components.size(); ++k) {
      shape.push_back(fmt::format("+{} {} ({} node(s))", k, parts[k], wanted.components[k].nodes));
    }
    spdlog::info("{}: submitted Slurm heterogeneous job {} for {} pod(s): {}", spec.key, id,
                 pods.size(), fmt::join(shape, ", "));
  }
  if (!wanted.note.empty()) {
    spdlog::warn("{}: {}", spec.key, wanted.note);
    Emit(pods, "SlurmNodeCountSet", wanted.note);
  }

  // The next pass labels the pods (job id, finalizer, toleration).
  co_return Next::Now();
}

void Scheduler::CallSubmitLine() {
  // A place among the waiters (one got its slot, or a slot is free): the next group of the line
  // goes back to the queue. One that finds no place after all joins the line again.
  if (submit_line_.empty() ||
      submit_slots_.waiting() >= static_cast<std::size_t>(config_.max_concurrent_submits)) {
    return;
  }
  QueueGroup(submit_line_.front());
  submit_line_.pop_front();
}

awaitable<Scheduler::Updated> Scheduler::UpdatePending(const GroupSpec& spec,
                                                       std::vector<const Pod*> pods) {
  TrackedJob* tracked = slurm_jobs_.Find(spec.key);
  if (tracked == nullptr || !tracked->state.pending()) co_return Updated{};
  const std::int64_t id = tracked->id;
  // A heterogeneous job keeps the description it was submitted with (Slurm updates one
  // component at a time; not done yet): it starts as it is, or ends and is submitted anew.
  if (!tracked->parts.empty()) co_return Updated{};
  // `pods`: the job's own pods first, cut to the group size (PlanGroup's members).
  Wanted wanted = Describe(spec, pods);
  if (!wanted.parts.empty()) co_return Updated{};  // now heterogeneous: the job is kept as it is
  if (!wanted.problem.empty()) {
    const std::string msg =
        fmt::format("{}; Slurm job {} waits with the description it had", wanted.problem, id);
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, msg);
    co_return Updated{.stop = true, .next = RetryLater(pods, wanted.retry)};
  }
  // Adopted jobs: what they were submitted with is unknown, so every field updated in place is
  // sent once (and the others are taken to be as submitted).
  bridge::JobUpdate update = bridge::PendingJobUpdate(tracked->sent, wanted.job);
  if (!update.resubmit.empty()) {
    // (Named: no co_await inside a braced initializer, gcc 12.)
    Next next = co_await Resubmit(spec, pods, id, update.resubmit);
    co_return Updated{.stop = true, .next = std::move(next)};
  }
  // The pods the job is for from now on (its tag follows its members: a re-created one).
  auto follow = [&](TrackedJob& t) {
    t.uids.clear();
    t.pods.clear();
    for (const Pod* pod : pods) {
      t.uids.push_back(pod->metadata.uid);
      t.pods.push_back(pod->metadata.namespace_ + "/" + pod->metadata.name);
    }
  };
  if (update.changed.empty()) {
    tracked->sent = std::move(wanted.job);
    follow(*tracked);
    co_return Updated{};
  }
  Result<bool> r = co_await slurm_.UpdateJob(id, std::move(update.changes));
  tracked = slurm_jobs_.Find(spec.key, id);  // (the await may have changed the map)
  if (tracked == nullptr) co_return Updated{};
  if (r) {
    ++stats_.jobs_updated;
    tracked->sent = std::move(wanted.job);
    follow(*tracked);
    spdlog::info(
        "{}: pending Slurm job {} updated: {}{}", spec.key, id, fmt::join(update.changed, ", "),
        update.kept.empty() ? std::string()
                            : fmt::format(" (Slurm keeps its {})", fmt::join(update.kept, ", ")));
    co_return Updated{};
  }
  const Error& e = r.error();
  // Started or ended meanwhile: the next poll sees it.
  if (e.code == ErrorCode::kFailedPrecondition || e.code == ErrorCode::kNotFound) {
    co_return Updated{};
  }
  if (e.code == ErrorCode::kUnavailable || e.code == ErrorCode::kDeadlineExceeded) {
    // Tried again after a while; the pods are still told where the job stands now.
    spdlog::warn("{}: updating pending Slurm job {} failed: {}", spec.key, id, e.ToString());
    co_return Updated{.next = RetryLater(pods, std::chrono::seconds(5))};
  }
  // Refused: said once, and not asked again until the description changes again.
  tracked->sent = std::move(wanted.job);
  const std::string msg = fmt::format("Slurm refused to update pending job {} ({}): {}", id,
                                      fmt::join(update.changed, ", "), ErrorWords(e));
  spdlog::warn("{}: {}", spec.key, msg);
  for (const Pod* pod : pods) {
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata), kube::EventType::kWarning,
                   "SlurmJobUpdateFailed", msg);
  }
  co_return Updated{};
}

bool Scheduler::MayWrite() {
  if (!write_gate_ || write_gate_()) return true;
  if (!fenced_) {
    spdlog::warn("leadership lost: the scheduler submits and binds nothing more");
    fenced_ = true;
  }
  return false;
}

awaitable<Next> Scheduler::Resubmit(const GroupSpec& spec, const std::vector<const Pod*>& pods,
                                    std::int64_t id, const std::vector<std::string>& fields) {
  // Review R-1: the bridge's token is an operator's, and Slurm takes an operator's update of a
  // pending job's time limit or TRES as set by an admin, past partition and QOS limits. The job
  // is cancelled and submitted anew instead, which Slurm checks as it does any submit; it goes
  // to the back of the queue, as a job its user cancelled and submitted again would.
  if (!MayWrite()) co_return Next::Done();
  const slurm::CancelOptions opts;  // named: no braced temporary inside a co_await (gcc 12)
  Result<bool> r = co_await slurm_.CancelJob(id, opts);
  if (!r && r.error().code != ErrorCode::kNotFound) {
    spdlog::warn("{}: cancelling pending Slurm job {} to submit it anew failed: {}", spec.key, id,
                 r.error().ToString());
    co_return RetryLater(pods, std::chrono::seconds(5));
  }
  slurm_jobs_.Unlist(id);
  slurm_jobs_.Untrack(spec.key, id);
  ++stats_.jobs_resubmitted;
  const std::string msg = fmt::format(
      "{} changed: pending Slurm job {} cancelled, a new job is submitted (Slurm checks a job "
      "against its partition, QOS and association limits when it is submitted)",
      fmt::join(fields, ", "), id);
  spdlog::info("{}: {}", spec.key, msg);
  Emit(pods, "SlurmJobResubmitted", msg);
  co_return Next::Now();
}

awaitable<Result<Next>> Scheduler::Bind(const GroupSpec& spec, std::vector<const Pod*> pods,
                                        TrackedJob job) {
  // The steps are binder.h's; this applies what each returns to the scheduler's state.
  job.bind_began = clock_.Now();
  // 1. Where the job runs (known already when a job list carried its nodes; a heterogeneous
  // job's components are read from its records).
  const bool het = !job.parts.empty();
  std::optional<Allocation> allocation;  // read here: the DRA step maps its layout too
  if (job.nodes.empty() || (het && job.components.size() != job.parts.size())) {
    const bool layout_first =
        !het && job.state.running() && job.submitted != async::Clock::TimePoint{};
    Result<Allocation> a = co_await binder_.ReadAllocation(job.id, layout_first);
    if (!a) co_return tl::unexpected(a.error());
    if (!slurm_jobs_.ApplyAllocation(spec.key, job, *a)) {
      co_return Next::Now();  // gone or not running: planned again
    }
    allocation = std::move(*a);
  }
  job.nodes_read = clock_.Now();
  if (het && job.components.size() != job.parts.size()) {
    co_return MakeError(ErrorCode::kInternal,
                        fmt::format("Slurm job {} has {} component(s), its tag {} part(s)", job.id,
                                    job.components.size(), job.parts.size()));
  }
  // Every node of every component, and the component of each (empty: an ordinary job).
  std::vector<int> node_part;
  Result<std::vector<std::string>> slurm_nodes = std::vector<std::string>{};
  std::vector<std::vector<std::string>> component_nodes;  // a heterogeneous job's, expanded
  if (het) {
    for (std::size_t k = 0; k < job.components.size(); ++k) {
      Result<std::vector<std::string>> c = bridge::ExpandHostlist(job.components[k].nodes);
      if (!c) co_return tl::unexpected(c.error());
      slurm_nodes->insert(slurm_nodes->end(), c->begin(), c->end());
      node_part.insert(node_part.end(), c->size(), static_cast<int>(k));
      component_nodes.push_back(std::move(*c));
    }
  } else {
    slurm_nodes = bridge::ExpandHostlist(job.nodes);
  }
  if (!slurm_nodes) co_return tl::unexpected(slurm_nodes.error());
  // 2. Pods of this job bound before (an earlier run, a gang member that is re-created) keep
  // their nodes while they are active. A job this process submitted and never bound for has
  // none: a holder is a labelled pod that is bound, and only this process binds pods to the
  // jobs it submits (a pod bound to an older job under the same id, after Slurm's ids wrapped
  // or its state was lost, is not this job's); so the LIST, which costs the apiserver a scan of
  // the namespace's pods per job, is skipped.
  std::vector<Holder> holders;
  if (job.submitted == async::Clock::TimePoint{} || job.bind_tried) {
    Result<std::vector<Holder>> h = co_await binder_.ReadHolders(spec.namespace_, job.id);
    if (!h) co_return tl::unexpected(h.error());
    holders = std::move(*h);
  }
  if (TrackedJob* t = slurm_jobs_.Find(spec.key, job.id)) t->bind_tried = true;
  // 3. The plan.
  BindInput in{.job = ViewOf(job),
               .slurm_nodes = std::move(*slurm_nodes),
               .node_part = std::move(node_part),
               .pods = pods,
               .holders = std::move(holders),
               .kind = spec.kind,
               .name = spec.name,
               .now = clock_.Now()};
  for (const auto& [slurm_name, node] : kube_nodes_.BySlurmName()) {
    in.kube_node_of[slurm_name] = node->metadata.name;
  }
  in.unmapped_since = slurm_jobs_.UnmappedSince(job.id);
  if (het) {
    for (const Pod* pod : pods) {
      in.part_of[pod->metadata.uid] = bridge::PartOffset(job.parts, bridge::PartName(spec, *pod));
    }
  }
  if (!in.holders.empty()) {
    // A refill: each waiting pod's own constraints against the job's nodes.
    for (const Pod* pod : pods) {
      std::set<std::string>& out = in.excluded_for[pod->metadata.uid];
      for (const bridge::Exclusion& e :
           bridge::ExcludedNodes({pod}, in.slurm_nodes, kube_nodes_.BySlurmName(),
                                 &kube_nodes_.BoundPods().others_usage,
                                 &kube_nodes_.BoundPods().ports, &translate_.dra_resource_names)) {
        if (auto k = in.kube_node_of.find(e.slurm_node); k != in.kube_node_of.end()) {
          out.insert(k->second);
        }
      }
    }
  }
  const BindPlan plan = PlanBind(in, planner_);
  if (co_await OnUnmapped(spec, pods, job.id, plan)) co_return Next::Now();
  if (!plan.report.empty()) {
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, plan.report);
  }
  // Pods left waiting (a refill short of free nodes; a job on a node Kubernetes lacks): the
  // group looks again then, whatever this pass binds.
  const Next recheck =
      plan.recheck_at
          ? Next::After(std::max(async::Clock::Duration::zero(), *plan.recheck_at - clock_.Now()))
          : Next::Done();
  if (plan.assign.empty()) co_return recheck;

  // 4. Pre-bind writes: pods the job was not submitted for (a re-created member) join its tag,
  // so that the controllers know them as the job's; each pod carries the finalizer and the
  // toleration (the webhook's at CREATE, else patched after the submit; a pod the cache does not
  // show with them yet is patched here, with the node's annotations), and the job id: on the
  // Binding where the apiserver copies its labels, else in that patch.
  if (plan.retag) {
    Result<TagMembers> tag = co_await binder_.Retag(spec, job.id, in.holders, pods, plan.assign);
    if (!tag) co_return tl::unexpected(tag.error());
    slurm_jobs_.ApplyTag(spec.key, job.id, *tag);
  }
  std::vector<Assignment> assign;
  if (het) {
    // Each component's GPUs: its own nodes' entries (components may share a node).
    for (std::size_t k = 0; k < job.components.size(); ++k) {
      std::vector<std::pair<const Pod*, std::string>> mine;
      for (const auto& a : plan.assign) {
        if (in.part_of[a.first->metadata.uid] == static_cast<int>(k)) mine.push_back(a);
      }
      std::vector<Assignment> part =
          Annotate(mine, in.kube_node_of, component_nodes[k], job.components[k].gres_detail);
      assign.insert(assign.end(), part.begin(), part.end());
    }
  } else {
    assign = Annotate(plan.assign, in.kube_node_of, in.slurm_nodes, job.gres_detail);
  }
  const bool ride = binder_.LabelsRideBinding();
  for (Assignment& a : assign) {
    const int offset = het ? in.part_of[a.pod->metadata.uid] : -1;
    if (ride) a.labels = JobLabels(job.id, offset);
    if (Labelled(*a.pod, job.id, config_.scheduler_name, offset, ride)) continue;
    ++stats_.bind_patches;
    Result<void> r = co_await binder_.LabelPod(*a.pod, job.id, a.annotations, offset);
    if (!r) co_return tl::unexpected(r.error());
  }
  // DRA: each pod's claim names the devices Slurm gave the job on its node.
  if (!config_.device_profiles.empty()) {
    std::map<std::string, std::string> slurm_name_of;
    for (const auto& [slurm_name, kube_name] : in.kube_node_of)
      slurm_name_of[kube_name] = slurm_name;
    Result<void> claims = co_await binder_.WriteClaims(job.id, assign, slurm_name_of, DraView(),
                                                       allocation ? &*allocation : nullptr);
    if (!claims) co_return tl::unexpected(claims.error());
  }
  // 5. The Bindings (the apiserver adds their annotations to the pods').
  if (!MayWrite()) co_return Next::Done();
  Binder::Bound bound = co_await binder_.BindPods(job.id, assign);
  for (const Assignment& a : bound.bound) {
    reported_.erase(a.pod->metadata.uid);
    seen_.erase(a.pod->metadata.uid);
    // Hidden until the watch drops it; when the watch already has (its DELETED came before the
    // Binding's answer), nothing would ever erase the entry.
    if (std::shared_ptr<const Pod> cached = pods_.cache().Get(PodKey(*a.pod));
        cached && cached->metadata.uid == a.pod->metadata.uid) {
      bound_.insert(a.pod->metadata.uid);
    }
  }
  if (bound.error) co_return tl::unexpected(*bound.error);
  TraceStages(spec.key, job, plan.assign.size());
  // From here on the controllers own the pods and the job. A member re-created later finds the
  // job again among the scheduler's listed jobs; a second job of the group that a list shows
  // meanwhile is cancelled.
  slurm_jobs_.Bound(
      spec.key, job.id, spec.namespace_,
      clock_.Now() + std::max<async::Clock::Duration>(
                         kDuplicateWatch, kDuplicateWatchLists * config_.job_list_interval));
  slurm_jobs_.Untrack(spec.key, job.id);
  if (GroupState* g = groups_.Find(spec.key)) g->ran = true;
  if (!bound.bound.empty()) {
    std::string message = fmt::format("Slurm job {} is RUNNING; {} pod(s) of the group bound",
                                      job.id, bound.bound.size());
    co_await WritePodGroupStatus(spec, true, "Scheduled", std::move(message));
  }
  co_return recheck;
}

awaitable<bool> Scheduler::OnUnmapped(const GroupSpec& spec, const std::vector<const Pod*>& pods,
                                      std::int64_t id, const BindPlan& plan) {
  if (plan.unmapped.empty()) {
    slurm_jobs_.ClearUnmapped(id);
    co_return false;
  }
  slurm_jobs_.MarkUnmapped(id);
  if (!plan.cancel) co_return false;
  slurm_jobs_.ClearUnmapped(id);
  if (GroupState* g = groups_.Find(spec.key))
    g->excluded.insert(plan.unmapped.begin(), plan.unmapped.end());
  slurm_jobs_.Untrack(spec.key, id);
  spdlog::warn("{}: {}", spec.key, plan.event_message);
  Emit(pods, plan.event_reason, plan.event_message);
  co_await slurm_jobs_.CancelJob(*plan.cancel);
  co_return true;
}

void Scheduler::TraceStages(const std::string& group, const TrackedJob& job, std::size_t pods) {
  // The stage trace, for a slow installation: submit -> RUNNING seen -> pods bound.
  const TrackedJob* tracked = slurm_jobs_.Find(group, job.id);
  if (tracked != nullptr && tracked->running_seen != async::Clock::TimePoint{}) {
    stats_.bind_latency.Observe(
        std::chrono::duration<double>(clock_.Now() - tracked->running_seen).count());
  }
  if (tracked == nullptr || tracked->submitted == async::Clock::TimePoint{} ||
      !spdlog::should_log(spdlog::level::debug)) {
    return;
  }
  const auto ms = [](async::Clock::Duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  const TrackedJob& t = *tracked;
  // Before the submit's answer: the pod's first watch event, the submit sent.
  const std::string before =
      t.pod_seen == async::Clock::TimePoint{}
          ? ""
          : fmt::format("pod seen -{} ms, submit sent -{} ms, ", ms(t.submitted - t.pod_seen),
                        ms(t.submitted - t.submit_sent));
  // After RUNNING seen: a worker takes the group, its nodes are read (the layout), and the pods
  // are labelled if need be and bound.
  spdlog::debug(
      "{}: Slurm job {} stages: {}submitted +0 ms, RUNNING seen +{} ms, bind began +{} ms, "
      "nodes read +{} ms, {} pod(s) labelled and bound +{} ms",
      group, job.id, before,
      t.running_seen == async::Clock::TimePoint{} ? -1 : ms(t.running_seen - t.submitted),
      ms(job.bind_began - t.submitted), ms(job.nodes_read - t.submitted), pods,
      ms(clock_.Now() - t.submitted));
}

}  // namespace sb::scheduler
