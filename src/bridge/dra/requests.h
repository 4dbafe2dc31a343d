// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/requests.h
//
// What a pod asks through DRA, resolved to device profiles. A pod asks in two ways: an extended
// resource `deviceclass.resource.kubernetes.io/<class>` (or a DeviceClass's
// spec.extendedResourceName), for which the bridge creates one claim per pod (upstream's
// "extended resource claim", claims.h), or pod.spec.resourceClaims naming a
// ResourceClaimTemplate whose requests a profile covers, whose claim (made by the resourceclaim
// controller) the bridge allocates. Either way the Slurm job asks for the profile's GRES
// (DraTres) or CPUs, and after Slurm allocates, AssignDevices (assign.h) maps what Slurm gave to
// devices.
//
// Objects are read from kube::GenericObject (spec_json) or whole JSON text, in the
// resource.k8s.io/v1 shape of Kubernetes 1.34+.
//
// Thread model: pure functions over plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/dra/profile.h"
#include "common/error.h"
#include "kube/types.h"

namespace sb::bridge {

// Extended resources of DRA device classes: "deviceclass.resource.kubernetes.io/<class>".
inline constexpr std::string_view kDraExtendedResourcePrefix =
    "deviceclass.resource.kubernetes.io/";

// One entry of pod.spec.resourceClaims (kube::PodSpec does not keep them), with the claim the
// resourceclaim controller made from its template (pod.status.resourceClaimStatuses).
struct PodResourceClaim {
  std::string name;                          // the pod's name for the claim
  std::string resource_claim_name;           // an existing claim, shared (refused)
  std::string resource_claim_template_name;  // a template: one claim per pod
  std::string generated_claim_name;          // status: the claim made from the template
  bool operator==(const PodResourceClaim&) const = default;
};
// The pod's spec.resourceClaims and status.resourceClaimStatuses from its whole JSON text
// (empty when it has none). kInvalidArgument when the text is not a pod object.
[[nodiscard]] Result<std::vector<PodResourceClaim>> PodResourceClaimsOf(std::string_view pod_json);
// The same from a decoded pod (kube::PodSpec::resource_claims, PodStatus::resource_claim_statuses).
[[nodiscard]] std::vector<PodResourceClaim> PodResourceClaimsOf(const kube::Pod& pod);

// One thing a pod asks through DRA, resolved to its profile.
struct DraRequest {
  std::string device_class;
  std::string profile;
  std::int64_t count = 0;  // devices (indexed-gres) or CPUs (core-bitmap)
  // An extended resource: its name and the container that requests it (one per class, as
  // upstream: two containers asking for one class cannot be told apart in one claim request).
  std::string resource_name;
  std::string container;
  // A claim: the pod's name for it and the request's name in the claim.
  std::string pod_claim;
  std::string claim_request;
  bool operator==(const DraRequest&) const = default;
};

// Objects the caller read, by name; a class or template that is absent was not read.
using ObjectsByName = std::map<std::string, const kube::GenericObject*, std::less<>>;

// The requests of a ResourceClaimTemplate or ResourceClaim the profiles cover. Each request must
// be `exactly` one DeviceClass with allocationMode ExactCount (count default 1), without
// selectors (Slurm chooses), adminAccess or capacity (device tolerations and opaque config pass
// through: they do not choose devices); the claim must have no constraints. The requests keep
// the claim's request names. kInvalidArgument naming the request otherwise.
[[nodiscard]] Result<std::vector<DraRequest>> ClaimRequests(
    const kube::GenericObject& claim_or_template, const std::vector<DeviceProfile>& profiles,
    const ObjectsByName& device_classes);

// The pod's DRA requests: first its extended resources of covered classes (sorted by resource
// name; `device_classes` also maps their spec.extendedResourceName to them), then the requests of
// its template claims, in the pod's order. kInvalidArgument (the message names the resource,
// container or claim) for a class no profile covers, a class requested by two containers, a
// shared claim (resourceClaimName), or a template that is absent from `claim_templates` or
// not covered.
[[nodiscard]] Result<std::vector<DraRequest>> PodDraRequests(
    const kube::Pod& pod, const std::vector<DeviceProfile>& profiles,
    const ObjectsByName& device_classes, const std::vector<PodResourceClaim>& claims = {},
    const ObjectsByName& claim_templates = {});

// What PodDraRequests and DraAdmissionProblems (admission.h) both read: every request that
// resolves, in PodDraRequests' order, with one message appended to `problems` per one that does
// not.
[[nodiscard]] std::vector<DraRequest> CollectDraRequests(
    const kube::Pod& pod, const std::vector<DeviceProfile>& profiles,
    const ObjectsByName& device_classes, const std::vector<PodResourceClaim>& claims,
    const ObjectsByName& claim_templates, std::vector<std::string>& problems);

}  // namespace sb::bridge
