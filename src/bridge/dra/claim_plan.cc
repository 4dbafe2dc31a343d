// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/claim_plan.h"

#include <utility>

#include <fmt/format.h>

#include "bridge/dra/assign.h"
#include "bridge/dra/inventory.h"

namespace sb::bridge {

ClaimsPlan PlanClaims(const ClaimPlanInput& in, const std::vector<DeviceProfile>& profiles) {
  ClaimsPlan plan;
  const auto stop = [&](std::size_t i, std::string problem) {
    plan.failed_pod = i;
    plan.problem = std::move(problem);
    plan.pods.clear();
    return plan;
  };
  std::map<std::string, NodeInventory> inventories;  // by Kubernetes node
  for (std::size_t i = 0; i < in.pods.size(); ++i) {
    const ClaimPlanPod& p = in.pods[i];
    const kube::Pod& pod = *p.pod;
    const slurm::NodeAllocation* on_node = nullptr;
    for (const slurm::NodeAllocation& n : in.layout) {
      if (!p.slurm_node.empty() && n.node == p.slurm_node) on_node = &n;
    }
    if (on_node == nullptr) {
      return stop(i, fmt::format("the job's resource layout has no entry for node {}", p.node));
    }
    auto inv = inventories.find(p.node);
    if (inv == inventories.end()) {
      auto listed = in.slices.find(p.node);
      Result<NodeInventory> built = BuildNodeInventory(
          p.node, listed == in.slices.end() ? std::vector<ResourceSliceInfo>{} : listed->second,
          profiles);
      if (!built) {
        return stop(
            i, fmt::format("the ResourceSlices of node {}: {}", p.node, built.error().message));
      }
      inv = inventories.emplace(p.node, std::move(*built)).first;
    }
    Result<std::vector<DeviceAssignment>> devices =
        AssignDevices(p.requests, inv->second, *on_node, profiles);
    if (!devices) return stop(i, devices.error().message);
    PodClaimWrites& out = plan.pods.emplace_back();
    for (const DeviceAssignment& d : *devices) {
      for (const InventoryDevice& dev : d.devices) {
        out.devices.push_back(dev.index >= 0
                                  ? fmt::format("{} (GRES index {})", dev.device, dev.index)
                                  : fmt::format("{} (CPU {})", dev.device, dev.cpu_id));
      }
    }
    // The claims made from the pod's templates (by the resourceclaim controller): each one's
    // status, with its own requests.
    std::map<std::string, std::vector<DeviceAssignment>> by_pod_claim;
    for (const DeviceAssignment& d : *devices) {
      if (!d.request.pod_claim.empty()) by_pod_claim[d.request.pod_claim].push_back(d);
    }
    for (const auto& [pod_claim, mine] : by_pod_claim) {
      auto made = pod.status.resource_claim_statuses.find(pod_claim);
      if (made == pod.status.resource_claim_statuses.end()) {
        return stop(i, fmt::format("claim {} of the pod has not been made from its template yet "
                                   "(the resourceclaim controller of kube-controller-manager "
                                   "makes it)",
                                   pod_claim));
      }
      out.template_claims.push_back(
          {.claim = made->second, .body = AllocationStatusJson(mine, pod, p.node)});
    }
    out.extended = PlanExtendedResourceClaim(pod, p.node, *devices);
    if (out.extended) out.extended_name = ExtendedResourceClaimName(pod);
  }
  return plan;
}

}  // namespace sb::bridge
