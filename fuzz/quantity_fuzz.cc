// SPDX-License-Identifier: Apache-2.0
//
// fuzz/quantity_fuzz.cc
//
// Kubernetes resource quantities (kube/quantity.h), as they come from pod specs and the
// bridge's annotations. The first byte picks the scale of ParseQuantityScaled (-12..12), the rest
// is the quantity. Seeds: fuzz/seeds/quantity/.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_input.h"
#include "kube/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  const int scale = static_cast<int>(data[0] % 25) - 12;
  const std::string_view text = sb::fuzz::AsText(data + 1, size - 1);
  (void)sb::kube::ParseQuantityValue(text);
  (void)sb::kube::ParseQuantityMilli(text);
  (void)sb::kube::ParseQuantityScaled(text, scale);
  return 0;
}
