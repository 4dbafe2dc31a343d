// SPDX-License-Identifier: Apache-2.0
//
// controllers/node/node_controller.h
//
// The node controller of `slurm-bridge controllers`: keeps Kubernetes Nodes and the Slurm nodes
// they map to (label slinky.slurm.net/slurm-nodename, else the node's name) in step, as decided
// by node_logic.h:
//   - the managed-node taint on Slurm nodes (and off every other node);
//   - cordon -> Slurm DRAIN, uncordon -> UNDRAIN (an administrator's drain is kept);
//   - Slurm DOWN / DRAIN / FAIL -> the slurm-node-unavailable taint and SlurmNodeReady=False;
//   - external nodes (node_logic.h 4.): a Node labelled scheduler.slinky.slurm.net/external-node
//     is registered in Slurm (POST /new/node/, State=External) and kept like the Node (re-created
//     through drain -> empty -> DELETE when CPUs, memory, GPUs or partitions change; topology
//     updated in place); a Node that loses the label or is deleted has the external node the
//     bridge registered for it drained, waited for and deleted. Registration runs first, so the
//     taint step of the same reconcile already sees the new Slurm node (managed-node taint).
//
// How it runs:
//   - A Node informer (the process's shared one when given, else one of its own): every add or
//     change of a Node queues that node at once.
//   - Slurm's node list comes from a slurm::NodeWatch (the process's shared one when given, else
//     one of its own): one GET /nodes/ every config.node_list_interval, whatever the number of
//     nodes; after each read every Node is queued (a no-op when nothing differs). A failed read
//     keeps the previous list and is retried with backoff (1 s doubling, at most the interval).
//     Nothing is reconciled before the first list has been read, so a Slurm outage at start-up
//     never strips taints.
//   - Reconciles run from a kube::WorkQueue (one node at a time per key, four workers). Errors
//     requeue the node with a per-key backoff (250 ms doubling to 60 s).
//   - Before it drains or undrains, the controller reads the one Slurm node again
//     (GET /node/{name}), so that a decision never rests on a list up to one interval old (an
//     administrator's fresh drain is not overwritten). The same before an external node is
//     drained, updated or deleted. Per-node Slurm calls are made only for nodes in Slurm's list
//     and for labelled nodes (GET /partition/{name} for each partition of the annotation, only
//     when the node is to be created or its features differ): a Kubernetes node that is neither
//     (a control plane node, upstream #52) costs no Slurm call and no log line.
//   - Waiting for a drained external node to empty is level-triggered: every list re-queues the
//     node, so the wait takes up to one node_list_interval after the last job ends. A deleted
//     Node whose external node the bridge registered is remembered (by name) until that node
//     is gone from Slurm; a bridge restarted in between forgets it, and the Slurm node stays
//     (external nodes without a Kubernetes Node are never swept: others register them too).
//   - Writes: taints with a JSON merge patch of the full list carrying metadata.resourceVersion
//     (409 -> requeue); the condition with a strategic merge patch of nodes/{name}/status
//     (conditions merge by type, so other writers' conditions stay); Slurm with POST /node/{name}.
//   - With device profiles (config deviceProfiles) and resource.k8s.io/v1 served (discovery; else
//     one log line, asked again every 5 minutes), a ResourceSlice informer (list + watch of every
//     slice, indexed by the node each is local to): a slice's add, change or removal queues its
//     node, and the reconcile judges SlinkySlurmGRESCompatible (node_logic.h 5.) from the node's
//     slices, once the informer has synced (then every node is queued: one without slices gets
//     no slice event). Without the API the condition is left as it is.
//   - Events on the Node (source component slurm-bridge-controllers) for drains, undrains, an
//     uncordon that keeps an administrator's drain (once per uncordon this process saw) and Slurm
//     health changes (when the condition's status, reason or message changes), external-node
//     registration, drain for re-creation or removal, re-creation and removal, and Warnings for
//     bad labels/annotations/capacity and for Slurm refusing a registration (each Warning once
//     per change of its message, per node). They name the node
//     with uid = node name, as kubelet does, so that `kubectl describe node` lists them.
//
// Thread model: loop-confined; everything runs on the executor's one thread. The clients, the
// clock and a given informer and node watch must outlive the controller; a given informer and
// node watch are run (and stopped) by their owner (app/components.h), not by the controller.
//
// Example:
//   NodeController nodes(io.get_executor(), *kube, *slurm, clock, config);
//   co_spawn(io, nodes.Run(), detached);
//   ...
//   nodes.Stop();  // Run() returns once the workers and the poller have stopped
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "async/clock.h"
#include "async/task_group.h"
#include "bridge/config.h"
#include "common/error.h"
#include "controllers/node/node_logic.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/runtime/event_recorder.h"
#include "kube/runtime/kube_adapters.h"
#include "kube/runtime/work_queue.h"
#include "slurm/client.h"
#include "slurm/node_watch.h"

namespace sb::controllers {

struct NodeControllerStats {
  std::uint64_t taints_added = 0;
  std::uint64_t taints_removed = 0;
  std::uint64_t drains = 0;
  std::uint64_t undrains = 0;
  std::uint64_t condition_updates = 0;  // writes and removals of SlurmNodeReady
  std::uint64_t conflicts = 0;          // 409 on a taint patch (requeued, not an error)
  std::uint64_t errors = 0;             // failed reconciles and failed Slurm list reads
  std::uint64_t slurm_lists = 0;        // successful GET /nodes/ acted on
  std::uint64_t slurm_lists_held = 0;   // ... not acted on: too many nodes gone at once
  std::uint64_t reconciles = 0;
  std::uint64_t external_registered = 0;  // external nodes created (re-creations included)
  std::uint64_t external_drains = 0;      // drained for re-creation or removal
  std::uint64_t external_recreated = 0;
  std::uint64_t external_removed = 0;
  std::uint64_t external_updates = 0;        // in-place updates (topology, mark, undrain)
  std::uint64_t gres_condition_updates = 0;  // writes and removals of SlinkySlurmGRESCompatible
};

class NodeController : private slurm::NodeWatchSubscriber {
 public:
  // Source component of the Events.
  static constexpr std::string_view kComponent = "slurm-bridge-controllers";

  // `nodes`, `node_watch`: the process's shared Node informer and Slurm node watch; null: the
  // controller makes and runs its own (tests, a controller alone).
  NodeController(boost::asio::any_io_executor executor, kube::Client& kube, slurm::Client& slurm,
                 async::Clock& clock, bridge::Config config,
                 kube::Informer<kube::Node>* nodes = nullptr,
                 slurm::NodeWatch* node_watch = nullptr);
  ~NodeController() override;
  NodeController(const NodeController&) = delete;
  NodeController& operator=(const NodeController&) = delete;

  // Runs until Stop(). Never fails: errors are logged, counted and retried.
  [[nodiscard]] boost::asio::awaitable<void> Run();
  // Stops the informer, the poller and the workers; Run() returns when they have. Idempotent.
  void Stop();

  // Started: the Node cache is synced and Slurm's node list has been read once.
  [[nodiscard]] bool Ready() const;
  [[nodiscard]] const NodeControllerStats& stats() const { return stats_; }
  [[nodiscard]] const kube::EventRecorder& events() const { return recorder_; }

 private:
  void Enqueue(const std::string& name) { queue_.Add(name); }
  void EnqueueAll();
  [[nodiscard]] boost::asio::awaitable<void> Worker();
  // slurm::NodeWatchSubscriber: Slurm's node list, kept unless it lost too many nodes at once
  // (SuspiciousShrink); then every Node is queued.
  void OnSlurmNodes(const slurm::NodeListAnswer& answer) override;
  void OnNodeListFailed(const Error& /*error*/) override { ++stats_.errors; }
  [[nodiscard]] boost::asio::awaitable<Result<void>> Reconcile(std::string name);
  // GET /node/{slurm_name} into `info` and the cached list (reset when Slurm does not know it),
  // before a decision that writes to Slurm; an error for any other failure.
  [[nodiscard]] boost::asio::awaitable<Result<void>> RereadSlurmNode(
      std::string slurm_name, std::optional<slurm::NodeInfo>& info);
  [[nodiscard]] boost::asio::awaitable<Result<void>> SyncTaints(const kube::Node& node,
                                                                const NodePlan& plan);
  // The registration step (node_logic.h 4.) of a Node in the cache, or of a deleted one.
  [[nodiscard]] boost::asio::awaitable<Result<void>> SyncRegistration(const kube::Node& node,
                                                                      bool deleted);
  // Drops the partitions Slurm does not know from `desired` (said in its problems).
  [[nodiscard]] boost::asio::awaitable<Result<void>> CheckPartitions(ExternalNodeSpec& desired);
  [[nodiscard]] boost::asio::awaitable<Result<void>> CreateExternal(
      const kube::Node& node, const std::string& slurm_name, const std::string& node_conf,
      const ExternalNodeSpec* desired);
  // Emits `warning` when its message differs from the last one said in `said` for this node
  // (nullopt forgets it).
  void WarnOnce(std::map<std::string, std::string>& said, const kube::Node& node,
                const std::optional<PlannedEvent>& warning);
  [[nodiscard]] boost::asio::awaitable<Result<void>> SyncSlurm(const kube::Node& node,
                                                               NodePlan plan);
  [[nodiscard]] boost::asio::awaitable<Result<void>> SyncCondition(const kube::Node& node,
                                                                   const NodePlan& plan);
  // SlinkySlurmGRESCompatible (node_logic.h 5.).
  [[nodiscard]] boost::asio::awaitable<Result<void>> SyncGres(const kube::Node& node,
                                                              const slurm::NodeInfo* slurm_node);
  // Discovery of resource.k8s.io/v1, then the ResourceSlice informer until Stop().
  [[nodiscard]] boost::asio::awaitable<void> WatchResourceSlices();
  void Emit(const kube::Node& node, const PlannedEvent& event);
  [[nodiscard]] std::optional<slurm::NodeInfo> SlurmNode(const std::string& slurm_name) const;

  boost::asio::any_io_executor executor_;
  kube::Client& kube_;
  slurm::Client& slurm_;
  async::Clock& clock_;
  bridge::Config config_;

  std::unique_ptr<kube::Informer<kube::Node>> own_nodes_;  // when none was given
  kube::Informer<kube::Node>& nodes_;
  std::unique_ptr<slurm::NodeWatch> own_node_watch_;  // when none was given
  slurm::NodeWatch& node_watch_;
  kube::ClientEventSink event_sink_;
  kube::EventRecorder recorder_;
  kube::WorkQueue<std::string> queue_;

  // Slurm's nodes by name, from the last successful list (and patched after our own updates).
  std::map<std::string, slurm::NodeInfo> slurm_nodes_;
  bool slurm_listed_ = false;
  std::map<std::string, std::string> gaps_;  // node -> the capacity gap last reported ("": none)
  int shrink_seen_ = 0;  // successive lists that lost too many nodes at once (SuspiciousShrink)
  // Conditions written and not yet seen in the cache (the watch lags the write): node -> what was
  // written and when, so that a reconcile in between does not write it again.
  struct Written {
    kube::Condition condition;
    async::Clock::TimePoint at{};
  };
  std::unordered_map<std::string, Written> written_;
  std::unordered_map<std::string, Written> gres_written_;  // the same for SlinkySlurmGRESCompatible
  // A condition of `type` this controller wrote and the node's cache does not show yet, equal to
  // `planned`, within kWrittenTtl: not written again. Forgets a write the cache has caught up with.
  bool WrittenAlready(std::unordered_map<std::string, Written>& written, const kube::Node& node,
                      std::string_view type, const std::optional<kube::Condition>& planned);
  // ResourceSlices (GenericObject), indexed by node; null until resource.k8s.io/v1 is known to
  // be served.
  std::unique_ptr<kube::Informer<kube::GenericObject>> slices_;
  // Nodes seen cordoned since their last reconcile as schedulable: an uncordon that keeps an
  // administrator's drain is reported once, when it happens.
  std::set<std::string> cordon_seen_;
  // Deleted Nodes whose external Slurm node (registered by the bridge) is still to be removed.
  std::map<std::string, std::shared_ptr<const kube::Node>> deleted_;
  // node -> the registration Warning last said ("": none), so that it is said once per change.
  std::map<std::string, std::string> registration_warned_;
  std::map<std::string, std::string> registration_failed_;  // the same for Slurm's refusals

  NodeControllerStats stats_;
  bool stopping_ = false;
  async::TaskGroup tasks_;
};

}  // namespace sb::controllers
