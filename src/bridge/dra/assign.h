// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/assign.h
//
// From Slurm's allocation to devices: the GRES indices and the core bitmap Slurm gave a job on
// one node (its /resources/{job} entry), mapped through the node's inventory (inventory.h) to
// the devices each of a pod's requests (requests.h) gets, trimmed to what each request asks (the
// first n indices; an exclusive job holds every GPU of its node). claims.h writes the claims
// that name them.
//
// Thread model: pure functions over plain values.
#pragma once

#include <string>
#include <vector>

#include "bridge/dra/inventory.h"
#include "bridge/dra/profile.h"
#include "bridge/dra/requests.h"
#include "common/error.h"
#include "slurm/types.h"

namespace sb::bridge {

// The devices one request gets.
struct DeviceAssignment {
  DraRequest request;
  std::string request_name;  // the claim's request name: the claim's own, else chosen here
  std::vector<InventoryDevice> devices;
  bool operator==(const DeviceAssignment&) const = default;
};

// Slurm's allocation on the pod's node (the /resources/{job} entry of that node) to devices,
// request by request in order: an indexed-gres request takes the next `count` of the indices of
// the Slurm GRES of its profile's gresName (and gresType) on the node, a core-bitmap request the
// next `count` CPUs of the cores set in core_bitmap ("0x0F", or a list "0-3"), in core order. The
// extended-resource requests get claim request names: "cpu" for core-bitmap, the gresName for
// indexed-gres ("gpu", then "gpu-2", ... when taken). kInvalidArgument when Slurm gave fewer than
// asked ("... requested 2, Slurm allocated 1"), a GRES entry has no index list (upstream #33: the
// message says Slurm's layout named no device), an index or a core has no device on the node, or
// the bitmap is malformed.
[[nodiscard]] Result<std::vector<DeviceAssignment>> AssignDevices(
    const std::vector<DraRequest>& requests, const NodeInventory& inventory,
    const slurm::NodeAllocation& allocation, const std::vector<DeviceProfile>& profiles);

}  // namespace sb::bridge
