// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/gres_agreement.h
//
// Does a node's inventory (inventory.h) agree with the GRES and CPUs Slurm counts on it? The
// verdict is upstream 1.3's node condition SlinkySlurmGRESCompatible; the node controller writes
// it and keeps pods that ask for a disagreeing profile off the node.
//
// Thread model: pure functions over plain values.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/dra/inventory.h"
#include "bridge/dra/profile.h"
#include "common/error.h"
#include "slurm/types.h"

namespace sb::bridge {

// One GRES of a Slurm node's `gres` string ("gpu:fake:4", "gpu:a100:2(S:0-1)",
// "gpu:fake:4(IDX:0-3)"): name, type ("" when none), count, and its indices (from "IDX:" when
// the string gives them, else counted from 0 along the GRES of that name in the string's order).
struct NodeGres {
  std::string name;
  std::string type;
  std::int64_t count = 0;
  std::vector<std::int64_t> indices;
  bool operator==(const NodeGres&) const = default;
};
// kInvalidArgument on a malformed entry.
[[nodiscard]] Result<std::vector<NodeGres>> ParseNodeGres(std::string_view gres);

// The verdict for one node (upstream 1.3's node condition SlinkySlurmGRESCompatible).
struct GresAgreement {
  // False when the ResourceSlices and Slurm disagree: a profile's devices exist on both sides
  // with other indices or counts, or the slices publish devices Slurm does not have. A profile
  // with no devices published while Slurm has the GRES (no DRA driver for it on the node) is not
  // a disagreement; that profile is only not usable there.
  bool agrees = true;
  // For humans, one clause per GRES name and for the CPUs: "gpu: Slurm has indices 0-3, the
  // ResourceSlices of gpu-example 0-1", "dra.cpu: 8 CPUs as Slurm".
  std::string reason;
  // The profiles whose devices on this node are exactly Slurm's: pods asking for others must not
  // be placed here.
  std::set<std::string> usable_profiles;
  bool operator==(const GresAgreement&) const = default;
};
// Compares per GRES name the indices of the indexed-gres profiles' devices (a profile with a
// gresType against the Slurm GRES of that type, the others against the rest of that name) with
// Slurm's, and the core-bitmap profile's CPUs with the node's `cpus` (when Slurm gives it).
// A malformed gres string is a disagreement saying so.
[[nodiscard]] GresAgreement CheckGresAgreement(const NodeInventory& inventory,
                                               const slurm::NodeInfo& slurm_node,
                                               const std::vector<DeviceProfile>& profiles);

}  // namespace sb::bridge
