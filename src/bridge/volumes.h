// SPDX-License-Identifier: Apache-2.0
//
// bridge/volumes.h
//
// What a pod's PersistentVolumeClaims allow (N-5), as pure functions: the scheduler reads each
// claim, and the PersistentVolume it is bound to or the StorageClass it waits for, and asks here
// whether the pod may be placed now and on which nodes its volumes can attach.
//
//   claim not found                   wait ("persistentvolumeclaim x not found", as kube-scheduler)
//   claim Bound                       the PV's nodeAffinity.required limits the nodes
//                                     (a local or zonal volume), none: any node
//   claim Pending, class binding mode
//     WaitForFirstConsumer            refused for now: the claim needs a node chosen for it
//                                     (kube-scheduler's VolumeBinding), which slurm-bridge does
//                                     not do yet; the pod is never bound where its volume could
//                                     not be provisioned
//     Immediate (or no class)         wait for the claim to be bound
//   claim Lost                        refused: its volume is gone
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kube/types.h"

namespace sb::bridge {

// One claim as read: the claim itself, then (when bound) its PV's node affinity or (when
// pending) its class's binding mode.
struct ClaimFacts {
  std::string name;
  bool found = true;
  std::string phase;          // status.phase: Pending, Bound, Lost
  std::string volume;         // spec.volumeName
  std::string storage_class;  // spec.storageClassName
  std::string binding_mode;   // the class's volumeBindingMode ("" when not read or unset)
  std::vector<kube::NodeSelectorTerm> pv_node_affinity;  // the bound PV's, empty: any node
};

struct VolumePlan {
  enum class Verdict { kReady, kWait, kRefuse };
  Verdict verdict = Verdict::kReady;
  std::string message;  // why it waits or is refused
  // (PV name, its nodeAffinity.required terms) of every bound claim that limits the nodes.
  std::vector<std::pair<std::string, std::vector<kube::NodeSelectorTerm>>> node_affinity;
};

// The claims a pod's volumes name: persistentVolumeClaim.claimName, and "<pod>-<volume>" for a
// generic ephemeral volume.
[[nodiscard]] std::vector<std::string> PodClaims(const kube::Pod& pod);

// Reads a PersistentVolumeClaim (phase, volumeName, storageClassName) into `facts`.
void ReadClaim(const kube::GenericObject& pvc, ClaimFacts& facts);
// A StorageClass's volumeBindingMode (a top-level field: the object's JSON text), "Immediate"
// when unset.
[[nodiscard]] std::string BindingMode(const std::string& storage_class_json);
// A PersistentVolume's spec.nodeAffinity.required.nodeSelectorTerms (empty: none).
[[nodiscard]] Result<std::vector<kube::NodeSelectorTerm>> PvNodeAffinity(
    const kube::GenericObject& pv);

[[nodiscard]] VolumePlan PlanVolumes(const std::vector<ClaimFacts>& claims);

}  // namespace sb::bridge
