// SPDX-License-Identifier: Apache-2.0
//
// fuzz/kubeconfig_fuzz.cc
//
// kubeconfig files (kube/config.h: LoadKubeconfig, through yaml-cpp and the base64 of the
// embedded certificates), read from a scratch file the input is written to; and Base64Decode on
// the raw input. Seeds: fuzz/seeds/kubeconfig/.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_input.h"
#include "kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static sb::fuzz::ScratchFile file("kubeconfig");
  const std::string_view text = sb::fuzz::AsText(data, size);
  (void)sb::kube::Base64Decode(text);
  sb::Result<sb::kube::Config> config = sb::kube::LoadKubeconfig(file.Write(text));
  if (config && config->token) {
    (void)config->token->Token();
  }
  (void)sb::kube::LoadKubeconfig(file.path(), "other");
  return 0;
}
