// SPDX-License-Identifier: Apache-2.0
#include "app/run_cmd.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "app/components.h"
#include "app/lease_thread.h"
#include "app/metrics.h"
#include "async/clock.h"
#include "bridge/config.h"
#include "common/strings.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/runtime/leader_election.h"
#include "net/http_server.h"
#include "slurm/client.h"
#include "slurm/job_watch.h"

namespace sb::app {
namespace asio = boost::asio;

namespace {

std::string PodNamespace() {
  std::ifstream in("/var/run/secrets/kubernetes.io/serviceaccount/namespace");
  std::string ns;
  if (in) std::getline(in, ns);
  ns = std::string(TrimWhitespace(ns));
  return ns.empty() ? "default" : ns;
}

std::string Identity() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  return fmt::format("{}_{:08x}{:08x}", host, rd(), rd());
}

bool Enabled(const std::string& address) { return !address.empty() && address != "0"; }

}  // namespace

int RunComponents(const RunOptions& options) {
  Result<bridge::Config> config = bridge::LoadConfig(options.config_path);
  if (!config) {
    spdlog::error("{}", config.error().message);
    return 1;
  }
  for (const std::string& w : config->warnings) spdlog::warn("{}: {}", options.config_path, w);
  if (config->slurm_rest_api.empty()) {
    spdlog::error("{}: config key slurmRestApi is required", options.config_path);
    return 1;
  }
  const char* jwt_file = std::getenv("SLURM_JWT_FILE");
  if (jwt_file == nullptr || *jwt_file == '\0') {
    spdlog::error("SLURM_JWT_FILE is not set: it names the file holding slurmrestd's JWT");
    return 1;
  }

  asio::io_context io(1);
  kube::LoadOptions kube_load;
  kube_load.kubeconfig_path = options.kubeconfig;
  Result<kube::Config> kube_config = kube::LoadConfig(kube_load);
  if (!kube_config) {
    spdlog::error("Kubernetes config: {}", kube_config.error().message);
    return 1;
  }
  net::ClientOptions kube_http_options;
  kube_http_options.max_idle_connections = 64;
  Result<std::unique_ptr<net::HttpClient>> kube_http =
      kube::MakeHttpClient(io.get_executor(), *kube_config, kube_http_options);
  if (!kube_http) {
    spdlog::error("Kubernetes client: {}", kube_http.error().message);
    return 1;
  }
  // clientQPS / clientBurst pace this client only; the Lease has a client of its own.
  std::unique_ptr<kube::Client> kube_client = kube::MakeClient(
      **kube_http, kube_config->token,
      kube::ClientOptions{.qps = config->client_qps, .burst = config->client_burst});

  slurm::ClientConfig slurm_config = bridge::SlurmClientConfig(*config);
  slurm_config.http.max_idle_connections = 32;
  Result<slurm::ClientPtr> slurm_client =
      slurm::MakeClient(io.get_executor(), slurm_config, slurm::MakeFileTokenSource(jwt_file));
  if (!slurm_client) {
    spdlog::error("Slurm client: {}", slurm_client.error().message);
    return 1;
  }

  async::SystemClock clock;
  bool stopping = false;
  int status = 0;
  std::unique_ptr<LeaseThread> elector;
  // One poll of Slurm's job states for every component of this process (issue #24).
  slurm::JobWatch job_watch(io.get_executor(), **slurm_client, clock,
                            bridge::JobWatchOptionsOf(*config));
  const Shared shared{.executor = io.get_executor(),
                      .kube = *kube_client,
                      .slurm = **slurm_client,
                      .clock = clock,
                      .config = *config,
                      .job_watch = job_watch,
                      .leading = [&elector] { return elector == nullptr || elector->IsLeader(); }};
  Manager manager(io.get_executor(), [&] { status = 1; });

  // Made when this replica leads (at once without election).
  auto start_components = [&] {
    if (stopping) return;
    manager.Add(MakeJobWatchComponent(job_watch));
    if (options.scheduler) manager.Add(MakeSchedulerComponent(shared));
    if (options.controllers) {
      // Two clusters sharing one Slurm must not share a clusterName: each would take the other's
      // jobs for its own orphans. The pod controller warns (loudly) when it sees signs of that.
      if (config->cluster_name == bridge::Config{}.cluster_name) {
        spdlog::info(
            "clusterName is the default \"{}\": if another Kubernetes cluster uses this Slurm, "
            "give each cluster its own clusterName, or their bridges cancel each other's jobs",
            config->cluster_name);
      }
      manager.Add(MakePodControllerComponent(shared));
      manager.Add(MakeNodeControllerComponent(shared));
    }
    manager.Start();
  };

  // Health and metrics.
  std::vector<std::unique_ptr<net::HttpServer>> servers;
  auto ready = [&] {
    if (elector && !elector->IsLeader()) return true;  // a standby replica is ready to take over
    return manager.Ready();
  };
  auto healthy = [&] { return !elector || elector->Healthy(std::chrono::seconds(20)); };
  auto metrics = [&](const net::ServerRequest&) {
    MetricsSnapshot snap;
    snap.leader = elector ? elector->IsLeader() : true;
    manager.Collect(snap);
    snap.slurm_http = (*slurm_client)->http_stats();
    snap.kube_http = (*kube_http)->stats();
    return net::TextResponse(200, RenderMetrics(snap), "text/plain; version=0.0.4; charset=utf-8");
  };
  auto add_server = [&](const std::string& address, const std::string& name, bool health,
                        bool with_metrics) -> bool {
    net::ServerOptions so;
    so.bind_address = address;
    so.name = name;
    auto server = std::make_unique<net::HttpServer>(io.get_executor(), so);
    if (health) {
      server->RouteSync("/healthz", [&](const net::ServerRequest&) {
        return healthy() ? net::TextResponse(200, "ok")
                         : net::TextResponse(500, "leader election: lease not renewed");
      });
      server->RouteSync("/readyz", [&](const net::ServerRequest&) {
        return ready() ? net::TextResponse(200, "ok") : net::TextResponse(503, "starting");
      });
    }
    if (with_metrics) server->RouteSync("/metrics", metrics);
    if (Result<void> r = server->Start(); !r) {
      spdlog::error("{} server on {}: {}", name, address, r.error().message);
      return false;
    }
    spdlog::info("{} server on {} (port {})", name, address, server->port());
    servers.push_back(std::move(server));
    return true;
  };
  const bool health_on = Enabled(options.health_probe_bind_address);
  const bool metrics_on = Enabled(options.metrics_bind_address);
  if (health_on && metrics_on &&
      options.health_probe_bind_address == options.metrics_bind_address) {
    if (!add_server(options.health_probe_bind_address, "health+metrics", true, true)) return 1;
  } else {
    if (health_on && !add_server(options.health_probe_bind_address, "health", true, false)) {
      return 1;
    }
    if (metrics_on && !add_server(options.metrics_bind_address, "metrics", false, true)) return 1;
  }

  asio::signal_set signals(io, SIGINT, SIGTERM);
  std::function<void()> shutdown = [&] {
    if (stopping) return;
    stopping = true;
    manager.Stop();
    if (elector) elector->Stop();
    for (auto& s : servers) s->Stop();
    signals.cancel();
  };
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    shutdown();
  });

  if (options.leader_elect) {
    kube::LeaderElectionConfig le;
    le.lease_namespace = options.leader_election_namespace.empty()
                             ? PodNamespace()
                             : options.leader_election_namespace;
    le.lease_name = options.leader_election_id;
    if (le.lease_name.empty()) {
      // Upstream's lease names, so that a mixed roll-over never has two leaders.
      le.lease_name = options.scheduler && options.controllers ? "slurm-bridge"
                      : options.scheduler                      ? "slurm-bridge-scheduler"
                                                               : "69d5fe47.my.slinky.slurm.net";
    }
    le.identity = Identity();
    // The identity is what the Lease's holderIdentity names (scripts/chaos.sh finds the leader
    // by it).
    spdlog::info("leader election: Lease {}/{} as {}", le.lease_namespace, le.lease_name,
                 le.identity);
    kube::LeaderCallbacks callbacks;
    // `le` ends with this block; the callback runs later: copy what it logs.
    callbacks.on_started_leading = [&, where = le.lease_namespace + "/" + le.lease_name] {
      spdlog::info("leading ({}): starting", where);
      start_components();
    };
    callbacks.on_stopped_leading = [&] {
      if (!stopping) {
        spdlog::error("leadership lost: exiting");
        status = 1;
      }
      shutdown();
    };
    callbacks.on_new_leader = [](const std::string& who) {
      if (!who.empty()) spdlog::info("leader: {}", who);
    };
    // On a thread of its own (app/lease_thread.h): renewals do not wait for the main loop.
    Result<kube::Config> lease_kube = kube::LoadConfig(kube_load);
    if (!lease_kube) {
      spdlog::error("Kubernetes config: {}", lease_kube.error().message);
      return 1;
    }
    Result<std::unique_ptr<LeaseThread>> e =
        LeaseThread::Create(io, *lease_kube, le, std::move(callbacks));
    if (!e) {
      spdlog::error("leader election: {}", e.error().message);
      return 1;
    }
    elector = std::move(*e);
    elector->Start();
  } else {
    start_components();
  }
  spdlog::info(
      "slurm-bridge {}{}{}: Slurm at {}, scheduler name {}", options.scheduler ? "scheduler" : "",
      options.scheduler && options.controllers ? "+" : "", options.controllers ? "controllers" : "",
      config->slurm_rest_api, config->scheduler_name);
  io.run();
  return status;
}

}  // namespace sb::app
