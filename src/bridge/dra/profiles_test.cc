// SPDX-License-Identifier: Apache-2.0
// Device profile lists (bridge/dra/profiles.h): validation, DeviceClass resolution, TRES.
#include "bridge/dra/profiles.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

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

}  // namespace
}  // namespace sb::bridge
