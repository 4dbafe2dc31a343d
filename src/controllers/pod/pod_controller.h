// SPDX-License-Identifier: Apache-2.0
//
// controllers/pod/pod_controller.h
//
// Keeps pods and their Slurm jobs in step once the scheduler has bound them (decisions in
// pod_lifecycle.h). A job is acted on only when its admin_comment tag is this bridge's (this
// clusterName and schedulerName) and lists the pod's UID; a pod's job-id label only says where
// to look, and a label naming someone else's job is reported (log and a Warning event
// `SlurmJobNotOurs` on the pod, once), never acted on.
//   - a bound pod whose job ended (scancel, preemption, time limit, node failure) or vanished is
//     deleted, with a Warning event in Slurm's words;
//   - a bound pod whose job is alive but not RUNNING (requeued to PENDING, SUSPENDED) for
//     confirm_after is deleted (Warning `SlurmJobNotRunning`);
//   - a job whose pods are all done (Succeeded/Failed, or deleted and past their grace period
//     with their kubelet gone) is cancelled, and the pods' finalizer removed;
//   - sweep, only while the pod watch is healthy: a job tagged by this cluster's scheduler (one
//     the sweep knows: see below) whose pods (checked by UID, each confirmed by a GET of the pod,
//     the job's tag by a GET of the job) no longer exist is cancelled, unless it is a group's
//     requeued job still waiting for the group's new pods;
//     a bound pod of this scheduler that no live job of this bridge lists (no job label, or a
//     label naming an ended, unknown or foreign job) is reported, and deleted (Warning
//     `NoSlurmJob`) when a later sweep, confirm_after on, still finds it so and a GET agrees.
//     Jobs without the bridge's tag, or with another cluster's or scheduler's, are never
//     touched.
//   - a bound pod with DRA claims whose kubelet has not started its sandbox a few seconds after
//     the Binding is annotated once (bridge::kKubeletNudgeAnnotation, Normal event
//     `KubeletNudged`): a kubelet refused the claims tries again only at its next sync;
//   - at start-up, live jobs tagged for this cluster whose pods and namespaces do not exist here
//     are warned about: another cluster may share this Slurm with the same clusterName.
// Slurm is read at a cost that follows the bridge's jobs, never the size of Slurm's queue:
//   - once, at start-up, Slurm's whole job list (slurm::Client::ScanJobs, keeping only the jobs
//     with a bridge tag, so that memory follows the bridge's jobs): the clusterName check above,
//     and the seed of the register of this bridge's live jobs (tag of this clusterName and
//     schedulerName) that the sweep works on. A failed read is tried again every sweep interval;
//     until one succeeds, the sweeps use what the reads below taught them. Never again after;
//   - the labelled jobs' states through the process's job watch (slurm/job_watch.h: one
//     GET /jobs/state/?job_id=... per jobPollInterval for every component, while pods with a
//     job exist); a running job whose pods are all bound and running and none being deleted
//     ("steady": only its end matters, and it deletes the pods) is asked only every
//     bound_job_poll_interval (config boundJobPollInterval, 5 s), so a handful of long-running
//     pods costs slurmctld a request per 5 s, not two per second; a job pending for more than
//     bridge::kLongPending (30 s) only every pending_job_poll_interval (config
//     pendingJobPollInterval, 2 s), at the same polls as the scheduler's (JobPollTick::DueEvery),
//     so thousands of waiting pods cost about one request per 2,000 jobs per 2 s;
//   - a GET /job/{id} when a labelled job is first seen, its state is unknown, or before acting
//     on it; every such read of a live job of this bridge adds it to the register, and the
//     sweep reads a bound pod's labelled job it knows nothing of the same way (once);
//   - per sweep interval, one GET /jobs/state/?job_id=... of the registered jobs (none while
//     there are none); those Slurm has forgotten or that ended leave the register.
// Why the start-up read is enough: a job of this bridge that no pod's label names is one whose
// scheduler crashed between the submit and the label (or an old leader's late submit); the
// scheduler's own start-up read adopts it for the group's pods, which then get the label, and a
// process that restarts (`all`, or the controllers) finds it in its own start-up read. Not
// covered: in split mode, a scheduler that restarts while the controllers keep running, when
// the job's pods were deleted while it was down: that scheduler adopts only jobs of groups that
// still have pods, and these controllers never list again; the job runs until its time limit
// (defaultTimeLimit) or the controllers' next start (`slurm-bridge check` reports it as an
// orphan).
//
// The Nodes come from the process's shared Node informer when one is given (run by its owner),
// else from one of its own.
//
// Thread model: loop-confined.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "async/clock.h"
#include "async/task_group.h"
#include "bridge/config.h"
#include "bridge/tag.h"
#include "controllers/pod/pod_lifecycle.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/runtime/event_recorder.h"
#include "kube/runtime/kube_adapters.h"
#include "kube/runtime/work_queue.h"
#include "slurm/client.h"
#include "slurm/job_watch.h"
#include "slurm/shared_job_scan.h"

namespace sb::controllers {

// The start-up list's filter: jobs with a bridge tag (of any cluster or scheduler). A start-up
// read shared with the controller (ShareStartupScan) keeps at least these.
[[nodiscard]] bool HasBridgeTag(const slurm::JobInfo& job);

struct PodControllerOptions {
  // Orphan and stray sweep (one GET /jobs/state/ of the registered jobs), and how often a
  // failed start-up job list is tried again.
  std::chrono::milliseconds sweep_interval{30000};
  std::chrono::seconds orphan_min_age{30};  // younger jobs are not swept (informer lag)
  // Bound pods of jobs Slurm no longer knows are kept while more than this many watched jobs
  // were missing from the last state poll (config jobGoneBrake); 0: no brake.
  int gone_brake = 10;
  // How often a steady job (running; every pod naming it bound, running and not being deleted)
  // is asked about; every other watched job at each of the job watch's full polls.
  std::chrono::milliseconds bound_job_poll_interval{5000};
  // Jobs pending for more than bridge::kLongPending (config pendingJobPollInterval).
  std::chrono::milliseconds pending_job_poll_interval{2000};
  LifecycleOptions lifecycle;
};

struct PodControllerStats {
  std::uint64_t pods_deleted = 0;
  std::uint64_t jobs_cancelled = 0;
  std::uint64_t orphans_cancelled = 0;
  std::uint64_t finalizers_removed = 0;
  std::uint64_t claims_released = 0;  // DRA ResourceClaims deleted as their pods ended
  std::uint64_t reconciles = 0;       // Reconcile passes that completed (for tests and metrics)
  // Bound DRA pods annotated for their kubelet (pod_lifecycle.h, JudgeKubeletNudge).
  std::uint64_t kubelets_nudged = 0;
  std::uint64_t state_polls = 0;
  std::uint64_t sweeps = 0;
  std::uint64_t sweeps_skipped = 0;  // the pod watch was not healthy
  std::uint64_t strays_deleted = 0;  // bound pods without a job of this bridge
  // What the sweep costs Slurm: the start-up job list (1 once read; its failed tries), the
  // state reads of the registered jobs (one per sweep while there are any), and the
  // GET /job/{id} the sweep sends (a bound pod's labelled job it knew nothing of, an orphan or
  // a stray's job before acting).
  std::uint64_t startup_lists = 0;
  std::uint64_t startup_list_failures = 0;
  std::uint64_t sweep_state_reads = 0;
  std::uint64_t sweep_job_reads = 0;
  // This bridge's live jobs the sweep knows (the register), at the last change.
  std::uint64_t own_jobs = 0;
  // Live jobs tagged for this cluster whose pods and namespaces are not here (start-up check);
  // cluster_name_checks counts the checks that finished.
  std::uint64_t foreign_looking_jobs = 0;
  std::uint64_t cluster_name_checks = 0;
  std::uint64_t errors = 0;
  // Jobs the last state poll missed, and whether that many hold the deletion of their pods.
  std::uint64_t jobs_missing = 0;
  bool gone_brake_engaged = false;
  std::uint64_t pods_held_by_brake = 0;  // deletions held back (counted per reconcile)
  // Ended jobs whose pods all finished and were released: no longer polled.
  std::uint64_t jobs_settled = 0;
  // Running jobs whose pods are all bound and running: asked every bound_job_poll_interval.
  std::uint64_t jobs_steady = 0;
};

// The labelled jobs' states come from a slurm::JobWatch: the process's shared one (`all` mode),
// or, given none, one of its own.
class PodController : private slurm::JobWatchSubscriber {
 public:
  PodController(boost::asio::any_io_executor executor, kube::Client& kube, slurm::Client& slurm,
                async::Clock& clock, bridge::Config config, PodControllerOptions options = {},
                slurm::JobWatch* watch = nullptr, kube::Informer<kube::Node>* nodes = nullptr);
  ~PodController();
  PodController(const PodController&) = delete;
  PodController& operator=(const PodController&) = delete;

  [[nodiscard]] boost::asio::awaitable<void> Run();
  void Stop();
  // The start-up job list comes from `scan`, shared with the scheduler of the process (`all`;
  // slurm/shared_job_scan.h); it must keep every job with a bridge tag. Before Run().
  void ShareStartupScan(slurm::SharedJobScan* scan) { startup_scan_ = scan; }
  [[nodiscard]] bool Ready() const { return ready_; }
  [[nodiscard]] const PodControllerStats& stats() const { return stats_; }
  [[nodiscard]] std::size_t QueueDepth() { return queue_.Len(); }
  [[nodiscard]] const kube::EventRecorder& events() const { return recorder_; }

 private:
  // What is known of one job: the latest state, and what the last GET /job/{id} said.
  struct JobRecord {
    std::string state;  // base state ("GONE": Slurm does not know it); "" when unknown
    bool read = false;  // tag, reason and description below come from a GET
    std::optional<bridge::JobTag> tag;
    std::string reason;
    std::string description;
    bool preempted = false;
    std::optional<WallTime> not_running_since;
    bool requeued = false;
    std::optional<WallTime> gone_since;
  };

  void OnPod(const kube::Pod& pod);
  boost::asio::awaitable<void> Worker();
  boost::asio::awaitable<Result<void>> Reconcile(std::int64_t job_id);
  // GET /job/{id} into `rec`.
  boost::asio::awaitable<Result<void>> ReadJob(std::int64_t job_id, JobRecord& rec);
  // slurm::JobWatchSubscriber: the jobs the cached pods name (at full polls), and their states.
  std::vector<std::int64_t> JobsToPoll(const slurm::JobPollTick& tick) override;
  // The job's label was first seen more than bridge::kLongPending ago.
  [[nodiscard]] bool LongPending(std::int64_t id, async::Clock::TimePoint now) const;
  void OnJobStates(const slurm::JobPollAnswer& answer) override;
  void OnJobPollFailed(const Error& /*error*/) override { ++stats_.errors; }
  // What the sweep knows of one live job of this bridge (the register).
  struct OwnJob {
    std::string state;  // base state, from the last read (JobStates or GET /job/{id})
    bridge::JobTag tag;
    std::optional<std::int64_t> submit_time;
  };
  using Register = std::map<std::int64_t, OwnJob>;

  // What a read of job `job` says about the register: a live job of this bridge is added (or
  // its entry refreshed), another job or an ended one is removed.
  void Learn(const slurm::JobInfo& job);
  void Forget(std::int64_t job_id);
  boost::asio::awaitable<void> Sweep();
  // One sweep: the registered jobs' states, then orphans and strays.
  boost::asio::awaitable<void> SweepOnce();
  boost::asio::awaitable<void> SweepOrphans(const Register& jobs);
  boost::asio::awaitable<void> SweepStrays(const Register& jobs);
  // The start-up job list: the register's seed and the clusterName check; listed_ once read
  // (a failed read is tried again a sweep interval later).
  boost::asio::awaitable<void> ReadAllJobsOnce();
  boost::asio::awaitable<void> CheckClusterName(const std::vector<slurm::JobInfo>& jobs);
  boost::asio::awaitable<Result<void>> ReleaseFinalizer(const kube::Pod& pod);
  // The condition DisruptionTarget=True (`reason`, `message`) on `pod`, before it is deleted;
  // a failure is logged, not returned (the deletion goes ahead).
  boost::asio::awaitable<void> MarkDisrupted(const kube::Pod& pod, const std::string& reason,
                                             const std::string& message);
  // Annotates `pod` (bridge::kKubeletNudgeAnnotation) so that its kubelet syncs it again; a
  // failure is logged, not returned.
  boost::asio::awaitable<void> NudgeKubelet(const kube::Pod& pod);
  // The jobGoneBrake is on: the plan's deletions (and those pods' finalizer releases) are held,
  // each pod told why, once.
  void HoldGoneDeletions(std::int64_t job_id, JobPlan& plan);
  // A Warning event and a log line, once per pod UID and `key`.
  void ReportOnce(const kube::Pod& pod, const std::string& key, const std::string& reason,
                  const std::string& message);

  boost::asio::any_io_executor executor_;
  kube::Client& kube_;
  slurm::Client& slurm_;
  async::Clock& clock_;
  bridge::Config config_;
  PodControllerOptions options_;
  Owner owner_;
  kube::Informer<kube::Pod> pods_;
  std::unique_ptr<kube::Informer<kube::Node>> own_nodes_;  // when none was given
  kube::Informer<kube::Node>& nodes_;  // the process's shared one, run by its owner, or own_nodes_
  kube::ClientEventSink event_sink_;
  kube::EventRecorder recorder_;
  kube::WorkQueue<std::int64_t> queue_;
  std::unordered_map<std::int64_t, JobRecord> jobs_;
  // This bridge's live jobs (tag of this clusterName and schedulerName), for the sweep: seeded
  // by the start-up list, grown by every GET /job/{id}, kept to live jobs by the sweep's state
  // reads.
  Register own_jobs_;
  slurm::SharedJobScan* startup_scan_ = nullptr;  // ShareStartupScan
  bool listed_ = false;                           // the start-up list was read
  bool listing_ = false;                          // it is being read
  std::unordered_map<std::int64_t, async::Clock::TimePoint> first_seen_;  // job id -> first label
  std::set<std::int64_t> holding_;  // jobs with a bound, running pod (at the last poll's asking)
  std::set<std::int64_t> settled_;  // ended jobs whose pods all finished and were released
  // Every job the cached pods name and that is not settled, asked at the last poll or not (a
  // steady one between its reads): the records of the others are dropped.
  std::set<std::int64_t> watched_;
  // Requeued jobs of groups waiting for the groups' new pods, until when (JobPlan::hold_until):
  // the orphan sweep leaves them alone.
  std::unordered_map<std::int64_t, WallTime> held_for_group_;
  std::unordered_map<std::string, WallTime> stray_since_;   // pod UID -> first sweep that found it
  std::set<std::pair<std::string, std::string>> reported_;  // (pod UID, what) reported once
  PodControllerStats stats_;
  bool ready_ = false;
  bool stopping_ = false;
  std::unique_ptr<slurm::JobWatch> own_watch_;  // when none was given
  slurm::JobWatch* watch_;
  async::TaskGroup tasks_;
};

}  // namespace sb::controllers
