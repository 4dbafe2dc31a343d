// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/index_list.h
//
// Slurm's two ways of listing what it gave a job on a node: an index list ("0-1,3": the GRES
// indices of a node's gres string or of /resources/{job}) and a core bitmap ("0x0F", or a list
// "0-3"). Read by gres_agreement.h and assign.h; exposed for tests.
//
// Thread model: pure functions over plain values.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace sb::bridge {

// Slurm's index list "0-1,3" -> {0, 1, 3}. kInvalidArgument when malformed, empty, or longer than
// 4096 indices.
[[nodiscard]] Result<std::vector<std::int64_t>> ExpandIndexList(std::string_view list);
// The bits set in a Slurm bitmap: hex "0x0F" (bit 0 the lowest of the last digit) or a list
// "0-3,8". kInvalidArgument when malformed or wider than 65536 bits.
[[nodiscard]] Result<std::vector<std::int64_t>> BitmapBits(std::string_view bitmap);

}  // namespace sb::bridge
