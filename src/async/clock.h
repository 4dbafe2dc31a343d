// SPDX-License-Identifier: Apache-2.0
//
// async/clock.h
//
// The project's injectable clock (the scheduler, the controllers, the Kubernetes runtime pieces:
// work queue, leader election, event recorder), and timers that wait on it inside coroutines.
// Production code uses SystemClock (std::chrono::steady_clock for deadlines,
// std::chrono::system_clock for the timestamps written into API objects); tests use FakeClock,
// whose time moves only when the test calls Advance(), so nothing in a test sleeps.
//
// It knows nothing of Kubernetes or Slurm (async/ holds the generic coroutine pieces).
//
// Thread model: loop-confined. A Clock and the Timers it makes are used on the thread that runs
// the timers' executor. A FakeClock must outlive every Timer it made.
//
// Example:
//   FakeClock clock;
//   std::unique_ptr<Timer> t = clock.MakeTimer(io.get_executor());
//   // in a coroutine:  bool fired = co_await t->WaitUntil(clock.Now() + 5s);
//   clock.Advance(5s);  // the wait completes (fired == true) when `io` runs next
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

namespace sb::async {

class Timer;

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;
  using WallTime = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;

  // Monotonic time, for deadlines and for "when did I last see this change".
  [[nodiscard]] virtual TimePoint Now() const = 0;
  // Wall-clock time, for timestamps written into API objects (renewTime, lastTimestamp).
  [[nodiscard]] virtual WallTime WallNow() const = 0;
  // A timer on this clock whose completion runs on `executor`.
  [[nodiscard]] virtual std::unique_ptr<Timer> MakeTimer(boost::asio::any_io_executor executor) = 0;
};

// How a wait on a Timer ended.
enum class WaitResult {
  kFired,    // the clock reached the deadline
  kWoken,    // Timer::Wake() was called
  kAborted,  // the awaiting coroutine was cancelled through Asio's cancellation (terminal/partial)
};

// One waiter on a clock. At most one WaitUntil may be pending at a time.
class Timer {
 public:
  virtual ~Timer() = default;
  // Suspends until the clock reaches `deadline` (TimePoint::max() waits for Wake() only).
  // Completes at once with kFired when the deadline has passed already.
  [[nodiscard]] virtual boost::asio::awaitable<WaitResult> WaitUntil(Clock::TimePoint deadline) = 0;
  // Ends a pending WaitUntil with kWoken. Does nothing when none is pending.
  virtual void Wake() = 0;
};

// Steady and system clock; timers are Asio steady_timers.
class SystemClock final : public Clock {
 public:
  [[nodiscard]] TimePoint Now() const override;
  [[nodiscard]] WallTime WallNow() const override;
  [[nodiscard]] std::unique_ptr<Timer> MakeTimer(boost::asio::any_io_executor executor) override;
};

// A clock for tests. Time starts at an arbitrary fixed point and moves only by Advance()/Set();
// then every timer whose deadline was reached completes (kFired) the next time its executor runs
// (io.poll()). WallNow() moves in step with Now().
class FakeClock final : public Clock {
 public:
  FakeClock();
  ~FakeClock() override;
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  [[nodiscard]] TimePoint Now() const override { return now_; }
  [[nodiscard]] WallTime WallNow() const override;
  [[nodiscard]] std::unique_ptr<Timer> MakeTimer(boost::asio::any_io_executor executor) override;

  // Moves time forward by `d` (negative values are ignored) and fires the timers now due.
  void Advance(Duration d);
  // Number of timers with a pending wait (for tests that want to know a coroutine is parked).
  [[nodiscard]] std::size_t PendingTimers() const;
  // The earliest pending deadline, or TimePoint::max() when none.
  [[nodiscard]] TimePoint NextDeadline() const;

 private:
  class FakeTimer;
  friend class FakeTimer;
  void Register(FakeTimer* timer);
  void Unregister(FakeTimer* timer);
  void FireDue();

  TimePoint now_;
  WallTime wall_start_;
  TimePoint start_;
  std::vector<FakeTimer*> timers_;  // non-owning; each timer unregisters itself
};

}  // namespace sb::async
