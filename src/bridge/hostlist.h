// SPDX-License-Identifier: Apache-2.0
//
// bridge/hostlist.h
//
// Slurm hostlist expressions, as in `scontrol show hostnames`: "n[1-3,7],gpu-[01-02]x" ->
// n1 n2 n3 n7 gpu-01x gpu-02x. Zero padding is kept ("[01-10]"), several bracket groups in one
// name multiply ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). Commas inside brackets do not split.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace sb::bridge {

// kInvalidArgument on unbalanced brackets, a bad range or more than `limit` names.
[[nodiscard]] Result<std::vector<std::string>> ExpandHostlist(std::string_view expr,
                                                              std::size_t limit = 1 << 20);

}  // namespace sb::bridge
