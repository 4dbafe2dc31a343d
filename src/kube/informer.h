// SPDX-License-Identifier: Apache-2.0
//
// kube/informer.h
//
// A Reflector and its Cache together, plus a periodic resync (every handler's on_update is
// called with each cached object, so that level-triggered reconcilers see everything again),
// as client-go's SharedIndexInformer minus the threads.
//
// Thread model: loop-confined. Run() until Stop(); the Client must outlive Run().
//
// Example:
//   Informer<Pod> pods(client, PodsRef(), {.resync_period = std::chrono::minutes(10)});
//   pods.cache().AddIndex(std::string(kIndexNodeName), PodNodeNameIndex());
//   pods.cache().AddHandlers({.on_add = ..., .on_update = ..., .on_delete = ...});
//   co_spawn(io, pods.Run(), detached);
#pragma once

#include <chrono>
#include <memory>

#include <boost/asio/awaitable.hpp>

#include "kube/cache.h"
#include "kube/client.h"
#include "kube/reflector.h"

namespace sb::kube {

struct InformerOptions {
  ReflectorOptions reflector;
  std::chrono::milliseconds resync_period{0};  // 0: never
};

template <typename T>
class Informer {
 public:
  Informer(Client& client, ResourceRef ref, InformerOptions options = {});
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  [[nodiscard]] Cache<T>& cache() { return cache_; }
  [[nodiscard]] const Cache<T>& cache() const { return cache_; }
  [[nodiscard]] Reflector<T>& reflector() { return reflector_; }
  [[nodiscard]] bool HasSynced() const { return reflector_.HasSynced(); }
  // The cache follows the server now (Reflector::Healthy).
  [[nodiscard]] bool Healthy() const { return reflector_.Healthy(); }

  [[nodiscard]] boost::asio::awaitable<void> Run();
  void Stop();

 private:
  struct State;
  [[nodiscard]] boost::asio::awaitable<void> ResyncLoop();
  Cache<T> cache_;
  Reflector<T> reflector_;
  InformerOptions options_;
  std::unique_ptr<State> s_;
};

extern template class Informer<Pod>;
extern template class Informer<Node>;
extern template class Informer<Namespace>;
extern template class Informer<Event>;
extern template class Informer<Lease>;
extern template class Informer<Job>;
extern template class Informer<GenericObject>;

}  // namespace sb::kube
