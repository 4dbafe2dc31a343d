// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/leader_election.h"

#include <algorithm>
#include <utility>
#include <variant>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>

#include "common/time_format.h"

namespace sb::kube {
namespace {

namespace asio = boost::asio;

const std::string& Holder(const Lease& lease) {
  static const std::string kEmpty;
  return lease.holder_identity ? *lease.holder_identity : kEmpty;
}

// The LeaderElectionRecord part of a Lease: what client-go compares to decide whether the record
// changed (its raw bytes), so the resourceVersion and metadata are left out.
bool SameRecord(const Lease& a, const Lease& b) {
  return Holder(a) == Holder(b) && a.lease_duration_seconds == b.lease_duration_seconds &&
         a.acquire_time == b.acquire_time && a.renew_time == b.renew_time &&
         a.lease_transitions == b.lease_transitions;
}

std::int32_t WholeSeconds(async::Clock::Duration d) {
  return static_cast<std::int32_t>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

}  // namespace

Result<void> ValidateLeaderElectionConfig(const LeaderElectionConfig& config,
                                          const LeaderCallbacks& callbacks) {
  auto invalid = [](std::string what) {
    return MakeError(ErrorCode::kInvalidArgument, "leader election: " + std::move(what));
  };
  if (config.lease_duration <= async::Clock::Duration::zero()) {
    return invalid("leaseDuration must be greater than zero");
  }
  if (config.renew_deadline <= async::Clock::Duration::zero()) {
    return invalid("renewDeadline must be greater than zero");
  }
  if (config.retry_period <= async::Clock::Duration::zero()) {
    return invalid("retryPeriod must be greater than zero");
  }
  if (config.jitter_factor < 0) {
    return invalid("jitterFactor must not be negative");
  }
  if (config.lease_duration <= config.renew_deadline) {
    return invalid("leaseDuration must be greater than renewDeadline");
  }
  // client-go checks against its fixed JitterFactor (1.2), whatever jitter is configured.
  constexpr double kClientGoJitterFactor = 1.2;
  const double jittered_retry = std::chrono::duration<double>(config.retry_period).count() *
                                std::max(config.jitter_factor, kClientGoJitterFactor);
  if (std::chrono::duration<double>(config.renew_deadline).count() <= jittered_retry) {
    return invalid("renewDeadline must be greater than retryPeriod*JitterFactor");
  }
  if (config.lease_duration % std::chrono::seconds(1) != async::Clock::Duration::zero()) {
    return invalid("leaseDuration must be whole seconds (leaseDurationSeconds is an integer)");
  }
  if (config.identity.empty()) {
    return invalid("identity must not be empty");
  }
  if (config.lease_name.empty()) {
    return invalid("lease name must not be empty");
  }
  if (!callbacks.on_started_leading) {
    return invalid("OnStartedLeading callback must not be empty");
  }
  if (!callbacks.on_stopped_leading) {
    return invalid("OnStoppedLeading callback must not be empty");
  }
  return {};
}

Result<std::unique_ptr<LeaderElector>> LeaderElector::Create(async::Clock& clock, LeaseStore& store,
                                                             LeaderElectionConfig config,
                                                             LeaderCallbacks callbacks) {
  if (Result<void> ok = ValidateLeaderElectionConfig(config, callbacks); !ok) {
    return tl::unexpected(ok.error());
  }
  return std::unique_ptr<LeaderElector>(
      new LeaderElector(clock, store, std::move(config), std::move(callbacks)));
}

LeaderElector::LeaderElector(async::Clock& clock, LeaseStore& store, LeaderElectionConfig config,
                             LeaderCallbacks callbacks)
    : clock_(clock),
      store_(store),
      config_(std::move(config)),
      callbacks_(std::move(callbacks)),
      rng_(config_.jitter_seed != 0 ? config_.jitter_seed : std::random_device{}()) {}

LeaderElector::~LeaderElector() = default;

bool LeaderElector::IsLeader() const {
  return observed_.has_value() && Holder(*observed_) == config_.identity;
}

bool LeaderElector::Healthy(async::Clock::Duration tolerance) const {
  if (!IsLeader()) {
    return true;
  }
  return clock_.Now() <= observed_time_ + config_.lease_duration + tolerance;
}

void LeaderElector::Stop() {
  stop_requested_ = true;
  if (sleep_timer_) {
    sleep_timer_->Wake();
  }
}

asio::awaitable<void> LeaderElector::Run() {
  sleep_timer_ = clock_.MakeTimer(co_await asio::this_coro::executor);
  if (co_await Acquire()) {
    callbacks_.on_started_leading();
    const bool stopped = co_await RenewLoop();
    // client-go also tries to release after a lost renewal. We do not: the store is failing or
    // slow then, and waiting for that write would delay OnStoppedLeading past the margin between
    // RenewDeadline and LeaseDuration, after which another candidate may lead.
    if (stopped && config_.release_on_cancel) {
      co_await Release();
    }
  }
  callbacks_.on_stopped_leading();
}

asio::awaitable<bool> LeaderElector::Acquire() {
  while (!stop_requested_) {
    const Attempt a = co_await TryWithDeadline(clock_.Now() + config_.renew_deadline);
    MaybeReportTransition();
    if (a == Attempt::kSucceeded) {
      co_return true;
    }
    if (!co_await SleepUntil(clock_.Now() + JitteredRetryPeriod())) {
      break;
    }
  }
  co_return false;
}

asio::awaitable<bool> LeaderElector::RenewLoop() {
  for (;;) {
    // One round of client-go's renew: PollImmediateUntil(RetryPeriod, tryAcquireOrRenew) under
    // a RenewDeadline timeout.
    const async::Clock::TimePoint deadline = clock_.Now() + config_.renew_deadline;
    bool renewed = false;
    while (!stop_requested_ && clock_.Now() < deadline) {
      const Attempt a = co_await TryWithDeadline(deadline);
      MaybeReportTransition();
      if (a == Attempt::kSucceeded) {
        renewed = true;
        break;
      }
      if (a == Attempt::kTimedOut) {
        break;
      }
      if (!co_await SleepUntil(std::min(clock_.Now() + config_.retry_period, deadline))) {
        break;
      }
    }
    if (stop_requested_) {
      co_return true;
    }
    if (!renewed) {
      co_return false;  // leadership lost
    }
    if (!co_await SleepUntil(clock_.Now() + config_.retry_period)) {
      co_return true;
    }
  }
}

asio::awaitable<void> LeaderElector::Release() {
  if (!IsLeader()) {
    co_return;
  }
  using namespace asio::experimental::awaitable_operators;
  std::unique_ptr<async::Timer> timer = clock_.MakeTimer(co_await asio::this_coro::executor);
  const async::Clock::TimePoint deadline = clock_.Now() + config_.renew_deadline;
  // At most two writes: a conflict re-reads once, and releases only if we still hold the Lease.
  Lease lease = *observed_;
  for (int i = 0; i < 2; ++i) {
    const std::string now = FormatMicroTime(clock_.WallNow());
    lease.holder_identity = std::string();
    lease.lease_duration_seconds = 1;
    lease.acquire_time = now;
    lease.renew_time = now;
    auto r = co_await (store_.Update(lease) || timer->WaitUntil(deadline));
    if (r.index() != 0) {
      last_error_ = Error{ErrorCode::kDeadlineExceeded, "release: lease update timed out"};
      co_return;
    }
    Result<Lease>& updated = std::get<0>(r);
    if (updated) {
      last_error_.reset();
      SetObserved(std::move(*updated));
      MaybeReportTransition();
      co_return;
    }
    last_error_ = updated.error();
    if (updated.error().code != ErrorCode::kConflict) {
      co_return;
    }
    auto reread = co_await (store_.Get(config_.lease_namespace, config_.lease_name) ||
                            timer->WaitUntil(deadline));
    if (reread.index() != 0 || !std::get<0>(reread)) {
      co_return;
    }
    Lease current = std::move(*std::get<0>(reread));
    if (Holder(current) != config_.identity) {
      SetObserved(std::move(current));
      MaybeReportTransition();
      co_return;  // someone else holds it already: nothing to release
    }
    lease = std::move(current);
  }
}

asio::awaitable<LeaderElector::Attempt> LeaderElector::TryWithDeadline(
    async::Clock::TimePoint deadline) {
  using namespace asio::experimental::awaitable_operators;
  std::unique_ptr<async::Timer> timer = clock_.MakeTimer(co_await asio::this_coro::executor);
  auto r = co_await (TryAcquireOrRenew() || timer->WaitUntil(deadline));
  if (r.index() != 0) {
    last_error_ = Error{ErrorCode::kDeadlineExceeded, "leader election: lease request timed out"};
    co_return Attempt::kTimedOut;
  }
  co_return std::get<0>(r) ? Attempt::kSucceeded : Attempt::kFailed;
}

asio::awaitable<bool> LeaderElector::TryAcquireOrRenew() {
  bool conflict = false;
  if (co_await TryOnce(&conflict)) {
    co_return true;
  }
  if (!conflict) {
    co_return false;
  }
  // 409: someone wrote the Lease after our read. Re-read and decide again, once.
  conflict = false;
  co_return co_await TryOnce(&conflict);
}

asio::awaitable<bool> LeaderElector::TryOnce(bool* conflict) {
  const std::string now_wall = FormatMicroTime(clock_.WallNow());

  Result<Lease> got = co_await store_.Get(config_.lease_namespace, config_.lease_name);
  if (!got) {
    if (got.error().code != ErrorCode::kNotFound) {
      last_error_ = got.error();
      co_return false;
    }
    Lease lease;
    lease.metadata.namespace_ = config_.lease_namespace;
    lease.metadata.name = config_.lease_name;
    lease.holder_identity = config_.identity;
    lease.lease_duration_seconds = WholeSeconds(config_.lease_duration);
    lease.acquire_time = now_wall;
    lease.renew_time = now_wall;
    lease.lease_transitions = 0;
    Result<Lease> created = co_await store_.Create(std::move(lease));
    if (!created) {
      last_error_ = created.error();
      *conflict = created.error().code == ErrorCode::kConflict ||
                  created.error().code == ErrorCode::kAlreadyExists;
      co_return false;
    }
    last_error_.reset();
    SetObserved(std::move(*created));
    co_return true;
  }

  Lease old = std::move(*got);
  const async::Clock::TimePoint now = clock_.Now();
  if (!observed_ || !SameRecord(old, *observed_)) {
    observed_ = old;
    observed_time_ = now;
  } else {
    // Same record: keep the time we first saw it, but take the newer resourceVersion.
    observed_->metadata = old.metadata;
  }
  const async::Clock::Duration valid_for =
      std::chrono::seconds(old.lease_duration_seconds.value_or(0));
  if (!Holder(old).empty() && observed_time_ + valid_for > now && !IsLeader()) {
    last_error_.reset();
    co_return false;  // held by someone else and not expired
  }

  Lease next = old;
  next.holder_identity = config_.identity;
  next.lease_duration_seconds = WholeSeconds(config_.lease_duration);
  next.renew_time = now_wall;
  if (IsLeader()) {
    next.acquire_time = old.acquire_time;
    next.lease_transitions = old.lease_transitions.value_or(0);
  } else {
    next.acquire_time = now_wall;
    next.lease_transitions = old.lease_transitions.value_or(0) + 1;
  }
  Result<Lease> updated = co_await store_.Update(std::move(next));
  if (!updated) {
    last_error_ = updated.error();
    *conflict = updated.error().code == ErrorCode::kConflict;
    co_return false;
  }
  last_error_.reset();
  SetObserved(std::move(*updated));
  co_return true;
}

asio::awaitable<bool> LeaderElector::SleepUntil(async::Clock::TimePoint deadline) {
  if (stop_requested_) {
    co_return false;
  }
  for (;;) {
    const async::WaitResult r = co_await sleep_timer_->WaitUntil(deadline);
    if (stop_requested_ || r == async::WaitResult::kAborted) {
      co_return false;
    }
    if (r == async::WaitResult::kFired) {
      co_return true;
    }
  }
}

void LeaderElector::SetObserved(Lease lease) {
  observed_ = std::move(lease);
  observed_time_ = clock_.Now();
}

void LeaderElector::MaybeReportTransition() {
  if (!observed_) {
    return;
  }
  const std::string& holder = Holder(*observed_);
  if (holder == reported_leader_) {
    return;
  }
  reported_leader_ = holder;
  if (callbacks_.on_new_leader) {
    callbacks_.on_new_leader(reported_leader_);
  }
}

async::Clock::Duration LeaderElector::JitteredRetryPeriod() {
  if (config_.jitter_factor <= 0) {
    return config_.retry_period;
  }
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double extra =
      std::chrono::duration<double>(config_.retry_period).count() * config_.jitter_factor * u(rng_);
  return config_.retry_period +
         std::chrono::duration_cast<async::Clock::Duration>(std::chrono::duration<double>(extra));
}

}  // namespace sb::kube
