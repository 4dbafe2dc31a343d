// SPDX-License-Identifier: Apache-2.0
//
// async/semaphore.h
//
// A counting semaphore for coroutines of one loop: Acquire() waits for one of `slots` permits and
// returns it as a Permit, which gives the slot back when it is destroyed. Waiters are served in
// the order they came: a freed slot goes to the oldest waiter, never to a newcomer, so that work
// taken from a priority queue keeps its order through the semaphore. Close() wakes every waiter
// (their Acquire returns nullopt) and refuses later ones.
//
// Thread model: loop-confined, like WorkQueue. The semaphore and the clock must outlive every
// pending Acquire() and every Permit.
//
// Example:
//   Semaphore submits(clock, 16);
//   std::optional<Semaphore::Permit> permit = co_await submits.Acquire();
//   if (!permit) co_return;  // closed (shutting down) or cancelled
//   co_await Submit(...);    // at most 16 at once
#pragma once

#include <list>
#include <memory>
#include <optional>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>

#include "async/clock.h"

namespace sb::async {

class Semaphore {
 public:
  // Holds one slot until destroyed (or moved from).
  class Permit {
   public:
    explicit Permit(Semaphore* owner) : owner_(owner) {}
    Permit(Permit&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)) {}
    Permit& operator=(Permit&& o) noexcept {
      if (this != &o) {
        if (owner_ != nullptr) owner_->Release();
        owner_ = std::exchange(o.owner_, nullptr);
      }
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() {
      if (owner_ != nullptr) owner_->Release();
    }

   private:
    Semaphore* owner_;
  };

  Semaphore(Clock& clock, int slots) : clock_(clock), free_(slots > 0 ? slots : 1) {}
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  ~Semaphore() = default;

  // Waits for a slot; nullopt once Close() was called or when the awaiting coroutine is
  // cancelled.
  [[nodiscard]] boost::asio::awaitable<std::optional<Permit>> Acquire() {
    if (closed_) co_return std::nullopt;
    if (free_ > 0 && waiters_.empty()) {
      --free_;
      co_return std::optional<Permit>(Permit(this));
    }
    std::unique_ptr<Timer> timer = clock_.MakeTimer(co_await boost::asio::this_coro::executor);
    auto me = waiters_.insert(waiters_.end(), Waiter{.timer = timer.get()});
    // Leaves the line however the wait ends, also when the frame is destroyed while parked; a
    // slot granted and never taken goes to the next waiter.
    struct Guard {
      Semaphore& s;
      std::list<Waiter>::iterator me;
      bool taken = false;
      ~Guard() {
        const bool granted = me->granted;
        s.waiters_.erase(me);
        if (granted && !taken) s.Release();
      }
    } guard{*this, me};
    for (;;) {
      const WaitResult r = co_await timer->WaitUntil(Clock::TimePoint::max());
      if (me->granted) {
        guard.taken = true;
        co_return std::optional<Permit>(Permit(this));
      }
      if (r == WaitResult::kAborted || closed_) co_return std::nullopt;
    }
  }

  // Refuses every later Acquire and ends the waiting ones with nullopt. Permits held stay valid.
  void Close() {
    closed_ = true;
    for (Waiter& w : waiters_) w.timer->Wake();
  }

  // Slots free now.
  [[nodiscard]] int available() const { return free_; }
  // Coroutines waiting in Acquire().
  [[nodiscard]] std::size_t waiting() const { return waiters_.size(); }

 private:
  struct Waiter {
    Timer* timer;  // non-owning: the waiting coroutine's
    bool granted = false;
  };

  void Release() {
    if (!closed_) {
      for (Waiter& w : waiters_) {
        if (!w.granted) {
          w.granted = true;  // handed over: the slot never becomes free for a newcomer
          w.timer->Wake();
          return;
        }
      }
    }
    ++free_;
  }

  Clock& clock_;
  int free_;
  std::list<Waiter> waiters_;
  bool closed_ = false;
};

}  // namespace sb::async
