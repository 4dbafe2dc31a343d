// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/clock.h"

#include <chrono>
#include <exception>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "kube/runtime/test_util.h"
#include "kube/runtime/time_format.h"

namespace sb::kube {
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
  testing::Drain(io);
  EXPECT_EQ(clock.PendingTimers(), 1u);
  clock.Advance(seconds(4));
  testing::Drain(io);
  EXPECT_FALSE(got.has_value());
  clock.Advance(seconds(1));
  testing::Drain(io);
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
  testing::Drain(io);
  EXPECT_FALSE(got.has_value());
  timer->Wake();
  testing::Drain(io);
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
  testing::Drain(io);
  EXPECT_EQ(got, WaitResult::kFired);
  const auto wall = clock.WallNow();
  clock.Advance(seconds(90));
  EXPECT_EQ(clock.WallNow() - wall, seconds(90));
}

TEST(TimeFormatTest, WritesKubernetesTimeAndMicroTime) {
  struct Case {
    std::chrono::system_clock::time_point t;
    std::string time;
    std::string micro;
  };
  const auto epoch = std::chrono::system_clock::from_time_t(0);
  const std::vector<Case> cases = {
      {epoch, "1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000000Z"},
      {std::chrono::system_clock::from_time_t(1767225600) + std::chrono::microseconds(123456),
       "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123456Z"},
      {std::chrono::system_clock::from_time_t(951782399) + std::chrono::milliseconds(999),
       "2000-02-28T23:59:59Z", "2000-02-28T23:59:59.999000Z"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.time);
    EXPECT_EQ(FormatTime(c.t), c.time);
    EXPECT_EQ(FormatMicroTime(c.t), c.micro);
  }
}

}  // namespace
}  // namespace sb::kube
