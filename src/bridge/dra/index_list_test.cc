// SPDX-License-Identifier: Apache-2.0
// Slurm's index lists and core bitmaps (bridge/dra/index_list.h).
#include "bridge/dra/index_list.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

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

}  // namespace
}  // namespace sb::bridge
