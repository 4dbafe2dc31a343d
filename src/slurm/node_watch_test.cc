// SPDX-License-Identifier: Apache-2.0
#include "slurm/node_watch.h"

#include <chrono>
#include <memory>
#include <string>
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

// A subscriber that keeps the names of each list it was handed.
class Recorder final : public NodeWatchSubscriber {
 public:
  std::vector<std::vector<std::string>> lists;
  int failures = 0;

  void OnSlurmNodes(const NodeListAnswer& answer) override {
    std::vector<std::string> names;
    for (const NodeInfo& n : answer.nodes) names.push_back(n.name);
    lists.push_back(std::move(names));
  }
  void OnNodeListFailed(const Error&) override { ++failures; }
};

NodeInfo Node(const std::string& name) {
  NodeInfo n;
  n.name = name;
  n.state = {"IDLE"};
  return n;
}

class NodeWatchTest : public ::testing::Test {
 protected:
  void SetUp() override { options_.list_interval = 10s; }
  void Start() {
    watch_ = std::make_unique<NodeWatch>(io_.get_executor(), slurm_, clock_, options_);
    boost::asio::co_spawn(io_, watch_->Run(), [this](const std::exception_ptr&) { done_ = true; });
  }
  void TearDown() override {
    if (watch_) watch_->Stop();
    sb::testing::Drain(io_);
    EXPECT_TRUE(!watch_ || done_) << "Run() did not return after Stop()";
  }
  void RunFor(async::Clock::Duration d) { sb::testing::RunFor(io_, clock_, d); }

  boost::asio::io_context io_;
  async::FakeClock clock_;
  sb::testing::FakeSlurmClient slurm_;
  NodeWatchOptions options_;
  std::unique_ptr<NodeWatch> watch_;
  bool done_ = false;
};

// `slurm-bridge all`: the node controller and the scheduler read Slurm's nodes with one
// GET /nodes/ per nodeListInterval, each handed the same list.
TEST_F(NodeWatchTest, TwoSubscribersShareOneListPerInterval) {
  slurm_.AddNode(Node("n1"));
  slurm_.AddNode(Node("n2"));
  Recorder a;
  Recorder b;
  Start();
  watch_->Subscribe(&a);
  watch_->Subscribe(&b);
  RunFor(1ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 1) << "both subscribed before the first list";
  RunFor(options_.list_interval * 3);
  EXPECT_EQ(slurm_.calls("ListNodes"), 4);
  EXPECT_EQ(watch_->stats().lists, 4u);
  ASSERT_EQ(a.lists.size(), 4u);
  ASSERT_EQ(b.lists.size(), 4u);
  EXPECT_EQ(a.lists.back(), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(b.lists.back(), a.lists.back());
}

TEST_F(NodeWatchTest, NobodySubscribedListsNothingAndALeaverGetsNoAnswer) {
  Start();
  RunFor(options_.list_interval * 3);
  EXPECT_EQ(slurm_.calls("ListNodes"), 0);
  EXPECT_EQ(clock_.PendingTimers(), 1u) << "parked until a subscriber comes";
  EXPECT_EQ(clock_.NextDeadline(), async::Clock::TimePoint::max());

  Recorder r;
  watch_->Subscribe(&r);
  RunFor(1ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 1) << "a new subscriber is served at once";
  watch_->Unsubscribe(&r);
  RunFor(options_.list_interval * 2);
  EXPECT_EQ(slurm_.calls("ListNodes"), 1);
  EXPECT_EQ(r.lists.size(), 1u);
  EXPECT_EQ(watch_->subscribers(), 0u);
}

// A late subscriber, or one that knows the list is behind, is served at once, but never within
// kMinListInterval of the last list.
TEST_F(NodeWatchTest, RequestedListsComeAtOnceButNotCloserThanTheMinimum) {
  Recorder a;
  Recorder b;
  Start();
  watch_->Subscribe(&a);
  RunFor(1ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 1);
  watch_->Subscribe(&b);
  RunFor(NodeWatch::kMinListInterval - 2ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 1);
  RunFor(2ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 2);
  EXPECT_EQ(a.lists.size(), 2u);
  EXPECT_EQ(b.lists.size(), 1u);
  RunFor(1s);
  watch_->RequestList();
  RunFor(1ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 3);
  // The interval counts from the last list.
  RunFor(options_.list_interval - 2ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 3);
  RunFor(2ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 4);
}

// After a failure: 1 s, then 2 s, ... never more than the interval; each subscriber is told.
TEST_F(NodeWatchTest, AFailedListIsReportedAndRetriedWithBackoff) {
  Recorder r;
  Start();
  slurm_.FailNext("ListNodes", Error{ErrorCode::kUnavailable, "slurmrestd down"}, 2);
  watch_->Subscribe(&r);
  RunFor(1ms);
  EXPECT_EQ(r.failures, 1);
  RunFor(1s - 2ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 1);
  RunFor(2ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 2);
  EXPECT_EQ(r.failures, 2);
  RunFor(2s);
  EXPECT_EQ(slurm_.calls("ListNodes"), 3);
  EXPECT_EQ(r.lists.size(), 1u);
  EXPECT_EQ(watch_->stats().list_errors, 2u);
  EXPECT_EQ(watch_->stats().lists, 1u);
}

TEST_F(NodeWatchTest, TheBackoffStopsAtTheInterval) {
  options_.list_interval = 3s;
  Recorder r;
  Start();
  slurm_.FailNext("ListNodes", Error{ErrorCode::kUnavailable, "slurmrestd down"}, 10);
  watch_->Subscribe(&r);
  // Tries at 0, 1 s, 3 s, then every 3 s (4 s capped).
  RunFor(12s + 1ms);
  EXPECT_EQ(slurm_.calls("ListNodes"), 6);
  EXPECT_EQ(r.failures, 6);
}

TEST_F(NodeWatchTest, StopEndsRunWhileParked) {
  Recorder r;
  Start();
  watch_->Subscribe(&r);
  RunFor(1ms);
  watch_->Stop();
  sb::testing::Drain(io_);
  EXPECT_TRUE(done_);
}

}  // namespace
}  // namespace sb::slurm
