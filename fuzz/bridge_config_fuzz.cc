// SPDX-License-Identifier: Apache-2.0
//
// fuzz/bridge_config_fuzz.cc
//
// The bridge's config file (bridge/config.h: YAML through yaml-cpp) and its durations, then the
// webhook policy made from it. Seeds: fuzz/seeds/bridge_config/.
#include <cstddef>
#include <cstdint>

#include "admission/review.h"
#include "bridge/config.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = sb::fuzz::AsText(data, size);
  (void)sb::bridge::ParseDuration(text);
  sb::Result<sb::bridge::Config> config = sb::bridge::ParseConfig(text);
  if (config) {
    sb::admission::Policy policy = sb::admission::PolicyFromConfig(*config, {});
    if (config->has_managed_namespace_selector) {
      (void)config->managed_namespace_selector.Matches({{"a", "b"}});
    }
    (void)sb::admission::SlurmEnv(policy);
  }
  return 0;
}
