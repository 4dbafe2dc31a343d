// SPDX-License-Identifier: Apache-2.0
#include "app/components.h"

#include <algorithm>
#include <csignal>
#include <exception>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>

#include "app/lease_thread.h"
#include "controllers/node/node_controller.h"
#include "controllers/pod/pod_controller.h"
#include "net/http_server.h"
#include "scheduler/scheduler.h"
#include "wiring/clients.h"

namespace sb::app {
namespace asio = boost::asio;
using boost::asio::awaitable;

namespace {

EventStats EventsOf(const kube::EventRecorder& r) { return {r.Dropped(), r.Pending()}; }

class JobWatchComponent final : public Component {
 public:
  explicit JobWatchComponent(slurm::JobWatch& watch) : watch_(watch) {}
  std::string_view name() const override { return "job watch"; }
  awaitable<Result<void>> Run() override {
    co_await watch_.Run();
    co_return Result<void>{};
  }
  void Stop() override { watch_.Stop(); }
  bool Ready() const override { return true; }
  void Collect(MetricsSnapshot& snap) override { snap.job_watch = watch_.stats(); }

 private:
  slurm::JobWatch& watch_;
};

class NodeWatchComponent final : public Component {
 public:
  explicit NodeWatchComponent(slurm::NodeWatch& watch) : watch_(watch) {}
  std::string_view name() const override { return "node watch"; }
  awaitable<Result<void>> Run() override {
    co_await watch_.Run();
    co_return Result<void>{};
  }
  void Stop() override { watch_.Stop(); }
  bool Ready() const override { return true; }
  void Collect(MetricsSnapshot& /*snap*/) override {}

 private:
  slurm::NodeWatch& watch_;
};

class InformersComponent final : public Component {
 public:
  explicit InformersComponent(SharedInformers& informers) : informers_(informers) {}
  std::string_view name() const override { return "shared informers"; }
  awaitable<Result<void>> Run() override {
    co_await informers_.Run();
    co_return Result<void>{};
  }
  void Stop() override { informers_.Stop(); }
  bool Ready() const override { return informers_.HasSynced(); }
  void Collect(MetricsSnapshot& /*snap*/) override {}

 private:
  SharedInformers& informers_;
};

class SchedulerComponent final : public Component {
 public:
  explicit SchedulerComponent(const Shared& s)
      : scheduler_(s.executor, s.kube, s.slurm, s.clock, s.config, &s.job_watch,
                   &s.informers.Nodes()) {
    scheduler_.SetWriteGate(s.leading);
    s.startup_scan.AddUser();
    scheduler_.ShareStartupScan(&s.startup_scan);
  }
  std::string_view name() const override { return "scheduler"; }
  awaitable<Result<void>> Run() override { return scheduler_.Run(); }
  void Stop() override { scheduler_.Stop(); }
  bool Ready() const override { return scheduler_.Ready(); }
  void Collect(MetricsSnapshot& snap) override {
    snap.scheduler = scheduler_.stats();
    snap.scheduler_queue_depth = scheduler_.QueueDepth();
    snap.pods_waiting = scheduler_.WaitingByReason();
    snap.tracked_jobs = scheduler_.TrackedJobs();
    snap.scheduler_events = EventsOf(scheduler_.events());
  }

 private:
  scheduler::Scheduler scheduler_;
};

controllers::PodControllerOptions PodOptions(const bridge::Config& config) {
  controllers::PodControllerOptions po;
  po.sweep_interval = config.job_sweep_interval;
  po.gone_brake = config.job_gone_brake;
  po.bound_job_poll_interval = config.bound_job_poll_interval;
  po.pending_job_poll_interval = config.pending_job_poll_interval;
  po.lifecycle.max_termination_grace_seconds = bridge::GraceCapSeconds(config);
  // A job this young may belong to a pod the informer has not shown yet.
  po.orphan_min_age = std::max<std::chrono::seconds>(
      std::chrono::seconds(5),
      std::chrono::duration_cast<std::chrono::seconds>(config.job_sweep_interval));
  return po;
}

class PodControllerComponent final : public Component {
 public:
  explicit PodControllerComponent(const Shared& s)
      : cluster_name_(s.config.cluster_name),
        pods_(s.executor, s.kube, s.slurm, s.clock, s.config, PodOptions(s.config), &s.job_watch,
              &s.informers.Nodes()) {
    s.startup_scan.AddUser();
    pods_.ShareStartupScan(&s.startup_scan);
  }
  std::string_view name() const override { return "pod controller"; }
  awaitable<Result<void>> Run() override {
    // Two clusters sharing one Slurm must not share a clusterName: each would take the other's
    // jobs for its own orphans. The pod controller warns (loudly) when it sees signs of that.
    if (cluster_name_ == bridge::Config{}.cluster_name) {
      spdlog::info(
          "clusterName is the default \"{}\": if another Kubernetes cluster uses this Slurm, "
          "give each cluster its own clusterName, or their bridges cancel each other's jobs",
          cluster_name_);
    }
    co_await pods_.Run();
    co_return Result<void>{};
  }
  void Stop() override { pods_.Stop(); }
  bool Ready() const override { return pods_.Ready(); }
  void Collect(MetricsSnapshot& snap) override {
    snap.pods = pods_.stats();
    snap.pods_queue_depth = pods_.QueueDepth();
    snap.pods_events = EventsOf(pods_.events());
  }

 private:
  std::string cluster_name_;
  controllers::PodController pods_;
};

class NodeControllerComponent final : public Component {
 public:
  explicit NodeControllerComponent(const Shared& s)
      : nodes_(s.executor, s.kube, s.slurm, s.clock, s.config, &s.informers.Nodes(),
               &s.node_watch) {}
  std::string_view name() const override { return "node controller"; }
  awaitable<Result<void>> Run() override {
    co_await nodes_.Run();
    co_return Result<void>{};
  }
  void Stop() override { nodes_.Stop(); }
  bool Ready() const override { return nodes_.Ready(); }
  void Collect(MetricsSnapshot& snap) override {
    snap.nodes = nodes_.stats();
    snap.nodes_events = EventsOf(nodes_.events());
  }

 private:
  controllers::NodeController nodes_;
};

}  // namespace

std::unique_ptr<Component> MakeSchedulerComponent(const Shared& shared) {
  return std::make_unique<SchedulerComponent>(shared);
}
std::unique_ptr<Component> MakePodControllerComponent(const Shared& shared) {
  return std::make_unique<PodControllerComponent>(shared);
}
std::unique_ptr<Component> MakeNodeControllerComponent(const Shared& shared) {
  return std::make_unique<NodeControllerComponent>(shared);
}

// SharedInformers -------------------------------------------------------------------------------

kube::Informer<kube::Node>& SharedInformers::Nodes() {
  if (!nodes_) nodes_ = std::make_unique<kube::Informer<kube::Node>>(kube_, kube::NodesRef());
  return *nodes_;
}

awaitable<void> SharedInformers::Run() {
  if (nodes_) co_await nodes_->Run();
}

void SharedInformers::Stop() {
  if (nodes_) nodes_->Stop();
}

bool SharedInformers::HasSynced() const { return !nodes_ || nodes_->HasSynced(); }

// Manager ---------------------------------------------------------------------------------------

// The sources of Shared, owned by the Manager.
struct Manager::Sources {
  Sources(Manager& manager, kube::Client& kube, slurm::Client& slurm, async::Clock& clock,
          const bridge::Config& config)
      : job_watch(manager.io_.get_executor(), slurm, clock, wiring::JobWatchOptionsOf(config)),
        node_watch(manager.io_.get_executor(), slurm, clock,
                   slurm::NodeWatchOptions{.list_interval = config.node_list_interval}),
        informers(kube),
        // Users are the components that will read it (each adds itself); a read the second
        // one comes to within a minute is shared. It keeps what the pod controller's start-up
        // check needs (every bridge-tagged job); the scheduler keeps its own of them.
        startup_scan(slurm, clock, &controllers::HasBridgeTag, /*users=*/0,
                     std::chrono::minutes(1)),
        shared{.executor = manager.io_.get_executor(),
               .kube = kube,
               .slurm = slurm,
               .clock = clock,
               .config = config,
               .job_watch = job_watch,
               .node_watch = node_watch,
               .startup_scan = startup_scan,
               .informers = informers,
               .leading = [&manager] { return manager.Leading(); }} {}

  slurm::JobWatch job_watch;
  slurm::NodeWatch node_watch;
  SharedInformers informers;
  slurm::SharedJobScan startup_scan;
  Shared shared;
};

Manager::Manager(asio::io_context& io, ManagerOptions options)
    : io_(io), options_(std::move(options)) {}

Manager::~Manager() = default;

const Shared& Manager::Share(kube::Client& kube, slurm::Client& slurm, async::Clock& clock,
                             const bridge::Config& config) {
  if (!sources_) {
    sources_ = std::make_unique<Sources>(*this, kube, slurm, clock, config);
    Add(std::make_unique<JobWatchComponent>(sources_->job_watch));
    Add(std::make_unique<NodeWatchComponent>(sources_->node_watch));
    Add(std::make_unique<InformersComponent>(sources_->informers));
  }
  return sources_->shared;
}

void Manager::Add(std::unique_ptr<Component> component) {
  elected_.push_back(std::move(component));
}

void Manager::AddUnelected(std::unique_ptr<Component> component) {
  unelected_.push_back(std::move(component));
}

void Manager::AddMetrics(std::function<void(MetricsSnapshot&)> collect) {
  collectors_.push_back(std::move(collect));
}

bool Manager::Leading() const { return elector_ == nullptr || elector_->IsLeader(); }

bool Manager::Ready() const {
  return started_ && std::ranges::all_of(elected_, [](const auto& c) { return c->Ready(); });
}

int Manager::Run() {
  if (!Serve()) return 1;
  signals_ = std::make_unique<asio::signal_set>(io_, SIGINT, SIGTERM);
  signals_->async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping", sig);
    Stop();
  });
  for (const auto& c : unelected_) Spawn(*c);
  if (options_.election) {
    if (!Campaign()) return 1;
  } else {
    StartElected();
  }
  Loop();
  return status_;
}

void Manager::Spawn(Component& component) {
  asio::co_spawn(io_, component.Run(),
                 [this, &component](const std::exception_ptr& e, Result<void> r) {
                   if (!e && r) return;
                   spdlog::error("{}: {}", component.name(), e ? "crashed" : r.error().ToString());
                   status_ = 1;
                 });
}

void Manager::StartElected() {
  if (started_ || stopping_) return;
  started_ = true;
  for (const auto& c : elected_) Spawn(*c);
}

void Manager::Stop() {
  if (stopping_) return;
  stopping_ = true;
  if (started_) {
    for (const auto& c : elected_) c->Stop();
  }
  for (const auto& c : unelected_) c->Stop();
  if (elector_) elector_->Stop();
  for (auto& s : servers_) s->Stop();
  if (signals_) signals_->cancel();
}

void Manager::Loop() {
  if (!options_.shutdown_grace) {
    io_.run();
    return;
  }
  // Until the work runs out after Stop(), or the grace period for open connections ends.
  std::chrono::steady_clock::time_point deadline{};
  for (;;) {
    io_.run_for(std::chrono::milliseconds(200));
    if (io_.stopped()) return;
    if (!stopping_) continue;
    const auto now = std::chrono::steady_clock::now();
    if (deadline == std::chrono::steady_clock::time_point{}) {
      deadline = now + *options_.shutdown_grace;
    } else if (now >= deadline) {
      spdlog::warn("connections still open after {} ms; exiting", options_.shutdown_grace->count());
      return;
    }
  }
}

bool Manager::Campaign() {
  kube::LeaderElectionConfig& le = options_.election->lease;
  // The identity is what the Lease's holderIdentity names (scripts/chaos.sh finds the leader by
  // it).
  spdlog::info("leader election: Lease {}/{} as {}", le.lease_namespace, le.lease_name,
               le.identity);
  kube::LeaderCallbacks callbacks;
  callbacks.on_started_leading = [this, where = le.lease_namespace + "/" + le.lease_name] {
    spdlog::info("leading ({}): starting", where);
    StartElected();
  };
  callbacks.on_stopped_leading = [this] {
    if (!stopping_) {
      spdlog::error("leadership lost: exiting");
      status_ = 1;
    }
    Stop();
  };
  callbacks.on_new_leader = [](const std::string& who) {
    if (!who.empty()) spdlog::info("leader: {}", who);
  };
  // On a thread of its own (app/lease_thread.h): renewals do not wait for the main loop.
  Result<std::unique_ptr<LeaseThread>> e =
      LeaseThread::Create(io_, options_.election->kube, le, std::move(callbacks));
  if (!e) {
    spdlog::error("leader election: {}", e.error().message);
    return false;
  }
  elector_ = std::move(*e);
  elector_->Start();
  return true;
}

namespace {
bool Enabled(const std::string& address) { return !address.empty() && address != "0"; }
}  // namespace

bool Manager::Serve() {
  const std::string& health = options_.health_address;
  const std::string& metrics = options_.metrics_address;
  if (Enabled(health) && Enabled(metrics) && health == metrics) {
    return AddServer(health, "health+metrics", true, true);
  }
  return (!Enabled(health) || AddServer(health, "health", true, false)) &&
         (!Enabled(metrics) || AddServer(metrics, "metrics", false, true));
}

bool Manager::AddServer(const std::string& address, const std::string& name, bool health,
                        bool metrics) {
  net::ServerOptions so;
  so.bind_address = address;
  so.name = name;
  auto server = std::make_unique<net::HttpServer>(io_.get_executor(), so);
  if (health) {
    server->RouteSync("/healthz", [this](const net::ServerRequest&) {
      return !elector_ || elector_->Healthy(std::chrono::seconds(20))
                 ? net::TextResponse(200, "ok")
                 : net::TextResponse(500, "leader election: lease not renewed");
    });
    server->RouteSync("/readyz", [this](const net::ServerRequest&) {
      // A standby replica is ready to take over.
      return !Leading() || Ready() ? net::TextResponse(200, "ok")
                                   : net::TextResponse(503, "starting");
    });
  }
  if (metrics) {
    server->RouteSync("/metrics", [this](const net::ServerRequest&) {
      return net::TextResponse(200, Metrics(), "text/plain; version=0.0.4; charset=utf-8");
    });
  }
  if (Result<void> r = server->Start(); !r) {
    spdlog::error("{} server on {}: {}", name, address, r.error().message);
    return false;
  }
  spdlog::info("{} server on {} (port {})", name, address, server->port());
  servers_.push_back(std::move(server));
  return true;
}

std::string Manager::Metrics() const {
  MetricsSnapshot snap;
  snap.leader = Leading();
  if (started_) {
    for (const auto& c : elected_) c->Collect(snap);
  }
  for (const auto& c : unelected_) c->Collect(snap);
  for (const auto& collect : collectors_) collect(snap);
  return RenderMetrics(snap);
}

}  // namespace sb::app
