// SPDX-License-Identifier: Apache-2.0
//
// bridge/explain.h
//
// Why a pod is where it is, in Slurm's and Kubernetes' words (pure; `slurm-bridge explain` in
// explain/ reads both sides and renders this): the pod's group and its members, the Slurm job
// (state, Slurm's reason in words, priority, fair share, the start time Slurm's planner
// expects), the Slurm nodes the bridge keeps the job off and why, and what the pod waits for.
// Nothing here writes anywhere.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/translate.h"
#include "kube/types.h"
#include "slurm/types.h"

namespace sb::bridge {

// What `slurm-bridge explain` read. Pointers stay valid while Explain runs.
struct ExplainInput {
  const kube::Pod* pod = nullptr;
  // The pod's group (ResolveGroup), or why it has none: the group cannot be resolved (a
  // PodGroup that cannot be read, a malformed annotation).
  std::optional<GroupSpec> group;
  std::string group_error;
  // The owner the pod's controller chain ended at, when one could not be read.
  std::string owner_unreadable;
  // The live pods of the group (the pod itself included), any order.
  std::vector<const kube::Pod*> members;
  // The pod's Slurm job: the one its job-id label names, else a live one tagged for its group;
  // `job_source` says which ("label", "tag"). `job_error`: Slurm could not be read.
  std::optional<slurm::JobInfo> job;
  std::string job_source;
  std::string job_error;
  // The fair-share factor of the job's association (Slurm's /shares), when Slurm reports it.
  std::optional<double> fairshare;
  // Slurm's node names and the Kubernetes nodes by Slurm name (SlurmNodeName), for the
  // Kubernetes-side exclusions (ExcludedNodes); empty when Slurm's nodes were not read.
  std::vector<std::string> slurm_nodes;
  std::map<std::string, const kube::Node*> k8s_nodes_by_slurm_name;
  NodeUsage used_by_others;
  NodePorts ports_in_use;
  // Now, in Unix seconds (relative times: "in 9m").
  std::int64_t now = 0;
};

struct Explanation {
  struct Member {
    std::string name;  // ns/name
    std::string phase;
    std::string node;  // spec.nodeName, "" while unbound
    bool gated = false;
    bool operator==(const Member&) const = default;
  };
  struct Job {
    std::int64_t id = 0;
    std::string source;  // "label" or "tag"
    std::string state;   // base state
    std::string reason;  // Slurm's state_reason ("" when None)
    std::string reason_words;
    std::string partition;
    std::string account;
    std::string qos;
    std::string user;
    std::string nodes;
    std::optional<std::int64_t> priority;
    std::optional<double> fairshare;
    std::optional<std::int64_t> submit_time;     // Unix seconds
    std::optional<std::int64_t> expected_start;  // a pending job's: Slurm's planner's estimate
    std::optional<std::int64_t> start_time;      // a started job's
    std::optional<std::int64_t> time_limit_minutes;
    bool operator==(const Job&) const = default;
  };
  std::string pod;  // ns/name
  std::string phase;
  std::string node;
  std::vector<std::string> gates;
  std::string scheduled_status;   // PodScheduled's status ("" when the pod has none)
  std::string scheduled_message;  // its message
  // The group.
  std::string group_key;
  std::string group_kind;
  int group_size = 0;  // pods the group needs before its job is submitted
  std::vector<Member> members;
  std::string group_error;
  std::string owner_unreadable;
  std::optional<Job> job;
  std::string job_error;
  // The Slurm nodes the bridge keeps the job off, and why; of how many.
  std::vector<Exclusion> excluded;
  std::size_t slurm_nodes = 0;
  // What the pod waits for, most pressing first ("nothing" when it is bound or done).
  std::vector<std::string> waiting_for;
};

[[nodiscard]] Explanation Explain(const ExplainInput& in);

// Slurm's job state reason in a sentence ("Priority" -> "jobs of higher priority are ahead of
// it in the queue"); the reason itself when unknown.
[[nodiscard]] std::string SlurmReasonWords(std::string_view reason);

// One screen for a terminal; `now`: Unix seconds (relative times).
[[nodiscard]] std::string RenderText(const Explanation& e, std::int64_t now);
// The same as one JSON object (times as RFC 3339 UTC), for scripts.
[[nodiscard]] std::string RenderJson(const Explanation& e);

// "2026-12-04T20:31:05Z".
[[nodiscard]] std::string FormatUnixTime(std::int64_t unix_seconds);
// "in 9m", "in 1h5m", "3m ago", "now".
[[nodiscard]] std::string RelativeTime(std::int64_t when, std::int64_t now);

}  // namespace sb::bridge
