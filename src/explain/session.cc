// SPDX-License-Identifier: Apache-2.0
#include "explain/session.h"

#include <chrono>
#include <cstdlib>
#include <exception>

#include "kube/config.h"
#include "slurm/token_source.h"
#include "wiring/clients.h"

namespace sb::explain {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

Result<std::unique_ptr<Session>> OpenSession(const ToolOptions& options) {
  auto s = std::make_unique<Session>();
  if (!options.config_path.empty()) {
    Result<bridge::Config> config = wiring::LoadConfig(options.config_path);
    if (!config) return tl::unexpected(config.error());
    s->config = std::move(*config);
  }
  kube::LoadOptions load;
  load.kubeconfig_path = options.kubeconfig;
  Result<kube::Config> kube_config = kube::LoadConfig(load);
  if (!kube_config) {
    return MakeError(kube_config.error().code, "Kubernetes config: " + kube_config.error().message);
  }
  s->namespace_ = options.namespace_.empty() ? kube_config->default_namespace : options.namespace_;
  Result<std::unique_ptr<net::HttpClient>> http =
      kube::MakeHttpClient(s->io.get_executor(), *kube_config, {});
  if (!http) return MakeError(http.error().code, "Kubernetes client: " + http.error().message);
  s->kube_http = std::move(*http);
  s->kube = kube::MakeClient(*s->kube_http, kube_config->token);

  slurm::ClientConfig slurm_config = wiring::SlurmClientConfig(s->config);
  if (!options.slurm_url.empty()) slurm_config.url = options.slurm_url;
  slurm::TokenSourcePtr token;
  if (!options.slurm_token_file.empty()) {
    token = slurm::MakeFileTokenSource(options.slurm_token_file);
  } else if (std::string jwt = Env("SLURM_JWT"); !jwt.empty()) {
    token = slurm::MakeStaticTokenSource(std::move(jwt));
  } else if (std::string file = Env("SLURM_JWT_FILE"); !file.empty()) {
    token = slurm::MakeFileTokenSource(std::move(file));
  }
  if (slurm_config.url.empty()) {
    s->slurm_missing = "no slurmrestd URL (give --slurm-url, or --config with slurmRestApi)";
  } else if (!token) {
    s->slurm_missing =
        "no Slurm token (give --slurm-token-file, or set SLURM_JWT or SLURM_JWT_FILE)";
  } else {
    Result<slurm::ClientPtr> slurm =
        slurm::MakeClient(s->io.get_executor(), slurm_config, std::move(token));
    if (!slurm) {
      s->slurm_missing = "Slurm client: " + slurm.error().message;
    } else {
      s->slurm = std::move(*slurm);
    }
  }
  return s;
}

std::int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string WhatOf(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace sb::explain
