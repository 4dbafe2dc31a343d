// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/leader_election.h"

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "async/clock.h"
#include "testing/fake_lease_store.h"
#include "testing/fake_time.h"

namespace sb::kube {
namespace {

namespace asio = boost::asio;
using sb::testing::FakeLeaseStore;
using sb::testing::FakeLeaseStoreView;
using sb::testing::RunFor;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kNs[] = "slurm-bridge";
constexpr char kName[] = "scheduler";

LeaderElectionConfig TestConfig(std::string identity) {
  LeaderElectionConfig c;
  c.lease_namespace = kNs;
  c.lease_name = kName;
  c.identity = std::move(identity);
  c.jitter_factor = 0;  // deterministic retry times; the defaults 15 s / 10 s / 2 s otherwise
  return c;
}

// One candidate process: its own io_context (so a test can "kill" it by no longer running it),
// its own view of the shared store, and what its callbacks saw.
struct Candidate {
  Candidate(FakeLeaseStore& store, async::FakeClock& clock, LeaderElectionConfig config)
      : view(store, clock) {
    auto e = LeaderElector::Create(
        clock, view, std::move(config),
        {.on_started_leading = [this] { ++started; },
         .on_stopped_leading = [this] { ++stopped; },
         .on_new_leader = [this](const std::string& id) { leaders.push_back(id); }});
    EXPECT_TRUE(e.has_value()) << e.error().message;
    elector = std::move(*e);
  }
  void Start() {
    asio::co_spawn(io, elector->Run(), [this](std::exception_ptr e) {
      EXPECT_FALSE(e);
      run_returned = true;
    });
  }

  asio::io_context io;
  FakeLeaseStoreView view;
  std::unique_ptr<LeaderElector> elector;
  int started = 0;
  int stopped = 0;
  bool run_returned = false;
  std::vector<std::string> leaders;
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  Lease Stored() {
    std::optional<Lease> l = store_.Peek(kNs, kName);
    EXPECT_TRUE(l.has_value());
    return l.value_or(Lease{});
  }

  async::FakeClock clock_;  // first: outlives every timer
  FakeLeaseStore store_;
  Candidate a_{store_, clock_, TestConfig("a")};
  Candidate b_{store_, clock_, TestConfig("b")};
};

TEST(LeaderElectionConfigTest, RejectsWhatClientGoRejects) {
  struct Case {
    std::string name;
    void (*mutate)(LeaderElectionConfig&, LeaderCallbacks&);
    bool ok;
  };
  const std::vector<Case> cases = {
      {"defaults", [](LeaderElectionConfig&, LeaderCallbacks&) {}, true},
      {"lease not longer than renew deadline",
       [](LeaderElectionConfig& c, LeaderCallbacks&) { c.lease_duration = seconds(10); }, false},
      {"renew deadline within jittered retry",
       [](LeaderElectionConfig& c, LeaderCallbacks&) { c.retry_period = seconds(9); }, false},
      {"zero retry", [](LeaderElectionConfig& c, LeaderCallbacks&) { c.retry_period = {}; }, false},
      {"negative renew",
       [](LeaderElectionConfig& c, LeaderCallbacks&) { c.renew_deadline = -seconds(1); }, false},
      {"fractional lease seconds",
       [](LeaderElectionConfig& c, LeaderCallbacks&) { c.lease_duration = milliseconds(15500); },
       false},
      {"no identity", [](LeaderElectionConfig& c, LeaderCallbacks&) { c.identity.clear(); }, false},
      {"no lease name", [](LeaderElectionConfig& c, LeaderCallbacks&) { c.lease_name.clear(); },
       false},
      {"no OnStartedLeading",
       [](LeaderElectionConfig&, LeaderCallbacks& cb) { cb.on_started_leading = nullptr; }, false},
      {"no OnStoppedLeading",
       [](LeaderElectionConfig&, LeaderCallbacks& cb) { cb.on_stopped_leading = nullptr; }, false},
      {"no OnNewLeader is fine",
       [](LeaderElectionConfig&, LeaderCallbacks& cb) { cb.on_new_leader = nullptr; }, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LeaderElectionConfig config = TestConfig("me");
    LeaderCallbacks callbacks{.on_started_leading = [] {},
                              .on_stopped_leading = [] {},
                              .on_new_leader = [](const std::string&) {}};
    c.mutate(config, callbacks);
    Result<void> r = ValidateLeaderElectionConfig(config, callbacks);
    EXPECT_EQ(r.has_value(), c.ok) << (r ? "" : r.error().message);
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST_F(LeaderElectionTest, FirstCandidateCreatesTheLease) {
  a_.Start();
  RunFor({&a_.io}, clock_, milliseconds(1));
  EXPECT_EQ(a_.started, 1);
  EXPECT_TRUE(a_.elector->IsLeader());
  const Lease l = Stored();
  EXPECT_EQ(l.holder_identity, "a");
  EXPECT_EQ(l.lease_duration_seconds, 15);
  EXPECT_EQ(l.lease_transitions, 0);
  EXPECT_EQ(l.acquire_time, "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(l.renew_time, l.acquire_time);
  EXPECT_EQ(a_.leaders, std::vector<std::string>{"a"});

  // Renewals every RetryPeriod move renewTime and keep acquireTime and the transitions.
  RunFor({&a_.io}, clock_, seconds(5));
  const Lease later = Stored();
  EXPECT_EQ(later.renew_time, "2026-01-01T00:00:04.000000Z");
  EXPECT_EQ(later.acquire_time, l.acquire_time);
  EXPECT_EQ(later.lease_transitions, 0);
  EXPECT_EQ(a_.stopped, 0);
}

TEST_F(LeaderElectionTest, OnlyOneOfTwoCandidatesLeads) {
  a_.Start();
  b_.Start();
  for (int i = 0; i < 30; ++i) {
    RunFor({&a_.io, &b_.io}, clock_, seconds(1));
    ASSERT_EQ(a_.elector->IsLeader() + b_.elector->IsLeader(), 1) << "at second " << i;
  }
  EXPECT_EQ(a_.started + b_.started, 1);
  Candidate& leader = a_.started ? a_ : b_;
  Candidate& follower = a_.started ? b_ : a_;
  const std::string leader_id = leader.elector->config().identity;
  EXPECT_EQ(Stored().holder_identity, leader_id);
  EXPECT_EQ(Stored().lease_transitions, 0);
  EXPECT_EQ(follower.elector->Leader(), leader_id);
  EXPECT_EQ(follower.leaders, std::vector<std::string>{leader_id});
}

TEST_F(LeaderElectionTest, KilledLeaderIsReplacedAfterTheLeaseDuration) {
  a_.Start();
  RunFor({&a_.io}, clock_, seconds(1));
  ASSERT_TRUE(a_.elector->IsLeader());
  b_.Start();
  RunFor({&a_.io, &b_.io}, clock_, seconds(9));
  ASSERT_FALSE(b_.elector->IsLeader());
  const std::string last_renew = *Stored().renew_time;

  // Kill a: its io_context no longer runs, so it neither renews nor releases.
  const async::Clock::TimePoint killed = clock_.Now();
  RunFor({&b_.io}, clock_, seconds(15) - milliseconds(1));
  EXPECT_FALSE(b_.elector->IsLeader()) << "b must wait a full LeaseDuration after the last renew";
  EXPECT_EQ(*Stored().renew_time, last_renew);

  async::Clock::TimePoint took_over{};
  for (int i = 0; i < 100 && !b_.elector->IsLeader(); ++i) {
    RunFor({&b_.io}, clock_, milliseconds(100));
    took_over = clock_.Now();
  }
  ASSERT_TRUE(b_.elector->IsLeader());
  EXPECT_EQ(b_.started, 1);
  // Observed-time based: at most LeaseDuration + two RetryPeriods (one to see the last renew,
  // one to retry after expiry) after the kill.
  EXPECT_LE(took_over - killed, seconds(15) + seconds(4));
  const Lease l = Stored();
  EXPECT_EQ(l.holder_identity, "b");
  EXPECT_EQ(l.lease_transitions, 1);
  EXPECT_NE(l.acquire_time, "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(b_.leaders, (std::vector<std::string>{"a", "b"}));
}

TEST_F(LeaderElectionTest, ReleaseOnStopLetsTheOtherTakeOverAtOnce) {
  a_.Start();
  RunFor({&a_.io}, clock_, seconds(1));
  b_.Start();
  RunFor({&a_.io, &b_.io}, clock_, seconds(5));
  ASSERT_TRUE(a_.elector->IsLeader());

  a_.elector->Stop();
  sb::testing::Drain({&a_.io, &b_.io});
  EXPECT_TRUE(a_.run_returned);
  EXPECT_EQ(a_.stopped, 1);
  EXPECT_FALSE(a_.elector->IsLeader());
  const Lease released = Stored();
  EXPECT_EQ(released.holder_identity, "");
  EXPECT_EQ(released.lease_duration_seconds, 1);
  EXPECT_EQ(released.lease_transitions, 0);
  EXPECT_EQ(a_.leaders, (std::vector<std::string>{"a", ""}));

  // b takes over on its next attempt: within one RetryPeriod, not after a LeaseDuration.
  RunFor({&a_.io, &b_.io}, clock_, seconds(2));
  EXPECT_TRUE(b_.elector->IsLeader());
  EXPECT_EQ(Stored().holder_identity, "b");
  EXPECT_EQ(Stored().lease_transitions, 1);
}

TEST_F(LeaderElectionTest, LeaderThatCannotRenewStepsDownAfterTheRenewDeadline) {
  struct Case {
    std::string name;
    bool hang;  // the store's calls hang instead of failing
  };
  for (const Case& c : std::vector<Case>{{"store fails", false}, {"store hangs", true}}) {
    SCOPED_TRACE(c.name);
    async::FakeClock clock;
    FakeLeaseStore store;
    Candidate a(store, clock, TestConfig("a"));
    a.Start();
    RunFor({&a.io}, clock, seconds(3));  // renewed at 0 and 2; next round starts at 4
    ASSERT_TRUE(a.elector->IsLeader());
    (c.hang ? a.view.hang : a.view.fail) = true;
    RunFor({&a.io}, clock, seconds(1) + seconds(10) - milliseconds(1));
    EXPECT_EQ(a.stopped, 0) << "still within RenewDeadline of the round that started at 4 s";
    RunFor({&a.io}, clock, milliseconds(1));
    EXPECT_EQ(a.stopped, 1);
    EXPECT_TRUE(a.run_returned);
  }
}

TEST_F(LeaderElectionTest, HealthCheckFailsOnlyForAStuckLeader) {
  EXPECT_TRUE(a_.elector->Healthy(seconds(20))) << "not leading is healthy";
  a_.Start();
  RunFor({&a_.io}, clock_, seconds(1));
  ASSERT_TRUE(a_.elector->IsLeader());
  RunFor({&a_.io}, clock_, seconds(60));
  EXPECT_TRUE(a_.elector->Healthy(seconds(20))) << "renewing every 2 s";
  // The loop stops running (a wedged process): the lease ages without renewal. The last renewal
  // was at 60 s (renewals every 2 s from 0 s), and it is 61 s now.
  clock_.Advance(seconds(15) + seconds(20) - seconds(1));
  EXPECT_TRUE(a_.elector->Healthy(seconds(20)));
  clock_.Advance(seconds(1));
  EXPECT_FALSE(a_.elector->Healthy(seconds(20)));
}

TEST_F(LeaderElectionTest, ConflictOnRenewIsReReadAndRetried) {
  a_.Start();
  RunFor({&a_.io}, clock_, seconds(1));
  ASSERT_TRUE(a_.elector->IsLeader());
  // Someone else (kubectl annotate) writes the Lease between a's read and its write.
  store_.before_update = [this] {
    Lease l = *store_.Peek(kNs, kName);
    l.metadata.annotations["touched"] = "yes";
    store_.Put(l);
  };
  const std::string rv_before = Stored().metadata.resource_version;
  RunFor({&a_.io}, clock_, seconds(2));
  EXPECT_EQ(store_.conflicts, 1);
  EXPECT_TRUE(a_.elector->IsLeader());
  EXPECT_EQ(Stored().holder_identity, "a");
  EXPECT_EQ(Stored().renew_time, "2026-01-01T00:00:02.000000Z") << "renewed despite the 409";
  EXPECT_EQ(Stored().metadata.annotations.at("touched"), "yes") << "the other write is kept";
  EXPECT_NE(Stored().metadata.resource_version, rv_before);
  EXPECT_EQ(a_.stopped, 0);
}

TEST_F(LeaderElectionTest, LeaseTakenByAnotherWriterMakesTheLeaderStepDown) {
  a_.Start();
  RunFor({&a_.io}, clock_, seconds(1));
  ASSERT_TRUE(a_.elector->IsLeader());
  store_.before_update = [this] {
    Lease l = *store_.Peek(kNs, kName);
    l.holder_identity = "intruder";
    l.renew_time = "2026-01-01T00:00:01.500000Z";
    store_.Put(l);
  };
  RunFor({&a_.io}, clock_, seconds(2));
  EXPECT_FALSE(a_.elector->IsLeader());
  EXPECT_EQ(a_.elector->Leader(), "intruder");
  RunFor({&a_.io}, clock_, seconds(10));
  EXPECT_EQ(a_.stopped, 1) << "no renewal within RenewDeadline";
  EXPECT_EQ(Stored().holder_identity, "intruder") << "a must not overwrite a valid foreign lease";
}

TEST_F(LeaderElectionTest, StopBeforeLeadingReturnsWithoutTouchingTheLease) {
  a_.Start();
  RunFor({&a_.io}, clock_, seconds(1));
  b_.Start();
  RunFor({&a_.io, &b_.io}, clock_, seconds(1));
  const int updates = store_.updates;
  b_.elector->Stop();
  sb::testing::Drain({&a_.io, &b_.io});
  EXPECT_TRUE(b_.run_returned);
  EXPECT_EQ(b_.started, 0);
  EXPECT_EQ(b_.stopped, 1) << "client-go calls OnStoppedLeading whenever Run ends";
  EXPECT_EQ(store_.updates, updates);
  EXPECT_EQ(Stored().holder_identity, "a");
}

}  // namespace
}  // namespace sb::kube
