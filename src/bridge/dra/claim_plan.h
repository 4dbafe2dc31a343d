// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/claim_plan.h
//
// The binder's DRA pre-bind step, decided (issue #28: Slurm, not kube-scheduler, chooses the
// devices). For each pod of a RUNNING job that asks for devices through DRA: the devices Slurm
// gave the job on the pod's node (its entry of the job's /resources/{job} layout, mapped through
// the node's ResourceSlices), the status of each claim made from the pod's templates, and the
// claim the bridge makes for its extended resources. Binder::WriteClaims (scheduler/binder.h)
// reads what goes in (ReadDraInputs) and writes what comes out (WriteClaimObjects).
//
// The steps, from the files beside this one:
//   auto reqs = PodDraRequests(pod, profiles, classes, claims, templates);     // requests.h
//   auto inv = BuildNodeInventory(node, slices, profiles);                      // inventory.h
//   auto assigned = AssignDevices(*reqs, *inv, allocation_on_node, profiles);  // assign.h
//   auto claim = PlanExtendedResourceClaim(pod, node, *assigned);              // claims.h
//   // POST claim->object_json, PATCH its status with claim->status_json, then the pod's status
//   // with ExtendedResourceClaimStatusPatch(created_name, claim->mappings), then bind.
//
// Thread model: pure functions over plain values.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bridge/dra/claims.h"
#include "bridge/dra/profile.h"
#include "bridge/dra/requests.h"
#include "bridge/dra/slices.h"
#include "kube/types.h"
#include "slurm/types.h"

namespace sb::bridge {

// One pod that asks for devices, where it binds, and what it asks (PodDraRequests).
struct ClaimPlanPod {
  const kube::Pod* pod = nullptr;
  std::string node;        // the Kubernetes node it binds to
  std::string slurm_node;  // that node's Slurm name; "" when it has none
  std::vector<DraRequest> requests;
};

// What the plan reads: the pods, the job's layout and each of their nodes' ResourceSlices.
struct ClaimPlanInput {
  std::vector<ClaimPlanPod> pods;
  std::vector<slurm::NodeAllocation> layout;  // GET /resources/{job}
  // By Kubernetes node: the slices listed for it (spec.nodeName=<node>); a node absent here has
  // none.
  std::map<std::string, std::vector<ResourceSliceInfo>> slices;
};

// What to write for one pod.
struct PodClaimWrites {
  // A claim made from one of the pod's templates (pod.status.resourceClaimStatuses) and its
  // status: AllocationStatusJson of the requests of that claim.
  struct StatusWrite {
    std::string claim;
    std::string body;
    bool operator==(const StatusWrite&) const = default;
  };
  std::vector<StatusWrite> template_claims;  // by the pod's claim name
  // The claim for its extended resources, named extended_name; nullopt when it asks for none.
  std::optional<PlannedClaim> extended;
  std::string extended_name;
  // The devices, for the events: "gpu-1 (GRES index 1)", "cpu-3 (CPU 3)".
  std::vector<std::string> devices;
  bool operator==(const PodClaimWrites&) const = default;
};

struct ClaimsPlan {
  std::vector<PodClaimWrites> pods;  // one per input pod, in order
  // The first pod whose devices cannot be named (its index in the input) and why: nothing is to
  // be written then, and the pod is told.
  std::optional<std::size_t> failed_pod;
  std::string problem;
  bool operator==(const ClaimsPlan&) const = default;
};

// The claims of `in.pods`, pod by pod: the pod's node's layout entry (its Slurm name's; "the
// job's resource layout has no entry for node X" when none), the node's inventory
// (BuildNodeInventory, once per node), AssignDevices, and for each claim of its templates the
// claim made from it ("claim X of the pod has not been made from its template yet" when the
// resourceclaim controller has not), then PlanExtendedResourceClaim. The first failure stops
// the plan.
[[nodiscard]] ClaimsPlan PlanClaims(const ClaimPlanInput& in,
                                    const std::vector<DeviceProfile>& profiles);

}  // namespace sb::bridge
