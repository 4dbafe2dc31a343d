// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/requests.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

#include "bridge/dra/internal.h"
#include "bridge/dra/profiles.h"
#include "bridge/json_path.h"
#include "kube/quantity.h"

namespace sb::bridge {
namespace json = boost::json;
namespace {

using dra_internal::Invalid;
using dra_internal::ParseJson;
using dra_internal::Quote;

std::string ObjectName(const kube::GenericObject& o) {
  return o.metadata.namespace_.empty() ? o.metadata.name
                                       : o.metadata.namespace_ + "/" + o.metadata.name;
}

}  // namespace

Result<std::vector<PodResourceClaim>> PodResourceClaimsOf(std::string_view pod_json) {
  Result<json::value> v = ParseJson(pod_json, "pod");
  if (!v) return tl::unexpected(v.error());
  if (!v->is_object()) return tl::unexpected(Invalid("pod is not a JSON object"));
  std::vector<PodResourceClaim> out;
  if (const json::array* claims = ArrayAt(&*v, {"spec", "resourceClaims"}); claims != nullptr) {
    for (const json::value& c : *claims) {
      out.push_back({.name = StringAt(&c, {"name"}),
                     .resource_claim_name = StringAt(&c, {"resourceClaimName"}),
                     .resource_claim_template_name = StringAt(&c, {"resourceClaimTemplateName"})});
    }
  }
  if (const json::array* st = ArrayAt(&*v, {"status", "resourceClaimStatuses"}); st != nullptr) {
    for (const json::value& s : *st) {
      const std::string name = StringAt(&s, {"name"});
      auto it = std::ranges::find(out, name, &PodResourceClaim::name);
      if (it != out.end()) it->generated_claim_name = StringAt(&s, {"resourceClaimName"});
    }
  }
  return out;
}

std::vector<PodResourceClaim> PodResourceClaimsOf(const kube::Pod& pod) {
  std::vector<PodResourceClaim> out;
  for (const kube::PodClaim& c : pod.spec.resource_claims) {
    PodResourceClaim& r = out.emplace_back(
        PodResourceClaim{.name = c.name,
                         .resource_claim_name = c.resource_claim_name,
                         .resource_claim_template_name = c.resource_claim_template_name});
    if (auto it = pod.status.resource_claim_statuses.find(c.name);
        it != pod.status.resource_claim_statuses.end()) {
      r.generated_claim_name = it->second;
    }
  }
  return out;
}

Result<std::vector<DraRequest>> ClaimRequests(const kube::GenericObject& claim_or_template,
                                              const std::vector<DeviceProfile>& profiles,
                                              const ObjectsByName& device_classes) {
  const std::string what = fmt::format(
      "{} {}", claim_or_template.kind.empty() ? "ResourceClaim" : claim_or_template.kind,
      Quote(ObjectName(claim_or_template)));
  Result<json::value> spec = ParseJson(claim_or_template.spec_json, what + " spec");
  if (!spec) return tl::unexpected(spec.error());
  // A template holds the claim's spec one level down (spec.spec).
  const json::value* claim_spec =
      claim_or_template.kind == "ResourceClaimTemplate" ? JsonAt(&*spec, {"spec"}) : &*spec;
  const json::value* devices = JsonAt(claim_spec, {"devices"});
  if (const json::array* c = ArrayAt(devices, {"constraints"}); c != nullptr && !c->empty()) {
    return tl::unexpected(Invalid(what + ": spec.devices.constraints are not supported: Slurm "
                                         "chooses the devices and cannot apply them"));
  }
  std::vector<DraRequest> out;
  const json::array* requests = ArrayAt(devices, {"requests"});
  if (requests == nullptr) return out;
  for (const json::value& r : *requests) {
    const std::string name = StringAt(&r, {"name"});
    const auto bad = [&](std::string_view why) {
      return tl::unexpected(Invalid(fmt::format("{} request {}: {}", what, Quote(name), why)));
    };
    if (JsonAt(&r, {"firstAvailable"}) != nullptr && JsonAt(&r, {"exactly"}) == nullptr) {
      return bad("firstAvailable is not supported: Slurm allocates one kind of device");
    }
    const json::value* exactly = JsonAt(&r, {"exactly"});
    if (exactly == nullptr) return bad("needs `exactly`");
    const std::string cls = StringAt(exactly, {"deviceClassName"});
    if (cls.empty()) return bad("has no deviceClassName");
    const std::string mode = StringAt(exactly, {"allocationMode"});
    if (!mode.empty() && mode != "ExactCount") {
      return bad(fmt::format("allocationMode {} is not supported: Slurm allocates a count", mode));
    }
    if (const json::array* s = ArrayAt(exactly, {"selectors"}); s != nullptr && !s->empty()) {
      return bad("selectors are not supported: Slurm chooses the devices and cannot apply them");
    }
    if (BoolAt(exactly, {"adminAccess"})) return bad("adminAccess is not supported");
    if (JsonAt(exactly, {"capacity"}) != nullptr) {
      return bad("capacity requests are not supported: Slurm allocates whole devices");
    }
    std::int64_t count = 1;
    if (const json::value* c = JsonAt(exactly, {"count"}); c != nullptr) {
      std::optional<std::int64_t> n = JsonInt(c);
      if (!n || *n < 1) return bad("count must be a positive integer");
      count = *n;
    }
    auto cls_it = device_classes.find(cls);
    Result<const DeviceProfile*> profile =
        ProfileForClass(cls, cls_it == device_classes.end() ? nullptr : cls_it->second, profiles);
    if (!profile) return bad(profile.error().message);
    out.push_back(
        {.device_class = cls, .profile = (*profile)->name, .count = count, .claim_request = name});
  }
  return out;
}

std::vector<DraRequest> CollectDraRequests(const kube::Pod& pod,
                                           const std::vector<DeviceProfile>& profiles,
                                           const ObjectsByName& device_classes,
                                           const std::vector<PodResourceClaim>& claims,
                                           const ObjectsByName& claim_templates,
                                           std::vector<std::string>& problems) {
  // Extended resource -> class: the implicit name, and the classes' extendedResourceName.
  std::map<std::string, std::string> class_of_resource;
  for (const auto& [name, cls] : device_classes) {
    if (cls == nullptr) continue;
    Result<json::value> spec = ParseJson(cls->spec_json, "DeviceClass spec");
    if (!spec) continue;
    if (std::string ext = StringAt(&*spec, {"extendedResourceName"}); !ext.empty()) {
      class_of_resource[ext] = name;
    }
  }
  struct Ask {
    std::string container;
    std::int64_t count = 0;
  };
  std::map<std::string, Ask> asks;  // by resource name
  auto scan = [&](const std::vector<kube::Container>& list) {
    for (const kube::Container& c : list) {
      std::map<std::string, std::string> resources = c.resources.limits;
      for (const auto& [k, v] : c.resources.requests) resources[k] = v;  // requests win
      for (const auto& [resource, quantity] : resources) {
        const bool implicit = resource.starts_with(kDraExtendedResourcePrefix);
        if (!implicit && !class_of_resource.contains(resource)) continue;
        Result<std::int64_t> n = kube::ParseQuantityValue(quantity);
        if (!n) {
          problems.push_back(fmt::format("resource {} of container {}: {} is not a quantity",
                                         Quote(resource), Quote(c.name), Quote(quantity)));
          continue;
        }
        if (*n <= 0) continue;
        auto [it, fresh] = asks.try_emplace(resource, Ask{c.name, *n});
        if (!fresh && it->second.container != c.name) {
          problems.push_back(fmt::format(
              "resource {} is requested by containers {} and {}: the bridge supports one "
              "requesting container per device class",
              Quote(resource), Quote(it->second.container), Quote(c.name)));
        }
      }
    }
  };
  scan(pod.spec.init_containers);
  scan(pod.spec.containers);

  std::vector<DraRequest> out;
  for (const auto& [resource, ask] : asks) {
    const std::string cls = resource.starts_with(kDraExtendedResourcePrefix)
                                ? resource.substr(kDraExtendedResourcePrefix.size())
                                : class_of_resource[resource];
    auto cls_it = device_classes.find(cls);
    Result<const DeviceProfile*> profile =
        ProfileForClass(cls, cls_it == device_classes.end() ? nullptr : cls_it->second, profiles);
    if (!profile) {
      problems.push_back(fmt::format("resource {}: {}: Slurm could not choose its devices",
                                     Quote(resource), profile.error().message));
      continue;
    }
    out.push_back({.device_class = cls,
                   .profile = (*profile)->name,
                   .count = ask.count,
                   .resource_name = resource,
                   .container = ask.container});
  }

  for (const PodResourceClaim& c : claims) {
    if (!c.resource_claim_name.empty()) {
      problems.push_back(fmt::format(
          "pod claim {} names ResourceClaim {}: a claim shared by pods cannot follow one Slurm "
          "job's allocation; use resourceClaimTemplateName",
          Quote(c.name), Quote(c.resource_claim_name)));
      continue;
    }
    if (c.resource_claim_template_name.empty()) {
      problems.push_back(fmt::format("pod claim {} names no claim and no template", Quote(c.name)));
      continue;
    }
    auto it = claim_templates.find(c.resource_claim_template_name);
    if (it == claim_templates.end() || it->second == nullptr) {
      problems.push_back(fmt::format("pod claim {}: ResourceClaimTemplate {} could not be read",
                                     Quote(c.name), Quote(c.resource_claim_template_name)));
      continue;
    }
    Result<std::vector<DraRequest>> requests = ClaimRequests(*it->second, profiles, device_classes);
    if (!requests) {
      problems.push_back(fmt::format("pod claim {}: {}", Quote(c.name), requests.error().message));
      continue;
    }
    for (DraRequest& r : *requests) {
      r.pod_claim = c.name;
      out.push_back(std::move(r));
    }
  }
  return out;
}

Result<std::vector<DraRequest>> PodDraRequests(const kube::Pod& pod,
                                               const std::vector<DeviceProfile>& profiles,
                                               const ObjectsByName& device_classes,
                                               const std::vector<PodResourceClaim>& claims,
                                               const ObjectsByName& claim_templates) {
  std::vector<std::string> problems;
  std::vector<DraRequest> out =
      CollectDraRequests(pod, profiles, device_classes, claims, claim_templates, problems);
  if (!problems.empty()) {
    return tl::unexpected(Invalid(fmt::format("pod {}/{}: {}", pod.metadata.namespace_,
                                              pod.metadata.name, fmt::join(problems, "; "))));
  }
  return out;
}

}  // namespace sb::bridge
