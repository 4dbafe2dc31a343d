// SPDX-License-Identifier: Apache-2.0
// The selector subset of device profiles (bridge/dra/selector.h): parsed, refused, matched.
#include "bridge/dra/selector.h"

#include <gtest/gtest.h>

#include "bridge/dra/profiles.h"
#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

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

}  // namespace
}  // namespace sb::bridge
