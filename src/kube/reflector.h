// SPDX-License-Identifier: Apache-2.0
//
// kube/reflector.h
//
// Keeps a Cache<T> in step with one resource collection, as client-go's Reflector does:
// LIST (paged), then WATCH from the list's resourceVersion with bookmarks. A BOOKMARK only
// advances the resourceVersion. A clean end of the watch (timeoutSeconds) re-watches from the
// last resourceVersion. 410 Gone (as the watch's HTTP status or as an ERROR event with code
// 410), a broken stream or any other error relists, and Cache::Replace delivers the difference
// (adds, updates, synthesized deletes). Errors other than 410 wait a jittered exponential
// backoff first; a 410 relists at once.
//
// Resource versions are opaque strings: compared for equality and echoed back, never parsed.
//
// Thread model: loop-confined. Run() runs on the caller's executor until Stop(); the Client and
// the Cache must outlive Run().
//
// Example:
//   Cache<Pod> cache;
//   Reflector<Pod> reflector(client, PodsRef(), cache, {.list_options = {.field_selector = sel}});
//   co_spawn(io, reflector.Run(), detached);
//   ... reflector.Stop();
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "kube/cache.h"
#include "kube/client.h"

namespace sb::kube {

struct ReflectorOptions {
  ListOptions list_options;  // selectors for both LIST and WATCH; RV, limit, continue ignored
  std::int64_t page_size = 500;
  // Read the first LIST from the watch cache (resourceVersion=0): cheap, possibly stale. Relists
  // after a 410 always read from etcd (quorum).
  bool initial_list_from_cache = false;
  // Each watch asks for timeoutSeconds drawn from [min_watch_timeout, 2 * min_watch_timeout).
  std::chrono::seconds min_watch_timeout{300};
  std::chrono::milliseconds backoff_initial{800};
  std::chrono::milliseconds backoff_max{30000};
  // Called with every backoff wait (jitter applied) just before it starts; optional (tests
  // check the waits with it instead of timing them).
  std::function<void(std::chrono::milliseconds)> on_backoff;
};

struct ReflectorStats {
  std::uint64_t lists = 0;    // completed LISTs (all pages)
  std::uint64_t watches = 0;  // WATCH requests started
  std::uint64_t gone = 0;     // 410s seen (HTTP or ERROR event)
  std::uint64_t errors = 0;   // other failures (each followed by a backoff)
  std::uint64_t events = 0;   // ADDED/MODIFIED/DELETED applied
  std::uint64_t bookmarks = 0;
  std::uint64_t decode_errors = 0;
};

template <typename T>
class Reflector {
 public:
  Reflector(Client& client, ResourceRef ref, Cache<T>& cache, ReflectorOptions options = {});
  ~Reflector();
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  // Lists and watches until Stop(). Never throws; errors are retried.
  [[nodiscard]] boost::asio::awaitable<void> Run();
  // Makes Run() return soon: cancels the request or the backoff in flight.
  void Stop();

  // True once the first LIST was delivered to the cache.
  [[nodiscard]] bool HasSynced() const;
  // True while the cache follows the server: from a successful LIST until a LIST or WATCH
  // fails or answers 410 (the cache may then miss changes until the next LIST succeeds). A
  // watch that ends cleanly and is resumed keeps it true.
  [[nodiscard]] bool Healthy() const;
  // The resourceVersion the next watch starts from.
  [[nodiscard]] const std::string& LastResourceVersion() const;
  [[nodiscard]] const ReflectorStats& stats() const;
  // Called after every failure, with the error (for logs and metrics); optional.
  void SetErrorHandler(std::function<void(const Error&)> on_error);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

extern template class Reflector<Pod>;
extern template class Reflector<Node>;
extern template class Reflector<Namespace>;
extern template class Reflector<Event>;
extern template class Reflector<Lease>;
extern template class Reflector<Job>;
extern template class Reflector<GenericObject>;

}  // namespace sb::kube
