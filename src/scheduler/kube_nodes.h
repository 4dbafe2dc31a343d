// SPDX-License-Identifier: Apache-2.0
//
// scheduler/kube_nodes.h
//
// The Kubernetes side of placement as the scheduler sees it: every Node (the process's shared
// informer, or one of its own), every bound unfinished pod (what other schedulers' pods request
// and the host ports every pod holds, N-13), and the Slurm nodes that pods of one shape cannot
// run on (bridge::ExcludedNodes), kept per shape until something that decides them changes
// (issue #13: 1,000 pods of one shape cost one walk over the nodes, not one each).
//
// It decides nothing about groups: a change that matters on a Slurm node is reported by
// callback (the scheduler then looks at its pending groups again).
//
// Thread model: loop-confined (the scheduler's executor). References returned are valid until
// the next informer event, i.e. until the caller's next co_await.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "async/task_group.h"
#include "bridge/translate.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/types.h"

namespace sb::scheduler {

class KubeNodes {
 public:
  struct Hooks {
    // Slurm's nodes as last listed (SlurmJobs::nodes()).
    std::function<const std::vector<std::string>&()> slurm_nodes;
    // A node, or another pod on a Slurm node, changed what the exclusions are.
    std::function<void()> changed;
  };
  // `shared`: the process's Node informer, run by its owner; none: one of its own, run by
  // Start(). `scheduler_name`'s own bound pods count for their host ports only.
  KubeNodes(kube::Client& kube, std::string scheduler_name, kube::Informer<kube::Node>* shared,
            Hooks hooks);
  KubeNodes(const KubeNodes&) = delete;
  KubeNodes& operator=(const KubeNodes&) = delete;

  // Runs the informers this owns in `tasks` until Stop().
  void Start(async::TaskGroup& tasks);
  void Stop();
  [[nodiscard]] bool HasSynced() const;

  // Kubernetes nodes by the Slurm node name they map to (slinky.slurm.net/slurm-nodename, else
  // their name); kept until a node event. Several nodes claiming one name are logged once.
  [[nodiscard]] const std::map<std::string, const kube::Node*>& BySlurmName() const;
  // What the bound pods hold per Kubernetes node, summed in one walk when they changed.
  struct Bound {
    bridge::NodeUsage others_usage;  // the requests of other schedulers' pods
    bridge::NodePorts ports;         // the host ports of every bound pod
  };
  [[nodiscard]] const Bound& BoundPods() const;
  // The Slurm nodes among `slurm_nodes` that `pods` cannot run on, kept per bridge::ExclusionKey.
  [[nodiscard]] const std::vector<bridge::Exclusion>& Excluded(
      const std::vector<const kube::Pod*>& pods, const std::vector<std::string>& slurm_nodes,
      const std::set<std::string, std::less<>>& dra_resource_names) const;
  // The exclusions are computed anew at their next use (Slurm's nodes or the DRA names changed).
  void ForgetExclusions() { exclusions_.clear(); }

 private:
  void OnNodeChanged(const kube::Node* before, const kube::Node& after);
  void OnBoundPodChanged(const kube::Pod& pod);

  std::string scheduler_name_;
  Hooks hooks_;
  std::unique_ptr<kube::Informer<kube::Node>> own_nodes_;  // when none was given
  kube::Informer<kube::Node>& nodes_;  // the process's shared one, or own_nodes_
  // Every bound, unfinished pod: other schedulers' pods (DaemonSets, mirror pods) request what
  // is not Slurm's to give; and no pod may open a host port another pod on the node holds (the
  // bridge's own pods included: they share nodes with exclusive "false").
  kube::Informer<kube::Pod> bound_;
  mutable std::optional<Bound> bound_view_;
  mutable std::optional<std::map<std::string, const kube::Node*>> node_map_;
  mutable std::vector<std::string> logged_duplicates_;  // Slurm names two K8s nodes claim
  mutable std::unordered_map<std::string, std::vector<bridge::Exclusion>> exclusions_;  // a cache
};

}  // namespace sb::scheduler
