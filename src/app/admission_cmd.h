// SPDX-License-Identifier: Apache-2.0
//
// app/admission_cmd.h
//
// `slurm-bridge admission`: the admission webhook (admission/server.h) as a process. It reads the
// bridge config, serves the webhook over HTTPS and /healthz, /readyz over HTTP, and runs until
// SIGTERM or SIGINT; it then stops accepting, lets requests in flight finish (at most
// `shutdown_grace`) and returns 0. Startup errors (config, certificate, address in use,
// kubeconfig when a namespace selector needs one) are logged and return 1.
// The webhook itself is a Component (app/components.h): the process's one, or one of
// `slurm-bridge all --webhook`'s, on the same loop.
//
// Flags (upstream's names and defaults):
//   --config                     /etc/slurm-bridge/config.yaml
//   --kubeconfig                 only read when managedNamespaceSelector is set
//   --bind-address               :9443
//   --cert-file, --key-file      /tmp/k8s-webhook-server/serving-certs/tls.{crt,key}
//   --health-probe-bind-address  :8081 ("0" turns it off)
//   --privileged-user            repeatable: usernames allowed to set the job-id label and the
//                                node annotation (system:serviceaccount:<ns>:<name>; a trailing
//                                '*' matches a prefix). Default, when neither this nor
//                                --privileged-group is given: the chart's ServiceAccounts,
//                                system:serviceaccount:<ns>:slurm-bridge-*, <ns> being the
//                                webhook's own namespace ($POD_NAMESPACE, else the in-cluster
//                                service account's namespace file); none when it is unknown.
//   --privileged-group           repeatable: groups whose users are privileged likewise
//   --system-namespace           repeatable: namespaces whose pods may tolerate the managed-node
//                                taint (default kube-system)
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "common/error.h"

namespace sb::bridge {
struct Config;
}  // namespace sb::bridge

namespace sb::app {

class Component;

struct AdmissionOptions {
  std::string config_path = "/etc/slurm-bridge/config.yaml";
  std::string kubeconfig;
  std::string bind_address = ":9443";
  std::string cert_file = "/tmp/k8s-webhook-server/serving-certs/tls.crt";
  std::string key_file = "/tmp/k8s-webhook-server/serving-certs/tls.key";
  std::string health_probe_bind_address = ":8081";
  std::vector<std::string> privileged_users;
  std::vector<std::string> privileged_groups;
  std::vector<std::string> system_namespaces{"kube-system"};
  std::size_t max_connections_per_ip = 0;  // 0: no per-address cap (admission/server.h)
  std::chrono::milliseconds shutdown_grace{10000};
};

// Runs the webhook until SIGTERM/SIGINT. Returns the process exit status.
int RunAdmission(const AdmissionOptions& options);

// The webhook of `config` (the bridge config, read by the caller) and `options`, listening
// already: a start-up error (certificate, address in use, no apiserver for a namespace selector)
// is returned. Its Run() lasts until Stop(); Stop() stops accepting, open connections finish.
[[nodiscard]] Result<std::unique_ptr<Component>> MakeAdmissionComponent(
    boost::asio::any_io_executor executor, const AdmissionOptions& options,
    const bridge::Config& config);

}  // namespace sb::app
