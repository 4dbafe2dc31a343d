// SPDX-License-Identifier: Apache-2.0
#include "check/check.h"

#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bridge/config.h"
#include "kube/config.h"
#include "net/http_client.h"
#include "slurm/token_source.h"
#include "wiring/clients.h"

namespace sb::check {
namespace asio = boost::asio;
namespace {

tl::unexpected<Error> Context(Error e, const std::string& what) {
  e.message = what + ": " + e.message;
  return tl::unexpected<Error>(std::move(e));
}

}  // namespace

asio::awaitable<Result<bridge::Snapshot>> ReadSnapshot(kube::Client& kube, slurm::Client& slurm,
                                                       const bridge::InvariantOptions& options) {
  bridge::Snapshot s;
  // Named, not a braced temporary in the co_await: GCC 12 destroys such a temporary twice.
  kube::ListOptions paged;
  paged.limit = 500;
  auto pods = co_await kube::ListAllAs<kube::Pod>(kube, kube::PodsRef(options.namespace_), paged);
  if (!pods) co_return Context(pods.error(), "listing pods");
  s.pods = std::move(pods->items);
  auto nodes = co_await kube::ListAllAs<kube::Node>(kube, kube::NodesRef(), paged);
  if (!nodes) co_return Context(nodes.error(), "listing nodes");
  s.nodes = std::move(nodes->items);
  auto jobs = co_await slurm.ListJobs();
  if (!jobs) co_return Context(jobs.error(), "listing Slurm jobs");
  s.jobs = std::move(*jobs);
  co_return s;
}

asio::awaitable<Result<std::vector<bridge::Violation>>> CheckUntilSettled(
    kube::Client& kube, slurm::Client& slurm, bridge::InvariantOptions options,
    SettleOptions settle) {
  const auto deadline = std::chrono::steady_clock::now() + settle.settle;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    Result<bridge::Snapshot> s = co_await ReadSnapshot(kube, slurm, options);
    const bool last = std::chrono::steady_clock::now() >= deadline;
    if (!s && last) co_return tl::unexpected(s.error());
    if (s) {
      std::vector<bridge::Violation> v =
          bridge::CheckInvariants(*s, std::chrono::system_clock::now(), options);
      if (v.empty() || last) co_return v;
    }
    timer.expires_after(settle.interval);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

std::chrono::milliseconds DefaultSettle(std::chrono::milliseconds job_sweep_interval) {
  return std::max<std::chrono::milliseconds>(std::chrono::seconds(5), job_sweep_interval) +
         2 * job_sweep_interval;
}

int RunCheck(const CheckCmdOptions& options, std::ostream& out, std::ostream& err) {
  Result<bridge::Config> config = wiring::LoadConfig(options.config_path);
  if (!config) {
    err << "slurm-bridge check: " << config.error().message << "\n";
    return 1;
  }
  if (config->slurm_rest_api.empty()) {
    err << "slurm-bridge check: " << options.config_path
        << ": config key slurmRestApi is required\n";
    return 1;
  }
  const char* jwt_file = std::getenv("SLURM_JWT_FILE");
  if (jwt_file == nullptr || *jwt_file == '\0') {
    err << "slurm-bridge check: SLURM_JWT_FILE is not set: it names the file holding "
           "slurmrestd's JWT\n";
    return 1;
  }
  SettleOptions settle{.settle = DefaultSettle(config->job_sweep_interval)};
  if (!options.settle.empty()) {
    Result<std::chrono::milliseconds> d = bridge::ParseDuration(options.settle);
    if (!d) {
      err << "slurm-bridge check: --settle: " << d.error().message << "\n";
      return 1;
    }
    settle.settle = *d;
  }

  asio::io_context io(1);
  kube::LoadOptions kube_load;
  kube_load.kubeconfig_path = options.kubeconfig;
  Result<kube::Config> kube_config = kube::LoadConfig(kube_load);
  if (!kube_config) {
    err << "slurm-bridge check: Kubernetes config: " << kube_config.error().message << "\n";
    return 1;
  }
  Result<std::unique_ptr<net::HttpClient>> kube_http =
      kube::MakeHttpClient(io.get_executor(), *kube_config, {});
  if (!kube_http) {
    err << "slurm-bridge check: Kubernetes client: " << kube_http.error().message << "\n";
    return 1;
  }
  std::unique_ptr<kube::Client> kube_client = kube::MakeClient(**kube_http, kube_config->token);
  slurm::ClientConfig slurm_config = wiring::SlurmClientConfig(*config);
  Result<slurm::ClientPtr> slurm_client =
      slurm::MakeClient(io.get_executor(), slurm_config, slurm::MakeFileTokenSource(jwt_file));
  if (!slurm_client) {
    err << "slurm-bridge check: Slurm client: " << slurm_client.error().message << "\n";
    return 1;
  }

  bridge::InvariantOptions inv{.scheduler_name = config->scheduler_name,
                               .cluster_name = config->cluster_name,
                               .namespace_ = options.namespace_};
  if (!options.max_wait.empty()) {
    Result<std::chrono::milliseconds> d = bridge::ParseDuration(options.max_wait);
    if (!d) {
      err << "slurm-bridge check: --max-wait: " << d.error().message << "\n";
      return 1;
    }
    inv.max_wait = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  std::optional<Result<std::vector<bridge::Violation>>> result;
  asio::co_spawn(io, CheckUntilSettled(*kube_client, **slurm_client, inv, settle),
                 [&](const std::exception_ptr& e, Result<std::vector<bridge::Violation>> r) {
                   if (e) {
                     r = MakeError(ErrorCode::kInternal, "the check failed");
                   }
                   result = std::move(r);
                 });
  io.run();
  if (!result || !*result) {
    err << "slurm-bridge check: "
        << (result ? result->error().ToString() : std::string("the check did not finish")) << "\n";
    return 1;
  }
  for (const bridge::Violation& v : **result) out << v.text << "\n";
  if ((*result)->empty()) out << "no violations\n";
  return (*result)->empty() ? 0 : 1;
}

}  // namespace sb::check
