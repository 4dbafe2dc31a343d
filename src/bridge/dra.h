// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra.h
//
// Dynamic Resource Allocation (resource.k8s.io/v1) where Slurm, not kube-scheduler, chooses the
// devices: the pure half of issue #28. Slurm allocates a pod's GPUs (GRES indices) and CPUs (the
// job's core bitmap); the functions here say which ResourceSlice devices those are and write the
// ResourceClaim whose allocation names exactly them, so that the node's DRA driver hands the
// container what Slurm reserved and nothing else. No I/O: the caller reads the ResourceSlices,
// DeviceClasses, claim templates and Slurm's /resources/{job} layout, and writes what comes out.
//
// The device profiles (config deviceProfiles, upstream 1.3's registry) decide which devices
// count: a profile names a DRA driver, a CEL selector over one device and a backend:
//   indexed-gres  a device is one index of a Slurm GRES ("gpu"): its index comes from its name
//                 ("gpu-3", NVIDIA's gpu-<minor>) or an int attribute (the example driver's
//                 `index`), as the profile's indexFrom says;
//   core-bitmap   a device is one CPU (dra.cpu's individual mode: attributes cpuID, coreID,
//                 socketID, coreType): bit k of Slurm's core bitmap is the k-th core in (socket,
//                 core) order, and stands for all of its CPUs (hyperthreads).
// The bridge has no CEL interpreter: a selector is read as a conjunction (&&) of comparisons
// (== or !=) of device.driver or device.attributes['<domain>'].<name> with a string, integer or
// boolean literal, which covers upstream's defaults; any other selector is refused at config load.
// A comparison with an attribute the device lacks, or of another type, is false (CEL would stop
// with an error).
//
// A pod asks through DRA in two ways: an extended resource
// `deviceclass.resource.kubernetes.io/<class>` (or a DeviceClass's spec.extendedResourceName),
// for which the bridge creates one claim per pod (upstream's "extended resource claim"), or
// pod.spec.resourceClaims naming a ResourceClaimTemplate whose requests a profile covers, whose
// claim (made by the resourceclaim controller) the bridge allocates. Either way the Slurm job asks
// for the profile's GRES (DraTres) or CPUs, and after Slurm allocates, AssignDevices maps Slurm's
// indices and core bitmap on the pod's node to devices, trimmed to what each request asks (the
// first n indices; an exclusive job holds every GPU of its node), and PlanExtendedResourceClaim /
// AllocationStatusJson write the claim.
//
// Objects are read from kube::GenericObject (spec_json) or whole JSON text, in the
// resource.k8s.io/v1 shape of Kubernetes 1.34+ (api/openapi-spec/v3/apis__resource.k8s.io__v1).
//
// Thread model: pure functions over plain values.
//
// Example (the binder's pre-bind step, next part of #28):
//   auto inv = BuildNodeInventory(node.metadata.name, slices, config.device_profiles);
//   auto reqs = PodDraRequests(pod, config.device_profiles, classes, claims, templates);
//   auto assigned = AssignDevices(*reqs, *inv, allocation_on_node, config.device_profiles);
//   auto claim = PlanExtendedResourceClaim(pod, node.metadata.name, *assigned);
//   // POST claim->object_json, PATCH its status with claim->status_json, then the pod's status
//   // with ExtendedResourceClaimStatusPatch(created_name, claim->mappings), then bind.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/config.h"
#include "common/error.h"
#include "kube/types.h"
#include "slurm/types.h"

namespace sb::bridge {

// Extended resources of DRA device classes: "deviceclass.resource.kubernetes.io/<class>".
inline constexpr std::string_view kDraExtendedResourcePrefix =
    "deviceclass.resource.kubernetes.io/";
// Annotation on a claim made for a pod's extended resources (resourcev1's
// ExtendedResourceClaimAnnotation), as kube-scheduler and upstream write it.
inline constexpr std::string_view kExtendedResourceClaimAnnotation =
    "resource.kubernetes.io/extended-resource-claim";

// ---- Device profiles ------------------------------------------------------------------------

// One comparison of a selector: device.driver, or device.attributes['<domain>'].<name>, == or !=
// a literal.
struct SelectorTerm {
  enum class Kind { kDriver, kAttribute };
  enum class Type { kString, kInt, kBool };
  Kind kind = Kind::kDriver;
  std::string attribute;  // kAttribute: "<domain>/<name>" ("gpu.nvidia.com/type")
  bool negated = false;   // !=
  Type type = Type::kString;
  std::string string_value;
  std::int64_t int_value = 0;
  bool bool_value = false;
  bool operator==(const SelectorTerm&) const = default;
};

// The selector as the conjunction of its terms. kInvalidArgument, saying what is not understood,
// for anything outside the subset above.
[[nodiscard]] Result<std::vector<SelectorTerm>> ParseDeviceSelector(std::string_view cel);

// Checks a profile list as upstream's registry does: unique names (letters, digits, '.', '_',
// '-'; alphanumeric at both ends), drivers that are DNS subdomains of at most 63 characters,
// non-empty selectors of at most 10 KiB, understood (ParseDeviceSelector), unique, and not
// constraining device.driver to another driver; indexed-gres with a gresName that is a DNS label
// of at most 60 characters (it is also a claim request name), a valid indexFrom; at most one
// core-bitmap profile. The message names the profile: `profile "gpu-x": ...`.
[[nodiscard]] Result<void> ValidateDeviceProfiles(const std::vector<DeviceProfile>& profiles);

// The profile named `name`; nullptr when none.
[[nodiscard]] const DeviceProfile* FindProfile(const std::vector<DeviceProfile>& profiles,
                                               std::string_view name);

// The DeviceClass a request names, resolved to its profile as upstream resolves it: the class
// (resource.k8s.io/v1 DeviceClass) must have no spec.config and exactly one CEL selector whose
// expression is byte for byte a profile's selector. Without the class object (`device_class`
// nullptr: not read), the profile whose driver is the class name, when exactly one is (the
// default DeviceClasses of dra.cpu, gpu.example.com and gpu.nvidia.com are named so).
// kInvalidArgument saying why the class is not covered.
[[nodiscard]] Result<const DeviceProfile*> ProfileForClass(
    std::string_view class_name, const kube::GenericObject* device_class,
    const std::vector<DeviceProfile>& profiles);

// What a Slurm job asks for a profile's devices, per node: "gres/gpu" (or "gres/gpu:<gresType>")
// for indexed-gres, "" for core-bitmap (the job's cpus_per_task carries the CPUs).
[[nodiscard]] std::string DraTres(const DeviceProfile& profile);

// ---- ResourceSlices and the node's inventory ------------------------------------------------

// A device attribute (resource.k8s.io/v1 DeviceAttribute); `version` is kept as its text.
struct DeviceAttribute {
  enum class Type { kString, kInt, kBool, kVersion };
  Type type = Type::kString;
  std::string string_value;
  std::int64_t int_value = 0;
  bool bool_value = false;
  bool operator==(const DeviceAttribute&) const = default;
};

// One device of a ResourceSlice. Attribute names are qualified: a bare name ("index") gets the
// driver's domain ("gpu.example.com/index"), as the DRA API defines.
struct SliceDevice {
  std::string name;
  std::map<std::string, DeviceAttribute> attributes;
  std::string node_name;  // per-device node selection: the device's nodeName
  bool operator==(const SliceDevice&) const = default;
};

// What the bridge reads of a resource.k8s.io/v1 ResourceSlice.
struct ResourceSliceInfo {
  std::string name;  // metadata.name
  std::string driver;
  std::string pool;
  std::int64_t generation = 0;
  std::int64_t resource_slice_count = 0;
  std::string node_name;  // spec.nodeName ("" when not node-local)
  bool per_device_node_selection = false;
  std::vector<SliceDevice> devices;
  bool operator==(const ResourceSliceInfo&) const = default;
};

// A ResourceSlice object (spec_json), or its whole JSON text. kInvalidArgument naming the slice
// and the field when it is malformed (no driver, no pool, a device without a name).
[[nodiscard]] Result<ResourceSliceInfo> ParseResourceSlice(const kube::GenericObject& slice);
[[nodiscard]] Result<ResourceSliceInfo> ParseResourceSliceJson(std::string_view json);

// Whether `device` (of `driver`) matches the profile's selector.
[[nodiscard]] bool ProfileMatches(const DeviceProfile& profile, std::string_view driver,
                                  const SliceDevice& device);

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

// ---- Does the node's inventory agree with Slurm's GRES? -------------------------------------

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

// ---- A pod's DRA requests -------------------------------------------------------------------

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

// ---- From Slurm's allocation to devices -----------------------------------------------------

// The devices one request gets.
struct DeviceAssignment {
  DraRequest request;
  std::string request_name;  // the claim's request name: the claim's own, else chosen here
  std::vector<InventoryDevice> devices;
  bool operator==(const DeviceAssignment&) const = default;
};

// Slurm's allocation on the pod's node (the /resources/{job} entry of that node) to devices,
// request by request in order: an indexed-gres request takes the next `count` of the indices of
// the Slurm GRES of its profile's gresName (and gresType) on the node, a core-bitmap request the
// next `count` CPUs of the cores set in core_bitmap ("0x0F", or a list "0-3"), in core order. The
// extended-resource requests get claim request names: "cpu" for core-bitmap, the gresName for
// indexed-gres ("gpu", then "gpu-2", ... when taken). kInvalidArgument when Slurm gave fewer than
// asked ("... requested 2, Slurm allocated 1"), a GRES entry has no index list (upstream #33: the
// message says Slurm's layout named no device), an index or a core has no device on the node, or
// the bitmap is malformed.
[[nodiscard]] Result<std::vector<DeviceAssignment>> AssignDevices(
    const std::vector<DraRequest>& requests, const NodeInventory& inventory,
    const slurm::NodeAllocation& allocation, const std::vector<DeviceProfile>& profiles);

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

// ---- Admission ------------------------------------------------------------------------------

// Why the webhook refuses the pod on the DRA path: one message per problem, empty when it is
// accepted. Refused: an extended resource of a class no profile covers (the message lists the
// covered classes, or says DRA is off when there are no profiles), a class asked for by two
// containers, the core-bitmap class together with native cpu, the annotations cpu-per-task with
// the core-bitmap class or gres with an indexed-gres class (upstream's checks), a shared
// ResourceClaim, and a template claim whose template is absent from `claim_templates` (not
// readable) or asks for something Slurm cannot choose (ClaimRequests).
[[nodiscard]] std::vector<std::string> DraAdmissionProblems(
    const kube::Pod& pod, const std::vector<DeviceProfile>& profiles,
    const ObjectsByName& device_classes, const std::vector<PodResourceClaim>& claims = {},
    const ObjectsByName& claim_templates = {});

// ---- Helpers (exposed for tests) ------------------------------------------------------------

// Slurm's index list "0-1,3" -> {0, 1, 3}. kInvalidArgument when malformed, empty, or longer than
// 4096 indices.
[[nodiscard]] Result<std::vector<std::int64_t>> ExpandIndexList(std::string_view list);
// The bits set in a Slurm bitmap: hex "0x0F" (bit 0 the lowest of the last digit) or a list
// "0-3,8". kInvalidArgument when malformed or wider than 65536 bits.
[[nodiscard]] Result<std::vector<std::int64_t>> BitmapBits(std::string_view bitmap);

}  // namespace sb::bridge
