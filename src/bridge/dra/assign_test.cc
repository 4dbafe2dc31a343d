// SPDX-License-Identifier: Apache-2.0
// Slurm's layout to devices (bridge/dra/assign.h).
#include "bridge/dra/assign.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

TEST_F(DraAssignTest, SlurmsIndicesTrimmedToTheRequest) {
  struct Case {
    std::string name;
    std::vector<DraRequest> requests;
    slurm::NodeAllocation layout;
    std::vector<std::vector<std::string>> want;  // devices per request
    std::vector<std::string> request_names;
  };
  slurm::NodeAllocation split = Layout("3");
  split.gres.push_back({.name = "gpu", .type = "fake", .count = 1, .index = "0"});
  DraRequest from_claim = Gpu(1);
  from_claim.resource_name.clear();
  from_claim.container.clear();
  from_claim.pod_claim = "gpu";
  from_claim.claim_request = "accel";
  const std::vector<Case> cases = {
      {"exact", {Gpu(2)}, Layout("1-2"), {{"gpu-1", "gpu-2"}}, {"gpu"}},
      {"an exclusive job holds all: the first n", {Gpu(1)}, Layout("0-3"), {{"gpu-0"}}, {"gpu"}},
      {"a list", {Gpu(2)}, Layout("3,1"), {{"gpu-3", "gpu-1"}}, {"gpu"}},
      {"two GRES entries", {Gpu(2)}, split, {{"gpu-3", "gpu-0"}}, {"gpu"}},
      {"two requests share the indices",
       {Gpu(1), from_claim},
       Layout("0-1"),
       {{"gpu-0"}, {"gpu-1"}},
       {"gpu", "accel"}},
      {"two classes of one profile get two request names",
       {Gpu(1), Gpu(1)},
       Layout("2-3"),
       {{"gpu-2"}, {"gpu-3"}},
       {"gpu", "gpu-2"}},
      {"cpus: a core is its CPUs",
       {Cpu(2)},
       Layout("0", "0x02"),
       {{"cpudev001", "cpudev005"}},
       {"cpu"}},
      {"cpus trimmed",
       {Cpu(3)},
       Layout("0", "0x0F"),
       {{"cpudev000", "cpudev004", "cpudev001"}},
       {"cpu"}},
      {"a bitmap as a list", {Cpu(2)}, Layout("0", "3"), {{"cpudev003", "cpudev007"}}, {"cpu"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<std::vector<DeviceAssignment>> got =
        AssignDevices(c.requests, inventory_, c.layout, kDefaults);
    ASSERT_TRUE(got) << got.error().message;
    ASSERT_EQ(got->size(), c.want.size());
    for (std::size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ(Names((*got)[i].devices), c.want[i]);
      EXPECT_EQ((*got)[i].request_name, c.request_names[i]);
    }
  }
}

TEST_F(DraAssignTest, LayoutsThatNameNoDeviceAreErrors) {
  slurm::NodeAllocation no_index = Layout("");
  slurm::NodeAllocation other_gres = Layout("0");
  other_gres.gres[0].name = "fpga";
  slurm::NodeAllocation far_index = Layout("7");
  slurm::NodeAllocation no_bitmap = Layout("0", "");
  slurm::NodeAllocation wide_bitmap = Layout("0", "0x10");
  slurm::NodeAllocation cores_differ = Layout("0", "0x01");
  cores_differ.cores_per_socket = 8;
  struct Case {
    std::string name;
    std::vector<DraRequest> requests;
    slurm::NodeAllocation layout;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"upstream #33",
       {Gpu(1)},
       no_index,
       "Slurm's layout of node n1 lists GRES gpu:fake (count 2) without device indices "
       "(upstream slurm-bridge #33)"},
      {"fewer than asked",
       {Gpu(3)},
       Layout("0-1"),
       "device class \"gpu.example.com\" (profile \"gpu-example\"): requested 3, Slurm allocated "
       "2 gres/gpu on node n1"},
      {"none of the GRES", {Gpu(1)}, other_gres, "requested 1, Slurm allocated 0"},
      {"an index with no device",
       {Gpu(1)},
       far_index,
       "Slurm's gpu index 7 on node n1 is no device of the profile"},
      {"a malformed index list", {Gpu(1)}, Layout("0-x"), "is not an index list"},
      {"no core bitmap", {Cpu(1)}, no_bitmap, "has no core bitmap"},
      {"a core beyond the inventory",
       {Cpu(1)},
       wide_bitmap,
       "core 4 of Slurm's core bitmap 0x10 has no CPU"},
      {"Slurm counts other cores",
       {Cpu(1)},
       cores_differ,
       "Slurm counts 8 cores on node n1 (1 socket(s) x 8), its ResourceSlices 4"},
      {"fewer CPUs than asked",
       {Cpu(3)},
       Layout("0", "0x01"),
       "requested 3 CPUs, Slurm allocated 2 on node n1"},
      {"a malformed bitmap", {Cpu(1)}, Layout("0", "0xZZ"), "is not hex"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<std::vector<DeviceAssignment>> got =
        AssignDevices(c.requests, inventory_, c.layout, kDefaults);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find(c.error), std::string::npos) << got.error().message;
  }
  // A node without CPU devices.
  Result<NodeInventory> gpus_only =
      BuildNodeInventory("n1", {SliceFile("resourceslice_gpu_example_n1.json")}, kDefaults);
  ASSERT_TRUE(gpus_only);
  Result<std::vector<DeviceAssignment>> got =
      AssignDevices({Cpu(1)}, *gpus_only, Layout("0", "0x01"), kDefaults);
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("publishes no CPU device"), std::string::npos)
      << got.error().message;
}

}  // namespace
}  // namespace sb::bridge
