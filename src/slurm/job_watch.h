// SPDX-License-Identifier: Apache-2.0
//
// slurm/job_watch.h
//
// One poll of Slurm's job states per process, shared by everything that waits on jobs.
//
// Each subscriber says, at every wake-up, which job ids it wants read (its interest set); the
// watch asks for the union in one GET /jobs/state/?job_id=... (slurm::JobStatePaths splits it
// past about 2,000 ids) and hands every subscriber the states of its own ids. So a process that
// runs the scheduler and the controllers (`slurm-bridge all`) reads Slurm once per
// jobPollInterval, not once per component.
//
// Cadence: a full poll (every subscriber's every id) every `poll_interval`. After MarkFresh (a
// job was just submitted) the watch also wakes every `fresh_interval` for `fresh_window` and asks
// the subscribers for their fresh ids only (a subscriber with none asks nothing); a fresh poll
// waits at least `fresh_spacing` times as long as the last poll took, so a slow slurmctld is not
// asked faster than it answers, and one `fresh_interval` per `fresh_ids_per_interval` ids the
// last one asked (a burst's polls find many started jobs each). No request is sent while no
// subscriber wants an id.
//
// A subscriber may have read the states some other way since the last full poll (a full job
// list carries them): it says so by wanting nothing at the next full poll.
//
// It knows nothing of Kubernetes or the bridge: ids in, states out.
//
// Thread model: loop-confined. Subscribers are called on the loop, synchronously; a subscriber
// must outlive its subscription (Unsubscribe before it is destroyed; one that unsubscribes while
// a poll is out gets no answer from it).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "async/clock.h"
#include "async/task_group.h"
#include "common/error.h"
#include "slurm/client.h"

namespace sb::slurm {

struct JobWatchOptions {
  std::chrono::milliseconds poll_interval{500};
  // Slurm usually starts a job that fits within a second of its submit (issue #13's measure),
  // and the wait until the next poll is the watcher's whole share of that stage; a fresh poll
  // of a few jobs costs slurmctld and slurmrestd about 1.4 ms of CPU together.
  std::chrono::milliseconds fresh_interval{10};
  std::chrono::seconds fresh_window{3};
  int fresh_spacing = 3;
  // A fresh poll of many jobs (a burst: hundreds submitted within the window) comes no sooner
  // than fresh_interval for every this many ids the last one asked: each pass then finds many
  // jobs started, and the polls' share of Slurm's requests per job stays small. A quiet
  // cluster's fresh polls (a few ids) keep fresh_interval. 0: off.
  int fresh_ids_per_interval = 50;
};

// One wake-up, as a subscriber sees it.
struct JobPollTick {
  async::Clock::TimePoint now;
  bool full = false;  // every id of interest is wanted; else only the fresh ones
  // The last full poll that answered (none before the first, or after one that failed).
  std::optional<async::Clock::TimePoint> previous_full;

  // Whether ids a subscriber asks only every `interval` (jobs whose state changes rarely) are
  // due now: at the first full poll in each `interval`-long period of the clock, or when the last
  // full poll failed. Every subscriber of a watch gets the same answer at the same tick, so
  // their slow ids go out in the same requests.
  [[nodiscard]] bool DueEvery(async::Clock::Duration interval) const {
    if (!full) return false;
    if (!previous_full || interval <= async::Clock::Duration::zero()) return true;
    return now.time_since_epoch() / interval != previous_full->time_since_epoch() / interval;
  }
};

// The answer to one poll, for one subscriber.
struct JobPollAnswer {
  async::Clock::TimePoint asked;  // when the request was sent (a job submitted later is unseen)
  std::vector<std::int64_t> ids;  // what this subscriber asked for
  // The first state of each id Slurm answered with a state; an id asked and absent here is gone,
  // or too new to be listed yet.
  std::unordered_map<std::int64_t, std::string> states;
};

class JobWatchSubscriber {
 public:
  virtual ~JobWatchSubscriber() = default;
  // The ids to read at this wake-up; empty asks nothing for this subscriber.
  virtual std::vector<std::int64_t> JobsToPoll(const JobPollTick& tick) = 0;
  // The states of the ids JobsToPoll gave. Work that waits (a GET to confirm a missing job) is
  // spawned by the subscriber in its own tasks: the watch never waits on a subscriber.
  virtual void OnJobStates(const JobPollAnswer& answer) = 0;
  // The poll failed: nothing is known this time (the next wake-up asks again).
  virtual void OnJobPollFailed(const Error& error) = 0;
};

struct JobWatchStats {
  std::uint64_t polls = 0;        // state requests that answered (one per wake-up that asked)
  std::uint64_t fresh_polls = 0;  // of which were fresh polls
  std::uint64_t poll_errors = 0;
  std::uint64_t ids_asked = 0;  // summed over the polls
};

class JobWatch {
 public:
  JobWatch(boost::asio::any_io_executor executor, Client& slurm, async::Clock& clock,
           JobWatchOptions options);
  JobWatch(const JobWatch&) = delete;
  JobWatch& operator=(const JobWatch&) = delete;

  void Subscribe(JobWatchSubscriber* subscriber);
  void Unsubscribe(JobWatchSubscriber* subscriber);
  // A job was submitted now: fresh polls for fresh_window.
  void MarkFresh() { last_fresh_ = clock_.Now(); }

  // Polls until Stop().
  [[nodiscard]] boost::asio::awaitable<void> Run();
  void Stop() { tasks_.Stop(); }
  [[nodiscard]] std::size_t subscribers() const { return subscribers_.size(); }
  [[nodiscard]] const JobWatchStats& stats() const { return stats_; }

 private:
  // False when no subscriber wanted an id (nothing was sent).
  boost::asio::awaitable<bool> Poll(bool full);
  // The least time between fresh polls, from the last poll's duration and ids.
  [[nodiscard]] async::Clock::Duration FreshSpacing() const;

  Client& slurm_;
  async::Clock& clock_;
  JobWatchOptions options_;
  std::vector<JobWatchSubscriber*> subscribers_;
  std::optional<async::Clock::TimePoint> last_fresh_;
  std::optional<async::Clock::TimePoint> previous_full_;  // JobPollTick::previous_full
  async::Clock::Duration last_poll_took_{};
  std::size_t last_poll_ids_ = 0;
  JobWatchStats stats_;
  async::TaskGroup tasks_;
};

}  // namespace sb::slurm
