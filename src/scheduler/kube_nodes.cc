// SPDX-License-Identifier: Apache-2.0
#include "scheduler/kube_nodes.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "bridge/names.h"
#include "scheduler/planner.h"

namespace sb::scheduler {

namespace {

// Pod shapes whose excluded nodes are kept; more start the cache afresh.
constexpr std::size_t kExclusionCacheSize = 1024;

}  // namespace

KubeNodes::KubeNodes(kube::Client& kube, std::string scheduler_name,
                     kube::Informer<kube::Node>* shared, Hooks hooks)
    : scheduler_name_(std::move(scheduler_name)),
      hooks_(std::move(hooks)),
      own_nodes_(shared != nullptr
                     ? nullptr
                     : std::make_unique<kube::Informer<kube::Node>>(kube, kube::NodesRef())),
      nodes_(shared != nullptr ? *shared : *own_nodes_),
      bound_(kube, kube::PodsRef(),
             kube::InformerOptions{
                 .reflector = {.list_options = {.field_selector =
                                                    "spec.nodeName!=,status.phase!=Succeeded,"
                                                    "status.phase!=Failed"}}}) {
  // Another scheduler's pod came, went or changed: the usage is summed anew when next needed;
  // on a Slurm node the exclusions are computed anew too (pods waiting for a job are looked at
  // again, as on a node change). Pods of other nodes, most of a busy cluster's churn, cost no
  // more than that.
  bound_.cache().AddHandlers({.on_add = [this](const auto& p) { OnBoundPodChanged(*p); },
                              .on_update =
                                  [this](const auto& old, const auto& p) {
                                    if (old->spec.node_name != p->spec.node_name ||
                                        old->spec.containers != p->spec.containers ||
                                        old->spec.init_containers != p->spec.init_containers ||
                                        old->spec.overhead != p->spec.overhead ||
                                        old->spec.resources != p->spec.resources) {
                                      OnBoundPodChanged(*p);
                                    }
                                  },
                              .on_delete = [this](const auto& p) { OnBoundPodChanged(*p); }});
  nodes_.cache().AddHandlers(
      {.on_add = [this](const auto& n) { OnNodeChanged(nullptr, *n); },
       .on_update = [this](const auto& old, const auto& n) { OnNodeChanged(old.get(), *n); },
       .on_delete = [this](const auto& n) { OnNodeChanged(nullptr, *n); }});
}

void KubeNodes::Start(async::TaskGroup& tasks) {
  if (own_nodes_) tasks.Spawn(own_nodes_->Run());
  tasks.Spawn(bound_.Run());
}

void KubeNodes::Stop() {
  if (own_nodes_) own_nodes_->Stop();
  bound_.Stop();
}

bool KubeNodes::HasSynced() const { return nodes_.HasSynced() && bound_.HasSynced(); }

void KubeNodes::OnBoundPodChanged(const kube::Pod& p) {
  // The bridge's own bound pods are watched for their host ports only: one that opens none
  // changes nothing here.
  if (p.spec.scheduler_name == scheduler_name_ && bridge::HostPortsOf(p).empty()) return;
  bound_view_.reset();
  std::shared_ptr<const kube::Node> node = nodes_.cache().Get(p.spec.node_name);
  if (!node) return;
  const std::vector<std::string>& slurm_nodes = hooks_.slurm_nodes();
  if (std::ranges::find(slurm_nodes, bridge::SlurmNodeName(*node)) == slurm_nodes.end()) return;
  exclusions_.clear();
  hooks_.changed();
}

void KubeNodes::OnNodeChanged(const kube::Node* before, const kube::Node& after) {
  node_map_.reset();  // its pointers may be the old objects'
  // What decides exclusions: schedulability, taints, labels, readiness, allocatable.
  if (before != nullptr && before->unschedulable == after.unschedulable &&
      before->taints == after.taints && before->metadata.labels == after.metadata.labels &&
      bridge::NodeIsReady(*before) == bridge::NodeIsReady(after) &&
      before->allocatable == after.allocatable) {
    return;
  }
  exclusions_.clear();
  hooks_.changed();
}

const KubeNodes::Bound& KubeNodes::BoundPods() const {
  if (!bound_view_) {
    std::vector<std::shared_ptr<const kube::Pod>> all = bound_.cache().List();
    std::vector<const kube::Pod*> pods;
    std::vector<const kube::Pod*> others;
    pods.reserve(all.size());
    for (const auto& p : all) {
      pods.push_back(p.get());
      if (p->spec.scheduler_name != scheduler_name_) others.push_back(p.get());
    }
    bound_view_ = Bound{.others_usage = bridge::UsageOf(others), .ports = bridge::PortsOf(pods)};
  }
  return *bound_view_;
}

const std::map<std::string, const kube::Node*>& KubeNodes::BySlurmName() const {
  if (node_map_) return *node_map_;
  std::vector<std::shared_ptr<const kube::Node>> all = nodes_.cache().List();
  std::vector<const kube::Node*> nodes;
  for (const auto& n : all) nodes.push_back(n.get());
  NodeMapping m = MapSlurmNodes(nodes);
  if (m.duplicates != logged_duplicates_) {  // said once per change, not on every call
    logged_duplicates_ = m.duplicates;
    if (!m.duplicates.empty()) {
      spdlog::warn(
          "several Kubernetes nodes map to Slurm node(s) {}: the one labelled {} is used (else "
          "the first by name)",
          fmt::join(m.duplicates, ", "), bridge::kSlurmNodeNameLabel);
    }
  }
  node_map_ = std::move(m.by_slurm_name);
  return *node_map_;
}

const std::vector<bridge::Exclusion>& KubeNodes::Excluded(
    const std::vector<const kube::Pod*>& pods, const std::vector<std::string>& slurm_nodes,
    const std::set<std::string, std::less<>>& dra_resource_names) const {
  std::string key = bridge::ExclusionKey(pods);
  auto cached = exclusions_.find(key);
  if (cached != exclusions_.end()) return cached->second;
  if (exclusions_.size() >= kExclusionCacheSize) exclusions_.clear();
  const Bound& bound = BoundPods();
  return exclusions_
      .emplace(std::move(key),
               bridge::ExcludedNodes(pods, slurm_nodes, BySlurmName(), &bound.others_usage,
                                     &bound.ports, &dra_resource_names))
      .first->second;
}

}  // namespace sb::scheduler
