// SPDX-License-Identifier: Apache-2.0
//
// explain/explain.h
//
// The operator's read-only commands, `slurm-bridge explain|jobs|nodes` (and the same through
// kubectl as `kubectl slurm ...`, the binary installed as kubectl-slurm):
//   - explain POD: the pod's group and members, its Slurm job (state, Slurm's reason in words,
//     priority, fair share, the start Slurm's planner expects), the Slurm nodes the bridge keeps
//     it off and why, and what it waits for (bridge/explain.h decides; this reads).
//   - jobs: the bridge's Slurm jobs with their pods.
//   - nodes: each node's Kubernetes and Slurm state side by side.
// They only read (GET and LIST; never a write to either side), with the Kubernetes credentials
// of --kubeconfig ($KUBECONFIG, else in-cluster) and a Slurm token: --slurm-token-file, else
// $SLURM_JWT (the token itself, as Slurm's tools take it), else $SLURM_JWT_FILE. slurmrestd's
// URL: --slurm-url, else the bridge config's slurmRestApi (--config). Without a URL or token the
// Kubernetes half is still shown, and the Slurm half says why it is missing.
// From Slurm they read only the jobs the pods name (wiring/bridge_jobs.h: the job-id label, a
// waiting pod's PodScheduled message), never the whole job list, so that they answer in moments
// however many jobs of other users Slurm holds: explain at most 8 job reads (the label's job, or
// the candidates of an unlabelled pod's group), jobs one state request per about 2,000 ids and
// the records of the live jobs, 8 at a time. A job no pod names (its pods all gone) is shown by
// `jobs --all-jobs` only, which scans the whole list.
#pragma once

#include <iosfwd>
#include <string>

#include "explain/options.h"

namespace sb::explain {

// `explain POD`: 0 when explained, 1 when the pod or Kubernetes cannot be read.
int RunExplain(const ToolOptions& options, const std::string& pod, std::ostream& out,
               std::ostream& err);
// `jobs`: the bridge's live Slurm jobs (of the namespace, or all with -A) and their pods, by job
// id: those the pods name (with options.all_jobs: every one tagged for the bridge).
int RunJobs(const ToolOptions& options, std::ostream& out, std::ostream& err);
// `nodes`: per node, Kubernetes' and Slurm's state.
int RunNodes(const ToolOptions& options, std::ostream& out, std::ostream& err);

}  // namespace sb::explain
