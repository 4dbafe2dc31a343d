// SPDX-License-Identifier: Apache-2.0
// The config file read, and the Slurm client settings the config names.
#include "wiring/clients.h"

#include <chrono>

#include <gtest/gtest.h>

namespace sb::wiring {
namespace {

using bridge::Config;
using bridge::ParseConfig;

// The Slurm client's request timeout (retries included): ours; job lists keep their 5 minutes.
TEST(ConfigTest, SlurmRequestTimeout) {
  Result<Config> c = ParseConfig("partition: batch\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(SlurmClientConfig(*c).http.timeout, std::chrono::seconds(30));
  EXPECT_EQ(SlurmClientConfig(*c).jobs_timeout, std::chrono::minutes(5));
  c = ParseConfig("slurmRequestTimeout: 10m\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(SlurmClientConfig(*c).http.timeout, std::chrono::minutes(10));
  EXPECT_EQ(SlurmClientConfig(*c).jobs_timeout, std::chrono::minutes(10));
  for (const char* bad : {"slurmRequestTimeout: 10\n", "slurmRequestTimeout: soon\n"}) {
    Result<Config> b = ParseConfig(bad);
    ASSERT_FALSE(b) << bad;
    EXPECT_NE(b.error().message.find("slurmRequestTimeout"), std::string::npos);
  }
}

TEST(ConfigTest, LoadNamesTheFile) {
  Result<Config> r = LoadConfig("/nonexistent/slurm-bridge/config.yaml");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/slurm-bridge/config.yaml"), std::string::npos);
}

}  // namespace
}  // namespace sb::wiring
