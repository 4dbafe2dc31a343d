// SPDX-License-Identifier: Apache-2.0
//
// kube/quantity.h
//
// Parsing of Kubernetes resource quantities ("500m", "2", "1Gi", "1e3", "128974848"), as
// apimachinery's resource.ParseQuantity reads them: an optional sign, a decimal number, and one
// suffix: binary (Ki Mi Gi Ti Pi Ei), decimal SI (n u m "" k M G T P E) or a decimal exponent
// (e3, E-2). Results are integers rounded as apimachinery rounds them: a fraction rounds away
// from zero ("0.5" -> Value 1, "1.0001m" -> MilliValue 2), like Quantity.Value()/MilliValue().
//
// Thread model: pure functions.
//
// Example:
//   ParseQuantityMilli("500m") == 500      // CPU in millicores
//   ParseQuantityValue("1Gi") == 1073741824  // memory in bytes
#pragma once

#include <cstdint>
#include <string_view>

#include "common/error.h"

namespace sb::kube {

// The quantity in whole units (Quantity.Value()). kInvalidArgument on a malformed quantity or one
// outside int64.
[[nodiscard]] Result<std::int64_t> ParseQuantityValue(std::string_view text);

// The quantity in thousandths (Quantity.MilliValue()): "500m" -> 500, "2" -> 2000.
[[nodiscard]] Result<std::int64_t> ParseQuantityMilli(std::string_view text);

// The quantity times 10^scale, rounded away from zero; Value is scale 0, Milli is scale 3.
[[nodiscard]] Result<std::int64_t> ParseQuantityScaled(std::string_view text, int scale);

}  // namespace sb::kube
