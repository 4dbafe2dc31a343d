// SPDX-License-Identifier: Apache-2.0
#include "kube/rate_limit.h"

#include <gtest/gtest.h>

namespace sb::kube {
namespace {
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(TokenBucketTest, BurstGoesAtOnceThenOnePerInterval) {
  TokenBucket b(10, 3);  // a token every 100 ms, 3 saved up
  const Clock::time_point t0 = Clock::time_point() + 1h;
  EXPECT_EQ(b.Reserve(t0), 0ns);
  EXPECT_EQ(b.Reserve(t0), 0ns);
  EXPECT_EQ(b.Reserve(t0), 0ns);
  EXPECT_EQ(b.Reserve(t0), 100ms) << "the burst is spent";
  EXPECT_EQ(b.Reserve(t0), 200ms) << "each later request waits for the ones before it";
  // 500 ms later: the two owed tokens are paid, three more came, capped at the burst.
  EXPECT_EQ(b.Reserve(t0 + 500ms), 0ns);
  EXPECT_EQ(b.Reserve(t0 + 500ms), 0ns);
  EXPECT_EQ(b.Reserve(t0 + 500ms), 0ns);
  EXPECT_EQ(b.Reserve(t0 + 500ms), 100ms);
  // Idle for a long time: never more than the burst.
  EXPECT_EQ(b.Reserve(t0 + 1h), 0ns);
  EXPECT_EQ(b.Reserve(t0 + 1h), 0ns);
  EXPECT_EQ(b.Reserve(t0 + 1h), 0ns);
  EXPECT_EQ(b.Reserve(t0 + 1h), 100ms);
}

TEST(TokenBucketTest, ZeroQpsIsUnlimitedAndBurstIsAtLeastOne) {
  TokenBucket off(0, 0);
  EXPECT_FALSE(off.limited());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(off.Reserve(Clock::time_point()), 0ns);
  TokenBucket one(2, 0);
  EXPECT_TRUE(one.limited());
  const Clock::time_point t0 = Clock::time_point() + 1h;
  EXPECT_EQ(one.Reserve(t0), 0ns);
  EXPECT_EQ(one.Reserve(t0), 500ms);
}

}  // namespace
}  // namespace sb::kube
