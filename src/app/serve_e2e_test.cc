// SPDX-License-Identifier: Apache-2.0
//
// The long-running commands as a process, against the test environment: the health and metrics
// servers of `scheduler` and `controllers` (/healthz, /readyz, /metrics with every metric the
// README's table lists), and a replica that loses its Lease exiting with status 1.
#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "app/readme_metrics.h"
#include "kube/runtime/time_format.h"
#include "net/http_client.h"
#include "testing/bridge_e2e.h"

namespace sb::app {
namespace {

using namespace std::chrono_literals;
using sb::testing::ChildProcess;
using sb::testing::RunSync;

class ServeE2e : public sb::testing::BridgeE2e {
 protected:
  // The port the process logged for its `what` server ("health", "metrics"); 0 until logged.
  int LoggedPort(const std::string& log, const std::string& what) {
    std::ifstream in(dir_ + "/" + log + ".log");
    const std::regex re(what + R"( server on \S+ \(port (\d+)\))");
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, re)) return std::stoi(m[1]);
    }
    return 0;
  }

  // GET http://<host>:<port><target>: the response, or nullopt (and why in *error).
  std::optional<net::HttpResponse> Get(const std::string& host, int port, const std::string& target,
                                       std::string* error = nullptr) {
    auto ep = net::ParseEndpoint("http://" + host + ":" + std::to_string(port));
    if (!ep) return std::nullopt;
    auto http = net::HttpClient::Create(io_.get_executor(), *ep, {});
    if (!http) return std::nullopt;
    auto r = RunSync(io_, (*http)->Send({.method = net::Method::kGet, .target = target}));
    if (!r) {
      if (error != nullptr) *error = r.error().ToString();
      return std::nullopt;
    }
    return *r;
  }

  // Starts `slurm-bridge <subcommand>` with health and metrics on free ports and checks
  // /healthz, /readyz and /metrics. Two addresses (127.0.0.2 is loopback too), so two servers:
  // one address would make one server for both.
  void CheckServers(const std::string& subcommand) {
    auto bridge = StartBridge(
        subcommand,
        {"--metrics-bind-address", "127.0.0.2:0", "--health-probe-bind-address", "127.0.0.1:0"},
        subcommand);
    int health = 0;
    int metrics = 0;
    ASSERT_TRUE(WaitFor(
        [&] {
          health = LoggedPort(subcommand, "health");
          metrics = LoggedPort(subcommand, "metrics");
          return health > 0 && metrics > 0;
        },
        30s))
        << "the servers' ports were not logged";
    ASSERT_NE(health, metrics);

    auto healthz = Get("127.0.0.1", health, "/healthz");
    ASSERT_TRUE(healthz);
    EXPECT_EQ(healthz->status, 200) << healthz->body;
    // Ready once the caches are synced and Slurm was read.
    std::optional<net::HttpResponse> readyz;
    EXPECT_TRUE(WaitFor(
        [&] {
          readyz = Get("127.0.0.1", health, "/readyz");
          return readyz && readyz->status == 200;
        },
        60s))
        << (readyz ? std::to_string(readyz->status) + " " + readyz->body : "no answer");
    // The health server does not serve the metrics, nor the metrics server health.
    auto wrong = Get("127.0.0.1", health, "/metrics");
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 404);

    auto m = Get("127.0.0.2", metrics, "/metrics");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200);
    const std::string& text = m->body;
    const std::vector<ListedMetric> listed = ReadmeMetrics();
    ASSERT_GE(listed.size(), 20u) << "README.md's metrics table not found";
    // The reading of the table itself: a shorthand row and a row with two label keys.
    auto find = [&](const std::string& name) {
      return std::ranges::find_if(listed, [&](const ListedMetric& x) { return x.name == name; });
    };
    ASSERT_NE(find("slurm_bridge_jobs_adopted_total"), listed.end());
    ASSERT_NE(find("slurm_bridge_client_errors_total"), listed.end());
    EXPECT_EQ(find("slurm_bridge_client_errors_total")->labels,
              (std::vector<std::string>{"server", "kind"}));
    for (const ListedMetric& lm : listed) {
      EXPECT_NE(text.find("\n# TYPE " + lm.name + " "), std::string::npos)
          << lm.name << " is in README.md but not served by " << subcommand;
      for (const std::string& label : lm.labels) {
        const std::regex sample("(^|\n)" + lm.name + R"((_bucket)?\{[^}\n]*\b)" + label + "=\"");
        EXPECT_TRUE(std::regex_search(text, sample))
            << lm.name << " has no sample with label " << label;
      }
    }
    EXPECT_NE(text.find("\nslurm_bridge_leader 1\n"), std::string::npos) << "no election: leads";
    AssertAlive(*bridge, subcommand);
    const int status = bridge->Kill(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << bridge->HowItEnded();
  }
};

TEST_F(ServeE2e, SchedulerServesHealthReadinessAndTheReadmeMetrics) { CheckServers("scheduler"); }

TEST_F(ServeE2e, ControllersServeHealthReadinessAndTheReadmeMetrics) {
  CheckServers("controllers");
}

// Another holder takes the Lease (as a replica would after a missed renewal): the leader must
// stop acting and exit with status 1, so that its pod restarts as a standby. The standby stays.
TEST_F(ServeE2e, ReplicaThatLosesTheLeaseExitsOne) {
  const std::string lease = "e2e-" + ns_;
  std::vector<std::string> le = {"--leader-elect", "--leader-election-namespace", ns_,
                                 "--leader-election-id", lease};
  // Not in others_: it is meant to end on its own (TearDown checks that those still run).
  std::unique_ptr<ChildProcess> leader = StartBridge("controllers", le, "a");
  auto lease_now = [&] {
    return RunSync(io_, kube::GetAs<kube::Lease>(*kube_, kube::LeasesRef(ns_).WithName(lease)));
  };
  std::string holder;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto l = lease_now();
        holder = l && l->holder_identity ? *l->holder_identity : "";
        return !holder.empty() && CountInLog("a", "leading (") == 1;
      },
      30s));
  others_.push_back(StartBridge("controllers", le, "b"));
  ASSERT_TRUE(WaitFor([&] { return CountInLog("b", "leader: ") >= 1; }, 30s));
  ASSERT_TRUE(leader->Alive()) << leader->HowItEnded();

  // Someone else holds it now, freshly renewed for an hour: not expired, not ours.
  const std::string now = kube::FormatMicroTime(std::chrono::system_clock::now());
  const std::string patch =
      R"({"spec":{"holderIdentity":"e2e-intruder","leaseDurationSeconds":3600,"acquireTime":")" +
      now + R"(","renewTime":")" + now + R"("}})";
  auto r = RunSync(
      io_, kube_->Patch(kube::LeasesRef(ns_).WithName(lease), kube::PatchType::kJsonMerge, patch));
  ASSERT_TRUE(r) << r.error().message;

  ASSERT_TRUE(WaitFor([&] { return !leader->Alive(); }, 60s)) << "the old leader still runs";
  EXPECT_EQ(leader->HowItEnded(), "exit 1");
  EXPECT_EQ(CountInLog("a", "leadership lost: exiting"), 1);
  auto l = lease_now();
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->holder_identity.value_or(""), "e2e-intruder") << "the Lease was taken back";
  AssertAlive(*others_[0], "the standby");
  EXPECT_EQ(CountInLog("b", "leading ("), 0);
}

}  // namespace
}  // namespace sb::app
