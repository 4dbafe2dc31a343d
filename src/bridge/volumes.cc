// SPDX-License-Identifier: Apache-2.0
#include "bridge/volumes.h"

#include <fmt/format.h>
#include <boost/json.hpp>

namespace sb::bridge {
namespace {
namespace json = boost::json;

std::string StringAt(const json::value* v) {
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

json::value Parse(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text.empty() ? std::string("{}") : text, ec);
  return ec ? json::value(json::object{}) : v;
}

Result<std::vector<kube::NodeSelectorRequirement>> Requirements(const json::value* list) {
  std::vector<kube::NodeSelectorRequirement> out;
  if (list == nullptr || list->is_null()) return out;
  if (!list->is_array()) return MakeError(ErrorCode::kInvalidArgument, "requirements not a list");
  for (const json::value& r : list->get_array()) {
    if (!r.is_object()) return MakeError(ErrorCode::kInvalidArgument, "requirement not an object");
    kube::NodeSelectorRequirement req;
    req.key = StringAt(r.get_object().if_contains("key"));
    req.operator_ = StringAt(r.get_object().if_contains("operator"));
    if (const json::value* vals = r.get_object().if_contains("values"); vals && vals->is_array()) {
      for (const json::value& v : vals->get_array()) req.values.push_back(StringAt(&v));
    }
    out.push_back(std::move(req));
  }
  return out;
}

}  // namespace

std::vector<std::string> PodClaims(const kube::Pod& pod) {
  std::vector<std::string> out;
  for (const kube::ClaimVolume& v : pod.spec.claim_volumes) {
    out.push_back(v.ephemeral ? pod.metadata.name + "-" + v.name : v.claim_name);
  }
  return out;
}

void ReadClaim(const kube::GenericObject& pvc, ClaimFacts& facts) {
  const json::value spec = Parse(pvc.spec_json);
  const json::value status = Parse(pvc.status_json);
  facts.found = true;
  facts.volume = StringAt(spec.as_object().if_contains("volumeName"));
  facts.storage_class = StringAt(spec.as_object().if_contains("storageClassName"));
  facts.phase = StringAt(status.as_object().if_contains("phase"));
}

std::string BindingMode(const std::string& storage_class_json) {
  const json::value v = Parse(storage_class_json);
  std::string mode = StringAt(v.as_object().if_contains("volumeBindingMode"));
  return mode.empty() ? "Immediate" : mode;
}

Result<std::vector<kube::NodeSelectorTerm>> PvNodeAffinity(const kube::GenericObject& pv) {
  std::vector<kube::NodeSelectorTerm> out;
  const json::value spec = Parse(pv.spec_json);
  boost::system::error_code ec;
  const json::value* terms = spec.find_pointer("/nodeAffinity/required/nodeSelectorTerms", ec);
  if (terms == nullptr || terms->is_null()) return out;
  if (!terms->is_array()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "PersistentVolume " + pv.metadata.name + ": nodeSelectorTerms is not a list");
  }
  for (const json::value& t : terms->get_array()) {
    if (!t.is_object()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "PersistentVolume " + pv.metadata.name + ": a term is not an object");
    }
    kube::NodeSelectorTerm term;
    Result<std::vector<kube::NodeSelectorRequirement>> e =
        Requirements(t.get_object().if_contains("matchExpressions"));
    Result<std::vector<kube::NodeSelectorRequirement>> f =
        Requirements(t.get_object().if_contains("matchFields"));
    if (!e || !f) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "PersistentVolume " + pv.metadata.name + ": " +
                           (!e ? e.error().message : f.error().message));
    }
    term.match_expressions = std::move(*e);
    term.match_fields = std::move(*f);
    out.push_back(std::move(term));
  }
  return out;
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
