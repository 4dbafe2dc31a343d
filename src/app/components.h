// SPDX-License-Identifier: Apache-2.0
//
// app/components.h
//
// The process. Its long-running parts (the job and node watches, the shared informers, the
// scheduler, the pod and node controllers, the admission webhook) have one shape, Component; the
// Manager owns everything around them: the sources they share (Share()), the health and metrics
// servers, the signal set, leader election (app/lease_thread.h) and the loop. So run_cmd.cc reads
// "build the clients, add the components, run", and a new component is one Add.
//
// Two kinds of component: those added with Add() run while this replica leads (at once without
// leader election), those added with AddUnelected() (the webhook) run on every replica from
// Run() on. SIGTERM or SIGINT stops them all, releases the Lease and ends Run() with status 0;
// leadership lost ends it with 1.
//
// Thread model: loop-confined (the process's main loop); only the lease thread runs beside it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "app/metrics.h"
#include "async/clock.h"
#include "bridge/config.h"
#include "common/error.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "kube/runtime/leader_election.h"
#include "slurm/client.h"
#include "slurm/job_watch.h"
#include "slurm/node_watch.h"
#include "slurm/shared_job_scan.h"

namespace sb::net {
class HttpServer;
}

namespace sb::app {

class LeaseThread;

class Component {
 public:
  virtual ~Component() = default;
  // For logs: "scheduler", "pod controller", ...
  [[nodiscard]] virtual std::string_view name() const = 0;
  // Runs until Stop(); an error (or an exception) gives the process exit status 1.
  [[nodiscard]] virtual boost::asio::awaitable<Result<void>> Run() = 0;
  // Idempotent; Run() returns soon after.
  virtual void Stop() = 0;
  // Started: caches synced, Slurm read.
  [[nodiscard]] virtual bool Ready() const = 0;
  // Its figures into the process's metrics.
  virtual void Collect(MetricsSnapshot& snap) = 0;
};

// The informers the components of one process share, so that `slurm-bridge all` watches each
// kind once. Each is made on its first use (a component's constructor) and run by the Manager
// while this replica leads; one nobody asked for is never made. Ask before the Manager starts the
// components.
//
// The Pods stay per component: the scheduler watches unbound pods of its scheduler name and bound
// pods of every scheduler, the pod controller the pods of its scheduler name, three selections.
class SharedInformers {
 public:
  explicit SharedInformers(kube::Client& kube) : kube_(kube) {}
  // Every Node (kube::NodesRef(), no selector).
  [[nodiscard]] kube::Informer<kube::Node>& Nodes();
  // Runs the informers made so far until Stop().
  [[nodiscard]] boost::asio::awaitable<void> Run();
  void Stop();
  [[nodiscard]] bool HasSynced() const;

 private:
  kube::Client& kube_;
  std::unique_ptr<kube::Informer<kube::Node>> nodes_;
};

// What the components of one process share. Each reference outlives the components.
struct Shared {
  boost::asio::any_io_executor executor;
  kube::Client& kube;
  slurm::Client& slurm;
  async::Clock& clock;
  const bridge::Config& config;
  slurm::JobWatch& job_watch;    // one poll of Slurm's job states for every component
  slurm::NodeWatch& node_watch;  // one list of Slurm's nodes for every component
  // One start-up read of Slurm's whole job list (the jobs with a bridge tag) for the scheduler
  // and the pod controller of one process (issue #46: two at once doubled slurmrestd's memory).
  slurm::SharedJobScan& startup_scan;
  SharedInformers& informers;  // one Node informer for every component
  // Whether this replica still leads (the lease thread's view, ahead of the main loop's); always
  // true without leader election. The scheduler asks it before each write (review R-10).
  std::function<bool()> leading;
};

[[nodiscard]] std::unique_ptr<Component> MakeSchedulerComponent(const Shared& shared);
[[nodiscard]] std::unique_ptr<Component> MakePodControllerComponent(const Shared& shared);
[[nodiscard]] std::unique_ptr<Component> MakeNodeControllerComponent(const Shared& shared);

struct ManagerOptions {
  // /healthz and /readyz; "" or "0": none.
  std::string health_address;
  // /metrics (Prometheus text); "" or "0": none. The health address too: one server for both.
  std::string metrics_address;
  // With leader election the components added with Add() run only while this replica holds the
  // Lease. `kube`: the apiserver of the lease thread (a connection of its own).
  struct Election {
    kube::Config kube;
    kube::LeaderElectionConfig lease;
  };
  std::optional<Election> election;
  // After SIGTERM, how long the loop may run on (open connections finishing their requests);
  // none: until its work is done.
  std::optional<std::chrono::milliseconds> shutdown_grace;
};

class Manager {
 public:
  Manager(boost::asio::io_context& io, ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // The sources the components share: made on the first call, from these clients (each must
  // outlive the Manager), and run as components of their own (Add).
  [[nodiscard]] const Shared& Share(kube::Client& kube, slurm::Client& slurm, async::Clock& clock,
                                    const bridge::Config& config);
  // Runs while this replica leads.
  void Add(std::unique_ptr<Component> component);
  // Runs on every replica, from Run() on (the webhook); not in /readyz.
  void AddUnelected(std::unique_ptr<Component> component);
  // Figures beyond the components' for /metrics (the clients' HTTP counters).
  void AddMetrics(std::function<void(MetricsSnapshot&)> collect);

  // Serves health and metrics, campaigns for the Lease (or starts the components at once) and
  // runs the loop until SIGTERM or SIGINT. Returns the exit status: 0 after a clean shutdown, 1
  // when a server or the election cannot start, a component failed or leadership was lost.
  [[nodiscard]] int Run();
  // What SIGTERM does: stops the components, the lease thread and the servers; Run() returns
  // once the loop's work is done. Idempotent.
  void Stop();

  // Whether this replica leads (true without leader election).
  [[nodiscard]] bool Leading() const;
  // The components added with Add() started, and each ready.
  [[nodiscard]] bool Ready() const;

 private:
  struct Sources;
  [[nodiscard]] bool Serve();
  [[nodiscard]] bool AddServer(const std::string& address, const std::string& name, bool health,
                               bool metrics);
  [[nodiscard]] bool Campaign();
  void Spawn(Component& component);
  void StartElected();
  void Loop();
  [[nodiscard]] std::string Metrics() const;

  boost::asio::io_context& io_;
  ManagerOptions options_;
  std::unique_ptr<Sources> sources_;
  std::vector<std::unique_ptr<Component>> elected_;
  std::vector<std::unique_ptr<Component>> unelected_;
  std::vector<std::function<void(MetricsSnapshot&)>> collectors_;
  std::vector<std::unique_ptr<net::HttpServer>> servers_;
  std::unique_ptr<boost::asio::signal_set> signals_;
  std::unique_ptr<LeaseThread> elector_;
  bool started_ = false;
  bool stopping_ = false;
  int status_ = 0;
};

}  // namespace sb::app
