// SPDX-License-Identifier: Apache-2.0
//
// check/check.h
//
// The I/O half of the invariant checker (bridge/invariants.h): reads both sides — pods and
// nodes from the apiserver, jobs from slurmrestd — and checks them, again and again until no
// violation is left or the settle time has passed. `slurm-bridge check` (RunCheck) and the
// end-to-end tests' fixture use it.
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

// Pods of `options.namespace_` (all namespaces when empty), every node, every Slurm job.
[[nodiscard]] boost::asio::awaitable<Result<bridge::Snapshot>> ReadSnapshot(
    kube::Client& kube, slurm::Client& slurm, const bridge::InvariantOptions& options);

struct SettleOptions {
  // How long violations may take to go away (0: one snapshot).
  std::chrono::milliseconds settle{0};
  // Pause between two snapshots.
  std::chrono::milliseconds interval{500};
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
};

// `slurm-bridge check`: prints one line per violation to `out` ("no violations" when none).
// Returns 0 when there is none, 1 when there are (or a server or the config cannot be read).
int RunCheck(const CheckCmdOptions& options, std::ostream& out, std::ostream& err);

}  // namespace sb::check
