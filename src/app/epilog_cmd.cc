// SPDX-License-Identifier: Apache-2.0
#include "app/epilog_cmd.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "app/epilog_logic.h"
#include "app/logging.h"
#include "bridge/config.h"
#include "bridge/names.h"
#include "bridge/translate.h"
#include "kube/client.h"
#include "kube/config.h"
#include "wiring/clients.h"

namespace sb::app {
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::seconds kPollInterval{1};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string Secs(Clock::duration d) {
  return fmt::format("{:.1f}s", std::chrono::duration<double>(d).count());
}

struct Outcome {
  bool released = false;
  std::string why;  // the log line's reason
};

// Polls the job's pods (of scheduler `scheduler_name`) until none holds `slurm_node` or
// `deadline` passes.
asio::awaitable<void> Hold(kube::Client& kube, std::int64_t job_id, std::string slurm_node,
                           std::string scheduler_name, Clock::time_point deadline, Outcome& out) {
  const Clock::time_point start = Clock::now();
  kube::ListOptions list;
  list.label_selector = fmt::format("{}={}", bridge::kJobIdLabel, job_id);
  // Other schedulers' pods never hold the node (PodsHoldingNode): not even listed, so that a
  // native job whose id a tenant's pod carries still costs one LIST.
  list.field_selector = "spec.schedulerName=" + scheduler_name;
  const kube::ResourceRef pods_ref = kube::PodsRef();
  std::map<std::string, std::string> slurm_name_of;  // Kubernetes node -> Slurm node
  std::vector<std::string> last_holding;
  int failures = 0;
  bool listed = false;  // a LIST has answered
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    Result<kube::List<kube::Pod>> pods = co_await kube::ListAllAs<kube::Pod>(kube, pods_ref, list);
    if (!pods) {
      ++failures;
      // The first failure and then one line in ten: a down apiserver would fill slurmd's log.
      if (failures % 10 == 1) {
        spdlog::warn("job {} on {}: listing its pods failed ({} so far): {}; trying again", job_id,
                     slurm_node, failures, pods.error().ToString());
      }
      out.why = fmt::format("the apiserver could not be read ({} failures, last: {})", failures,
                            pods.error().ToString());
    } else {
      if (!listed && pods->items.empty()) {
        out.released = true;
        out.why = "no pod lists the job (not a bridge job)";
        co_return;
      }
      const bool first = !listed;
      listed = true;
      NodeHold hold = PodsHoldingNode(pods->items, slurm_node, slurm_name_of, scheduler_name);
      for (const std::string& name : hold.unknown_nodes) {
        Result<kube::Node> node = co_await kube::GetNode(kube, name);
        if (node) {
          slurm_name_of[name] = bridge::SlurmNodeName(*node);
        } else if (node.error().code == ErrorCode::kNotFound) {
          slurm_name_of[name] = name;  // no such Node: its name is all there is to go by
        } else {
          spdlog::warn("job {} on {}: reading node {} failed: {}", job_id, slurm_node, name,
                       node.error().ToString());
        }
      }
      if (!hold.unknown_nodes.empty())
        hold = PodsHoldingNode(pods->items, slurm_node, slurm_name_of, scheduler_name);
      if (hold.Released()) {
        out.released = true;
        out.why = first ? "no pod of the job runs on this node"
                        : "the job's pods on this node are gone or finished";
        co_return;
      }
      if (hold.holding != last_holding) {
        spdlog::info("job {} on {}: waiting for pod(s) {} (at most {} more)", job_id, slurm_node,
                     fmt::join(hold.holding, ", "), Secs(deadline - Clock::now()));
        last_holding = hold.holding;
      }
      out.why = fmt::format("pod(s) {} still there after {}", fmt::join(hold.holding, ", "),
                            Secs(Clock::now() - start));
    }
    // Poll once more at the deadline itself, then give up.
    const Clock::duration left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) co_return;
    timer.expires_after(std::min<Clock::duration>(kPollInterval, left));
    co_await timer.async_wait(asio::use_awaitable);
  }
}

}  // namespace

int RunEpilog(const EpilogOptions& options) {
  // slurmd keeps the epilog's stderr, not its stdout: log there.
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "epilog", std::make_shared<spdlog::sinks::stderr_sink_mt>()));
  ConfigureLogging(options.log_level, options.log_format);
  const Clock::time_point start = Clock::now();

  const std::string job_text = Env("SLURM_JOB_ID");
  const std::string slurm_node = Env("SLURMD_NODENAME");
  const std::optional<std::int64_t> job_id = ParseEpilogJobId(job_text);
  if (!job_id) {
    spdlog::error("epilog: SLURM_JOB_ID is {}: nothing to do (run it as slurmd's Epilog)",
                  job_text.empty() ? "not set" : "'" + job_text + "', not a job id");
    return 0;
  }
  if (slurm_node.empty()) {
    spdlog::error(
        "epilog: job {}: SLURMD_NODENAME is not set: nothing to do (run it as "
        "slurmd's Epilog)",
        *job_id);
    return 0;
  }

  std::optional<std::int64_t> grace;
  std::string scheduler_name(bridge::kDefaultSchedulerName);
  if (!options.config_path.empty()) {
    Result<bridge::Config> config = wiring::LoadConfig(options.config_path);
    if (config) {
      grace = config->max_termination_grace_seconds;
      scheduler_name = config->scheduler_name;
    } else {
      spdlog::warn("epilog: job {}: {}; waiting at most the default, for pods of {}", *job_id,
                   config.error().message, scheduler_name);
    }
  }
  std::chrono::milliseconds max_wait = DefaultEpilogMaxWait(grace);
  if (!options.max_wait.empty()) {
    Result<std::chrono::milliseconds> d = bridge::ParseDuration(options.max_wait);
    if (d) {
      max_wait = *d;
    } else {
      spdlog::warn("epilog: job {}: --max-wait: {}; waiting at most {}", *job_id, d.error().message,
                   Secs(max_wait));
    }
  }
  const Clock::time_point deadline = start + max_wait;

  asio::io_context io(1);
  kube::LoadOptions kube_load;
  kube_load.kubeconfig_path = options.kubeconfig;
  Result<kube::Config> kube_config = kube::LoadConfig(kube_load);
  if (!kube_config) {
    spdlog::error("epilog: job {} on {}: Kubernetes config: {}; not waiting", *job_id, slurm_node,
                  kube_config.error().message);
    return 0;
  }
  net::ClientOptions http_options;
  // Each try bounded well inside the max wait; the loop asks again every second.
  http_options.timeout = std::min<std::chrono::milliseconds>(std::chrono::seconds(10), max_wait);
  http_options.connect_timeout = std::chrono::seconds(3);
  http_options.max_attempts = 2;
  Result<std::unique_ptr<net::HttpClient>> http =
      kube::MakeHttpClient(io.get_executor(), *kube_config, http_options);
  if (!http) {
    spdlog::error("epilog: job {} on {}: Kubernetes client: {}; not waiting", *job_id, slurm_node,
                  http.error().message);
    return 0;
  }
  std::unique_ptr<kube::Client> kube = kube::MakeClient(**http, kube_config->token);

  Outcome outcome;
  bool finished = false;
  asio::co_spawn(io, Hold(*kube, *job_id, slurm_node, scheduler_name, deadline, outcome),
                 [&](const std::exception_ptr& e) {
                   finished = true;
                   if (e) outcome.why = "an internal error";
                   io.stop();
                 });
  // However a request hangs, the epilog ends by the deadline (and a moment for the last try).
  asio::steady_timer guard(io);
  guard.expires_at(deadline + std::chrono::seconds(1));
  guard.async_wait([&](const boost::system::error_code& ec) {
    if (!ec) io.stop();
  });
  io.run();

  const std::string took = Secs(Clock::now() - start);
  if (outcome.released) {
    if (outcome.why.starts_with("no pod lists")) {
      spdlog::debug("epilog: job {} on {}: {}; done in {}", *job_id, slurm_node, outcome.why, took);
    } else {
      spdlog::info("epilog: job {} on {}: {}; done in {}", *job_id, slurm_node, outcome.why, took);
    }
  } else {
    spdlog::warn(
        "epilog: job {} on {}: gave up after {} (max wait {}{}): {}; Slurm now frees the "
        "node",
        *job_id, slurm_node, took, Secs(max_wait), finished ? "" : ", a request hung",
        outcome.why.empty() ? std::string("no answer") : outcome.why);
  }
  return 0;
}

}  // namespace sb::app
