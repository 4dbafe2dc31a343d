// SPDX-License-Identifier: Apache-2.0
//
// bridge/gres_condition.h
//
// The node condition SlinkySlurmGRESCompatible (upstream 1.3's), written by the node controller
// (node_logic.h 5.) and read by the scheduler: whether the devices a node's ResourceSlices publish
// for the device profiles are the GRES Slurm counts on its Slurm node. Header-only (kube/types.h),
// so that any component can include it without linking the node controller.
//
// Thread model: pure functions over plain values.
//
// Example:
//   if (bridge::GresIncompatible(node)) continue;  // Slurm's GPU indices would not be its
#pragma once

#include <string_view>

#include "kube/types.h"

namespace sb::bridge {

inline constexpr std::string_view kGresCompatibleCondition = "SlinkySlurmGRESCompatible";
// Its reasons, upstream's: True; False (the slices and Slurm disagree); Unknown (the node's
// inventory could not be built from its ResourceSlices).
inline constexpr std::string_view kReasonGresCompatible = "SlurmGRESCompatible";
inline constexpr std::string_view kReasonGresIncompatible = "IncompatibleSlurmGRES";
inline constexpr std::string_view kReasonGresVerificationError = "SlurmGRESVerificationError";

// True when the node's SlinkySlurmGRESCompatible condition is False: Slurm's GRES indices on it
// do not name its DRA devices, so pods whose devices Slurm chooses must not go there. Absent,
// True or Unknown: false.
[[nodiscard]] inline bool GresIncompatible(const kube::Node& node) {
  const kube::Condition* c = kube::FindCondition(node.conditions, kGresCompatibleCondition);
  return c != nullptr && c->status == "False";
}

}  // namespace sb::bridge
