// SPDX-License-Identifier: Apache-2.0
//
// fuzz/token_file_fuzz.cc
//
// Token files: the Slurm JWT file (slurm/token_source.h, SLURM_JWT_FILE) and a Kubernetes
// bearer token file (kube/config.h TokenSource::File), read from a scratch file the input is
// written to. Seeds: fuzz/seeds/token_file/.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_input.h"
#include "kube/config.h"
#include "slurm/token_source.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static sb::fuzz::ScratchFile file("token");
  const std::string& path = file.Write(sb::fuzz::AsText(data, size));
  sb::slurm::TokenSourcePtr slurm_token = sb::slurm::MakeFileTokenSource(path);
  (void)slurm_token->Token();
  sb::kube::TokenSource kube_token = sb::kube::TokenSource::File(path);
  (void)kube_token.Token();
  return 0;
}
