// SPDX-License-Identifier: Apache-2.0
// Agreement of a node's inventory with Slurm's GRES (bridge/dra/gres_agreement.h).
#include "bridge/dra/gres_agreement.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

TEST(DraGresTest, ParsesSlurmNodeGres) {
  struct Case {
    std::string gres;
    std::vector<NodeGres> want;
  };
  const std::vector<Case> cases = {
      {"", {}},
      {"gpu:fake:4", {{"gpu", "fake", 4, {0, 1, 2, 3}}}},
      {"gpu:2", {{"gpu", "", 2, {0, 1}}}},
      {"gpu:a100:2(S:0-1),gpu:v100:1(S:0)", {{"gpu", "a100", 2, {0, 1}}, {"gpu", "v100", 1, {2}}}},
      {"gpu:fake:4(IDX:0,2-3),shard:8",
       {{"gpu", "fake", 4, {0, 2, 3}}, {"shard", "", 8, {0, 1, 2, 3, 4, 5, 6, 7}}}},
      {"gpu:fake:0(IDX:N/A)", {{"gpu", "fake", 0, {}}}},
      {"mps:1M", {{"mps", "", 1024 * 1024, {}}}},
      {"gpu", {{"gpu", "", 1, {0}}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.gres);
    Result<std::vector<NodeGres>> got = ParseNodeGres(c.gres);
    ASSERT_TRUE(got) << got.error().message;
    EXPECT_EQ(*got, c.want);
  }
  for (std::string bad : {"gpu:a:b:4", "gpu:fake:4(IDX:x)", "gpu:fake:4(S:0", ":4", "gpu:t:x"}) {
    SCOPED_TRACE(bad);
    Result<std::vector<NodeGres>> got = ParseNodeGres(bad);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find("Slurm GRES"), std::string::npos);
  }
}

TEST(DraGresTest, AgreementPerProfile) {
  const std::vector<ResourceSliceInfo> n1_slices = {SliceFile("resourceslice_gpu_example_n1.json"),
                                                    SliceFile("resourceslice_dra_cpu_n1.json")};
  Result<NodeInventory> full = BuildNodeInventory("n1", n1_slices, kDefaults);
  ASSERT_TRUE(full) << full.error().message;
  Result<NodeInventory> two_gpus = BuildNodeInventory(
      "n1", {Slice("gpu.example.com", "n1", {ExampleGpu(0), ExampleGpu(1)})}, kDefaults);
  ASSERT_TRUE(two_gpus);
  Result<NodeInventory> empty = BuildNodeInventory("n1", {}, kDefaults);
  ASSERT_TRUE(empty);
  Result<NodeInventory> incomplete =
      BuildNodeInventory("n1", {Slice("gpu.example.com", "n1", {ExampleGpu(0)}, 1, 2)}, kDefaults);
  ASSERT_TRUE(incomplete);

  struct Case {
    std::string name;
    const NodeInventory* inventory;
    std::string gres;
    std::int64_t cpus;
    bool agrees;
    std::set<std::string> usable;
    std::string reason;  // a part of it
  };
  const std::vector<Case> cases = {
      {"all agree",
       &*full,
       "gpu:fake:4",
       8,
       true,
       {"cpu", "gpu-example"},
       "gpu: indices 0-3 as Slurm; cpu: 8 CPUs as Slurm"},
      {"slurm has more gpus",
       &*two_gpus,
       "gpu:fake:4",
       8,
       false,
       {},
       "gpu: Slurm has indices 0-3, the ResourceSlices of gpu-example, gpu-nvidia 0-1"},
      {"other indices", &*two_gpus, "gpu:fake:2(IDX:2-3)", 0, false, {}, "Slurm has indices 2-3"},
      {"slices publish what Slurm lacks",
       &*two_gpus,
       "",
       0,
       false,
       {},
       "Slurm has indices none, the ResourceSlices"},
      {"no DRA driver on the node",
       &*empty,
       "gpu:fake:4",
       8,
       true,
       {},
       "no ResourceSlice device of gpu-example, gpu-nvidia (no DRA driver for them here)"},
      {"cpus differ",
       &*full,
       "gpu:fake:4",
       16,
       false,
       {"gpu-example"},
       "cpu: Slurm has 16 CPUs, the ResourceSlices 8"},
      {"slurm's cpus unknown", &*full, "gpu:fake:4", 0, true, {"cpu", "gpu-example"}, ""},
      {"bad gres string", &*full, "gpu:fake:4(IDX:", 8, false, {}, "Slurm GRES"},
      {"incomplete pool",
       &*incomplete,
       "gpu:fake:1",
       8,
       true,
       {},
       "left out: gpu.example.com/n1: generation 1 has 1 of 2 ResourceSlices"},
      {"nothing on either side", &*empty, "", 0, true, {}, "no ResourceSlice CPU device"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    slurm::NodeInfo node{.name = "n1", .cpus = c.cpus, .gres = c.gres};
    GresAgreement got = CheckGresAgreement(*c.inventory, node, kDefaults);
    EXPECT_EQ(got.agrees, c.agrees) << got.reason;
    EXPECT_EQ(got.usable_profiles, c.usable) << got.reason;
    EXPECT_NE(got.reason.find(c.reason), std::string::npos) << got.reason;
  }

  // A typed profile takes its type only; the untyped one the rest of the name.
  std::vector<DeviceProfile> typed = kDefaults;
  typed[2].gres_type = "h100";
  Result<NodeInventory> both = BuildNodeInventory(
      "n1",
      {Slice("gpu.example.com", "n1", {ExampleGpu(0), ExampleGpu(1)}),
       Slice("gpu.nvidia.com", "n1",
             {{.name = "gpu-2", .attributes = {{"gpu.nvidia.com/type", Str("gpu")}}}})},
      typed);
  ASSERT_TRUE(both) << both.error().message;
  GresAgreement got =
      CheckGresAgreement(*both, {.name = "n1", .gres = "gpu:fake:2,gpu:h100:1"}, typed);
  EXPECT_TRUE(got.agrees) << got.reason;
  EXPECT_EQ(got.usable_profiles, (std::set<std::string>{"gpu-example", "gpu-nvidia"}));
  EXPECT_NE(got.reason.find("gpu:h100: indices 2 as Slurm"), std::string::npos) << got.reason;
}

}  // namespace
}  // namespace sb::bridge
