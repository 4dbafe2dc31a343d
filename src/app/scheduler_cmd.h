// SPDX-License-Identifier: Apache-2.0
//
// app/scheduler_cmd.h
//
// `slurm-bridge scheduler`: loads the config, connects to kube-apiserver and slurmrestd, runs
// scheduler::Scheduler until SIGTERM or SIGINT.
#pragma once

#include <string>

namespace sb::app {

struct SchedulerOptions {
  std::string config_path = "/etc/slurm-bridge/config.yaml";
  std::string kubeconfig;  // empty: $KUBECONFIG, else in-cluster
  std::string log_level = "info";
};

// Returns the process exit status: 0 after a clean shutdown, 1 when start-up fails (the message
// names the config key, file or server).
int RunScheduler(const SchedulerOptions& options);

}  // namespace sb::app
