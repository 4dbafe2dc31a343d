// SPDX-License-Identifier: Apache-2.0
//
// kube/runtime/work_queue.h
//
// A rate-limited work queue of object keys with client-go's semantics (util/workqueue):
//   - a key is held at most once: adding a queued key again does nothing (dedup);
//   - a key being processed (handed out by Get, not yet Done) is not handed out again; adding it
//     meanwhile marks it dirty, and Done() puts it back in the queue, so a reconciler never runs
//     twice at once for one key and never misses a change;
//   - AddAfter(key, delay) adds the key once `delay` has passed on the injected clock; a key
//     already waiting keeps the earlier of its two ready times (client-go's delaying queue);
//   - AddRateLimited(key) is AddAfter with a per-key exponential backoff: base * 2^failures,
//     capped (client-go's ItemExponentialFailureRateLimiter; default 5 ms doubling to 1000 s).
//     Forget(key) resets the key's failure count; NumRequeues(key) reads it;
//   - ShutDown() stops accepting keys and drops keys still waiting for their delay; Get() keeps
//     handing out keys already queued and returns nullopt once nothing is queued and no key in
//     flight is due to be re-queued. ShutDownWithDrain() also waits for keys in flight to be
//     Done (client-go's ShutDownWithDrain), bounded by a deadline.
//
// There is no background goroutine as in client-go: keys whose delay has passed are moved to the
// queue whenever Get(), Len() or an Add runs, and a parked Get() wakes at the earliest ready time.
//
// Thread model: loop-confined (call everything from the thread that runs the io_context on which
// Get() is awaited). No mutexes. The queue and the clock must outlive every pending Get().
// `Key` must be copyable, equality-comparable and hashable with std::hash. `Rank` (optional) orders
// the ready keys: SetRank(fn) makes Get() hand out the key of least fn(key) first, ties in the
// order they became ready. Every operation is O(log n) in the number of keys.
//
// Example:
//   WorkQueue<std::string> q(clock);
//   q.Add("ns/pod");
//   // a worker (RunQueueWorker below is this loop):
//   while (std::optional<std::string> key = co_await q.Get()) {
//     Result<void> r = co_await Reconcile(*key);
//     if (r) { q.Forget(*key); } else { q.AddRateLimited(*key); }
//     q.Done(*key);
//   }
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>

#include "async/clock.h"
#include "common/error.h"

namespace sb::kube {

// Per-key exponential backoff: delay(n) = base * 2^n for the n-th consecutive failure (n from 0),
// never more than `cap`.
struct BackoffPolicy {
  std::chrono::nanoseconds base = std::chrono::milliseconds(5);
  std::chrono::nanoseconds cap = std::chrono::seconds(1000);

  // client-go's DefaultItemBasedRateLimiter values (5 ms, 1000 s).
  [[nodiscard]] static BackoffPolicy Default() { return {}; }

  // The delay after `failures` earlier failures.
  [[nodiscard]] std::chrono::nanoseconds Delay(std::uint32_t failures) const {
    if (base <= std::chrono::nanoseconds::zero()) {
      return std::chrono::nanoseconds::zero();
    }
    std::chrono::nanoseconds d = base;
    for (std::uint32_t i = 0; i < failures && d < cap; ++i) {
      // Doubling stops at the cap long before it can overflow (1000 s < 2^63 ns / 2).
      d = d > cap / 2 ? cap : d * 2;
    }
    return std::min(d, cap);
  }
};

template <typename Key, typename Rank = std::monostate>
class WorkQueue {
 public:
  explicit WorkQueue(async::Clock& clock, BackoffPolicy backoff = BackoffPolicy::Default())
      : clock_(clock), backoff_(backoff) {}
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;
  ~WorkQueue() = default;

  // Orders the ready keys: Get() hands out the key of least `rank(key)` instead of the oldest
  // (ties keep the order in which keys became ready). The rank is read when a key is queued and
  // again when a queued key is added again, so a caller that changes a key's rank adds it again.
  void SetRank(std::function<Rank(const Key&)> rank) { rank_ = std::move(rank); }

  // Adds `key` unless it is queued already (then its rank is read again); if it is being
  // processed, marks it to be re-queued on Done(). Ignored after ShutDown().
  void Add(const Key& key) {
    if (shutting_down_) {
      return;
    }
    if (dirty_.contains(key)) {
      if (rank_) {
        Rerank(key);
      }
      return;
    }
    dirty_.insert(key);
    if (processing_.contains(key)) {
      return;
    }
    Push(key);
    WakeAll();
  }

  // Adds `key` once `delay` has passed. A zero or negative delay adds at once. If `key` waits
  // already, the earlier ready time wins. Ignored after ShutDown().
  void AddAfter(const Key& key, async::Clock::Duration delay) {
    if (shutting_down_) {
      return;
    }
    if (delay <= async::Clock::Duration::zero()) {
      Add(key);
      return;
    }
    const async::Clock::TimePoint ready = clock_.Now() + delay;
    auto found = waiting_by_key_.find(key);
    if (found != waiting_by_key_.end()) {
      if (found->second->first.first <= ready) {
        return;
      }
      waiting_.erase(found->second);
      waiting_by_key_.erase(found);
    }
    auto it = waiting_.emplace(std::make_pair(ready, next_seq_++), key).first;
    waiting_by_key_.emplace(key, it);
    WakeAll();  // a parked Get() may need to wake earlier now
  }

  // Adds `key` after its backoff delay and counts one more failure for it.
  void AddRateLimited(const Key& key) {
    std::uint32_t& failures = failures_[key];
    const std::chrono::nanoseconds delay = backoff_.Delay(failures);
    if (failures < UINT32_MAX) {
      ++failures;
    }
    AddAfter(key, std::chrono::duration_cast<async::Clock::Duration>(delay));
  }

  // Forgets the failures of `key` (its next AddRateLimited waits `base` again). Does not remove
  // the key from the queue.
  void Forget(const Key& key) { failures_.erase(key); }

  // Failures counted for `key` since its last Forget().
  [[nodiscard]] std::uint32_t NumRequeues(const Key& key) const {
    auto it = failures_.find(key);
    return it == failures_.end() ? 0 : it->second;
  }

  // Number of keys ready to be handed out (keys still waiting for their delay are not counted).
  [[nodiscard]] std::size_t Len() {
    PromoteDue();
    return ready_.size();
  }

  // Keys waiting for their AddAfter/AddRateLimited delay.
  [[nodiscard]] std::size_t NumWaiting() const { return waiting_.size(); }

  // Waits for the next ready key, marks it as being processed and returns it. Returns nullopt
  // once ShutDown() was called and nothing is left to hand out, or when the awaiting coroutine is
  // cancelled through Asio's cancellation. Several coroutines may wait at once.
  [[nodiscard]] boost::asio::awaitable<std::optional<Key>> Get() {
    std::unique_ptr<async::Timer> timer;
    for (;;) {
      PromoteDue();
      if (!ready_.empty()) {
        auto node = ready_.extract(ready_.begin());
        Key key = std::move(node.value().key);
        ready_by_key_.erase(key);
        dirty_.erase(key);
        processing_.insert(key);
        co_return std::optional<Key>(std::move(key));
      }
      if (shutting_down_ && dirty_.empty()) {
        co_return std::nullopt;
      }
      if (!timer) {
        timer = clock_.MakeTimer(co_await boost::asio::this_coro::executor);
      }
      const async::Clock::TimePoint deadline =
          waiting_.empty() ? async::Clock::TimePoint::max() : waiting_.begin()->first.first;
      const async::WaitResult r = co_await Park(*timer, deadline);
      if (r == async::WaitResult::kAborted) {
        co_return std::nullopt;
      }
    }
  }

  // Marks `key` as processed. If it was added while being processed, it is queued again.
  void Done(const Key& key) {
    processing_.erase(key);
    if (dirty_.contains(key) && !ready_by_key_.contains(key)) {
      Push(key);
    }
    WakeAll();
  }

  // Stops accepting keys, drops keys waiting for a delay and wakes every Get(). Idempotent.
  void ShutDown() {
    shutting_down_ = true;
    waiting_.clear();
    waiting_by_key_.clear();
    WakeAll();
  }

  // ShutDown(), then waits until every key handed out was Done and nothing is queued, or until
  // `deadline` on the clock. Returns true when drained, false on the deadline (or cancellation).
  [[nodiscard]] boost::asio::awaitable<bool> ShutDownWithDrain(async::Clock::TimePoint deadline) {
    ShutDown();
    std::unique_ptr<async::Timer> timer =
        clock_.MakeTimer(co_await boost::asio::this_coro::executor);
    while (!processing_.empty() || !dirty_.empty()) {
      const async::WaitResult r = co_await Park(*timer, deadline);
      if (r != async::WaitResult::kWoken) {
        co_return processing_.empty() && dirty_.empty();
      }
    }
    co_return true;
  }

  [[nodiscard]] bool ShuttingDown() const { return shutting_down_; }
  // Keys handed out by Get() and not yet Done().
  [[nodiscard]] std::size_t NumProcessing() const { return processing_.size(); }

 private:
  using WaitingMap = std::map<std::pair<async::Clock::TimePoint, std::uint64_t>, Key>;
  // A ready key: handed out by (rank, seq), the least first.
  struct Ready {
    Rank rank;
    std::uint64_t seq;
    Key key;
    bool operator<(const Ready& o) const {
      if (rank < o.rank) return true;
      if (o.rank < rank) return false;
      return seq < o.seq;
    }
  };
  using ReadySet = std::set<Ready>;

  void Push(const Key& key) {
    auto it = ready_.insert(Ready{rank_ ? rank_(key) : Rank{}, next_seq_++, key}).first;
    ready_by_key_.insert_or_assign(key, it);
  }

  // A queued key whose rank may have changed moves to its new place (keeping its turn among
  // keys of equal rank).
  void Rerank(const Key& key) {
    auto found = ready_by_key_.find(key);
    if (found == ready_by_key_.end()) {
      return;  // being processed: ranked when Done() queues it again
    }
    Rank rank = rank_(key);
    const Ready& cur = *found->second;
    if (!(rank < cur.rank) && !(cur.rank < rank)) {
      return;
    }
    auto node = ready_.extract(found->second);
    node.value().rank = std::move(rank);
    found->second = ready_.insert(std::move(node)).position;
  }

  // Waits on `timer` until `deadline` or until the queue changes (WakeAll). The guard keeps
  // getters_ free of dangling timers even when the coroutine frame is destroyed while parked.
  boost::asio::awaitable<async::WaitResult> Park(async::Timer& timer,
                                                 async::Clock::TimePoint deadline) {
    struct Guard {
      std::vector<async::Timer*>& getters;
      async::Timer* timer;
      ~Guard() { std::erase(getters, timer); }
    };
    getters_.push_back(&timer);
    Guard guard{getters_, &timer};
    co_return co_await timer.WaitUntil(deadline);
  }

  void PromoteDue() {
    const async::Clock::TimePoint now = clock_.Now();
    while (!waiting_.empty() && waiting_.begin()->first.first <= now) {
      auto it = waiting_.begin();
      Key key = std::move(it->second);
      waiting_by_key_.erase(key);
      waiting_.erase(it);
      Add(key);
    }
  }

  void WakeAll() {
    // Wake() only queues completions; getters_ is not changed while we walk it.
    for (async::Timer* t : getters_) {
      t->Wake();
    }
  }

  async::Clock& clock_;
  BackoffPolicy backoff_;
  ReadySet ready_;  // ready keys in the order they are handed out; each also in dirty_
  std::unordered_map<Key, typename ReadySet::iterator> ready_by_key_;
  std::unordered_set<Key> dirty_;       // keys that need processing (queued or re-queue on Done)
  std::unordered_set<Key> processing_;  // keys handed out and not yet Done
  WaitingMap waiting_;                  // delayed keys by (ready time, insertion order)
  std::unordered_map<Key, typename WaitingMap::iterator> waiting_by_key_;
  std::unordered_map<Key, std::uint32_t> failures_;
  std::vector<async::Timer*> getters_;  // non-owning: timers of parked Get()/ShutDownWithDrain()
  std::uint64_t next_seq_ = 0;
  bool shutting_down_ = false;
  std::function<Rank(const Key&)> rank_;
};

// What a reconcile may return beside success: look at the item again after `after` (zero: as
// soon as this pass is done; a key is never handed to two workers at once); none: not until
// something queues it again. controller-runtime's Result{RequeueAfter}.
struct Requeue {
  std::optional<async::Clock::Duration> after;
};

// One worker of a controller: takes items from `queue` until it shuts down and hands each to
// `reconcile` (a callable returning awaitable<Result<void>> or awaitable<Result<Requeue>>).
// Success forgets the item's backoff and applies the Requeue; an error, or an exception (turned
// into kInternal, so a bug in one item never stops the worker), goes to `on_error(item, error)`
// and the item comes back rate-limited.
template <typename Key, typename Rank, typename ReconcileFn, typename OnErrorFn>
boost::asio::awaitable<void> RunQueueWorker(WorkQueue<Key, Rank>& queue, ReconcileFn reconcile,
                                            OnErrorFn on_error) {
  using Answer = typename std::invoke_result_t<ReconcileFn&, const Key&>::value_type;
  static_assert(std::is_same_v<Answer, Result<void>> || std::is_same_v<Answer, Result<Requeue>>);
  while (std::optional<Key> item = co_await queue.Get()) {
    Answer r;
    try {
      r = co_await reconcile(*item);
    } catch (const std::exception& e) {
      r = MakeError(ErrorCode::kInternal, std::string("reconcile threw: ") + e.what());
    }
    if (r) {
      queue.Forget(*item);
      if constexpr (std::is_same_v<Answer, Result<Requeue>>) {
        if (r->after) queue.AddAfter(*item, *r->after);
      }
    } else {
      on_error(*item, r.error());
      queue.AddRateLimited(*item);
    }
    queue.Done(*item);
  }
}

}  // namespace sb::kube
