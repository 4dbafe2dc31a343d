// SPDX-License-Identifier: Apache-2.0
//
// scheduler/slurm_jobs.h
//
// The scheduler's view of Slurm, at a cost that follows the scheduler's own jobs:
//   - the jobs it tracks, one per group (by group key), and their states from the process's job
//     watch (slurm/job_watch.h: it is a subscriber; the fresh ones polled often after a submit,
//     the others every jobPollInterval, and those pending for more than bridge::kLongPending
//     only every pendingJobPollInterval: thousands of waiting pods cost a request per 2,000
//     jobs per 2 s, not per 500 ms);
//   - the live jobs tagged by this scheduler, by group (`listed`): adoption after a restart, a
//     member re-created after its gang was bound, and a second live job of a tracked group,
//     which is cancelled unless pods are bound to it. Kept from this process's own submits and
//     adoptions, and made current on demand (List: GET /jobs/state/?job_id=... for those jobs,
//     and GET /job/{id} for the ones whose state changed; the bound ones every 5 minutes as
//     well, so that those that ended leave);
//   - Slurm's whole job list (Scan: GET /jobs/, decoded one job at a time and only this
//     scheduler's jobs kept) only where nothing else can find a job: at start-up (adoption),
//     every jobListInterval for 90 s after it (an old leader's submit still in flight), and after a
//     submit whose reply was lost (for kDuplicateWatch: the job it may have made, or a late one).
//     Never in steady state: on a busy HPC cluster that list is every user's jobs (issue #46);
//   - the pending tracked jobs' state reasons, partitions and expected starts: every
//     jobListInterval the kDetailReads of them read longest ago (GET /job/{id} each);
//   - Slurm's node names (GET /nodes/ every nodeListInterval; the Kubernetes-side exclusions
//     need them), and for nodeSharing coResident, the partitions' OverSubscribe;
//   - cancels, tried again until Slurm confirms them.
// It decides nothing about pods: a tracked job whose state, reason or expected start changed is
// reported through Hooks::changed(group), and the scheduler looks at the group again.
//
// Thread model: loop-confined (the scheduler's executor); its coroutines run in the
// scheduler's task group.
#pragma once

#include <cstdint>
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
#include "async/task_group.h"
#include "bridge/config.h"
#include "bridge/pods.h"
#include "common/error.h"
#include "scheduler/binder.h"
#include "scheduler/group_table.h"
#include "scheduler/planner.h"
#include "scheduler/stats.h"
#include "slurm/client.h"
#include "slurm/job_watch.h"
#include "slurm/shared_job_scan.h"

namespace sb::scheduler {

// A group's Slurm job as this process knows it.
struct TrackedJob {
  std::int64_t id = 0;
  std::string group;
  std::vector<std::string> uids;    // of the pods it was submitted for
  bridge::JobState state;           // PENDING, RUNNING, ...
  std::string reason;               // Slurm's state_reason
  std::int64_t expected_start = 0;  // a pending job's start by Slurm's planner (0: none)
  std::string partition;
  std::string nodes;                       // hostlist, once allocated
  std::vector<std::string> gres_detail;    // Slurm's, one entry per node of `nodes`
  std::vector<std::string> pods;           // "ns/name" of `uids`, same order
  bool refill = false;                     // adopted with pods of the group bound to it
  async::Clock::TimePoint submitted{};     // by this process (adopted jobs: the epoch)
  async::Clock::TimePoint running_seen{};  // when this process saw it RUNNING (stage trace)
  // Stage trace (debug level): the first watch event of its first pod, the submit sent.
  async::Clock::TimePoint pod_seen{};
  async::Clock::TimePoint submit_sent{};
  // This process's Bind: began, the job's nodes read (the stage trace).
  async::Clock::TimePoint bind_began{};
  async::Clock::TimePoint nodes_read{};
  // Bind() ran for it in this process: from then on pods may carry its job-id label.
  bool bind_tried = false;
  // When its reason, partition and expected start were last read (GET /job/{id}, or a list).
  async::Clock::TimePoint details_read{};
  // The description Slurm has, as far as this process knows (unset for adopted jobs).
  std::optional<slurm::JobDescription> sent;
  // The group size it was submitted for when not the spec's (a PodGroup's remainder); 0: the
  // spec's.
  int size = 0;
  // A heterogeneous job (bridge/parts.h): its part names by component offset, and once read
  // on bind, where each component runs. Empty for an ordinary job.
  std::vector<std::string> parts;
  std::vector<Allocation::Component> components;
};

// What the planner (planner.h) reads of a tracked job.
[[nodiscard]] JobView ViewOf(const TrackedJob& job);

class SlurmJobs : private slurm::JobWatchSubscriber {
 public:
  struct Hooks {
    // A tracked job's state, reason, partition or expected start changed: look at its group.
    std::function<void(const std::string& group)> changed;
    // Slurm's node names changed (the exclusions are computed anew).
    std::function<void()> nodes_changed;
  };
  // `watch`: the process's job watch; none: one of its own. `groups` gives the namespaces of
  // the groups whose duplicates are looked for; `binder` reads a running job's holders.
  SlurmJobs(boost::asio::any_io_executor executor, slurm::Client& slurm, async::Clock& clock,
            const bridge::Config& config, Stats& stats, Binder& binder, const GroupTable& groups,
            async::TaskGroup& tasks, slurm::JobWatch* watch, Hooks hooks);
  ~SlurmJobs() override;
  SlurmJobs(const SlurmJobs&) = delete;
  SlurmJobs& operator=(const SlurmJobs&) = delete;

  // Start-up: every job Slurm knows (adoption before the first submit).
  [[nodiscard]] boost::asio::awaitable<Result<void>> ReadAll();
  // ReadAll's list comes from `scan` (shared with the other components of the process; before
  // ReadAll).
  void ShareStartupScan(slurm::SharedJobScan* scan) { startup_scan_ = scan; }
  // After start-up: the polls, the periodic lists and the cancels begin.
  void Start();
  void Stop();

  // The tracked jobs, by group key.
  [[nodiscard]] const std::map<std::string, TrackedJob>& tracked() const { return jobs_; }
  // The live jobs tagged by this scheduler that it knows, by group key (see the file comment).
  [[nodiscard]] const std::map<std::string, std::vector<JobView>>& listed() const {
    return listed_;
  }
  [[nodiscard]] TrackedJob* Find(const std::string& group);
  // The group's tracked job if it is job `id`, else nullptr.
  [[nodiscard]] TrackedJob* Find(const std::string& group, std::int64_t id);
  // A job submitted (`submitted`: polled at the fresh cadence from now on) or adopted.
  void Track(TrackedJob job, bool submitted);
  // The group's job is no longer tracked, if it is job `id`.
  void Untrack(const std::string& group, std::int64_t id);

  // When the listed jobs were last made current (List or Scan asked); when Slurm's whole list
  // was last read (Scan); whether either is being read now.
  [[nodiscard]] std::optional<async::Clock::TimePoint> listed_at() const { return listed_at_; }
  [[nodiscard]] std::optional<async::Clock::TimePoint> scanned_at() const { return scanned_at_; }
  [[nodiscard]] bool listing() const { return listing_; }
  // Makes the listed jobs current now: their states, and the changed ones read in full (then
  // cancels duplicates). Costs what this scheduler's own live jobs cost.
  [[nodiscard]] boost::asio::awaitable<Result<void>> List();
  // Reads Slurm's whole job list now (then cancels duplicates): only for a lost submit reply.
  [[nodiscard]] boost::asio::awaitable<Result<void>> Scan();
  // A submit's outcome is unknown: Slurm's whole list is read every jobListInterval for
  // kDuplicateWatch (the job, if Slurm made it, may show up late).
  void Doubt();
  // Live listed jobs tagged for `group` (RUNNING ones with their holders).
  [[nodiscard]] boost::asio::awaitable<Result<std::vector<JobView>>> Candidates(
      const std::string& group, const std::string& ns);
  // A job that ended or was cancelled leaves the last job list.
  void Unlist(std::int64_t id);
  // Cancels until Slurm confirms: a failed cancel is tried again by the poll loop.
  boost::asio::awaitable<void> CancelJob(Cancel cancel);

  // Slurm's node names, as last listed; whether a list succeeded yet.
  [[nodiscard]] const std::vector<std::string>& nodes() const { return slurm_nodes_; }
  [[nodiscard]] bool nodes_known() const { return slurm_nodes_known_; }
  [[nodiscard]] boost::asio::awaitable<Result<void>> ListNodes();

  // Bind's results: binder.h's step 1 into `job` and the tracked job (false: the job does not
  // run: gone, ended, not started), a retag, a group bound (its duplicates are looked for until
  // `until`).
  bool ApplyAllocation(const std::string& group, TrackedJob& job, const Allocation& a);
  void ApplyTag(const std::string& group, std::int64_t id, const TagMembers& tag);
  void Bound(const std::string& group, std::int64_t id, const std::string& ns,
             async::Clock::TimePoint until);
  // A job allocated a node Kubernetes lacks: since when (none: not so); Slurm's nodes are read
  // again at the next poll.
  [[nodiscard]] std::optional<async::Clock::TimePoint> UnmappedSince(std::int64_t id) const;
  void MarkUnmapped(std::int64_t id);
  void ClearUnmapped(std::int64_t id) { unmapped_since_.erase(id); }

 private:
  boost::asio::awaitable<Result<void>> ScanJobs(bool startup);
  // A whole list read: listed_ anew, and (after start-up) the tracked jobs' states and reasons.
  void ApplyJobList(const std::vector<slurm::JobInfo>& jobs, async::Clock::TimePoint asked,
                    bool startup);
  // A tracked job's reason, partition, expected start (and nodes once RUNNING) as Slurm says.
  void ApplyDetails(TrackedJob& t, const slurm::JobInfo& j);
  // The view of job `id` listed for `group` (nullptr: not listed); the tracked job `t` as
  // listed.
  JobView* Listed(const std::string& group, std::int64_t id);
  void ListTracked(const TrackedJob& t);
  // Scans Slurm's jobs unless another worker is at it; false when it did not.
  boost::asio::awaitable<bool> RefreshJobs();
  // The kDetailReads pending tracked jobs read longest ago, read again (GET /job/{id}).
  boost::asio::awaitable<void> ReadDetails();
  // List, every kListedRefresh while jobs are listed but not tracked (the bound ones): those
  // that ended leave.
  boost::asio::awaitable<void> RefreshListed();
  // Cancels a second live job of a tracked group (listed_), unless pods are bound to it.
  boost::asio::awaitable<void> CancelDuplicates();
  boost::asio::awaitable<void> RetryCancels();
  // nodeSharing coResident: warns (once per change) when the partition's OverSubscribe lets two
  // jobs hold one core (bridge::CoResidentSharingRisk).
  boost::asio::awaitable<void> CheckSharing();
  // Asks Slurm about tracked jobs a list left out (GET /job/{id}): gone, or just newer.
  boost::asio::awaitable<void> ConfirmMissing();
  // Every jobListInterval, beside the polls: Slurm's whole list while scan_until_ (after
  // start-up, after a lost submit reply), else the pending jobs' details.
  boost::asio::awaitable<void> PeriodicList();
  // The lists beside the job watch's polls: the periodic job list, Slurm's nodes, and the
  // cancels Slurm has not confirmed.
  boost::asio::awaitable<void> PollSlurm();
  void ApplyState(TrackedJob& job, const bridge::JobState& state);
  // slurm::JobWatchSubscriber: the tracked jobs (the fresh ones between full polls; none at the
  // full poll after a list that carried their states), and their states.
  std::vector<std::int64_t> JobsToPoll(const slurm::JobPollTick& tick) override;
  void OnJobStates(const slurm::JobPollAnswer& answer) override;
  void OnJobPollFailed(const Error& /*error*/) override {}

  slurm::Client& slurm_;
  async::Clock& clock_;
  const bridge::Config& config_;
  Stats& stats_;
  Binder& binder_;
  const GroupTable& groups_;
  async::TaskGroup& tasks_;
  Hooks hooks_;
  std::unique_ptr<slurm::JobWatch> own_watch_;  // when none was given
  slurm::JobWatch* watch_;

  std::map<std::string, TrackedJob> jobs_;  // group key -> job
  std::set<std::int64_t> missing_;          // tracked jobs a list or poll left out, to confirm
  bool confirming_ = false;                 // ConfirmMissing runs
  // A job list or node list since the last full poll: it stands in for that poll (issue #13's
  // idle cost of one request per jobPollInterval).
  bool polled_otherwise_ = false;
  // Live jobs tagged by this scheduler, by group key; when they were last made current, and
  // when Slurm's whole list was last read.
  std::map<std::string, std::vector<JobView>> listed_;
  std::optional<async::Clock::TimePoint> listed_at_;
  std::optional<async::Clock::TimePoint> scanned_at_;
  slurm::SharedJobScan* startup_scan_ = nullptr;  // ShareStartupScan
  std::int64_t jobs_since_ = 0;  // Slurm's last_update of the last whole list (update_time)
  bool listing_ = false;
  async::Clock::TimePoint next_list_{};  // of the periodic list
  // Slurm's whole list is read every jobListInterval until then (start-up, Doubt).
  async::Clock::TimePoint scan_until_{};
  async::Clock::TimePoint next_refresh_{};  // of the listed jobs (RefreshListed)
  // The last submit: jobs are polled every kFreshPollInterval for kFreshWindow after it, since
  // Slurm usually starts a fitting job within a second of its submit.
  std::optional<async::Clock::TimePoint> last_submit_;
  std::map<std::int64_t, Cancel> to_cancel_;  // cancels Slurm has not confirmed
  // Groups bound lately: their job, and until when a second live job tagged for them (a submit
  // that reached slurmctld late, an old leader's) is looked for and cancelled (review N-12).
  struct RecentlyBound {
    std::int64_t id = 0;
    std::string namespace_;
    async::Clock::TimePoint until{};
  };
  std::map<std::string, RecentlyBound> recently_bound_;                       // group key
  std::unordered_map<std::int64_t, async::Clock::TimePoint> unmapped_since_;  // job id
  std::vector<std::string> slurm_nodes_;
  bool slurm_nodes_known_ = false;  // a Slurm node list succeeded
  std::string sharing_risk_;        // the last nodeSharing warning ("" none)
  bool nodes_refresh_ = false;      // read Slurm's nodes at the next poll
};

}  // namespace sb::scheduler
