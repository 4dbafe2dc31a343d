// SPDX-License-Identifier: Apache-2.0
//
// Leader election and event recording against the real kube-apiserver of the test environment
// (label e2e; SB_TESTENV names its env file). The first candidate runs in a child process that
// is SIGKILLed while leading (no release); the second, in this process, must take over once the
// Lease expires. The measured failover time is printed.
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "async/clock.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/runtime/event_recorder.h"
#include "kube/runtime/kube_adapters.h"
#include "kube/runtime/leader_election.h"
#include "testing/run.h"
#include "testing/testenv.h"

namespace sb::kube {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyTime = std::chrono::steady_clock::time_point;

// Short timings so that the test takes seconds. SB_E2E_LEADER_DEFAULTS=1 uses client-go's
// defaults instead (15 s / 10 s / 2 s), to measure the failover a deployment would see.
LeaderElectionConfig E2eConfig(std::string lease_name, std::string identity) {
  LeaderElectionConfig c;
  c.lease_namespace = "default";
  c.lease_name = std::move(lease_name);
  c.identity = std::move(identity);
  const char* defaults = std::getenv("SB_E2E_LEADER_DEFAULTS");
  if (defaults == nullptr || std::string(defaults) != "1") {
    c.lease_duration = seconds(5);
    c.renew_deadline = seconds(3);
    c.retry_period = seconds(1);
  }
  return c;
}

double Seconds(async::Clock::Duration d) { return std::chrono::duration<double>(d).count(); }

// How to reach the apiserver, from KUBE_APISERVER_URL, KUBE_CA_FILE and KUBE_TOKEN_FILE.
std::optional<Config> LoadE2eConfig(std::string* why) {
  std::optional<sb::testing::TestEnv> env = sb::testing::TestEnv::Load(why);
  if (!env) {
    return std::nullopt;
  }
  Config c;
  c.server = env->Get("KUBE_APISERVER_URL");
  c.tls.ca_file = env->Get("KUBE_CA_FILE");
  c.token = std::make_shared<TokenSource>(TokenSource::File(env->Get("KUBE_TOKEN_FILE")));
  if (c.server.empty()) {
    *why = "KUBE_APISERVER_URL is not set in the env file";
    return std::nullopt;
  }
  return c;
}

// Everything one candidate needs on one io_context.
struct Connection {
  static std::unique_ptr<Connection> Open(asio::io_context& io, const Config& config,
                                          std::string* why) {
    auto conn = std::make_unique<Connection>();
    Result<std::unique_ptr<net::HttpClient>> http = MakeHttpClient(io.get_executor(), config);
    if (!http) {
      *why = http.error().ToString();
      return nullptr;
    }
    conn->http = std::move(*http);
    conn->client = MakeClient(*conn->http, config.token);
    conn->leases = std::make_unique<ClientLeaseStore>(*conn->client);
    return conn;
  }
  std::unique_ptr<net::HttpClient> http;
  std::unique_ptr<Client> client;
  std::unique_ptr<ClientLeaseStore> leases;
};

// The child: campaigns, writes 'L' to `fd` when leading, and runs until killed.
[[noreturn]] void RunChildCandidate(const Config& config, const std::string& lease, int fd) {
  asio::io_context io;
  std::string why;
  std::unique_ptr<Connection> conn = Connection::Open(io, config, &why);
  if (!conn) {
    std::fprintf(stderr, "child: %s\n", why.c_str());
    _exit(2);
  }
  async::SystemClock clock;
  auto elector = LeaderElector::Create(clock, *conn->leases, E2eConfig(lease, "candidate-a"),
                                       {.on_started_leading = [fd] { (void)!write(fd, "L", 1); },
                                        .on_stopped_leading = [] { _exit(3); }});
  if (!elector) {
    _exit(4);
  }
  asio::co_spawn(io, (*elector)->Run(), asio::detached);
  io.run();
  _exit(5);
}

// Waits up to `timeout` for one byte on `fd`.
bool WaitForByte(int fd, milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) {
    return false;
  }
  char c = 0;
  return read(fd, &c, 1) == 1 && c == 'L';
}

// A Lease's MicroTime ("2026-01-01T00:00:00.123456Z"); nullopt when malformed.
std::optional<std::chrono::system_clock::time_point> ParseMicroTime(
    const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  std::tm tm{};
  int micros = 0;
  if (std::sscanf(text->c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ", &tm.tm_year, &tm.tm_mon,
                  &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &micros) != 7) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&tm)) + std::chrono::microseconds(micros);
}

// The Lease as it was at one moment (read by the test, not remembered by a candidate).
struct LeaseSeen {
  std::string holder;
  std::optional<std::chrono::system_clock::time_point> acquired;
  std::optional<std::chrono::system_clock::time_point> renewed;
  std::chrono::seconds duration{0};
};

asio::awaitable<std::optional<LeaseSeen>> ReadLease(ClientLeaseStore* store,
                                                    const std::string& name) {
  Result<Lease> l = co_await store->Get("default", name);
  if (!l) co_return std::nullopt;
  co_return LeaseSeen{.holder = l->holder_identity.value_or(""),
                      .acquired = ParseMicroTime(l->acquire_time),
                      .renewed = ParseMicroTime(l->renew_time),
                      .duration = seconds(l->lease_duration_seconds.value_or(0))};
}

struct Failover {
  bool saw_a = false;
  std::optional<SteadyTime> killed_at;
  std::optional<SteadyTime> b_led_at;
  std::optional<LeaseSeen> after_kill;  // a's last renewal (nobody renews it after the kill)
  std::optional<LeaseSeen> b_leads;     // b's acquisition
};

// In the parent's loop: once b has seen a as leader, kill a; then wait for b to lead; then stop b.
asio::awaitable<void> DriveFailover(LeaderElector* b, pid_t child, ClientLeaseStore* store,
                                    std::string lease, Failover* out) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const SteadyTime give_up = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < give_up) {
    if (!out->killed_at && b->Leader() == "candidate-a") {
      out->saw_a = true;
      kill(child, SIGKILL);
      out->killed_at = std::chrono::steady_clock::now();
      out->after_kill = co_await ReadLease(store, lease);
    }
    if (out->killed_at && out->b_led_at) {
      out->b_leads = co_await ReadLease(store, lease);
      break;
    }
    timer.expires_after(milliseconds(20));
    co_await timer.async_wait(asio::use_awaitable);
  }
  b->Stop();
}

std::string UniqueSuffix() {
  return std::to_string(getpid()) + "-" +
         std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
}

TEST(KubeRuntimeE2e, KilledLeaderIsReplacedAfterTheLeaseExpires) {
  std::string why;
  std::optional<Config> config = LoadE2eConfig(&why);
  ASSERT_TRUE(config.has_value()) << why;
  const std::string lease = "sb-runtime-e2e-" + UniqueSuffix();

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    RunChildCandidate(*config, lease, fds[1]);
  }
  close(fds[1]);
  const bool a_leads = WaitForByte(fds[0], milliseconds(20000));
  close(fds[0]);
  if (!a_leads) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    FAIL() << "the child candidate did not become leader within 20 s";
  }

  asio::io_context io;
  std::unique_ptr<Connection> conn = Connection::Open(io, *config, &why);
  ASSERT_NE(conn, nullptr) << why;
  async::SystemClock clock;
  Failover failover;
  auto b = LeaderElector::Create(
      clock, *conn->leases, E2eConfig(lease, "candidate-b"),
      {.on_started_leading = [&] { failover.b_led_at = std::chrono::steady_clock::now(); },
       .on_stopped_leading = [] {}});
  ASSERT_TRUE(b.has_value()) << b.error().message;
  bool b_returned = false;
  asio::co_spawn(io, (*b)->Run(), [&](std::exception_ptr) { b_returned = true; });
  asio::co_spawn(io, DriveFailover(b->get(), child, conn->leases.get(), lease, &failover),
                 asio::detached);
  io.run_for(seconds(90));
  int status = 0;
  waitpid(child, &status, 0);

  ASSERT_TRUE(failover.saw_a) << "b never observed candidate-a as leader";
  ASSERT_TRUE(failover.killed_at.has_value());
  ASSERT_TRUE(failover.b_led_at.has_value()) << "b did not take over within 60 s";
  EXPECT_TRUE(b_returned);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the child must have died by SIGKILL, not by itself";
  const double seconds_taken =
      std::chrono::duration<double>(*failover.b_led_at - *failover.killed_at).count();
  const LeaderElectionConfig c = E2eConfig(lease, "x");
  std::printf("failover after SIGKILL of the leader: %.2f s (leaseDuration %.0f s, retry %.0f s)\n",
              seconds_taken, Seconds(c.lease_duration), Seconds(c.retry_period));
  // Not before the Lease can have expired: b's acquireTime is at least leaseDuration after a's
  // last renewTime, both as written in the Lease (no test-side clock; how long it took after
  // that is the leader election unit tests' matter, on a fake clock).
  ASSERT_TRUE(failover.after_kill && failover.b_leads) << "the Lease could not be read";
  EXPECT_EQ(failover.after_kill->holder, "candidate-a");
  EXPECT_EQ(failover.b_leads->holder, "candidate-b");
  ASSERT_TRUE(failover.after_kill->renewed && failover.b_leads->acquired);
  EXPECT_GE(*failover.b_leads->acquired,
            *failover.after_kill->renewed + failover.after_kill->duration)
      << "b took over a Lease that had not expired";

  // b released on Stop(): the Lease is free and says so.
  asio::io_context io2;
  std::unique_ptr<Connection> conn2 = Connection::Open(io2, *config, &why);
  ASSERT_NE(conn2, nullptr) << why;
  Result<Lease> final_lease = sb::testing::RunSync(io2, conn2->leases->Get("default", lease));
  ASSERT_TRUE(final_lease.has_value()) << final_lease.error().ToString();
  EXPECT_EQ(final_lease->holder_identity.value_or("?"), "");
  EXPECT_EQ(final_lease->lease_duration_seconds, 1);
  EXPECT_EQ(final_lease->lease_transitions, 1) << "a created it (0); b took it over (1)";
}

struct Handover {
  std::optional<SteadyTime> stopped_at;
  std::optional<SteadyTime> b_led_at;
  std::optional<LeaseSeen> before_stop;  // a's renewal before it released
  std::optional<LeaseSeen> b_leads;
};

// Once a leads and b has seen it, stop a (it releases); then wait for b to lead; then stop b.
asio::awaitable<void> DriveHandover(LeaderElector* a, LeaderElector* b, ClientLeaseStore* store,
                                    std::string lease, Handover* out) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const SteadyTime give_up = std::chrono::steady_clock::now() + seconds(30);
  while (std::chrono::steady_clock::now() < give_up) {
    if (!out->stopped_at && a->IsLeader() && b->Leader() == "candidate-a") {
      out->before_stop = co_await ReadLease(store, lease);
      a->Stop();
      out->stopped_at = std::chrono::steady_clock::now();
    }
    if (out->b_led_at) {
      out->b_leads = co_await ReadLease(store, lease);
      break;
    }
    timer.expires_after(milliseconds(20));
    co_await timer.async_wait(asio::use_awaitable);
  }
  a->Stop();
  b->Stop();
}

TEST(KubeRuntimeE2e, ReleasedLeaseIsTakenOverWithinARetryPeriod) {
  std::string why;
  std::optional<Config> config = LoadE2eConfig(&why);
  ASSERT_TRUE(config.has_value()) << why;
  const std::string lease = "sb-runtime-e2e-release-" + UniqueSuffix();
  // Two candidates on one loop (each elector is loop-confined; they share nothing but the
  // apiserver).
  asio::io_context io;
  std::unique_ptr<Connection> conn = Connection::Open(io, *config, &why);
  ASSERT_NE(conn, nullptr) << why;
  async::SystemClock clock;
  Handover handover;
  int returned = 0;
  auto a = LeaderElector::Create(clock, *conn->leases, E2eConfig(lease, "candidate-a"),
                                 {.on_started_leading = [] {}, .on_stopped_leading = [] {}});
  ASSERT_TRUE(a.has_value()) << a.error().message;
  auto b = LeaderElector::Create(
      clock, *conn->leases, E2eConfig(lease, "candidate-b"),
      {.on_started_leading = [&] { handover.b_led_at = std::chrono::steady_clock::now(); },
       .on_stopped_leading = [] {}});
  ASSERT_TRUE(b.has_value()) << b.error().message;
  auto on_return = [&](std::exception_ptr) {
    if (++returned == 2) {
      io.stop();
    }
  };
  asio::co_spawn(io, (*a)->Run(), on_return);
  // b starts a little later, so that a creates the Lease.
  asio::steady_timer later(io, milliseconds(500));
  later.async_wait([&](boost::system::error_code) {
    asio::co_spawn(io, (*b)->Run(), on_return);
    asio::co_spawn(io, DriveHandover(a->get(), b->get(), conn->leases.get(), lease, &handover),
                   asio::detached);
  });
  io.run_for(seconds(45));

  ASSERT_TRUE(handover.stopped_at.has_value()) << "a never led while b watched";
  ASSERT_TRUE(handover.b_led_at.has_value()) << "b did not take over the released Lease";
  EXPECT_EQ(returned, 2);
  const double seconds_taken =
      std::chrono::duration<double>(*handover.b_led_at - *handover.stopped_at).count();
  const LeaderElectionConfig c = E2eConfig(lease, "x");
  std::printf("takeover after the leader released the Lease: %.2f s (retry %.0f s, jitter %.1f)\n",
              seconds_taken, Seconds(c.retry_period), c.jitter_factor);
  // Released: b took the Lease before it could have expired (acquireTime earlier than a's
  // renewal before the release plus leaseDuration, both as the Lease says).
  ASSERT_TRUE(handover.before_stop && handover.b_leads) << "the Lease could not be read";
  EXPECT_EQ(handover.before_stop->holder, "candidate-a");
  EXPECT_EQ(handover.b_leads->holder, "candidate-b");
  ASSERT_TRUE(handover.before_stop->renewed && handover.b_leads->acquired);
  EXPECT_LT(*handover.b_leads->acquired,
            *handover.before_stop->renewed + handover.before_stop->duration)
      << "b waited for the released Lease to expire";
}

TEST(KubeRuntimeE2e, RepeatedEventIsPatchedToCountTwo) {
  std::string why;
  std::optional<Config> config = LoadE2eConfig(&why);
  ASSERT_TRUE(config.has_value()) << why;
  asio::io_context io;
  std::unique_ptr<Connection> conn = Connection::Open(io, *config, &why);
  ASSERT_NE(conn, nullptr) << why;
  async::SystemClock clock;
  ClientEventSink sink(*conn->client);
  EventRecorder recorder(clock, sink, {.source = {.component = "slurm-bridge-e2e"}});

  ObjectMeta pod;
  pod.namespace_ = "default";
  pod.name = "sb-runtime-e2e-" + UniqueSuffix();
  pod.uid = "00000000-0000-0000-0000-000000000001";
  const ObjectReference ref = MakeObjectReference("v1", "Pod", pod);

  Result<RecordOutcome> first = sb::testing::RunSync(
      io, recorder.Record(ref, EventType::kWarning, "FailedScheduling", "no Slurm node fits"));
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  EXPECT_EQ(first->action, RecordOutcome::Action::kCreated);
  Result<RecordOutcome> second = sb::testing::RunSync(
      io, recorder.Record(ref, EventType::kWarning, "FailedScheduling", "no Slurm node fits"));
  ASSERT_TRUE(second.has_value()) << second.error().ToString();
  EXPECT_EQ(second->action, RecordOutcome::Action::kPatched);
  EXPECT_EQ(second->event.metadata.name, first->event.metadata.name);

  // Read it back from the apiserver.
  ResourceRef event_ref = EventsRef("default").WithName(first->event.metadata.name);
  Result<Event> stored = sb::testing::RunSync(io, GetAs<Event>(*conn->client, event_ref));
  ASSERT_TRUE(stored.has_value()) << stored.error().ToString();
  EXPECT_EQ(stored->count, 2);
  EXPECT_EQ(stored->type, "Warning");
  EXPECT_EQ(stored->reason, "FailedScheduling");
  EXPECT_EQ(stored->message, "no Slurm node fits");
  EXPECT_EQ(stored->source_component, "slurm-bridge-e2e");
  EXPECT_EQ(stored->involved_object.name, pod.name);
  EXPECT_EQ(stored->involved_object.kind, "Pod");
  EXPECT_FALSE(stored->first_timestamp.empty());
}

}  // namespace
}  // namespace sb::kube
