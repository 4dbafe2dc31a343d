// SPDX-License-Identifier: Apache-2.0
//
// testing/fake_lease_store.h
//
// An in-memory LeaseStore with the apiserver's optimistic concurrency: every write bumps the
// resourceVersion, Update with a stale resourceVersion answers kConflict (HTTP 409), Create of an
// existing Lease answers kAlreadyExists (409). FakeLeaseStoreView gives each candidate its own
// window on the shared store, through which a test can make that candidate's calls fail or hang.
// For tests only.
//
// Thread model: loop-confined.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>

#include "async/clock.h"
#include "kube/runtime/leader_election.h"

namespace sb::testing {

class FakeLeaseStore final : public kube::LeaseStore {
 public:
  boost::asio::awaitable<Result<kube::Lease>> Get(std::string ns, std::string name) override {
    ++gets;
    auto it = leases_.find(ns + "/" + name);
    if (it == leases_.end()) {
      co_return MakeError(ErrorCode::kNotFound, "leases \"" + name + "\" not found", 404);
    }
    co_return it->second;
  }

  boost::asio::awaitable<Result<kube::Lease>> Create(kube::Lease lease) override {
    ++creates;
    const std::string key = lease.metadata.namespace_ + "/" + lease.metadata.name;
    if (leases_.contains(key)) {
      co_return MakeError(ErrorCode::kAlreadyExists,
                          "leases \"" + lease.metadata.name + "\" already exists", 409);
    }
    lease.metadata.resource_version = std::to_string(++last_rv_);
    leases_[key] = lease;
    co_return lease;
  }

  boost::asio::awaitable<Result<kube::Lease>> Update(kube::Lease lease) override {
    ++updates;
    if (before_update) {
      // May change the stored Lease, as a concurrent writer would.
      std::function<void()> hook = std::move(before_update);
      before_update = nullptr;
      hook();
    }
    const std::string key = lease.metadata.namespace_ + "/" + lease.metadata.name;
    auto it = leases_.find(key);
    if (it == leases_.end()) {
      co_return MakeError(ErrorCode::kNotFound, "leases \"" + lease.metadata.name + "\" not found",
                          404);
    }
    if (it->second.metadata.resource_version != lease.metadata.resource_version) {
      ++conflicts;
      co_return MakeError(ErrorCode::kConflict,
                          "Operation cannot be fulfilled on leases \"" + lease.metadata.name +
                              "\": the object has been modified",
                          409);
    }
    lease.metadata.resource_version = std::to_string(++last_rv_);
    it->second = lease;
    co_return lease;
  }

  // The stored Lease, or nullopt.
  [[nodiscard]] std::optional<kube::Lease> Peek(const std::string& ns,
                                                const std::string& name) const {
    auto it = leases_.find(ns + "/" + name);
    if (it == leases_.end()) {
      return std::nullopt;
    }
    return it->second;
  }

  // Writes `lease` as a third party would (bumps the resourceVersion).
  void Put(kube::Lease lease) {
    lease.metadata.resource_version = std::to_string(++last_rv_);
    leases_[lease.metadata.namespace_ + "/" + lease.metadata.name] = std::move(lease);
  }

  // Runs once, at the start of the next Update, before the resourceVersion check.
  std::function<void()> before_update;
  int gets = 0;
  int creates = 0;
  int updates = 0;
  int conflicts = 0;

 private:
  std::map<std::string, kube::Lease> leases_;
  std::uint64_t last_rv_ = 0;
};

// One candidate's access to a shared FakeLeaseStore. While `fail` is set its calls answer
// kUnavailable; while `hang` is set they wait (on `clock`) until cancelled.
class FakeLeaseStoreView final : public kube::LeaseStore {
 public:
  FakeLeaseStoreView(FakeLeaseStore& store, async::Clock& clock) : store_(store), clock_(clock) {}

  boost::asio::awaitable<Result<kube::Lease>> Get(std::string ns, std::string name) override {
    if (Result<void> r = co_await Gate(); !r) {
      co_return tl::unexpected(r.error());
    }
    co_return co_await store_.Get(std::move(ns), std::move(name));
  }
  boost::asio::awaitable<Result<kube::Lease>> Create(kube::Lease lease) override {
    if (Result<void> r = co_await Gate(); !r) {
      co_return tl::unexpected(r.error());
    }
    co_return co_await store_.Create(std::move(lease));
  }
  boost::asio::awaitable<Result<kube::Lease>> Update(kube::Lease lease) override {
    if (Result<void> r = co_await Gate(); !r) {
      co_return tl::unexpected(r.error());
    }
    co_return co_await store_.Update(std::move(lease));
  }

  bool fail = false;
  bool hang = false;

 private:
  boost::asio::awaitable<Result<void>> Gate() {
    if (hang) {
      std::unique_ptr<async::Timer> t = clock_.MakeTimer(co_await boost::asio::this_coro::executor);
      (void)co_await t->WaitUntil(async::Clock::TimePoint::max());
      co_return MakeError(ErrorCode::kCancelled, "cancelled");
    }
    if (fail) {
      co_return MakeError(ErrorCode::kUnavailable, "connection refused");
    }
    co_return Result<void>{};
  }

  FakeLeaseStore& store_;
  async::Clock& clock_;
};

}  // namespace sb::testing
