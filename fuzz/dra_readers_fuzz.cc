// SPDX-License-Identifier: Apache-2.0
//
// fuzz/dra_readers_fuzz.cc
//
// The DRA readers of objects others write (test audit T-8): ResourceSlices (a driver's),
// a pod's resource claims (a tenant's) and a Slurm node's GRES string, whose results
// BuildNodeInventory takes. None may throw or crash on any input. Seeds: the recorded
// ResourceSlices and pods of testing/testdata/kube/, and GRES strings in fuzz/seeds/dra_readers/.
#include <cstddef>
#include <cstdint>

#include "bridge/dra/gres_agreement.h"
#include "bridge/dra/inventory.h"
#include "bridge/dra/requests.h"
#include "bridge/dra/slices.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = sb::fuzz::AsText(data, size);
  (void)sb::bridge::ParseResourceSliceJson(text);
  (void)sb::bridge::PodResourceClaimsOf(text);
  (void)sb::bridge::ParseNodeGres(text);
  return 0;
}
