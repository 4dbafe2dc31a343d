// SPDX-License-Identifier: Apache-2.0
#include "async/clock.h"

#include <algorithm>
#include <system_error>
#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sb::async {
namespace {

namespace asio = boost::asio;

class SteadyTimer final : public Timer {
 public:
  explicit SteadyTimer(asio::any_io_executor executor) : timer_(std::move(executor)) {}

  asio::awaitable<WaitResult> WaitUntil(Clock::TimePoint deadline) override {
    if (deadline <= std::chrono::steady_clock::now()) {
      co_return WaitResult::kFired;
    }
    woken_ = false;
    timer_.expires_at(deadline);
    auto [ec] = co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (!ec) {
      co_return WaitResult::kFired;
    }
    co_return woken_ ? WaitResult::kWoken : WaitResult::kAborted;
  }

  void Wake() override {
    woken_ = true;
    timer_.cancel();
  }

 private:
  asio::steady_timer timer_;
  bool woken_ = false;
};

}  // namespace

Clock::TimePoint SystemClock::Now() const { return std::chrono::steady_clock::now(); }

Clock::WallTime SystemClock::WallNow() const { return std::chrono::system_clock::now(); }

std::unique_ptr<Timer> SystemClock::MakeTimer(asio::any_io_executor executor) {
  return std::make_unique<SteadyTimer>(std::move(executor));
}

// A steady_timer that never expires by itself: the FakeClock cancels it when the fake time
// reaches the deadline, and the flags say why the wait ended.
class FakeClock::FakeTimer final : public Timer {
 public:
  FakeTimer(FakeClock& clock, asio::any_io_executor executor)
      : clock_(clock), timer_(std::move(executor)) {}
  ~FakeTimer() override { clock_.Unregister(this); }
  FakeTimer(const FakeTimer&) = delete;
  FakeTimer& operator=(const FakeTimer&) = delete;

  asio::awaitable<WaitResult> WaitUntil(Clock::TimePoint deadline) override {
    if (deadline <= clock_.Now()) {
      co_return WaitResult::kFired;
    }
    woken_ = false;
    fired_ = false;
    deadline_ = deadline;
    timer_.expires_at(asio::steady_timer::time_point::max());
    clock_.Register(this);
    (void)co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    clock_.Unregister(this);
    if (fired_) {
      co_return WaitResult::kFired;
    }
    co_return woken_ ? WaitResult::kWoken : WaitResult::kAborted;
  }

  void Wake() override {
    woken_ = true;
    timer_.cancel();
  }

  void Fire() {
    fired_ = true;
    timer_.cancel();
  }

  [[nodiscard]] Clock::TimePoint deadline() const { return deadline_; }

 private:
  FakeClock& clock_;
  asio::steady_timer timer_;
  Clock::TimePoint deadline_{};
  bool woken_ = false;
  bool fired_ = false;
};

FakeClock::FakeClock()
    : now_(TimePoint{} + std::chrono::hours(1000)),
      // 2026-01-01T00:00:00Z: any fixed instant; tests compare offsets from it.
      wall_start_(std::chrono::system_clock::from_time_t(1767225600)),
      start_(now_) {}

FakeClock::~FakeClock() = default;

Clock::WallTime FakeClock::WallNow() const {
  return wall_start_ +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(now_ - start_);
}

std::unique_ptr<Timer> FakeClock::MakeTimer(asio::any_io_executor executor) {
  return std::make_unique<FakeTimer>(*this, std::move(executor));
}

void FakeClock::Advance(Duration d) {
  if (d > Duration::zero()) {
    now_ += d;
  }
  FireDue();
}

std::size_t FakeClock::PendingTimers() const { return timers_.size(); }

Clock::TimePoint FakeClock::NextDeadline() const {
  TimePoint next = TimePoint::max();
  for (const FakeTimer* t : timers_) {
    next = std::min(next, t->deadline());
  }
  return next;
}

void FakeClock::Register(FakeTimer* timer) {
  if (std::find(timers_.begin(), timers_.end(), timer) == timers_.end()) {
    timers_.push_back(timer);
  }
}

void FakeClock::Unregister(FakeTimer* timer) {
  timers_.erase(std::remove(timers_.begin(), timers_.end(), timer), timers_.end());
}

void FakeClock::FireDue() {
  // Cancelling only queues the completion, so timers_ is not changed while we walk it.
  std::vector<FakeTimer*> due;
  for (FakeTimer* t : timers_) {
    if (t->deadline() <= now_) {
      due.push_back(t);
    }
  }
  for (FakeTimer* t : due) {
    Unregister(t);
    t->Fire();
  }
}

}  // namespace sb::async
