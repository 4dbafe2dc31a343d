// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/time_format.h"

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sb::kube {
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

}  // namespace
}  // namespace sb::kube
