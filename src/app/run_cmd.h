// SPDX-License-Identifier: Apache-2.0
//
// app/run_cmd.h
//
// `slurm-bridge scheduler`, `slurm-bridge controllers` and `slurm-bridge all`: loads the config,
// connects to kube-apiserver and slurmrestd and hands the components to a Manager
// (app/components.h), which optionally campaigns for leadership on a Lease (only the leader runs
// the components), serves /healthz and /readyz on the health address and /metrics (Prometheus
// text) on the metrics address, and runs until SIGTERM or SIGINT, which stop the components,
// release the Lease and exit 0. `all --webhook` adds the admission webhook on the same loop.
#pragma once

#include <optional>
#include <string>

#include "app/admission_cmd.h"

namespace sb::app {

struct RunOptions {
  std::string config_path = "/etc/slurm-bridge/config.yaml";
  std::string kubeconfig;  // empty: $KUBECONFIG, else in-cluster
  bool scheduler = false;
  bool controllers = false;
  bool leader_elect = false;
  std::string leader_election_namespace;            // empty: the pod's namespace, else "default"
  std::string leader_election_id;                   // empty: per component (see run_cmd.cc)
  std::string metrics_bind_address = ":8080";       // "0" or "": off
  std::string health_probe_bind_address = ":8081";  // "0" or "": off
  // `all --webhook`: the admission webhook too, on every replica (its own health server off:
  // health_probe_bind_address serves the process's probes).
  std::optional<AdmissionOptions> webhook;
};

// Returns the exit status: 0 after a clean shutdown, 1 when start-up fails (the message names
// the config key, file or server) or leadership is lost.
int RunComponents(const RunOptions& options);

}  // namespace sb::app
