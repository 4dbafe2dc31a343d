// SPDX-License-Identifier: Apache-2.0
//
// fuzz/job_tag_fuzz.cc
//
// ParseJobTag (bridge/tag.h): it reads the admin_comment of every Slurm job of the cluster, which
// other Slurm users write (test audit N9). A tag it accepts must encode and parse again.
// Seeds: fuzz/seeds/job_tag/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "bridge/tag.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = sb::fuzz::AsText(data, size);
  std::optional<sb::bridge::JobTag> tag = sb::bridge::ParseJobTag(text);
  if (tag && tag->ours) {
    if (!sb::bridge::ParseJobTag(sb::bridge::EncodeJobTag(*tag))) std::abort();
  }
  return 0;
}
