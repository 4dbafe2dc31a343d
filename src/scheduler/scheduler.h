// SPDX-License-Identifier: Apache-2.0
//
// scheduler/scheduler.h
//
// `slurm-bridge scheduler`: pending pods -> Slurm placeholder jobs -> bindings.
//
//   - Watches unbound pods whose spec.schedulerName is the bridge's (one field-selected watch)
//     and all nodes. Each pod is resolved to its group (bridge/group.h: owners are read once and
//     cached briefly); groups are worked on by 4 x maxConcurrentSubmits workers (at least 16),
//     the group with the highest pod priority, then the oldest, first; at most
//     maxConcurrentSubmits submits are in flight. A slow group holds up one worker only.
//   - The decisions are scheduler/planner.h's (pure); this class gathers their input and acts.
//     Its parts: GroupTable (group_table.h), SlurmJobs (slurm_jobs.h), KubeNodes
//     (kube_nodes.h), Binder (binder.h); docs/architecture.md, "Inside the scheduler".
//   - A complete group without a job gets one Slurm job (bridge/translate.h), tagged in
//     admin_comment (bridge/tag.h); the pods it is for get the job-id label, the finalizer and
//     the managed-node toleration. Before the first submit, every job Slurm knows is read; a
//     group without a job adopts a live one tagged for it (one; the other unbound ones are
//     cancelled), so a restart never submits a second job for a group. A submit whose outcome
//     is unknown is followed by a job list before the group is looked at again; every job list
//     cancels a tracked group's second unbound job.
//   - Slurm is watched at a cost that follows this scheduler's jobs, not the cluster's: the
//     tracked jobs' states through the process's job watch (slurm/job_watch.h: one
//     GET /jobs/state/?job_id=... every jobPollInterval for every component; none while no job
//     is wanted), one GET /jobs/?update_time=... every
//     jobListInterval while jobs are tracked (state reasons, duplicates; Slurm sends every job
//     only when one changed since the last list, else "no change" and the last list holds), one
//     GET /nodes/ every nodeListInterval, and when a job starts, its resource layout (GET
//     /resources/{id}: its nodes and GPUs; a GET /job/{id} where that cannot be had).
//     Start-up reads the full job list once (adoption before the first submit).
//   - While the job waits, each pod has PodScheduled=False (reason Unschedulable) and a Warning
//     FailedScheduling event with Slurm's words ("waiting for Slurm job 12 in partition gpu:
//     Resources"), written again only when the words change.
//   - When the job runs, each pod gets the node annotation and is bound to its node (one pod per
//     node; nodes mapped through slinky.slurm.net/slurm-nodename), a group as a whole; a Normal
//     Scheduled event says "Successfully assigned ns/pod to node-1 (Slurm job 12)". From then on
//     the pods and the job belong to the controllers; a member re-created later binds to the
//     node its predecessor left in that job (found again in Slurm's job list).
//   - A job that ends before its pods are bound is replaced by a new one; a group whose pods are
//     all gone has its job cancelled; pending pods being deleted lose the finalizer.
//
// Thread model: loop-confined; everything runs on the executor's one thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "async/clock.h"
#include "async/semaphore.h"
#include "async/task_group.h"
#include "bridge/config.h"
#include "bridge/translate.h"
#include "bridge/volumes.h"
#include "common/error.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/runtime/event_recorder.h"
#include "kube/runtime/kube_adapters.h"
#include "kube/runtime/work_queue.h"
#include "scheduler/binder.h"
#include "scheduler/group_table.h"
#include "scheduler/kube_nodes.h"
#include "scheduler/planner.h"
#include "scheduler/slurm_jobs.h"
#include "scheduler/stats.h"
#include "scheduler/work_item.h"
#include "slurm/client.h"
#include "slurm/job_watch.h"

namespace sb::scheduler {

// The job states come from a slurm::JobWatch: the process's shared one (`all` mode: one poll
// for the scheduler and the controllers), or, given none, one of its own (slurm_jobs.h). The
// Nodes likewise come from the process's shared Node informer (run by its owner) or, given
// none, from one of its own.
class Scheduler {
 public:
  Scheduler(boost::asio::any_io_executor executor, kube::Client& kube, slurm::Client& slurm,
            async::Clock& clock, bridge::Config config, slurm::JobWatch* watch = nullptr,
            kube::Informer<kube::Node>* nodes = nullptr);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  Scheduler(Scheduler&&) = delete;
  Scheduler& operator=(Scheduler&&) = delete;

  // Runs until Stop(). Fails only when start-up cannot complete (the first job list).
  [[nodiscard]] boost::asio::awaitable<Result<void>> Run();
  void Stop();
  // Asked before each submit, cancel-to-resubmit and Binding: false (leadership lost, as the
  // lease thread sees it) makes the scheduler write nothing more, even before Stop() reaches it
  // through the main loop (review R-10). None: always true.
  void SetWriteGate(std::function<bool()> gate) { write_gate_ = std::move(gate); }
  // The start-up job list comes from `scan`, shared with the controllers of the process
  // (`all`; slurm/shared_job_scan.h). Before Run().
  void ShareStartupScan(slurm::SharedJobScan* scan) { slurm_jobs_.ShareStartupScan(scan); }

  // Started: caches synced and Slurm's jobs read.
  [[nodiscard]] bool Ready() const { return ready_; }
  [[nodiscard]] const Stats& stats() const { return stats_; }
  // Groups waiting in the queue.
  [[nodiscard]] std::size_t QueueDepth() { return queue_.Len(); }
  [[nodiscard]] std::size_t TrackedJobs() const { return slurm_jobs_.tracked().size(); }
  // Live jobs of this scheduler it knows of (tracked, bound, adopted or listed at start-up).
  [[nodiscard]] std::size_t ListedJobs() const {
    std::size_t n = 0;
    for (const auto& [group, views] : slurm_jobs_.listed()) n += views.size();
    return n;
  }
  [[nodiscard]] const kube::EventRecorder& events() const { return recorder_; }
  // The unbound pod `ns/name` as the scheduler's cache has it (for tests).
  [[nodiscard]] std::shared_ptr<const kube::Pod> CachedPod(const std::string& key) const {
    return pods_.cache().Get(key);
  }
  // Pods told they wait (PodScheduled=False), by why (WaitingReason): Slurm's reason, or the
  // bridge's own.
  [[nodiscard]] std::map<std::string, std::size_t> WaitingByReason() const;
  // Per-pod bookkeeping still held (queue ranks, last reported messages, bound UIDs): returns to
  // 0 once the pods are bound or gone. For tests and metrics.
  [[nodiscard]] std::size_t TrackedKeys() const {
    return ranks_.size() + reported_.size() + bound_.size() + seen_.size();
  }

 private:
  // The job a group asks for now (translation and Kubernetes-side exclusions), or why none can
  // be described (`problem`, for the pods) and when to look again.
  struct Wanted {
    slurm::JobDescription job;  // a heterogeneous job's first component
    // A heterogeneous job: every component, and its part names (bridge::GroupJob); else empty.
    std::vector<slurm::JobDescription> components;
    std::vector<std::string> parts;
    std::vector<const kube::Pod*> pods;  // a heterogeneous job's pods, by component
    std::string note;  // a change made to what the annotations asked (FitNodeCount)
    std::string problem;
    std::chrono::seconds retry{0};
  };
  struct Rank {
    std::int32_t priority = 0;
    std::string created;
  };

  void OnPod(const kube::Pod* old, const std::shared_ptr<const kube::Pod>& pod);
  void OnPodDeleted(const std::shared_ptr<const kube::Pod>& pod);
  void Enqueue(const WorkItem& item, const kube::Pod& pod);

  boost::asio::awaitable<void> Worker();
  // One pass over a queue item; its Next applied (work_item.h).
  boost::asio::awaitable<Result<kube::Requeue>> Process(const WorkItem& item);
  boost::asio::awaitable<Result<Next>> Resolve(const std::string& pod_key);
  boost::asio::awaitable<Result<Next>> Reconcile(const std::string& group_key);
  // A group's unbound pods: `live` (schedulable, by name; `held` keeps them valid across
  // co_awaits) and `deleting` (they only lose the finalizer). Gated pods are in neither.
  struct Members {
    std::vector<std::shared_ptr<const kube::Pod>> held;
    std::vector<const kube::Pod*> live;
    std::vector<std::shared_ptr<const kube::Pod>> deleting;
  };
  [[nodiscard]] Members MembersOf(const GroupState& group) const;
  // A job Slurm already has for the group (a restart, a lost submit reply) becomes its job.
  void Adopt(const std::string& group_key, const JobView& job);
  // The job-id label (and a heterogeneous job's component) on `pods` of the group's job.
  boost::asio::awaitable<Result<void>> LabelWithJob(const bridge::GroupSpec& spec,
                                                    const std::vector<const kube::Pod*>& pods);
  // The pods are told why they wait; a Workload API PodGroup's condition says it too.
  boost::asio::awaitable<void> ReportGroupWaits(const bridge::GroupSpec& spec,
                                                const std::vector<const kube::Pod*>& pods,
                                                const std::string& message);
  // A coscheduling PodGroup short since `short_since`: its spec.scheduleTimeoutSeconds' deadline
  // while ahead (to look again then); past it, a PodGroupTimedOut event once per shortfall.
  boost::asio::awaitable<std::optional<async::Clock::TimePoint>> CheckScheduleTimeout(
      const bridge::GroupSpec& spec, const std::vector<const kube::Pod*>& pods,
      async::Clock::TimePoint short_since);
  // The pod is told why it waits, and is read again (with its owners) after `after`.
  boost::asio::awaitable<Next> Wait(const kube::Pod& pod, std::string message,
                                    async::Clock::Duration after);
  // `spec.size` is the size the job is for (the spec's, or a PodGroup remainder's).
  boost::asio::awaitable<Result<Next>> Submit(const bridge::GroupSpec& spec,
                                              std::vector<const kube::Pod*> pods);
  // Queues the next group of submit_line_ when a worker may wait for a submit slot again.
  void CallSubmitLine();
  Wanted Describe(const bridge::GroupSpec& spec, const std::vector<const kube::Pod*>& pods) const;
  // Sends a pending job what changed in its description. `stop`: the pass ends there with
  // `next` (the pods were told of a problem, or the job is being submitted anew); else it goes
  // on, and `next` (an update to try again) joins what it asks at its end.
  struct Updated {
    bool stop = false;
    Next next;
  };
  boost::asio::awaitable<Updated> UpdatePending(const bridge::GroupSpec& spec,
                                                std::vector<const kube::Pod*> pods);
  // Cancels pending job `id`, whose `fields` changed where Slurm's limits look; the group looks
  // again at once (which submits its new job), or later when the cancel failed.
  boost::asio::awaitable<Next> Resubmit(const bridge::GroupSpec& spec,
                                        const std::vector<const kube::Pod*>& pods, std::int64_t id,
                                        const std::vector<std::string>& fields);
  // The group looks again; every group whose job is pending looks again (its exclusions may
  // have changed).
  void QueueGroup(const std::string& group);
  void QueuePending();
  // Looks at the group again after `after`, reading the pod and its owners anew.
  static Next RetryLater(const std::vector<const kube::Pod*>& pods, async::Clock::Duration after);
  // Binds the pods of a RUNNING job: binder.h's steps, their results applied here.
  boost::asio::awaitable<Result<Next>> Bind(const bridge::GroupSpec& spec,
                                            std::vector<const kube::Pod*> pods, TrackedJob job);
  // A job on a node Kubernetes lacks: remembered, and cancelled when the plan says so (true:
  // cancelled, the bind ends).
  boost::asio::awaitable<bool> OnUnmapped(const bridge::GroupSpec& spec,
                                          const std::vector<const kube::Pod*>& pods,
                                          std::int64_t id, const BindPlan& plan);
  // The debug-level stage trace of a bound job.
  // Also counts the bind latency (RUNNING seen to bound) of this process's jobs.
  void TraceStages(const std::string& group, const TrackedJob& job, std::size_t pods);
  // A member of the PodGroup was bound by the bridge (labelled with a job, on a node).
  boost::asio::awaitable<Result<bool>> PodGroupRan(const bridge::GroupSpec& spec);
  boost::asio::awaitable<void> ReportWaiting(const kube::Pod& pod, std::string message);
  // A Workload API PodGroup's group (bridge::kWorkloadPodGroupKeyPrefix): its condition
  // (PodGroupScheduled on v1alpha2, PodGroupInitiallyScheduled on v1beta1) patched
  // (podgroups/status) when it differs from the last one written or read; other groups: nothing.
  boost::asio::awaitable<void> WritePodGroupStatus(bridge::GroupSpec spec, bool scheduled,
                                                   std::string reason, std::string message);
  boost::asio::awaitable<void> DropFinalizer(const kube::Pod& pod);
  boost::asio::awaitable<Result<kube::GenericObject>> GetOwner(std::string api_version,
                                                               std::string kind, std::string ns,
                                                               std::string name);
  // N-5: reads the pod's claims (and their PVs or StorageClasses) and judges them.
  boost::asio::awaitable<bridge::VolumePlan> PlanPodVolumes(const kube::Pod& pod);

  // Once after start-up, when the first pods were looked at: the jobs of the start-up list
  // that no group here holds and none of whose pods exists (each confirmed by a GET) are
  // cancelled. A job submitted before a restart for pods deleted meanwhile: the controllers
  // learn a job only from its bound pods' labels, so nobody else would (issue #46).
  boost::asio::awaitable<void> CancelStartupOrphans();

  // DRA: the DeviceClasses (resource.k8s.io/v1), listed now and every 30 s while there are
  // device profiles; translate_ and the binder's claims resolve classes through them.
  boost::asio::awaitable<void> ListDeviceClasses();
  [[nodiscard]] Binder::DraInput DraView() const;

  void Emit(const std::vector<const kube::Pod*>& pods, const std::string& reason,
            const std::string& message);

  boost::asio::any_io_executor executor_;
  kube::Client& kube_;
  slurm::Client& slurm_;
  async::Clock& clock_;
  bridge::Config config_;
  bridge::TranslateOptions translate_;
  // The DeviceClasses last listed (translate_.device_classes points into them; the binder holds
  // a reference while it writes claims).
  std::shared_ptr<const std::vector<kube::GenericObject>> device_classes_;
  bool device_classes_unserved_logged_ = false;

  kube::Informer<kube::Pod> pods_;
  KubeNodes kube_nodes_;
  kube::ClientEventSink event_sink_;
  kube::EventRecorder recorder_;
  Binder binder_;
  // The work queue's order: (-priority, creationTimestamp).
  using QueueRank = std::pair<std::int64_t, std::string>;
  kube::WorkQueue<WorkItem, QueueRank> queue_;
  async::Semaphore submit_slots_;  // maxConcurrentSubmits

  std::unordered_map<WorkItem, Rank> ranks_;  // queue item -> rank
  GroupTable groups_;
  SlurmJobs slurm_jobs_;
  // Pod uid -> the last message written, and when.
  struct Reported {
    std::string message;
    async::Clock::TimePoint at{};
  };
  std::unordered_map<std::string, Reported> reported_;
  std::set<std::string> bound_;  // uids of pods bound and not yet gone from the watch
  // Pod uid -> its first watch event, for the stage trace (only at debug level).
  std::unordered_map<std::string, async::Clock::TimePoint> seen_;
  struct CachedOwner {
    kube::GenericObject object;
    async::Clock::TimePoint fetched;
  };
  std::unordered_map<std::string, CachedOwner> owners_;
  // Pod key -> the node affinity of the PVs its bound claims use (local and zonal volumes).
  std::unordered_map<std::string,
                     std::vector<std::pair<std::string, std::vector<kube::NodeSelectorTerm>>>>
      volume_affinity_;
  // Pod key -> the ResourceClaimTemplates its spec.resourceClaims name, by name (DRA);
  // translate_.claim_templates points into them.
  std::unordered_map<std::string, std::map<std::string, kube::GenericObject>>
      claim_template_objects_;
  // Groups waiting for a place among the submit slot's waiters, in the order they came (N-20).
  std::deque<std::string> submit_line_;
  PlannerOptions planner_;

  Stats stats_;
  bool ready_ = false;
  bool stopping_ = false;
  std::function<bool()> write_gate_;
  bool fenced_ = false;  // write_gate_ said no (logged)
  // Whether this replica may write to Slurm and the apiserver now (write_gate_); said once.
  bool MayWrite();
  async::TaskGroup tasks_;
};

}  // namespace sb::scheduler
