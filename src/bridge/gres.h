// SPDX-License-Identifier: Apache-2.0
//
// bridge/gres.h
//
// Slurm's view of the GPUs a job holds, as the pods of the job are told it. Pure code.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "slurm/types.h"

namespace sb::bridge {

// Splits a GRES list ("gpu:a:2(IDX:0-1),gpu:b:1(S:0)") at the commas outside parentheses.
[[nodiscard]] std::vector<std::string_view> SplitTopLevel(std::string_view s);

// The GPU indices of one entry of a job's `gres_detail` (one entry per node of the job, in the
// job's node order): "gpu:fake:2(IDX:0-1)" -> "0,1", "gpu:a100:1(IDX:3),shard:1(0/2,0,0)" -> "3",
// "gpu:2(IDX:0,2-3)" -> "0,2,3"; "" when the entry names no GPU or is malformed. The same text as
// Slurm's SLURM_JOB_GPUS for the job's processes on that node.
[[nodiscard]] std::string GpuIndices(std::string_view gres_detail);

// The GPU indices of the job's node `slurm_node`: the entry of `gres_detail` at that node's
// position in `job_nodes` (the job's expanded node list); "" when there is none.
[[nodiscard]] std::string GpuIndicesOn(const std::vector<std::string>& gres_detail,
                                       const std::vector<std::string>& job_nodes,
                                       std::string_view slurm_node);

// One node's allocated GRES as /resources/{job_id} lists them, written as the job's
// `gres_detail` entry for that node: {gpu, fake, 2, "0-1"} -> "gpu:fake:2(IDX:0-1)"; entries
// without an index (count-only GRES) are written without "(IDX:...)".
[[nodiscard]] std::string GresDetail(const std::vector<slurm::GresAllocation>& gres);

}  // namespace sb::bridge
