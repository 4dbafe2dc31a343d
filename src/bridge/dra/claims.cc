// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/claims.h"

#include <cstdint>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

namespace sb::bridge {
namespace json = boost::json;
namespace {

json::object StatusObject(const std::vector<DeviceAssignment>& assignments, const kube::Pod& pod,
                          std::string_view k8s_node) {
  json::array results;
  for (const DeviceAssignment& a : assignments) {
    for (const InventoryDevice& d : a.devices) {
      results.push_back(json::object{{"request", a.request_name},
                                     {"driver", d.driver},
                                     {"pool", d.pool},
                                     {"device", d.device}});
    }
  }
  json::object requirement{{"key", "metadata.name"},
                           {"operator", "In"},
                           {"values", json::array{json::string(k8s_node)}}};
  json::object term{{"matchFields", json::array{requirement}}};
  json::object allocation{{"devices", json::object{{"results", std::move(results)}}},
                          {"nodeSelector", json::object{{"nodeSelectorTerms", json::array{term}}}}};
  json::object consumer{
      {"resource", "pods"}, {"name", pod.metadata.name}, {"uid", pod.metadata.uid}};
  return json::object{{"allocation", std::move(allocation)},
                      {"reservedFor", json::array{consumer}}};
}

// "device.attributes['gpu.example.com'].index in [0, 2]" when every device's index (or CPU id)
// was read from one attribute; "" otherwise (an index from the name has no attribute to select).
std::string PinningSelector(const std::vector<InventoryDevice>& devices) {
  if (devices.empty() || devices.front().index_attribute.empty()) return "";
  const std::string& attribute = devices.front().index_attribute;
  std::vector<std::int64_t> values;
  for (const InventoryDevice& d : devices) {
    if (d.index_attribute != attribute) return "";
    values.push_back(d.cpu_id >= 0 ? d.cpu_id : d.index);
  }
  const std::size_t slash = attribute.rfind('/');
  return fmt::format("device.attributes['{}'].{} in [{}]", attribute.substr(0, slash),
                     attribute.substr(slash + 1), fmt::join(values, ", "));
}

}  // namespace

std::string AllocationStatusJson(const std::vector<DeviceAssignment>& assignments,
                                 const kube::Pod& pod, std::string_view k8s_node) {
  return json::serialize(json::object{{"status", StatusObject(assignments, pod, k8s_node)}});
}

std::string ExtendedResourceClaimName(const kube::Pod& pod) {
  constexpr std::string_view kInfix = "-extended-resources-";
  const std::string uid = pod.metadata.uid.substr(0, 8);
  std::string name = pod.metadata.name.substr(0, 253 - kInfix.size() - uid.size());
  while (!name.empty() && (name.back() == '-' || name.back() == '.')) name.pop_back();
  return name + std::string(kInfix) + uid;
}

std::optional<PlannedClaim> PlanExtendedResourceClaim(
    const kube::Pod& pod, std::string_view k8s_node,
    const std::vector<DeviceAssignment>& assignments) {
  std::vector<DeviceAssignment> mine;
  for (const DeviceAssignment& a : assignments) {
    if (a.request.pod_claim.empty()) mine.push_back(a);
  }
  if (mine.empty()) return std::nullopt;
  PlannedClaim out;
  json::array requests;
  for (const DeviceAssignment& a : mine) {
    json::object exactly{{"deviceClassName", a.request.device_class},
                         {"allocationMode", "ExactCount"},
                         {"count", a.request.count}};
    // Pinned where an attribute names the devices, so that a claim allocated again by someone
    // else would get the same ones.
    if (std::string cel = PinningSelector(a.devices); !cel.empty()) {
      json::object selector{{"cel", json::object{{"expression", cel}}}};
      exactly["selectors"] = json::array{selector};
    }
    requests.push_back(json::object{{"name", a.request_name}, {"exactly", std::move(exactly)}});
    out.mappings.push_back({.container = a.request.container,
                            .resource_name = a.request.resource_name,
                            .request_name = a.request_name});
  }
  json::object status = StatusObject(mine, pod, k8s_node);
  out.status_json = json::serialize(json::object{{"status", status}});
  json::object owner{{"apiVersion", "v1"},      {"kind", "Pod"},      {"name", pod.metadata.name},
                     {"uid", pod.metadata.uid}, {"controller", true}, {"blockOwnerDeletion", true}};
  json::object metadata{
      {"name", ExtendedResourceClaimName(pod)},
      {"namespace", pod.metadata.namespace_},
      {"annotations", json::object{{std::string(kExtendedResourceClaimAnnotation), "true"}}},
      {"ownerReferences", json::array{owner}}};
  json::object devices{{"requests", std::move(requests)}};
  json::object object{{"apiVersion", "resource.k8s.io/v1"},
                      {"kind", "ResourceClaim"},
                      {"metadata", std::move(metadata)},
                      {"spec", json::object{{"devices", std::move(devices)}}},
                      {"status", std::move(status)}};
  out.object_json = json::serialize(object);
  return out;
}

std::string ExtendedResourceClaimStatusPatch(std::string_view claim_name,
                                             const std::vector<RequestMapping>& mappings) {
  json::array list;
  for (const RequestMapping& m : mappings) {
    list.push_back(json::object{{"containerName", m.container},
                                {"resourceName", m.resource_name},
                                {"requestName", m.request_name}});
  }
  json::object ext{{"resourceClaimName", json::string(claim_name)},
                   {"requestMappings", std::move(list)}};
  return json::serialize(
      json::object{{"status", json::object{{"extendedResourceClaimStatus", std::move(ext)}}}});
}

}  // namespace sb::bridge
