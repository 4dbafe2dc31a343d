// SPDX-License-Identifier: Apache-2.0
//
// app/metrics.h
//
// The Prometheus text (exposition format 0.0.4) that `scheduler`, `controllers` and `all` serve
// on /metrics, rendered from a snapshot of the components' counters (pure: no I/O). A component
// that does not run in this process is rendered from zeroed stats, so every process serves every
// metric of docs/operations.md's table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "controllers/node/node_controller.h"
#include "controllers/pod/pod_controller.h"
#include "net/http_client.h"
#include "scheduler/scheduler.h"
#include "slurm/job_watch.h"

namespace sb::app {

// One component's Event recorder.
struct EventStats {
  std::uint64_t dropped = 0;  // queue full, spam-filtered, or failed for good
  std::size_t pending = 0;    // queued, not yet being written
};

struct MetricsSnapshot {
  bool leader = true;  // leads, or runs without election
  scheduler::Stats scheduler;
  controllers::PodControllerStats pods;
  controllers::NodeControllerStats nodes;
  std::size_t scheduler_queue_depth = 0;
  std::size_t pods_queue_depth = 0;
  std::size_t tracked_jobs = 0;
  // Pods told they wait, by why (scheduler::WaitingReason).
  std::map<std::string, std::size_t> pods_waiting;
  EventStats scheduler_events;
  EventStats pods_events;
  EventStats nodes_events;
  slurm::JobWatchStats job_watch;  // the process's one poll of Slurm's job states
  net::ClientStats slurm_http;
  net::ClientStats kube_http;
};

[[nodiscard]] std::string RenderMetrics(const MetricsSnapshot& s);

}  // namespace sb::app
