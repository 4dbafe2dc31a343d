// SPDX-License-Identifier: Apache-2.0
#include "controllers/pod/pod_controller.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>

#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "common/time_format.h"
#include "kube/codec.h"
#include "wiring/clients.h"
#include "wiring/tag_pods.h"

namespace sb::controllers {
namespace asio = boost::asio;
using asio::awaitable;
using kube::Pod;

namespace {

constexpr std::string_view kJobIndex = "slurm-jobid";

std::int64_t JobIdOf(const Pod& pod) {
  auto it = pod.metadata.labels.find(std::string(bridge::kJobIdLabel));
  if (it == pod.metadata.labels.end()) return 0;
  std::int64_t id = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), id);
  return ec == std::errc() && p == it->second.data() + it->second.size() && id > 0 ? id : 0;
}

bool Alive(std::string_view state) { return !state.empty() && !bridge::JobEnded(state); }

}  // namespace

bool HasBridgeTag(const slurm::JobInfo& job) {
  return bridge::ParseJobTag(job.admin_comment).has_value();
}

PodController::PodController(asio::any_io_executor executor, kube::Client& kube,
                             slurm::Client& slurm, async::Clock& clock, bridge::Config config,
                             PodControllerOptions options, slurm::JobWatch* watch,
                             kube::Informer<kube::Node>* nodes)
    : executor_(std::move(executor)),
      kube_(kube),
      slurm_(slurm),
      clock_(clock),
      config_(std::move(config)),
      options_(options),
      owner_{config_.cluster_name, config_.scheduler_name},
      pods_(kube, kube::PodsRef(),
            kube::InformerOptions{
                .reflector = {.list_options = {.field_selector = "spec.schedulerName=" +
                                                                 config_.scheduler_name}}}),
      own_nodes_(nodes != nullptr
                     ? nullptr
                     : std::make_unique<kube::Informer<kube::Node>>(kube, kube::NodesRef())),
      nodes_(nodes != nullptr ? *nodes : *own_nodes_),
      event_sink_(kube),
      recorder_(clock, event_sink_,
                kube::EventRecorderOptions{.source = {.component = "slurm-bridge-controllers"}}),
      queue_(clock, kube::BackoffPolicy{.base = std::chrono::milliseconds(250),
                                        .cap = std::chrono::seconds(60)}),
      own_watch_(watch != nullptr
                     ? nullptr
                     : std::make_unique<slurm::JobWatch>(executor_, slurm, clock,
                                                         wiring::JobWatchOptionsOf(config_))),
      watch_(watch != nullptr ? watch : own_watch_.get()),
      tasks_(executor_, clock, "pod controller") {
  pods_.cache().AddIndex(std::string(kJobIndex), [](const Pod& p) {
    const std::int64_t id = JobIdOf(p);
    return id > 0 ? std::vector<std::string>{std::to_string(id)} : std::vector<std::string>{};
  });
  pods_.cache().AddIndex(std::string(kube::kIndexNodeName), kube::PodNodeNameIndex());
  pods_.cache().AddHandlers({.on_add = [this](const auto& p) { OnPod(*p); },
                             .on_update =
                                 [this](const auto& old, const auto& p) {
                                   OnPod(*old);
                                   OnPod(*p);
                                 },
                             .on_delete = [this](const auto& p) { OnPod(*p); }});
  // A node that goes away or stops being Ready may release the jobs of pods stuck on it. The
  // pods on a node come from the spec.nodeName index, not a scan of every pod.
  nodes_.cache().AddHandlers(
      {.on_add = nullptr,
       .on_update =
           [this](const auto&, const auto& n) {
             for (const auto& p : pods_.cache().ByIndex(kube::kIndexNodeName, n->metadata.name)) {
               if (!p->metadata.deletion_timestamp.empty()) OnPod(*p);
             }
           },
       .on_delete =
           [this](const auto& n) {
             for (const auto& p : pods_.cache().ByIndex(kube::kIndexNodeName, n->metadata.name)) {
               OnPod(*p);
             }
           }});
}

PodController::~PodController() = default;

void PodController::OnPod(const Pod& pod) {
  const std::int64_t id = JobIdOf(pod);
  if (id <= 0) return;
  first_seen_.try_emplace(id, clock_.Now());
  queue_.Add(id);
}

awaitable<void> PodController::Run() {
  tasks_.Spawn(pods_.Run());
  if (own_nodes_) tasks_.Spawn(own_nodes_->Run());
  tasks_.Spawn(recorder_.Run());
  while (!pods_.HasSynced() || !nodes_.HasSynced()) {
    if (!co_await tasks_.Sleep(std::chrono::milliseconds(20))) break;
  }
  if (!stopping_) {
    ready_ = true;
    spdlog::info("pod controller started: {} pods of {}", pods_.cache().size(),
                 config_.scheduler_name);
    for (int i = 0; i < 4; ++i) tasks_.Spawn(Worker());
    if (own_watch_) tasks_.Spawn(own_watch_->Run());
    watch_->Subscribe(this);
    tasks_.Spawn(ReadAllJobsOnce());
    tasks_.Spawn(Sweep());
  }
  co_await tasks_.Join();
  watch_->Unsubscribe(this);
}

void PodController::Stop() {
  if (stopping_) return;
  stopping_ = true;
  pods_.Stop();
  if (own_nodes_) own_nodes_->Stop();
  queue_.ShutDown();
  recorder_.ShutDown();
  watch_->Unsubscribe(this);
  if (own_watch_) own_watch_->Stop();
  tasks_.Stop();
}

awaitable<void> PodController::Worker() {
  co_await kube::RunQueueWorker(
      queue_, [this](std::int64_t id) { return Reconcile(id); },
      [this](std::int64_t id, const Error& e) {
        ++stats_.errors;
        spdlog::warn("Slurm job {}: {}", id, e.ToString());
      });
}

awaitable<Result<void>> PodController::ReadJob(std::int64_t job_id, JobRecord& rec) {
  Result<slurm::JobInfo> j = co_await slurm_.GetJob(job_id);
  if (j) {
    Learn(*j);
    rec.state = std::string(j->BaseState());
    rec.tag = bridge::ParseJobTag(j->admin_comment);
    rec.reason = j->state_reason;
    rec.description = j->state_description;
    rec.preempted = rec.state == "PREEMPTED" || j->preempt_time.Value().value_or(0) > 0;
  } else if (j.error().code == ErrorCode::kNotFound) {
    Forget(job_id);
    rec.state = "GONE";
    rec.tag.reset();
    rec.reason.clear();
    rec.description.clear();
    rec.preempted = false;
  } else {
    co_return tl::unexpected(j.error());
  }
  rec.read = true;
  co_return Result<void>{};
}

void PodController::ReportOnce(const Pod& pod, const std::string& key, const std::string& reason,
                               const std::string& message) {
  if (!reported_.emplace(pod.metadata.uid, key).second) return;
  spdlog::warn("{}/{}: {}", pod.metadata.namespace_, pod.metadata.name, message);
  recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod.metadata), kube::EventType::kWarning,
                 reason, message);
}

awaitable<Result<void>> PodController::Reconcile(std::int64_t job_id) {
  // A copy: the poll may drop the entry while this awaits.
  JobRecord rec;
  if (auto it = jobs_.find(job_id); it != jobs_.end()) rec = it->second;
  bool fresh = false;
  if (rec.state.empty() || !rec.read) {
    Result<void> r = co_await ReadJob(job_id, rec);
    if (!r) co_return r;
    fresh = true;
  }

  // The pods: those labelled with the job and those its tag names (same UID), each once.
  std::vector<std::shared_ptr<const Pod>> held;
  std::vector<const Pod*> pods;
  auto gather = [&] {
    held = pods_.cache().ByIndex(kJobIndex, std::to_string(job_id));
    if (rec.tag && rec.tag->BelongsTo(owner_.cluster, owner_.scheduler)) {
      for (std::size_t i = 0; i < rec.tag->pods.size(); ++i) {
        std::shared_ptr<const Pod> p = pods_.cache().Get(rec.tag->pods[i]);
        if (p && (i >= rec.tag->uids.size() || p->metadata.uid == rec.tag->uids[i]) &&
            std::ranges::find(held, p) == held.end()) {
          held.push_back(p);
        }
      }
    }
    pods.clear();
    for (const auto& p : held) pods.push_back(p.get());
  };
  gather();
  if (pods.empty() && bridge::JobEnded(rec.state)) {
    jobs_.erase(job_id);
    co_return Result<void>{};
  }

  std::map<std::string, const kube::Node*> nodes;
  std::vector<std::shared_ptr<const kube::Node>> node_list = nodes_.cache().List();
  for (const auto& n : node_list) nodes[n->metadata.name] = n.get();
  auto plan_now = [&] {
    JobFacts facts{.state = rec.state,
                   .tag = rec.tag,
                   .reason = rec.reason,
                   .description = rec.description,
                   .preempted = rec.preempted,
                   .not_running_since = rec.not_running_since,
                   .requeued = rec.requeued,
                   .gone_since = rec.gone_since};
    return PlanJob(job_id, facts, owner_, pods, nodes, clock_.WallNow(), options_.lifecycle);
  };
  JobPlan plan = plan_now();
  if (!fresh &&
      (plan.Acts() || !plan.strays.empty() || plan.not_running_since != rec.not_running_since ||
       plan.requeued != rec.requeued || plan.gone_since != rec.gone_since)) {
    // Before acting, read the job again: the polled state may be old, the id reused. A pod the
    // cached tag does not list may be one the job was given since (a requeued job the
    // scheduler adopted for its group's new pods): read again before calling it a stray.
    Result<void> r = co_await ReadJob(job_id, rec);
    if (!r) co_return r;
    fresh = true;
    gather();
    plan = plan_now();
  }
  if (fresh) {
    // The not-RUNNING record only ever comes from a read newer than the pods' binding.
    rec.not_running_since = plan.not_running_since;
    rec.requeued = plan.requeued;
    rec.gone_since = plan.gone_since;
  }
  jobs_[job_id] = rec;
  // Kept after the job's pods are gone (and the job with them from the polls): the sweep's.
  if (plan.hold_until) {
    held_for_group_[job_id] = *plan.hold_until;
  } else {
    held_for_group_.erase(job_id);
  }
  if (rec.state == "GONE" && !plan.delete_pods.empty() && stats_.gone_brake_engaged) {
    HoldGoneDeletions(job_id, plan);
  }

  std::set<const Pod*> strays;
  for (const StrayPod& s : plan.strays) {
    strays.insert(s.pod);
    ReportOnce(*s.pod, "job " + std::to_string(job_id), "SlurmJobNotOurs",
               fmt::format("label {}={} ignored: {}; the job is left alone", bridge::kJobIdLabel,
                           job_id, s.why));
  }

  if (plan.cancel_job && strays.size() == pods.size() && rec.tag) {
    // No pod of the job in the cache: the apiserver must agree before the job goes (a cache
    // that lags behind the scheduler's must not cancel a job whose pod it has not seen yet).
    for (std::size_t i = 0; i < rec.tag->pods.size(); ++i) {
      const std::string& key = rec.tag->pods[i];
      const std::size_t slash = key.find('/');
      if (slash == std::string::npos) continue;
      Result<Pod> p = co_await kube::GetPod(kube_, key.substr(0, slash), key.substr(slash + 1));
      if (!p && p.error().code != ErrorCode::kNotFound) co_return tl::unexpected(p.error());
      if (p && (i >= rec.tag->uids.size() || p->metadata.uid == rec.tag->uids[i])) {
        spdlog::info("Slurm job {}: its pod {} exists, though not seen yet; job kept", job_id, key);
        plan.cancel_job = false;
        queue_.AddAfter(job_id, std::chrono::seconds(1));
        break;
      }
    }
  }
  if (plan.cancel_job) {
    slurm::CancelOptions opts;
    Result<bool> c = co_await slurm_.CancelJob(job_id, opts);
    if (!c && c.error().code != ErrorCode::kNotFound) co_return tl::unexpected(c.error());
    ++stats_.jobs_cancelled;
    rec.state = "CANCELLED";
    jobs_[job_id] = rec;
    Forget(job_id);
    spdlog::info("cancelled Slurm job {}: {}", job_id, plan.cancel_reason);
    for (const Pod* pod : pods) {
      if (strays.contains(pod)) continue;
      recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata),
                     kube::EventType::kNormal, "SlurmJobCancelled",
                     fmt::format("cancelled Slurm job {}: {}", job_id, plan.cancel_reason));
    }
  }
  for (const PodDeletion& d : plan.delete_pods) {
    const Pod* pod = d.pod;
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata), kube::EventType::kWarning,
                   d.reason, d.message);
    if (!d.disruption.empty()) co_await MarkDisrupted(*pod, d.disruption, d.message);
    kube::DeleteOptions del;
    del.uid = pod->metadata.uid;
    del.grace_period_seconds = d.grace_period_seconds;
    Result<void> r =
        co_await kube::DeletePod(kube_, pod->metadata.namespace_, pod->metadata.name, del);
    if (!r && r.error().code != ErrorCode::kNotFound && r.error().code != ErrorCode::kConflict) {
      co_return tl::unexpected(r.error());
    }
    ++stats_.pods_deleted;
    spdlog::info("{}/{}: deleted: {}", pod->metadata.namespace_, pod->metadata.name, d.message);
  }
  for (const Pod* pod : plan.release_pods) {
    Result<void> r = co_await ReleaseFinalizer(*pod);
    if (!r) co_return tl::unexpected(r.error());
  }
  for (const Pod* pod : plan.nudge_pods) co_await NudgeKubelet(*pod);
  ++stats_.reconciles;
  spdlog::debug("Slurm job {} reconciled: {}, {} pod(s), {} not its own", job_id, rec.state,
                pods.size(), plan.strays.size());
  if (plan.recheck_at) {
    const auto wait = *plan.recheck_at - clock_.WallNow() + std::chrono::milliseconds(100);
    queue_.AddAfter(job_id, std::chrono::duration_cast<async::Clock::Duration>(wait));
  }
  co_return Result<void>{};
}

awaitable<void> PodController::NudgeKubelet(const Pod& pod) {
  const kube::ObjectMeta& m = pod.metadata;
  // (Named, not a temporary: gcc 12 cannot keep the map temporary across the co_await.)
  std::string patch = kube::EncodeMetadataMergePatch(
      {}, {{std::string(bridge::kKubeletNudgeAnnotation), FormatTime(clock_.WallNow())}});
  Result<Pod> r = co_await kube::PatchAs<Pod>(kube_, kube::PodsRef(m.namespace_).WithName(m.name),
                                              kube::PatchType::kJsonMerge, std::move(patch));
  if (!r) {
    if (r.error().code != ErrorCode::kNotFound) {
      spdlog::warn("{}/{}: nudging its kubelet failed: {}", m.namespace_, m.name,
                   r.error().ToString());
    }
    co_return;
  }
  ++stats_.kubelets_nudged;
  const std::string msg = fmt::format(
      "no sandbox on {} {}s after the Binding: annotated so that the kubelet syncs the pod again "
      "(a kubelet refused the pod's ResourceClaims tries again only at its next sync)",
      pod.spec.node_name, options_.lifecycle.kubelet_nudge_after.count());
  recorder_.Emit(kube::MakeObjectReference("v1", "Pod", m), kube::EventType::kNormal,
                 "KubeletNudged", msg);
  spdlog::info("{}/{}: {}", m.namespace_, m.name, msg);
}

awaitable<void> PodController::MarkDisrupted(const Pod& pod, const std::string& reason,
                                             const std::string& message) {
  const std::string now = FormatTime(clock_.WallNow());
  std::string patch = fmt::format(
      "{{\"status\":{{\"conditions\":[{{\"type\":\"DisruptionTarget\",\"status\":\"True\","
      "\"reason\":{},\"message\":{},\"lastTransitionTime\":{}}}]}}}}",
      kube::JsonQuote(reason), kube::JsonQuote(message), kube::JsonQuote(now));
  Result<Pod> r = co_await kube::PatchPodStatus(kube_, pod.metadata.namespace_, pod.metadata.name,
                                                kube::PatchType::kStrategicMerge, std::move(patch));
  // The deletion goes ahead without it: the condition only explains it.
  if (!r && r.error().code != ErrorCode::kNotFound) {
    spdlog::warn("{}/{}: DisruptionTarget condition not written: {}", pod.metadata.namespace_,
                 pod.metadata.name, r.error().ToString());
  }
}

awaitable<Result<void>> PodController::ReleaseFinalizer(const Pod& pod) {
  std::optional<std::string> patch = bridge::FinalizerRemovalPatch(pod);
  if (!patch) co_return Result<void>{};
  // The DRA claim the scheduler made for the pod (upstream #36): its devices are free once the
  // job is, never held by a finished pod's claim while Slurm gives them to the next job. Only
  // that claim (R-4: the annotation is the pod author's to write), and only the object read
  // (its UID as precondition: a claim re-created under the name since is not ours to delete).
  if (auto claim = pod.metadata.annotations.find(std::string(bridge::kResourceClaimAnnotation));
      claim != pod.metadata.annotations.end() && !claim->second.empty()) {
    const kube::ObjectMeta& m = pod.metadata;
    kube::ResourceRef ref = kube::DraRef("resourceclaims", m.namespace_, claim->second);
    Result<kube::GenericObject> found = co_await kube::GetAs<kube::GenericObject>(kube_, ref);
    if (!found && found.error().code != ErrorCode::kNotFound) {
      co_return tl::unexpected(found.error());
    }
    std::string why = found ? WhyClaimNotReleased(*found, pod) : "";
    if (found && why.empty()) {
      kube::DeleteOptions options;
      options.uid = found->metadata.uid;
      Result<std::string> deleted = co_await kube_.Delete(ref, options);
      if (!deleted && deleted.error().code != ErrorCode::kNotFound &&
          deleted.error().code != ErrorCode::kConflict) {
        co_return tl::unexpected(deleted.error());
      }
      if (deleted) {
        ++stats_.claims_released;
        spdlog::info("{}/{}: ResourceClaim {} released", m.namespace_, m.name, claim->second);
      } else if (deleted.error().code == ErrorCode::kConflict) {
        why = "it was replaced since it was read (another UID)";
      }
    }
    if (!why.empty()) {
      ReportOnce(pod, "claim", "ResourceClaimKept",
                 fmt::format("ResourceClaim {} named by annotation {} left alone: {}",
                             claim->second, bridge::kResourceClaimAnnotation, why));
    }
  }
  Result<Pod> r = co_await kube::PatchAs<Pod>(
      kube_, kube::PodsRef(pod.metadata.namespace_).WithName(pod.metadata.name),
      kube::PatchType::kJsonMerge, std::move(*patch));
  if (!r && r.error().code != ErrorCode::kNotFound) co_return tl::unexpected(r.error());
  ++stats_.finalizers_removed;
  co_return Result<void>{};
}

bool PodController::LongPending(std::int64_t id, async::Clock::TimePoint now) const {
  auto seen = first_seen_.find(id);
  return seen != first_seen_.end() && now - seen->second >= bridge::kLongPending;
}

std::vector<std::int64_t> PodController::JobsToPoll(const slurm::JobPollTick& tick) {
  if (!tick.full) return {};
  // The jobs the cached pods name; the cost follows the bridge's jobs, not every job of the
  // cluster.
  std::map<std::int64_t, bool> settled;  // id -> every pod naming it finished and released
  std::map<std::int64_t, bool> steady;   // id -> every pod naming it bound, running, not deleted
  holding_.clear();
  for (const auto& p : pods_.cache().List()) {
    const std::int64_t id = JobIdOf(*p);
    if (id <= 0) continue;
    const bool released =
        bridge::PodFinished(*p) && std::ranges::find(p->metadata.finalizers, bridge::kFinalizer) ==
                                       p->metadata.finalizers.end();
    auto [it, fresh] = settled.emplace(id, released);
    if (!fresh) it->second = it->second && released;
    // A bound pod still running: its job's disappearance is what the jobGoneBrake counts.
    const bool holds = !p->spec.node_name.empty() && !bridge::PodFinished(*p);
    if (holds) holding_.insert(id);
    const bool quiet = holds && p->metadata.deletion_timestamp.empty();
    auto [st, first] = steady.emplace(id, quiet);
    if (!first) st->second = st->second && quiet;
  }
  // Steady jobs (running, their pods all bound and running): only their end matters, so they
  // are asked every bound_job_poll_interval. Jobs pending for more than kLongPending are asked
  // every pending_job_poll_interval (the scheduler asks them as often, in the same requests).
  // Any other job (new, starting, ending, or one whose pods changed) at every full poll.
  const bool steady_due = tick.DueEvery(options_.bound_job_poll_interval);
  const bool pending_due = tick.DueEvery(options_.pending_job_poll_interval);
  std::uint64_t steady_jobs = 0;
  // N-17: a job that ended (or is gone) and whose pods all finished and were released needs
  // nothing more: it is not asked about again while that holds (a Job's Succeeded pods can stay
  // for ever). A pod that names it and is not done brings it back.
  std::vector<std::int64_t> wanted;
  watched_.clear();
  for (const auto& [id, done] : settled) {
    auto known = jobs_.find(id);
    if (done) {
      if (settled_.contains(id) ||
          (known != jobs_.end() && bridge::JobEnded(known->second.state))) {
        settled_.insert(id);
        continue;
      }
    } else {
      settled_.erase(id);
    }
    watched_.insert(id);
    if (known != jobs_.end()) {
      const bridge::JobState state(known->second.state);
      if (steady[id] && state.running()) {
        ++steady_jobs;
        if (!steady_due) continue;
      } else if (state.pending() && LongPending(id, tick.now) && !pending_due) {
        continue;
      }
    }
    wanted.push_back(id);
  }
  std::erase_if(settled_, [&](std::int64_t id) { return !settled.contains(id); });
  stats_.jobs_settled = settled_.size();
  stats_.jobs_steady = steady_jobs;
  return wanted;
}

void PodController::HoldGoneDeletions(std::int64_t job_id, JobPlan& plan) {
  std::set<const Pod*> held;
  for (const PodDeletion& d : plan.delete_pods) {
    held.insert(d.pod);
    ++stats_.pods_held_by_brake;
    ReportOnce(
        *d.pod, "vanished", "SlurmJobsVanished",
        fmt::format("Slurm no longer knows job {}, nor {} other watched jobs of this bridge: "
                    "slurmctld may have lost its state. The pod is kept while more than {} "
                    "watched jobs are missing (config jobGoneBrake); delete it yourself if "
                    "its work is lost",
                    job_id, stats_.jobs_missing - 1, options_.gone_brake));
  }
  plan.delete_pods.clear();
  std::erase_if(plan.release_pods, [&](const Pod* p) { return held.contains(p); });
  // Looked at again: the brake lets go once fewer jobs are missing.
  queue_.AddAfter(job_id, std::chrono::seconds(30));
}

void PodController::OnJobStates(const slurm::JobPollAnswer& answer) {
  ++stats_.state_polls;
  // Jobs of running bound pods missing from the answer (not too new to be listed): many at once
  // is not jobs ending (Slurm shows an ended job for MinJobAge, 300 s by default, and its pods are
  // deleted then) but a slurmctld without its state. Finished pods' jobs are purged in time.
  std::uint64_t missing = 0;
  for (std::int64_t id : answer.ids) {
    auto seen = first_seen_.find(id);
    if (holding_.contains(id) && !answer.states.contains(id) && seen != first_seen_.end() &&
        seen->second < answer.asked) {
      ++missing;
    }
  }
  stats_.jobs_missing = missing;
  const bool engaged =
      options_.gone_brake > 0 && missing > static_cast<std::uint64_t>(options_.gone_brake);
  if (engaged && !stats_.gone_brake_engaged) {
    spdlog::error(
        "{} watched Slurm jobs are missing from Slurm at once (jobGoneBrake {}): slurmctld may "
        "have lost its state. Their bound pods are not deleted while that many are missing; "
        "events SlurmJobsVanished name them",
        missing, options_.gone_brake);
  } else if (!engaged && stats_.gone_brake_engaged) {
    spdlog::info("{} watched Slurm job(s) missing: under jobGoneBrake {}, the brake lets go",
                 missing, options_.gone_brake);
  }
  stats_.gone_brake_engaged = engaged;
  for (std::int64_t id : answer.ids) {
    auto f = answer.states.find(id);
    JobRecord& known = jobs_[id];
    if (f == answer.states.end()) {
      // Gone, or newer than the answer: Reconcile asks (GET /job/{id}) unless it knows the end.
      if (first_seen_[id] < answer.asked && !bridge::JobEnded(known.state)) {
        known.state.clear();
        queue_.Add(id);
      }
      continue;
    }
    if (known.state != f->second) {
      // Ended (or gone), then alive: Slurm reused the id for another job; its tag is read anew.
      if (bridge::JobEnded(known.state) && !bridge::JobEnded(f->second)) known.read = false;
      known.state = f->second;
      queue_.Add(id);
    }
  }
  // The records of jobs no longer watched go (a steady job skipped by this poll stays).
  std::erase_if(jobs_, [&](const auto& kv) { return !watched_.contains(kv.first); });
  std::erase_if(first_seen_, [&](const auto& kv) { return !watched_.contains(kv.first); });
}

void PodController::Learn(const slurm::JobInfo& job) {
  std::optional<bridge::JobTag> tag = bridge::ParseJobTag(job.admin_comment);
  if (!tag || !tag->BelongsTo(owner_.cluster, owner_.scheduler) || !Alive(job.BaseState())) {
    Forget(job.job_id);
    return;
  }
  OwnJob& known = own_jobs_[job.job_id];
  known.state = std::string(job.BaseState());
  known.tag = std::move(*tag);
  known.submit_time = job.submit_time.Value();
  stats_.own_jobs = own_jobs_.size();
}

void PodController::Forget(std::int64_t job_id) {
  own_jobs_.erase(job_id);
  stats_.own_jobs = own_jobs_.size();
}

// Slurm's whole job list is read here, once; the sweeps read the states of the registered jobs
// only (SweepOnce). That is enough because of where this bridge's live jobs come from. Every
// job is submitted by the scheduler for pods it then labels with the job's id (before binding
// them); a labelled job is read (GET /job/{id}) when this controller first sees the label, and
// registered. A job of this bridge that no label names is one whose scheduler crashed between
// its submit and its label patch (or an old leader's submit that reached slurmctld late): it
// existed before the crash, so the start-up read of any process that starts after it (the
// scheduler's, which adopts it for its group's pods; this one's, which registers it) finds it.
// The gap: in split mode, a scheduler that crashes and restarts while these controllers keep
// running, with the job's pods deleted in between: the scheduler adopts only jobs of groups
// that still have pods, and this controller never lists again. Such a job runs until its time
// limit (defaultTimeLimit) or the controllers' next start, and `slurm-bridge check` reports it.
awaitable<void> PodController::Sweep() {
  while (co_await tasks_.Sleep(options_.sweep_interval)) {
    // A failed start-up list is tried again once per sweep interval until one succeeds (not
    // while one is being read: a list of 50,000 jobs takes a minute); the sweeps go on
    // meanwhile with the jobs known from their reads.
    if (!listed_ && !listing_) {
      co_await ReadAllJobsOnce();
      if (stopping_) break;
    }
    // A stale pod cache would make live pods look gone: sweep only while the watch is healthy.
    if (!pods_.Healthy()) {
      ++stats_.sweeps_skipped;
      spdlog::info("sweep skipped: the pod watch is not healthy (its cache may be stale)");
      continue;
    }
    co_await SweepOnce();
    // Reports of pods that are gone are forgotten. (Here, not in SweepOnce: with no local of its
    // own, gcc 12 laid this coroutine's frame out differently for its start and its body, which
    // then read `this` from the wrong place.)
    std::set<std::string> uids;
    for (const auto& p : pods_.cache().List()) uids.insert(p->metadata.uid);
    std::erase_if(reported_, [&](const auto& r) { return !uids.contains(r.first); });
  }
}

awaitable<void> PodController::SweepOnce() {
  if (!own_jobs_.empty()) {
    // One GET /jobs/state/?job_id=... of the registered jobs (batched by the client).
    std::vector<std::int64_t> ids;
    ids.reserve(own_jobs_.size());
    for (const auto& [id, job] : own_jobs_) ids.push_back(id);
    ++stats_.sweep_state_reads;
    Result<std::vector<slurm::JobStateEntry>> states = co_await slurm_.JobStates(ids);
    if (!states) {
      ++stats_.errors;
      spdlog::warn("sweep: reading the states of this bridge's {} jobs failed: {}", ids.size(),
                   states.error().ToString());
      co_return;
    }
    std::unordered_map<std::int64_t, std::string> answered;
    for (const slurm::JobStateEntry& e : *states) {
      if (!e.state.empty()) answered[e.job_id] = e.state.front();
    }
    for (std::int64_t id : ids) {
      auto known = own_jobs_.find(id);
      if (known == own_jobs_.end()) continue;  // forgotten by a read meanwhile
      auto state = answered.find(id);
      if (state == answered.end()) {
        own_jobs_.erase(known);  // Slurm has forgotten it
      } else {
        known->second.state = state->second;
      }
    }
  }
  if (!pods_.Healthy()) {
    ++stats_.sweeps_skipped;
    co_return;
  }
  // A copy: the awaits below may change the register.
  const Register jobs = own_jobs_;
  co_await SweepOrphans(jobs);
  co_await SweepStrays(jobs);
  // Jobs that ended leave the register once swept.
  std::erase_if(own_jobs_, [](const auto& kv) { return !Alive(kv.second.state); });
  stats_.own_jobs = own_jobs_.size();
  ++stats_.sweeps;
}

awaitable<void> PodController::SweepOrphans(const Register& jobs) {
  const WallTime now = clock_.WallNow();
  const auto now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  std::erase_if(held_for_group_, [&](const auto& kv) { return kv.second <= now; });
  // Whether a pod `tag` names is in the cache (same UID).
  auto any_cached = [this](const bridge::JobTag& tag) {
    for (std::size_t i = 0; i < tag.pods.size(); ++i) {
      std::shared_ptr<const Pod> p = pods_.cache().Get(tag.pods[i]);
      if (p && (i >= tag.uids.size() || p->metadata.uid == tag.uids[i])) return true;
    }
    return false;
  };
  for (const auto& [id, job] : jobs) {
    if (stopping_) co_return;
    if (!Alive(job.state)) continue;
    // A requeued group's job waits for the group's new pods (requeue_grace).
    if (held_for_group_.contains(id) && job.state == "PENDING") continue;
    if (job.submit_time && now_s - *job.submit_time < options_.orphan_min_age.count()) continue;
    if (any_cached(job.tag)) continue;
    // The registered tag may be old (a requeued group's job adopted for the group's new pods
    // is tagged anew): the job is read again before its pods are asked for.
    const std::int64_t job_id = id;
    ++stats_.sweep_job_reads;
    Result<slurm::JobInfo> read = co_await slurm_.GetJob(job_id);
    if (!read) {
      if (read.error().code == ErrorCode::kNotFound) {
        Forget(job_id);
      } else {
        ++stats_.errors;
        spdlog::warn("orphan sweep: reading Slurm job {} failed: {}", job_id,
                     read.error().ToString());
      }
      continue;
    }
    Learn(*read);
    auto fresh = own_jobs_.find(job_id);
    if (fresh == own_jobs_.end()) continue;  // ended, or no longer this bridge's
    const bridge::JobTag tag = fresh->second.tag;
    if (held_for_group_.contains(job_id) && fresh->second.state == "PENDING") continue;
    if (any_cached(tag)) continue;
    // The cache says none exists: the apiserver must agree, pod by pod.
    const wiring::TagPodsAnswer pods = co_await wiring::ReadTagPods(kube_, tag.pods, tag.uids);
    const bool confirmed = pods.gone;
    if (!pods.existing.empty()) {
      spdlog::info("orphan sweep: Slurm job {}: pod {} exists", job_id, pods.existing);
    } else if (pods.error) {
      spdlog::warn("orphan sweep: Slurm job {}: reading pod {} failed: {}", job_id, pods.failed,
                   pods.error->ToString());
    }
    if (!confirmed) continue;
    slurm::CancelOptions opts;
    Result<bool> c = co_await slurm_.CancelJob(job_id, opts);
    if (c || c.error().code == ErrorCode::kNotFound) {
      ++stats_.orphans_cancelled;
      Forget(job_id);
      spdlog::info("cancelled orphan Slurm job {}: none of its pods ({}) exists", job_id,
                   fmt::join(tag.pods, ", "));
    } else {
      ++stats_.errors;
      spdlog::warn("cancelling orphan Slurm job {} failed: {}", job_id, c.error().ToString());
    }
  }
}

awaitable<void> PodController::SweepStrays(const Register& jobs) {
  // The pods this bridge's live jobs hold a place for.
  std::set<std::string> held;
  for (const auto& [id, job] : jobs) {
    if (Alive(job.state)) held.insert(job.tag.uids.begin(), job.tag.uids.end());
  }
  // A bound pod whose labelled job is neither registered nor read yet (its reconcile has not
  // read it, or failed to): read once (GET /job/{id}), kept with the labelled jobs' records,
  // polled from then on like them, and registered when it is a live job of this bridge.
  std::set<std::int64_t> unread;
  for (const auto& p : pods_.cache().List()) {
    const std::int64_t id = JobIdOf(*p);
    if (id <= 0 || !MayBeStray(*p, held) || jobs.contains(id) || own_jobs_.contains(id)) continue;
    if (auto r = jobs_.find(id); r == jobs_.end() || !r->second.read) unread.insert(id);
  }
  for (std::int64_t id : unread) {
    if (stopping_) co_return;
    JobRecord rec;
    ++stats_.sweep_job_reads;
    Result<void> r = co_await ReadJob(id, rec);
    if (!r) {
      ++stats_.errors;
      spdlog::warn("sweep: reading Slurm job {} failed: {}", id, r.error().ToString());
      continue;
    }
    JobRecord& known = jobs_[id];
    if (!known.read) {
      known.state = rec.state;
      known.read = true;
      known.tag = rec.tag;
      known.reason = rec.reason;
      known.description = rec.description;
      known.preempted = rec.preempted;
    }
  }
  const WallTime now = clock_.WallNow();
  std::set<std::string> seen;
  std::vector<std::shared_ptr<const Pod>> due;
  for (const auto& p : pods_.cache().List()) {
    if (!MayBeStray(*p, held)) continue;
    const std::int64_t id = JobIdOf(*p);
    std::optional<JobFacts> facts;
    if (id > 0) {
      if (auto own = own_jobs_.find(id); own != own_jobs_.end()) {
        facts = JobFacts{.state = own->second.state, .tag = own->second.tag};
      } else if (auto r = jobs_.find(id);
                 r != jobs_.end() && r->second.read && !r->second.state.empty()) {
        facts = JobFacts{.state = r->second.state, .tag = r->second.tag};
      } else {
        // Not known at the moment (a read failed, or a poll missed it and its reconcile reads
        // it again): judged at the next sweep, its first report's time kept.
        seen.insert(p->metadata.uid);
        continue;
      }
    }
    std::optional<std::string> why = JudgeBoundPod(*p, held, facts ? &*facts : nullptr, id, owner_);
    if (!why) continue;
    seen.insert(p->metadata.uid);
    auto [since, first] = stray_since_.try_emplace(p->metadata.uid, now);
    ReportOnce(*p, "stray", "NoSlurmJob",
               fmt::format("{}: no Slurm allocation holds this pod; it is deleted if that "
                           "stays so for {}s",
                           *why, options_.lifecycle.confirm_after.count()));
    if (now - since->second >= options_.lifecycle.confirm_after) due.push_back(p);
  }
  std::erase_if(stray_since_, [&](const auto& kv) { return !seen.contains(kv.first); });
  for (const auto& cached : due) {
    if (stopping_) co_return;
    // Confirm with the apiserver and, for a labelled pod, with Slurm.
    Result<Pod> pod =
        co_await kube::GetPod(kube_, cached->metadata.namespace_, cached->metadata.name);
    if (!pod || pod->metadata.uid != cached->metadata.uid) continue;
    const std::int64_t id = JobIdOf(*pod);
    std::optional<JobFacts> job;
    if (id > 0) {
      ++stats_.sweep_job_reads;
      Result<slurm::JobInfo> j = co_await slurm_.GetJob(id);
      if (j) {
        Learn(*j);
        job = JobFacts{.state = std::string(j->BaseState()),
                       .tag = bridge::ParseJobTag(j->admin_comment)};
      } else if (j.error().code != ErrorCode::kNotFound) {
        continue;
      } else {
        Forget(id);
      }
    }
    std::optional<std::string> why = JudgeBoundPod(*pod, held, job ? &*job : nullptr, id, owner_);
    if (!why) continue;
    if (id > 0 && !job && stats_.gone_brake_engaged) {
      // Its job vanished with many others: the jobGoneBrake holds it (HoldGoneDeletions).
      ++stats_.pods_held_by_brake;
      continue;
    }
    const std::string msg = *why + ": no Slurm allocation holds this pod; deleting the pod";
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata), kube::EventType::kWarning,
                   "NoSlurmJob", msg);
    kube::DeleteOptions del;
    del.uid = pod->metadata.uid;
    Result<void> d =
        co_await kube::DeletePod(kube_, pod->metadata.namespace_, pod->metadata.name, del);
    if (!d && d.error().code != ErrorCode::kNotFound && d.error().code != ErrorCode::kConflict) {
      ++stats_.errors;
      spdlog::warn("{}/{}: deleting failed: {}", pod->metadata.namespace_, pod->metadata.name,
                   d.error().ToString());
      continue;
    }
    ++stats_.strays_deleted;
    spdlog::warn("{}/{}: deleted: {}", pod->metadata.namespace_, pod->metadata.name, msg);
  }
}

awaitable<void> PodController::ReadAllJobsOnce() {
  listing_ = true;
  // Only the jobs with a bridge tag are kept: the client decodes the list one job at a time, so
  // memory follows the bridge's jobs (of any cluster), not the cluster's queue.
  // (Named, not temporaries: gcc 12 destroys a temporary argument of a co_await twice.)
  const std::int64_t since = 0;
  slurm::JobFilter tagged = &HasBridgeTag;
  Result<slurm::JobList> list;
  if (startup_scan_ != nullptr) {
    list = co_await startup_scan_->Scan(tagged);  // shared with the scheduler (`all`)
  } else {
    list = co_await slurm_.ScanJobs(since, tagged);
  }
  listing_ = false;
  if (!list) {
    ++stats_.startup_list_failures;
    ++stats_.errors;
    spdlog::warn("reading Slurm's jobs at start-up failed: {}; tried again in {} ms",
                 list.error().ToString(), options_.sweep_interval.count());
    co_return;
  }
  ++stats_.startup_lists;
  listed_ = true;
  // The live jobs of this bridge seed the register (the others of the list are not forgotten
  // from it: a read since may be newer than the list).
  for (const slurm::JobInfo& j : list->jobs) {
    std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
    if (tag && tag->BelongsTo(owner_.cluster, owner_.scheduler) && Alive(j.BaseState())) Learn(j);
  }
  spdlog::info("Slurm's jobs read at start-up: {} with a bridge tag, {} live ones of this bridge",
               list->jobs.size(), own_jobs_.size());
  co_await CheckClusterName(list->jobs);
}

awaitable<void> PodController::CheckClusterName(const std::vector<slurm::JobInfo>& jobs) {
  auto pod_exists = [this](const std::string& key, const std::string& uid) {
    std::shared_ptr<const Pod> p = pods_.cache().Get(key);
    return p && (uid.empty() || p->metadata.uid == uid);
  };
  // First the namespaces worth asking about, then the answer with what the apiserver said.
  std::set<std::string> asked;
  (void)ForeignLookingJobs(jobs, owner_, pod_exists, [&](const std::string& ns) {
    asked.insert(ns);
    return true;
  });
  std::set<std::string> missing;
  constexpr std::size_t kMaxNamespaces = 50;
  std::size_t n = 0;
  for (const std::string& ns : asked) {
    if (++n > kMaxNamespaces || stopping_) break;
    Result<kube::Namespace> got =
        co_await kube::GetAs<kube::Namespace>(kube_, kube::NamespacesRef().WithName(ns));
    if (!got && got.error().code == ErrorCode::kNotFound) {
      missing.insert(ns);
    } else if (!got) {
      spdlog::debug("clusterName check: reading namespace {} failed: {}", ns,
                    got.error().ToString());
    }
  }
  std::vector<std::int64_t> foreign = ForeignLookingJobs(
      jobs, owner_, pod_exists, [&](const std::string& ns) { return missing.contains(ns); });
  stats_.foreign_looking_jobs = foreign.size();
  ++stats_.cluster_name_checks;
  if (foreign.empty()) co_return;
  spdlog::warn(
      "clusterName \"{}\": {} live Slurm job(s) tagged for this cluster and scheduler ({}) name "
      "pods in namespaces that do not exist here ({}). Another Kubernetes cluster may share this "
      "Slurm with the same clusterName: this bridge takes such jobs for orphans and cancels "
      "them. Give every cluster its own clusterName in config.yaml.",
      config_.cluster_name, foreign.size(), fmt::join(foreign, ", "), fmt::join(missing, ", "));
}

}  // namespace sb::controllers
