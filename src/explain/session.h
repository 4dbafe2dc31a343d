// SPDX-License-Identifier: Apache-2.0
//
// explain/session.h (internal to explain/)
//
// The clients of one read-only command: the bridge config (or its defaults), a Kubernetes client
// and, when a URL and a token are at hand, a Slurm client; one io_context to run them on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "bridge/config.h"
#include "common/error.h"
#include "explain/explain.h"
#include "kube/client.h"
#include "net/http_client.h"
#include "slurm/client.h"

namespace sb::explain {

struct Session {
  boost::asio::io_context io{1};
  bridge::Config config;
  std::string namespace_;  // the namespace to look in (the option, else the context's)
  std::unique_ptr<net::HttpClient> kube_http;
  std::unique_ptr<kube::Client> kube;
  slurm::ClientPtr slurm;  // null when Slurm cannot be reached: `slurm_missing` says why
  std::string slurm_missing;
};

// Makes the clients; an error names what could not be read (the config, the kubeconfig).
[[nodiscard]] Result<std::unique_ptr<Session>> OpenSession(const ToolOptions& options);

// Now, in Unix seconds (the relative times the commands print).
[[nodiscard]] std::int64_t NowUnix();

// Runs `body` on the session's loop to its end; an error when it threw.
[[nodiscard]] Result<void> RunOnLoop(Session& session,
                                     std::function<boost::asio::awaitable<void>()> body);

}  // namespace sb::explain
