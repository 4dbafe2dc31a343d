// SPDX-License-Identifier: Apache-2.0
//
// testing/dra_fixtures.h
//
// Test-only: the objects the DRA tests (src/bridge/dra/*_test.cc) share: ResourceSlices, devices
// and pods built in code or read from testing/testdata/kube/, the default profiles, and the
// inventory of node n1 that the assign and claims tests map Slurm's layouts through. Never
// included by a library.
//
// No DRA driver runs in the unit tests, so the objects under testing/testdata/kube/
// (resourceslice_*, deviceclass_*, resourceclaimtemplate_*, pod_dra_claims.json, and the
// expected claim resourceclaim_extended_n1.json) are written by hand from the resource.k8s.io/v1
// OpenAPI schema of kubernetes/kubernetes
// (api/openapi-spec/v3/apis__resource.k8s.io__v1_openapi.json) and from what the drivers document
// they publish: dra-example-driver (gpu-<n>, attribute index), dra-driver-nvidia-gpu (gpu-<minor>,
// attribute type gpu or mig) and dra-driver-cpu's individual mode (one device per CPU with
// dra.cpu/cpuID, coreID, socketID).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bridge/config.h"
#include "bridge/dra/inventory.h"
#include "bridge/dra/requests.h"
#include "bridge/dra/slices.h"
#include "kube/codec.h"
#include "slurm/types.h"
#include "testing/testdata.h"

namespace sb::bridge::dra_test {

inline kube::GenericObject Object(std::string_view text) {
  Result<kube::GenericObject> o = kube::Decode<kube::GenericObject>(text);
  EXPECT_TRUE(o) << (o ? "" : o.error().message);
  return o ? *o : kube::GenericObject{};
}

inline kube::GenericObject ObjectFile(const std::string& name) {
  return Object(sb::testing::ReadTestData("kube/" + name));
}

inline ResourceSliceInfo SliceFile(const std::string& name) {
  Result<ResourceSliceInfo> s = ParseResourceSliceJson(sb::testing::ReadTestData("kube/" + name));
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? *s : ResourceSliceInfo{};
}

inline DeviceAttribute Int(std::int64_t v) {
  return {.type = DeviceAttribute::Type::kInt, .int_value = v};
}
inline DeviceAttribute Str(std::string v) {
  return {.type = DeviceAttribute::Type::kString, .string_value = std::move(v)};
}

// A gpu.example.com device "gpu-<i>" with index i.
inline SliceDevice ExampleGpu(std::int64_t i) {
  return {.name = "gpu-" + std::to_string(i), .attributes = {{"gpu.example.com/index", Int(i)}}};
}

inline ResourceSliceInfo Slice(std::string driver, std::string node,
                               std::vector<SliceDevice> devices, std::int64_t generation = 1,
                               std::int64_t count = 1, std::string pool = "") {
  return {.name = driver + "-" + node,
          .driver = driver,
          .pool = pool.empty() ? node : pool,
          .generation = generation,
          .resource_slice_count = count,
          .node_name = node,
          .devices = std::move(devices)};
}

inline kube::Pod PodAsking(std::map<std::string, std::string> limits,
                           std::string container = "main") {
  kube::Pod pod;
  pod.metadata.name = "train-0";
  pod.metadata.namespace_ = "team-a";
  pod.metadata.uid = "0b7a1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d";
  kube::Container c;
  c.name = std::move(container);
  c.resources.limits = limits;
  c.resources.requests = std::move(limits);  // the apiserver defaults requests to limits
  pod.spec.containers.push_back(std::move(c));
  return pod;
}

inline std::vector<std::string> Names(const std::vector<InventoryDevice>& devices) {
  std::vector<std::string> out;
  for (const InventoryDevice& d : devices) out.push_back(d.device);
  return out;
}

inline const std::vector<DeviceProfile> kDefaults = DefaultDeviceProfiles();

// Node n1's inventory (the example driver's four GPUs and dra.cpu's CPUs, read from testdata)
// and requests of the default profiles' classes, for AssignDevices and the claims.
class DraAssignTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<NodeInventory> inv = BuildNodeInventory("n1",
                                                   {SliceFile("resourceslice_gpu_example_n1.json"),
                                                    SliceFile("resourceslice_dra_cpu_n1.json")},
                                                   kDefaults);
    ASSERT_TRUE(inv) << inv.error().message;
    inventory_ = *inv;
  }
  static DraRequest Gpu(std::int64_t n) {
    return {.device_class = "gpu.example.com",
            .profile = "gpu-example",
            .count = n,
            .resource_name = "deviceclass.resource.kubernetes.io/gpu.example.com",
            .container = "main"};
  }
  static DraRequest Cpu(std::int64_t n) {
    return {.device_class = "dra.cpu",
            .profile = "cpu",
            .count = n,
            .resource_name = "deviceclass.resource.kubernetes.io/dra.cpu",
            .container = "main"};
  }
  static slurm::NodeAllocation Layout(std::string index, std::string bitmap = "0x01") {
    return {.node = "n1",
            .sockets_per_node = 1,
            .cores_per_socket = 4,
            .core_bitmap = std::move(bitmap),
            .gres = {{.name = "gpu", .type = "fake", .count = 2, .index = std::move(index)}}};
  }
  NodeInventory inventory_;
};

}  // namespace sb::bridge::dra_test
