// SPDX-License-Identifier: Apache-2.0
#include "bridge/gres.h"

#include <gtest/gtest.h>

namespace sb::bridge {
namespace {

TEST(GpuIndices, FromGresDetail) {
  // As slurmrestd 26.05 answers (recorded in the test environment).
  EXPECT_EQ(GpuIndices("gpu:fake:1(IDX:0)"), "0");
  EXPECT_EQ(GpuIndices("gpu:fake:2(IDX:2-3)"), "2,3");
  EXPECT_EQ(GpuIndices("gpu:2(IDX:0,2-3)"), "0,2,3");
  EXPECT_EQ(GpuIndices("gpu:a100:1(IDX:3),shard:1(0/2,0,0)"), "3");
  EXPECT_EQ(GpuIndices("shard:1(0/2,0,0)"), "");
  EXPECT_EQ(GpuIndices(""), "");
  // Malformed: nothing rather than a wrong index.
  EXPECT_EQ(GpuIndices("gpu:fake:2(IDX:3-1)"), "");
  EXPECT_EQ(GpuIndices("gpu:fake:2(IDX:a)"), "");
  EXPECT_EQ(GpuIndices("gpu:fake:2(IDX:0-99999)"), "");
  EXPECT_EQ(GpuIndices("gpu:fake:2(IDX:"), "");
}

TEST(GpuIndices, OfOneNodeOfTheJob) {
  const std::vector<std::string> detail = {"gpu:fake:1(IDX:0)", "gpu:fake:1(IDX:3)"};
  const std::vector<std::string> nodes = {"n1", "n2"};
  EXPECT_EQ(GpuIndicesOn(detail, nodes, "n2"), "3");
  EXPECT_EQ(GpuIndicesOn(detail, nodes, "n1"), "0");
  EXPECT_EQ(GpuIndicesOn(detail, nodes, "n3"), "");
  EXPECT_EQ(GpuIndicesOn({}, nodes, "n1"), "");  // a job without GPUs
}

// /resources/{job_id}'s GRES of a node, as recorded from slurmrestd 26.05 (two of four fake GPUs
// on n1): the same indices as the job's gres_detail gives.
TEST(GresDetail, FromTheResourceLayout) {
  const std::vector<slurm::GresAllocation> layout = {
      {.name = "gpu", .type = "fake", .count = 2, .index = "0-1"}};
  EXPECT_EQ(GresDetail(layout), "gpu:fake:2(IDX:0-1)");
  EXPECT_EQ(GpuIndices(GresDetail(layout)), GpuIndices("gpu:fake:2(IDX:0-1)"));
  EXPECT_EQ(GpuIndices(GresDetail(
                {{.name = "gpu", .count = 3, .index = "0,2-3"}, {.name = "shard", .count = 1}})),
            "0,2,3");
  EXPECT_EQ(GresDetail({}), "");
}

}  // namespace
}  // namespace sb::bridge
