// SPDX-License-Identifier: Apache-2.0
//
#include "scheduler/slurm_jobs.h"

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
#include "wiring/clients.h"

namespace sb::scheduler {
namespace asio = boost::asio;
using asio::awaitable;

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
// Slurm's whole list is read every jobListInterval for this long after a submit whose reply was
// lost (the job it may have made can reach slurmctld late) ...
constexpr auto kDuplicateWatch = std::chrono::minutes(5);
// ... and for this long after start-up: an old leader's submit still in flight when this
// process took over (its HTTP timeout, 30 s by default, bounds it). Two or three lists at the
// default jobListInterval.
constexpr auto kStartupWatch = std::chrono::seconds(90);
// Pending tracked jobs whose reason, partition and expected start are read per jobListInterval
// (GET /job/{id} each, those read longest ago first): 1,000 pending jobs are each read every
// hour at the default 30 s, a handful every interval.
constexpr std::size_t kDetailReads = 8;
// The bound jobs stay listed (a member re-created later finds its gang's job) and are not
// polled: those that ended leave at the next List, made at least this often while any listed
// job is untracked (one GET /jobs/state/ per 2,000 of them).
constexpr auto kListedRefresh = std::chrono::minutes(5);

// Only this scheduler's jobs of Slurm's whole list are kept (memory follows them).
slurm::JobFilter Ours(const bridge::Config& config) {
  return
      [cluster = config.cluster_name, scheduler = config.scheduler_name](const slurm::JobInfo& j) {
        std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
        return tag && tag->BelongsTo(cluster, scheduler);
      };
}

}  // namespace

SlurmJobs::SlurmJobs(asio::any_io_executor executor, slurm::Client& slurm, async::Clock& clock,
                     const bridge::Config& config, Stats& stats, Binder& binder,
                     const GroupTable& groups, async::TaskGroup& tasks, slurm::JobWatch* watch,
                     Hooks hooks)
    : slurm_(slurm),
      clock_(clock),
      config_(config),
      stats_(stats),
      binder_(binder),
      groups_(groups),
      tasks_(tasks),
      hooks_(std::move(hooks)),
      own_watch_(watch != nullptr
                     ? nullptr
                     : std::make_unique<slurm::JobWatch>(std::move(executor), slurm, clock,
                                                         wiring::JobWatchOptionsOf(config))),
      watch_(watch != nullptr ? watch : own_watch_.get()) {}

SlurmJobs::~SlurmJobs() = default;

awaitable<Result<void>> SlurmJobs::ReadAll() {
  Result<void> r = co_await ScanJobs(/*startup=*/true);
  if (r) scan_until_ = clock_.Now() + kStartupWatch;
  co_return r;
}

void SlurmJobs::Start() {
  tasks_.Spawn(PollSlurm());
  if (own_watch_) tasks_.Spawn(own_watch_->Run());
  watch_->Subscribe(this);
}

void SlurmJobs::Stop() {
  watch_->Unsubscribe(this);
  if (own_watch_) own_watch_->Stop();
}

TrackedJob* SlurmJobs::Find(const std::string& group) {
  auto it = jobs_.find(group);
  return it == jobs_.end() ? nullptr : &it->second;
}

TrackedJob* SlurmJobs::Find(const std::string& group, std::int64_t id) {
  TrackedJob* t = Find(group);
  return t != nullptr && t->id == id ? t : nullptr;
}

void SlurmJobs::Track(TrackedJob job, bool submitted) {
  const std::string group = job.group;
  if (submitted) {
    last_submit_ = job.submitted;
    watch_->MarkFresh();
  }
  ListTracked(job);
  jobs_[group] = std::move(job);
}

JobView* SlurmJobs::Listed(const std::string& group, std::int64_t id) {
  auto it = listed_.find(group);
  if (it == listed_.end()) return nullptr;
  for (JobView& v : it->second) {
    if (v.id == id) return &v;
  }
  return nullptr;
}

void SlurmJobs::ListTracked(const TrackedJob& t) {
  // What a whole list would show of it: it stays listed once untracked (bound), so a member
  // re-created later finds it without a list.
  if (t.id <= 0 || t.state.ended()) return;
  JobView view = ViewOf(t);
  view.submitted = {};
  view.refill = false;
  view.bind_tried = false;
  if (JobView* v = Listed(t.group, t.id)) {
    *v = std::move(view);
  } else {
    listed_[t.group].push_back(std::move(view));
  }
}

void SlurmJobs::Doubt() { scan_until_ = std::max(scan_until_, clock_.Now() + kDuplicateWatch); }

void SlurmJobs::Untrack(const std::string& group, std::int64_t id) {
  if (auto it = jobs_.find(group); it != jobs_.end() && it->second.id == id) jobs_.erase(it);
}

awaitable<Result<void>> SlurmJobs::Scan() { co_return co_await ScanJobs(/*startup=*/false); }

awaitable<Result<void>> SlurmJobs::List() {
  const async::Clock::TimePoint asked = clock_.Now();
  std::vector<std::int64_t> ids;
  std::vector<std::pair<std::string, std::int64_t>> listed;  // (group, id)
  for (const auto& [group, views] : listed_) {
    for (const JobView& v : views) {
      ids.push_back(v.id);
      listed.emplace_back(group, v.id);
    }
  }
  listing_ = true;
  Result<std::vector<slurm::JobStateEntry>> states = std::vector<slurm::JobStateEntry>{};
  if (!ids.empty()) states = co_await slurm_.JobStates(std::move(ids));
  if (!states) {
    listing_ = false;
    co_return tl::unexpected(states.error());
  }
  ++stats_.job_refreshes;
  std::unordered_map<std::int64_t, bridge::JobState> now;
  for (const slurm::JobStateEntry& e : *states) {
    if (!e.state.empty()) now.emplace(e.job_id, bridge::JobState(e.state.front()));
  }
  // A job that ended leaves; one whose state changed, or that the answer left out (gone, or
  // lagging), is read in full.
  std::vector<std::pair<std::string, std::int64_t>> changed;
  for (const auto& [group, id] : listed) {
    const JobView* v = Listed(group, id);
    if (v == nullptr) continue;
    auto it = now.find(id);
    if (it != now.end() && it->second.ended()) {
      Unlist(id);
    } else if (it == now.end() || it->second != v->state ||
               (v->state.running() && v->nodes.empty())) {
      changed.emplace_back(group, id);
    }
  }
  for (const auto& [group, id] : changed) {
    Result<slurm::JobInfo> j = co_await slurm_.GetJob(id);
    ++stats_.job_detail_reads;
    if (!j && j.error().code != ErrorCode::kNotFound) {
      listing_ = false;
      co_return tl::unexpected(j.error());
    }
    if (!j || bridge::JobEnded(j->BaseState())) {
      Unlist(id);
      continue;
    }
    JobView* v = Listed(group, id);  // (the awaits above may have changed listed_)
    if (v == nullptr) continue;
    v->state = std::string(j->BaseState());
    v->reason = j->state_reason;
    v->expected_start = ExpectedStart(*j);
    v->partition = j->partition;
    v->nodes = j->nodes;
  }
  listing_ = false;
  listed_at_ = asked;
  co_await CancelDuplicates();
  co_return Result<void>{};
}

void SlurmJobs::Bound(const std::string& group, std::int64_t id, const std::string& ns,
                      async::Clock::TimePoint until) {
  recently_bound_[group] = {.id = id, .namespace_ = ns, .until = until};
  if (const TrackedJob* t = Find(group, id)) ListTracked(*t);  // with its nodes
}

std::optional<async::Clock::TimePoint> SlurmJobs::UnmappedSince(std::int64_t id) const {
  auto it = unmapped_since_.find(id);
  if (it == unmapped_since_.end()) return std::nullopt;
  return it->second;
}

void SlurmJobs::MarkUnmapped(std::int64_t id) {
  unmapped_since_.try_emplace(id, clock_.Now());
  nodes_refresh_ = true;  // Slurm's node list may be behind too
}

JobView ViewOf(const TrackedJob& job) {
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

void SlurmJobs::Unlist(std::int64_t id) {
  for (auto it = listed_.begin(); it != listed_.end();) {
    std::erase_if(it->second, [&](const JobView& j) { return j.id == id; });
    it = it->second.empty() ? listed_.erase(it) : std::next(it);
  }
}

awaitable<Result<std::vector<JobView>>> SlurmJobs::Candidates(const std::string& group,
                                                              const std::string& ns) {
  std::vector<JobView> out;
  auto it = listed_.find(group);
  if (it == listed_.end()) co_return out;
  const std::vector<JobView> listed = it->second;  // the awaits below may change listed_
  for (JobView j : listed) {
    if (j.state.running()) {
      Result<std::vector<Holder>> h = co_await binder_.ReadHolders(ns, j.id);
      if (!h) co_return tl::unexpected(h.error());
      j.holders = std::move(*h);
      j.holders_known = true;
    }
    out.push_back(std::move(j));
  }
  co_return out;
}

awaitable<bool> SlurmJobs::RefreshJobs() {
  if (listing_) co_return false;
  Result<void> r = co_await ScanJobs(false);
  if (!r) spdlog::warn("reading Slurm's jobs failed: {}", r.error().ToString());
  co_return static_cast<bool>(r);
}

awaitable<void> SlurmJobs::CancelJob(Cancel cancel) {
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

awaitable<void> SlurmJobs::RetryCancels() {
  const std::map<std::int64_t, Cancel> pending = to_cancel_;
  for (const auto& [id, c] : pending) co_await CancelJob(c);
}

void SlurmJobs::ApplyState(TrackedJob& job, const bridge::JobState& state) {
  if (!state.known() || state == job.state) return;
  job.state = state;
  if (state.running()) job.running_seen = clock_.Now();
  if (state.ended()) {
    Unlist(job.id);
  } else if (JobView* v = Listed(job.group, job.id)) {
    v->state = state;
  }
  hooks_.changed(job.group);
}

bool SlurmJobs::ApplyAllocation(const std::string& group, TrackedJob& job, const Allocation& a) {
  auto it = jobs_.find(group);
  TrackedJob* tracked = it != jobs_.end() && it->second.id == job.id ? &it->second : nullptr;
  if (a.state == Allocation::State::kGone) {
    if (tracked != nullptr) tracked->state = bridge::JobState::Gone();
    Unlist(job.id);
    return false;
  }
  job.nodes = a.nodes;
  job.gres_detail = a.gres_detail;
  job.components = a.components;
  if (!a.partition.empty()) job.partition = a.partition;
  if (tracked != nullptr) {
    tracked->nodes = a.nodes;
    tracked->gres_detail = a.gres_detail;
    tracked->components = a.components;
    if (!a.base_state.empty()) ApplyState(*tracked, a.base_state);
  }
  if (bridge::JobEnded(a.base_state)) Unlist(job.id);
  return a.state == Allocation::State::kRunning;
}

void SlurmJobs::ApplyTag(const std::string& group, std::int64_t id, const TagMembers& tag) {
  if (auto it = jobs_.find(group); it != jobs_.end() && it->second.id == id) {
    it->second.uids = tag.uids;
    it->second.pods = tag.pods;
  }
  // The job list held stays true to Slurm: the next refill may adopt the job from it.
  if (auto it = listed_.find(group); it != listed_.end()) {
    for (JobView& v : it->second) {
      if (v.id != id) continue;
      v.uids = tag.uids;
      v.pods = tag.pods;
    }
  }
}

awaitable<Result<void>> SlurmJobs::ScanJobs(bool startup) {
  const async::Clock::TimePoint asked = clock_.Now();
  listing_ = true;
  // After the first list, Slurm sends every job only when one changed since the last list
  // (update_time); else a few hundred bytes, and the last list still holds. Only this
  // scheduler's jobs are kept as the list is decoded.
  // At start-up in `all`, the controllers' start-up read is shared (slurm/shared_job_scan.h).
  slurm::JobFilter ours = Ours(config_);
  const std::int64_t since = startup ? 0 : jobs_since_;
  Result<slurm::JobList> list;
  if (startup && startup_scan_ != nullptr) {
    list = co_await startup_scan_->Scan(ours);
  } else {
    list = co_await slurm_.ScanJobs(since, ours);
  }
  listing_ = false;
  if (!list) co_return tl::unexpected(list.error());
  ++stats_.job_lists;
  scanned_at_ = asked;
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

void SlurmJobs::ApplyJobList(const std::vector<slurm::JobInfo>& jobs, async::Clock::TimePoint asked,
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
    ApplyDetails(t, *it->second);
    // Submitted after the list was asked: still listed as this process knows it.
    ListTracked(t);
  }
  for (auto& [group, t] : jobs_) {
    if (!by_id.contains(t.id) && t.submitted >= asked) ListTracked(t);
  }
  // N-21: a job that ended for another reason while one of its nodes had no Kubernetes node
  // leaves its first-seen time behind; only the tracked jobs' are kept.
  std::erase_if(unmapped_since_, [&](const auto& kv) {
    return std::ranges::none_of(jobs_, [&](const auto& g) { return g.second.id == kv.first; });
  });
}

awaitable<void> SlurmJobs::CancelDuplicates() {
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
      if (j.state.running()) {
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

void SlurmJobs::ApplyDetails(TrackedJob& t, const slurm::JobInfo& j) {
  t.details_read = clock_.Now();
  if (j.state_reason != t.reason || j.partition != t.partition ||
      ExpectedStart(j) != t.expected_start) {
    t.reason = j.state_reason;
    t.partition = j.partition;
    t.expected_start = ExpectedStart(j);
    hooks_.changed(t.group);
  }
  if (!j.nodes.empty() && j.BaseState() == "RUNNING") {
    t.nodes = j.nodes;
    t.gres_detail = j.gres_detail;
  }
  ApplyState(t, std::string(j.BaseState()));
}

awaitable<void> SlurmJobs::ReadDetails() {
  std::vector<std::pair<async::Clock::TimePoint, std::int64_t>> due;
  for (const auto& [group, t] : jobs_) {
    if (t.state.pending()) due.emplace_back(t.details_read, t.id);
  }
  std::ranges::sort(due);
  if (due.size() > kDetailReads) due.resize(kDetailReads);
  for (const auto& [read, id] : due) {
    Result<slurm::JobInfo> j = co_await slurm_.GetJob(id);
    ++stats_.job_detail_reads;
    if (!j) {
      if (j.error().code == ErrorCode::kNotFound) missing_.insert(id);  // ConfirmMissing says
      continue;
    }
    for (auto& [group, t] : jobs_) {
      if (t.id == id) ApplyDetails(t, *j);
    }
  }
}

awaitable<Result<void>> SlurmJobs::ListNodes() {
  Result<std::vector<slurm::NodeInfo>> nodes = co_await slurm_.ListNodes();
  if (!nodes) co_return tl::unexpected(nodes.error());
  std::vector<std::string> names;
  for (const slurm::NodeInfo& n : *nodes) names.push_back(n.name);
  if (names != slurm_nodes_) hooks_.nodes_changed();
  slurm_nodes_ = std::move(names);
  slurm_nodes_known_ = true;
  if (config_.node_sharing == bridge::NodeSharing::kCoResident) co_await CheckSharing();
  co_return Result<void>{};
}

awaitable<void> SlurmJobs::CheckSharing() {
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

awaitable<void> SlurmJobs::ConfirmMissing() {
  if (confirming_) co_return;
  confirming_ = true;
  std::set<std::int64_t> ids = std::move(missing_);
  missing_.clear();
  for (std::int64_t id : ids) {
    Result<slurm::JobInfo> j = co_await slurm_.GetJob(id);
    bridge::JobState state;
    if (j) {
      state = std::string(j->BaseState());
      spdlog::info("Slurm job {} was missing from a job list but is {}", id, state.name());
    } else if (j.error().code == ErrorCode::kNotFound) {
      state = bridge::JobState::Gone();
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

awaitable<void> SlurmJobs::PeriodicList() {
  const async::Clock::TimePoint started = clock_.Now();
  if (started < scan_until_) {
    (void)co_await RefreshJobs();
  } else {
    listing_ = true;  // one at a time
    co_await ReadDetails();
    listing_ = false;
  }
  // Every jobListInterval, and never for more than 1/kListSpacing of the time: a full list
  // grows with the cluster's jobs (seconds and hundreds of MB in slurmrestd for 10,000).
  const async::Clock::TimePoint now = clock_.Now();
  next_list_ = now + std::max<async::Clock::Duration>(config_.job_list_interval,
                                                      kListSpacing * (now - started));
}

awaitable<void> SlurmJobs::RefreshListed() {
  Result<void> r = co_await List();
  if (!r) spdlog::warn("reading the states of Slurm jobs failed: {}", r.error().ToString());
}

awaitable<void> SlurmJobs::PollSlurm() {
  next_list_ = clock_.Now() + config_.job_list_interval;
  next_refresh_ = clock_.Now() + kListedRefresh;
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
    const bool scanning = tick < scan_until_ && (!jobs_.empty() || !recently_bound_.empty());
    const bool pending =
        std::ranges::any_of(jobs_, [](const auto& g) { return g.second.state.pending(); });
    if ((scanning || pending) && tick >= next_list_ && !listing_) {
      next_list_ = async::Clock::TimePoint::max();  // set again when the list is done
      // Only a whole list carries the states (or says that none changed).
      asked_this_time = scanning;
      tasks_.Spawn(PeriodicList());
    }
    std::size_t listed = 0;
    for (const auto& [group, views] : listed_) listed += views.size();
    if (listed > jobs_.size() && tick >= next_refresh_ && !listing_) {
      next_refresh_ = tick + kListedRefresh;
      tasks_.Spawn(RefreshListed());
    }
    // Until a node list succeeded nothing is submitted: asked at every interval until then. A
    // periodic one due in the same interval as the job list waits for the next interval.
    const bool nodes_urgent = !slurm_nodes_known_ || nodes_refresh_;
    if (nodes_urgent || (clock_.Now() >= next_nodes && (fresh || !asked_this_time))) {
      nodes_refresh_ = false;
      next_nodes = clock_.Now() + config_.node_list_interval;
      Result<void> r = co_await ListNodes();
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

std::vector<std::int64_t> SlurmJobs::JobsToPoll(const slurm::JobPollTick& tick) {
  std::vector<std::int64_t> ids;
  if (tick.full && std::exchange(polled_otherwise_, false)) return ids;
  // Every tracked job at a full poll, but a job pending for more than bridge::kLongPending only
  // every pendingJobPollInterval (the pod controller asks it at the same polls); between them,
  // the jobs submitted within kFreshWindow.
  const bool pending_due = tick.DueEvery(config_.pending_job_poll_interval);
  for (const auto& [group, t] : jobs_) {
    const bool young = tick.now - t.submitted < kFreshWindow;
    if (!tick.full && !young) continue;
    if (!pending_due && t.state.pending() && tick.now - t.submitted >= bridge::kLongPending) {
      continue;
    }
    ids.push_back(t.id);
  }
  return ids;
}

void SlurmJobs::OnJobStates(const slurm::JobPollAnswer& answer) {
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
    const bridge::JobState s(it->second);
    if (s != t.state && s.running()) {
      t.nodes.clear();  // read them (and the GPUs) on bind
      t.gres_detail.clear();
      t.components.clear();
    }
    ApplyState(t, s);
  }
  if (!missing_.empty() && !confirming_) tasks_.Spawn(ConfirmMissing());
}

}  // namespace sb::scheduler
