// SPDX-License-Identifier: Apache-2.0
#include "bridge/volumes.h"

#include <fmt/format.h>

#include "kube/codec.h"

namespace sb::bridge {

std::vector<std::string> PodClaims(const kube::Pod& pod) {
  std::vector<std::string> out;
  for (const kube::ClaimVolume& v : pod.spec.claim_volumes) {
    out.push_back(v.ephemeral ? pod.metadata.name + "-" + v.name : v.claim_name);
  }
  return out;
}

namespace {

// The string at `pointer` of a JSON object's text; "" when absent, not a string, or malformed.
std::string StringAt(const std::string& json, std::string_view pointer) {
  return json.empty() ? std::string() : kube::JsonStringAt(json, pointer).value_or("");
}

}  // namespace

void ReadClaim(const kube::GenericObject& pvc, ClaimFacts& facts) {
  facts.found = true;
  facts.volume = StringAt(pvc.spec_json, "/volumeName");
  facts.storage_class = StringAt(pvc.spec_json, "/storageClassName");
  facts.phase = StringAt(pvc.status_json, "/phase");
}

std::string BindingMode(const std::string& storage_class_json) {
  std::string mode = StringAt(storage_class_json, "/volumeBindingMode");
  return mode.empty() ? "Immediate" : mode;
}

Result<std::vector<kube::NodeSelectorTerm>> PvNodeAffinity(const kube::GenericObject& pv) {
  if (pv.spec_json.empty()) return std::vector<kube::NodeSelectorTerm>{};
  // Read by the kube codec, as a pod's required node affinity.
  Result<std::vector<kube::NodeSelectorTerm>> terms =
      kube::JsonNodeSelectorTermsAt(pv.spec_json, "/nodeAffinity/required/nodeSelectorTerms");
  if (!terms && terms.error().code == ErrorCode::kNotFound) {
    return std::vector<kube::NodeSelectorTerm>{};
  }
  if (!terms) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "PersistentVolume " + pv.metadata.name + ": " + terms.error().message);
  }
  return terms;
}

VolumePlan PlanVolumes(const std::vector<ClaimFacts>& claims) {
  VolumePlan plan;
  auto stop = [&](VolumePlan::Verdict v, std::string message) {
    // A refusal outranks a wait: it needs the user.
    if (plan.verdict == VolumePlan::Verdict::kRefuse) return;
    if (plan.verdict == VolumePlan::Verdict::kWait && v == VolumePlan::Verdict::kWait) return;
    plan.verdict = v;
    plan.message = std::move(message);
  };
  for (const ClaimFacts& c : claims) {
    if (!c.found) {
      stop(VolumePlan::Verdict::kWait,
           fmt::format("persistentvolumeclaim \"{}\" not found", c.name));
    } else if (c.phase == "Bound") {
      if (!c.pv_node_affinity.empty())
        plan.node_affinity.emplace_back(c.volume, c.pv_node_affinity);
    } else if (c.phase == "Lost") {
      stop(VolumePlan::Verdict::kRefuse,
           fmt::format("persistentvolumeclaim \"{}\" is Lost: its PersistentVolume {} is gone",
                       c.name, c.volume));
    } else if (c.binding_mode == "WaitForFirstConsumer") {
      stop(VolumePlan::Verdict::kRefuse,
           fmt::format("persistentvolumeclaim \"{}\" waits for its first consumer (StorageClass "
                       "{}, volumeBindingMode WaitForFirstConsumer): slurm-bridge does not "
                       "choose a node for such claims yet, and a pod bound without one would "
                       "never start. Use a StorageClass with volumeBindingMode Immediate, or "
                       "bind the claim first",
                       c.name, c.storage_class));
    } else {
      stop(VolumePlan::Verdict::kWait,
           fmt::format("waiting for persistentvolumeclaim \"{}\" to be bound", c.name));
    }
  }
  return plan;
}

}  // namespace sb::bridge
