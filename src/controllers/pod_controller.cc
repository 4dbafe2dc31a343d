// SPDX-License-Identifier: Apache-2.0
#include "controllers/pod_controller.h"

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
#include "kube/codec.h"

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

PodController::PodController(asio::any_io_executor executor, kube::Client& kube,
                             slurm::Client& slurm, kube::Clock& clock, bridge::Config config,
                             PodControllerOptions options)
    : executor_(std::move(executor)),
      kube_(kube),
      slurm_(slurm),
      clock_(clock),
      config_(std::move(config)),
      options_(options),
      pods_(kube, kube::PodsRef(),
            kube::InformerOptions{
                .reflector = {.list_options = {.field_selector = "spec.schedulerName=" +
                                                                 config_.scheduler_name}}}),
      nodes_(kube, kube::NodesRef()),
      event_sink_(kube),
      recorder_(clock, event_sink_,
                kube::EventRecorderOptions{.source = {.component = "slurm-bridge-controllers"}}),
      queue_(clock, kube::BackoffPolicy{.base = std::chrono::milliseconds(250),
                                        .cap = std::chrono::seconds(60)}),
      tasks_(executor_, clock, "pod controller") {
  pods_.cache().AddIndex(std::string(kJobIndex), [](const Pod& p) {
    const std::int64_t id = JobIdOf(p);
    return id > 0 ? std::vector<std::string>{std::to_string(id)} : std::vector<std::string>{};
  });
  pods_.cache().AddHandlers({.on_add = [this](const auto& p) { OnPod(*p); },
                             .on_update =
                                 [this](const auto& old, const auto& p) {
                                   OnPod(*old);
                                   OnPod(*p);
                                 },
                             .on_delete = [this](const auto& p) { OnPod(*p); }});
  // A node that goes away or stops being Ready may release the jobs of pods stuck on it.
  nodes_.cache().AddHandlers({.on_add = nullptr,
                              .on_update =
                                  [this](const auto&, const auto& n) {
                                    for (const auto& p : pods_.cache().List()) {
                                      if (p->spec.node_name == n->metadata.name &&
                                          !p->metadata.deletion_timestamp.empty()) {
                                        OnPod(*p);
                                      }
                                    }
                                  },
                              .on_delete =
                                  [this](const auto& n) {
                                    for (const auto& p : pods_.cache().List()) {
                                      if (p->spec.node_name == n->metadata.name) OnPod(*p);
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
  tasks_.Spawn(nodes_.Run());
  tasks_.Spawn(recorder_.Run());
  while (!pods_.HasSynced() || !nodes_.HasSynced()) {
    if (!co_await tasks_.Sleep(std::chrono::milliseconds(20))) break;
  }
  if (!stopping_) {
    ready_ = true;
    spdlog::info("pod controller started: {} pods of {}", pods_.cache().size(),
                 config_.scheduler_name);
    for (int i = 0; i < 4; ++i) tasks_.Spawn(Worker());
    tasks_.Spawn(PollSlurm());
    tasks_.Spawn(Sweep());
  }
  co_await tasks_.Join();
}

void PodController::Stop() {
  if (stopping_) return;
  stopping_ = true;
  pods_.Stop();
  nodes_.Stop();
  queue_.ShutDown();
  recorder_.ShutDown();
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

awaitable<Result<void>> PodController::Reconcile(std::int64_t job_id) {
  std::vector<std::shared_ptr<const Pod>> held =
      pods_.cache().ByIndex(kJobIndex, std::to_string(job_id));
  std::vector<const Pod*> pods;
  for (const auto& p : held) pods.push_back(p.get());

  std::string state;
  if (auto it = states_.find(job_id); it != states_.end()) state = it->second;
  // (empty: unknown or left out of the last poll; asked below)
  std::optional<slurm::JobInfo> info;
  if (state.empty()) {
    Result<slurm::JobInfo> j = co_await slurm_.GetJob(job_id);
    if (j) {
      state = std::string(j->BaseState());
      info = std::move(*j);
    } else if (j.error().code == ErrorCode::kNotFound) {
      state = "GONE";
    } else {
      co_return tl::unexpected(j.error());
    }
    states_[job_id] = state;
  }
  if (pods.empty() && bridge::JobEnded(state)) {
    states_.erase(job_id);
    co_return Result<void>{};
  }

  std::map<std::string, const kube::Node*> nodes;
  std::vector<std::shared_ptr<const kube::Node>> node_list = nodes_.cache().List();
  for (const auto& n : node_list) nodes[n->metadata.name] = n.get();
  JobPlan plan = PlanJob(state, pods, nodes, clock_.WallNow(), options_.lifecycle);

  if (plan.cancel_job) {
    slurm::CancelOptions opts;
    Result<bool> c = co_await slurm_.CancelJob(job_id, opts);
    if (!c && c.error().code != ErrorCode::kNotFound) co_return tl::unexpected(c.error());
    ++stats_.jobs_cancelled;
    states_[job_id] = "CANCELLED";
    spdlog::info("cancelled Slurm job {}: {}", job_id, plan.cancel_reason);
    for (const Pod* pod : pods) {
      recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata),
                     kube::EventType::kNormal, "SlurmJobCancelled",
                     fmt::format("cancelled Slurm job {}: {}", job_id, plan.cancel_reason));
    }
  }
  if (!plan.delete_pods.empty()) {
    // Slurm's words for why the job ended.
    if (!info && state != "GONE") {
      Result<slurm::JobInfo> j = co_await slurm_.GetJob(job_id);
      if (j) info = std::move(*j);
    }
    std::string words = state == "GONE" ? "Slurm no longer knows it" : state;
    if (info) {
      if (!info->state_reason.empty() && info->state_reason != "None") {
        words += " (" + info->state_reason + ")";
      }
      if (!info->state_description.empty()) words += ": " + info->state_description;
    }
    for (const Pod* pod : plan.delete_pods) {
      const std::string msg =
          fmt::format("Slurm job {} ended: {}; deleting the pod", job_id, words);
      recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata),
                     kube::EventType::kWarning, "SlurmJobEnded", msg);
      kube::DeleteOptions del;
      del.uid = pod->metadata.uid;
      Result<void> d =
          co_await kube::DeletePod(kube_, pod->metadata.namespace_, pod->metadata.name, del);
      if (!d && d.error().code != ErrorCode::kNotFound && d.error().code != ErrorCode::kConflict) {
        co_return tl::unexpected(d.error());
      }
      ++stats_.pods_deleted;
      spdlog::info("{}/{}: deleted: {}", pod->metadata.namespace_, pod->metadata.name, msg);
    }
  }
  for (const Pod* pod : plan.release_pods) {
    Result<void> r = co_await ReleaseFinalizer(*pod);
    if (!r) co_return tl::unexpected(r.error());
  }
  if (plan.recheck_at) {
    const auto wait = *plan.recheck_at - clock_.WallNow() + std::chrono::milliseconds(100);
    queue_.AddAfter(job_id, std::chrono::duration_cast<kube::Clock::Duration>(wait));
  }
  co_return Result<void>{};
}

awaitable<Result<void>> PodController::ReleaseFinalizer(const Pod& pod) {
  std::optional<std::string> patch = bridge::FinalizerRemovalPatch(pod);
  if (!patch) co_return Result<void>{};
  Result<Pod> r = co_await kube::PatchAs<Pod>(
      kube_, kube::PodsRef(pod.metadata.namespace_).WithName(pod.metadata.name),
      kube::PatchType::kJsonMerge, std::move(*patch));
  if (!r && r.error().code != ErrorCode::kNotFound) co_return tl::unexpected(r.error());
  ++stats_.finalizers_removed;
  co_return Result<void>{};
}

awaitable<void> PodController::PollSlurm() {
  while (co_await tasks_.Sleep(config_.job_poll_interval)) {
    // The jobs the cached pods name.
    std::set<std::int64_t> wanted;
    for (const auto& p : pods_.cache().List()) {
      if (std::int64_t id = JobIdOf(*p); id > 0) wanted.insert(id);
    }
    if (wanted.empty()) continue;
    std::vector<std::int64_t> all;  // one call for every job: cost independent of pod count
    const kube::Clock::TimePoint asked = clock_.Now();
    Result<std::vector<slurm::JobStateEntry>> states = co_await slurm_.JobStates(std::move(all));
    if (!states) {
      ++stats_.errors;
      spdlog::warn("reading Slurm job states failed: {}", states.error().ToString());
      continue;
    }
    ++stats_.state_polls;
    std::unordered_map<std::int64_t, std::string> fresh;
    for (const slurm::JobStateEntry& s : *states) {
      if (!s.state.empty()) fresh[s.job_id] = s.state.front();
    }
    for (std::int64_t id : wanted) {
      auto f = fresh.find(id);
      std::string& known = states_[id];
      if (f == fresh.end()) {
        // Gone, or newer than the answer: Reconcile asks (GET /job/{id}) unless it knows the end.
        if (first_seen_[id] < asked && !bridge::JobEnded(known)) {
          known.clear();
          queue_.Add(id);
        }
        continue;
      }
      if (known != f->second) {
        known = f->second;
        queue_.Add(id);
      }
    }
    std::erase_if(states_, [&](const auto& kv) { return !wanted.contains(kv.first); });
    std::erase_if(first_seen_, [&](const auto& kv) { return !wanted.contains(kv.first); });
  }
}

awaitable<void> PodController::Sweep() {
  while (co_await tasks_.Sleep(options_.sweep_interval)) {
    Result<std::vector<slurm::JobInfo>> jobs = co_await slurm_.ListJobs();
    if (!jobs) {
      ++stats_.errors;
      spdlog::warn("orphan sweep: reading Slurm's jobs failed: {}", jobs.error().ToString());
      continue;
    }
    ++stats_.sweeps;
    const auto now_s =
        std::chrono::duration_cast<std::chrono::seconds>(clock_.WallNow().time_since_epoch())
            .count();
    for (const slurm::JobInfo& j : *jobs) {
      if (!Alive(j.BaseState())) continue;
      std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
      // Only this cluster's scheduler's jobs; anything else is not ours to touch.
      if (!tag || !tag->BelongsTo(config_.cluster_name, config_.scheduler_name)) continue;
      if (std::optional<std::int64_t> submitted = j.submit_time.Value();
          submitted && now_s - *submitted < options_.orphan_min_age.count()) {
        continue;
      }
      bool any = false;
      for (std::size_t i = 0; i < tag->pods.size() && !any; ++i) {
        std::shared_ptr<const Pod> p = pods_.cache().Get(tag->pods[i]);
        any = p && (i >= tag->uids.size() || p->metadata.uid == tag->uids[i]);
      }
      if (any) continue;
      slurm::CancelOptions opts;
      Result<bool> c = co_await slurm_.CancelJob(j.job_id, opts);
      if (c || c.error().code == ErrorCode::kNotFound) {
        ++stats_.orphans_cancelled;
        spdlog::info("cancelled orphan Slurm job {}: none of its pods ({}) exists", j.job_id,
                     fmt::join(tag->pods, ", "));
      } else {
        ++stats_.errors;
        spdlog::warn("cancelling orphan Slurm job {} failed: {}", j.job_id, c.error().ToString());
      }
    }
  }
}

}  // namespace sb::controllers
