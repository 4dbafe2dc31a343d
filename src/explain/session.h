// SPDX-License-Identifier: Apache-2.0
//
// explain/session.h (internal to explain/)
//
// The clients of one read-only command: the bridge config (or its defaults), a Kubernetes client
// and, when a URL and a token are at hand, a Slurm client; one io_context to run them on.
#pragma once

#include <cstdint>
#include <exception>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "bridge/config.h"
#include "common/error.h"
#include "explain/options.h"
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

// The commands on an open session (RunExplain and RunJobs open one from the options; tests hand
// in one with fakes). Same results and output as those.
int ExplainPod(Session& s, const ToolOptions& options, const std::string& pod, std::ostream& out,
               std::ostream& err);
int ShowJobs(Session& s, const ToolOptions& options, std::ostream& out, std::ostream& err);

// Now, in Unix seconds (the relative times the commands print).
[[nodiscard]] std::int64_t NowUnix();

// What an exception thrown by a command's coroutine says ("unknown exception" when it is not a
// std::exception).
[[nodiscard]] std::string WhatOf(const std::exception_ptr& e);

// Runs `task` on the session's loop to its end and returns what it returned; an error when it
// threw. `task` is the call of a free (or member) coroutine: its arguments live in its frame, by
// value, or are the caller's objects by reference, alive until this returns (the loop has run
// dry by then). Never a capturing lambda coroutine (STYLE.md: the closure may die before the
// frame that refers to it). T: default-constructible, as co_spawn hands one over on a throw.
template <typename T>
[[nodiscard]] Result<T> RunOnLoop(Session& session, boost::asio::awaitable<T> task) {
  std::optional<T> value;
  std::string what = "did not finish";
  boost::asio::co_spawn(session.io, std::move(task), [&](const std::exception_ptr& e, T v) {
    if (e) {
      what = "failed: " + WhatOf(e);
      return;
    }
    value.emplace(std::move(v));
  });
  session.io.run();
  if (!value) return MakeError(ErrorCode::kInternal, what);
  return Result<T>(tl::in_place, std::move(*value));
}

}  // namespace sb::explain
