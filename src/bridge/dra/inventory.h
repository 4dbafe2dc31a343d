// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/inventory.h
//
// The devices of one Kubernetes node that the device profiles cover, read from its
// ResourceSlices (bridge/dra/slices.h), each with the number Slurm knows it by: a GRES index
// (indexed-gres) or a CPU id and core (core-bitmap). AssignDevices (assign.h) looks Slurm's
// allocation up here; CheckGresAgreement (gres_agreement.h) compares it with Slurm's node.
//
// Thread model: pure functions over plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/dra/profile.h"
#include "bridge/dra/slices.h"
#include "common/error.h"

namespace sb::bridge {

// One device of a node that belongs to a profile: the identity a claim names
// (<driver>/<pool>/<device>) and how Slurm counts it.
struct InventoryDevice {
  std::string driver;
  std::string pool;
  std::string device;
  std::string profile;
  std::int64_t index = -1;   // indexed-gres: its Slurm GRES index
  std::int64_t cpu_id = -1;  // core-bitmap: its CPU id
  std::int64_t core = -1;    // core-bitmap: Slurm's abstract core (bit of the core bitmap)
  // The attribute its index or CPU id was read from ("gpu.example.com/index", "dra.cpu/cpuID");
  // "" when the index comes from the name.
  std::string index_attribute;

  // "<driver>/<pool>/<device>", for messages.
  [[nodiscard]] std::string Id() const;
  bool operator==(const InventoryDevice&) const = default;
};

// The devices of one Kubernetes node, per profile: indexed-gres devices sorted by index,
// core-bitmap devices by core, then CPU id.
struct NodeInventory {
  std::string node;
  std::map<std::string, std::vector<InventoryDevice>> devices;  // by profile name
  // Pools left out, and why: "gpu.example.com/n1: generation 2 has 1 of 2 ResourceSlices".
  std::vector<std::string> skipped_pools;

  // The device of `profile` with Slurm index `index`, or CPU id `cpu_id`; nullptr when none.
  [[nodiscard]] const InventoryDevice* ByIndex(std::string_view profile, std::int64_t index) const;
  [[nodiscard]] const InventoryDevice* ByCpu(std::string_view profile, std::int64_t cpu_id) const;
  // The number of cores (bits of the core bitmap) of the core-bitmap profile `profile`.
  [[nodiscard]] std::int64_t CoreCount(std::string_view profile) const;
  bool operator==(const NodeInventory&) const = default;
};

// The inventory of Kubernetes node `node` from ResourceSlices (any, of any node: the node's are
// picked: spec.nodeName, or a device's nodeName under perDeviceNodeSelection; pools shared through
// allNodes or a nodeSelector are not node-local and are ignored). Per pool (driver, pool name)
// only the highest generation counts, and only when all of its resourceSliceCount slices are
// there; an incomplete pool is left out (skipped_pools). Only drivers of the profiles are read.
// kInvalidArgument, naming the device, when a device matches two profiles, a device identity
// appears twice, an indexed-gres device has no index (or two devices share one index of a GRES
// name), or a core-bitmap device has no int attribute cpuID (dra.cpu's grouped mode publishes
// none: individual mode is needed) or repeats one.
[[nodiscard]] Result<NodeInventory> BuildNodeInventory(std::string_view node,
                                                       const std::vector<ResourceSliceInfo>& slices,
                                                       const std::vector<DeviceProfile>& profiles);

}  // namespace sb::bridge
