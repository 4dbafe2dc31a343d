// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/work_queue.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>

#include "async/clock.h"
#include "testing/fake_time.h"

namespace sb::kube {
namespace {

namespace asio = boost::asio;
using sb::testing::Drain;
using sb::testing::RunFor;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The outcome of one Get() spawned on the io_context.
struct Pending {
  bool done = false;
  std::optional<std::string> key;
};

template <typename Queue>
void SpawnGet(asio::io_context& io, Queue& q, Pending& p) {
  asio::co_spawn(io, q.Get(), [&p](std::exception_ptr e, std::optional<std::string> key) {
    ASSERT_FALSE(e);
    p.done = true;
    p.key = std::move(key);
  });
}

// Gets one key synchronously; fails the test when none is ready.
template <typename Queue>
std::optional<std::string> GetNow(asio::io_context& io, Queue& q) {
  Pending p;
  SpawnGet(io, q, p);
  Drain(io);
  EXPECT_TRUE(p.done) << "Get() did not complete";
  return p.key;
}

class WorkQueueTest : public ::testing::Test {
 protected:
  // Order matters: coroutine frames still parked in io_ are destroyed with it, before the queue
  // and the clock they point to.
  async::FakeClock clock_;
  WorkQueue<std::string> q_{clock_};
  asio::io_context io_;
};

TEST_F(WorkQueueTest, AddDeduplicatesQueuedKeys) {
  q_.Add("a");
  q_.Add("b");
  q_.Add("a");
  EXPECT_EQ(q_.Len(), 2u);
  EXPECT_EQ(GetNow(io_, q_), "a");
  EXPECT_EQ(GetNow(io_, q_), "b");
  EXPECT_EQ(q_.Len(), 0u);
}

TEST_F(WorkQueueTest, KeyAddedWhileProcessingIsRequeuedOnDone) {
  q_.Add("a");
  ASSERT_EQ(GetNow(io_, q_), "a");
  q_.Add("a");
  q_.Add("a");
  EXPECT_EQ(q_.Len(), 0u) << "a key in flight must not be handed out again";
  Pending second;
  SpawnGet(io_, q_, second);
  Drain(io_);
  EXPECT_FALSE(second.done);
  q_.Done("a");
  Drain(io_);
  ASSERT_TRUE(second.done);
  EXPECT_EQ(second.key, "a");
  q_.Done("a");
  EXPECT_EQ(q_.Len(), 0u) << "the two adds while processing collapse into one re-queue";
}

TEST_F(WorkQueueTest, DoneWithoutAddDoesNotRequeue) {
  q_.Add("a");
  ASSERT_EQ(GetNow(io_, q_), "a");
  q_.Done("a");
  EXPECT_EQ(q_.Len(), 0u);
}

// A queue ordered by a rank the test sets per key (keys without one rank 0).
class RankedWorkQueueTest : public ::testing::Test {
 protected:
  RankedWorkQueueTest() {
    q_.SetRank([this](const std::string& key) {
      auto it = ranks_.find(key);
      return it == ranks_.end() ? 0 : it->second;
    });
  }
  async::FakeClock clock_;
  std::map<std::string, int> ranks_;
  WorkQueue<std::string, int> q_{clock_};
  asio::io_context io_;
};

TEST_F(RankedWorkQueueTest, HandsOutTheLeastRankFirstAndEqualRanksInArrivalOrder) {
  ranks_ = {{"low", 5}, {"high", -3}, {"mid1", 1}, {"mid2", 1}};
  for (const char* k : {"low", "mid1", "none", "high", "mid2"}) q_.Add(k);
  std::vector<std::string> got;
  while (q_.Len() > 0) got.push_back(*GetNow(io_, q_));
  EXPECT_EQ(got, (std::vector<std::string>{"high", "none", "mid1", "mid2", "low"}));
}

TEST_F(RankedWorkQueueTest, AddingAQueuedKeyAgainReadsItsRankAgain) {
  ranks_ = {{"a", 1}, {"b", 2}};
  q_.Add("a");
  q_.Add("b");
  ranks_["b"] = 0;
  q_.Add("b");
  EXPECT_EQ(q_.Len(), 2u) << "still held once";
  EXPECT_EQ(GetNow(io_, q_), "b");
  EXPECT_EQ(GetNow(io_, q_), "a");
}

TEST_F(RankedWorkQueueTest, KeyRequeuedOnDoneIsRankedThen) {
  ranks_ = {{"a", 1}, {"b", 2}};
  q_.Add("a");
  ASSERT_EQ(GetNow(io_, q_), "a");
  q_.Add("a");  // dirty while processing
  q_.Add("b");
  ranks_["a"] = 3;
  q_.Done("a");
  EXPECT_EQ(GetNow(io_, q_), "b");
  EXPECT_EQ(GetNow(io_, q_), "a");
}

TEST_F(RankedWorkQueueTest, DelayedKeysAreRankedWhenTheyBecomeReady) {
  ranks_ = {{"late", -1}, {"early", 1}};
  q_.Add("early");
  q_.AddAfter("late", milliseconds(10));
  EXPECT_EQ(q_.Len(), 1u);
  clock_.Advance(milliseconds(10));
  EXPECT_EQ(GetNow(io_, q_), "late");
  EXPECT_EQ(GetNow(io_, q_), "early");
}

TEST_F(RankedWorkQueueTest, TenThousandKeysComeOutSortedByRankThenArrival) {
  constexpr int kKeys = 10000;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = "k" + std::to_string(i);
    ranks_[key] = (i * 7919) % 97;  // many keys share a rank
    q_.Add(key);
  }
  int prev_rank = -1;
  int prev_index = -1;
  for (int n = 0; n < kKeys; ++n) {
    const std::optional<std::string> key = GetNow(io_, q_);
    ASSERT_TRUE(key);
    const int rank = ranks_[*key];
    const int index = std::stoi(key->substr(1));
    ASSERT_GE(rank, prev_rank);
    if (rank == prev_rank) {
      ASSERT_GT(index, prev_index) << "equal ranks keep arrival order";
    }
    prev_rank = rank;
    prev_index = index;
    q_.Done(*key);
  }
  EXPECT_EQ(q_.Len(), 0u);
}

TEST_F(WorkQueueTest, GetSuspendsUntilAKeyIsAdded) {
  Pending p;
  SpawnGet(io_, q_, p);
  Drain(io_);
  EXPECT_FALSE(p.done);
  q_.Add("x");
  Drain(io_);
  ASSERT_TRUE(p.done);
  EXPECT_EQ(p.key, "x");
}

TEST_F(WorkQueueTest, AddAfterHandsKeysOutInReadyOrder) {
  struct Item {
    std::string key;
    milliseconds delay;
  };
  struct Case {
    std::string name;
    std::vector<Item> adds;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"reverse of insertion",
       {{"c", milliseconds(30)}, {"b", milliseconds(20)}, {"a", milliseconds(10)}},
       {"a", "b", "c"}},
      {"zero delay is immediate",
       {{"late", milliseconds(5)}, {"now", milliseconds(0)}},
       {"now", "late"}},
      {"equal delays keep insertion order",
       {{"x", milliseconds(7)}, {"y", milliseconds(7)}},
       {"x", "y"}},
      {"earlier re-add wins",
       {{"k", seconds(100)}, {"m", seconds(50)}, {"k", seconds(1)}},
       {"k", "m"}},
      {"later re-add is ignored",
       {{"k", seconds(1)}, {"m", seconds(2)}, {"k", seconds(100)}},
       {"k", "m"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    async::FakeClock clock;
    WorkQueue<std::string> q(clock);
    asio::io_context io;
    for (const Item& item : c.adds) {
      q.AddAfter(item.key, item.delay);
    }
    std::vector<std::string> got;
    for (std::size_t i = 0; i < c.want.size(); ++i) {
      Pending p;
      SpawnGet(io, q, p);
      RunFor(io, clock, seconds(200));
      ASSERT_TRUE(p.done);
      ASSERT_TRUE(p.key.has_value());
      got.push_back(*p.key);
      q.Done(*p.key);
    }
    EXPECT_EQ(got, c.want);
    EXPECT_EQ(q.Len(), 0u);
    EXPECT_EQ(q.NumWaiting(), 0u);
  }
}

TEST_F(WorkQueueTest, AddAfterWakesAParkedGetExactlyAtTheReadyTime) {
  Pending p;
  SpawnGet(io_, q_, p);
  Drain(io_);
  q_.AddAfter("a", seconds(10));
  RunFor(io_, clock_, seconds(10) - milliseconds(1));
  EXPECT_FALSE(p.done);
  EXPECT_EQ(q_.Len(), 0u);
  RunFor(io_, clock_, milliseconds(1));
  ASSERT_TRUE(p.done);
  EXPECT_EQ(p.key, "a");
}

TEST(BackoffPolicyTest, DoublesFromBaseToCap) {
  struct Case {
    std::uint32_t failures;
    std::chrono::nanoseconds want;
  };
  const BackoffPolicy policy = BackoffPolicy::Default();
  const std::vector<Case> cases = {
      {0, milliseconds(5)},     {1, milliseconds(10)},       {2, milliseconds(20)},
      {10, milliseconds(5120)}, {17, milliseconds(655360)},  {18, seconds(1000)},
      {40, seconds(1000)},      {UINT32_MAX, seconds(1000)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.failures);
    EXPECT_EQ(policy.Delay(c.failures), c.want);
  }
}

TEST_F(WorkQueueTest, AddRateLimitedBacksOffPerKeyAndForgetResets) {
  // Each round: the key is not ready 1 ms before its backoff and is ready at it.
  const std::vector<milliseconds> want = {milliseconds(5), milliseconds(10), milliseconds(20),
                                          milliseconds(40)};
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    q_.AddRateLimited("k");
    EXPECT_EQ(q_.NumRequeues("k"), i + 1);
    clock_.Advance(want[i] - milliseconds(1));
    EXPECT_EQ(q_.Len(), 0u);
    clock_.Advance(milliseconds(1));
    EXPECT_EQ(q_.Len(), 1u);
    ASSERT_EQ(GetNow(io_, q_), "k");
    q_.Done("k");
  }
  // Another key has its own count.
  q_.AddRateLimited("other");
  clock_.Advance(milliseconds(5));
  EXPECT_EQ(q_.Len(), 1u);
  ASSERT_EQ(GetNow(io_, q_), "other");
  q_.Done("other");

  q_.Forget("k");
  EXPECT_EQ(q_.NumRequeues("k"), 0u);
  q_.AddRateLimited("k");
  clock_.Advance(milliseconds(5));
  EXPECT_EQ(q_.Len(), 1u) << "after Forget the backoff starts from the base again";
}

TEST_F(WorkQueueTest, ShutDownHandsOutQueuedKeysThenReturnsNullopt) {
  q_.Add("a");
  q_.Add("b");
  q_.AddAfter("later", seconds(1));
  q_.ShutDown();
  q_.Add("c");  // ignored
  EXPECT_EQ(GetNow(io_, q_), "a");
  EXPECT_EQ(GetNow(io_, q_), "b");
  EXPECT_EQ(GetNow(io_, q_), std::nullopt);
  clock_.Advance(seconds(2));
  EXPECT_EQ(q_.Len(), 0u) << "delayed keys are dropped on shutdown";
}

TEST_F(WorkQueueTest, ShutDownWakesParkedGetters) {
  Pending p1;
  Pending p2;
  SpawnGet(io_, q_, p1);
  SpawnGet(io_, q_, p2);
  Drain(io_);
  EXPECT_FALSE(p1.done);
  q_.ShutDown();
  Drain(io_);
  EXPECT_TRUE(p1.done);
  EXPECT_TRUE(p2.done);
  EXPECT_EQ(p1.key, std::nullopt);
  EXPECT_EQ(p2.key, std::nullopt);
}

TEST_F(WorkQueueTest, ShutDownWithDrainWaitsForInFlightKeysAndTheirRequeue) {
  q_.Add("a");
  ASSERT_EQ(GetNow(io_, q_), "a");
  q_.Add("a");  // dirty: must be processed once more after Done

  bool drain_done = false;
  bool drained = false;
  asio::co_spawn(io_, q_.ShutDownWithDrain(clock_.Now() + seconds(60)),
                 [&](std::exception_ptr e, bool ok) {
                   ASSERT_FALSE(e);
                   drain_done = true;
                   drained = ok;
                 });
  Pending worker;
  SpawnGet(io_, q_, worker);
  Drain(io_);
  EXPECT_FALSE(drain_done);
  EXPECT_FALSE(worker.done) << "the re-queue of a is still due";

  q_.Done("a");
  Drain(io_);
  ASSERT_TRUE(worker.done);
  EXPECT_EQ(worker.key, "a");
  EXPECT_FALSE(drain_done);

  q_.Done("a");
  Drain(io_);
  EXPECT_TRUE(drain_done);
  EXPECT_TRUE(drained);
  EXPECT_EQ(GetNow(io_, q_), std::nullopt);
}

TEST_F(WorkQueueTest, ShutDownWithDrainGivesUpAtTheDeadline) {
  q_.Add("stuck");
  ASSERT_EQ(GetNow(io_, q_), "stuck");
  bool drain_done = false;
  bool drained = true;
  asio::co_spawn(io_, q_.ShutDownWithDrain(clock_.Now() + seconds(30)),
                 [&](std::exception_ptr e, bool ok) {
                   ASSERT_FALSE(e);
                   drain_done = true;
                   drained = ok;
                 });
  RunFor(io_, clock_, seconds(29));
  EXPECT_FALSE(drain_done);
  RunFor(io_, clock_, seconds(1));
  EXPECT_TRUE(drain_done);
  EXPECT_FALSE(drained);
}

asio::awaitable<std::optional<std::string>> GetOrTimeout(WorkQueue<std::string>& q,
                                                         async::Clock& clock,
                                                         async::Clock::Duration timeout) {
  using namespace asio::experimental::awaitable_operators;
  std::unique_ptr<async::Timer> timer = clock.MakeTimer(co_await asio::this_coro::executor);
  auto r = co_await (q.Get() || timer->WaitUntil(clock.Now() + timeout));
  if (r.index() == 0) {
    co_return std::get<0>(r);
  }
  co_return std::optional<std::string>("timeout");
}

TEST_F(WorkQueueTest, CancelledGetLeavesTheQueueUsable) {
  bool done = false;
  std::optional<std::string> got;
  asio::co_spawn(io_, GetOrTimeout(q_, clock_, seconds(1)),
                 [&](std::exception_ptr e, std::optional<std::string> v) {
                   ASSERT_FALSE(e);
                   done = true;
                   got = std::move(v);
                 });
  RunFor(io_, clock_, seconds(1));
  ASSERT_TRUE(done);
  EXPECT_EQ(got, "timeout");
  q_.Add("a");
  EXPECT_EQ(GetNow(io_, q_), "a");
}

// A reconcile for RunQueueWorker: "ok" succeeds, "fails" fails, "throws" throws.
asio::awaitable<Result<void>> Judge(std::string item, std::vector<std::string>* seen) {
  seen->push_back(item);
  if (item == "fails") co_return MakeError(ErrorCode::kUnavailable, "try later");
  if (item == "throws") throw std::runtime_error("boom");
  co_return Result<void>{};
}

TEST_F(WorkQueueTest, RunQueueWorkerRetriesFailuresAndSurvivesExceptions) {
  std::vector<std::string> seen;
  std::vector<std::string> errors;
  bool finished = false;
  for (const char* k : {"ok", "fails", "throws"}) q_.Add(k);
  asio::co_spawn(io_,
                 RunQueueWorker(
                     q_, [&seen](const std::string& item) { return Judge(item, &seen); },
                     [&errors](const std::string& item, const Error& e) {
                       errors.push_back(item + ": " + e.message);
                     }),
                 [&finished](std::exception_ptr e) {
                   EXPECT_FALSE(e);
                   finished = true;
                 });
  Drain(io_);
  EXPECT_EQ(seen, (std::vector<std::string>{"ok", "fails", "throws"}));
  EXPECT_EQ(errors,
            (std::vector<std::string>{"fails: try later", "throws: reconcile threw: boom"}));
  EXPECT_EQ(q_.NumRequeues("ok"), 0u);
  EXPECT_EQ(q_.NumRequeues("fails"), 1u);
  EXPECT_EQ(q_.NumRequeues("throws"), 1u);
  EXPECT_FALSE(finished);
  // The failed items come back after their backoff (5 ms, the default base), once each.
  RunFor(io_, clock_, milliseconds(5));
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_EQ(q_.NumRequeues("fails"), 2u);
  q_.ShutDown();
  Drain(io_);
  EXPECT_TRUE(finished);
}

// A reconcile that asks for its item again: "soon" after 1 s (once), "now" at once (once), "done"
// never.
asio::awaitable<Result<Requeue>> Ask(std::string item, std::vector<std::string>* seen) {
  seen->push_back(item);
  const auto times = std::ranges::count(*seen, item);
  if (item == "soon" && times == 1) co_return Requeue{.after = seconds(1)};
  if (item == "now" && times == 1) co_return Requeue{.after = seconds(0)};
  co_return Requeue{};
}

TEST_F(WorkQueueTest, RunQueueWorkerAppliesTheRequeueAReconcileReturns) {
  std::vector<std::string> seen;
  for (const char* k : {"soon", "now", "done"}) q_.Add(k);
  asio::co_spawn(
      io_,
      RunQueueWorker(
          q_, [&seen](const std::string& item) { return Ask(item, &seen); },
          [](const std::string& item, const Error& e) { ADD_FAILURE() << item << e.message; }),
      asio::detached);
  Drain(io_);
  // "now" came back as soon as its pass was done; "soon" waits for its second.
  EXPECT_EQ(seen, (std::vector<std::string>{"soon", "now", "done", "now"}));
  EXPECT_EQ(q_.NumRequeues("soon"), 0u);  // a requeue is no failure: no backoff counted
  RunFor(io_, clock_, milliseconds(999));
  EXPECT_EQ(seen.size(), 4u);
  RunFor(io_, clock_, milliseconds(1));
  EXPECT_EQ(seen, (std::vector<std::string>{"soon", "now", "done", "now", "soon"}));
  RunFor(io_, clock_, seconds(5));
  EXPECT_EQ(seen.size(), 5u);
  q_.ShutDown();
  Drain(io_);
}

}  // namespace
}  // namespace sb::kube
