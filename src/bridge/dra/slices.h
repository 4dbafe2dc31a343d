// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/slices.h
//
// What the bridge reads of a resource.k8s.io/v1 ResourceSlice (the devices a node's DRA driver
// publishes), in the shape of Kubernetes 1.34+ (api/openapi-spec/v3/apis__resource.k8s.io__v1).
// bridge/dra/inventory.h turns a node's slices into the devices Slurm counts.
//
// Thread model: pure functions over plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "kube/types.h"

namespace sb::bridge {

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

}  // namespace sb::bridge
