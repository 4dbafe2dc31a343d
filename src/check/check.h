// SPDX-License-Identifier: Apache-2.0
//
// check/check.h
//
// The I/O half of the invariant checker (bridge/invariants.h): reads both sides — pods and
// nodes from the apiserver, jobs from slurmrestd — and checks them, again and again until no
// violation is left or the settle time has passed. `slurm-bridge check` (RunCheck) and the
// end-to-end tests' fixture use it.
//
// Which jobs are read (JobScope): by default `slurm-bridge check` reads only the jobs the
// bridge's pods name (wiring/bridge_jobs.h), so that its cost follows the bridge's pods, not the
// size of Slurm's queue (50,000 jobs of other users are a 400 MB, 40 s list). What that cannot
// see, `--all-jobs` (JobScope::kAll) finds in a scan of the whole list: see JobScope.
#pragma once

#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "bridge/invariants.h"
#include "common/error.h"
#include "kube/client.h"
#include "slurm/client.h"

namespace sb::check {

// The Slurm jobs a snapshot holds.
enum class JobScope {
  // The jobs the bridge's pods name (their job-id label; a waiting pod's PodScheduled message
  // "waiting for Slurm job N ..."): their states (one /jobs/state/ request per about 2,000 ids),
  // and the records (GET /job/{id}, 8 at a time) of those whose state matters: every job not
  // ended, and an ended one only where two of its pods share a node (invariant 6). An ended job
  // is kept with its state alone. Invariants 1, 4 and 6 (bound pods) are checked as with the
  // whole list; the others see only these jobs: a job no pod names is missed, e.g. an orphan
  // whose pods are gone, a second live job of a group that no pod names, a RUNNING job whose
  // waiting pod is told of another one, a job without a state no pod names.
  kNamedByPods,
  // Also every job tagged for this bridge (cluster and scheduler name), from one scan of
  // Slurm's whole job list (slurm::Client::ScanJobs, which keeps only those and the named ones):
  // every invariant as written. Slurm builds the whole list for it: seconds for a few thousand
  // jobs, about 40 s and GBs of slurmrestd's memory for 50,000.
  kAll,
};

// Our pods (spec.schedulerName) of `options.namespace_` (all namespaces when empty), every node,
// and the Slurm jobs of `jobs`.
[[nodiscard]] boost::asio::awaitable<Result<bridge::Snapshot>> ReadSnapshot(
    kube::Client& kube, slurm::Client& slurm, const bridge::InvariantOptions& options,
    JobScope jobs);

struct SettleOptions {
  // How long violations may take to go away (0: one snapshot).
  std::chrono::milliseconds settle{0};
  // Pause between two snapshots.
  std::chrono::milliseconds interval{500};
  // Which jobs each snapshot reads. kAll by default here, for the end-to-end tests' check after
  // every test (a test environment's Slurm holds few jobs, and an orphan whose pods are gone
  // must be seen); `slurm-bridge check` reads kNamedByPods unless given --all-jobs.
  JobScope jobs = JobScope::kAll;
};

// Checks until no violation is left or `settle` has passed; the violations of the last check.
// An error when a server cannot be read (at the last try).
[[nodiscard]] boost::asio::awaitable<Result<std::vector<bridge::Violation>>> CheckUntilSettled(
    kube::Client& kube, slurm::Client& slurm, bridge::InvariantOptions options,
    SettleOptions settle);

// The default settle time for a bridge configured with `job_sweep_interval`: the pod
// controller's minimum orphan age (the sweep interval, at least 5 s) plus two sweeps.
[[nodiscard]] std::chrono::milliseconds DefaultSettle(std::chrono::milliseconds job_sweep_interval);

struct CheckCmdOptions {
  std::string config_path = "/etc/slurm-bridge/config.yaml";
  std::string kubeconfig;  // empty: $KUBECONFIG, else in-cluster
  std::string namespace_;  // empty: every namespace
  std::string settle;      // a duration ("90s"); empty: DefaultSettle
  std::string max_wait;    // invariant 8's limit ("5m"); empty: off
  bool all_jobs = false;   // JobScope::kAll; false: kNamedByPods
};

// `slurm-bridge check`: prints one line per violation to `out` ("no violations" when none).
// Returns 0 when there is none, 1 when there are (or a server or the config cannot be read).
int RunCheck(const CheckCmdOptions& options, std::ostream& out, std::ostream& err);

}  // namespace sb::check
