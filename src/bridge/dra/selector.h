// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/selector.h
//
// The CEL selector of a device profile, read without a CEL interpreter: a selector is a
// conjunction (&&) of comparisons (== or !=) of device.driver or
// device.attributes['<domain>'].<name> with a string, integer or boolean literal, which covers
// upstream's defaults; any other selector is refused (at config load, by ValidateDeviceProfiles).
// A comparison with an attribute the device lacks, or of another type, is false (CEL would stop
// with an error).
//
// Thread model: pure functions over plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/dra/profile.h"
#include "bridge/dra/slices.h"
#include "common/error.h"

namespace sb::bridge {

// One comparison of a selector: device.driver, or device.attributes['<domain>'].<name>, == or !=
// a literal.
struct SelectorTerm {
  enum class Kind { kDriver, kAttribute };
  enum class Type { kString, kInt, kBool };
  Kind kind = Kind::kDriver;
  std::string attribute;  // kAttribute: "<domain>/<name>" ("gpu.nvidia.com/type")
  bool negated = false;   // !=
  Type type = Type::kString;
  std::string string_value;
  std::int64_t int_value = 0;
  bool bool_value = false;
  bool operator==(const SelectorTerm&) const = default;
};

// The selector as the conjunction of its terms. kInvalidArgument, saying what is not understood,
// for anything outside the subset above.
[[nodiscard]] Result<std::vector<SelectorTerm>> ParseDeviceSelector(std::string_view cel);

// Whether `device` (of `driver`) matches the profile's selector.
[[nodiscard]] bool ProfileMatches(const DeviceProfile& profile, std::string_view driver,
                                  const SliceDevice& device);

}  // namespace sb::bridge
