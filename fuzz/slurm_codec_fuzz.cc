// SPDX-License-Identifier: Apache-2.0
//
// fuzz/slurm_codec_fuzz.cc
//
// Every decoder of slurmrestd replies (slurm/codec.h), one per operation, on each input; and the
// Slurm strings the bridge reads out of a decoded job (its hostlist, its gres_detail). Seeds:
// the recorded replies in testing/testdata/slurm/.
#include <cstddef>
#include <cstdint>

#include "bridge/gres.h"
#include "bridge/hostlist.h"
#include "fuzz/fuzz_input.h"
#include "slurm/codec.h"

namespace {

// Decoders must never throw: any exception escapes here and libFuzzer reports it.
void FuzzOne(std::string_view json) {
  using namespace sb::slurm;
  (void)DecodeStatusOnly(json);
  (void)DecodeSubmit(json);
  (void)DecodeJobList(json);
  (void)DecodeJobStates(json);
  (void)DecodeResources(json);
  (void)DecodeNodes(json);
  (void)DecodePartitions(json);
  (void)DecodeReservations(json);
  (void)DecodePings(json);
  (void)DecodeCancel(json);
  (void)DecodeOpenApiVersions(json);
  (void)DecodeShares(json);
  auto jobs = DecodeJobs(json);
  if (!jobs) {
    return;
  }
  for (const JobInfo& job : jobs->value) {
    // A small limit: "n[0-99999999]" is a valid hostlist, its expansion is not the point here.
    auto nodes = sb::bridge::ExpandHostlist(job.nodes, 4096);
    for (const std::string& detail : job.gres_detail) {
      (void)sb::bridge::GpuIndices(detail);
    }
    if (nodes && !nodes->empty()) {
      (void)sb::bridge::GpuIndicesOn(job.gres_detail, *nodes, nodes->front());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzOne(sb::fuzz::AsText(data, size));
  return 0;
}
