// SPDX-License-Identifier: Apache-2.0
//
// slurm/shared_job_scan.h
//
// One read of Slurm's whole job list, shared by the components of one process that each read it
// at start-up (`slurm-bridge all`: the scheduler and the controllers). On a busy cluster that
// list is tens of thousands of jobs and slurmrestd builds it whole in its memory (GBs); two
// components reading it at the same moment doubled both (issue #46).
//
// Each Scan(keep) gets the jobs of the list that `keep` accepts. The first call reads the list
// (Client::ScanJobs from update_time 0, keeping what `broad` accepts); a call that comes while
// that read is out waits for it, and one that comes within `reuse_for` of its end is served from
// it. After `users` calls (AddUser: one per component that scans) have been served by one read,
// it is dropped (its jobs are not held for
// the process's life); a later call, or one after reuse_for, reads anew. A failed read is not
// shared: the next caller reads itself.
//
// `keep` must accept only jobs `broad` accepts (the caller's jobs are a part of the shared ones).
// A list reused within reuse_for lacks the jobs made since it was read: a caller that needs
// those learns them otherwise (the bridge's components read their own jobs by id).
//
// It knows nothing of Kubernetes or the bridge.
//
// Thread model: loop-confined; the client and the clock outlive it.
//
// Example:
//   SharedJobScan scan(client, clock, &HasTag, /*users=*/2, std::chrono::seconds(30));
//   (or users 0, and AddUser() by each component that will scan)
//   Result<JobList> mine = co_await scan.Scan(&IsMine);      // reads
//   Result<JobList> tagged = co_await scan.Scan(&HasTag);   // the same read, filtered
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "async/clock.h"
#include "async/semaphore.h"
#include "slurm/client.h"

namespace sb::slurm {

struct SharedJobScanStats {
  std::uint64_t reads = 0;   // whole lists read
  std::uint64_t shared = 0;  // calls served from another call's read
};

class SharedJobScan {
 public:
  SharedJobScan(Client& slurm, async::Clock& clock, JobFilter broad, int users,
                async::Clock::Duration reuse_for);
  SharedJobScan(const SharedJobScan&) = delete;
  SharedJobScan& operator=(const SharedJobScan&) = delete;

  [[nodiscard]] Task<JobList> Scan(JobFilter keep);
  void AddUser() { ++users_; }
  [[nodiscard]] const SharedJobScanStats& stats() const { return stats_; }

 private:
  Client& slurm_;
  async::Clock& clock_;
  JobFilter broad_;
  int users_;
  async::Clock::Duration reuse_for_;
  async::Semaphore one_at_a_time_;
  std::shared_ptr<const JobList> last_;  // the last read while it may be shared
  async::Clock::TimePoint last_at_{};
  int served_ = 0;  // calls served by last_
  SharedJobScanStats stats_;
};

}  // namespace sb::slurm
