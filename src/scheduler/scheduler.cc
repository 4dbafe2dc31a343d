// SPDX-License-Identifier: Apache-2.0
//
// The coordinator (see scheduler.h): start-up, the queue and its workers, a pod resolved into
// its group (Resolve), a group's plan carried out (Reconcile), and what the pods are told. One
// group's job is scheduler_job.cc's.
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
#include "bridge/parts.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "common/time_format.h"
#include "kube/codec.h"
#include "kube/owners.h"
#include "wiring/group_inputs.h"
#include "wiring/tag_pods.h"

namespace sb::scheduler {
namespace asio = boost::asio;
using asio::awaitable;
using bridge::GroupSpec;
using kube::Pod;

namespace {

constexpr auto kOwnerCacheTtl = std::chrono::seconds(10);
// A pod waiting for an object that cannot be read (its PodGroup, a claim template, a volume) is
// read again this often.
constexpr auto kUnreadableRecheck = std::chrono::seconds(10);
// A waiting pod's message is rewritten for a new expected start at most this often.
constexpr auto kStartRewrite = std::chrono::seconds(60);

// A Workload API PodGroup's condition as written or read (kept with its group, if it has one).
void RememberCondition(GroupTable& groups, const std::string& key, kube::Condition condition,
                       std::int64_t generation) {
  if (GroupState* g = groups.Find(key)) {
    g->pod_group_condition = std::move(condition);
    g->pod_group_generation = generation;
  }
}

// Workers on the queue: 4 x maxConcurrentSubmits, at least this many.
constexpr int kMinWorkers = 16;

}  // namespace

Scheduler::Scheduler(asio::any_io_executor executor, kube::Client& kube, slurm::Client& slurm,
                     async::Clock& clock, bridge::Config config, slurm::JobWatch* watch,
                     kube::Informer<kube::Node>* nodes)
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
      kube_nodes_(kube, config_.scheduler_name, nodes,
                  {.slurm_nodes = [this]() -> const std::vector<std::string>& {
                     return slurm_jobs_.nodes();
                   },
                   .changed = [this] { QueuePending(); }}),
      event_sink_(kube),
      recorder_(clock, event_sink_,
                kube::EventRecorderOptions{.source = {.component = config_.scheduler_name}}),
      binder_(kube, slurm, recorder_, config_, stats_),
      queue_(clock, kube::BackoffPolicy{.base = std::chrono::milliseconds(250),
                                        .cap = std::chrono::seconds(60)}),
      submit_slots_(clock, config_.max_concurrent_submits),
      slurm_jobs_(executor_, slurm, clock, config_, stats_, binder_, groups_, tasks_, watch,
                  {.changed = [this](const std::string& group) { QueueGroup(group); },
                   .nodes_changed = [this] { kube_nodes_.ForgetExclusions(); }}),
      tasks_(executor_, clock, "scheduler") {
  translate_ = {.partition = config_.partition,
                .mcs_label = config_.mcs_label,
                .cluster_name = config_.cluster_name,
                .scheduler_name = config_.scheduler_name,
                .mode = config_.job_mode,
                .node_sharing = config_.node_sharing,
                .mcs_sharing = config_.mcs_sharing,
                .resource_tres = config_.resource_tres,
                .default_time_limit_minutes = config_.default_time_limit.count(),
                .identity = config_.identity_policy,
                .device_profiles = config_.device_profiles};
  // Higher priority first, then the older pod; items without a rank (groups) as priority 0,
  // before every pod of priority 0.
  queue_.SetRank([this](const WorkItem& item) {
    const auto r = ranks_.find(item);
    if (r == ranks_.end()) return QueueRank{};
    return QueueRank{-static_cast<std::int64_t>(r->second.priority), r->second.created};
  });
  pods_.cache().AddHandlers(
      {.on_add = [this](const auto& p) { OnPod(nullptr, p); },
       .on_update = [this](const auto& old, const auto& p) { OnPod(old.get(), p); },
       .on_delete = [this](const auto& p) { OnPodDeleted(p); }});
}

Scheduler::~Scheduler() = default;

void Scheduler::Enqueue(const WorkItem& item, const Pod& pod) {
  Rank& r = ranks_[item];
  const std::int32_t prio = pod.spec.priority.value_or(0);
  if (r.created.empty() || prio > r.priority ||
      (prio == r.priority && pod.metadata.creation_timestamp < r.created)) {
    r.priority = prio;
    r.created = pod.metadata.creation_timestamp;
  }
  queue_.Add(item);
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
    if (const std::string* group = groups_.GroupOf(PodKey(*pod))) {
      QueueGroup(*group);
    } else if (!pod->metadata.deletion_timestamp.empty() && bridge::HasFinalizer(*pod)) {
      Enqueue(WorkItem::Pod(PodKey(*pod)), *pod);  // Resolve releases it
    }
    return;
  }
  // Resolved again on every change: the group's description (annotations, members) may have
  // changed. Owners come from a short-lived cache.
  Enqueue(WorkItem::Pod(PodKey(*pod)), *pod);
}

Next Scheduler::RetryLater(const std::vector<const Pod*>& pods, async::Clock::Duration after) {
  // Through the pod: the fix is usually an edit of the pod or of its owner, read again there.
  if (pods.empty()) return Next::After(after);
  return Next::ViaPod(PodKey(*pods.front()), after);
}

awaitable<Next> Scheduler::Wait(const Pod& pod, std::string message, async::Clock::Duration after) {
  co_await ReportWaiting(pod, std::move(message));
  co_return Next::ViaPod(PodKey(pod), after);
}

void Scheduler::QueueGroup(const std::string& group) { queue_.Add(WorkItem::Group(group)); }

void Scheduler::QueuePending() {
  for (const auto& [group, job] : slurm_jobs_.tracked()) {
    if (job.state.pending()) QueueGroup(group);
  }
}

void Scheduler::OnPodDeleted(const std::shared_ptr<const Pod>& pod) {
  const std::string key = PodKey(*pod);
  reported_.erase(pod->metadata.uid);
  volume_affinity_.erase(key);
  claim_template_objects_.erase(key);
  translate_.claim_templates.erase(key);
  bound_.erase(pod->metadata.uid);
  seen_.erase(pod->metadata.uid);
  if (std::optional<std::string> group = groups_.Leave(key)) {
    Enqueue(WorkItem::Group(*group), *pod);
  }
}

awaitable<Result<void>> Scheduler::Run() {
  tasks_.Spawn(pods_.Run());
  kube_nodes_.Start(tasks_);
  tasks_.Spawn(recorder_.Run());

  // Start-up: caches, Slurm's nodes and jobs (adoption) before anything is submitted.
  Result<void> startup;
  while (!pods_.HasSynced() || !kube_nodes_.HasSynced()) {
    if (!co_await tasks_.Sleep(std::chrono::milliseconds(20))) break;
  }
  for (int attempt = 0; !stopping_; ++attempt) {
    startup = co_await slurm_jobs_.ReadAll();
    if (startup) break;
    spdlog::warn("reading Slurm's jobs failed (attempt {}): {}", attempt + 1,
                 startup.error().ToString());
    (void)co_await tasks_.Sleep(
        std::chrono::milliseconds(std::min(5000, 200 << std::min(attempt, 5))));
  }
  if (!stopping_) {
    // Nothing is submitted before Slurm's nodes are known (the Kubernetes-side exclusions need
    // them); PollSlurm keeps asking.
    Result<void> nodes = co_await slurm_jobs_.ListNodes();
    if (!nodes) {
      spdlog::warn("reading Slurm's nodes failed: {}; no job is submitted until it succeeds",
                   nodes.error().ToString());
    }
    ready_ = true;
    spdlog::info("scheduler {} started: {} pending pods, {} adopted jobs", config_.scheduler_name,
                 pods_.cache().size(), slurm_jobs_.tracked().size());
    // Workers beyond the submits in flight: binding and the pods' writes wait on the apiserver,
    // which a burst slows down, and must not hold the submits up (nor the other way round).
    const int workers = std::max(kMinWorkers, 4 * config_.max_concurrent_submits);
    for (int i = 0; i < workers; ++i) tasks_.Spawn(Worker());
    slurm_jobs_.Start();
    tasks_.Spawn(CancelStartupOrphans());
    if (!config_.device_profiles.empty()) tasks_.Spawn(ListDeviceClasses());
  }
  co_await tasks_.Join();
  slurm_jobs_.Stop();
  co_return Result<void>{};
}

awaitable<void> Scheduler::CancelStartupOrphans() {
  // The pods found at start-up are grouped first (a group may adopt a job whose first pods are
  // gone, issue #29); a minute at most.
  const async::Clock::TimePoint give_up = clock_.Now() + std::chrono::minutes(1);
  do {
    if (!co_await tasks_.Sleep(std::chrono::seconds(1))) co_return;
  } while ((queue_.Len() > 0 || queue_.NumProcessing() > 0) && clock_.Now() < give_up);
  std::vector<std::pair<std::string, JobView>> candidates;
  for (const auto& [group, views] : slurm_jobs_.listed()) {
    if (groups_.Find(group) != nullptr || slurm_jobs_.Find(group) != nullptr) continue;
    for (const JobView& v : views) {
      if (!v.pods.empty()) candidates.emplace_back(group, v);
    }
  }
  for (const auto& [group, v] : candidates) {
    const wiring::TagPodsAnswer pods = co_await wiring::ReadTagPods(kube_, v.pods, v.uids);
    const bool gone = pods.gone;
    if (pods.error) {  // unknown: left alone
      spdlog::warn("{}: reading pod {} failed: {}", group, pods.failed, pods.error->ToString());
    }
    // (A group may have formed, or the job been adopted, during the reads.)
    if (!gone || stopping_ || groups_.Find(group) != nullptr ||
        slurm_jobs_.Find(group) != nullptr) {
      continue;
    }
    if (!MayWrite()) co_return;
    Cancel cancel{.id = v.id,
                  .reason = fmt::format("none of its pods ({}) exists (found at start-up)",
                                        fmt::join(v.pods, ", ")),
                  .cause = CancelCause::kPodsGone};
    co_await slurm_jobs_.CancelJob(std::move(cancel));
  }
}

awaitable<void> Scheduler::ListDeviceClasses() {
  do {
    // (Named, not temporaries: gcc 12 destroys a temporary argument of a co_await twice.)
    kube::ResourceRef ref = kube::DraRef("deviceclasses");
    kube::ListOptions opts;
    Result<kube::List<kube::GenericObject>> listed =
        co_await kube::ListAllAs<kube::GenericObject>(kube_, ref, opts);
    if (listed) {
      auto classes = std::make_shared<std::vector<kube::GenericObject>>(std::move(listed->items));
      bridge::ObjectsByName by_name;
      std::set<std::string, std::less<>> names;
      for (const kube::GenericObject& c : *classes) {
        by_name[c.metadata.name] = &c;
        Result<std::string> ext = kube::JsonStringAt(c.spec_json, "/extendedResourceName");
        if (ext && !ext->empty()) names.insert(*ext);
      }
      device_classes_ = std::move(classes);
      translate_.device_classes = std::move(by_name);
      if (names != translate_.dra_resource_names)
        kube_nodes_.ForgetExclusions();  // they count in fits
      translate_.dra_resource_names = std::move(names);
    } else if (listed.error().code == ErrorCode::kNotFound) {
      // Kubernetes before 1.34 serves no resource.k8s.io/v1: classes resolve by driver name.
      if (!device_classes_unserved_logged_) {
        spdlog::info(
            "the apiserver serves no resource.k8s.io/v1 DeviceClasses; DRA classes are "
            "resolved by their driver's name");
        device_classes_unserved_logged_ = true;
      }
    } else {
      spdlog::warn("listing DeviceClasses failed: {}", listed.error().ToString());
    }
  } while (co_await tasks_.Sleep(std::chrono::seconds(30)));
}

Binder::DraInput Scheduler::DraView() const {
  return {.profiles = &config_.device_profiles,
          .classes = device_classes_,
          .device_classes = translate_.device_classes,
          .resource_names = translate_.dra_resource_names,
          .claim_templates = &translate_.claim_templates};
}

void Scheduler::Stop() {
  if (stopping_) return;
  stopping_ = true;
  pods_.Stop();
  kube_nodes_.Stop();
  queue_.ShutDown();
  submit_slots_.Close();
  recorder_.ShutDown();
  slurm_jobs_.Stop();
  tasks_.Stop();
}

awaitable<void> Scheduler::Worker() {
  co_await kube::RunQueueWorker(
      queue_, [this](const WorkItem& item) { return Process(item); },
      [](const WorkItem& item, const Error& e) { spdlog::warn("{}: {}", item.key, e.ToString()); });
}

awaitable<Result<kube::Requeue>> Scheduler::Process(const WorkItem& item) {
  Result<Next> next;
  if (item.kind == WorkItem::Kind::kPod) {
    next = co_await Resolve(item.key);
    // Done with the pod (resolved, gone, or waiting to be looked at again later): its rank goes,
    // whichever way it ended. An error keeps it for the retry.
    if (next) ranks_.erase(item);
  } else {
    next = co_await Reconcile(item.key);
  }
  if (!next) co_return tl::unexpected(next.error());
  if (next->via_pod && next->after) {
    queue_.AddAfter(WorkItem::Pod(std::move(*next->via_pod)), *next->after);
    co_return kube::Requeue{};
  }
  co_return kube::Requeue{.after = next->after};
}

awaitable<Result<kube::GenericObject>> Scheduler::GetOwner(std::string api_version,
                                                           std::string kind, std::string ns,
                                                           std::string name) {
  const std::string cache_key = api_version + "/" + kind + "/" + ns + "/" + name;
  if (auto it = owners_.find(cache_key);
      it != owners_.end() && clock_.Now() - it->second.fetched < kOwnerCacheTtl) {
    co_return it->second.object;
  }
  kube::ResourceRef ref = kube::RefOfKind(api_version, kind, ns, name);
  Result<kube::GenericObject> obj = co_await kube::GetAs<kube::GenericObject>(kube_, ref);
  if (obj) owners_[cache_key] = CachedOwner{*obj, clock_.Now()};
  if (owners_.size() > 4096) owners_.clear();
  co_return obj;
}

awaitable<Result<Next>> Scheduler::Resolve(const std::string& pod_key) {
  std::shared_ptr<const Pod> pod = pods_.cache().Get(pod_key);
  if (!pod) co_return Next::Done();
  if (!pod->metadata.deletion_timestamp.empty() && pod->spec.node_name.empty() &&
      groups_.GroupOf(pod_key) == nullptr) {
    // Deleted before it joined a group (gated, refused, or before this process saw it): no job
    // of this process holds it, so its finalizer (the webhook's, set at CREATE) goes. A job
    // tagged for it in Slurm is the controllers' to cancel once the pod is gone.
    co_await DropFinalizer(*pod);
    co_return Next::Done();
  }
  if (!Schedulable(*pod)) co_return Next::Done();
  const std::string& ns = pod->metadata.namespace_;

  // Its owners and PodGroup, through the owner cache (a Workload API version turned on or off is
  // seen within the client's discovery TTL).
  kube::MemberOwnerSource<Scheduler, &Scheduler::GetOwner> cached(*this);
  Result<wiring::GroupInputs> inputs = co_await wiring::ReadGroupInputs(*pod, kube_, cached);
  if (!inputs) co_return tl::unexpected(inputs.error());  // transient: retry
  if (!inputs->owner_unreadable.empty()) {
    spdlog::debug("{}: owner {} not readable", pod_key, inputs->owner_unreadable);
  }
  if (!inputs->pod_group_problem.empty()) {
    // Never a job of its own: the pod belongs to a gang that cannot be read now.
    if (!pods_.cache().Get(pod_key)) co_return Next::Done();
    co_return co_await Wait(*pod, std::move(inputs->pod_group_problem), kUnreadableRecheck);
  }
  Result<GroupSpec> spec = inputs->Resolve(*pod);
  if (!spec) {
    co_await ReportWaiting(*pod, "cannot group the pod: " + spec.error().message);
    co_return Next::Done();
  }
  // N-5: a pod whose claims cannot be used yet waits (or is refused) before it joins its group:
  // it is never bound where its volume cannot attach.
  if (!pod->spec.claim_volumes.empty()) {
    bridge::VolumePlan volumes = co_await PlanPodVolumes(*pod);
    if (volumes.verdict != bridge::VolumePlan::Verdict::kReady) {
      if (!pods_.cache().Get(pod_key)) co_return Next::Done();
      const async::Clock::Duration after = volumes.verdict == bridge::VolumePlan::Verdict::kRefuse
                                               ? std::chrono::seconds(60)
                                               : kUnreadableRecheck;
      co_return co_await Wait(*pod, std::move(volumes.message), after);
    }
    volume_affinity_[pod_key] = std::move(volumes.node_affinity);
  }
  // DRA: the ResourceClaimTemplates the pod's claims are made from, which say what Slurm is to
  // allocate (read once per pod; a template is immutable).
  if (!pod->spec.resource_claims.empty() && !claim_template_objects_.contains(pod_key)) {
    std::map<std::string, kube::GenericObject> templates;
    for (const kube::PodClaim& c : pod->spec.resource_claims) {
      if (c.resource_claim_template_name.empty()) continue;  // shared: refused when translated
      kube::ResourceRef ref =
          kube::DraRef("resourceclaimtemplates", ns, c.resource_claim_template_name);
      Result<kube::GenericObject> t = co_await kube::GetAs<kube::GenericObject>(kube_, ref);
      if (!t && t.error().code != ErrorCode::kNotFound) co_return tl::unexpected(t.error());
      if (!t) {
        if (!pods_.cache().Get(pod_key)) co_return Next::Done();
        std::string message =
            fmt::format("ResourceClaimTemplate {} of claim {} does not exist; the pod waits for it",
                        c.resource_claim_template_name, c.name);
        co_return co_await Wait(*pod, std::move(message), kUnreadableRecheck);
      }
      templates[c.resource_claim_template_name] = std::move(*t);
    }
    auto& kept = claim_template_objects_[pod_key] = std::move(templates);
    bridge::ObjectsByName& by_name = translate_.claim_templates[pod_key];
    for (const auto& [name, t] : kept) by_name[name] = &t;
  }
  // The pod may have gone while the owners were read.
  if (!pods_.cache().Get(pod_key)) {
    claim_template_objects_.erase(pod_key);
    translate_.claim_templates.erase(pod_key);
    co_return Next::Done();
  }
  const std::string group = spec->key;
  if (std::optional<std::string> left = groups_.Join(pod_key, std::move(*spec), clock_.Now())) {
    // Moved to another group (its pod-group label changed): the old one looks again.
    QueueGroup(*left);
  }
  Enqueue(WorkItem::Group(group), *pod);
  co_return Next::Done();
}

awaitable<bridge::VolumePlan> Scheduler::PlanPodVolumes(const Pod& pod) {
  const std::string& ns = pod.metadata.namespace_;
  std::vector<bridge::ClaimFacts> claims;
  for (const std::string& name : bridge::PodClaims(pod)) {
    bridge::ClaimFacts& c = claims.emplace_back(bridge::ClaimFacts{.name = name});
    Result<kube::GenericObject> pvc = co_await GetOwner("v1", "PersistentVolumeClaim", ns, name);
    if (!pvc) {
      if (pvc.error().code == ErrorCode::kNotFound) {
        c.found = false;
        continue;
      }
      co_return bridge::VolumePlan{
          .verdict = bridge::VolumePlan::Verdict::kWait,
          .message = fmt::format("cannot read persistentvolumeclaim \"{}\": {}", name,
                                 pvc.error().ToString())};
    }
    bridge::ReadClaim(*pvc, c);
    if (c.phase == "Bound" && !c.volume.empty()) {
      Result<kube::GenericObject> pv = co_await GetOwner("v1", "PersistentVolume", "", c.volume);
      Result<std::vector<kube::NodeSelectorTerm>> terms =
          pv ? bridge::PvNodeAffinity(*pv)
             : Result<std::vector<kube::NodeSelectorTerm>>(tl::unexpected(pv.error()));
      if (!terms) {
        co_return bridge::VolumePlan{
            .verdict = bridge::VolumePlan::Verdict::kWait,
            .message = fmt::format("cannot read the node affinity of persistentvolume {} (claim "
                                   "\"{}\"): {}",
                                   c.volume, name, terms.error().ToString())};
      }
      c.pv_node_affinity = std::move(*terms);
    } else if (c.phase != "Bound" && !c.storage_class.empty()) {
      kube::ResourceRef ref{.group = "storage.k8s.io",
                            .version = "v1",
                            .resource = "storageclasses",
                            .name = c.storage_class};
      Result<std::string> sc = co_await kube_.Get(std::move(ref));
      if (sc) c.binding_mode = bridge::BindingMode(*sc);
    }
  }
  co_return bridge::PlanVolumes(claims);
}

void Scheduler::Emit(const std::vector<const Pod*>& pods, const std::string& reason,
                     const std::string& message) {
  for (const Pod* pod : pods) {
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod->metadata), kube::EventType::kWarning,
                   reason, message);
  }
}

awaitable<Result<Next>> Scheduler::Reconcile(const std::string& group_key) {
  GroupState* group = groups_.Find(group_key);
  if (group == nullptr) co_return Next::Done();
  GroupSpec spec = group->spec;
  // A job submitted for a part of the group (a PodGroup's remainder) keeps that size.
  if (const TrackedJob* t = slurm_jobs_.Find(group_key); t != nullptr && t->size > 0) {
    spec.size = t->size;
  }

  const Members members = MembersOf(*group);
  const std::vector<const Pod*>& live = members.live;

  const async::Clock::TimePoint now = clock_.Now();
  GroupInput in{.spec = spec,
                .pods = live,
                .jobs_listed_at = slurm_jobs_.listed_at(),
                .jobs_scanned_at = slurm_jobs_.scanned_at(),
                .slurm_nodes_known = slurm_jobs_.nodes_known(),
                .labels_ride_binding = binder_.LabelsRideBinding(),
                .now = now};
  if (const TrackedJob* t = slurm_jobs_.Find(group_key)) {
    in.tracked = ViewOf(*t);
    if (live.empty() && in.tracked->bind_tried) {
      // Its pods left the watch: bound (a Binding whose reply was lost) or gone? The apiserver
      // says which before the job may be cancelled.
      const std::int64_t id = in.tracked->id;
      Result<std::vector<Holder>> h = co_await binder_.ReadHolders(spec.namespace_, id);
      if (!h) co_return tl::unexpected(h.error());
      if (slurm_jobs_.Find(group_key, id) == nullptr) {
        co_return Next::Now();  // changed meanwhile: look again
      }
      in.tracked->holders = std::move(*h);
      in.tracked->holders_known = true;
    }
  } else if (!live.empty()) {
    Result<std::vector<JobView>> candidates =
        co_await slurm_jobs_.Candidates(group_key, spec.namespace_);
    if (!candidates) co_return tl::unexpected(candidates.error());
    in.tagged = std::move(*candidates);
    if (slurm_jobs_.Find(group_key) != nullptr) {  // tracked meanwhile (another worker): look again
      co_return Next::Now();
    }
  }
  // (The awaits above may have changed the map: looked up again.)
  group = groups_.Find(group_key);
  if (group == nullptr) co_return Next::Done();
  in.submit_doubt_since = group->submit_doubt;
  in.incomplete_since = group->incomplete_since;
  in.group_since = group->since;
  in.ran_before = group->ran;
  if (!in.ran_before && !in.tracked && spec.kind == "PodGroup" && !live.empty() &&
      static_cast<int>(live.size()) < spec.size && in.incomplete_since && in.jobs_listed_at &&
      *in.jobs_listed_at >= *in.incomplete_since) {
    // Short of minMember with no job: whether the PodGroup ran before is this process's memory,
    // or (after a restart) the apiserver's: a member the bridge bound, running or done.
    Result<bool> ran = co_await PodGroupRan(spec);
    if (!ran) co_return tl::unexpected(ran.error());
    group = groups_.Find(group_key);
    if (group == nullptr) co_return Next::Done();
    group->ran = *ran;
    in.ran_before = *ran;
  }
  const GroupPlan plan = PlanGroup(in, planner_);

  for (const Cancel& c : plan.cancel) {
    slurm_jobs_.Untrack(group_key, c.id);
    co_await slurm_jobs_.CancelJob(c);
  }
  if (plan.forget) {
    if (in.tracked) slurm_jobs_.Untrack(group_key, in.tracked->id);
  }
  // Before the list below: the list is asked for once, for the pods short since then.
  if (plan.incomplete) {
    if (!group->incomplete_since) group->incomplete_since = now;
  } else {
    group->incomplete_since.reset();
    group->timeout_told.reset();
  }
  const std::optional<async::Clock::TimePoint> short_since = group->incomplete_since;
  if (plan.list_jobs || plan.scan_jobs) {
    // A lost submit reply (Slurm's whole list), or a member that may belong to a job this
    // scheduler knows (those jobs made current): read Slurm first.
    if (slurm_jobs_.listing()) {  // another worker reads them: look again after it
      co_return Next::After(std::chrono::milliseconds(200));
    }
    Result<void> listed;
    if (plan.scan_jobs) {
      listed = co_await slurm_jobs_.Scan();
    } else {
      listed = co_await slurm_jobs_.List();
    }
    if (!listed) co_return tl::unexpected(listed.error());  // with the queue's backoff
    co_return Next::Now();
  }
  if (plan.adopt) Adopt(group_key, *plan.adopt);

  for (const auto& pod : members.deleting) co_await DropFinalizer(*pod);
  if (live.empty()) {
    if (GroupState* g = groups_.Find(group_key); g != nullptr && g->members.empty()) {
      groups_.Forget(group_key);
      ranks_.erase(WorkItem::Group(group_key));
    }
    co_return Next::Done();
  }
  if (!plan.event_reason.empty()) {
    if (plan.event_reason == "SlurmJobEnded") ++stats_.jobs_replaced;
    spdlog::info("{}: {}", group_key, plan.event_message);
    Emit(live, plan.event_reason, plan.event_message);
  }

  if (!plan.label.empty()) {
    Result<void> labelled = co_await LabelWithJob(spec, plan.label);
    if (!labelled) co_return tl::unexpected(labelled.error());
  }
  if (!plan.submit.empty()) {
    GroupSpec part = spec;
    if (plan.submit_size > 0) part.size = plan.submit_size;
    co_return co_await Submit(part, plan.submit);
  }
  if (plan.bind) {
    const TrackedJob* t = slurm_jobs_.Find(group_key);
    if (t == nullptr) co_return Next::Done();
    co_return co_await Bind(spec, live, *t);
  }
  Next then = Next::Done();  // asked beside the plan's recheck (an update to try again)
  if (plan.update_pending) {
    Updated updated = co_await UpdatePending(spec, plan.members);
    if (updated.stop) co_return std::move(updated.next);
    then = std::move(updated.next);
  }
  std::optional<async::Clock::TimePoint> recheck_at = plan.recheck_at;
  if (!plan.report.empty()) {
    co_await ReportGroupWaits(spec, live, plan.report);
    if (plan.incomplete && short_since && spec.key.starts_with("PodGroup/")) {
      std::optional<async::Clock::TimePoint> deadline =
          co_await CheckScheduleTimeout(spec, live, *short_since);
      if (deadline && (!recheck_at || *deadline < *recheck_at)) recheck_at = deadline;
    }
  }
  if (!recheck_at) co_return then;
  const async::Clock::Duration after =
      std::max(async::Clock::Duration::zero(), *recheck_at - clock_.Now());
  co_return Sooner(plan.recheck_owners ? RetryLater(live, after) : Next::After(after),
                   std::move(then));
}

Scheduler::Members Scheduler::MembersOf(const GroupState& group) const {
  Members m;
  for (const std::string& key : group.members) {
    std::shared_ptr<const Pod> pod = pods_.cache().Get(key);
    // Bound pods leave the watch a moment after the binding; until then the cache may show them
    // unbound.
    if (!pod || !pod->spec.node_name.empty() || bound_.contains(pod->metadata.uid)) continue;
    if (!pod->metadata.deletion_timestamp.empty()) {
      m.deleting.push_back(pod);
      continue;
    }
    if (!Schedulable(*pod)) continue;
    m.live.push_back(pod.get());
    m.held.push_back(std::move(pod));
  }
  std::ranges::sort(m.live,
                    [](const Pod* a, const Pod* b) { return a->metadata.name < b->metadata.name; });
  return m;
}

void Scheduler::Adopt(const std::string& group_key, const JobView& v) {
  TrackedJob t{.id = v.id,
               .group = group_key,
               .uids = v.uids,
               .state = v.state,
               .reason = v.reason,
               .partition = v.partition,
               .pods = v.pods,
               .refill = v.refill,
               .parts = v.parts};
  // The list may be old: a running job's nodes (and that it still runs) are read on bind.
  slurm_jobs_.Track(std::move(t), /*submitted=*/false);
  if (GroupState* g = groups_.Find(group_key)) g->submit_doubt.reset();
  ++stats_.jobs_adopted;
  spdlog::info("{}: adopted Slurm job {} ({}{})", group_key, v.id, v.state.name(),
               v.refill ? ", pods of the group run in it" : "");
}

awaitable<Result<void>> Scheduler::LabelWithJob(const GroupSpec& spec,
                                                const std::vector<const Pod*>& pods) {
  const TrackedJob* t = slurm_jobs_.Find(spec.key);
  if (t == nullptr) co_return Result<void>{};
  const std::int64_t id = t->id;
  const std::vector<std::string> parts = t->parts;
  for (const Pod* pod : pods) {
    // A heterogeneous job's pod also carries its component (a part the job has not: none).
    const int offset = parts.empty() ? -1 : bridge::PartOffset(parts, bridge::PartName(spec, *pod));
    // Named, not a braced temporary inside the co_await (gcc 12; review R-11).
    std::map<std::string, std::string> no_annotations;
    Result<void> r = co_await binder_.LabelPod(*pod, id, std::move(no_annotations), offset);
    if (!r) co_return tl::unexpected(r.error());
  }
  co_return Result<void>{};
}

awaitable<void> Scheduler::ReportGroupWaits(const GroupSpec& spec,
                                            const std::vector<const Pod*>& pods,
                                            const std::string& message) {
  // A Workload API PodGroup says where the group stands too: Slurm's state and reason while
  // its job waits, else what the pods are told.
  std::string group_message = message;
  if (const TrackedJob* t = slurm_jobs_.Find(spec.key)) {
    group_message =
        fmt::format("Slurm job {} is {}", t->id, t->state.known() ? t->state.name() : "PENDING");
    if (!t->reason.empty() && t->reason != "None") group_message += " (" + t->reason + ")";
  }
  for (const Pod* pod : pods) co_await ReportWaiting(*pod, message);
  co_await WritePodGroupStatus(spec, false, "Unschedulable", std::move(group_message));
}

awaitable<std::optional<async::Clock::TimePoint>> Scheduler::CheckScheduleTimeout(
    const GroupSpec& spec, const std::vector<const Pod*>& pods,
    async::Clock::TimePoint short_since) {
  // A coscheduling PodGroup short of minMember for longer than its spec.scheduleTimeoutSeconds:
  // its pods get a Warning event, once each time the group falls short. Nothing is held for it
  // in Slurm meanwhile (no job is submitted until the group is complete), so there is nothing to
  // release; the pods keep waiting and the group runs when its members are there.
  Result<kube::GenericObject> pg = co_await GetOwner(std::string(bridge::kCoschedulingApiVersion),
                                                     "PodGroup", spec.namespace_, spec.name);
  const std::optional<std::int64_t> timeout =
      pg ? bridge::ScheduleTimeoutSeconds(*pg) : std::nullopt;
  if (!timeout) co_return std::nullopt;
  const async::Clock::TimePoint deadline = short_since + std::chrono::seconds(*timeout);
  if (clock_.Now() < deadline) co_return deadline;
  GroupState* g = groups_.Find(spec.key);
  if (g == nullptr || g->timeout_told == short_since) co_return std::nullopt;
  g->timeout_told = short_since;
  const std::string message = fmt::format(
      "PodGroup {} timed out waiting for members: {} of {} pod(s) (minMember) after {} s "
      "(spec.scheduleTimeoutSeconds); no Slurm job is submitted until the group is "
      "complete, and its pods keep waiting",
      spec.name, pods.size(), spec.size, *timeout);
  spdlog::info("{}: {}", spec.key, message);
  Emit(pods, "PodGroupTimedOut", message);
  co_return std::nullopt;
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

awaitable<void> Scheduler::ReportWaiting(const Pod& pod, std::string message) {
  const kube::Condition* cond = kube::FindCondition(pod.status.conditions, "PodScheduled");
  if (cond != nullptr && cond->status == "False" && cond->message == message) {
    reported_[pod.metadata.uid] = Reported{message, clock_.Now()};
    co_return;
  }
  auto [it, inserted] = reported_.try_emplace(pod.metadata.uid, Reported{message, clock_.Now()});
  if (!inserted) {
    if (it->second.message == message) co_return;
    // Only Slurm's expected start moved (its planner re-plans every cycle): written at most
    // once per kStartRewrite, so that a pod costs the apiserver little while it waits. The first
    // start the planner gives is news, written at once (the pod was told only the reason).
    if (HasExpectedStart(it->second.message) && HasExpectedStart(message) &&
        WithoutExpectedStart(it->second.message) == WithoutExpectedStart(message) &&
        clock_.Now() - it->second.at < kStartRewrite) {
      // Said when the minute is up (nothing else may look at the group before).
      const std::string key = pod.metadata.namespace_ + "/" + pod.metadata.name;
      if (const std::string* group = groups_.GroupOf(key)) {
        queue_.AddAfter(WorkItem::Group(*group), kStartRewrite - (clock_.Now() - it->second.at));
      }
      co_return;
    }
    it->second = Reported{message, clock_.Now()};
  }
  const std::string now = FormatTime(clock_.WallNow());
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

std::map<std::string, std::size_t> Scheduler::WaitingByReason() const {
  std::map<std::string, std::size_t> out;
  for (const auto& [uid, r] : reported_) ++out[WaitingReason(r.message)];
  return out;
}

awaitable<void> Scheduler::WritePodGroupStatus(GroupSpec spec, bool scheduled, std::string reason,
                                               std::string message) {
  if (!spec.key.starts_with(bridge::kWorkloadPodGroupKeyPrefix)) co_return;
  // The version the PodGroup is read in names the condition: PodGroupInitiallyScheduled on
  // v1beta1, PodGroupScheduled on v1alpha2.
  Result<std::string> api_version = co_await wiring::WorkloadApiVersion(kube_);
  if (!api_version || api_version->empty()) co_return;  // the group's next change tries again
  const std::string type(bridge::PodGroupConditionType(*api_version));
  const bool terminal = type == bridge::kPodGroupInitiallyScheduled;
  const std::string status = scheduled ? "True" : "False";
  const std::string key = spec.key;
  // Said already (the usual case: a group looked at again while nothing changed): no request.
  // (A new generation alone waits for the next change of words: observedGeneration is the
  // generation the words were written for.)
  if (const GroupState* g = groups_.Find(key);
      g != nullptr && g->pod_group_condition && g->pod_group_condition->type == type) {
    const kube::Condition& c = *g->pod_group_condition;
    if ((c.status == status && c.reason == reason && c.message == message) ||
        (terminal && c.status == "True")) {
      co_return;
    }
  }
  // The PodGroup as read lately (the owner cache; Resolve read it): its metadata.generation for
  // observedGeneration, and its condition when this process has written none (another replica
  // or an earlier run may have).
  Result<kube::GenericObject> pg =
      co_await GetOwner(*api_version, "PodGroup", spec.namespace_, spec.name);
  if (!pg) {
    if (pg.error().code != ErrorCode::kNotFound) {
      spdlog::warn("{}: reading the PodGroup for its {} condition failed: {}", key, type,
                   pg.error().ToString());
    }
    co_return;
  }
  const std::int64_t generation = pg->metadata.generation;
  std::optional<bridge::PodGroupCondition> on_object = bridge::FindPodGroupCondition(*pg, type);
  // v1beta1: once True, PodGroupInitiallyScheduled is never written again, whoever wrote it (the
  // API: "it serves as a terminal state and will never revert to False").
  if (terminal && on_object && on_object->condition.status == "True") {
    RememberCondition(groups_, key, on_object->condition, on_object->observed_generation);
    co_return;
  }
  std::optional<bridge::PodGroupCondition> known;
  if (const GroupState* g = groups_.Find(key);
      g != nullptr && g->pod_group_condition && g->pod_group_condition->type == type) {
    known = bridge::PodGroupCondition{.condition = *g->pod_group_condition,
                                      .observed_generation = g->pod_group_generation};
  } else {
    known = std::move(on_object);
  }
  std::string since;
  if (known) {
    const kube::Condition& c = known->condition;
    const bool same = c.status == status && c.reason == reason && c.message == message &&
                      known->observed_generation == generation;
    if (same || (terminal && c.status == "True")) {
      RememberCondition(groups_, key, c, known->observed_generation);
      co_return;
    }
    if (c.status == status) since = c.last_transition_time;
  }
  if (since.empty()) since = FormatTime(clock_.WallNow());
  kube::ResourceRef ref{.group = std::string(bridge::kWorkloadApiGroup),
                        .version = api_version->substr(api_version->find('/') + 1),
                        .resource = "podgroups",
                        .namespace_ = spec.namespace_};
  ref = ref.WithName(spec.name).WithSubresource("status");
  std::string patch =
      bridge::PodGroupConditionPatch(type, scheduled, reason, message, since, generation);
  Result<kube::GenericObject> r = co_await kube::PatchAs<kube::GenericObject>(
      kube_, std::move(ref), kube::PatchType::kStrategicMerge, std::move(patch));
  if (!r) {
    if (r.error().code != ErrorCode::kNotFound) {
      spdlog::warn("{}: writing {}={} failed: {}", key, type, status, r.error().ToString());
    }
    co_return;
  }
  spdlog::info("{}: {}={}: {}", key, type, status, message);
  kube::Condition written{.type = type,
                          .status = status,
                          .reason = reason,
                          .message = message,
                          .last_transition_time = since};
  RememberCondition(groups_, key, std::move(written), generation);
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

}  // namespace sb::scheduler
