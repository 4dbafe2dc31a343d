// SPDX-License-Identifier: Apache-2.0
#include "app/components.h"

#include <algorithm>
#include <exception>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>

#include "controllers/node/node_controller.h"
#include "controllers/pod_controller.h"
#include "scheduler/scheduler.h"

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

class SchedulerComponent final : public Component {
 public:
  explicit SchedulerComponent(const Shared& s)
      : scheduler_(s.executor, s.kube, s.slurm, s.clock, s.config, &s.job_watch) {
    scheduler_.SetWriteGate(s.leading);
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
      : pods_(s.executor, s.kube, s.slurm, s.clock, s.config, PodOptions(s.config), &s.job_watch) {}
  std::string_view name() const override { return "pod controller"; }
  awaitable<Result<void>> Run() override {
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
  controllers::PodController pods_;
};

class NodeControllerComponent final : public Component {
 public:
  explicit NodeControllerComponent(const Shared& s)
      : nodes_(s.executor, s.kube, s.slurm, s.clock, s.config) {}
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

std::unique_ptr<Component> MakeJobWatchComponent(slurm::JobWatch& watch) {
  return std::make_unique<JobWatchComponent>(watch);
}
std::unique_ptr<Component> MakeSchedulerComponent(const Shared& shared) {
  return std::make_unique<SchedulerComponent>(shared);
}
std::unique_ptr<Component> MakePodControllerComponent(const Shared& shared) {
  return std::make_unique<PodControllerComponent>(shared);
}
std::unique_ptr<Component> MakeNodeControllerComponent(const Shared& shared) {
  return std::make_unique<NodeControllerComponent>(shared);
}

void Manager::Start() {
  if (started_) return;
  started_ = true;
  for (const auto& c : components_) {
    Component* component = c.get();
    asio::co_spawn(executor_, component->Run(),
                   [this, component](const std::exception_ptr& e, Result<void> r) {
                     if (!e && r) return;
                     spdlog::error("{}: {}", component->name(),
                                   e ? "crashed" : r.error().ToString());
                     if (on_failed_) on_failed_();
                   });
  }
}

void Manager::Stop() {
  for (const auto& c : components_) c->Stop();
}

bool Manager::Ready() const {
  return started_ && std::ranges::all_of(components_, [](const auto& c) { return c->Ready(); });
}

void Manager::Collect(MetricsSnapshot& snap) const {
  for (const auto& c : components_) c->Collect(snap);
}

}  // namespace sb::app
