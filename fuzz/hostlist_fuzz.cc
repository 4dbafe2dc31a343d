// SPDX-License-Identifier: Apache-2.0
//
// fuzz/hostlist_fuzz.cc
//
// The Slurm strings the bridge parses out of job and node replies: hostlist expressions
// (bridge/hostlist.h) and gres_detail entries (bridge/gres.h). Seeds: fuzz/seeds/hostlist/.
#include <cstddef>
#include <cstdint>

#include "bridge/gres.h"
#include "bridge/hostlist.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = sb::fuzz::AsText(data, size);
  // The limit keeps "n[0-99999999]" (valid, and refused above the limit) from timing out.
  auto names = sb::bridge::ExpandHostlist(text, 4096);
  (void)sb::bridge::GpuIndices(text);
  if (names && !names->empty()) {
    (void)sb::bridge::GpuIndicesOn({std::string(text)}, *names, names->back());
  }
  return 0;
}
