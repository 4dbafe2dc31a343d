// SPDX-License-Identifier: Apache-2.0
#include "slurm/job_watch.h"

#include <chrono>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "testing/fake_slurm_client.h"
#include "testing/fake_time.h"

namespace sb::slurm {
namespace {

using namespace std::chrono_literals;

// A subscriber that wants fixed ids at full polls and `fresh` ids at the others.
class Recorder final : public JobWatchSubscriber {
 public:
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> fresh;
  // Asked only when the tick says they are due every `slow_every` (jobs whose state rarely
  // changes: long-pending, or running with every pod bound).
  std::vector<std::int64_t> slow;
  async::Clock::Duration slow_every{};
  bool skip_next_full = false;
  std::vector<JobPollAnswer> answers;
  int failures = 0;

  std::vector<std::int64_t> JobsToPoll(const JobPollTick& tick) override {
    if (!tick.full) return fresh;
    if (skip_next_full) {
      skip_next_full = false;
      return {};
    }
    std::vector<std::int64_t> out = ids;
    if (!slow.empty() && tick.DueEvery(slow_every)) out.insert(out.end(), slow.begin(), slow.end());
    return out;
  }
  void OnJobStates(const JobPollAnswer& answer) override { answers.push_back(answer); }
  void OnJobPollFailed(const Error&) override { ++failures; }
};

class JobWatchTest : public ::testing::Test {
 protected:
  void Start() {
    watch_ = std::make_unique<JobWatch>(io_.get_executor(), slurm_, clock_, options_);
    boost::asio::co_spawn(io_, watch_->Run(), boost::asio::detached);
  }
  void TearDown() override {
    if (watch_) watch_->Stop();
    sb::testing::Drain(io_);
  }
  void RunFor(async::Clock::Duration d) { sb::testing::RunFor(io_, clock_, d); }

  boost::asio::io_context io_;
  async::FakeClock clock_;
  sb::testing::FakeSlurmClient slurm_;
  JobWatchOptions options_;
  std::unique_ptr<JobWatch> watch_;
};

// Issue #24: the scheduler's and the pod controller's jobs are read in one request per
// jobPollInterval, each told only of its own ids.
TEST_F(JobWatchTest, TwoSubscribersShareOneRequestPerInterval) {
  const std::int64_t a = slurm_.AddJob("PENDING");
  const std::int64_t b = slurm_.AddJob("RUNNING");
  const std::int64_t gone = 999;
  Recorder sched;
  Recorder pods;
  sched.ids = {a, gone};
  pods.ids = {b};
  Start();
  watch_->Subscribe(&sched);
  watch_->Subscribe(&pods);
  RunFor(options_.poll_interval * 4 + 1ms);
  EXPECT_EQ(slurm_.calls("JobStates"), 4);
  EXPECT_EQ(watch_->stats().polls, 4u);
  for (const auto& q : slurm_.state_queries()) {
    EXPECT_EQ(q, (std::vector<std::int64_t>{a, b, gone}));
  }
  ASSERT_EQ(sched.answers.size(), 4u);
  ASSERT_EQ(pods.answers.size(), 4u);
  EXPECT_EQ(sched.answers.back().ids, (std::vector<std::int64_t>{a, gone}));
  EXPECT_EQ(sched.answers.back().states.size(), 1u) << "the gone job has no state";
  EXPECT_EQ(sched.answers.back().states.at(a), "PENDING");
  EXPECT_EQ(pods.answers.back().states.size(), 1u) << "only its own ids";
  EXPECT_EQ(pods.answers.back().states.at(b), "RUNNING");
}

TEST_F(JobWatchTest, NothingWantedAsksNothingAndALeaverGetsNoAnswer) {
  Recorder idle;
  Start();
  watch_->Subscribe(&idle);
  RunFor(options_.poll_interval * 3 + 1ms);
  EXPECT_EQ(slurm_.calls("JobStates"), 0);

  Recorder r;
  r.ids = {slurm_.AddJob("PENDING")};
  watch_->Subscribe(&r);
  RunFor(options_.poll_interval);
  EXPECT_EQ(slurm_.calls("JobStates"), 1);
  r.skip_next_full = true;  // read some other way (a job list): the next full poll is skipped
  RunFor(options_.poll_interval);
  EXPECT_EQ(slurm_.calls("JobStates"), 1);
  watch_->Unsubscribe(&r);
  RunFor(options_.poll_interval * 2);
  EXPECT_EQ(slurm_.calls("JobStates"), 1);
  EXPECT_EQ(r.answers.size(), 1u);
  EXPECT_EQ(watch_->subscribers(), 1u);
}

TEST_F(JobWatchTest, FreshPollsFollowASubmitForTheFreshWindowOnly) {
  Recorder r;
  const std::int64_t old_job = slurm_.AddJob("PENDING");
  const std::int64_t new_job = slurm_.AddJob("PENDING");
  r.ids = {old_job, new_job};
  r.fresh = {new_job};
  Start();
  watch_->Subscribe(&r);
  watch_->MarkFresh();
  RunFor(100ms);
  // Every 10 ms for the new job only (nothing took time: no spacing).
  EXPECT_GE(slurm_.calls("JobStates"), 9);
  EXPECT_EQ(watch_->stats().fresh_polls, static_cast<std::uint64_t>(slurm_.calls("JobStates")));
  for (const auto& q : slurm_.state_queries()) EXPECT_EQ(q, std::vector<std::int64_t>{new_job});
  RunFor(options_.fresh_window);
  const int after_window = slurm_.calls("JobStates");
  RunFor(options_.poll_interval * 4);
  EXPECT_EQ(slurm_.calls("JobStates") - after_window, 4) << "only the full polls after the window";
  EXPECT_EQ(slurm_.state_queries().back(), (std::vector<std::int64_t>{old_job, new_job}));
}

TEST_F(JobWatchTest, AFailedPollIsReportedToEachAskerAndTheNextAsksAgain) {
  Recorder r;
  r.ids = {slurm_.AddJob("PENDING")};
  Start();
  watch_->Subscribe(&r);
  slurm_.FailNext("JobStates", Error{ErrorCode::kUnavailable, "slurmrestd down"});
  RunFor(options_.poll_interval * 2 + 1ms);
  EXPECT_EQ(r.failures, 1);
  EXPECT_EQ(r.answers.size(), 1u);
  EXPECT_EQ(watch_->stats().poll_errors, 1u);
}

// Issue #46: ids two subscribers ask only every 2 s (thousands of long-pending jobs) go out
// together, at the first full poll of each 2 s period, never at the polls between; a failed poll
// makes them due again at the next one.
TEST_F(JobWatchTest, SlowIdsOfEverySubscriberAreDueAtTheSamePolls) {
  const std::int64_t often = slurm_.AddJob("RUNNING");
  const std::int64_t waiting = slurm_.AddJob("PENDING");
  const std::int64_t waiting_too = slurm_.AddJob("PENDING");
  Recorder sched;
  Recorder pods;
  sched.ids = {often};
  sched.slow = {waiting};
  sched.slow_every = 2s;
  pods.slow = {waiting, waiting_too};
  pods.slow_every = 2s;
  clock_.Advance(250ms);  // polls at 0.75 s, 1.25 s, ...: never on a period's edge
  Start();
  watch_->Subscribe(&sched);
  watch_->Subscribe(&pods);
  RunFor(10s - 100ms);  // polls at 0.75 s, 1.25 s, ..., 9.75 s
  const std::vector<std::vector<std::int64_t>>& q = slurm_.state_queries();
  ASSERT_EQ(q.size(), 19u) << "one request per jobPollInterval: the often-asked job";
  int with_slow = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    const bool slow = q[i].size() == 3;
    if (slow) {
      ++with_slow;
      EXPECT_EQ(q[i], (std::vector<std::int64_t>{often, waiting, waiting_too})) << i;
    } else {
      EXPECT_EQ(q[i], (std::vector<std::int64_t>{often})) << i;
    }
  }
  // The first poll (no poll before it), then one per 2 s period: 0.75 s, 2.25, 4.25, 6.25, 8.25.
  EXPECT_EQ(with_slow, 5);
  EXPECT_EQ(pods.answers.size(), 5u) << "asked nothing at the other polls";

  // 10.25 s: the first poll of its period fails; 10.75 s asks them again.
  slurm_.FailNext("JobStates", Error{ErrorCode::kUnavailable, "slurmrestd down"});
  RunFor(1s);
  ASSERT_EQ(q.size(), 21u);
  EXPECT_EQ(q[19].size(), 3u);
  EXPECT_EQ(q[20].size(), 3u) << "due again after the failed poll";
}

// Issue #31: a burst's fresh polls ask hundreds of ids; they come once per fresh_interval per
// fresh_ids_per_interval ids, so each finds many started jobs (a quiet cluster's few ids keep
// the 10 ms cadence: the test above).
TEST_F(JobWatchTest, FreshPollsOfManyIdsAreSpacedByTheirCount) {
  Recorder r;
  for (int i = 0; i < 500; ++i) r.fresh.push_back(slurm_.AddJob("PENDING"));
  Start();
  watch_->Subscribe(&r);
  watch_->MarkFresh();
  RunFor(1s);
  // 500 ids: one poll per 10 x 10 ms (the first at the first wake-up).
  EXPECT_GE(slurm_.calls("JobStates"), 9);
  EXPECT_LE(slurm_.calls("JobStates"), 11);
  r.fresh.resize(20);
  RunFor(200ms);
  const int before = slurm_.calls("JobStates");
  RunFor(100ms);
  EXPECT_GE(slurm_.calls("JobStates") - before, 9) << "20 ids: every 10 ms again";
}

}  // namespace
}  // namespace sb::slurm
