// SPDX-License-Identifier: Apache-2.0
#include "kube/informer.h"

#include <optional>
#include <utility>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sb::kube {
namespace asio = boost::asio;

namespace {
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
}  // namespace

template <typename T>
struct Informer<T>::State {
  bool stopped = false;
  std::optional<asio::steady_timer> timer;
};

template <typename T>
Informer<T>::Informer(Client& client, ResourceRef ref, InformerOptions options)
    : reflector_(client, std::move(ref), cache_, options.reflector),
      options_(std::move(options)),
      s_(std::make_unique<State>()) {}

template <typename T>
Informer<T>::~Informer() = default;

template <typename T>
asio::awaitable<void> Informer<T>::Run() {
  using asio::experimental::awaitable_operators::operator&&;
  if (options_.resync_period.count() > 0) {
    // Both end on Stop(); Run() returns only when both have, so nothing outlives *this.
    co_await (reflector_.Run() && ResyncLoop());
  } else {
    co_await reflector_.Run();
  }
}

template <typename T>
asio::awaitable<void> Informer<T>::ResyncLoop() {
  auto ex = co_await asio::this_coro::executor;
  s_->timer.emplace(ex);
  while (!s_->stopped) {
    s_->timer->expires_after(options_.resync_period);
    co_await s_->timer->async_wait(kTuple);
    if (s_->stopped) break;
    if (reflector_.HasSynced()) cache_.Resync();
  }
  s_->timer.reset();
}

template <typename T>
void Informer<T>::Stop() {
  s_->stopped = true;
  if (s_->timer) s_->timer->cancel();
  reflector_.Stop();
}

// Instantiations --------------------------------------------------------------------------------

template class Informer<Pod>;
template class Informer<Node>;
template class Informer<Namespace>;
template class Informer<Event>;
template class Informer<Lease>;
template class Informer<Job>;
template class Informer<GenericObject>;

}  // namespace sb::kube
