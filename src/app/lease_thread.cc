// SPDX-License-Identifier: Apache-2.0
#include "app/lease_thread.h"

#include <chrono>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sb::app {

namespace asio = boost::asio;

Result<std::unique_ptr<LeaseThread>> LeaseThread::Create(asio::io_context& main,
                                                         const kube::Config& kube_config,
                                                         kube::LeaderElectionConfig config,
                                                         kube::LeaderCallbacks callbacks) {
  std::unique_ptr<LeaseThread> t(new LeaseThread());
  net::ClientOptions http_options;
  http_options.max_idle_connections = 2;
  Result<std::unique_ptr<net::HttpClient>> http =
      kube::MakeHttpClient(t->io_.get_executor(), kube_config, http_options);
  if (!http) return tl::unexpected(http.error());
  t->http_ = std::move(*http);
  t->kube_ = kube::MakeClient(*t->http_, kube_config.token);
  t->store_ = std::make_unique<kube::ClientLeaseStore>(*t->kube_);
  t->lease_duration_ = config.lease_duration;
  // The callbacks run on the main loop; the snapshot is taken first, so that the main loop sees
  // the leadership its callback announces.
  LeaseThread* self = t.get();
  kube::LeaderCallbacks posted;
  posted.on_started_leading = [self, &main, f = std::move(callbacks.on_started_leading)] {
    self->Snapshot();
    if (f) asio::post(main, f);
  };
  t->lost_ = [&main, f = std::move(callbacks.on_stopped_leading)] {
    if (f) asio::post(main, f);
  };
  posted.on_stopped_leading = [self] {
    self->Snapshot();
    self->leader_ = false;
    self->lost_();
  };
  posted.on_new_leader = [&main, f = std::move(callbacks.on_new_leader)](const std::string& who) {
    if (f) asio::post(main, [f, who] { f(who); });
  };
  Result<std::unique_ptr<kube::LeaderElector>> e =
      kube::LeaderElector::Create(t->clock_, *t->store_, std::move(config), std::move(posted));
  if (!e) return tl::unexpected(e.error());
  t->elector_ = std::move(*e);
  return t;
}

LeaseThread::~LeaseThread() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void LeaseThread::Snapshot() {
  leader_ = elector_->IsLeader();
  observed_ = elector_->ObservedTime().time_since_epoch().count();
}

void LeaseThread::Start() {
  asio::co_spawn(io_, elector_->Run(), [this](const std::exception_ptr& e) {
    if (e) {
      // A leader whose elector is gone renews nothing: it leads no more, from now on (the
      // snapshot would keep saying so until the process restarts; review R-10).
      spdlog::error("leader election crashed");
      stopping_ = true;
      if (leader_.exchange(false)) lost_();
    }
    io_.stop();  // the snapshot task and idle connections do not keep the thread
  });
  asio::co_spawn(io_, SnapshotLoop(), asio::detached);
  thread_ = std::thread([this] { io_.run(); });
}

asio::awaitable<void> LeaseThread::SnapshotLoop() {
  asio::steady_timer timer(io_);
  while (!stopping_) {
    Snapshot();
    timer.expires_after(std::chrono::milliseconds(250));
    (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

void LeaseThread::Stop() {
  if (stopping_.exchange(true)) return;
  asio::post(io_, [this] { elector_->Stop(); });
}

bool LeaseThread::Healthy(async::Clock::Duration tolerance) const {
  if (!leader_) return true;
  const async::Clock::TimePoint observed{async::Clock::Duration(observed_.load())};
  return clock_.Now() <= observed + lease_duration_ + tolerance;
}

}  // namespace sb::app
