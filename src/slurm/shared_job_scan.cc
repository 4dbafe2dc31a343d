// SPDX-License-Identifier: Apache-2.0
#include "slurm/shared_job_scan.h"

#include <utility>

#include <spdlog/spdlog.h>

namespace sb::slurm {

SharedJobScan::SharedJobScan(Client& slurm, async::Clock& clock, JobFilter broad, int users,
                             async::Clock::Duration reuse_for)
    : slurm_(slurm),
      clock_(clock),
      broad_(std::move(broad)),
      users_(users),
      reuse_for_(reuse_for),
      one_at_a_time_(clock, 1) {}

Task<JobList> SharedJobScan::Scan(JobFilter keep) {
  // One read at a time: a caller that comes while one is out waits for it and shares it.
  std::optional<async::Semaphore::Permit> permit = co_await one_at_a_time_.Acquire();
  if (!permit)
    co_return tl::unexpected(Error{.code = ErrorCode::kUnavailable, .message = "shutting down"});
  if (last_ && clock_.Now() - last_at_ > reuse_for_) last_.reset();
  std::shared_ptr<const JobList> list = last_;
  if (list) {
    ++stats_.shared;
    spdlog::info(
        "start-up job list: shared, read {} ms ago",
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - last_at_).count());
  } else {
    // (Named, not temporaries: gcc 12 destroys a temporary argument of a co_await twice.)
    const std::int64_t since = 0;
    JobFilter broad = broad_;
    Result<JobList> read = co_await slurm_.ScanJobs(since, broad);
    if (!read) co_return tl::unexpected(read.error());
    ++stats_.reads;
    list = std::make_shared<const JobList>(std::move(*read));
    last_ = list;
    last_at_ = clock_.Now();
    served_ = 0;
    spdlog::info("start-up job list: read, {} jobs kept for {} component(s)", list->jobs.size(),
                 users_);
  }
  if (++served_ >= users_) last_.reset();
  JobList out;
  out.unchanged = list->unchanged;
  out.last_update = list->last_update;
  for (const JobInfo& j : list->jobs) {
    if (!keep || keep(j)) out.jobs.push_back(j);
  }
  co_return out;
}

}  // namespace sb::slurm
