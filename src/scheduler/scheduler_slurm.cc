// SPDX-License-Identifier: Apache-2.0
//
// The scheduler's view of Slurm (see scheduler.h): the tracked jobs' states from the job watch,
// the periodic job list (adoption, duplicates, reasons), Slurm's nodes, cancels until confirmed.
#include "scheduler/scheduler.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bridge/gres.h"
#include "bridge/group.h"
#include "bridge/hostlist.h"
#include "bridge/job_update.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "kube/codec.h"
#include "kube/runtime/time_format.h"
#include "scheduler/scheduler_internal.h"

namespace sb::scheduler {
namespace asio = boost::asio;
using asio::awaitable;
using bridge::GroupSpec;
using internal::kGroupItem;
using internal::PodKey;
using kube::Pod;

namespace {

// A pending job's start as Slurm's planner expects it (Unix seconds); 0 when none is given.
std::int64_t ExpectedStart(const slurm::JobInfo& j) {
  if (j.BaseState() != "PENDING") return 0;
  const std::optional<std::int64_t> t = j.start_time.Value();
  return t && *t > 0 ? *t : 0;
}

// After a submit, the jobs submitted within kFreshWindow are polled at the job watch's fresh
// cadence (slurm/job_watch.h; all tracked jobs every jobPollInterval): slurmctld starts a job that
// fits in a scheduling pass soon after its submit (measured with the benchmark's settings: within
// about a second, usually several jobs in one pass), and the wait until the next poll is the
// bridge's whole share of that stage. Measured (issue #13): one state poll of a few jobs costs
// slurmctld and slurmrestd about 1.4 ms of CPU together.
constexpr auto kFreshWindow = slurm::JobWatchOptions{}.fresh_window;
// The periodic job list waits at least this many times as long as the last one took.
constexpr int kListSpacing = 20;

}  // namespace

JobView Scheduler::View(const TrackedJob& job) {
  return JobView{.id = job.id,
                 .state = job.state,
                 .reason = job.reason,
                 .expected_start = job.expected_start,
                 .partition = job.partition,
                 .nodes = job.nodes,
                 .uids = job.uids,
                 .pods = job.pods,
                 .submitted = job.submitted,
                 .refill = job.refill,
                 .bind_tried = job.bind_tried,
                 .parts = job.parts};
}

void Scheduler::Unlist(std::int64_t id) {
  for (auto it = listed_.begin(); it != listed_.end();) {
    std::erase_if(it->second, [&](const JobView& j) { return j.id == id; });
    it = it->second.empty() ? listed_.erase(it) : std::next(it);
  }
}

awaitable<Result<bool>> Scheduler::PodGroupRan(const GroupSpec& spec) {
  const bool workload = spec.key.starts_with(bridge::kWorkloadPodGroupKeyPrefix);
  kube::ListOptions opts;
  // A Workload API PodGroup's pods carry no label of it: the bridge's pods of the namespace,
  // those naming it in spec.schedulingGroup.
  opts.label_selector =
      workload ? std::string(bridge::kJobIdLabel)
               : fmt::format("{}={},{}", bridge::kPodGroupLabel, spec.name, bridge::kJobIdLabel);
  Result<kube::List<Pod>> members =
      co_await kube::ListAs<Pod>(kube_, kube::PodsRef(spec.namespace_), opts);
  if (!members) co_return tl::unexpected(members.error());
  co_return std::ranges::any_of(members->items, [&](const Pod& p) {
    return !p.spec.node_name.empty() && (!workload || p.spec.scheduling_group == spec.name);
  });
}

awaitable<Result<std::vector<JobView>>> Scheduler::Candidates(const std::string& group,
                                                              const std::string& ns) {
  std::vector<JobView> out;
  auto it = listed_.find(group);
  if (it == listed_.end()) co_return out;
  const std::vector<JobView> listed = it->second;  // the awaits below may change listed_
  for (JobView j : listed) {
    if (j.state == "RUNNING") {
      Result<std::vector<Holder>> h = co_await binder_.ReadHolders(ns, j.id);
      if (!h) co_return tl::unexpected(h.error());
      j.holders = std::move(*h);
      j.holders_known = true;
    }
    out.push_back(std::move(j));
  }
  co_return out;
}

awaitable<bool> Scheduler::RefreshJobs() {
  if (listing_) co_return false;
  Result<void> r = co_await ListJobs(false);
  if (!r) spdlog::warn("reading Slurm's jobs failed: {}", r.error().ToString());
  co_return static_cast<bool>(r);
}

awaitable<void> Scheduler::CancelJob(Cancel cancel) {
  const std::int64_t id = cancel.id;
  Unlist(id);
  slurm::CancelOptions opts;
  Result<bool> r = co_await slurm_.CancelJob(id, opts);
  if (r || r.error().code == ErrorCode::kNotFound) {
    to_cancel_.erase(id);
    switch (cancel.cause) {
      case CancelCause::kPodsGone:
        ++stats_.jobs_cancelled;
        break;
      case CancelCause::kDuplicate:
        ++stats_.duplicates_cancelled;
        break;
      case CancelCause::kNodeNotInKubernetes:
        ++stats_.unmapped_cancelled;
        break;
    }
    spdlog::info("cancelled Slurm job {}: {}", id, cancel.reason);
  } else {
    // Tried again by PollSlurm until Slurm confirms.
    spdlog::warn("cancelling Slurm job {} ({}) failed: {}; trying again", id, cancel.reason,
                 r.error().ToString());
    to_cancel_[id] = std::move(cancel);
  }
}

awaitable<void> Scheduler::RetryCancels() {
  const std::map<std::int64_t, Cancel> pending = to_cancel_;
  for (const auto& [id, c] : pending) co_await CancelJob(c);
}

void Scheduler::ApplyState(TrackedJob& job, const std::string& state) {
  if (state.empty() || state == job.state) return;
  job.state = state;
  if (state == "RUNNING") job.running_seen = clock_.Now();
  if (bridge::JobEnded(state)) Unlist(job.id);
  queue_.Add(std::string(kGroupItem) + job.group);
}

awaitable<Result<void>> Scheduler::ListJobs(bool startup) {
  const async::Clock::TimePoint asked = clock_.Now();
  listing_ = true;
  // After the first list, Slurm sends every job only when one changed since the last list
  // (update_time); else a few hundred bytes, and the last list still holds.
  Result<slurm::JobList> list = co_await slurm_.ListJobsSince(startup ? 0 : jobs_since_);
  listing_ = false;
  if (!list) co_return tl::unexpected(list.error());
  ++stats_.job_lists;
  if (list->unchanged) {
    ++stats_.job_lists_unchanged;
    listed_at_ = asked;
  } else {
    jobs_since_ = list->last_update;
    ApplyJobList(list->jobs, asked, startup);
  }
  if (startup) co_return Result<void>{};
  co_await CancelDuplicates();
  co_return Result<void>{};
}

void Scheduler::ApplyJobList(const std::vector<slurm::JobInfo>& jobs, async::Clock::TimePoint asked,
                             bool startup) {
  std::unordered_map<std::int64_t, const slurm::JobInfo*> by_id;
  for (const slurm::JobInfo& j : jobs) by_id[j.job_id] = &j;
  // This scheduler's live jobs by group: adopted when a group has no job (PlanGroup), and the
  // duplicates of a tracked group's job are cancelled (PlanDuplicates).
  std::map<std::string, std::vector<JobView>> listed;
  for (const slurm::JobInfo& j : jobs) {
    if (bridge::JobEnded(j.BaseState())) continue;
    std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
    if (!tag || !tag->BelongsTo(config_.cluster_name, config_.scheduler_name)) continue;
    if (tag->group.empty()) continue;
    listed[tag->group].push_back(JobView{.id = j.job_id,
                                         .state = std::string(j.BaseState()),
                                         .reason = j.state_reason,
                                         .expected_start = ExpectedStart(j),
                                         .partition = j.partition,
                                         .nodes = j.nodes,
                                         .uids = tag->uids,
                                         .pods = tag->pods,
                                         .parts = tag->parts});
  }
  listed_ = std::move(listed);
  listed_at_ = asked;
  if (startup) return;

  for (auto& [group, t] : jobs_) {
    auto it = by_id.find(t.id);
    if (it == by_id.end()) {
      // Not in the list: gone, or newer than the list. The poll confirms with GET /job/{id}.
      if (t.submitted < asked) missing_.insert(t.id);
      continue;
    }
    const slurm::JobInfo& j = *it->second;
    if (j.state_reason != t.reason || j.partition != t.partition ||
        ExpectedStart(j) != t.expected_start) {
      t.reason = j.state_reason;
      t.partition = j.partition;
      t.expected_start = ExpectedStart(j);
      queue_.Add(std::string(kGroupItem) + group);
    }
    if (!j.nodes.empty() && j.BaseState() == "RUNNING") {
      t.nodes = j.nodes;
      t.gres_detail = j.gres_detail;
    }
    ApplyState(t, std::string(j.BaseState()));
  }
  // N-21: a job that ended for another reason while one of its nodes had no Kubernetes node
  // leaves its first-seen time behind; only the tracked jobs' are kept.
  std::erase_if(unmapped_since_, [&](const auto& kv) {
    return std::ranges::none_of(jobs_, [&](const auto& g) { return g.second.id == kv.first; });
  });
}

awaitable<void> Scheduler::CancelDuplicates() {
  // A second live job of a tracked group (a submit whose reply was lost, an old leader's
  // submit): cancelled unless pods are bound to it.
  // Tracked groups, and groups bound lately (their bound job is the one kept).
  std::map<std::string, std::int64_t> tracked;
  std::map<std::string, std::string> namespaces;
  std::erase_if(recently_bound_, [&](const auto& r) { return r.second.until < clock_.Now(); });
  for (const auto& [group, r] : recently_bound_) {
    if (listed_.contains(group)) tracked[group] = r.id;
    namespaces[group] = r.namespace_;
  }
  for (const auto& [group, t] : jobs_) {
    if (listed_.contains(group)) tracked[group] = t.id;
  }
  for (const auto& [key, g] : groups_.groups()) namespaces[key] = g.spec.namespace_;
  if (tracked.empty()) co_return;
  std::map<std::string, std::vector<JobView>> others;
  for (const auto& [group, id] : tracked) {
    const std::vector<JobView> views = listed_[group];
    for (JobView j : views) {
      if (j.id == id) continue;
      if (j.state == "RUNNING") {
        auto ns = namespaces.find(group);
        if (ns == namespaces.end()) continue;
        Result<std::vector<Holder>> h = co_await binder_.ReadHolders(ns->second, j.id);
        if (!h) continue;  // unknown: left alone this time
        j.holders = std::move(*h);
        j.holders_known = true;
      }
      others[group].push_back(std::move(j));
    }
  }
  for (const Cancel& c : PlanDuplicates(tracked, others)) {
    // Tracked meanwhile (an await above): never the job a group works with.
    bool tracked_now = false;
    for (const auto& [group, t] : jobs_) tracked_now = tracked_now || t.id == c.id;
    if (!tracked_now) co_await CancelJob(c);
  }
}

awaitable<Result<void>> Scheduler::ListSlurmNodes() {
  Result<std::vector<slurm::NodeInfo>> nodes = co_await slurm_.ListNodes();
  if (!nodes) co_return tl::unexpected(nodes.error());
  std::vector<std::string> names;
  for (const slurm::NodeInfo& n : *nodes) names.push_back(n.name);
  if (names != slurm_nodes_) exclusions_.clear();
  slurm_nodes_ = std::move(names);
  slurm_nodes_known_ = true;
  if (config_.node_sharing == bridge::NodeSharing::kCoResident) co_await CheckSharing();
  co_return Result<void>{};
}

awaitable<void> Scheduler::CheckSharing() {
  Result<std::vector<slurm::PartitionInfo>> parts = co_await slurm_.ListPartitions();
  if (!parts) {
    spdlog::debug("reading Slurm's partitions (nodeSharing check) failed: {}",
                  parts.error().ToString());
    co_return;
  }
  // The configured partition, or every partition when none is (Slurm's default is then used).
  std::vector<std::string> risks;
  for (const slurm::PartitionInfo& p : *parts) {
    if (!config_.partition.empty() && p.name != config_.partition) continue;
    if (std::string risk = bridge::CoResidentSharingRisk(p); !risk.empty()) {
      risks.push_back(std::move(risk));
    }
  }
  std::string said = fmt::format("{}", fmt::join(risks, "; "));
  if (said == sharing_risk_) co_return;
  if (!said.empty()) {
    spdlog::warn("nodeSharing coResident is unsafe: {}", said);
  } else if (!sharing_risk_.empty()) {
    spdlog::info("nodeSharing coResident: the partitions' OverSubscribe is safe again");
  }
  sharing_risk_ = std::move(said);
}

awaitable<void> Scheduler::ConfirmMissing() {
  if (confirming_) co_return;
  confirming_ = true;
  std::set<std::int64_t> ids = std::move(missing_);
  missing_.clear();
  for (std::int64_t id : ids) {
    Result<slurm::JobInfo> j = co_await slurm_.GetJob(id);
    std::string state;
    if (j) {
      state = std::string(j->BaseState());
      spdlog::info("Slurm job {} was missing from a job list but is {}", id, state);
    } else if (j.error().code == ErrorCode::kNotFound) {
      state = "GONE";
      Unlist(id);
    } else {
      continue;  // ask again next time
    }
    for (auto& [group, t] : jobs_) {
      if (t.id == id) ApplyState(t, state);
    }
  }
  confirming_ = false;
}

awaitable<void> Scheduler::PeriodicList() {
  const async::Clock::TimePoint started = clock_.Now();
  (void)co_await RefreshJobs();
  // Every jobListInterval, and never for more than 1/kListSpacing of the time: a full list
  // grows with the cluster's jobs (seconds and hundreds of MB in slurmrestd for 10,000).
  const async::Clock::TimePoint now = clock_.Now();
  next_list_ = now + std::max<async::Clock::Duration>(config_.job_list_interval,
                                                      kListSpacing * (now - started));
}

awaitable<void> Scheduler::PollSlurm() {
  next_list_ = clock_.Now() + config_.job_list_interval;
  async::Clock::TimePoint next_nodes = clock_.Now() + config_.node_list_interval;
  async::Clock::TimePoint next_cancel = clock_.Now();
  while (co_await tasks_.Sleep(config_.job_poll_interval)) {
    const async::Clock::TimePoint tick = clock_.Now();
    const bool fresh = last_submit_ && tick - *last_submit_ < kFreshWindow;
    // One request per jobPollInterval while nothing is fresh (the idle cost): the full job list,
    // when due, stands in for the next full state poll (it carries the states too, or says that
    // no job changed), and so does the periodic node list (the states are asked at the poll
    // after).
    bool asked_this_time = false;
    // The list runs beside the polls: a full list of thousands of jobs takes seconds, during
    // which the jobs that start must still be seen.
    std::erase_if(recently_bound_, [&](const auto& r) { return r.second.until < tick; });
    if ((!jobs_.empty() || !recently_bound_.empty()) && tick >= next_list_ && !listing_) {
      next_list_ = async::Clock::TimePoint::max();  // set again when the list is done
      asked_this_time = true;
      tasks_.Spawn(PeriodicList());
    }
    // Until a node list succeeded nothing is submitted: asked at every interval until then. A
    // periodic one due in the same interval as the job list waits for the next interval.
    const bool nodes_urgent = !slurm_nodes_known_ || nodes_refresh_;
    if (nodes_urgent || (clock_.Now() >= next_nodes && (fresh || !asked_this_time))) {
      nodes_refresh_ = false;
      next_nodes = clock_.Now() + config_.node_list_interval;
      Result<void> r = co_await ListSlurmNodes();
      if (!r) spdlog::warn("reading Slurm's nodes failed: {}", r.error().ToString());
      if (r && !fresh) asked_this_time = true;
    }
    if (asked_this_time) polled_otherwise_ = true;
    if (!missing_.empty()) co_await ConfirmMissing();
    const async::Clock::TimePoint now = clock_.Now();
    if (!to_cancel_.empty() && now >= next_cancel) {
      next_cancel = now + std::chrono::seconds(5);
      co_await RetryCancels();
    }
  }
}

std::vector<std::int64_t> Scheduler::JobsToPoll(const slurm::JobPollTick& tick) {
  std::vector<std::int64_t> ids;
  if (tick.full && std::exchange(polled_otherwise_, false)) return ids;
  // Every tracked job at a full poll; between them, the jobs submitted within kFreshWindow.
  for (const auto& [group, t] : jobs_) {
    if (tick.full || tick.now - t.submitted < kFreshWindow) ids.push_back(t.id);
  }
  return ids;
}

void Scheduler::OnJobStates(const slurm::JobPollAnswer& answer) {
  ++stats_.state_polls;
  const std::set<std::int64_t> asked(answer.ids.begin(), answer.ids.end());
  for (auto& [group, t] : jobs_) {
    if (!asked.contains(t.id)) continue;
    auto it = answer.states.find(t.id);
    if (it == answer.states.end()) {
      // Gone, or not yet in /jobs/state/ (seen lagging under load): confirmed by a GET.
      if (t.submitted < answer.asked) missing_.insert(t.id);
      continue;
    }
    const std::string& s = it->second;
    if (s != t.state && s == "RUNNING") {
      t.nodes.clear();  // read them (and the GPUs) on bind
      t.gres_detail.clear();
      t.components.clear();
    }
    ApplyState(t, s);
  }
  if (!missing_.empty() && !confirming_) tasks_.Spawn(ConfirmMissing());
}

}  // namespace sb::scheduler
