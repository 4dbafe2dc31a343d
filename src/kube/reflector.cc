// SPDX-License-Identifier: Apache-2.0
#include "kube/reflector.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sb::kube {
namespace asio = boost::asio;

namespace {
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
}  // namespace

template <typename T>
struct Reflector<T>::State {
  Client& client;
  ResourceRef ref;
  Cache<T>& cache;
  ReflectorOptions options;
  ReflectorStats stats;
  std::string rv;
  bool synced = false;
  bool healthy = false;
  bool stopped = false;
  bool running = false;
  std::function<void(const Error&)> on_error;
  asio::cancellation_signal cancel;
  std::optional<asio::steady_timer> sleep;
  std::mt19937_64 rng{std::random_device{}()};
  std::chrono::milliseconds backoff{0};

  State(Client& c, ResourceRef r, Cache<T>& ca, ReflectorOptions o)
      : client(c), ref(std::move(r)), cache(ca), options(std::move(o)) {}

  // Runs `op` as a child coroutine that Stop() can cancel; nullopt when it was cancelled.
  template <typename R>
  asio::awaitable<std::optional<R>> Cancellable(asio::awaitable<R> op) {
    auto ex = co_await asio::this_coro::executor;
    auto [ep, result] = co_await asio::co_spawn(
        ex, std::move(op), asio::bind_cancellation_slot(cancel.slot(), kTuple));
    cancel.slot().clear();
    if (ep || stopped) {
      co_return std::nullopt;
    }
    co_return std::move(result);
  }

  void Failed(const Error& e) {
    if (on_error) on_error(e);
  }

  // Sleeps the next backoff step (jittered, doubled each time, capped).
  asio::awaitable<void> Backoff() {
    backoff =
        backoff.count() == 0 ? options.backoff_initial : std::min(backoff * 2, options.backoff_max);
    std::uniform_int_distribution<std::int64_t> jitter(backoff.count() / 2,
                                                       std::max<std::int64_t>(backoff.count(), 1));
    auto ex = co_await asio::this_coro::executor;
    const std::chrono::milliseconds wait(jitter(rng));
    if (options.on_backoff) options.on_backoff(wait);
    sleep.emplace(ex, wait);
    if (!stopped) {
      co_await sleep->async_wait(kTuple);
    }
    sleep.reset();
  }

  asio::awaitable<bool> DoList(bool quorum) {
    ListOptions lo = options.list_options;
    lo.limit = options.page_size;
    lo.continue_token.clear();
    lo.resource_version = quorum ? "" : "0";
    lo.resource_version_match.clear();
    lo.allow_watch_bookmarks = false;
    lo.timeout_seconds = 0;
    std::optional<Result<kube::List<T>>> r = co_await Cancellable(ListAllAs<T>(client, ref, lo));
    if (!r) co_return false;
    if (!*r) {
      ++stats.errors;
      healthy = false;
      Failed(r->error());
      co_return false;
    }
    ++stats.lists;
    healthy = true;
    rv = (*r)->resource_version;
    cache.Replace(std::move((*r)->items));
    synced = true;
    co_return true;
  }

  enum class WatchEnd { kClean, kShort, kGone, kError, kStopped };

  asio::awaitable<WatchEnd> Watch() {
    ListOptions lo = options.list_options;
    lo.limit = 0;
    lo.continue_token.clear();
    lo.resource_version = rv;
    lo.resource_version_match.clear();
    lo.allow_watch_bookmarks = true;
    auto min = options.min_watch_timeout.count();
    std::uniform_int_distribution<std::int64_t> timeout(min,
                                                        std::max<std::int64_t>(2 * min - 1, min));
    lo.timeout_seconds = timeout(rng);
    ++stats.watches;
    const auto started = std::chrono::steady_clock::now();
    const std::uint64_t bookmarks_before = stats.bookmarks;
    bool gone = false;
    std::optional<Error> event_error;
    std::uint64_t applied = 0;
    auto on_line = [this, &gone, &event_error, &applied](std::string_view line) {
      Result<WatchEvent<T>> ev = DecodeWatchEvent<T>(line);
      if (!ev) {
        ++stats.decode_errors;
        event_error = ev.error();
        return false;
      }
      switch (ev->type) {
        case WatchEventType::kAdded:
        case WatchEventType::kModified:
          rv = ev->object.metadata.resource_version;
          cache.Upsert(std::move(ev->object));
          ++stats.events;
          ++applied;
          return true;
        case WatchEventType::kDeleted:
          rv = ev->object.metadata.resource_version;
          cache.Remove(ev->object);
          ++stats.events;
          ++applied;
          return true;
        case WatchEventType::kBookmark:
          if (!ev->object.metadata.resource_version.empty()) {
            rv = ev->object.metadata.resource_version;
          }
          ++stats.bookmarks;
          return true;
        case WatchEventType::kError:
          if (ev->status.code == 410) {
            gone = true;
          } else {
            event_error = Error{ErrorCodeFromHttpStatus(ev->status.code),
                                "watch " + ref.Path() + ": ERROR event: " + ev->status.message,
                                ev->status.code};
          }
          return false;
      }
      return false;
    };
    std::optional<Result<void>> r = co_await Cancellable(client.Watch(ref, lo, on_line));
    if (!r) co_return WatchEnd::kStopped;
    if (applied > 0) backoff = std::chrono::milliseconds(0);
    if (gone || (!*r && r->error().code == ErrorCode::kGone)) {
      ++stats.gone;
      healthy = false;
      co_return WatchEnd::kGone;
    }
    if (!*r) {
      ++stats.errors;
      healthy = false;
      Failed(r->error());
      co_return WatchEnd::kError;
    }
    if (event_error) {
      ++stats.errors;
      healthy = false;
      Failed(*event_error);
      co_return WatchEnd::kError;
    }
    if (applied == 0 && stats.bookmarks == bookmarks_before &&
        std::chrono::steady_clock::now() - started < std::chrono::seconds(1)) {
      // A watch that ended at once with nothing in it: do not spin (client-go's "very short
      // watch").
      co_return WatchEnd::kShort;
    }
    co_return WatchEnd::kClean;
  }
};

template <typename T>
Reflector<T>::Reflector(Client& client, ResourceRef ref, Cache<T>& cache, ReflectorOptions options)
    : s_(std::make_unique<State>(client, std::move(ref), cache, std::move(options))) {}

template <typename T>
Reflector<T>::~Reflector() = default;

template <typename T>
asio::awaitable<void> Reflector<T>::Run() {
  State& s = *s_;
  s.running = true;
  bool need_list = true;
  bool first = true;
  while (!s.stopped) {
    if (need_list) {
      bool ok = co_await s.DoList(!(first && s.options.initial_list_from_cache));
      if (s.stopped) break;
      if (!ok) {
        co_await s.Backoff();
        continue;
      }
      first = false;
      need_list = false;
    }
    typename State::WatchEnd end = co_await s.Watch();
    switch (end) {
      case State::WatchEnd::kStopped:
        break;
      case State::WatchEnd::kClean:
        // timeoutSeconds ran out (or the server closed cleanly): re-watch from the last RV.
        break;
      case State::WatchEnd::kShort:
        co_await s.Backoff();
        break;
      case State::WatchEnd::kGone:
        // Too old resource version: relist now and let Replace deliver the difference.
        need_list = true;
        break;
      case State::WatchEnd::kError:
        // A broken stream or a failed request: events may be lost, so relist after a backoff.
        need_list = true;
        co_await s.Backoff();
        break;
    }
  }
  s.running = false;
}

template <typename T>
void Reflector<T>::Stop() {
  s_->stopped = true;
  s_->cancel.emit(asio::cancellation_type::terminal);
  if (s_->sleep) s_->sleep->cancel();
}

template <typename T>
bool Reflector<T>::HasSynced() const {
  return s_->synced;
}
template <typename T>
bool Reflector<T>::Healthy() const {
  return s_->healthy;
}
template <typename T>
const std::string& Reflector<T>::LastResourceVersion() const {
  return s_->rv;
}
template <typename T>
const ReflectorStats& Reflector<T>::stats() const {
  return s_->stats;
}
template <typename T>
void Reflector<T>::SetErrorHandler(std::function<void(const Error&)> on_error) {
  s_->on_error = std::move(on_error);
}

// Instantiations --------------------------------------------------------------------------------

template class Reflector<Pod>;
template class Reflector<Node>;
template class Reflector<Namespace>;
template class Reflector<Event>;
template class Reflector<Lease>;
template class Reflector<Job>;
template class Reflector<GenericObject>;

}  // namespace sb::kube
