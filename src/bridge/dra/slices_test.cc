// SPDX-License-Identifier: Apache-2.0
// ResourceSlices read (bridge/dra/slices.h).
#include "bridge/dra/slices.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

TEST(DraSliceTest, ParsesTheApiShape) {
  const ResourceSliceInfo s = SliceFile("resourceslice_gpu_example_n1.json");
  EXPECT_EQ(s.name, "n1-gpu.example.com-x7k2p");
  EXPECT_EQ(s.driver, "gpu.example.com");
  EXPECT_EQ(s.pool, "n1");
  EXPECT_EQ(s.node_name, "n1");
  EXPECT_EQ(s.generation, 1);
  EXPECT_EQ(s.resource_slice_count, 1);
  ASSERT_EQ(s.devices.size(), 4U);
  // Bare attribute names get the driver's domain.
  EXPECT_EQ(s.devices[2].attributes.at("gpu.example.com/index"), Int(2));
  EXPECT_EQ(s.devices[2].attributes.at("gpu.example.com/driverVersion").type,
            DeviceAttribute::Type::kVersion);
  const ResourceSliceInfo cpu = SliceFile("resourceslice_dra_cpu_n1.json");
  EXPECT_EQ(cpu.devices[4].attributes.at("dra.cpu/coreID"), Int(0));
  EXPECT_EQ(cpu.devices[4].attributes.at("resource.kubernetes.io/numaNode"), Int(0));
}

TEST(DraSliceTest, MalformedSlicesAreClearErrors) {
  struct Case {
    std::string json;
    std::string error;
  };
  const std::vector<Case> cases = {
      {R"({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"pool":{"name":"p",)"
       R"("resourceSliceCount":1}}})",
       "ResourceSlice \"s\": spec.driver is missing"},
      {R"({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d.io",)"
       R"("pool":{"name":"p"}}})",
       "resourceSliceCount must be above 0"},
      {R"({"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d.io",)"
       R"("pool":{"name":"p","resourceSliceCount":1},"devices":[{"attributes":{}}]}})",
       "spec.devices[0] has no name"},
      {R"({"kind":"Node","metadata":{"name":"n1"}})", "Node \"n1\" is not a ResourceSlice"},
      {"[1,2", "not a Kubernetes object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    Result<ResourceSliceInfo> got = ParseResourceSliceJson(c.json);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find(c.error), std::string::npos) << got.error().message;
  }
}

}  // namespace
}  // namespace sb::bridge
