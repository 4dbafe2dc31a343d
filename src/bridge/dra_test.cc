// SPDX-License-Identifier: Apache-2.0
// DRA where Slurm chooses the devices (bridge/dra.h): profiles and their selectors, node
// inventories from ResourceSlices, agreement with Slurm's GRES, a pod's requests, Slurm's layout to
// devices and the claim written from it.
//
// No DRA driver runs in the test cluster yet (issue #28's next parts), so the objects under
// testing/testdata/kube/ (resourceslice_*, deviceclass_*, resourceclaimtemplate_*,
// pod_dra_claims.json, and the expected claim resourceclaim_extended_n1.json) are written by hand
// from the resource.k8s.io/v1 OpenAPI schema of kubernetes/kubernetes
// (api/openapi-spec/v3/apis__resource.k8s.io__v1_openapi.json) and from what the drivers document
// they publish: dra-example-driver (gpu-<n>, attribute index), dra-driver-nvidia-gpu (gpu-<minor>,
// attribute type gpu or mig) and dra-driver-cpu's individual mode (one device per CPU with
// dra.cpu/cpuID, coreID, socketID).
#include "bridge/dra.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "kube/codec.h"
#include "testing/testdata.h"

namespace sb::bridge {
namespace {

namespace json = boost::json;

kube::GenericObject Object(std::string_view text) {
  Result<kube::GenericObject> o = kube::Decode<kube::GenericObject>(text);
  EXPECT_TRUE(o) << (o ? "" : o.error().message);
  return o ? *o : kube::GenericObject{};
}

kube::GenericObject ObjectFile(const std::string& name) {
  return Object(sb::testing::ReadTestData("kube/" + name));
}

ResourceSliceInfo SliceFile(const std::string& name) {
  Result<ResourceSliceInfo> s = ParseResourceSliceJson(sb::testing::ReadTestData("kube/" + name));
  EXPECT_TRUE(s) << (s ? "" : s.error().message);
  return s ? *s : ResourceSliceInfo{};
}

DeviceAttribute Int(std::int64_t v) {
  return {.type = DeviceAttribute::Type::kInt, .int_value = v};
}
DeviceAttribute Str(std::string v) {
  return {.type = DeviceAttribute::Type::kString, .string_value = std::move(v)};
}

// A gpu.example.com device "gpu-<i>" with index i.
SliceDevice ExampleGpu(std::int64_t i) {
  return {.name = "gpu-" + std::to_string(i), .attributes = {{"gpu.example.com/index", Int(i)}}};
}

ResourceSliceInfo Slice(std::string driver, std::string node, std::vector<SliceDevice> devices,
                        std::int64_t generation = 1, std::int64_t count = 1,
                        std::string pool = "") {
  return {.name = driver + "-" + node,
          .driver = driver,
          .pool = pool.empty() ? node : pool,
          .generation = generation,
          .resource_slice_count = count,
          .node_name = node,
          .devices = std::move(devices)};
}

kube::Pod PodAsking(std::map<std::string, std::string> limits, std::string container = "main") {
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

std::vector<std::string> Names(const std::vector<InventoryDevice>& devices) {
  std::vector<std::string> out;
  for (const InventoryDevice& d : devices) out.push_back(d.device);
  return out;
}

const std::vector<DeviceProfile> kDefaults = DefaultDeviceProfiles();

// ---- Profiles ----

TEST(DraSelectorTest, ParsesTheSubsetAndRefusesTheRest) {
  struct Case {
    std::string cel;
    bool ok;
    std::size_t terms = 0;
  };
  const std::vector<Case> cases = {
      {R"(device.driver == "dra.cpu")", true, 1},
      {"device.driver == 'gpu.example.com'", true, 1},
      {"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
       true, 2},
      {"(device.driver == 'x.io') && ('gpu' == device.attributes[\"x.io\"].type)", true, 2},
      {"device.attributes['x.io']['index'] != 3 && device.attributes['x.io'].ok == true", true, 2},
      {"device.attributes['x.io'].n == -2", true, 1},
      {"device.driver == 'a' || device.driver == 'b'", false},
      {"device.attributes['x.io'].index in [0, 1]", false},
      {"device.attributes['x.io'].memory > 10", false},
      {"cel.bind(d, device.attributes['x.io'], d.ok)", false},
      {"device.driver == 1", false},
      {"device.driver == 'unterminated", false},
      {"", false},
      {"device.driver == 'a' &&", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cel);
    Result<std::vector<SelectorTerm>> got = ParseDeviceSelector(c.cel);
    EXPECT_EQ(bool(got), c.ok) << (got ? "" : got.error().message);
    if (got) {
      EXPECT_EQ(got->size(), c.terms);
    } else {
      EXPECT_NE(got.error().message.find("no CEL interpreter"), std::string::npos);
    }
  }
}

TEST(DraSelectorTest, MatchesAsTheDefaultProfilesMean) {
  const DeviceProfile& nvidia = kDefaults[2];
  SliceDevice gpu{.name = "gpu-0", .attributes = {{"gpu.nvidia.com/type", Str("gpu")}}};
  SliceDevice mig{.name = "gpu-0-mig", .attributes = {{"gpu.nvidia.com/type", Str("mig")}}};
  SliceDevice bare{.name = "gpu-1"};
  SliceDevice wrong_type{.name = "gpu-2", .attributes = {{"gpu.nvidia.com/type", Int(1)}}};
  EXPECT_TRUE(ProfileMatches(nvidia, "gpu.nvidia.com", gpu));
  EXPECT_FALSE(ProfileMatches(nvidia, "gpu.nvidia.com", mig));
  EXPECT_FALSE(ProfileMatches(nvidia, "gpu.nvidia.com", bare));  // CEL: an error; here: no match
  EXPECT_FALSE(ProfileMatches(nvidia, "gpu.nvidia.com", wrong_type));
  EXPECT_FALSE(ProfileMatches(nvidia, "gpu.example.com", gpu));
  EXPECT_TRUE(ProfileMatches(kDefaults[1], "gpu.example.com", bare));
  DeviceProfile negated{.name = "n",
                        .driver = "x.io",
                        .selector = "device.attributes['x.io'].model != 'old'",
                        .gres_name = "gpu"};
  EXPECT_TRUE(
      ProfileMatches(negated, "x.io", {.name = "a", .attributes = {{"x.io/model", Str("new")}}}));
  EXPECT_FALSE(
      ProfileMatches(negated, "x.io", {.name = "a", .attributes = {{"x.io/model", Str("old")}}}));
}

TEST(DraProfilesTest, ValidationNamesTheProfile) {
  auto gpu = [](std::string name) {
    return DeviceProfile{.name = name,
                         .driver = "x.example.com",
                         .selector =
                             "device.driver == 'x.example.com' && device.attributes"
                             "['x.example.com'].kind == '" +
                             name + "'",
                         .gres_name = "gpu"};
  };
  struct Case {
    std::string name;
    std::vector<DeviceProfile> profiles;
    std::string error;  // "" when valid
  };
  std::vector<Case> cases = {
      {"defaults", kDefaults, ""},
      {"none", {}, ""},
      {"two of one driver", {gpu("a"), gpu("b")}, ""},
  };
  {
    DeviceProfile p = gpu("-bad");
    cases.push_back({"bad name", {p}, "profile \"-bad\": the name must start"});
  }
  cases.push_back({"same name", {gpu("a"), gpu("a")}, "profile \"a\": the name is used twice"});
  {
    DeviceProfile p = gpu("a");
    p.driver = "X_Example";
    cases.push_back({"driver", {p}, "driver \"X_Example\" is not a DNS subdomain"});
  }
  {
    DeviceProfile p = gpu("a");
    p.selector = "device.driver == 'other.io'";
    cases.push_back({"driver mismatch", {p}, "asks for device.driver \"other.io\""});
  }
  {
    DeviceProfile p = gpu("b");
    p.selector = gpu("a").selector;
    cases.push_back({"same selector", {gpu("a"), p}, "has the selector of profile \"a\""});
  }
  {
    DeviceProfile p = gpu("a");
    p.selector = "device.attributes['x.io'].n > 1";
    cases.push_back({"not understood", {p}, "no CEL interpreter"});
  }
  {
    DeviceProfile p = gpu("a");
    p.selector.clear();
    cases.push_back({"no selector", {p}, "has no selector"});
  }
  {
    DeviceProfile p = gpu("a");
    p.gres_name.clear();
    cases.push_back({"no gres", {p}, "needs a gresName"});
    p.gres_name = "GPU";
    cases.push_back({"gres not a label", {p}, "gresName \"GPU\" must be a DNS label"});
    p.gres_name = "gpu";
    p.index_from = "minor";
    cases.push_back({"index from", {p}, "indexFrom \"minor\" is not"});
    p.index_from = "attribute:gpu.example.com/index";
    cases.push_back({"index from qualified", {p}, ""});
    p.index_from = "attribute:9x";
    cases.push_back({"index from bad attribute", {p}, "indexFrom \"attribute:9x\""});
  }
  {
    DeviceProfile cpu2 = kDefaults[0];
    cpu2.name = "cpu2";
    cpu2.selector = "device.driver == 'dra.cpu'";
    cases.push_back(
        {"two core bitmaps", {kDefaults[0], cpu2}, "profile \"cpu\" uses the core-bitmap backend"});
    cpu2 = kDefaults[0];
    cpu2.gres_name = "cpu";
    cases.push_back({"gres on core bitmap", {cpu2}, "are for the indexed-gres backend"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<void> got = ValidateDeviceProfiles(c.profiles);
    if (c.error.empty()) {
      EXPECT_TRUE(got) << (got ? "" : got.error().message);
    } else {
      ASSERT_FALSE(got);
      EXPECT_NE(got.error().message.find(c.error), std::string::npos) << got.error().message;
    }
  }
}

TEST(DraProfilesTest, ProfileForClassByDeviceClassOrByName) {
  // By name: the default DeviceClasses are named as their drivers.
  Result<const DeviceProfile*> p = ProfileForClass("gpu.nvidia.com", nullptr, kDefaults);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ((*p)->name, "gpu-nvidia");
  p = ProfileForClass("fpga.example.com", nullptr, kDefaults);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("covered: dra.cpu, gpu.example.com, gpu.nvidia.com"),
            std::string::npos)
      << p.error().message;
  p = ProfileForClass("gpu.example.com", nullptr, {});
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("DRA is off"), std::string::npos) << p.error().message;

  // By the DeviceClass: its one selector, byte for byte.
  const kube::GenericObject cls = ObjectFile("deviceclass_gpu_example.json");
  p = ProfileForClass("gpu.example.com", &cls, kDefaults);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ((*p)->name, "gpu-example");
  struct Case {
    std::string spec;
    std::string error;
  };
  const std::vector<Case> cases = {
      {R"({"selectors":[{"cel":{"expression":"device.driver == \"gpu.example.com\""}}]})",
       "is no device profile's selector"},
      {R"({"selectors":[]})", "exactly one CEL selector"},
      {R"({"selectors":[{"cel":{"expression":"device.driver == 'gpu.example.com'"}},)"
       R"({"cel":{"expression":"true"}}]})",
       "exactly one CEL selector"},
      {R"({"selectors":[{"cel":{"expression":"device.driver == 'gpu.example.com'"}}],)"
       R"("config":[{"opaque":{"driver":"gpu.example.com","parameters":{}}}]})",
       "has spec.config"},
      {"not json", "is not JSON"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    kube::GenericObject o{.kind = "DeviceClass", .metadata = {.name = "g"}, .spec_json = c.spec};
    Result<const DeviceProfile*> got = ProfileForClass("g", &o, kDefaults);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find(c.error), std::string::npos) << got.error().message;
  }
  // Two profiles of one driver need the DeviceClass.
  std::vector<DeviceProfile> two = kDefaults;
  two.push_back(kDefaults[2]);
  two.back().name = "gpu-nvidia-mig";
  two.back().selector =
      "device.driver == 'gpu.nvidia.com' && "
      "device.attributes['gpu.nvidia.com'].type == 'mig'";
  p = ProfileForClass("gpu.nvidia.com", nullptr, two);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("its DeviceClass is needed"), std::string::npos);
}

TEST(DraProfilesTest, Tres) {
  EXPECT_EQ(DraTres(kDefaults[0]), "");
  EXPECT_EQ(DraTres(kDefaults[1]), "gres/gpu");
  DeviceProfile typed = kDefaults[2];
  typed.gres_type = "h100";
  EXPECT_EQ(DraTres(typed), "gres/gpu:h100");
}

// ---- ResourceSlices and inventories ----

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

// ---- Agreement with Slurm ----

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

// ---- A pod's requests ----

TEST(DraRequestsTest, ExtendedResourcesAndTemplateClaims) {
  const kube::GenericObject cls = ObjectFile("deviceclass_gpu_example.json");
  const kube::GenericObject tmpl = ObjectFile("resourceclaimtemplate_one_gpu.json");
  const ObjectsByName classes = {{"gpu.example.com", &cls}};

  kube::Pod pod = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "2"},
                             {"deviceclass.resource.kubernetes.io/dra.cpu", "4"},
                             {"memory", "1Gi"}});
  Result<std::vector<DraRequest>> got = PodDraRequests(pod, kDefaults, classes);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->size(), 2U);
  EXPECT_EQ((*got)[0], (DraRequest{.device_class = "dra.cpu",
                                   .profile = "cpu",
                                   .count = 4,
                                   .resource_name = "deviceclass.resource.kubernetes.io/dra.cpu",
                                   .container = "main"}));
  EXPECT_EQ((*got)[1].profile, "gpu-example");
  EXPECT_EQ((*got)[1].count, 2);

  // The class's extendedResourceName stands for it too.
  pod = PodAsking({{"example.com/gpu", "1"}});
  got = PodDraRequests(pod, kDefaults, classes);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->size(), 1U);
  EXPECT_EQ((*got)[0].device_class, "gpu.example.com");
  EXPECT_EQ((*got)[0].resource_name, "example.com/gpu");

  // A template claim, read from the pod's own JSON.
  const std::string pod_json = sb::testing::ReadTestData("kube/pod_dra_claims.json");
  Result<kube::Pod> decoded = kube::Decode<kube::Pod>(pod_json);
  ASSERT_TRUE(decoded) << decoded.error().message;
  Result<std::vector<PodResourceClaim>> claims = PodResourceClaimsOf(pod_json);
  ASSERT_TRUE(claims) << claims.error().message;
  ASSERT_EQ(claims->size(), 1U);
  EXPECT_EQ((*claims)[0], (PodResourceClaim{.name = "gpu",
                                            .resource_claim_template_name = "one-gpu",
                                            .generated_claim_name = "train-0-gpu-8hx2m"}));
  got = PodDraRequests(*decoded, kDefaults, classes, *claims, {{"one-gpu", &tmpl}});
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->size(), 2U);
  EXPECT_EQ((*got)[0].profile, "cpu");  // extended resources first
  EXPECT_EQ((*got)[1], (DraRequest{.device_class = "gpu.example.com",
                                   .profile = "gpu-example",
                                   .count = 1,
                                   .pod_claim = "gpu",
                                   .claim_request = "gpu"}));
}

TEST(DraRequestsTest, WhatSlurmCannotChooseIsAnError) {
  const kube::GenericObject tmpl = ObjectFile("resourceclaimtemplate_one_gpu.json");
  kube::Pod two = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"}});
  two.spec.containers.push_back(two.spec.containers[0]);
  two.spec.containers[1].name = "side";
  auto template_with = [](std::string request) {
    return kube::GenericObject{
        .kind = "ResourceClaimTemplate",
        .metadata = {.name = "t", .namespace_ = "team-a"},
        .spec_json = R"({"spec":{"devices":{"requests":[)" + request + "]}}}"};
  };
  struct Case {
    std::string name;
    kube::Pod pod;
    std::vector<PodResourceClaim> claims;
    kube::GenericObject tmpl;
    std::string error;
  };
  const kube::Pod plain = PodAsking({});
  const std::vector<Case> cases = {
      {"uncovered class",
       PodAsking({{"deviceclass.resource.kubernetes.io/fpga.io", "1"}}),
       {},
       {},
       "resource \"deviceclass.resource.kubernetes.io/fpga.io\": device class \"fpga.io\" is "
       "covered by no device profile"},
      {"two containers", two, {}, {}, "requested by containers \"main\" and \"side\""},
      {"bad quantity",
       PodAsking({{"deviceclass.resource.kubernetes.io/dra.cpu", "lots"}}),
       {},
       {},
       "\"lots\" is not a quantity"},
      {"shared claim",
       plain,
       {{.name = "gpu", .resource_claim_name = "shared"}},
       {},
       "names ResourceClaim \"shared\": a claim shared by pods"},
      {"unread template",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "gone"}},
       {},
       "ResourceClaimTemplate \"gone\" could not be read"},
      {"selectors",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"gpu.example.com",)"
                     R"("selectors":[{"cel":{"expression":"true"}}]}})"),
       "ResourceClaimTemplate \"team-a/t\" request \"g\": selectors are not supported"},
      {"all",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"gpu.example.com",)"
                     R"("allocationMode":"All"}})"),
       "allocationMode All is not supported"},
      {"first available",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","firstAvailable":[{"name":"a","deviceClassName":"x"}]})"),
       "firstAvailable is not supported"},
      {"capacity",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"dra.cpu",)"
                     R"("capacity":{"requests":{"dra.cpu/cpu":"8"}}}})"),
       "capacity requests are not supported"},
      {"uncovered template class",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"fpga.io"}})"),
       "request \"g\": device class \"fpga.io\" is covered by no device profile"},
      {"zero count",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"dra.cpu","count":0}})"),
       "count must be a positive integer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ObjectsByName templates;
    if (!c.tmpl.metadata.name.empty()) templates[c.tmpl.metadata.name] = &c.tmpl;
    Result<std::vector<DraRequest>> got = PodDraRequests(c.pod, kDefaults, {}, c.claims, templates);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find(c.error), std::string::npos) << got.error().message;
    EXPECT_TRUE(got.error().message.starts_with("pod team-a/train-0: ")) << got.error().message;
  }
  // Constraints make the whole claim unsupported.
  kube::GenericObject constrained{
      .kind = "ResourceClaim",
      .metadata = {.name = "c"},
      .spec_json = R"({"devices":{"requests":[],"constraints":[{"matchAttribute":"x.io/numa"}]}})"};
  Result<std::vector<DraRequest>> got = ClaimRequests(constrained, kDefaults, {});
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("constraints are not supported"), std::string::npos);
  EXPECT_TRUE(ClaimRequests(tmpl, kDefaults, {}));
}

// ---- From Slurm's layout to devices, and the claim ----

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

TEST_F(DraAssignTest, TheClaimNamesExactlySlurmsDevices) {
  // The pod asks for 2 CPUs and 1 GPU; Slurm gave cores 1-2 and GPUs 2-3 on n1.
  const kube::Pod pod = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"},
                                   {"deviceclass.resource.kubernetes.io/dra.cpu", "2"}});
  Result<std::vector<DraRequest>> requests = PodDraRequests(pod, kDefaults, {});
  ASSERT_TRUE(requests) << requests.error().message;
  Result<std::vector<DeviceAssignment>> assigned =
      AssignDevices(*requests, inventory_, Layout("2-3", "0x06"), kDefaults);
  ASSERT_TRUE(assigned) << assigned.error().message;
  std::optional<PlannedClaim> claim = PlanExtendedResourceClaim(pod, "n1", *assigned);
  ASSERT_TRUE(claim);
  EXPECT_EQ(json::parse(claim->object_json),
            json::parse(sb::testing::ReadTestData("kube/resourceclaim_extended_n1.json")))
      << claim->object_json;
  // The status alone, for the status subresource.
  const json::value expected =
      json::parse(sb::testing::ReadTestData("kube/resourceclaim_extended_n1.json"));
  EXPECT_EQ(json::parse(claim->status_json),
            json::value(json::object{{"status", expected.at("status")}}));
  EXPECT_EQ(claim->mappings,
            (std::vector<RequestMapping>{
                {"main", "deviceclass.resource.kubernetes.io/dra.cpu", "cpu"},
                {"main", "deviceclass.resource.kubernetes.io/gpu.example.com", "gpu"}}));
  EXPECT_EQ(json::parse(ExtendedResourceClaimStatusPatch("train-0-extended-resources-k8x2q",
                                                         claim->mappings)),
            json::parse(R"({"status":{"extendedResourceClaimStatus":{
              "resourceClaimName":"train-0-extended-resources-k8x2q",
              "requestMappings":[
                {"containerName":"main","resourceName":"deviceclass.resource.kubernetes.io/dra.cpu","requestName":"cpu"},
                {"containerName":"main","resourceName":"deviceclass.resource.kubernetes.io/gpu.example.com","requestName":"gpu"}]}}})"));
}

TEST_F(DraAssignTest, TemplateClaimsGetTheirOwnStatus) {
  DraRequest r = Gpu(1);
  r.resource_name.clear();
  r.container.clear();
  r.pod_claim = "gpu";
  r.claim_request = "gpu";
  const kube::Pod pod = PodAsking({});
  Result<std::vector<DeviceAssignment>> assigned =
      AssignDevices({r}, inventory_, Layout("1"), kDefaults);
  ASSERT_TRUE(assigned) << assigned.error().message;
  EXPECT_FALSE(PlanExtendedResourceClaim(pod, "n1", *assigned));  // no claim of its own
  EXPECT_EQ(json::parse(AllocationStatusJson(*assigned, pod, "n1")), json::parse(R"({"status":{
      "allocation":{"devices":{"results":[
        {"request":"gpu","driver":"gpu.example.com","pool":"n1","device":"gpu-1"}]},
        "nodeSelector":{"nodeSelectorTerms":[{"matchFields":[
          {"key":"metadata.name","operator":"In","values":["n1"]}]}]}},
      "reservedFor":[{"resource":"pods","name":"train-0",
                      "uid":"0b7a1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"}]}})"));
}

TEST(DraAssignNvidiaTest, NoSelectorWhereTheIndexIsTheName) {
  Result<NodeInventory> inv =
      BuildNodeInventory("n2", {SliceFile("resourceslice_gpu_nvidia_n2.json")}, kDefaults);
  ASSERT_TRUE(inv) << inv.error().message;
  const kube::Pod pod = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.nvidia.com", "1"}});
  Result<std::vector<DraRequest>> requests = PodDraRequests(pod, kDefaults, {});
  ASSERT_TRUE(requests);
  Result<std::vector<DeviceAssignment>> assigned = AssignDevices(
      *requests, *inv,
      {.node = "n2", .gres = {{.name = "gpu", .type = "h100", .count = 1, .index = "1"}}},
      kDefaults);
  ASSERT_TRUE(assigned) << assigned.error().message;
  std::optional<PlannedClaim> claim = PlanExtendedResourceClaim(pod, "k8s-n2", *assigned);
  ASSERT_TRUE(claim);
  const json::value v = json::parse(claim->object_json);
  const json::object& exactly =
      v.at("spec").at("devices").at("requests").at(0).at("exactly").as_object();
  EXPECT_FALSE(exactly.contains("selectors"));
  EXPECT_EQ(v.at("status").at("allocation").at("devices").at("results").at(0).at("device"),
            "gpu-1");
  EXPECT_EQ(v.at("status")
                .at("allocation")
                .at("nodeSelector")
                .at("nodeSelectorTerms")
                .at(0)
                .at("matchFields")
                .at(0)
                .at("values")
                .at(0),
            "k8s-n2");
}

// ---- Helpers ----

TEST(DraHelpersTest, IndexListsAndBitmaps) {
  struct Case {
    std::string text;
    std::vector<std::int64_t> want;  // empty: an error
  };
  const std::vector<Case> lists = {{"0", {0}}, {"0-1,3", {0, 1, 3}}, {"5-5", {5}},
                                   {"", {}},   {"1-0", {}},          {"a", {}},
                                   {"0,", {}}, {"-1", {}},           {"0-99999", {}}};
  for (const Case& c : lists) {
    SCOPED_TRACE(c.text);
    Result<std::vector<std::int64_t>> got = ExpandIndexList(c.text);
    EXPECT_EQ(bool(got), !c.want.empty());
    if (got) {
      EXPECT_EQ(*got, c.want);
    }
  }
  const std::vector<Case> bitmaps = {{"0x03", {0, 1}},
                                     {"0x0F", {0, 1, 2, 3}},
                                     {"0xA0", {5, 7}},
                                     {"0x100", {8}},
                                     {"0-2,8", {0, 1, 2, 8}},
                                     {"0x", {}},
                                     {"0xG1", {}},
                                     {"x", {}}};
  for (const Case& c : bitmaps) {
    SCOPED_TRACE(c.text);
    Result<std::vector<std::int64_t>> got = BitmapBits(c.text);
    EXPECT_EQ(bool(got), !c.want.empty());
    if (got) {
      EXPECT_EQ(*got, c.want);
    }
  }
  EXPECT_EQ(BitmapBits("0x00")->size(), 0U);
}

// ---- Admission ----

TEST(DraAdmissionTest, AcceptsWhatTheProfilesCoverAndSaysWhyNot) {
  const kube::GenericObject tmpl = ObjectFile("resourceclaimtemplate_one_gpu.json");
  kube::Pod with_cpu =
      PodAsking({{"deviceclass.resource.kubernetes.io/dra.cpu", "2"}, {"cpu", "1"}});
  kube::Pod cpu_per_task = PodAsking({{"deviceclass.resource.kubernetes.io/dra.cpu", "2"}});
  cpu_per_task.metadata.annotations["slurmjob.slinky.slurm.net/cpu-per-task"] = "2";
  kube::Pod gres = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.nvidia.com", "1"}});
  gres.metadata.annotations["slinky.slurm.net/gres"] = "gpu:1";
  kube::Pod pod_level_cpu = PodAsking({{"deviceclass.resource.kubernetes.io/dra.cpu", "2"}});
  pod_level_cpu.spec.resources.requests["cpu"] = "2";
  struct Case {
    std::string name;
    kube::Pod pod;
    std::vector<DeviceProfile> profiles;
    std::vector<PodResourceClaim> claims;
    std::vector<std::string> want;  // parts of the messages, one per problem
  };
  const std::vector<Case> cases = {
      {"no DRA", PodAsking({{"cpu", "1"}, {"nvidia.com/gpu", "1"}}), kDefaults, {}, {}},
      {"covered classes",
       PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"},
                  {"deviceclass.resource.kubernetes.io/dra.cpu", "2"}}),
       kDefaults,
       {},
       {}},
      {"a covered template claim",
       PodAsking({}),
       kDefaults,
       {{.name = "gpu", .resource_claim_template_name = "one-gpu"}},
       {}},
      {"an uncovered class",
       PodAsking({{"deviceclass.resource.kubernetes.io/fpga.io", "1"}}),
       kDefaults,
       {},
       {"device class \"fpga.io\" is covered by no device profile (covered: dra.cpu, "
        "gpu.example.com, gpu.nvidia.com): Slurm could not choose its devices"}},
      {"DRA off",
       PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"}}),
       {},
       {},
       {"DRA is off: config deviceProfiles is empty"}},
      {"dra.cpu and cpu",
       with_cpu,
       kDefaults,
       {},
       {"resource \"cpu\" and \"deviceclass.resource.kubernetes.io/dra.cpu\" cannot both be "
        "requested"}},
      {"dra.cpu and pod-level cpu", pod_level_cpu, kDefaults, {}, {"cannot both be requested"}},
      {"cpu-per-task",
       cpu_per_task,
       kDefaults,
       {},
       {"annotation slurmjob.slinky.slurm.net/cpu-per-task cannot be used with"}},
      {"gres", gres, kDefaults, {}, {"annotation slurmjob.slinky.slurm.net/gres cannot be used"}},
      {"a shared claim",
       PodAsking({}),
       kDefaults,
       {{.name = "gpu", .resource_claim_name = "c"}},
       {"a claim shared by pods"}},
      {"two problems",
       PodAsking({{"deviceclass.resource.kubernetes.io/fpga.io", "1"}}),
       kDefaults,
       {{.name = "gpu", .resource_claim_template_name = "unknown"}},
       {"covered by no device profile", "ResourceClaimTemplate \"unknown\" could not be read"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> got =
        DraAdmissionProblems(c.pod, c.profiles, {}, c.claims, {{"one-gpu", &tmpl}});
    std::string all;
    for (const std::string& g : got) all += g + " | ";
    ASSERT_EQ(got.size(), c.want.size()) << all;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NE(got[i].find(c.want[i]), std::string::npos) << got[i];
    }
  }
}

}  // namespace
}  // namespace sb::bridge
