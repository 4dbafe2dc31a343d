// SPDX-License-Identifier: Apache-2.0
#include "slurm/shared_job_scan.h"

#include <chrono>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "async/clock.h"
#include "testing/fake_slurm_client.h"
#include "testing/run.h"

namespace sb::slurm {
namespace {

using namespace std::chrono_literals;

bool Tagged(const JobInfo& j) { return !j.admin_comment.empty(); }
bool Mine(const JobInfo& j) { return j.admin_comment == "mine"; }

class SharedJobScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    slurm_.AddJob("PENDING", "mine");
    slurm_.AddJob("RUNNING", "theirs");
    slurm_.AddJob("RUNNING", "");
  }
  // Whole lists the fake answered (its ScanJobs is the client's default: ListJobsSince).
  int Lists() const { return slurm_.calls("ScanJobs") + slurm_.calls("ListJobsSince"); }
  Result<JobList> Scan(SharedJobScan& s, JobFilter keep) {
    return sb::testing::RunSync(io_, s.Scan(std::move(keep)));
  }

  boost::asio::io_context io_;
  sb::testing::FakeSlurmClient slurm_;
  async::FakeClock clock_;
};

// Two components at start-up: one read, each gets its part of it.
TEST_F(SharedJobScanTest, TwoCallersShareOneRead) {
  SharedJobScan scan(slurm_, clock_, &Tagged, /*users=*/2, 30s);
  std::optional<Result<JobList>> a, b;
  boost::asio::co_spawn(io_, scan.Scan(&Mine),
                        [&](std::exception_ptr, Result<JobList> r) { a = std::move(r); });
  boost::asio::co_spawn(io_, scan.Scan(&Tagged),
                        [&](std::exception_ptr, Result<JobList> r) { b = std::move(r); });
  io_.run();
  ASSERT_TRUE(a && *a && b && *b);
  EXPECT_EQ(Lists(), 1);
  ASSERT_EQ((*a)->jobs.size(), 1u);
  EXPECT_EQ((*a)->jobs[0].admin_comment, "mine");
  EXPECT_EQ((*b)->jobs.size(), 2u) << "the untagged job is not kept";
  EXPECT_EQ(scan.stats().reads, 1u);
  EXPECT_EQ(scan.stats().shared, 1u);
  // Both users served: the read is dropped, and a third call reads anew.
  ASSERT_TRUE(Scan(scan, &Mine));
  EXPECT_EQ(Lists(), 2);
}

// Users counted as components register: a single user's read is dropped at once.
TEST_F(SharedJobScanTest, UsersAddedOneByOne) {
  SharedJobScan scan(slurm_, clock_, &Tagged, /*users=*/0, 30s);
  scan.AddUser();
  ASSERT_TRUE(Scan(scan, &Mine));
  ASSERT_TRUE(Scan(scan, &Mine));
  EXPECT_EQ(Lists(), 2) << "one user: nothing shared";
  scan.AddUser();
  ASSERT_TRUE(Scan(scan, &Mine));
  ASSERT_TRUE(Scan(scan, &Tagged));
  EXPECT_EQ(Lists(), 3);
  EXPECT_EQ(scan.stats().shared, 1u);
}

// A read is shared only within reuse_for of its end.
TEST_F(SharedJobScanTest, AnOldReadIsNotShared) {
  SharedJobScan scan(slurm_, clock_, &Tagged, /*users=*/2, 30s);
  ASSERT_TRUE(Scan(scan, &Mine));
  clock_.Advance(31s);
  Result<JobList> later = Scan(scan, &Tagged);
  ASSERT_TRUE(later);
  EXPECT_EQ(later->jobs.size(), 2u);
  EXPECT_EQ(Lists(), 2);
  EXPECT_EQ(scan.stats().shared, 0u);
}

// A failed read is the caller's alone: the next one reads again.
TEST_F(SharedJobScanTest, AFailedReadIsNotShared) {
  SharedJobScan scan(slurm_, clock_, &Tagged, /*users=*/2, 30s);
  slurm_.FailNext("ListJobsSince", Error{.code = ErrorCode::kUnavailable, .message = "down"});
  Result<JobList> first = Scan(scan, &Mine);
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().code, ErrorCode::kUnavailable);
  Result<JobList> second = Scan(scan, &Mine);
  ASSERT_TRUE(second) << second.error().ToString();
  EXPECT_EQ(second->jobs.size(), 1u);
  EXPECT_EQ(scan.stats().reads, 1u);
}

}  // namespace
}  // namespace sb::slurm
