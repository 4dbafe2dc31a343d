// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/claims.h
//
// The ResourceClaim writes for devices AssignDevices (assign.h) named: the status of a claim
// allocated to them (a template claim's, or ours), the claim the bridge makes for a pod's
// extended resources, and the pod status that tells the kubelet which claim holds them. So the
// node's DRA driver hands the container what Slurm reserved and nothing else.
//
// Thread model: pure functions over plain values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/dra/assign.h"
#include "kube/types.h"

namespace sb::bridge {

// Annotation on a claim made for a pod's extended resources (resourcev1's
// ExtendedResourceClaimAnnotation), as kube-scheduler and upstream write it.
inline constexpr std::string_view kExtendedResourceClaimAnnotation =
    "resource.kubernetes.io/extended-resource-claim";

// The status of a claim allocated to `assignments` (the claim's own): a JSON merge patch body
// {"status":{"allocation":{"devices":{"results":[{request, driver, pool, device}...]},
// "nodeSelector":{matchFields metadata.name In [node]}},"reservedFor":[{resource: pods, name,
// uid}]}} for .../resourceclaims/{name}/status.
[[nodiscard]] std::string AllocationStatusJson(const std::vector<DeviceAssignment>& assignments,
                                               const kube::Pod& pod, std::string_view k8s_node);

// pod.status.extendedResourceClaimStatus.requestMappings entry.
struct RequestMapping {
  std::string container;
  std::string resource_name;
  std::string request_name;
  bool operator==(const RequestMapping&) const = default;
};

// The name of the claim the bridge makes for a pod's extended resources:
// "<pod>-extended-resources-<the first 8 characters of its UID>" (the pod's name shortened to
// keep it a valid name of at most 253 characters). Fixed, unlike kube-scheduler's generateName, so
// that a retried pre-bind finds the claim it made, and the pod controller can release it by name.
[[nodiscard]] std::string ExtendedResourceClaimName(const kube::Pod& pod);

// The claim for the pod's extended-resource requests.
struct PlannedClaim {
  // The ResourceClaim to create (POST .../namespaces/<ns>/resourceclaims): named
  // ExtendedResourceClaimName, the pod as controller owner, the annotation
  // kExtendedResourceClaimAnnotation, one ExactCount request per class (with a CEL selector
  // naming the chosen devices where their index or CPU id is an attribute), and the status the
  // apiserver ignores on create, to be written next.
  std::string object_json;
  std::string status_json;  // AllocationStatusJson of these assignments
  std::vector<RequestMapping> mappings;
  bool operator==(const PlannedClaim&) const = default;
};
// nullopt when no assignment comes from an extended resource.
[[nodiscard]] std::optional<PlannedClaim> PlanExtendedResourceClaim(
    const kube::Pod& pod, std::string_view k8s_node,
    const std::vector<DeviceAssignment>& assignments);

// The pod status merge patch that tells the kubelet which claim holds its extended resources:
// {"status":{"extendedResourceClaimStatus":{"resourceClaimName":...,"requestMappings":[...]}}}.
[[nodiscard]] std::string ExtendedResourceClaimStatusPatch(
    std::string_view claim_name, const std::vector<RequestMapping>& mappings);

}  // namespace sb::bridge
