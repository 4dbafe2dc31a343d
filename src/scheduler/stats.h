// SPDX-License-Identifier: Apache-2.0
//
// scheduler/stats.h
//
// The scheduler's counters and latency histograms (read by app/metrics.h), apart from the
// Scheduler class so that the binder, which counts into them, needs no more of it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace sb::scheduler {

// Seconds, counted into Prometheus buckets (count <= bound, not cumulative).
struct LatencyHistogram {
  static constexpr std::array<double, 12> kBounds = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1,    2.5,   5,    10,  30,   60};
  std::array<std::uint64_t, 12> buckets{};
  std::uint64_t count = 0;
  double sum = 0;
  void Observe(double seconds) {
    for (std::size_t i = 0; i < kBounds.size(); ++i) {
      if (seconds <= kBounds[i]) {
        ++buckets[i];
        break;
      }
    }
    ++count;
    sum += seconds;
  }
};

struct Stats {
  // A submit sent to Slurm's answer; a job seen RUNNING to its pods bound (this process's jobs).
  LatencyHistogram submit_latency;
  LatencyHistogram bind_latency;
  std::uint64_t jobs_submitted = 0;
  std::uint64_t jobs_adopted = 0;
  std::uint64_t jobs_replaced = 0;   // ended before binding
  std::uint64_t jobs_cancelled = 0;  // their pods went away before binding (or were re-created)
  std::uint64_t duplicates_cancelled = 0;  // a second job of a group
  std::uint64_t unmapped_cancelled = 0;    // allocated a node Kubernetes lacks
  std::uint64_t jobs_updated = 0;          // pending jobs sent a changed description
  // Pending jobs cancelled to be submitted anew: a change their limits look at (review R-1).
  std::uint64_t jobs_resubmitted = 0;
  std::uint64_t submit_errors = 0;
  std::uint64_t pods_bound = 0;
  std::uint64_t bind_errors = 0;
  std::uint64_t bound_elsewhere = 0;  // bound by another writer first (the Binding's 409)
  // Pods patched with the job id while being bound (the cache did not show the label set after
  // the submit yet); the others get only the Binding.
  std::uint64_t bind_patches = 0;
  std::uint64_t claims_written = 0;  // DRA ResourceClaims allocated from Slurm's layout
  std::uint64_t state_polls = 0;
  std::uint64_t job_lists = 0;
  std::uint64_t job_lists_unchanged = 0;  // of job_lists: Slurm said no job changed
  // The known jobs made current (GET /jobs/state/ of them), and single jobs read in full for
  // their reason or a changed state (GET /job/{id}).
  std::uint64_t job_refreshes = 0;
  std::uint64_t job_detail_reads = 0;
};

}  // namespace sb::scheduler
