// SPDX-License-Identifier: Apache-2.0
// Node inventories from ResourceSlices (bridge/dra/inventory.h).
#include "bridge/dra/inventory.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

TEST(DraInventoryTest, GpusAndCpusOfTheNode) {
  const std::vector<ResourceSliceInfo> slices = {SliceFile("resourceslice_gpu_example_n1.json"),
                                                 SliceFile("resourceslice_dra_cpu_n1.json"),
                                                 SliceFile("resourceslice_gpu_nvidia_n2.json")};
  Result<NodeInventory> n1 = BuildNodeInventory("n1", slices, kDefaults);
  ASSERT_TRUE(n1) << n1.error().message;
  EXPECT_EQ(Names(n1->devices.at("gpu-example")),
            (std::vector<std::string>{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}));
  EXPECT_FALSE(n1->devices.contains("gpu-nvidia"));  // n2's
  EXPECT_EQ(n1->ByIndex("gpu-example", 3)->device, "gpu-3");
  EXPECT_EQ(n1->ByIndex("gpu-example", 3)->pool, "n1");
  EXPECT_EQ(n1->ByIndex("gpu-example", 4), nullptr);
  // 4 cores of 2 CPUs (siblings c and c+4): Slurm's core k is CPUs {k, k+4}.
  EXPECT_EQ(n1->CoreCount("cpu"), 4);
  EXPECT_EQ(n1->ByCpu("cpu", 5)->core, 1);
  EXPECT_EQ(n1->ByCpu("cpu", 5)->device, "cpudev005");
  EXPECT_EQ(n1->ByCpu("cpu", 2)->core, 2);
  EXPECT_EQ(n1->ByCpu("cpu", 2)->index_attribute, "dra.cpu/cpuID");
  EXPECT_TRUE(n1->skipped_pools.empty());

  // NVIDIA: the index is the minor in the name gpu-<minor>, not the `index` attribute; the MIG
  // device is not of the profile (type mig).
  Result<NodeInventory> n2 = BuildNodeInventory("n2", slices, kDefaults);
  ASSERT_TRUE(n2) << n2.error().message;
  ASSERT_EQ(n2->devices.at("gpu-nvidia").size(), 2U);
  EXPECT_EQ(n2->ByIndex("gpu-nvidia", 0)->device, "gpu-0");
  EXPECT_EQ(n2->ByIndex("gpu-nvidia", 1)->device, "gpu-1");
  EXPECT_EQ(n2->ByIndex("gpu-nvidia", 0)->index_attribute, "");
}

TEST(DraInventoryTest, OnlyCompleteCurrentPoolsOfTheNode) {
  struct Case {
    std::string name;
    std::vector<ResourceSliceInfo> slices;
    std::vector<std::string> want;  // gpu-example devices of n1
    std::string skipped;            // part of skipped_pools[0]; "" when none
  };
  ResourceSliceInfo per_device = Slice("gpu.example.com", "", {ExampleGpu(0), ExampleGpu(1)});
  per_device.per_device_node_selection = true;
  per_device.devices[0].node_name = "n1";
  per_device.devices[1].node_name = "n2";
  ResourceSliceInfo all_nodes = Slice("gpu.example.com", "", {ExampleGpu(5)}, 1, 1, "shared");
  const std::vector<Case> cases = {
      {"one slice",
       {Slice("gpu.example.com", "n1", {ExampleGpu(0), ExampleGpu(1)})},
       {"gpu-0", "gpu-1"},
       ""},
      {"two slices of a pool",
       {Slice("gpu.example.com", "n1", {ExampleGpu(0)}, 1, 2),
        Slice("gpu.example.com", "n1", {ExampleGpu(1)}, 1, 2)},
       {"gpu-0", "gpu-1"},
       ""},
      {"one of two slices",
       {Slice("gpu.example.com", "n1", {ExampleGpu(0)}, 1, 2)},
       {},
       "gpu.example.com/n1: generation 1 has 1 of 2 ResourceSlices"},
      {"an old generation is ignored",
       {Slice("gpu.example.com", "n1", {ExampleGpu(0), ExampleGpu(1)}, 1),
        Slice("gpu.example.com", "n1", {ExampleGpu(2)}, 2)},
       {"gpu-2"},
       ""},
      {"counts that disagree",
       {Slice("gpu.example.com", "n1", {ExampleGpu(0)}, 1, 1),
        Slice("gpu.example.com", "n1", {ExampleGpu(1)}, 1, 2)},
       {},
       "disagree on resourceSliceCount"},
      {"another node's incomplete pool is no concern",
       {Slice("gpu.example.com", "n2", {ExampleGpu(0)}, 1, 2),
        Slice("gpu.example.com", "n1", {ExampleGpu(3)})},
       {"gpu-3"},
       ""},
      {"per-device node selection", {per_device}, {"gpu-0"}, ""},
      {"pools of every node are not node-local", {all_nodes}, {}, ""},
      {"other drivers are not read", {Slice("fpga.example.com", "n1", {ExampleGpu(0)})}, {}, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<NodeInventory> got = BuildNodeInventory("n1", c.slices, kDefaults);
    ASSERT_TRUE(got) << got.error().message;
    auto it = got->devices.find("gpu-example");
    EXPECT_EQ(it == got->devices.end() ? std::vector<std::string>{} : Names(it->second), c.want);
    if (c.skipped.empty()) {
      EXPECT_TRUE(got->skipped_pools.empty());
    } else {
      ASSERT_EQ(got->skipped_pools.size(), 1U);
      EXPECT_NE(got->skipped_pools[0].find(c.skipped), std::string::npos) << got->skipped_pools[0];
    }
  }
}

TEST(DraInventoryTest, BadInventoriesAreErrorsNamingTheDevice) {
  std::vector<DeviceProfile> overlapping = kDefaults;
  overlapping.push_back({.name = "gpu-example-fast",
                         .driver = "gpu.example.com",
                         .selector = "device.attributes['gpu.example.com'].index != 99",
                         .gres_name = "gpu"});
  SliceDevice no_index{.name = "gpu-x"};
  SliceDevice nvidia_bad_name{.name = "gpu-a", .attributes = {{"gpu.nvidia.com/type", Str("gpu")}}};
  SliceDevice grouped_cpu{.name = "cpudevnuma000", .attributes = {{"dra.cpu/numCPUs", Int(64)}}};
  SliceDevice cpu0{.name = "c0", .attributes = {{"dra.cpu/cpuID", Int(0)}}};
  SliceDevice cpu0_again{.name = "c1", .attributes = {{"dra.cpu/cpuID", Int(0)}}};
  struct Case {
    std::string name;
    std::vector<ResourceSliceInfo> slices;
    std::vector<DeviceProfile> profiles;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"two profiles",
       {Slice("gpu.example.com", "n1", {ExampleGpu(0)})},
       overlapping,
       "gpu.example.com/n1/gpu-0 matches device profiles \"gpu-example\" and "
       "\"gpu-example-fast\""},
      {"published twice",
       {Slice("gpu.example.com", "n1", {ExampleGpu(0)}, 1, 2),
        Slice("gpu.example.com", "n1", {ExampleGpu(0)}, 1, 2)},
       kDefaults,
       "gpu.example.com/n1/gpu-0 is published twice"},
      {"no index",
       {Slice("gpu.example.com", "n1", {no_index})},
       kDefaults,
       "gpu.example.com/n1/gpu-x (profile \"gpu-example\") has no Slurm GRES index: no "
       "non-negative int attribute gpu.example.com/index"},
      {"name without index",
       {Slice("gpu.nvidia.com", "n1", {nvidia_bad_name})},
       kDefaults,
       "its name does not end in -<index>"},
      {"one index twice",
       {Slice("gpu.example.com", "n1", {ExampleGpu(0)}),
        Slice("gpu.nvidia.com", "n1",
              {{.name = "gpu-0", .attributes = {{"gpu.nvidia.com/type", Str("gpu")}}}})},
       kDefaults,
       "both have Slurm gpu index 0 on node n1"},
      {"grouped cpus",
       {Slice("dra.cpu", "n1", {grouped_cpu})},
       kDefaults,
       "has no int attribute dra.cpu/cpuID"},
      {"one cpu twice", {Slice("dra.cpu", "n1", {cpu0, cpu0_again})}, kDefaults, "repeat CPU 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<NodeInventory> got = BuildNodeInventory("n1", c.slices, c.profiles);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find(c.error), std::string::npos) << got.error().message;
  }
}

TEST(DraInventoryTest, CoresWithoutSiblingsAndEfficiencyCores) {
  auto cpu = [](std::int64_t id, std::optional<std::int64_t> core, std::int64_t socket,
                std::string type = "standard") {
    SliceDevice d{.name = "cpu" + std::to_string(id),
                  .attributes = {{"dra.cpu/cpuID", Int(id)},
                                 {"dra.cpu/socketID", Int(socket)},
                                 {"dra.cpu/coreType", Str(std::move(type))}}};
    if (core) d.attributes["dra.cpu/coreID"] = Int(*core);
    return d;
  };
  // Two sockets whose core ids restart; an e-core Slurm does not count; a CPU without coreID.
  Result<NodeInventory> got =
      BuildNodeInventory("n1",
                         {Slice("dra.cpu", "n1",
                                {cpu(3, 0, 1), cpu(0, 0, 0), cpu(1, 1, 0), cpu(2, 1, 0),
                                 cpu(4, 7, 1, "e-core"), cpu(5, std::nullopt, 1)})},
                         kDefaults);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->CoreCount("cpu"), 4);
  EXPECT_EQ(got->ByCpu("cpu", 0)->core, 0);
  EXPECT_EQ(got->ByCpu("cpu", 1)->core, 1);
  EXPECT_EQ(got->ByCpu("cpu", 2)->core, 1);
  EXPECT_EQ(got->ByCpu("cpu", 3)->core, 2);
  EXPECT_EQ(got->ByCpu("cpu", 5)->core, 3);
  EXPECT_EQ(got->ByCpu("cpu", 4), nullptr);
}

}  // namespace
}  // namespace sb::bridge
