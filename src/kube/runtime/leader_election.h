// SPDX-License-Identifier: Apache-2.0
//
// kube/runtime/leader_election.h
//
// Leader election on a coordination.k8s.io/v1 Lease with client-go's semantics
// (tools/leaderelection):
//   - A candidate acquires the Lease only when it is free (empty holderIdentity) or expired.
//     Expiry is judged by the local clock: a candidate remembers when it last saw the Lease's
//     record change (observed time) and treats the Lease as expired once
//     leaseDurationSeconds have passed since then without a change. The remote renewTime is
//     never compared with the local clock, so clock skew between candidates does not matter.
//   - Acquire attempts repeat every RetryPeriod (with client-go's jitter, factor 1.2). Acquiring
//     sets holderIdentity, leaseDurationSeconds, acquireTime and renewTime, and increments
//     leaseTransitions when the holder changes.
//   - The leader renews (renewTime) every RetryPeriod. If no renewal succeeds within
//     RenewDeadline of the start of a renewal round, it has lost leadership: OnStoppedLeading
//     runs and Run() returns (client-go's "leaderelection lost"; a process should then exit).
//   - On Stop() a leader with ReleaseOnCancel releases the Lease: clears holderIdentity and sets
//     leaseDurationSeconds=1, so another candidate can take over at once. (Unlike client-go, a
//     leader that lost its Lease does not try to release it: OnStoppedLeading runs at once.)
//   - Optimistic concurrency: every Update carries the resourceVersion last read. On a conflict
//     (409) the candidate re-reads at once and retries the attempt once (client-go waits for the
//     next RetryPeriod instead; the outcome is the same, one period sooner).
//   - Callbacks: OnStartedLeading when this candidate becomes leader; OnStoppedLeading when
//     Run() ends, whether or not it ever led (as client-go's deferred call); OnNewLeader whenever
//     the observed holder changes, including to "" after a release.
//
// The logic is written against LeaseStore (Get/Create/Update of one Lease), so it is tested with
// an in-memory store (testing/fake_lease_store.h) and a FakeClock; kube_adapters.h has the store
// over the real apiserver.
//
// Thread model: loop-confined. Run() and every other method are called on the thread of the
// io_context that runs Run(); callbacks run on it too and must not block. The clock and the store
// must outlive the elector, and the elector must outlive Run().
//
// Example:
//   LeaderElectionConfig config{.lease_namespace = "slurm-bridge", .lease_name = "scheduler",
//                               .identity = hostname};
//   auto elector = LeaderElector::Create(clock, store, config,
//                                        {.on_started_leading = [&] { StartControllers(); },
//                                         .on_stopped_leading = [&] { Exit(); }});
//   if (!elector) { return elector.error(); }
//   co_spawn(io, (*elector)->Run(), detached);
//   ...
//   (*elector)->Stop();  // on SIGTERM: releases the Lease, Run() returns
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "async/clock.h"
#include "common/error.h"
#include "kube/types.h"

namespace sb::kube {

// Where a Lease is kept. Implementations: the apiserver (kube_adapters.h), an in-memory fake.
// All times in the Lease are MicroTime strings; the store does not interpret them.
class LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  // The Lease `ns/name`. kNotFound when it does not exist; other codes when it cannot be read.
  [[nodiscard]] virtual boost::asio::awaitable<Result<Lease>> Get(std::string ns,
                                                                  std::string name) = 0;
  // Creates `lease` (metadata.namespace_/name set). kAlreadyExists or kConflict when it exists.
  // Returns the stored object (with its resourceVersion).
  [[nodiscard]] virtual boost::asio::awaitable<Result<Lease>> Create(Lease lease) = 0;
  // Replaces the Lease if its resourceVersion is still metadata.resource_version; kConflict when
  // it changed meanwhile, kNotFound when it was deleted. Returns the stored object.
  [[nodiscard]] virtual boost::asio::awaitable<Result<Lease>> Update(Lease lease) = 0;
};

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  // This candidate's holderIdentity; unique among candidates (client-go: hostname + "_" + UUID).
  std::string identity;
  // How long a Lease stays valid after its last observed change. Whole seconds (the Lease holds
  // an integer). client-go's defaults below.
  async::Clock::Duration lease_duration = std::chrono::seconds(15);
  // A leader that cannot renew for this long gives up leadership. < lease_duration.
  async::Clock::Duration renew_deadline = std::chrono::seconds(10);
  // Time between acquire attempts and between renewals.
  async::Clock::Duration retry_period = std::chrono::seconds(2);
  // Acquire attempts wait retry_period * (1 + jitter_factor * U[0,1)); 0 disables the jitter.
  double jitter_factor = 1.2;
  // Seed of the jitter's random source; 0 seeds from std::random_device.
  std::uint64_t jitter_seed = 0;
  // Release the Lease on Stop() (upstream slurm-bridge sets LeaderElectionReleaseOnCancel).
  bool release_on_cancel = true;
};

struct LeaderCallbacks {
  std::function<void()> on_started_leading;               // required
  std::function<void()> on_stopped_leading;               // required
  std::function<void(const std::string&)> on_new_leader;  // optional; "" after a release
};

// client-go's NewLeaderElector checks: positive durations, lease_duration > renew_deadline >
// jitter_factor * retry_period, whole-second lease_duration, an identity, a Lease name, and the
// two required callbacks. kInvalidArgument naming the first violation.
[[nodiscard]] Result<void> ValidateLeaderElectionConfig(const LeaderElectionConfig& config,
                                                        const LeaderCallbacks& callbacks);

class LeaderElector {
 public:
  // Validates `config` (ValidateLeaderElectionConfig). `clock` and `store` must outlive the
  // elector.
  [[nodiscard]] static Result<std::unique_ptr<LeaderElector>> Create(async::Clock& clock,
                                                                     LeaseStore& store,
                                                                     LeaderElectionConfig config,
                                                                     LeaderCallbacks callbacks);
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;
  ~LeaderElector();

  // Campaigns until leading, then renews until Stop() or until leadership is lost. Calls
  // OnStoppedLeading before it returns. Call at most once.
  [[nodiscard]] boost::asio::awaitable<void> Run();

  // Asks Run() to end: it stops waiting, releases the Lease when leading and release_on_cancel
  // is set, and returns. A store call in flight completes first (each is bounded by
  // renew_deadline). Idempotent; may be called before Run().
  void Stop();

  // Whether the last successful write or read of the Lease showed this candidate as holder.
  [[nodiscard]] bool IsLeader() const;
  // The holder last observed ("" when none).
  [[nodiscard]] const std::string& Leader() const { return reported_leader_; }
  // The Lease as last read or written (nullopt before the first success).
  [[nodiscard]] const std::optional<Lease>& ObservedLease() const { return observed_; }
  // client-go's leader-election health check (HealthzAdaptor): false only when this candidate
  // believes it leads but has not renewed for longer than lease_duration + `tolerance`, i.e. it
  // is stuck and another candidate may lead already. Serve it on /healthz.
  [[nodiscard]] bool Healthy(async::Clock::Duration tolerance) const;
  // When the Lease's record last changed as seen here (a leader: its last renewal).
  [[nodiscard]] async::Clock::TimePoint ObservedTime() const { return observed_time_; }
  // The last store error, for logs and health checks (nullopt after a success).
  [[nodiscard]] const std::optional<Error>& LastError() const { return last_error_; }
  [[nodiscard]] const LeaderElectionConfig& config() const { return config_; }

 private:
  enum class Attempt { kSucceeded, kFailed, kTimedOut };

  LeaderElector(async::Clock& clock, LeaseStore& store, LeaderElectionConfig config,
                LeaderCallbacks callbacks);

  boost::asio::awaitable<bool> Acquire();
  // Returns true when the loop ended because of Stop() (still leader), false when lost.
  boost::asio::awaitable<bool> RenewLoop();
  boost::asio::awaitable<void> Release();
  // TryAcquireOrRenew bounded by `deadline` on the clock.
  boost::asio::awaitable<Attempt> TryWithDeadline(async::Clock::TimePoint deadline);
  boost::asio::awaitable<bool> TryAcquireOrRenew();
  // One Get + Create/Update round; sets *conflict when the write answered kConflict.
  boost::asio::awaitable<bool> TryOnce(bool* conflict);
  // Sleeps until `deadline` or Stop(); returns false when stopped.
  boost::asio::awaitable<bool> SleepUntil(async::Clock::TimePoint deadline);
  void SetObserved(Lease lease);
  void MaybeReportTransition();
  [[nodiscard]] async::Clock::Duration JitteredRetryPeriod();

  async::Clock& clock_;
  LeaseStore& store_;
  LeaderElectionConfig config_;
  LeaderCallbacks callbacks_;
  std::mt19937_64 rng_;

  std::optional<Lease> observed_;            // the Lease as last read or written
  async::Clock::TimePoint observed_time_{};  // local time at which observed_'s record last changed
  std::string reported_leader_;              // holder last passed to on_new_leader
  std::optional<Error> last_error_;
  std::unique_ptr<async::Timer> sleep_timer_;  // Stop() wakes it
  bool stop_requested_ = false;
};

}  // namespace sb::kube
