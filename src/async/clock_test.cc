// SPDX-License-Identifier: Apache-2.0
#include "async/clock.h"

#include <chrono>
#include <exception>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "testing/fake_time.h"

namespace sb::async {
namespace {

namespace asio = boost::asio;
using std::chrono::seconds;

asio::awaitable<WaitResult> WaitOn(Timer& timer, Clock::TimePoint deadline) {
  co_return co_await timer.WaitUntil(deadline);
}

TEST(FakeClockTest, TimerFiresOnlyWhenTimeReachesTheDeadline) {
  FakeClock clock;
  asio::io_context io;
  std::unique_ptr<Timer> timer = clock.MakeTimer(io.get_executor());
  std::optional<WaitResult> got;
  asio::co_spawn(io, WaitOn(*timer, clock.Now() + seconds(5)),
                 [&](std::exception_ptr e, WaitResult r) {
                   ASSERT_FALSE(e);
                   got = r;
                 });
  sb::testing::Drain(io);
  EXPECT_EQ(clock.PendingTimers(), 1u);
  clock.Advance(seconds(4));
  sb::testing::Drain(io);
  EXPECT_FALSE(got.has_value());
  clock.Advance(seconds(1));
  sb::testing::Drain(io);
  EXPECT_EQ(got, WaitResult::kFired);
  EXPECT_EQ(clock.PendingTimers(), 0u);
}

TEST(FakeClockTest, WakeEndsTheWaitEarly) {
  FakeClock clock;
  asio::io_context io;
  std::unique_ptr<Timer> timer = clock.MakeTimer(io.get_executor());
  std::optional<WaitResult> got;
  asio::co_spawn(io, WaitOn(*timer, Clock::TimePoint::max()),
                 [&](std::exception_ptr e, WaitResult r) {
                   ASSERT_FALSE(e);
                   got = r;
                 });
  sb::testing::Drain(io);
  EXPECT_FALSE(got.has_value());
  timer->Wake();
  sb::testing::Drain(io);
  EXPECT_EQ(got, WaitResult::kWoken);
}

TEST(FakeClockTest, PastDeadlineCompletesAtOnceAndWallTimeMovesWithNow) {
  FakeClock clock;
  asio::io_context io;
  std::unique_ptr<Timer> timer = clock.MakeTimer(io.get_executor());
  std::optional<WaitResult> got;
  asio::co_spawn(io, WaitOn(*timer, clock.Now()), [&](std::exception_ptr e, WaitResult r) {
    ASSERT_FALSE(e);
    got = r;
  });
  sb::testing::Drain(io);
  EXPECT_EQ(got, WaitResult::kFired);
  const auto wall = clock.WallNow();
  clock.Advance(seconds(90));
  EXPECT_EQ(clock.WallNow() - wall, seconds(90));
}

}  // namespace
}  // namespace sb::async
