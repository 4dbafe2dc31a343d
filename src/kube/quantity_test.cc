// SPDX-License-Identifier: Apache-2.0
#include "kube/quantity.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sb::kube {
namespace {

TEST(Quantity, Table) {
  struct Case {
    std::string in;
    bool ok;
    std::int64_t value;  // Value()
    std::int64_t milli;  // MilliValue()
  };
  // Expected values as apimachinery's Quantity.Value() / MilliValue() give them.
  const std::vector<Case> cases = {
      {"0", true, 0, 0},
      {"2", true, 2, 2000},
      {"500m", true, 1, 500},
      {"100m", true, 1, 100},
      {"1500m", true, 2, 1500},
      {"1.5", true, 2, 1500},
      {"0.1", true, 1, 100},
      {"1Ki", true, 1024, 1024000},
      {"1Gi", true, 1073741824, 1073741824000},
      {"1.5Gi", true, 1610612736, 1610612736000},
      {"128974848", true, 128974848, 128974848000},
      {"129e6", true, 129000000, 129000000000},
      {"1e3", true, 1000, 1000000},
      {"1E3", true, 1000, 1000000},
      {"1e-3", true, 1, 1},
      {"12345e-3", true, 13, 12345},
      {"1k", true, 1000, 1000000},
      {"123M", true, 123000000, 123000000000},
      {"1G", true, 1000000000, 1000000000000},
      {"1u", true, 1, 1},
      {"100n", true, 1, 1},
      {"0.0001m", true, 1, 1},
      {"1.0001m", true, 1, 2},
      {"+3", true, 3, 3000},
      {"-500m", true, -1, -500},
      {"8Ei", true, 0, 0},  // overflows int64: rejected below
      {"1Ti", true, 1099511627776, 1099511627776000},
      {"", false, 0, 0},
      {"abc", false, 0, 0},
      {"1x", false, 0, 0},
      {"1.2.3", false, 0, 0},
      {"1e", false, 0, 0},
      {"m", false, 0, 0},
      {"1 Gi", false, 0, 0},
      {"1Zi", false, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in);
    Result<std::int64_t> v = ParseQuantityValue(c.in);
    Result<std::int64_t> m = ParseQuantityMilli(c.in);
    if (c.in == "8Ei") {
      EXPECT_FALSE(v);
      continue;
    }
    ASSERT_EQ(v.has_value(), c.ok) << (v ? "" : v.error().message);
    ASSERT_EQ(m.has_value(), c.ok);
    if (!c.ok) {
      EXPECT_EQ(v.error().code, ErrorCode::kInvalidArgument);
      continue;
    }
    EXPECT_EQ(*v, c.value);
    EXPECT_EQ(*m, c.milli);
  }
}

// Found by fuzz/quantity_fuzz (UBSan: signed overflow of the 128-bit intermediate): 20
// significant digits, times 2^60 (Ei), then times a power of ten (a 21st digit, an exponent or
// the milli scale).
TEST(Quantity, TwentyDigitsOfExbibytesScaledUpAreOutOfRange) {
  for (const char* q :
       {"99999999999999999999Ei", "999999999999999999999Ei", "12345678901234567890123Ei"}) {
    SCOPED_TRACE(q);
    Result<std::int64_t> m = ParseQuantityMilli(q);
    ASSERT_FALSE(m.has_value());
    EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
    EXPECT_FALSE(ParseQuantityValue(q).has_value());
    EXPECT_FALSE(ParseQuantityScaled(q, 12).has_value());
  }
  // The fuzzer's input: scale 6, "2666" then 94 nines, "6666661Ei".
  std::string found = "2666" + std::string(94, '9') + "6666661Ei";
  EXPECT_FALSE(ParseQuantityScaled(found, 6).has_value());
}

TEST(Quantity, MilliOverflowIsAnError) {
  EXPECT_TRUE(ParseQuantityValue("9E").has_value());
  EXPECT_FALSE(ParseQuantityValue("10E").has_value());
  EXPECT_EQ(ParseQuantityValue("2E").value(), 2000000000000000000);
  EXPECT_FALSE(ParseQuantityMilli("9E").has_value());
}

}  // namespace
}  // namespace sb::kube
