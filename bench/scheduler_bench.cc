// SPDX-License-Identifier: Apache-2.0
//
// scheduler_bench: the scheduler against the real daemons of a running test environment
// ($SB_TESTENV; scripts/bench-scheduler.sh starts one with enough nodes). Prints numbers; asserts
// nothing.
//
//   1. Baseline: N external jobs of the pods' shape submitted straight to slurmrestd; time from
//      the submit call to RUNNING as seen by polling /jobs/state/ every 20 ms.
//   2. Bridge: N pods created through kube-apiserver with `slurm-bridge scheduler` running; time
//      from the create call to spec.nodeName set (polled every 20 ms). p50/p99 of both, and the
//      ratio.
//   3. Steady cost: with the Slurm nodes drained, W pods wait in Slurm's queue; the scheduler's
//      requests to slurmrestd per second over a window, from its /metrics, for W=10 and W=1000.
//
// Usage: scheduler_bench BINARY CONFIG_DIR [pods] [waiting]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>

#include "bridge/names.h"
#include "kube/client.h"
#include "kube/config.h"
#include "slurm/client.h"
#include "testing/child_process.h"
#include "testing/paths.h"
#include "testing/run.h"
#include "testing/testenv.h"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using sb::testing::RunSync;

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::ranges::sort(v);
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::string Slurm(const sb::testing::TestEnv& env, const std::string& cmd) {
  std::string out;
  sb::testing::RunCommand(
      fmt::format("{}/testenv/slurm/exec.sh {} {} 2>&1", sb::testing::SourceDir(), env.dir(), cmd),
      &out);
  return out;
}

// slurm_bridge_client_requests_total{server="slurmrestd"} from the scheduler's /metrics.
double SlurmRequests(int port) {
  std::string out;
  sb::testing::RunCommand(
      fmt::format("curl -s http://127.0.0.1:{}/metrics | grep '^slurm_bridge_client_requests_total"
                  "{{server=\"slurmrestd\"}}' | awk '{{print $2}}'",
                  port),
      &out);
  return out.empty() ? -1 : std::stod(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: scheduler_bench BINARY CONFIG_DIR [pods] [waiting]\n");
    return 2;
  }
  const std::string binary = argv[1];
  const std::string dir = argv[2];
  const int n = argc > 3 ? std::stoi(argv[3]) : 200;
  const int waiting = argc > 4 ? std::stoi(argv[4]) : 1000;
  std::string why;
  std::optional<sb::testing::TestEnv> env = sb::testing::TestEnv::Load(&why);
  if (!env) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 1;
  }
  boost::asio::io_context io;
  ::setenv("KUBECONFIG", env->Get("KUBECONFIG").c_str(), 1);
  auto kcfg = sb::kube::LoadConfig({});
  sb::net::ClientOptions ho;
  ho.max_idle_connections = 64;
  auto http = sb::kube::MakeHttpClient(io.get_executor(), *kcfg, ho);
  auto kube = sb::kube::MakeClient(**http, kcfg->token);
  auto slurm = sb::slurm::MakeClient(io.get_executor(), {.url = env->Get("SLURM_REST_URL")},
                                     sb::slurm::MakeFileTokenSource(env->Get("SLURM_JWT_FILE")));
  const std::string partition = env->Get("SLURM_PARTITION");

  // 1. Baseline: Slurm alone.
  std::vector<double> base;
  {
    std::map<std::int64_t, Clock::time_point> submitted;
    for (int i = 0; i < n; ++i) {
      sb::slurm::JobDescription j;
      j.name = fmt::format("baseline-{}", i);
      j.partition = partition;
      j.flags = {"EXTERNAL_JOB"};
      j.nodes = "1";
      j.minimum_nodes = j.maximum_nodes = 1;
      j.tasks_per_node = 1;
      j.cpus_per_task = 1;
      j.memory_per_node = sb::slurm::NoValNumber::Of(64);
      j.current_working_directory = "/tmp";
      const auto t0 = Clock::now();
      auto r = RunSync(io, (*slurm)->SubmitJob(j));
      if (!r) {
        std::fprintf(stderr, "baseline submit: %s\n", r.error().ToString().c_str());
        return 1;
      }
      submitted[r->job_id] = t0;
    }
    std::map<std::int64_t, double> running;
    const auto deadline = Clock::now() + 120s;
    while (running.size() < submitted.size() && Clock::now() < deadline) {
      auto states = RunSync(io, (*slurm)->JobStates({}));
      const auto now = Clock::now();
      if (states) {
        for (const auto& s : *states) {
          auto it = submitted.find(s.job_id);
          if (it != submitted.end() && !s.state.empty() && s.state[0] == "RUNNING" &&
              !running.contains(s.job_id)) {
            running[s.job_id] = std::chrono::duration<double, std::milli>(now - it->second).count();
          }
        }
      }
      std::this_thread::sleep_for(20ms);
    }
    for (const auto& [id, ms] : running) base.push_back(ms);
    for (const auto& [id, t] : submitted) (void)RunSync(io, (*slurm)->CancelJob(id, {}));
    std::this_thread::sleep_for(3s);  // let the cancelled jobs leave the nodes
  }

  // 2. The bridge.
  const int port = 18000 + (::getpid() % 1000);
  std::ofstream(dir + "/config.yaml")
      << fmt::format("slurmRestApi: {}\npartition: {}\nmcsLabel: kubernetes\n",
                     env->Get("SLURM_REST_URL"), partition);
  auto sched = std::make_unique<sb::testing::ChildProcess>(
      std::vector<std::string>{binary, "scheduler", "--config", dir + "/config.yaml",
                               "--metrics-bind-address", fmt::format("127.0.0.1:{}", port),
                               "--health-probe-bind-address", "0"},
      std::map<std::string, std::string>{{"SLURM_JWT_FILE", env->Get("SLURM_JWT_FILE")},
                                         {"KUBECONFIG", env->Get("KUBECONFIG")}},
      dir + "/scheduler.log");
  const std::string ns = "bench";
  (void)RunSync(
      io, kube->Create(sb::kube::NamespacesRef(),
                       R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench"}})"));
  std::this_thread::sleep_for(1s);  // the scheduler's start-up (caches, adoption)
  auto create = [&](const std::string& name) {
    std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},
        "spec":{{"schedulerName":"slurm-bridge-scheduler","containers":[{{"name":"c",
        "image":"busybox","resources":{{"limits":{{"cpu":"1","memory":"64Mi"}}}}}}]}}}})",
        name, ns);
    return RunSync(io, kube->Create(sb::kube::PodsRef(ns), manifest));
  };
  std::map<std::string, Clock::time_point> created;
  for (int i = 0; i < n; ++i) {
    const std::string name = fmt::format("p{:04}", i);
    const auto t0 = Clock::now();
    if (auto r = create(name); !r) {
      std::fprintf(stderr, "create: %s\n", r.error().ToString().c_str());
      return 1;
    }
    created[name] = t0;
  }
  std::map<std::string, double> bound;
  const auto deadline = Clock::now() + 180s;
  while (bound.size() < created.size() && Clock::now() < deadline) {
    auto pods = RunSync(io, sb::kube::ListAs<sb::kube::Pod>(*kube, sb::kube::PodsRef(ns), {}));
    const auto now = Clock::now();
    if (pods) {
      for (const auto& p : pods->items) {
        if (!p.spec.node_name.empty() && !bound.contains(p.metadata.name)) {
          bound[p.metadata.name] =
              std::chrono::duration<double, std::milli>(now - created[p.metadata.name]).count();
        }
      }
    }
    std::this_thread::sleep_for(20ms);
  }
  std::vector<double> lat;
  for (const auto& [name, ms] : bound) lat.push_back(ms);
  std::printf("pods=%d slurm_direct_running=%zu bridge_bound=%zu\n", n, base.size(), bound.size());
  std::printf("slurm submit->RUNNING   p50 %.0f ms  p99 %.0f ms  (Slurm alone, polled 20 ms)\n",
              Percentile(base, 0.5), Percentile(base, 0.99));
  std::printf("pod create->bound       p50 %.0f ms  p99 %.0f ms  (through the bridge)\n",
              Percentile(lat, 0.5), Percentile(lat, 0.99));
  std::printf("ratio bridge/slurm      p50 %.2f  p99 %.2f\n",
              Percentile(lat, 0.5) / std::max(1.0, Percentile(base, 0.5)),
              Percentile(lat, 0.99) / std::max(1.0, Percentile(base, 0.99)));

  // 3. Steady cost while pods wait.
  auto clear = [&] {
    auto pods = RunSync(io, sb::kube::ListAs<sb::kube::Pod>(*kube, sb::kube::PodsRef(ns), {}));
    if (pods) {
      for (const auto& p : pods->items) {
        (void)RunSync(io, kube->Patch(sb::kube::PodsRef(ns).WithName(p.metadata.name),
                                      sb::kube::PatchType::kJsonMerge,
                                      R"({"metadata":{"finalizers":null}})"));
      }
    }
    (void)RunSync(io, kube->Delete(sb::kube::PodsRef(ns), {.grace_period_seconds = 0}));
    auto jobs = RunSync(io, (*slurm)->ListJobs());
    if (jobs) {
      for (const auto& j : *jobs) {
        if (j.BaseState() == "PENDING" || j.BaseState() == "RUNNING") {
          (void)RunSync(io, (*slurm)->CancelJob(j.job_id, {}));
        }
      }
    }
    std::this_thread::sleep_for(3s);
  };
  clear();
  Slurm(*env, "scontrol update nodename=ALL state=drain reason=bench-hold");
  for (int w : {10, waiting}) {
    for (int i = 0; i < w; ++i) (void)create(fmt::format("w{:04}", i));
    // Wait until every pod has its job, then let things settle.
    const auto until = Clock::now() + 300s;
    for (;;) {
      auto pods = RunSync(io, sb::kube::ListAs<sb::kube::Pod>(*kube, sb::kube::PodsRef(ns), {}));
      std::size_t labelled = 0;
      if (pods) {
        for (const auto& p : pods->items) {
          if (p.metadata.labels.contains(std::string(sb::bridge::kJobIdLabel))) ++labelled;
        }
      }
      if (labelled >= static_cast<std::size_t>(w) || Clock::now() > until) break;
      std::this_thread::sleep_for(200ms);
    }
    std::this_thread::sleep_for(6s);
    const double a = SlurmRequests(port);
    const auto t0 = Clock::now();
    std::this_thread::sleep_for(20s);
    const double b = SlurmRequests(port);
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("waiting pods %5d: %.2f slurmrestd requests/s (over %.0f s)\n", w, (b - a) / secs,
                secs);
    clear();
  }
  Slurm(*env, "scontrol update nodename=ALL state=resume");
  sched->Kill(SIGTERM);
  return 0;
}
