// SPDX-License-Identifier: Apache-2.0
//
// controllers/pod_controller.h
//
// Keeps pods and their Slurm jobs in step once the scheduler has bound them (decisions in
// pod_lifecycle.h):
//   - a bound pod whose job ended (scancel, preemption, time limit, node failure) or vanished is
//     deleted, with a Warning event in Slurm's words;
//   - a job whose pods are all done (Succeeded/Failed, or deleted and past their grace period
//     with their kubelet gone) is cancelled, and the pods' finalizer removed;
//   - orphan sweep: a job tagged by this cluster's scheduler whose pods (checked by UID) no
//     longer exist is cancelled. Jobs without the bridge's tag, or with another cluster's or
//     scheduler's, are never touched.
// Slurm is read at a constant cost: one GET /jobs/state/ per jobPollInterval while pods with a
// job exist, one GET /jobs/ per sweep interval, a GET /job/{id} only when a job ends.
//
// Thread model: loop-confined.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "bridge/config.h"
#include "controllers/pod_lifecycle.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/runtime/clock.h"
#include "kube/runtime/event_recorder.h"
#include "kube/runtime/kube_adapters.h"
#include "kube/runtime/task_group.h"
#include "kube/runtime/work_queue.h"
#include "slurm/client.h"

namespace sb::controllers {

struct PodControllerOptions {
  std::chrono::milliseconds sweep_interval{30000};  // orphan sweep (GET /jobs/)
  std::chrono::seconds orphan_min_age{30};          // younger jobs are not swept (informer lag)
  LifecycleOptions lifecycle;
};

struct PodControllerStats {
  std::uint64_t pods_deleted = 0;
  std::uint64_t jobs_cancelled = 0;
  std::uint64_t orphans_cancelled = 0;
  std::uint64_t finalizers_removed = 0;
  std::uint64_t state_polls = 0;
  std::uint64_t sweeps = 0;
  std::uint64_t errors = 0;
};

class PodController {
 public:
  PodController(boost::asio::any_io_executor executor, kube::Client& kube, slurm::Client& slurm,
                kube::Clock& clock, bridge::Config config, PodControllerOptions options = {});
  ~PodController();
  PodController(const PodController&) = delete;
  PodController& operator=(const PodController&) = delete;

  [[nodiscard]] boost::asio::awaitable<void> Run();
  void Stop();
  [[nodiscard]] bool Ready() const { return ready_; }
  [[nodiscard]] const PodControllerStats& stats() const { return stats_; }
  [[nodiscard]] std::size_t QueueDepth() { return queue_.Len(); }

 private:
  void OnPod(const kube::Pod& pod);
  boost::asio::awaitable<void> Worker();
  boost::asio::awaitable<Result<void>> Reconcile(std::int64_t job_id);
  boost::asio::awaitable<void> PollSlurm();
  boost::asio::awaitable<void> Sweep();
  boost::asio::awaitable<Result<void>> ReleaseFinalizer(const kube::Pod& pod);

  boost::asio::any_io_executor executor_;
  kube::Client& kube_;
  slurm::Client& slurm_;
  kube::Clock& clock_;
  bridge::Config config_;
  PodControllerOptions options_;
  kube::Informer<kube::Pod> pods_;
  kube::Informer<kube::Node> nodes_;
  kube::ClientEventSink event_sink_;
  kube::EventRecorder recorder_;
  kube::WorkQueue<std::int64_t> queue_;
  std::unordered_map<std::int64_t, std::string> states_;  // job id -> Slurm base state
  std::unordered_map<std::int64_t, kube::Clock::TimePoint> first_seen_;  // job id -> first label
  PodControllerStats stats_;
  bool ready_ = false;
  bool stopping_ = false;
  kube::TaskGroup tasks_;
};

}  // namespace sb::controllers
