// SPDX-License-Identifier: Apache-2.0
#include "common/time_format.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sb {
namespace {

TEST(TimeFormatTest, WritesKubernetesTimeAndMicroTime) {
  struct Case {
    std::chrono::system_clock::time_point t;
    std::string time;
    std::string micro;
  };
  const auto epoch = std::chrono::system_clock::from_time_t(0);
  const std::vector<Case> cases = {
      {epoch, "1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000000Z"},
      {std::chrono::system_clock::from_time_t(1767225600) + std::chrono::microseconds(123456),
       "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123456Z"},
      {std::chrono::system_clock::from_time_t(951782399) + std::chrono::milliseconds(999),
       "2000-02-28T23:59:59Z", "2000-02-28T23:59:59.999000Z"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.time);
    EXPECT_EQ(FormatTime(c.t), c.time);
    EXPECT_EQ(FormatMicroTime(c.t), c.micro);
  }
}

// What the apiserver writes (metav1.Time, MicroTime) and what else RFC 3339 allows; anything
// else is refused rather than read as a wrong time.
TEST(ParseTimeTest, Rfc3339) {
  struct Case {
    std::string text;
    std::optional<std::int64_t> unix_seconds;  // nullopt: refused
  };
  const std::vector<Case> cases = {
      {"1970-01-01T00:01:00Z", 60},
      {"1970-01-01T01:01:00+01:00", 60},
      {"1969-12-31T23:31:00-00:30", 60},
      {"1970-01-01T00:01:00.123456Z", 60},
      {"1970-01-01T00:01:00.9+00:00", 60},
      {"1970-01-01t00:01:00z", std::nullopt},  // a lower-case T is not read
      {"1970-01-01T00:01:00z", 60},
      {"2026-01-01T00:00:00Z", 1767225600},
      {"2000-02-29T23:59:59Z", 951868799},
      {"2016-12-31T23:59:60Z", 1483228800},  // a leap second: the next minute's first
      {"", std::nullopt},
      {"yesterday", std::nullopt},
      {"1970-01-01 00:01:00Z", std::nullopt},
      {"1970-13-01T00:00:00Z", std::nullopt},
      {"1970-01-32T00:00:00Z", std::nullopt},
      {"1970-01-01T24:00:00Z", std::nullopt},
      {"1970-01-01T00:60:00Z", std::nullopt},
      {"1970-01-01T00:00:61Z", std::nullopt},
      {"1970-01-01T00:00:00", std::nullopt},
      {"1970-01-01T00:00:00Zjunk", std::nullopt},
      {"1970-01-01T00:00:00+0100", std::nullopt},
      {"1970-01-01T00:00Z", std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const auto t = ParseTime(c.text);
    ASSERT_EQ(t.has_value(), c.unix_seconds.has_value());
    if (t) {
      EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count(),
                *c.unix_seconds);
    }
  }
}

}  // namespace
}  // namespace sb
