// SPDX-License-Identifier: Apache-2.0
#include "scheduler/scheduler.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

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
constexpr auto kGroupFillGrace = std::chrono::seconds(2);
constexpr auto kQuietStart = std::chrono::seconds(2);

std::string PodKey(const Pod& pod) { return kube::ObjectKey(pod.metadata); }

const kube::Condition* PodScheduledCondition(const Pod& pod) {
  for (const kube::Condition& c : pod.status.conditions) {
    if (c.type == "PodScheduled") return &c;
  }
  return nullptr;
}

std::string ErrorWords(const Error& e) {
  std::string words = e.message;
  for (const ErrorDetail& d : e.details) {
    if (!d.error.empty() && words.find(d.error) == std::string::npos) {
      words += "; " + d.error;
    }
  }
  return words;
}

// {"metadata":{"labels":{...},"finalizers":[...]},"spec":{"tolerations":[...]}} as a strategic
// merge patch: labels merge by key, finalizers merge as a set, tolerations are replaced whole
// (they have no merge key), so the list sent is the pod's plus ours.
std::string LabelPatch(const Pod& pod, std::int64_t job_id, const std::string& scheduler_name,
                       const std::string* node) {
  std::string labels = fmt::format("{}:{}", kube::JsonQuote(bridge::kJobIdLabel),
                                   kube::JsonQuote(std::to_string(job_id)));
  std::string meta = fmt::format("\"labels\":{{{}}},\"finalizers\":[{}]", labels,
                                 kube::JsonQuote(bridge::kFinalizer));
  if (node != nullptr) {
    meta += fmt::format(",\"annotations\":{{{}:{}}}", kube::JsonQuote(bridge::kNodeAnnotation),
                        kube::JsonQuote(*node));
  }
  bool tolerated = false;
  std::vector<std::string> tols;
  for (const kube::Toleration& t : pod.spec.tolerations) {
    if (t.key == bridge::kManagedNodeTaint && t.value == scheduler_name &&
        (t.effect.empty() || t.effect == "NoExecute")) {
      tolerated = true;
    }
    std::string one =
        fmt::format("\"key\":{},\"operator\":{},\"value\":{},\"effect\":{}", kube::JsonQuote(t.key),
                    kube::JsonQuote(t.operator_.empty() ? "Equal" : t.operator_),
                    kube::JsonQuote(t.value), kube::JsonQuote(t.effect));
    if (t.operator_ == "Exists") {
      one = fmt::format("\"key\":{},\"operator\":\"Exists\",\"effect\":{}", kube::JsonQuote(t.key),
                        kube::JsonQuote(t.effect));
    }
    if (t.toleration_seconds)
      one += fmt::format(",\"tolerationSeconds\":{}", *t.toleration_seconds);
    tols.push_back("{" + one + "}");
  }
  std::string spec;
  if (!tolerated) {
    tols.push_back(
        fmt::format("{{\"key\":{},\"operator\":\"Equal\",\"value\":{},\"effect\":\"NoExecute\"}}",
                    kube::JsonQuote(bridge::kManagedNodeTaint), kube::JsonQuote(scheduler_name)));
    spec = fmt::format(",\"spec\":{{\"tolerations\":[{}]}}", fmt::join(tols, ","));
  }
  return fmt::format("{{\"metadata\":{{{}}}{}}}", meta, spec);
}

}  // namespace

Scheduler::Scheduler(asio::any_io_executor executor, kube::Client& kube, slurm::Client& slurm,
                     kube::Clock& clock, bridge::Config config)
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
      queue_(clock, kube::BackoffPolicy{.base = std::chrono::milliseconds(250),
                                        .cap = std::chrono::seconds(60)}),
      tasks_(executor_, clock, "scheduler") {
  translate_ = {.partition = config_.partition,
                .mcs_label = config_.mcs_label,
                .cluster_name = config_.cluster_name,
                .scheduler_name = config_.scheduler_name,
                .mode = config_.job_mode,
                .resource_tres = config_.resource_tres};
  queue_.SetLess([this](const std::string& a, const std::string& b) {
    const auto ra = ranks_.find(a);
    const auto rb = ranks_.find(b);
    const std::int32_t pa = ra == ranks_.end() ? 0 : ra->second.priority;
    const std::int32_t pb = rb == ranks_.end() ? 0 : rb->second.priority;
    if (pa != pb) return pa > pb;
    static const std::string kEmpty;
    const std::string& ca = ra == ranks_.end() ? kEmpty : ra->second.created;
    const std::string& cb = rb == ranks_.end() ? kEmpty : rb->second.created;
    return ca < cb;
  });
  pods_.cache().AddHandlers({.on_add = [this](const auto& p) { OnPod(p); },
                             .on_update = [this](const auto&, const auto& p) { OnPod(p); },
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

void Scheduler::OnPod(const std::shared_ptr<const Pod>& pod) {
  if (!pod->spec.node_name.empty()) return;
  // Resolved again on every change: the group's description (annotations, members) may have
  // changed. Owners come from a short-lived cache.
  Enqueue(std::string(kPodItem) + PodKey(*pod), *pod);
}

void Scheduler::RetryLater(const std::string& group_key, const std::vector<const Pod*>& pods,
                           kube::Clock::Duration after) {
  // Through the pod: the fix is usually an edit of the pod or of its owner, read again there.
  if (pods.empty()) {
    queue_.AddAfter(std::string(kGroupItem) + group_key, after);
  } else {
    queue_.AddAfter(std::string(kPodItem) + PodKey(*pods.front()), after);
  }
}

void Scheduler::OnNodeChanged(const kube::Node* before, const kube::Node& after) {
  // What decides exclusions: schedulability, taints, labels, readiness, allocatable.
  if (before != nullptr && before->unschedulable == after.unschedulable &&
      before->taints == after.taints && before->metadata.labels == after.metadata.labels &&
      bridge::NodeIsReady(*before) == bridge::NodeIsReady(after) &&
      before->allocatable == after.allocatable) {
    return;
  }
  for (const auto& [group, job] : jobs_) {
    if (job.state == "PENDING") queue_.Add(std::string(kGroupItem) + group);
  }
}

void Scheduler::OnPodDeleted(const std::shared_ptr<const Pod>& pod) {
  const std::string key = PodKey(*pod);
  reported_.erase(pod->metadata.uid);
  bound_.erase(pod->metadata.uid);
  auto it = group_of_pod_.find(key);
  if (it == group_of_pod_.end()) return;
  const std::string group = it->second;
  group_of_pod_.erase(it);
  members_[group].erase(key);
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
    Result<void> nodes = co_await ListSlurmNodes();
    if (!nodes) spdlog::warn("reading Slurm's nodes failed: {}", nodes.error().ToString());
    ready_ = true;
    spdlog::info("scheduler {} started: {} pending pods, {} adopted jobs", config_.scheduler_name,
                 pods_.cache().size(), jobs_.size());
    for (int i = 0; i < config_.max_concurrent_submits; ++i) tasks_.Spawn(Worker());
    tasks_.Spawn(PollSlurm());
  }
  co_await tasks_.Join();
  co_return Result<void>{};
}

void Scheduler::Stop() {
  if (stopping_) return;
  stopping_ = true;
  pods_.Stop();
  nodes_.Stop();
  queue_.ShutDown();
  recorder_.ShutDown();
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
  if (item.starts_with(kPodItem)) co_return co_await Resolve(item.substr(kPodItem.size()));
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
  if (!pod) co_return Result<void>{};
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
    if (pg) pod_group = std::move(*pg);
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
    members_[old->second].erase(pod_key);
    queue_.Add(std::string(kGroupItem) + old->second);
  }
  groups_[group] = std::move(*spec);
  group_of_pod_[pod_key] = group;
  members_[group].insert(pod_key);
  Enqueue(std::string(kGroupItem) + group, *pod);
  ranks_.erase(std::string(kPodItem) + pod_key);
  co_return Result<void>{};
}

std::map<std::string, const kube::Node*> Scheduler::NodesBySlurmName() const {
  std::map<std::string, const kube::Node*> out;
  for (const auto& node : nodes_.cache().List()) out[bridge::SlurmNodeName(*node)] = node.get();
  return out;
}

std::string Scheduler::WaitingMessage(const TrackedJob& job) const {
  std::string msg = fmt::format("waiting for Slurm job {} in partition {}", job.id,
                                job.partition.empty() ? "(default)" : job.partition);
  if (!job.reason.empty() && job.reason != "None") {
    msg += ": " + job.reason;
  } else if (job.state != "PENDING") {
    msg += ": " + job.state;
  }
  return msg;
}

awaitable<Result<void>> Scheduler::Reconcile(const std::string& group_key) {
  auto spec_it = groups_.find(group_key);
  if (spec_it == groups_.end()) co_return Result<void>{};
  const GroupSpec spec = spec_it->second;

  // Members: unbound pods of the group; those being deleted only lose the finalizer.
  std::vector<std::shared_ptr<const Pod>> held;
  std::vector<const Pod*> live;
  std::vector<std::shared_ptr<const Pod>> deleting;
  for (const std::string& key : members_[group_key]) {
    std::shared_ptr<const Pod> pod = pods_.cache().Get(key);
    // Bound pods leave the watch a moment after the binding; until then the cache may show them
    // unbound.
    if (!pod || !pod->spec.node_name.empty() || bound_.contains(pod->metadata.uid)) continue;
    if (!pod->metadata.deletion_timestamp.empty()) {
      deleting.push_back(pod);
      continue;
    }
    held.push_back(pod);
    live.push_back(pod.get());
  }
  std::ranges::sort(live,
                    [](const Pod* a, const Pod* b) { return a->metadata.name < b->metadata.name; });

  auto job_it = jobs_.find(group_key);
  // A single pod's job is for that pod only: a pod re-created under the same name is another.
  if (job_it != jobs_.end() && spec.key.starts_with("Pod/") && live.size() == 1 &&
      !job_it->second.uids.empty() &&
      std::ranges::find(job_it->second.uids, live.front()->metadata.uid) ==
          job_it->second.uids.end()) {
    const std::int64_t old = job_it->second.id;
    jobs_.erase(job_it);
    co_await CancelJob(old, "its pod was re-created");
    job_it = jobs_.end();
  }

  if (live.empty()) {
    if (job_it != jobs_.end()) {
      const std::int64_t id = job_it->second.id;
      jobs_.erase(job_it);
      co_await CancelJob(id, "its pods are gone");
    }
    for (const auto& pod : deleting) co_await DropFinalizer(*pod);
    if (members_[group_key].empty()) {
      members_.erase(group_key);
      groups_.erase(group_key);
      ranks_.erase(std::string(kGroupItem) + group_key);
      incomplete_since_.erase(group_key);
    }
    co_return Result<void>{};
  }
  for (const auto& pod : deleting) co_await DropFinalizer(*pod);

  if (job_it == jobs_.end()) {
    if (static_cast<int>(live.size()) < spec.size) {
      // A workload's pods arrive one by one: say nothing while the group is still filling.
      const kube::Clock::TimePoint now = clock_.Now();
      auto [since, first] = incomplete_since_.try_emplace(group_key, now);
      if (now - since->second < kGroupFillGrace) {
        queue_.AddAfter(std::string(kGroupItem) + group_key,
                        kGroupFillGrace - (now - since->second));
        co_return Result<void>{};
      }
      const std::string msg = fmt::format(
          "waiting for {} more pod(s) of {} {}: Slurm allocates the group of {} as one job",
          spec.size - static_cast<int>(live.size()), spec.kind, spec.name, spec.size);
      for (const Pod* pod : live) co_await ReportWaiting(*pod, msg);
      co_return Result<void>{};
    }
    incomplete_since_.erase(group_key);
    if (static_cast<int>(live.size()) > spec.size && spec.size > 0)
      live.resize(static_cast<std::size_t>(spec.size));
    co_return co_await Submit(spec, live);
  }

  TrackedJob job = job_it->second;
  if (!bridge::JobEnded(job.state)) {
    // Adopted jobs, or a label patch that failed: every pod names its job.
    for (const Pod* pod : live) {
      auto l = pod->metadata.labels.find(std::string(bridge::kJobIdLabel));
      if (l != pod->metadata.labels.end() && l->second == std::to_string(job.id) &&
          bridge::HasFinalizer(*pod)) {
        continue;
      }
      std::string patch = LabelPatch(*pod, job.id, config_.scheduler_name, nullptr);
      Result<Pod> r = co_await kube::PatchAs<Pod>(
          kube_, kube::PodsRef(pod->metadata.namespace_).WithName(pod->metadata.name),
          kube::PatchType::kStrategicMerge, std::move(patch));
      if (!r && r.error().code != ErrorCode::kNotFound) co_return tl::unexpected(r.error());
    }
  }
  if (bridge::JobEnded(job.state)) {
    ++stats_.jobs_replaced;
    jobs_.erase(job_it);
    const std::string msg =
        fmt::format("Slurm job {} ended ({}) before the pods were bound; submitting a new job",
                    job.id, job.state == "GONE" ? "no longer known to Slurm" : job.state);
    spdlog::info("{}: {}", group_key, msg);
    for (const Pod* pod : live) {
      recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata),
                     kube::EventType::kWarning, "SlurmJobEnded", msg);
    }
    queue_.Add(std::string(kGroupItem) + group_key);
    co_return Result<void>{};
  }
  if (job.state == "RUNNING") co_return co_await Bind(spec, live, job);
  if (job.state == "PENDING") {
    const bool described = co_await UpdatePending(spec, live);
    if (!described) co_return Result<void>{};
  }

  // Most jobs start within a Slurm scheduling cycle: a just-submitted job without a reason yet is
  // not worth a condition and an event per pod.
  const kube::Clock::Duration age = clock_.Now() - job.submitted;
  if ((job.reason.empty() || job.reason == "None") && age < kQuietStart) {
    queue_.AddAfter(std::string(kGroupItem) + group_key, kQuietStart - age);
    co_return Result<void>{};
  }
  const std::string msg = WaitingMessage(job);
  for (const Pod* pod : live) co_await ReportWaiting(*pod, msg);
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
  std::vector<bridge::Exclusion> excluded =
      bridge::ExcludedNodes(pods, slurm_nodes_, NodesBySlurmName());
  if (!slurm_nodes_.empty() && excluded.size() == slurm_nodes_.size()) {
    std::vector<std::string> why;
    for (const bridge::Exclusion& e : excluded) why.push_back(e.slurm_node + ": " + e.reason);
    w.problem =
        fmt::format("no Slurm node can run the pod in Kubernetes ({})", fmt::join(why, ", "));
    w.retry = std::chrono::seconds(10);
    return w;
  }
  for (const bridge::Exclusion& e : excluded) desc->excluded_nodes.push_back(e.slurm_node);
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
  const std::string partition = wanted.job.partition;
  Result<slurm::JobSubmitResult> submitted = co_await slurm_.SubmitJob(wanted.job);
  if (!submitted) {
    ++stats_.submit_errors;
    const Error& e = submitted.error();
    const std::string msg = "Slurm refused the job: " + ErrorWords(e);
    spdlog::warn("{}: {}", spec.key, msg);
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, msg);
    if (e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kPermissionDenied) {
      RetryLater(spec.key, pods, std::chrono::seconds(30));
      co_return Result<void>{};
    }
    co_return tl::unexpected(e);
  }
  ++stats_.jobs_submitted;
  TrackedJob job{.id = submitted->job_id,
                 .group = spec.key,
                 .state = "PENDING",
                 .partition = partition,
                 .submitted = clock_.Now(),
                 .sent = std::move(wanted.job)};
  for (const Pod* pod : pods) job.uids.push_back(pod->metadata.uid);
  jobs_[spec.key] = job;
  spdlog::info("{}: submitted Slurm job {} for {} pod(s)", spec.key, job.id, pods.size());

  // The next pass labels the pods (job id, finalizer, toleration).
  queue_.Add(std::string(kGroupItem) + spec.key);
  co_return Result<void>{};
}

awaitable<bool> Scheduler::UpdatePending(const GroupSpec& spec, std::vector<const Pod*> pods) {
  auto it = jobs_.find(spec.key);
  if (it == jobs_.end() || it->second.state != "PENDING") co_return true;
  const std::int64_t id = it->second.id;
  // As at submit: a group larger than its size (a replacement pod early) is cut to it.
  if (spec.size > 0 && pods.size() > static_cast<std::size_t>(spec.size))
    pods.resize(static_cast<std::size_t>(spec.size));
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
  if (update.changed.empty()) {
    it->second.sent = std::move(wanted.job);
    co_return true;
  }
  Result<bool> r = co_await slurm_.UpdateJob(id, std::move(update.changes));
  it = jobs_.find(spec.key);
  if (it == jobs_.end() || it->second.id != id) co_return true;
  if (r) {
    ++stats_.jobs_updated;
    it->second.sent = std::move(wanted.job);
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
  if (job.nodes.empty()) {
    Result<slurm::JobInfo> info = co_await slurm_.GetJob(job.id);
    if (!info) {
      if (info.error().code == ErrorCode::kNotFound) {
        if (auto it = jobs_.find(spec.key); it != jobs_.end()) it->second.state = "GONE";
        queue_.Add(std::string(kGroupItem) + spec.key);
        co_return Result<void>{};
      }
      co_return tl::unexpected(info.error());
    }
    job.nodes = info->nodes;
    job.partition = info->partition;
    if (auto it = jobs_.find(spec.key); it != jobs_.end()) {
      it->second.nodes = info->nodes;
      ApplyState(it->second, std::string(info->BaseState()));
    }
    if (info->BaseState() != "RUNNING" || job.nodes.empty()) {
      queue_.Add(std::string(kGroupItem) + spec.key);
      co_return Result<void>{};
    }
  }
  Result<std::vector<std::string>> slurm_nodes = bridge::ExpandHostlist(job.nodes);
  if (!slurm_nodes) co_return tl::unexpected(slurm_nodes.error());
  std::map<std::string, const kube::Node*> by_slurm = NodesBySlurmName();
  std::vector<std::string> targets;
  for (const std::string& s : *slurm_nodes) {
    auto it = by_slurm.find(s);
    if (it == by_slurm.end()) {
      const std::string msg = fmt::format(
          "Slurm job {} was allocated node {}, which matches no Kubernetes node", job.id, s);
      for (const Pod* pod : pods) co_await ReportWaiting(*pod, msg);
      queue_.AddAfter(std::string(kGroupItem) + spec.key, std::chrono::seconds(5));
      co_return Result<void>{};
    }
    targets.push_back(it->second->metadata.name);
  }
  std::set<std::string> free(targets.begin(), targets.end());
  if (spec.size > 1 || targets.size() > 1) {
    // Pods of this job bound before (by an earlier run) keep their nodes.
    kube::ListOptions opts;
    opts.label_selector = fmt::format("{}={}", bridge::kJobIdLabel, job.id);
    Result<kube::List<Pod>> labelled =
        co_await kube::ListAs<Pod>(kube_, kube::PodsRef(spec.namespace_), opts);
    if (!labelled) co_return tl::unexpected(labelled.error());
    for (const Pod& p : labelled->items) {
      if (!p.spec.node_name.empty()) free.erase(p.spec.node_name);
    }
  }
  // Assignment: a pod annotated earlier with a free node keeps it; the rest in name order.
  std::vector<std::pair<const Pod*, std::string>> plan;
  std::vector<const Pod*> rest;
  for (const Pod* pod : pods) {
    auto a = pod->metadata.annotations.find(std::string(bridge::kNodeAnnotation));
    if (a != pod->metadata.annotations.end() && free.contains(a->second)) {
      plan.emplace_back(pod, a->second);
      free.erase(a->second);
    } else {
      rest.push_back(pod);
    }
  }
  // A group binds only as a whole: every free node of the job needs its pod.
  if (rest.size() < free.size()) {
    const std::string msg = fmt::format(
        "Slurm job {} is running on {} node(s); waiting for {} more pod(s) of {} {} to bind them "
        "all at once",
        job.id, targets.size(), free.size() - rest.size(), spec.kind, spec.name);
    for (const Pod* pod : pods) co_await ReportWaiting(*pod, msg);
    co_return Result<void>{};
  }
  for (const Pod* pod : rest) {
    if (free.empty()) break;  // more pods than nodes: the rest wait for a job of their own
    plan.emplace_back(pod, *free.begin());
    free.erase(free.begin());
  }
  // The whole group is annotated first, then bound.
  for (const auto& [pod, node] : plan) {
    std::string patch = LabelPatch(*pod, job.id, config_.scheduler_name, &node);
    Result<Pod> r = co_await kube::PatchAs<Pod>(
        kube_, kube::PodsRef(pod->metadata.namespace_).WithName(pod->metadata.name),
        kube::PatchType::kStrategicMerge, std::move(patch));
    if (!r && r.error().code != ErrorCode::kNotFound) co_return tl::unexpected(r.error());
  }
  for (const auto& [pod, node] : plan) {
    Result<void> b = co_await kube::BindPod(kube_, pod->metadata.namespace_, pod->metadata.name,
                                            pod->metadata.uid, node);
    if (!b) {
      ++stats_.bind_errors;
      if (b.error().code == ErrorCode::kNotFound) continue;  // deleted meanwhile
      Result<Pod> now = co_await kube::GetPod(kube_, pod->metadata.namespace_, pod->metadata.name);
      if (now && now->spec.node_name == node) continue;  // bound already (a retry)
      const std::string msg =
          fmt::format("binding to {} for Slurm job {} failed: {}", node, job.id, b.error().message);
      recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata),
                     kube::EventType::kWarning, "FailedBinding", msg);
      co_return tl::unexpected(b.error());
    }
    ++stats_.pods_bound;
    reported_.erase(pod->metadata.uid);
    bound_.insert(pod->metadata.uid);
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata), kube::EventType::kNormal,
                   "Scheduled",
                   fmt::format("Successfully assigned {}/{} to {} (Slurm job {})",
                               pod->metadata.namespace_, pod->metadata.name, node, job.id));
    spdlog::info("{}/{}: bound to {} (Slurm job {})", pod->metadata.namespace_, pod->metadata.name,
                 node, job.id);
  }
  if (free.empty()) {
    // Every node of the job has its pod: from here on the controllers own pods and job.
    jobs_.erase(spec.key);
  }
  co_return Result<void>{};
}

awaitable<void> Scheduler::CancelJob(std::int64_t id, std::string why) {
  slurm::CancelOptions opts;
  Result<bool> r = co_await slurm_.CancelJob(id, opts);
  if (r || r.error().code == ErrorCode::kNotFound) {
    ++stats_.jobs_cancelled;
    spdlog::info("cancelled Slurm job {}: {}", id, why);
  } else {
    spdlog::warn("cancelling Slurm job {} ({}) failed: {}", id, why, r.error().ToString());
  }
}

awaitable<void> Scheduler::ReportWaiting(const Pod& pod, std::string message) {
  const kube::Condition* cond = PodScheduledCondition(pod);
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
  queue_.Add(std::string(kGroupItem) + job.group);
}

awaitable<Result<void>> Scheduler::ListJobs(bool startup) {
  const kube::Clock::TimePoint asked = clock_.Now();
  Result<std::vector<slurm::JobInfo>> jobs = co_await slurm_.ListJobs();
  if (!jobs) co_return tl::unexpected(jobs.error());
  ++stats_.job_lists;
  std::unordered_map<std::int64_t, const slurm::JobInfo*> by_id;
  for (const slurm::JobInfo& j : *jobs) by_id[j.job_id] = &j;
  if (startup) {
    for (const slurm::JobInfo& j : *jobs) {
      if (bridge::JobEnded(j.BaseState())) continue;
      std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
      if (!tag || !tag->BelongsTo(config_.cluster_name, config_.scheduler_name)) continue;
      if (tag->group.empty() || jobs_.contains(tag->group)) continue;
      // Adopted only while a pod of it waits; bound groups are the controllers'.
      bool waiting = false;
      for (const std::string& p : tag->pods) waiting = waiting || pods_.cache().Get(p) != nullptr;
      if (!waiting) continue;
      TrackedJob t{.id = j.job_id,
                   .group = tag->group,
                   .uids = tag->uids,
                   .state = std::string(j.BaseState()),
                   .reason = j.state_reason,
                   .partition = j.partition,
                   .nodes = j.nodes};
      jobs_[tag->group] = t;
      ++stats_.jobs_adopted;
      spdlog::info("adopted Slurm job {} for {}", j.job_id, tag->group);
    }
    co_return Result<void>{};
  }
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
    if (!j.nodes.empty() && j.BaseState() == "RUNNING") t.nodes = j.nodes;
    ApplyState(t, std::string(j.BaseState()));
  }
  co_return Result<void>{};
}

awaitable<Result<void>> Scheduler::ListSlurmNodes() {
  Result<std::vector<slurm::NodeInfo>> nodes = co_await slurm_.ListNodes();
  if (!nodes) co_return tl::unexpected(nodes.error());
  std::vector<std::string> names;
  for (const slurm::NodeInfo& n : *nodes) names.push_back(n.name);
  slurm_nodes_ = std::move(names);
  co_return Result<void>{};
}

awaitable<void> Scheduler::ConfirmMissing() {
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
    } else {
      continue;  // ask again next time
    }
    for (auto& [group, t] : jobs_) {
      if (t.id == id) ApplyState(t, state);
    }
  }
}

awaitable<void> Scheduler::PollSlurm() {
  kube::Clock::TimePoint next_list = clock_.Now() + config_.job_list_interval;
  kube::Clock::TimePoint next_nodes = clock_.Now() + config_.node_list_interval;
  while (co_await tasks_.Sleep(config_.job_poll_interval)) {
    if (!jobs_.empty()) {
      // One call for every job Slurm knows: the cost does not depend on how many pods wait.
      std::vector<std::int64_t> all;
      const kube::Clock::TimePoint asked = clock_.Now();
      Result<std::vector<slurm::JobStateEntry>> states = co_await slurm_.JobStates(std::move(all));
      if (states) {
        ++stats_.state_polls;
        std::unordered_map<std::int64_t, const slurm::JobStateEntry*> by_id;
        for (const slurm::JobStateEntry& s : *states) by_id[s.job_id] = &s;
        for (auto& [group, t] : jobs_) {
          auto it = by_id.find(t.id);
          if (it == by_id.end()) {
            // Gone, or not yet in /jobs/state/ (seen lagging under load): confirmed below.
            if (t.submitted < asked) missing_.insert(t.id);
          } else if (!it->second->state.empty()) {
            const std::string& s = it->second->state.front();
            if (s != t.state && s == "RUNNING") t.nodes.clear();  // read them on bind
            ApplyState(t, s);
          }
        }
      } else {
        spdlog::warn("reading Slurm job states failed: {}", states.error().ToString());
      }
      co_await ConfirmMissing();
    }
    const kube::Clock::TimePoint now = clock_.Now();
    if (now >= next_list) {
      next_list = now + config_.job_list_interval;
      if (!jobs_.empty()) {
        Result<void> r = co_await ListJobs(false);
        if (!r) spdlog::warn("reading Slurm's jobs failed: {}", r.error().ToString());
      }
    }
    if (now >= next_nodes) {
      next_nodes = now + config_.node_list_interval;
      Result<void> r = co_await ListSlurmNodes();
      if (!r) spdlog::warn("reading Slurm's nodes failed: {}", r.error().ToString());
    }
  }
}

}  // namespace sb::scheduler
