// SPDX-License-Identifier: Apache-2.0
// The bridge's jobs as the operator's commands find them: the ids pods name, their states in one
// request per batch, their records a few at a time; never Slurm's whole list.
#include "wiring/bridge_jobs.h"

#include <chrono>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bridge/names.h"
#include "testing/fake_slurm_client.h"
#include "testing/run.h"

namespace sb::wiring {
namespace {

using sb::testing::FakeSlurmClient;
using sb::testing::RunSync;

kube::Pod Pod(const std::string& label, const std::string& scheduled_message = "") {
  kube::Pod p;
  p.metadata.name = "p";
  if (!label.empty()) p.metadata.labels[std::string(bridge::kJobIdLabel)] = label;
  if (!scheduled_message.empty()) {
    p.status.conditions.push_back(
        {.type = "PodScheduled", .status = "False", .message = scheduled_message});
  }
  return p;
}

TEST(BridgeJobsTest, PodsNameTheirJobByLabelOrByTheSchedulersMessage) {
  EXPECT_EQ(WaitingJobId("waiting for Slurm job 12 in partition batch: Priority"), 12);
  EXPECT_EQ(WaitingJobId("waiting for Slurm job 12 in partition (default); expected to start "
                         "2026-12-04T20:31:05Z"),
            12);
  EXPECT_EQ(WaitingJobId("waiting for Slurm job x in partition batch"), std::nullopt);
  EXPECT_EQ(WaitingJobId("waiting for Slurm job 12"), std::nullopt);
  EXPECT_EQ(WaitingJobId("waiting for 1 more pod"), std::nullopt);

  EXPECT_EQ(NamedJobIds(Pod("7")), std::vector<std::int64_t>{7});
  EXPECT_EQ(NamedJobIds(Pod("", "waiting for Slurm job 9 in partition batch")),
            std::vector<std::int64_t>{9});
  EXPECT_EQ(NamedJobIds(Pod("9", "waiting for Slurm job 7 in partition b")),
            (std::vector<std::int64_t>{7, 9}));
  EXPECT_EQ(NamedJobIds(Pod("7", "waiting for Slurm job 7 in partition b")),
            std::vector<std::int64_t>{7});
  EXPECT_TRUE(NamedJobIds(Pod("seven")).empty());
  EXPECT_TRUE(NamedJobIds(Pod("-3")).empty());
  kube::Pod scheduled = Pod("", "waiting for Slurm job 9 in partition batch");
  scheduled.status.conditions[0].status = "True";  // an old message of a bound pod: not read
  EXPECT_TRUE(NamedJobIds(scheduled).empty());
}

// No id, no request: JobStates of no id would answer every job Slurm has.
TEST(BridgeJobsTest, StatesOfNoIdAskNothing) {
  boost::asio::io_context io;
  FakeSlurmClient slurm;
  slurm.AddJob("RUNNING");
  auto states = RunSync(io, ReadJobStates(slurm, {}));
  ASSERT_TRUE(states);
  EXPECT_TRUE(states->empty());
  EXPECT_EQ(slurm.calls("JobStates"), 0);
  auto records = RunSync(io, ReadJobRecords(slurm, {}, {}));
  ASSERT_TRUE(records);
  EXPECT_TRUE(records->empty());
  EXPECT_EQ(slurm.requests(), 0u);
}

TEST(BridgeJobsTest, StatesAndRecordsOfTheIdsOnly) {
  boost::asio::io_context io;
  FakeSlurmClient slurm;
  const std::int64_t a = slurm.AddJob("RUNNING", "tag-a", "n1");
  const std::int64_t b = slurm.AddJob("COMPLETED");
  for (int i = 0; i < 100; ++i) slurm.AddJob("PENDING");  // others' jobs
  auto states = RunSync(io, ReadJobStates(slurm, {b, a, a, 999999}));
  ASSERT_TRUE(states);
  EXPECT_EQ(*states, (std::map<std::int64_t, std::vector<std::string>>{{a, {"RUNNING"}},
                                                                       {b, {"COMPLETED"}}}))
      << "a forgotten job is absent";
  ASSERT_EQ(slurm.state_queries().size(), 1u);
  EXPECT_EQ(slurm.state_queries()[0], (std::vector<std::int64_t>{a, b, 999999}));

  RecordReadOptions trimmed;
  trimmed.trim = [](slurm::JobInfo& j) { j.nodes.clear(); };
  auto records = RunSync(io, ReadJobRecords(slurm, {999999, b, a}, trimmed));
  ASSERT_TRUE(records) << records.error().ToString();
  ASSERT_EQ(records->size(), 2u) << "a job Slurm does not know is left out";
  EXPECT_EQ((*records)[0].job_id, b) << "in the order of the ids";
  EXPECT_EQ((*records)[1].job_id, a);
  EXPECT_EQ((*records)[1].admin_comment, "tag-a");
  EXPECT_EQ((*records)[1].nodes, "") << "trimmed as it arrived";
  EXPECT_EQ(slurm.calls("GetJob"), 3);
  EXPECT_EQ(slurm.calls("ListJobs") + slurm.calls("ListJobsSince"), 0);

  // Any other failure is the answer.
  slurm.FailNext("GetJob", Error{ErrorCode::kUnavailable, "slurmrestd is down"});
  auto failed = RunSync(io, ReadJobRecords(slurm, {a, b}, {}));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kUnavailable);
}

// A Slurm client whose record reads take a while (a timer), counting how many run at once.
class SlowRecords final : public slurm::Client {
 public:
  int in_flight = 0;
  int most_in_flight = 0;
  int reads = 0;
  slurm::Task<std::vector<slurm::JobInfo>> GetJobRecords(std::int64_t id) override {
    ++reads;
    most_in_flight = std::max(most_in_flight, ++in_flight);
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor,
                                std::chrono::milliseconds(1));
    co_await t.async_wait(boost::asio::use_awaitable);
    --in_flight;
    slurm::JobInfo j;
    j.job_id = id;
    co_return std::vector<slurm::JobInfo>{j};
  }
  template <typename T>
  static Result<T> No() {
    return MakeError(ErrorCode::kUnimplemented, "not in this test");
  }
  slurm::Task<slurm::ApiVersion> Version() override { co_return No<slurm::ApiVersion>(); }
  slurm::Task<std::vector<slurm::PingResult>> Ping() override {
    co_return No<std::vector<slurm::PingResult>>();
  }
  slurm::Task<slurm::JobSubmitResult> SubmitJob(slurm::JobDescription) override {
    co_return No<slurm::JobSubmitResult>();
  }
  slurm::Task<slurm::JobInfo> GetJob(std::int64_t) override { co_return No<slurm::JobInfo>(); }
  slurm::Task<std::vector<slurm::JobInfo>> ListJobs() override {
    co_return No<std::vector<slurm::JobInfo>>();
  }
  slurm::Task<slurm::JobList> ListJobsSince(std::int64_t) override {
    co_return No<slurm::JobList>();
  }
  slurm::Task<std::vector<slurm::JobStateEntry>> JobStates(std::vector<std::int64_t>) override {
    co_return No<std::vector<slurm::JobStateEntry>>();
  }
  slurm::Task<bool> UpdateJob(std::int64_t, slurm::JobDescription) override {
    co_return No<bool>();
  }
  slurm::Task<bool> CancelJob(std::int64_t, slurm::CancelOptions) override { co_return No<bool>(); }
  slurm::Task<std::vector<slurm::NodeAllocation>> JobResources(std::int64_t) override {
    co_return No<std::vector<slurm::NodeAllocation>>();
  }
  slurm::Task<std::vector<slurm::NodeInfo>> ListNodes() override {
    co_return No<std::vector<slurm::NodeInfo>>();
  }
  slurm::Task<slurm::NodeInfo> GetNode(std::string) override { co_return No<slurm::NodeInfo>(); }
  slurm::Task<bool> UpdateNode(std::string, slurm::NodeUpdate) override { co_return No<bool>(); }
  slurm::Task<bool> CreateNode(std::string) override { co_return No<bool>(); }
  slurm::Task<bool> DeleteNode(std::string) override { co_return No<bool>(); }
  slurm::Task<std::vector<slurm::PartitionInfo>> ListPartitions() override {
    co_return No<std::vector<slurm::PartitionInfo>>();
  }
  slurm::Task<slurm::PartitionInfo> GetPartition(std::string) override {
    co_return No<slurm::PartitionInfo>();
  }
  slurm::Task<std::vector<slurm::ReservationInfo>> ListReservations() override {
    co_return No<std::vector<slurm::ReservationInfo>>();
  }
  const net::ClientStats& http_stats() const override { return stats_; }

 private:
  net::ClientStats stats_;
};

TEST(BridgeJobsTest, RecordsAreReadAFewAtATime) {
  boost::asio::io_context io;
  SlowRecords slurm;
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 1; i <= 50; ++i) ids.push_back(i);
  RecordReadOptions four;
  four.concurrency = 4;
  auto records = RunSync(io, ReadJobRecords(slurm, ids, four));
  ASSERT_TRUE(records);
  ASSERT_EQ(records->size(), 50u);
  for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ((*records)[i].job_id, ids[i]);
  EXPECT_EQ(slurm.reads, 50);
  EXPECT_EQ(slurm.most_in_flight, 4) << "at most `concurrency` reads at once, and that many";
}

}  // namespace
}  // namespace sb::wiring
