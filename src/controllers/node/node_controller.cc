// SPDX-License-Identifier: Apache-2.0
#include "controllers/node/node_controller.h"

#include <algorithm>
#include <exception>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>

#include "bridge/translate.h"
#include "common/time_format.h"

namespace sb::controllers {
namespace asio = boost::asio;
using asio::awaitable;

namespace {

constexpr int kWorkers = 4;
// How long a written condition may stay unseen in the cache before it is written again.
constexpr auto kWrittenTtl = std::chrono::seconds(10);
constexpr auto kListRetryBase = std::chrono::seconds(1);
// How often a cluster without resource.k8s.io/v1 is asked again.
constexpr auto kDraRediscovery = std::chrono::minutes(5);
constexpr std::string_view kDraGroup = "resource.k8s.io";
constexpr std::string_view kSliceNodeIndex = "resourceslice.node";
constexpr auto kSliceSyncPoll = std::chrono::milliseconds(100);

std::string TaintText(const kube::Taint& t) {
  return t.value.empty() ? fmt::format("{}:{}", t.key, t.effect)
                         : fmt::format("{}={}:{}", t.key, t.value, t.effect);
}

std::string TaintsText(const std::vector<kube::Taint>& taints) {
  std::vector<std::string> out;
  out.reserve(taints.size());
  for (const kube::Taint& t : taints) out.push_back(TaintText(t));
  return fmt::format("[{}]", fmt::join(out, ", "));
}

bool SameCondition(const kube::Condition& a, const kube::Condition& b) {
  return a.status == b.status && a.reason == b.reason && a.message == b.message;
}

}  // namespace

NodeController::NodeController(asio::any_io_executor executor, kube::Client& kube,
                               slurm::Client& slurm, async::Clock& clock, bridge::Config config,
                               kube::Informer<kube::Node>* nodes, slurm::NodeWatch* node_watch)
    : executor_(std::move(executor)),
      kube_(kube),
      slurm_(slurm),
      clock_(clock),
      config_(std::move(config)),
      own_nodes_(nodes != nullptr
                     ? nullptr
                     : std::make_unique<kube::Informer<kube::Node>>(kube, kube::NodesRef())),
      nodes_(nodes != nullptr ? *nodes : *own_nodes_),
      own_node_watch_(
          node_watch != nullptr
              ? nullptr
              : std::make_unique<slurm::NodeWatch>(
                    executor_, slurm, clock,
                    slurm::NodeWatchOptions{.list_interval = config_.node_list_interval})),
      node_watch_(node_watch != nullptr ? *node_watch : *own_node_watch_),
      event_sink_(kube),
      recorder_(clock, event_sink_,
                kube::EventRecorderOptions{.source = {.component = std::string(kComponent)}}),
      queue_(clock, kube::BackoffPolicy{.base = std::chrono::milliseconds(250),
                                        .cap = std::chrono::seconds(60)}),
      tasks_(executor_, clock, "node controller") {
  nodes_.cache().AddHandlers(
      {.on_add =
           [this](const auto& n) {
             deleted_.erase(n->metadata.name);
             Enqueue(n->metadata.name);
           },
       .on_update = [this](const auto&, const auto& n) { Enqueue(n->metadata.name); },
       .on_delete =
           [this](const auto& n) {
             const std::string& name = n->metadata.name;
             written_.erase(name);
             gres_written_.erase(name);
             cordon_seen_.erase(name);
             registration_warned_.erase(name);
             registration_failed_.erase(name);
             gaps_.erase(name);
             // Decided on the last list, without a Slurm call; confirmed by a GET before the
             // drain and the delete.
             auto it = slurm_nodes_.find(bridge::SlurmNodeName(*n));
             if (it != slurm_nodes_.end() && it->second.HasState("EXTERNAL") &&
                 it->second.comment == ExternalNodeComment(name)) {
               deleted_.insert_or_assign(name, n);
               Enqueue(name);
             }
           }});
}

NodeController::~NodeController() = default;

awaitable<void> NodeController::Run() {
  if (stopping_) co_return;
  if (own_nodes_) tasks_.Spawn(own_nodes_->Run());
  tasks_.Spawn(recorder_.Run());
  if (own_node_watch_) tasks_.Spawn(own_node_watch_->Run());
  node_watch_.Subscribe(this);
  for (int i = 0; i < kWorkers; ++i) tasks_.Spawn(Worker());
  if (!config_.device_profiles.empty()) tasks_.Spawn(WatchResourceSlices());
  spdlog::info("node controller started (scheduler {}, Slurm node list every {} ms)",
               config_.scheduler_name, config_.node_list_interval.count());
  co_await tasks_.Join();
  node_watch_.Unsubscribe(this);
  spdlog::info("node controller stopped");
}

void NodeController::Stop() {
  if (stopping_) return;
  stopping_ = true;
  if (own_nodes_) own_nodes_->Stop();
  node_watch_.Unsubscribe(this);
  if (own_node_watch_) own_node_watch_->Stop();
  if (slices_) slices_->Stop();
  queue_.ShutDown();
  recorder_.ShutDown();
  tasks_.Stop();
}

bool NodeController::Ready() const { return !stopping_ && slurm_listed_ && nodes_.HasSynced(); }

void NodeController::EnqueueAll() {
  for (const auto& node : nodes_.cache().List()) Enqueue(node->metadata.name);
  for (const auto& [name, node] : deleted_) Enqueue(name);
}

awaitable<void> NodeController::WatchResourceSlices() {
  int failures = 0;
  bool said_unserved = false;
  while (!stopping_) {
    Result<std::vector<std::string>> served = co_await kube_.GroupVersions(std::string(kDraGroup));
    if (stopping_) co_return;
    if (served && std::ranges::find(*served, "v1") != served->end()) break;
    if (served || served.error().code == ErrorCode::kNotFound) {
      // Kubernetes before 1.34, or DRA turned off: nothing to compare the GRES with.
      if (!said_unserved) {
        spdlog::info("resource.k8s.io/v1 is not served: no {} conditions (asked again every {} s)",
                     kGresCompatibleCondition,
                     std::chrono::duration_cast<std::chrono::seconds>(kDraRediscovery).count());
        said_unserved = true;
      }
      failures = 0;
      if (!co_await tasks_.Sleep(kDraRediscovery)) co_return;
      continue;
    }
    ++failures;
    const async::Clock::Duration wait = std::min<async::Clock::Duration>(
        kListRetryBase * (1 << std::min(failures, 6)), std::chrono::seconds(60));
    spdlog::warn("discovery of {} failed (attempt {}): {}", kDraGroup, failures,
                 served.error().ToString());
    if (!co_await tasks_.Sleep(wait)) co_return;
  }
  if (stopping_) co_return;
  kube::ResourceRef ref = kube::DraRef("resourceslices");
  slices_ = std::make_unique<kube::Informer<kube::GenericObject>>(kube_, std::move(ref));
  slices_->cache().AddIndex(std::string(kSliceNodeIndex), ResourceSliceNodes);
  auto enqueue = [this](const kube::GenericObject& slice) {
    for (const std::string& node : ResourceSliceNodes(slice)) Enqueue(node);
  };
  slices_->cache().AddHandlers({.on_add = [enqueue](const auto& s) { enqueue(*s); },
                                .on_update =
                                    [enqueue](const auto& old_slice, const auto& s) {
                                      enqueue(*old_slice);
                                      enqueue(*s);
                                    },
                                .on_delete = [enqueue](const auto& s) { enqueue(*s); }});
  slices_->reflector().SetErrorHandler(
      [](const Error& e) { spdlog::warn("ResourceSlice watch: {}", e.ToString()); });
  spdlog::info("node controller: {} from ResourceSlices ({} device profiles)",
               kGresCompatibleCondition, config_.device_profiles.size());
  tasks_.Spawn(slices_->Run());
  // A node without slices gets no slice event: every node is judged once the first list is in.
  while (!slices_->HasSynced()) {
    if (!co_await tasks_.Sleep(kSliceSyncPoll)) co_return;
  }
  EnqueueAll();
}

void NodeController::OnSlurmNodes(const slurm::NodeListAnswer& answer) {
  if (stopping_) return;
  std::map<std::string, slurm::NodeInfo> by_name;
  for (const slurm::NodeInfo& n : answer.nodes) {
    if (n.name.empty()) continue;  // input, not an invariant: skip what cannot be matched
    by_name.insert_or_assign(n.name, n);
  }
  bool held = false;
  if (slurm_listed_) {
    const std::size_t lost = static_cast<std::size_t>(std::ranges::count_if(
        slurm_nodes_, [&](const auto& kv) { return !by_name.contains(kv.first); }));
    if (SuspiciousShrink(slurm_nodes_.size(), lost)) {
      held = ++shrink_seen_ < kShrinkConfirmations;
      if (held) {
        ++stats_.slurm_lists_held;
        spdlog::warn(
            "Slurm's node list lacks {} of the {} Slurm nodes known ({} nodes listed): not acted "
            "on (a token that cannot see every node, or a partial answer, would strip the "
            "managed-node taint); believed if {} lists in a row say so",
            lost, slurm_nodes_.size(), by_name.size(), kShrinkConfirmations);
      } else {
        spdlog::warn(
            "Slurm's node list lacks {} of the {} known Slurm nodes for {} lists in a row: "
            "believed",
            lost, slurm_nodes_.size(), shrink_seen_);
      }
    }
  }
  if (!held) {
    shrink_seen_ = 0;
    slurm_nodes_ = std::move(by_name);
    slurm_listed_ = true;
    ++stats_.slurm_lists;
  }
  EnqueueAll();
}

std::optional<slurm::NodeInfo> NodeController::SlurmNode(const std::string& slurm_name) const {
  auto it = slurm_nodes_.find(slurm_name);
  if (it == slurm_nodes_.end()) return std::nullopt;
  return it->second;
}

awaitable<void> NodeController::Worker() {
  co_await kube::RunQueueWorker(
      queue_, [this](const std::string& name) { return Reconcile(name); },
      [this](const std::string& name, const Error& e) {
        if (e.code == ErrorCode::kConflict) {
          spdlog::debug("node {}: {}; requeued", name, e.ToString());
        } else {
          ++stats_.errors;
          spdlog::warn("node {}: {}; retrying", name, e.ToString());
        }
      });
}

awaitable<Result<void>> NodeController::RereadSlurmNode(std::string slurm_name,
                                                        std::optional<slurm::NodeInfo>& info) {
  std::string get_name = slurm_name;
  Result<slurm::NodeInfo> fresh = co_await slurm_.GetNode(std::move(get_name));
  if (fresh) {
    if (fresh->name.empty()) fresh->name = slurm_name;
    slurm_nodes_.insert_or_assign(slurm_name, *fresh);
    info = std::move(*fresh);
  } else if (fresh.error().code == ErrorCode::kNotFound) {
    slurm_nodes_.erase(slurm_name);
    info.reset();
  } else {
    co_return tl::unexpected(fresh.error());
  }
  co_return Result<void>{};
}

awaitable<Result<void>> NodeController::Reconcile(std::string name) {
  // Nothing before Slurm's list was read once: every node would look like a non-Slurm node.
  if (!slurm_listed_ || stopping_) co_return Result<void>{};
  std::shared_ptr<const kube::Node> node = nodes_.cache().Get(name);
  if (!node) {
    auto gone = deleted_.find(name);
    if (gone == deleted_.end()) co_return Result<void>{};
    std::shared_ptr<const kube::Node> last = gone->second;
    ++stats_.reconciles;
    co_return co_await SyncRegistration(*last, /*deleted=*/true);
  }
  ++stats_.reconciles;

  // External nodes first: a node registered now is a Slurm node for the steps below.
  Result<void> registration = co_await SyncRegistration(*node, /*deleted=*/false);

  const std::string slurm_name = bridge::SlurmNodeName(*node);
  std::optional<slurm::NodeInfo> info = SlurmNode(slurm_name);
  NodePlan plan = PlanNode(*node, info ? &*info : nullptr, config_.scheduler_name,
                           FormatTime(clock_.WallNow()));
  // N-13: Slurm counting more than the kubelet offers is said once per change, on the Node.
  if (info) {
    std::string gap = CapacityGap(*node, *info);
    auto [it, fresh] = gaps_.try_emplace(name, "");
    if (gap != it->second) {
      if (!gap.empty()) {
        spdlog::warn("node {}: {}", name, gap);
        Emit(*node, PlannedEvent{
                        .warning = true, .reason = std::string(kEventCapacityGap), .message = gap});
      }
      it->second = std::move(gap);
    }
  }
  if (plan.slurm_update) {
    // Drain and undrain act on Slurm: decide on what Slurm says now, not on the last list.
    if (Result<void> r = co_await RereadSlurmNode(slurm_name, info); !r) co_return r;
    plan = PlanNode(*node, info ? &*info : nullptr, config_.scheduler_name,
                    FormatTime(clock_.WallNow()));
  }

  // The three steps are independent (as upstream's): run all, report the worst error.
  std::optional<Error> failed;
  auto keep = [&failed](const Result<void>& r) {
    if (r) return;
    if (!failed || failed->code == ErrorCode::kConflict) failed = r.error();
  };
  keep(registration);
  Result<void> taints = co_await SyncTaints(*node, plan);
  keep(taints);
  Result<void> slurm = co_await SyncSlurm(*node, plan);
  keep(slurm);
  Result<void> condition = co_await SyncCondition(*node, plan);
  keep(condition);
  Result<void> gres = co_await SyncGres(*node, info ? &*info : nullptr);
  keep(gres);
  if (failed) co_return tl::unexpected(*failed);
  co_return Result<void>{};
}

void NodeController::WarnOnce(std::map<std::string, std::string>& said, const kube::Node& node,
                              const std::optional<PlannedEvent>& warning) {
  if (!warning) {
    said.erase(node.metadata.name);
    return;
  }
  std::string& last = said[node.metadata.name];
  if (warning->message == last) return;
  last = warning->message;
  spdlog::warn("node {}: {}", node.metadata.name, warning->message);
  Emit(node, *warning);
}

awaitable<Result<void>> NodeController::CheckPartitions(ExternalNodeSpec& desired) {
  std::vector<std::string> known;
  for (const std::string& partition : desired.partitions) {
    std::string name = partition;
    Result<slurm::PartitionInfo> r = co_await slurm_.GetPartition(std::move(name));
    if (r) {
      known.push_back(partition);
    } else if (r.error().code == ErrorCode::kNotFound) {
      desired.problems.push_back(
          fmt::format("partition {} does not exist in Slurm: left out", partition));
    } else {
      co_return tl::unexpected(r.error());
    }
  }
  desired.partitions = std::move(known);
  co_return Result<void>{};
}

awaitable<Result<void>> NodeController::CreateExternal(const kube::Node& node,
                                                       const std::string& slurm_name,
                                                       const std::string& node_conf,
                                                       const ExternalNodeSpec* desired) {
  const std::string& name = node.metadata.name;
  std::string conf = node_conf;
  Result<bool> created = co_await slurm_.CreateNode(std::move(conf));
  if (!created) {
    // Said on the Node (once per message): a refused node_conf (a topology Slurm does not
    // have, a full node table) stays refused until someone changes something.
    WarnOnce(
        registration_failed_, node,
        PlannedEvent{.warning = true,
                     .reason = std::string(kEventExternalFailed),
                     .message = fmt::format("Slurm refused to register external node {} ({}): {}",
                                            slurm_name, node_conf, created.error().message)});
    co_return tl::unexpected(created.error());
  }
  WarnOnce(registration_failed_, node, std::nullopt);
  ++stats_.external_registered;
  spdlog::info("node {}: registered Slurm external node: {}", name, node_conf);
  // Until the next list, the cache holds what was asked for, so that the taint step and the
  // reconciles in between see a Slurm node (and do not create it twice).
  slurm::NodeInfo info;
  info.name = slurm_name;
  info.state = {"IDLE", "EXTERNAL"};
  if (desired != nullptr) {
    info.cpus = desired->cpus;
    info.real_memory = desired->real_memory;
    info.gres = ExternalNodeGres(*desired);
    info.features = desired->partitions;
    info.topology = desired->topology;
  }
  slurm_nodes_.insert_or_assign(slurm_name, info);
  // The mark: this external node is the bridge's, for this Node (removed with it). A failure
  // here is retried: the next reconcile of the labelled node sets it (PlanRegistration).
  slurm::NodeUpdate mark{.comment = ExternalNodeComment(name)};
  std::string update_name = slurm_name;
  Result<bool> marked = co_await slurm_.UpdateNode(std::move(update_name), std::move(mark));
  if (!marked) co_return tl::unexpected(marked.error());
  if (auto it = slurm_nodes_.find(slurm_name); it != slurm_nodes_.end()) {
    it->second.comment = ExternalNodeComment(name);
  }
  co_return Result<void>{};
}

awaitable<Result<void>> NodeController::SyncRegistration(const kube::Node& node, bool deleted) {
  const std::string& name = node.metadata.name;
  const bool labelled = !deleted && HasExternalNodeLabel(node);
  const std::string slurm_name = bridge::SlurmNodeName(node);
  std::optional<slurm::NodeInfo> info = SlurmNode(slurm_name);
  auto ours = [&](const std::optional<slurm::NodeInfo>& i) {
    return i && i->HasState("EXTERNAL") && i->comment == ExternalNodeComment(name);
  };
  if (!labelled && !ours(info)) {
    // Upstream #52: a node that is neither labelled nor an external node the bridge registered
    // for it costs no Slurm call and no log line (decided on the list).
    if (deleted) deleted_.erase(name);
    WarnOnce(registration_warned_, node, std::nullopt);
    WarnOnce(registration_failed_, node, std::nullopt);
    co_return Result<void>{};
  }

  std::optional<ExternalNodeSpec> desired;
  if (labelled) {
    desired = DesiredExternalNode(node);
    if (NeedsPartitionCheck(*desired, info ? &*info : nullptr)) {
      Result<void> checked = co_await CheckPartitions(*desired);
      if (!checked) co_return checked;
    }
  }
  const ExternalNodeSpec* want = desired ? &*desired : nullptr;
  RegistrationPlan plan = PlanRegistration(name, deleted, want, info ? &*info : nullptr);
  if (!deleted) WarnOnce(registration_warned_, node, plan.warning);

  if (plan.action == RegistrationAction::kDrain || plan.action == RegistrationAction::kDelete ||
      plan.action == RegistrationAction::kUpdate) {
    // These act on an existing Slurm node: decide on what Slurm says now.
    if (Result<void> r = co_await RereadSlurmNode(slurm_name, info); !r) co_return r;
    plan = PlanRegistration(name, deleted, want, info ? &*info : nullptr);
  }

  switch (plan.action) {
    case RegistrationAction::kNone:
    case RegistrationAction::kIgnored:
      if (deleted) deleted_.erase(name);
      co_return Result<void>{};
    case RegistrationAction::kWait:
      spdlog::debug("node {}: Slurm external node {} drained; waiting for its jobs to end ({})",
                    name, plan.slurm_name, plan.why);
      co_return Result<void>{};
    case RegistrationAction::kCreate: {
      Result<void> created = co_await CreateExternal(node, plan.slurm_name, *plan.node_conf, want);
      if (created && plan.event) Emit(node, *plan.event);
      co_return created;
    }
    case RegistrationAction::kUpdate:
    case RegistrationAction::kDrain: {
      slurm::NodeUpdate update = *plan.update;
      std::string update_name = plan.slurm_name;
      Result<bool> r = co_await slurm_.UpdateNode(std::move(update_name), std::move(update));
      if (!r) co_return tl::unexpected(r.error());
      if (auto it = slurm_nodes_.find(plan.slurm_name); it != slurm_nodes_.end()) {
        slurm::NodeInfo& cached = it->second;
        if (plan.update->topology_str) cached.topology = *plan.update->topology_str;
        if (!plan.update->comment.empty()) cached.comment = plan.update->comment;
        if (plan.action == RegistrationAction::kDrain) {
          cached.state.emplace_back("DRAIN");
          cached.reason = plan.update->reason;
        } else if (!plan.update->state.empty()) {  // UNDRAIN
          std::erase(cached.state, std::string("DRAIN"));
          cached.reason.clear();
        }
      }
      if (plan.action == RegistrationAction::kDrain) {
        ++stats_.external_drains;
        spdlog::info("node {}: drained Slurm external node {} to {}: {}", name, plan.slurm_name,
                     plan.recreate ? "re-create it" : "remove it", plan.why);
      } else {
        ++stats_.external_updates;
        spdlog::info("node {}: updated Slurm external node {}{}{}", name, plan.slurm_name,
                     plan.why.empty() ? "" : ": ",
                     plan.why.empty() ? "marked as the bridge's" : plan.why);
      }
      if (plan.event) Emit(node, *plan.event);
      co_return Result<void>{};
    }
    case RegistrationAction::kDelete: {
      std::string delete_name = plan.slurm_name;
      Result<bool> r = co_await slurm_.DeleteNode(std::move(delete_name));
      if (!r) co_return tl::unexpected(r.error());
      slurm_nodes_.erase(plan.slurm_name);
      if (!plan.recreate) {
        ++stats_.external_removed;
        spdlog::info("node {}: deleted Slurm external node {}: {}", name, plan.slurm_name,
                     plan.why);
        if (plan.event) Emit(node, *plan.event);
        if (deleted) deleted_.erase(name);
        co_return Result<void>{};
      }
      // Re-created at once: the node is out of Slurm for one request, not one list interval.
      Result<void> created = co_await CreateExternal(node, plan.slurm_name, *plan.node_conf, want);
      if (!created) co_return created;
      ++stats_.external_recreated;
      if (!plan.keep_drain_reason.empty()) {
        // A drain not of this step (cordon, administrator) stays on the new node.
        slurm::NodeUpdate drain{.state = {"DRAIN"}, .reason = plan.keep_drain_reason};
        std::string drain_name = plan.slurm_name;
        Result<bool> d = co_await slurm_.UpdateNode(std::move(drain_name), std::move(drain));
        if (!d) co_return tl::unexpected(d.error());
        if (auto it = slurm_nodes_.find(plan.slurm_name); it != slurm_nodes_.end()) {
          it->second.state.emplace_back("DRAIN");
          it->second.reason = plan.keep_drain_reason;
        }
      }
      spdlog::info("node {}: re-created Slurm external node {}: {}", name, plan.slurm_name,
                   plan.why);
      if (plan.event) Emit(node, *plan.event);
      co_return Result<void>{};
    }
  }
  co_return Result<void>{};
}

awaitable<Result<void>> NodeController::SyncTaints(const kube::Node& node, const NodePlan& plan) {
  if (!plan.taints) co_return Result<void>{};
  std::string patch = TaintsPatch(*plan.taints, node.metadata.resource_version);
  std::string name = node.metadata.name;
  Result<kube::Node> r = co_await kube::PatchNode(kube_, std::move(name),
                                                  kube::PatchType::kJsonMerge, std::move(patch));
  if (!r) {
    if (r.error().code == ErrorCode::kNotFound) co_return Result<void>{};  // deleted meanwhile
    if (r.error().code == ErrorCode::kConflict) ++stats_.conflicts;
    co_return tl::unexpected(r.error());
  }
  stats_.taints_added += plan.taints_added.size();
  stats_.taints_removed += plan.taints_removed.size();
  spdlog::info("node {}: taints added {}, removed {}", node.metadata.name,
               TaintsText(plan.taints_added), TaintsText(plan.taints_removed));
  co_return Result<void>{};
}

awaitable<Result<void>> NodeController::SyncSlurm(const kube::Node& node, NodePlan plan) {
  const std::string& name = node.metadata.name;
  if (node.unschedulable) {
    cordon_seen_.insert(name);
  } else {
    const bool uncordoned = cordon_seen_.erase(name) > 0;
    if (plan.drain == DrainAction::kKeepAdminDrain) {
      // Said once, on an uncordon this process saw; an administrator's drain of a node that was
      // not cordoned is reported by the condition and its Event alone.
      if (uncordoned) {
        spdlog::info("node {}: uncordoned, but Slurm node {} keeps its administrator's drain", name,
                     plan.slurm_name);
        if (plan.drain_event) Emit(node, *plan.drain_event);
      }
      co_return Result<void>{};
    }
  }
  if (!plan.slurm_update) co_return Result<void>{};

  slurm::NodeUpdate update = *plan.slurm_update;
  std::string slurm_name = plan.slurm_name;
  Result<bool> r = co_await slurm_.UpdateNode(std::move(slurm_name), std::move(update));
  if (!r) co_return tl::unexpected(r.error());

  // Until the next list, the cache says what we just did, so that the watch events of our own
  // writes do not drain twice.
  if (auto it = slurm_nodes_.find(plan.slurm_name); it != slurm_nodes_.end()) {
    std::vector<std::string>& state = it->second.state;
    if (plan.drain == DrainAction::kDrain) {
      if (std::ranges::find(state, std::string("DRAIN")) == state.end()) state.push_back("DRAIN");
      it->second.reason = plan.slurm_update->reason;
    } else {
      std::erase(state, std::string("DRAIN"));
      it->second.reason.clear();
    }
  }
  if (plan.drain == DrainAction::kDrain) {
    ++stats_.drains;
    spdlog::info("node {}: cordoned; drained Slurm node {}", name, plan.slurm_name);
  } else {
    ++stats_.undrains;
    spdlog::info("node {}: uncordoned; undrained Slurm node {}", name, plan.slurm_name);
  }
  if (plan.drain_event) Emit(node, *plan.drain_event);
  co_return Result<void>{};
}

bool NodeController::WrittenAlready(std::unordered_map<std::string, Written>& written,
                                    const kube::Node& node, std::string_view type,
                                    const std::optional<kube::Condition>& planned) {
  auto w = written.find(node.metadata.name);
  if (w == written.end()) return false;
  const kube::Condition* current = kube::FindCondition(node.conditions, type);
  if (current != nullptr && SameCondition(*current, w->second.condition)) {
    written.erase(w);  // the cache has caught up with our write
    return false;
  }
  // Written already; the watch has not shown it yet.
  return planned && SameCondition(*planned, w->second.condition) &&
         clock_.Now() - w->second.at < kWrittenTtl;
}

awaitable<Result<void>> NodeController::SyncCondition(const kube::Node& node,
                                                      const NodePlan& plan) {
  const std::string& name = node.metadata.name;
  if (WrittenAlready(written_, node, kSlurmNodeReadyCondition, plan.condition)) {
    co_return Result<void>{};
  }
  if (plan.remove_condition) {
    std::string patch = RemoveConditionPatch();
    std::string node_name = name;
    Result<kube::Node> r = co_await kube::PatchNodeStatus(
        kube_, std::move(node_name), kube::PatchType::kStrategicMerge, std::move(patch));
    if (!r && r.error().code != ErrorCode::kNotFound) co_return tl::unexpected(r.error());
    ++stats_.condition_updates;
    written_.erase(name);
    spdlog::info("node {}: not a Slurm node; removed condition {}", name, kSlurmNodeReadyCondition);
    co_return Result<void>{};
  }
  if (!plan.condition) co_return Result<void>{};

  const std::string now = FormatTime(clock_.WallNow());
  std::string patch = ConditionPatch(*plan.condition, now);
  std::string node_name = name;
  Result<kube::Node> r = co_await kube::PatchNodeStatus(
      kube_, std::move(node_name), kube::PatchType::kStrategicMerge, std::move(patch));
  if (!r) {
    if (r.error().code == ErrorCode::kNotFound) co_return Result<void>{};
    co_return tl::unexpected(r.error());
  }
  ++stats_.condition_updates;
  written_.insert_or_assign(name, Written{*plan.condition, clock_.Now()});
  spdlog::info("node {}: condition {}={} ({}: {})", name, kSlurmNodeReadyCondition,
               plan.condition->status, plan.condition->reason, plan.condition->message);
  if (plan.health_event) Emit(node, *plan.health_event);
  co_return Result<void>{};
}

awaitable<Result<void>> NodeController::SyncGres(const kube::Node& node,
                                                 const slurm::NodeInfo* slurm_node) {
  const std::string& name = node.metadata.name;
  std::optional<std::vector<bridge::ResourceSliceInfo>> slices;
  if (slices_ && slices_->HasSynced()) {
    slices.emplace();
    for (const auto& obj : slices_->cache().ByIndex(kSliceNodeIndex, name)) {
      // A malformed slice is left out here; BuildNodeInventory judges the node's pools.
      if (Result<bridge::ResourceSliceInfo> s = bridge::ParseResourceSlice(*obj)) {
        slices->push_back(std::move(*s));
      } else {
        spdlog::debug("node {}: ResourceSlice {}: {}", name, obj->metadata.name, s.error().message);
      }
    }
  }
  GresPlan plan = PlanGresCondition(node, slurm_node, slices ? &*slices : nullptr,
                                    config_.device_profiles, FormatTime(clock_.WallNow()));
  if (WrittenAlready(gres_written_, node, kGresCompatibleCondition, plan.condition)) {
    co_return Result<void>{};
  }
  if (plan.remove_condition) {
    std::string node_name = name;
    std::string patch = RemoveConditionPatch(kGresCompatibleCondition);
    Result<kube::Node> r = co_await kube::PatchNodeStatus(
        kube_, std::move(node_name), kube::PatchType::kStrategicMerge, std::move(patch));
    if (!r && r.error().code != ErrorCode::kNotFound) co_return tl::unexpected(r.error());
    ++stats_.gres_condition_updates;
    gres_written_.erase(name);
    spdlog::info("node {}: removed condition {}", name, kGresCompatibleCondition);
    co_return Result<void>{};
  }
  if (!plan.condition) co_return Result<void>{};
  std::string node_name = name;
  std::string patch = ConditionPatch(*plan.condition, FormatTime(clock_.WallNow()));
  Result<kube::Node> r = co_await kube::PatchNodeStatus(
      kube_, std::move(node_name), kube::PatchType::kStrategicMerge, std::move(patch));
  if (!r) {
    if (r.error().code == ErrorCode::kNotFound) co_return Result<void>{};
    co_return tl::unexpected(r.error());
  }
  ++stats_.gres_condition_updates;
  gres_written_.insert_or_assign(name, Written{*plan.condition, clock_.Now()});
  if (plan.condition->status == "True") {
    spdlog::info("node {}: condition {}=True ({})", name, kGresCompatibleCondition,
                 plan.condition->message);
  } else {
    spdlog::warn("node {}: condition {}={} ({}: {})", name, kGresCompatibleCondition,
                 plan.condition->status, plan.condition->reason, plan.condition->message);
  }
  if (plan.event) Emit(node, *plan.event);
  co_return Result<void>{};
}

void NodeController::Emit(const kube::Node& node, const PlannedEvent& event) {
  kube::ObjectReference ref = kube::MakeObjectReference("v1", "Node", node.metadata);
  // kubelet names its Node with uid = node name, and `kubectl describe node` searches Events by
  // that uid; do the same so that ours are listed there.
  ref.uid = node.metadata.name;
  ref.resource_version.clear();
  recorder_.Emit(std::move(ref),
                 event.warning ? kube::EventType::kWarning : kube::EventType::kNormal, event.reason,
                 event.message);
}

}  // namespace sb::controllers
