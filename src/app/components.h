// SPDX-License-Identifier: Apache-2.0
//
// app/components.h
//
// The long-running parts of a process (the job watch, the scheduler, the pod and node
// controllers) in one shape, and the manager that starts, stops, asks and measures them
// together. run_cmd.cc builds the process around a Manager: the clients, the clock and the
// config are made once and shared (Shared); leader election starts the manager's components
// when this replica leads; health and metrics ask the manager.
//
// Thread model: loop-confined (the process's main loop).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "app/metrics.h"
#include "async/clock.h"
#include "bridge/config.h"
#include "common/error.h"
#include "kube/client.h"
#include "slurm/client.h"
#include "slurm/job_watch.h"

namespace sb::app {

class Component {
 public:
  virtual ~Component() = default;
  // For logs: "scheduler", "pod controller", ...
  [[nodiscard]] virtual std::string_view name() const = 0;
  // Runs until Stop(); an error (or an exception) ends the process with status 1.
  [[nodiscard]] virtual boost::asio::awaitable<Result<void>> Run() = 0;
  // Idempotent; Run() returns soon after.
  virtual void Stop() = 0;
  // Started: caches synced, Slurm read.
  [[nodiscard]] virtual bool Ready() const = 0;
  // Its figures into the process's metrics.
  virtual void Collect(MetricsSnapshot& snap) = 0;
};

// What the components of one process share. Each reference outlives the components.
struct Shared {
  boost::asio::any_io_executor executor;
  kube::Client& kube;
  slurm::Client& slurm;
  async::Clock& clock;
  const bridge::Config& config;
  slurm::JobWatch& job_watch;  // one poll of Slurm's job states for every component
  // Whether this replica still leads (the lease thread's view, ahead of the main loop's); none:
  // no leader election. The scheduler asks it before each write (review R-10).
  std::function<bool()> leading;
};

[[nodiscard]] std::unique_ptr<Component> MakeJobWatchComponent(slurm::JobWatch& watch);
[[nodiscard]] std::unique_ptr<Component> MakeSchedulerComponent(const Shared& shared);
[[nodiscard]] std::unique_ptr<Component> MakePodControllerComponent(const Shared& shared);
[[nodiscard]] std::unique_ptr<Component> MakeNodeControllerComponent(const Shared& shared);

class Manager {
 public:
  // `on_failed` runs when a component's Run() fails or throws (the process should exit 1).
  Manager(boost::asio::any_io_executor executor, std::function<void()> on_failed)
      : executor_(std::move(executor)), on_failed_(std::move(on_failed)) {}

  void Add(std::unique_ptr<Component> component) { components_.push_back(std::move(component)); }
  // Runs every component added; once.
  void Start();
  void Stop();
  // Started, and every component ready.
  [[nodiscard]] bool Ready() const;
  void Collect(MetricsSnapshot& snap) const;

 private:
  boost::asio::any_io_executor executor_;
  std::function<void()> on_failed_;
  std::vector<std::unique_ptr<Component>> components_;
  bool started_ = false;
};

}  // namespace sb::app
