// SPDX-License-Identifier: Apache-2.0
//
// bridge/parts.h
//
// Groups made of parts of different shapes (a launcher and its workers, an LWS leader and its
// workers) as one Slurm heterogeneous job: one component per part, each sized from its own pods
// and kept off the nodes its own pods cannot run on, all allocated at once or none (pure).
//
// A pod's part (PartName):
//   - JobSet: its replicated job (label jobset.sigs.k8s.io/replicatedjob-name);
//   - LeaderWorkerSet: "leader" (label leaderworkerset.sigs.k8s.io/worker-index "0") or
//     "worker";
//   - PodGroup (coscheduling or Workload API), whose pods come from any template: its shape,
//     "shape-<16 hex digits>" of what the translation and the node exclusion read of a pod
//     (resources, requests, node selector, required affinity, tolerations, host ports);
//   - any other group (a Job's pods share one template): "", one part.
// Parts are ordered by name; a component's offset is its part's index. The job is heterogeneous
// only when there are two parts or more and their descriptions differ in more than the node
// count: a JobSet whose replicated jobs ask for the same is one ordinary job, as before.
//
// Tags: the first component's admin_comment is the group's tag (bridge/tag.h) with every pod of
// the job, in component order, and the part names (JobTag::parts); the other components carry
// upstream's {"pods": [...]} of their own pods only, which no bridge reads as its own, so that
// job lists see one job per group.
#pragma once

#include <string>
#include <vector>

#include "bridge/translate.h"
#include "common/error.h"
#include "kube/types.h"
#include "slurm/types.h"

namespace sb::bridge {

struct Part {
  std::string name;
  std::vector<const kube::Pod*> pods;  // in the order they were given
};

// The part `pod` belongs to in `group` (see above).
[[nodiscard]] std::string PartName(const GroupSpec& group, const kube::Pod& pod);

// `pods` split by PartName, ordered by name (a group of one part: one Part).
[[nodiscard]] std::vector<Part> SplitParts(const GroupSpec& group,
                                           const std::vector<const kube::Pod*>& pods);

// The job(s) a complete group is submitted as.
struct GroupJob {
  // One entry: an ordinary job for every pod (Translate's). Several: a heterogeneous job's
  // components, in offset order.
  std::vector<slurm::JobDescription> components;
  std::vector<std::string> parts;                   // the part of each component; empty: one job
  std::vector<std::vector<const kube::Pod*>> pods;  // each component's pods (one entry: all)
  [[nodiscard]] bool heterogeneous() const { return components.size() > 1; }
};

// Translate (translate.h) for the group as a whole or, when its parts differ, for each part (its
// node count: its pod count). Errors as Translate's.
[[nodiscard]] Result<GroupJob> TranslateGroup(const GroupSpec& group,
                                              const std::vector<const kube::Pod*>& pods,
                                              const TranslateOptions& options);

// The offset of `part` in `parts` (a heterogeneous job's tag), or -1. An ordinary job (`parts`
// empty) has one component: 0.
[[nodiscard]] int PartOffset(const std::vector<std::string>& parts, const std::string& part);

}  // namespace sb::bridge
