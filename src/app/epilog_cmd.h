// SPDX-License-Identifier: Apache-2.0
//
// app/epilog_cmd.h
//
// `slurm-bridge epilog`: meant as (or called from) Slurm's node Epilog (slurm.conf Epilog=),
// which slurmd runs as root on each node of a job when the job ends there. With a batch
// placeholder (config jobMode/placeholder: batch) Slurm keeps the job COMPLETING, its nodes and
// GPUs allocated, until the epilog of every node exits; this command holds its node that way
// until the job's pods on it are gone or finished, so that Slurm does not hand the node to
// another job while a pod's containers still run their grace period (a job Slurm ended itself:
// scancel, time limit, preemption; upstream's #16 and #49).
//
// It reads SLURM_JOB_ID and SLURMD_NODENAME from the environment (Slurm sets both for the
// epilog), lists the pods of the bridge's scheduler (config schedulerName, else
// slurm-bridge-scheduler) labelled scheduler.slinky.slurm.net/slurm-jobid=<job> in every
// namespace and keeps those bound to this Slurm node (app/epilog_logic.h PodsHoldingNode: other
// schedulers' pods and unbound pods, which any tenant can label, never hold it). It polls
// every second until none is left, or gives up after the max wait (--max-wait, default
// DefaultEpilogMaxWait of the config's maxTerminationGracePeriodSeconds). A job no pod lists (a
// native job) returns after that one LIST. An apiserver that cannot be reached is asked again
// every second within the max wait.
//
// Exit status: always 0 once the command line parsed: pods gone, no pods, gave up, and also bad
// input (no SLURM_JOB_ID or SLURMD_NODENAME, an unreadable config or kubeconfig, an apiserver
// down). A non-zero epilog makes Slurm drain the node, and none of these is a fault of the node:
// draining would turn an apiserver outage into a cluster-wide drain. Each case logs one line
// saying why. (A command line that does not parse exits 2 as for every subcommand: a mistyped
// Epilog= line then drains the first node it runs on, which shows the mistake at once.)
// Logs go to stderr (text or JSON lines, --log-format).
#pragma once

#include <string>

namespace sb::app {

struct EpilogOptions {
  std::string config_path;  // empty: no config file (maxTerminationGracePeriodSeconds 300)
  std::string kubeconfig;   // empty: $KUBECONFIG, else in-cluster
  std::string max_wait;     // a duration ("330s", "5m"); empty: DefaultEpilogMaxWait
  std::string log_level = "info";
  std::string log_format = "text";
};

// Returns the exit status (0; see above). Blocks at most the max wait plus a few seconds.
int RunEpilog(const EpilogOptions& options);

}  // namespace sb::app
