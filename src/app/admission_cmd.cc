// SPDX-License-Identifier: Apache-2.0
#include "app/admission_cmd.h"

#include <csignal>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "admission/review.h"
#include "admission/server.h"
#include "bridge/config.h"
#include "common/files.h"
#include "kube/client.h"
#include "kube/config.h"

namespace sb::app {
namespace asio = boost::asio;

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

}  // namespace

int RunAdmission(const AdmissionOptions& options) {
  Result<bridge::Config> config = bridge::LoadConfig(options.config_path);
  if (!config) {
    spdlog::error("admission: {}", config.error().message);
    return 1;
  }
  for (const std::string& w : config->warnings) {
    spdlog::warn("admission: {}: {}", options.config_path, w);
  }
  admission::Policy policy = admission::PolicyFromConfig(*config, options.privileged_users);
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

  asio::io_context io(1);
  std::unique_ptr<net::HttpClient> http;
  std::unique_ptr<kube::Client> kube_client;
  // The apiserver is read for the namespace selector (the namespaces' labels) and for DRA (the
  // ResourceClaimTemplates and DeviceClasses a pod names). Without a selector, a webhook that
  // cannot reach the apiserver still runs: it judges DRA pods without those objects.
  const bool needs_selector = policy.namespace_selector.has_value();
  if (needs_selector || !policy.device_profiles.empty()) {
    Result<kube::Config> kc = kube::LoadConfig({.kubeconfig_path = options.kubeconfig});
    Result<std::unique_ptr<net::HttpClient>> h =
        kc ? kube::MakeHttpClient(io.get_executor(), *kc, admission::NamespaceClientOptions())
           : Result<std::unique_ptr<net::HttpClient>>(tl::unexpected(kc.error()));
    if (!h && needs_selector) {
      spdlog::error("admission: Kubernetes client: {}", h.error().message);
      return 1;
    }
    if (!h) {
      spdlog::warn(
          "admission: Kubernetes client: {}; DRA claim templates and device classes "
          "are not read",
          h.error().message);
    } else {
      http = std::move(*h);
      kube_client = kube::MakeClient(*http, kc->token);
      spdlog::info("admission: Kubernetes at {} ({})", kc->server, kc->source);
    }
  }

  admission::ServerOptions sopt;
  sopt.bind_address = options.bind_address;
  sopt.cert_file = options.cert_file;
  sopt.key_file = options.key_file;
  sopt.health_bind_address = options.health_probe_bind_address;
  sopt.max_connections_per_ip = options.max_connections_per_ip;
  admission::Server server(io.get_executor(), policy, sopt, kube_client.get());
  if (Result<void> r = server.Start(); !r) {
    spdlog::error("admission: {}", r.error().message);
    return 1;
  }
  if (policy.namespace_selector) {
    spdlog::info("admission: scheduler {}, namespaces by selector", policy.scheduler_name);
  } else {
    spdlog::info("admission: scheduler {}, {} managed namespace(s)", policy.scheduler_name,
                 policy.managed_namespaces.size());
  }

  bool stopping = false;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) {
      return;
    }
    spdlog::info("admission: signal {}, shutting down", signo);
    stopping = true;
    server.Stop();
  });
  // Run until the work runs out after Stop(), or the grace period for open connections ends.
  std::chrono::steady_clock::time_point deadline{};
  for (;;) {
    io.run_for(std::chrono::milliseconds(200));
    if (io.stopped()) {
      break;
    }
    if (stopping) {
      auto now = std::chrono::steady_clock::now();
      if (deadline == std::chrono::steady_clock::time_point{}) {
        deadline = now + options.shutdown_grace;
      } else if (now >= deadline) {
        spdlog::warn("admission: connections still open after {} ms; exiting",
                     options.shutdown_grace.count());
        break;
      }
    }
  }
  spdlog::info("admission: stopped");
  return 0;
}

}  // namespace sb::app
