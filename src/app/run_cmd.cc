// SPDX-License-Identifier: Apache-2.0
#include "app/run_cmd.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>

#include "app/admission_cmd.h"
#include "app/components.h"
#include "async/clock.h"
#include "bridge/config.h"
#include "common/strings.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/runtime/leader_election.h"
#include "slurm/client.h"
#include "wiring/clients.h"

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

// The process's two clients and the HTTP client under the Kubernetes one (for its counters).
struct Clients {
  std::unique_ptr<net::HttpClient> kube_http;
  std::unique_ptr<kube::Client> kube;
  slurm::ClientPtr slurm;
};

// Logs what failed and returns nullopt.
std::optional<Clients> MakeClients(asio::io_context& io, const kube::LoadOptions& kube_load,
                                   const bridge::Config& config, const char* jwt_file) {
  Result<kube::Config> kube_config = kube::LoadConfig(kube_load);
  if (!kube_config) {
    spdlog::error("Kubernetes config: {}", kube_config.error().message);
    return std::nullopt;
  }
  net::ClientOptions kube_http_options;
  kube_http_options.max_idle_connections = 64;
  Result<std::unique_ptr<net::HttpClient>> kube_http =
      kube::MakeHttpClient(io.get_executor(), *kube_config, kube_http_options);
  if (!kube_http) {
    spdlog::error("Kubernetes client: {}", kube_http.error().message);
    return std::nullopt;
  }
  Clients clients;
  clients.kube_http = std::move(*kube_http);
  // clientQPS / clientBurst pace this client only; the Lease has a client of its own.
  clients.kube =
      kube::MakeClient(*clients.kube_http, kube_config->token,
                       kube::ClientOptions{.qps = config.client_qps, .burst = config.client_burst});

  slurm::ClientConfig slurm_config = wiring::SlurmClientConfig(config);
  slurm_config.http.max_idle_connections = 32;
  Result<slurm::ClientPtr> slurm_client =
      slurm::MakeClient(io.get_executor(), slurm_config, slurm::MakeFileTokenSource(jwt_file));
  if (!slurm_client) {
    spdlog::error("Slurm client: {}", slurm_client.error().message);
    return std::nullopt;
  }
  clients.slurm = std::move(*slurm_client);
  return clients;
}

// The Lease to campaign for; nullopt (logged) when its apiserver config cannot be read.
std::optional<ManagerOptions::Election> ElectionOf(const RunOptions& options,
                                                   const kube::LoadOptions& kube_load) {
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
  // The lease thread's own connection.
  Result<kube::Config> lease_kube = kube::LoadConfig(kube_load);
  if (!lease_kube) {
    spdlog::error("Kubernetes config: {}", lease_kube.error().message);
    return std::nullopt;
  }
  return ManagerOptions::Election{.kube = std::move(*lease_kube), .lease = std::move(le)};
}

}  // namespace

int RunComponents(const RunOptions& options) {
  Result<bridge::Config> config = wiring::LoadConfig(options.config_path);
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
  std::optional<Clients> clients = MakeClients(io, kube_load, *config, jwt_file);
  if (!clients) return 1;
  ManagerOptions manager_options{.health_address = options.health_probe_bind_address,
                                 .metrics_address = options.metrics_bind_address};
  if (options.leader_elect) {
    manager_options.election = ElectionOf(options, kube_load);
    if (!manager_options.election) return 1;
  }

  async::SystemClock clock;
  Manager manager(io, std::move(manager_options));
  const Shared& shared = manager.Share(*clients->kube, *clients->slurm, clock, *config);
  if (options.scheduler) manager.Add(MakeSchedulerComponent(shared));
  if (options.controllers) {
    manager.Add(MakePodControllerComponent(shared));
    manager.Add(MakeNodeControllerComponent(shared));
  }
  if (options.webhook) {
    // The webhook on the same loop, on every replica; its probes are the main health server's.
    AdmissionOptions webhook = *options.webhook;
    webhook.health_probe_bind_address = "0";
    Result<std::unique_ptr<Component>> w =
        MakeAdmissionComponent(io.get_executor(), webhook, *config);
    if (!w) {
      spdlog::error("admission: {}", w.error().message);
      return 1;
    }
    manager.AddUnelected(std::move(*w));
  }
  manager.AddMetrics([&clients](MetricsSnapshot& snap) {
    snap.slurm_http = clients->slurm->http_stats();
    snap.kube_http = clients->kube_http->stats();
  });
  spdlog::info(
      "slurm-bridge {}{}{}: Slurm at {}, scheduler name {}", options.scheduler ? "scheduler" : "",
      options.scheduler && options.controllers ? "+" : "", options.controllers ? "controllers" : "",
      config->slurm_rest_api, config->scheduler_name);
  return manager.Run();
}

}  // namespace sb::app
