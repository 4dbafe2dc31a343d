// SPDX-License-Identifier: Apache-2.0
#include "app/scheduler_cmd.h"

#include <csignal>
#include <cstdlib>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "bridge/config.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/runtime/clock.h"
#include "scheduler/scheduler.h"
#include "slurm/client.h"

namespace sb::app {
namespace asio = boost::asio;

int RunScheduler(const SchedulerOptions& options) {
  spdlog::set_level(spdlog::level::from_str(options.log_level));
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
  Result<std::unique_ptr<net::HttpClient>> kube_http =
      kube::MakeHttpClient(io.get_executor(), *kube_config);
  if (!kube_http) {
    spdlog::error("Kubernetes client: {}", kube_http.error().message);
    return 1;
  }
  std::unique_ptr<kube::Client> kube_client = kube::MakeClient(**kube_http, kube_config->token);

  slurm::ClientConfig slurm_config{.url = config->slurm_rest_api,
                                   .user_name = config->slurm_user_name};
  if (!config->slurm_api_version.empty()) {
    slurm_config.version = slurm::ParseApiVersion(config->slurm_api_version);
  }
  slurm_config.http.tls.ca_file = config->slurm_ca_file;
  slurm_config.http.tls.insecure_skip_verify = config->slurm_insecure_skip_verify;
  Result<slurm::ClientPtr> slurm_client =
      slurm::MakeClient(io.get_executor(), slurm_config, slurm::MakeFileTokenSource(jwt_file));
  if (!slurm_client) {
    spdlog::error("Slurm client: {}", slurm_client.error().message);
    return 1;
  }

  kube::SystemClock clock;
  scheduler::Scheduler sched(io.get_executor(), *kube_client, **slurm_client, clock, *config);
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    sched.Stop();
  });
  int status = 0;
  asio::co_spawn(io, sched.Run(), [&](const std::exception_ptr& e, Result<void> r) {
    if (e) {
      status = 1;
      spdlog::error("scheduler crashed");
    } else if (!r) {
      status = 1;
      spdlog::error("scheduler: {}", r.error().ToString());
    }
    signals.cancel();
  });
  spdlog::info("slurm-bridge scheduler {}: Slurm at {}, partition {}", config->scheduler_name,
               config->slurm_rest_api, config->partition.empty() ? "(default)" : config->partition);
  io.run();
  return status;
}

}  // namespace sb::app
