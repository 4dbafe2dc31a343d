// SPDX-License-Identifier: Apache-2.0
#include "app/admission_cmd.h"

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "admission/review.h"
#include "admission/server.h"
#include "app/components.h"
#include "bridge/config.h"
#include "common/files.h"
#include "kube/client.h"
#include "kube/config.h"
#include "wiring/clients.h"

namespace sb::app {
namespace asio = boost::asio;
using asio::awaitable;

namespace {

// The namespace this process runs in: $POD_NAMESPACE (downward API), else the namespace of the
// mounted service account; "" when neither is there.
std::string OwnNamespace() {
  if (const char* env = std::getenv("POD_NAMESPACE"); env != nullptr && *env != '\0') {
    return env;
  }
  std::optional<std::string> file =
      ReadWholeFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace");
  if (!file) {
    return "";
  }
  std::string ns = *file;
  while (!ns.empty() && (ns.back() == '\n' || ns.back() == ' ')) {
    ns.pop_back();
  }
  return ns;
}

admission::Policy PolicyOf(const AdmissionOptions& options, const bridge::Config& config) {
  admission::Policy policy = admission::PolicyFromConfig(config, options.privileged_users);
  policy.privileged_groups = options.privileged_groups;
  policy.system_namespaces = options.system_namespaces;
  if (policy.privileged_users.empty() && policy.privileged_groups.empty()) {
    policy.privileged_users = admission::DefaultPrivilegedUsers(OwnNamespace());
    if (policy.privileged_users.empty()) {
      spdlog::warn(
          "admission: own namespace unknown (no POD_NAMESPACE, not in a cluster) and no "
          "--privileged-user: nobody may change the bridge's job-id label or node annotation");
    }
  }
  for (const std::string& u : policy.privileged_users) {
    spdlog::info("admission: privileged user {}", u);
  }
  return policy;
}

// The webhook's server and the apiserver client it reads namespaces and DRA objects with.
class AdmissionComponent final : public Component {
 public:
  explicit AdmissionComponent(asio::any_io_executor executor)
      : executor_(executor), done_(std::move(executor)) {}
  std::string_view name() const override { return "admission webhook"; }

  // The client (when the policy needs the apiserver), then the listening server.
  Result<void> Start(admission::Policy policy, const AdmissionOptions& options) {
    // The apiserver is read for the namespace selector (the namespaces' labels) and for DRA (the
    // ResourceClaimTemplates and DeviceClasses a pod names). Without a selector, a webhook that
    // cannot reach the apiserver still runs: it judges DRA pods without those objects.
    const bool needs_selector = policy.namespace_selector.has_value();
    if (needs_selector || !policy.device_profiles.empty()) {
      Result<kube::Config> kc = kube::LoadConfig({.kubeconfig_path = options.kubeconfig});
      Result<std::unique_ptr<net::HttpClient>> h =
          kc ? kube::MakeHttpClient(executor_, *kc, admission::NamespaceClientOptions())
             : Result<std::unique_ptr<net::HttpClient>>(tl::unexpected(kc.error()));
      if (!h && needs_selector) {
        return tl::unexpected(Error{h.error().code, "Kubernetes client: " + h.error().message});
      }
      if (!h) {
        spdlog::warn(
            "admission: Kubernetes client: {}; DRA claim templates and device classes "
            "are not read",
            h.error().message);
      } else {
        http_ = std::move(*h);
        kube_ = kube::MakeClient(*http_, kc->token);
        spdlog::info("admission: Kubernetes at {} ({})", kc->server, kc->source);
      }
    }
    admission::ServerOptions sopt;
    sopt.bind_address = options.bind_address;
    sopt.cert_file = options.cert_file;
    sopt.key_file = options.key_file;
    sopt.health_bind_address = options.health_probe_bind_address;
    sopt.max_connections_per_ip = options.max_connections_per_ip;
    const bool by_selector = policy.namespace_selector.has_value();
    const std::string scheduler_name = policy.scheduler_name;
    const std::size_t managed = policy.managed_namespaces.size();
    server_ = std::make_unique<admission::Server>(executor_, std::move(policy), sopt, kube_.get());
    if (Result<void> r = server_->Start(); !r) return r;
    if (by_selector) {
      spdlog::info("admission: scheduler {}, namespaces by selector", scheduler_name);
    } else {
      spdlog::info("admission: scheduler {}, {} managed namespace(s)", scheduler_name, managed);
    }
    return Result<void>{};
  }

  awaitable<Result<void>> Run() override {
    if (!stopped_) {
      done_.expires_at(asio::steady_timer::time_point::max());
      (void)co_await done_.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    co_return Result<void>{};
  }
  void Stop() override {
    if (stopped_) return;
    stopped_ = true;
    server_->Stop();
    done_.cancel();
  }
  bool Ready() const override { return server_->Ready(); }
  void Collect(MetricsSnapshot& /*snap*/) override {}

 private:
  asio::any_io_executor executor_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  std::unique_ptr<admission::Server> server_;  // destroyed before the client it reads with
  asio::steady_timer done_;                    // Run() waits on it until Stop()
  bool stopped_ = false;
};

}  // namespace

Result<std::unique_ptr<Component>> MakeAdmissionComponent(asio::any_io_executor executor,
                                                          const AdmissionOptions& options,
                                                          const bridge::Config& config) {
  auto component = std::make_unique<AdmissionComponent>(std::move(executor));
  if (Result<void> r = component->Start(PolicyOf(options, config), options); !r) {
    return tl::unexpected(r.error());
  }
  return component;
}

int RunAdmission(const AdmissionOptions& options) {
  Result<bridge::Config> config = wiring::LoadConfig(options.config_path);
  if (!config) {
    spdlog::error("admission: {}", config.error().message);
    return 1;
  }
  for (const std::string& w : config->warnings) {
    spdlog::warn("admission: {}: {}", options.config_path, w);
  }
  asio::io_context io(1);
  // The webhook serves its own probes (options.health_probe_bind_address): no leader election,
  // no metrics.
  Manager manager(io, ManagerOptions{.shutdown_grace = options.shutdown_grace});
  Result<std::unique_ptr<Component>> webhook =
      MakeAdmissionComponent(io.get_executor(), options, *config);
  if (!webhook) {
    spdlog::error("admission: {}", webhook.error().message);
    return 1;
  }
  manager.AddUnelected(std::move(*webhook));
  const int status = manager.Run();
  spdlog::info("admission: stopped");
  return status;
}

}  // namespace sb::app
