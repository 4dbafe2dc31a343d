// SPDX-License-Identifier: Apache-2.0
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

namespace sb::scheduler {
namespace asio = boost::asio;
using asio::awaitable;
using bridge::GroupSpec;
using kube::Pod;

namespace {

constexpr std::string_view kPodItem = "p:";
constexpr std::string_view kGroupItem = "g:";
constexpr auto kOwnerCacheTtl = std::chrono::seconds(10);
// Pod shapes whose excluded nodes are kept (Scheduler::exclusions_); more start it afresh.
constexpr std::size_t kExclusionCacheSize = 1024;
// After a submit, the jobs submitted within kFreshWindow are polled at the job watch's fresh
// cadence (slurm/job_watch.h; all tracked jobs every jobPollInterval): slurmctld starts a job that
// fits in a scheduling pass soon after its submit (measured with the benchmark's settings: within
// about a second, usually several jobs in one pass), and the wait until the next poll is the
// bridge's whole share of that stage. Measured (issue #13): one state poll of a few jobs costs
// slurmctld and slurmrestd about 1.4 ms of CPU together.
constexpr auto kFreshWindow = slurm::JobWatchOptions{}.fresh_window;
// The periodic job list waits at least this many times as long as the last one took.
constexpr int kListSpacing = 20;
// Workers on the queue: 4 x maxConcurrentSubmits, at least this many.
constexpr int kMinWorkers = 16;
// After a group is bound, its duplicates are looked for this long, and at least this many job
// lists (a submit slurmrestd gave up on can reach slurmctld minutes later).
constexpr auto kDuplicateWatch = std::chrono::minutes(5);
constexpr int kDuplicateWatchLists = 5;

std::string PodKey(const Pod& pod) { return kube::ObjectKey(pod.metadata); }

}  // namespace

Scheduler::Scheduler(asio::any_io_executor executor, kube::Client& kube, slurm::Client& slurm,
                     async::Clock& clock, bridge::Config config, slurm::JobWatch* watch)
    : executor_(std::move(executor)),
      kube_(kube),
      slurm_(slurm),
      clock_(clock),
      config_(std::move(config)),
      pods_(kube, kube::PodsRef(),
            kube::InformerOptions{
                .reflector = {.list_options = {.field_selector =
                                                   "spec.schedulerName=" + config_.scheduler_name +
                                                   ",spec.nodeName="}}}),
      nodes_(kube, kube::NodesRef()),
      event_sink_(kube),
      recorder_(clock, event_sink_,
                kube::EventRecorderOptions{.source = {.component = config_.scheduler_name}}),
      binder_(kube, slurm, recorder_, config_, stats_),
      queue_(clock, kube::BackoffPolicy{.base = std::chrono::milliseconds(250),
                                        .cap = std::chrono::seconds(60)}),
      submit_slots_(clock, config_.max_concurrent_submits),
      own_watch_(watch != nullptr
                     ? nullptr
                     : std::make_unique<slurm::JobWatch>(executor_, slurm, clock,
                                                         bridge::JobWatchOptionsOf(config_))),
      watch_(watch != nullptr ? watch : own_watch_.get()),
      tasks_(executor_, clock, "scheduler") {
  translate_ = {.partition = config_.partition,
                .mcs_label = config_.mcs_label,
                .cluster_name = config_.cluster_name,
                .scheduler_name = config_.scheduler_name,
                .mode = config_.job_mode,
                .resource_tres = config_.resource_tres,
                .default_time_limit_minutes = config_.default_time_limit.count()};
  // Higher priority first, then the older pod; items without a rank (groups) as priority 0,
  // before every pod of priority 0.
  queue_.SetRank([this](const std::string& item) {
    const auto r = ranks_.find(item);
    if (r == ranks_.end()) return QueueRank{};
    return QueueRank{-static_cast<std::int64_t>(r->second.priority), r->second.created};
  });
  pods_.cache().AddHandlers(
      {.on_add = [this](const auto& p) { OnPod(nullptr, p); },
       .on_update = [this](const auto& old, const auto& p) { OnPod(old.get(), p); },
       .on_delete = [this](const auto& p) { OnPodDeleted(p); }});
  nodes_.cache().AddHandlers(
      {.on_add = [this](const auto& n) { OnNodeChanged(nullptr, *n); },
       .on_update = [this](const auto& old, const auto& n) { OnNodeChanged(old.get(), *n); },
       .on_delete = [this](const auto& n) { OnNodeChanged(nullptr, *n); }});
}

Scheduler::~Scheduler() = default;

void Scheduler::Enqueue(const std::string& key, const Pod& pod) {
  Rank& r = ranks_[key];
  const std::int32_t prio = pod.spec.priority.value_or(0);
  if (r.created.empty() || prio > r.priority ||
      (prio == r.priority && pod.metadata.creation_timestamp < r.created)) {
    r.priority = prio;
    r.created = pod.metadata.creation_timestamp;
  }
  queue_.Add(key);
}

void Scheduler::OnPod(const Pod* old, const std::shared_ptr<const Pod>& pod) {
  // Deleted and re-created under the same name, seen as an update (a relist): the old pod's
  // entries go.
  if (old != nullptr && old->metadata.uid != pod->metadata.uid) {
    reported_.erase(old->metadata.uid);
    bound_.erase(old->metadata.uid);
    seen_.erase(old->metadata.uid);
  }
  if (!pod->spec.node_name.empty()) {
    seen_.erase(pod->metadata.uid);
    return;
  }
  if (spdlog::should_log(spdlog::level::debug)) seen_.try_emplace(pod->metadata.uid, clock_.Now());
  // Gated (spec.schedulingGates): no job until the gates are gone; their removal is an update.
  // A gated pod that was a member leaves its group's count.
  if (!Schedulable(*pod)) {
    if (auto it = group_of_pod_.find(PodKey(*pod)); it != group_of_pod_.end()) {
      queue_.Add(std::string(kGroupItem) + it->second);
    }
    return;
  }
  // Resolved again on every change: the group's description (annotations, members) may have
  // changed. Owners come from a short-lived cache.
  Enqueue(std::string(kPodItem) + PodKey(*pod), *pod);
}

Scheduler::GroupState* Scheduler::Group(const std::string& key) {
  auto it = groups_.find(key);
  return it == groups_.end() ? nullptr : &it->second;
}

void Scheduler::RetryLater(const std::string& group_key, const std::vector<const Pod*>& pods,
                           async::Clock::Duration after) {
  // Through the pod: the fix is usually an edit of the pod or of its owner, read again there.
  if (pods.empty()) {
    queue_.AddAfter(std::string(kGroupItem) + group_key, after);
  } else {
    queue_.AddAfter(std::string(kPodItem) + PodKey(*pods.front()), after);
  }
}

void Scheduler::OnNodeChanged(const kube::Node* before, const kube::Node& after) {
  node_map_.reset();  // its pointers may be the old objects'
  // What decides exclusions: schedulability, taints, labels, readiness, allocatable.
  if (before != nullptr && before->unschedulable == after.unschedulable &&
      before->taints == after.taints && before->metadata.labels == after.metadata.labels &&
      bridge::NodeIsReady(*before) == bridge::NodeIsReady(after) &&
      before->allocatable == after.allocatable) {
    return;
  }
  exclusions_.clear();
  for (const auto& [group, job] : jobs_) {
    if (job.state == "PENDING") queue_.Add(std::string(kGroupItem) + group);
  }
}

void Scheduler::OnPodDeleted(const std::shared_ptr<const Pod>& pod) {
  const std::string key = PodKey(*pod);
  reported_.erase(pod->metadata.uid);
  bound_.erase(pod->metadata.uid);
  seen_.erase(pod->metadata.uid);
  auto it = group_of_pod_.find(key);
  if (it == group_of_pod_.end()) return;
  const std::string group = it->second;
  group_of_pod_.erase(it);
  if (GroupState* g = Group(group)) g->members.erase(key);
  Enqueue(std::string(kGroupItem) + group, *pod);
}

awaitable<Result<void>> Scheduler::Run() {
  tasks_.Spawn(pods_.Run());
  tasks_.Spawn(nodes_.Run());
  tasks_.Spawn(recorder_.Run());

  // Start-up: caches, Slurm's nodes and jobs (adoption) before anything is submitted.
  Result<void> startup;
  while (!pods_.HasSynced() || !nodes_.HasSynced()) {
    if (!co_await tasks_.Sleep(std::chrono::milliseconds(20))) break;
  }
  for (int attempt = 0; !stopping_; ++attempt) {
    startup = co_await ListJobs(/*startup=*/true);
    if (startup) break;
    spdlog::warn("reading Slurm's jobs failed (attempt {}): {}", attempt + 1,
                 startup.error().ToString());
    (void)co_await tasks_.Sleep(
        std::chrono::milliseconds(std::min(5000, 200 << std::min(attempt, 5))));
  }
  if (!stopping_) {
    // Nothing is submitted before Slurm's nodes are known (the Kubernetes-side exclusions need
    // them); PollSlurm keeps asking.
    Result<void> nodes = co_await ListSlurmNodes();
    if (!nodes) {
      spdlog::warn("reading Slurm's nodes failed: {}; no job is submitted until it succeeds",
                   nodes.error().ToString());
    }
    ready_ = true;
    spdlog::info("scheduler {} started: {} pending pods, {} adopted jobs", config_.scheduler_name,
                 pods_.cache().size(), jobs_.size());
    // Workers beyond the submits in flight: binding and the pods' writes wait on the apiserver,
    // which a burst slows down, and must not hold the submits up (nor the other way round).
    const int workers = std::max(kMinWorkers, 4 * config_.max_concurrent_submits);
    for (int i = 0; i < workers; ++i) tasks_.Spawn(Worker());
    tasks_.Spawn(PollSlurm());
    if (own_watch_) tasks_.Spawn(own_watch_->Run());
    watch_->Subscribe(this);
  }
  co_await tasks_.Join();
  watch_->Unsubscribe(this);
  co_return Result<void>{};
}

void Scheduler::Stop() {
  if (stopping_) return;
  stopping_ = true;
  pods_.Stop();
  nodes_.Stop();
  queue_.ShutDown();
  submit_slots_.Close();
  recorder_.ShutDown();
  watch_->Unsubscribe(this);
  if (own_watch_) own_watch_->Stop();
  tasks_.Stop();
}

awaitable<void> Scheduler::Worker() {
  co_await kube::RunQueueWorker(
      queue_, [this](const std::string& item) { return Process(item); },
      [](const std::string& item, const Error& e) {
        spdlog::warn("{}: {}", item.substr(2), e.ToString());
      });
}

awaitable<Result<void>> Scheduler::Process(const std::string& item) {
  if (item.starts_with(kPodItem)) {
    Result<void> r = co_await Resolve(item.substr(kPodItem.size()));
    // Done with the pod (resolved, gone, or waiting to be looked at again later): its rank goes,
    // whichever way it ended. An error keeps it for the retry.
    if (r) ranks_.erase(item);
    co_return r;
  }
  co_return co_await Reconcile(item.substr(kGroupItem.size()));
}

awaitable<Result<kube::GenericObject>> Scheduler::GetOwner(std::string api_version,
                                                           std::string kind, std::string ns,
                                                           std::string name) {
  const std::string cache_key = api_version + "/" + kind + "/" + ns + "/" + name;
  if (auto it = owners_.find(cache_key);
      it != owners_.end() && clock_.Now() - it->second.fetched < kOwnerCacheTtl) {
    co_return it->second.object;
  }
  kube::ResourceRef ref;
  if (auto slash = api_version.find('/'); slash != std::string::npos) {
    ref.group = api_version.substr(0, slash);
    ref.version = api_version.substr(slash + 1);
  } else {
    ref.version = api_version;
  }
  ref.resource = bridge::ResourceOfKind(kind);
  ref.namespace_ = ns;
  ref.name = name;
  Result<kube::GenericObject> obj = co_await kube::GetAs<kube::GenericObject>(kube_, ref);
  if (obj) owners_[cache_key] = CachedOwner{*obj, clock_.Now()};
  if (owners_.size() > 4096) owners_.clear();
  co_return obj;
}

awaitable<Result<void>> Scheduler::Resolve(const std::string& pod_key) {
  std::shared_ptr<const Pod> pod = pods_.cache().Get(pod_key);
  if (!pod || !Schedulable(*pod)) co_return Result<void>{};
  const std::string& ns = pod->metadata.namespace_;

  // The controller chain, as far as it can be read (at most 32 levels, as upstream).
  std::vector<kube::GenericObject> owners;
  const std::vector<kube::OwnerReference>* refs = &pod->metadata.owner_references;
  for (int depth = 0; depth < 32; ++depth) {
    const kube::OwnerReference* controller = nullptr;
    for (const kube::OwnerReference& r : *refs) {
      if (r.controller) controller = &r;
    }
    if (controller == nullptr) break;
    Result<kube::GenericObject> owner =
        co_await GetOwner(controller->api_version, controller->kind, ns, controller->name);
    if (!owner) {
      if (owner.error().code != ErrorCode::kNotFound &&
          owner.error().code != ErrorCode::kPermissionDenied &&
          owner.error().code != ErrorCode::kInvalidArgument) {
        co_return tl::unexpected(owner.error());  // transient: retry
      }
      spdlog::debug("{}: owner {} {} not readable: {}", pod_key, controller->kind, controller->name,
                    owner.error().ToString());
      break;
    }
    owners.push_back(std::move(*owner));
    refs = &owners.back().metadata.owner_references;
  }
  std::optional<kube::GenericObject> pod_group;
  if (auto it = pod->metadata.labels.find(std::string(bridge::kPodGroupLabel));
      it != pod->metadata.labels.end()) {
    Result<kube::GenericObject> pg =
        co_await GetOwner("scheduling.x-k8s.io/v1alpha1", "PodGroup", ns, it->second);
    if (!pg) {
      // Never a job of its own: the pod belongs to a gang that cannot be read now.
      if (OnPodGroupError(pg.error().code) == PodGroupMiss::kRetry) {
        co_return tl::unexpected(pg.error());
      }
      co_await ReportWaiting(
          *pod, fmt::format("PodGroup {} cannot be read ({}); the pod waits for it and is never "
                            "scheduled alone",
                            it->second, ErrorWords(pg.error())));
      queue_.AddAfter(std::string(kPodItem) + pod_key, std::chrono::seconds(10));
      co_return Result<void>{};
    }
    pod_group = std::move(*pg);
  }
  Result<GroupSpec> spec = bridge::ResolveGroup(*pod, owners, pod_group ? &*pod_group : nullptr);
  if (!spec) {
    co_await ReportWaiting(*pod, "cannot group the pod: " + spec.error().message);
    co_return Result<void>{};
  }
  // The pod may have gone while the owners were read.
  if (!pods_.cache().Get(pod_key)) co_return Result<void>{};
  const std::string group = spec->key;
  if (auto old = group_of_pod_.find(pod_key); old != group_of_pod_.end() && old->second != group) {
    // Moved to another group (its pod-group label changed): the old one looks again.
    if (GroupState* g = Group(old->second)) g->members.erase(pod_key);
    queue_.Add(std::string(kGroupItem) + old->second);
  }
  GroupState& g = groups_[group];
  g.spec = std::move(*spec);
  g.members.insert(pod_key);
  group_of_pod_[pod_key] = group;
  Enqueue(std::string(kGroupItem) + group, *pod);
  co_return Result<void>{};
}

const std::map<std::string, const kube::Node*>& Scheduler::NodesBySlurmName() const {
  if (node_map_) return *node_map_;
  std::vector<std::shared_ptr<const kube::Node>> all = nodes_.cache().List();
  std::vector<const kube::Node*> nodes;
  for (const auto& n : all) nodes.push_back(n.get());
  NodeMapping m = MapSlurmNodes(nodes);
  if (m.duplicates != logged_duplicates_) {  // said once per change, not on every call
    logged_duplicates_ = m.duplicates;
    if (!m.duplicates.empty()) {
      spdlog::warn(
          "several Kubernetes nodes map to Slurm node(s) {}: the one labelled {} is used (else "
          "the first by name)",
          fmt::join(m.duplicates, ", "), bridge::kSlurmNodeNameLabel);
    }
  }
  node_map_ = std::move(m.by_slurm_name);
  return *node_map_;
}

void Scheduler::Emit(const std::vector<const Pod*>& pods, const std::string& reason,
                     const std::string& message) {
  for (const Pod* pod : pods) {
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata), kube::EventType::kWarning,
                   reason, message);
  }
}

JobView Scheduler::View(const TrackedJob& job) {
  return JobView{.id = job.id,
                 .state = job.state,
                 .reason = job.reason,
                 .partition = job.partition,
                 .nodes = job.nodes,
                 .uids = job.uids,
                 .pods = job.pods,
                 .submitted = job.submitted,
                 .refill = job.refill,
                 .bind_tried = job.bind_tried};
}

void Scheduler::Unlist(std::int64_t id) {
  for (auto it = listed_.begin(); it != listed_.end();) {
    std::erase_if(it->second, [&](const JobView& j) { return j.id == id; });
    it = it->second.empty() ? listed_.erase(it) : std::next(it);
  }
}

awaitable<Result<bool>> Scheduler::PodGroupRan(const GroupSpec& spec) {
  kube::ListOptions opts;
  opts.label_selector =
      fmt::format("{}={},{}", bridge::kPodGroupLabel, spec.name, bridge::kJobIdLabel);
  Result<kube::List<Pod>> members =
      co_await kube::ListAs<Pod>(kube_, kube::PodsRef(spec.namespace_), opts);
  if (!members) co_return tl::unexpected(members.error());
  co_return std::ranges::any_of(members->items,
                                [](const Pod& p) { return !p.spec.node_name.empty(); });
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

awaitable<Result<void>> Scheduler::Reconcile(const std::string& group_key) {
  GroupState* group = Group(group_key);
  if (group == nullptr) co_return Result<void>{};
  GroupSpec spec = group->spec;
  // A job submitted for a part of the group (a PodGroup's remainder) keeps that size.
  if (auto it = jobs_.find(group_key); it != jobs_.end() && it->second.size > 0) {
    spec.size = it->second.size;
  }

  // Members: unbound pods of the group; those being deleted only lose the finalizer; gated ones
  // wait for their gates to go.
  std::vector<std::shared_ptr<const Pod>> held;
  std::vector<const Pod*> live;
  std::vector<std::shared_ptr<const Pod>> deleting;
  for (const std::string& key : group->members) {
    std::shared_ptr<const Pod> pod = pods_.cache().Get(key);
    // Bound pods leave the watch a moment after the binding; until then the cache may show them
    // unbound.
    if (!pod || !pod->spec.node_name.empty() || bound_.contains(pod->metadata.uid)) continue;
    if (!pod->metadata.deletion_timestamp.empty()) {
      deleting.push_back(pod);
      continue;
    }
    if (!Schedulable(*pod)) continue;
    held.push_back(pod);
    live.push_back(pod.get());
  }
  std::ranges::sort(live,
                    [](const Pod* a, const Pod* b) { return a->metadata.name < b->metadata.name; });

  const async::Clock::TimePoint now = clock_.Now();
  GroupInput in{.spec = spec,
                .pods = live,
                .jobs_listed_at = listed_at_,
                .slurm_nodes_known = slurm_nodes_known_,
                .now = now};
  if (auto it = jobs_.find(group_key); it != jobs_.end()) {
    in.tracked = View(it->second);
    if (live.empty() && in.tracked->bind_tried) {
      // Its pods left the watch: bound (a Binding whose reply was lost) or gone? The apiserver
      // says which before the job may be cancelled.
      const std::int64_t id = in.tracked->id;
      Result<std::vector<Holder>> h = co_await binder_.ReadHolders(spec.namespace_, id);
      if (!h) co_return tl::unexpected(h.error());
      auto now_it = jobs_.find(group_key);
      if (now_it == jobs_.end() || now_it->second.id != id) {
        queue_.Add(std::string(kGroupItem) + group_key);  // changed meanwhile: look again
        co_return Result<void>{};
      }
      in.tracked->holders = std::move(*h);
      in.tracked->holders_known = true;
    }
  } else if (!live.empty()) {
    Result<std::vector<JobView>> candidates = co_await Candidates(group_key, spec.namespace_);
    if (!candidates) co_return tl::unexpected(candidates.error());
    in.tagged = std::move(*candidates);
    if (jobs_.contains(group_key)) {  // tracked meanwhile (another worker): look again
      queue_.Add(std::string(kGroupItem) + group_key);
      co_return Result<void>{};
    }
  }
  // (The awaits above may have changed the map: looked up again.)
  group = Group(group_key);
  if (group == nullptr) co_return Result<void>{};
  in.submit_doubt_since = group->submit_doubt;
  in.incomplete_since = group->incomplete_since;
  in.ran_before = group->ran;
  if (!in.ran_before && !in.tracked && spec.kind == "PodGroup" && !live.empty() &&
      static_cast<int>(live.size()) < spec.size && in.incomplete_since && in.jobs_listed_at &&
      *in.jobs_listed_at >= *in.incomplete_since) {
    // Short of minMember with no job: whether the PodGroup ran before is this process's memory,
    // or (after a restart) the apiserver's: a member the bridge bound, running or done.
    Result<bool> ran = co_await PodGroupRan(spec);
    if (!ran) co_return tl::unexpected(ran.error());
    group = Group(group_key);
    if (group == nullptr) co_return Result<void>{};
    group->ran = *ran;
    in.ran_before = *ran;
  }
  const GroupPlan plan = PlanGroup(in, planner_);

  for (const Cancel& c : plan.cancel) {
    if (auto it = jobs_.find(group_key); it != jobs_.end() && it->second.id == c.id) {
      jobs_.erase(it);
    }
    co_await CancelJob(c);
  }
  if (plan.forget) {
    if (auto it = jobs_.find(group_key);
        it != jobs_.end() && in.tracked && it->second.id == in.tracked->id) {
      jobs_.erase(it);
    }
  }
  // Before the list below: the list is asked for once, for the pods short since then.
  if (plan.incomplete) {
    if (!group->incomplete_since) group->incomplete_since = now;
  } else {
    group->incomplete_since.reset();
  }
  if (plan.list_jobs) {
    // A lost submit reply, or a member that may belong to a running job: read Slurm first.
    if (listing_) {  // another worker reads them: look again after it
      queue_.AddAfter(std::string(kGroupItem) + group_key, std::chrono::milliseconds(200));
      co_return Result<void>{};
    }
    Result<void> listed = co_await ListJobs(false);
    if (!listed) co_return tl::unexpected(listed.error());  // with the queue's backoff
    queue_.Add(std::string(kGroupItem) + group_key);
    co_return Result<void>{};
  }
  if (plan.adopt) {
    const JobView& v = *plan.adopt;
    TrackedJob t{.id = v.id,
                 .group = group_key,
                 .uids = v.uids,
                 .state = v.state,
                 .reason = v.reason,
                 .partition = v.partition,
                 .pods = v.pods,
                 .refill = v.refill};
    // The list may be old: a running job's nodes (and that it still runs) are read on bind.
    jobs_[group_key] = t;
    if (GroupState* g = Group(group_key)) g->submit_doubt.reset();
    ++stats_.jobs_adopted;
    spdlog::info("{}: adopted Slurm job {} ({}{})", group_key, v.id, v.state,
                 v.refill ? ", pods of the group run in it" : "");
  }

  for (const auto& pod : deleting) co_await DropFinalizer(*pod);
  if (live.empty()) {
    if (GroupState* g = Group(group_key); g != nullptr && g->members.empty()) {
      groups_.erase(group_key);
      ranks_.erase(std::string(kGroupItem) + group_key);
    }
    co_return Result<void>{};
  }
  if (!plan.event_reason.empty()) {
    if (plan.event_reason == "SlurmJobEnded") ++stats_.jobs_replaced;
    spdlog::info("{}: {}", group_key, plan.event_message);
    Emit(live, plan.event_reason, plan.event_message);
  }

  if (auto it = jobs_.find(group_key); it != jobs_.end() && !plan.label.empty()) {
    const std::int64_t id = it->second.id;
    for (const Pod* pod : plan.label) {
      Result<void> r = co_await binder_.LabelPod(*pod, id, {});
      if (!r) co_return r;
    }
  }
  if (!plan.submit.empty()) {
    GroupSpec part = spec;
    if (plan.submit_size > 0) part.size = plan.submit_size;
    co_return co_await Submit(part, plan.submit);
  }
  if (plan.bind) {
    auto it = jobs_.find(group_key);
    if (it == jobs_.end()) co_return Result<void>{};
    co_return co_await Bind(spec, live, it->second);
  }
  if (plan.update_pending) {
    const bool described = co_await UpdatePending(spec, plan.members);
    if (!described) co_return Result<void>{};
  }
  if (!plan.report.empty()) {
    for (const Pod* pod : live) co_await ReportWaiting(*pod, plan.report);
  }
  if (plan.recheck_at) {
    const async::Clock::Duration after =
        std::max(async::Clock::Duration::zero(), *plan.recheck_at - clock_.Now());
    if (plan.recheck_owners) {
      RetryLater(group_key, live, after);
    } else {
      queue_.AddAfter(std::string(kGroupItem) + group_key, after);
    }
  }
  co_return Result<void>{};
}

Scheduler::Wanted Scheduler::Describe(const GroupSpec& spec,
                                      const std::vector<const Pod*>& pods) const {
  Wanted w;
  Result<slurm::JobDescription> desc = bridge::Translate(spec, pods, translate_);
  if (!desc) {
    // The fix is an edit of the pod or of the root object: look again later.
    w.problem = desc.error().message;
    w.retry = std::chrono::seconds(30);
    return w;
  }
  std::string key = bridge::ExclusionKey(pods);
  auto cached = exclusions_.find(key);
  if (cached == exclusions_.end()) {
    if (exclusions_.size() >= kExclusionCacheSize) exclusions_.clear();
    cached =
        exclusions_
            .emplace(std::move(key), bridge::ExcludedNodes(pods, slurm_nodes_, NodesBySlurmName()))
            .first;
  }
  const std::vector<bridge::Exclusion>& excluded = cached->second;
  if (!slurm_nodes_.empty() && excluded.size() == slurm_nodes_.size()) {
    std::vector<std::string> why;
    for (const bridge::Exclusion& e : excluded) why.push_back(e.slurm_node + ": " + e.reason);
    w.problem =
        fmt::format("no Slurm node can run the pod in Kubernetes ({})", fmt::join(why, ", "));
    w.retry = std::chrono::seconds(10);
    return w;
  }
  for (const bridge::Exclusion& e : excluded) desc->excluded_nodes.push_back(e.slurm_node);
  // Slurm nodes an earlier job of the group was allocated but Kubernetes lacks.
  // (Only names Slurm still has: Slurm refuses a job that excludes a node it does not know.)
  if (auto it = groups_.find(spec.key); it != groups_.end()) {
    for (const std::string& n : it->second.excluded) {
      if (std::ranges::find(slurm_nodes_, n) != slurm_nodes_.end() &&
          std::ranges::find(desc->excluded_nodes, n) == desc->excluded_nodes.end()) {
        desc->excluded_nodes.push_back(n);
      }
    }
  }
  // One pod per node: a node range from the annotations could never be bound.
  const int count = std::max(spec.size, static_cast<int>(pods.size()));
  if (std::optional<std::string> note = FitNodeCount(*desc, count)) {
    w.note = std::move(*note);
  }
  w.job = std::move(*desc);
  return w;
}

awaitable<Result<void>> Scheduler::Submit(const GroupSpec& spec, std::vector<const Pod*> pods) {
  Wanted wanted = Describe(spec, pods);
  if (!wanted.problem.empty()) {
    spdlog::warn("{}: {}", spec.key, wanted.problem);
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, wanted.problem);
    RetryLater(spec.key, pods, wanted.retry);
    co_return Result<void>{};
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
    co_return Result<void>{};
  }
  std::optional<async::Semaphore::Permit> permit = co_await submit_slots_.Acquire();
  CallSubmitLine();
  // A scheduler that stops (lost leadership) submits nothing more: the next leader does.
  if (!permit || stopping_) co_return Result<void>{};
  const std::string partition = wanted.job.partition;
  const async::Clock::TimePoint sent = clock_.Now();
  Result<slurm::JobSubmitResult> submitted = co_await slurm_.SubmitJob(wanted.job);
  permit.reset();
  CallSubmitLine();
  if (!submitted) {
    ++stats_.submit_errors;
    const Error& e = submitted.error();
    if (SubmitOutcomeUnknown(e.code)) {
      // Slurm may have made the job: Slurm's jobs are read before the group is looked at again.
      if (GroupState* g = Group(spec.key)) g->submit_doubt = clock_.Now();
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
    if (e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kPermissionDenied) {
      RetryLater(spec.key, pods, std::chrono::seconds(30));
      co_return Result<void>{};
    }
    co_return tl::unexpected(e);
  }
  ++stats_.jobs_submitted;
  if (GroupState* g = Group(spec.key)) g->submit_doubt.reset();
  TrackedJob job{.id = submitted->job_id,
                 .group = spec.key,
                 .state = "PENDING",
                 .partition = partition,
                 .submitted = clock_.Now(),
                 .submit_sent = sent,
                 .sent = std::move(wanted.job)};
  if (GroupState* g = Group(spec.key); g != nullptr && g->spec.size != spec.size) {
    job.size = spec.size;
  }
  for (const Pod* pod : pods) {
    if (auto it = seen_.find(pod->metadata.uid); it != seen_.end()) {
      if (job.pod_seen == async::Clock::TimePoint{} || it->second < job.pod_seen) {
        job.pod_seen = it->second;
      }
    }
    job.uids.push_back(pod->metadata.uid);
    job.pods.push_back(pod->metadata.namespace_ + "/" + pod->metadata.name);
  }
  jobs_[spec.key] = job;
  last_submit_ = job.submitted;
  watch_->MarkFresh();
  spdlog::info("{}: submitted Slurm job {} for {} pod(s)", spec.key, job.id, pods.size());
  if (!wanted.note.empty()) {
    spdlog::warn("{}: {}", spec.key, wanted.note);
    Emit(pods, "SlurmNodeCountSet", wanted.note);
  }

  // The next pass labels the pods (job id, finalizer, toleration).
  queue_.Add(std::string(kGroupItem) + spec.key);
  co_return Result<void>{};
}

void Scheduler::CallSubmitLine() {
  // A place among the waiters (one got its slot, or a slot is free): the next group of the line
  // goes back to the queue. One that finds no place after all joins the line again.
  if (submit_line_.empty() ||
      submit_slots_.waiting() >= static_cast<std::size_t>(config_.max_concurrent_submits)) {
    return;
  }
  queue_.Add(std::string(kGroupItem) + submit_line_.front());
  submit_line_.pop_front();
}

awaitable<bool> Scheduler::UpdatePending(const GroupSpec& spec, std::vector<const Pod*> pods) {
  auto it = jobs_.find(spec.key);
  if (it == jobs_.end() || it->second.state != "PENDING") co_return true;
  const std::int64_t id = it->second.id;
  // `pods`: the job's own pods first, cut to the group size (PlanGroup's members).
  Wanted wanted = Describe(spec, pods);
  if (!wanted.problem.empty()) {
    const std::string msg =
        fmt::format("{}; Slurm job {} waits with the description it had", wanted.problem, id);
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, msg);
    RetryLater(spec.key, pods, wanted.retry);
    co_return false;
  }
  // Adopted jobs: what they were submitted with is unknown, so every field is sent once.
  bridge::JobUpdate update =
      bridge::PendingJobUpdate(it->second.sent.value_or(slurm::JobDescription{}), wanted.job);
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
    it->second.sent = std::move(wanted.job);
    follow(it->second);
    co_return true;
  }
  Result<bool> r = co_await slurm_.UpdateJob(id, std::move(update.changes));
  it = jobs_.find(spec.key);
  if (it == jobs_.end() || it->second.id != id) co_return true;
  if (r) {
    ++stats_.jobs_updated;
    it->second.sent = std::move(wanted.job);
    follow(it->second);
    spdlog::info(
        "{}: pending Slurm job {} updated: {}{}", spec.key, id, fmt::join(update.changed, ", "),
        update.kept.empty() ? std::string()
                            : fmt::format(" (Slurm keeps its {})", fmt::join(update.kept, ", ")));
    co_return true;
  }
  const Error& e = r.error();
  // Started or ended meanwhile: the next poll sees it.
  if (e.code == ErrorCode::kFailedPrecondition || e.code == ErrorCode::kNotFound) co_return true;
  if (e.code == ErrorCode::kUnavailable || e.code == ErrorCode::kDeadlineExceeded) {
    spdlog::warn("{}: updating pending Slurm job {} failed: {}", spec.key, id, e.ToString());
    RetryLater(spec.key, pods, std::chrono::seconds(5));
    co_return true;
  }
  // Refused: said once, and not asked again until the description changes again.
  it->second.sent = std::move(wanted.job);
  const std::string msg = fmt::format("Slurm refused to update pending job {} ({}): {}", id,
                                      fmt::join(update.changed, ", "), ErrorWords(e));
  spdlog::warn("{}: {}", spec.key, msg);
  for (const Pod* pod : pods) {
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata), kube::EventType::kWarning,
                   "SlurmJobUpdateFailed", msg);
  }
  co_return true;
}

awaitable<Result<void>> Scheduler::Bind(const GroupSpec& spec, std::vector<const Pod*> pods,
                                        TrackedJob job) {
  // The steps are binder.h's; this applies what each returns to the scheduler's state.
  job.bind_began = clock_.Now();
  // 1. Where the job runs (known already when a job list carried its nodes).
  if (job.nodes.empty()) {
    const bool layout_first = job.state == "RUNNING" && job.submitted != async::Clock::TimePoint{};
    Result<Allocation> a = co_await binder_.ReadAllocation(job.id, layout_first);
    if (!a) co_return tl::unexpected(a.error());
    if (!ApplyAllocation(spec.key, job, *a)) {
      queue_.Add(std::string(kGroupItem) + spec.key);  // gone or not running: planned again
      co_return Result<void>{};
    }
  }
  job.nodes_read = clock_.Now();
  Result<std::vector<std::string>> slurm_nodes = bridge::ExpandHostlist(job.nodes);
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
  if (auto it = jobs_.find(spec.key); it != jobs_.end() && it->second.id == job.id) {
    it->second.bind_tried = true;
  }
  // 3. The plan.
  BindInput in{.job = View(job),
               .slurm_nodes = std::move(*slurm_nodes),
               .pods = pods,
               .holders = std::move(holders),
               .kind = spec.kind,
               .name = spec.name,
               .now = clock_.Now()};
  for (const auto& [slurm_name, node] : NodesBySlurmName()) {
    in.kube_node_of[slurm_name] = node->metadata.name;
  }
  if (auto it = unmapped_since_.find(job.id); it != unmapped_since_.end()) {
    in.unmapped_since = it->second;
  }
  if (!in.holders.empty()) {
    // A refill: each waiting pod's own constraints against the job's nodes.
    for (const Pod* pod : pods) {
      std::set<std::string>& out = in.excluded_for[pod->metadata.uid];
      for (const bridge::Exclusion& e :
           bridge::ExcludedNodes({pod}, in.slurm_nodes, NodesBySlurmName())) {
        if (auto k = in.kube_node_of.find(e.slurm_node); k != in.kube_node_of.end()) {
          out.insert(k->second);
        }
      }
    }
  }
  const BindPlan plan = PlanBind(in, planner_);
  if (co_await OnUnmapped(spec, pods, job.id, plan)) co_return Result<void>{};
  if (!plan.report.empty()) {
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, plan.report);
  }
  if (plan.recheck_at) {
    queue_.AddAfter(std::string(kGroupItem) + spec.key,
                    std::max(async::Clock::Duration::zero(), *plan.recheck_at - clock_.Now()));
  }
  if (plan.assign.empty()) co_return Result<void>{};

  // 4. Pre-bind writes: pods the job was not submitted for (a re-created member) join its tag,
  // so that the controllers know them as the job's; each pod carries the job id (label,
  // finalizer, toleration: set after the submit; a pod whose label the cache does not show yet
  // is patched here, with the node's annotations).
  if (plan.retag) {
    Result<TagMembers> tag = co_await binder_.Retag(spec, job.id, in.holders, pods, plan.assign);
    if (!tag) co_return tl::unexpected(tag.error());
    ApplyTag(spec.key, job.id, *tag);
  }
  const std::vector<Assignment> assign =
      Annotate(plan.assign, in.kube_node_of, in.slurm_nodes, job.gres_detail);
  for (const Assignment& a : assign) {
    if (Labelled(*a.pod, job.id, config_.scheduler_name)) continue;
    ++stats_.bind_patches;
    Result<void> r = co_await binder_.LabelPod(*a.pod, job.id, a.annotations);
    if (!r) co_return r;
  }
  // 5. The Bindings (the apiserver adds their annotations to the pods').
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
  // job again in Slurm's job list; a second job of the group that shows up meanwhile is
  // cancelled.
  if (auto it = jobs_.find(spec.key); it != jobs_.end() && it->second.id == job.id) {
    jobs_.erase(it);
  }
  if (GroupState* g = Group(spec.key)) g->ran = true;
  recently_bound_[spec.key] = {
      .id = job.id,
      .namespace_ = spec.namespace_,
      .until =
          clock_.Now() + std::max<async::Clock::Duration>(
                             kDuplicateWatch, kDuplicateWatchLists * config_.job_list_interval)};
  co_return Result<void>{};
}

bool Scheduler::ApplyAllocation(const std::string& group, TrackedJob& job, const Allocation& a) {
  auto it = jobs_.find(group);
  TrackedJob* tracked = it != jobs_.end() && it->second.id == job.id ? &it->second : nullptr;
  if (a.state == Allocation::State::kGone) {
    if (tracked != nullptr) tracked->state = "GONE";
    Unlist(job.id);
    return false;
  }
  job.nodes = a.nodes;
  job.gres_detail = a.gres_detail;
  if (!a.partition.empty()) job.partition = a.partition;
  if (tracked != nullptr) {
    tracked->nodes = a.nodes;
    tracked->gres_detail = a.gres_detail;
    if (!a.base_state.empty()) ApplyState(*tracked, a.base_state);
  }
  if (bridge::JobEnded(a.base_state)) Unlist(job.id);
  return a.state == Allocation::State::kRunning;
}

void Scheduler::ApplyTag(const std::string& group, std::int64_t id, const TagMembers& tag) {
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

awaitable<bool> Scheduler::OnUnmapped(const GroupSpec& spec, const std::vector<const Pod*>& pods,
                                      std::int64_t id, const BindPlan& plan) {
  if (plan.unmapped.empty()) {
    unmapped_since_.erase(id);
    co_return false;
  }
  unmapped_since_.try_emplace(id, clock_.Now());
  nodes_refresh_ = true;  // Slurm's node list may be behind too
  if (!plan.cancel) co_return false;
  unmapped_since_.erase(id);
  if (GroupState* g = Group(spec.key))
    g->excluded.insert(plan.unmapped.begin(), plan.unmapped.end());
  if (auto it = jobs_.find(spec.key); it != jobs_.end() && it->second.id == id) jobs_.erase(it);
  spdlog::warn("{}: {}", spec.key, plan.event_message);
  Emit(pods, plan.event_reason, plan.event_message);
  co_await CancelJob(*plan.cancel);
  queue_.Add(std::string(kGroupItem) + spec.key);
  co_return true;
}

void Scheduler::TraceStages(const std::string& group, const TrackedJob& job,
                            std::size_t pods) const {
  // The stage trace, for a slow installation: submit -> RUNNING seen -> pods bound.
  auto it = jobs_.find(group);
  if (it == jobs_.end() || it->second.id != job.id ||
      it->second.submitted == async::Clock::TimePoint{} ||
      !spdlog::should_log(spdlog::level::debug)) {
    return;
  }
  const auto ms = [](async::Clock::Duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  const TrackedJob& t = it->second;
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

awaitable<void> Scheduler::ReportWaiting(const Pod& pod, std::string message) {
  const kube::Condition* cond = kube::FindCondition(pod.status.conditions, "PodScheduled");
  if (cond != nullptr && cond->status == "False" && cond->message == message) {
    reported_[pod.metadata.uid] = message;
    co_return;
  }
  auto [it, inserted] = reported_.try_emplace(pod.metadata.uid, message);
  if (!inserted) {
    if (it->second == message) co_return;
    it->second = message;
  }
  const std::string now = kube::FormatTime(clock_.WallNow());
  const std::string since =
      cond != nullptr && cond->status == "False" && !cond->last_transition_time.empty()
          ? cond->last_transition_time
          : now;
  std::string patch = fmt::format(
      "{{\"status\":{{\"conditions\":[{{\"type\":\"PodScheduled\",\"status\":\"False\","
      "\"reason\":\"Unschedulable\",\"message\":{},\"lastProbeTime\":null,"
      "\"lastTransitionTime\":{}}}]}}}}",
      kube::JsonQuote(message), kube::JsonQuote(since));
  Result<Pod> r = co_await kube::PatchPodStatus(kube_, pod.metadata.namespace_, pod.metadata.name,
                                                kube::PatchType::kStrategicMerge, std::move(patch));
  if (!r && r.error().code != ErrorCode::kNotFound) {
    spdlog::warn("{}/{}: condition update failed: {}", pod.metadata.namespace_, pod.metadata.name,
                 r.error().ToString());
  }
  recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod.metadata), kube::EventType::kWarning,
                 "FailedScheduling", message);
}

awaitable<void> Scheduler::DropFinalizer(const Pod& pod) {
  std::optional<std::string> patch = bridge::FinalizerRemovalPatch(pod);
  if (!patch) co_return;
  Result<Pod> r = co_await kube::PatchAs<Pod>(
      kube_, kube::PodsRef(pod.metadata.namespace_).WithName(pod.metadata.name),
      kube::PatchType::kJsonMerge, std::move(*patch));
  if (!r && r.error().code != ErrorCode::kNotFound) {
    spdlog::warn("{}/{}: removing the finalizer failed: {}", pod.metadata.namespace_,
                 pod.metadata.name, r.error().ToString());
  }
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
                                         .partition = j.partition,
                                         .nodes = j.nodes,
                                         .uids = tag->uids,
                                         .pods = tag->pods});
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
    if (j.state_reason != t.reason || j.partition != t.partition) {
      t.reason = j.state_reason;
      t.partition = j.partition;
      queue_.Add(std::string(kGroupItem) + group);
    }
    if (!j.nodes.empty() && j.BaseState() == "RUNNING") {
      t.nodes = j.nodes;
      t.gres_detail = j.gres_detail;
    }
    ApplyState(t, std::string(j.BaseState()));
  }
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
  for (const auto& [key, g] : groups_) namespaces[key] = g.spec.namespace_;
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
  co_return Result<void>{};
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
    }
    ApplyState(t, s);
  }
  if (!missing_.empty() && !confirming_) tasks_.Spawn(ConfirmMissing());
}

}  // namespace sb::scheduler
