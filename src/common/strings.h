// SPDX-License-Identifier: Apache-2.0
//
// common/strings.h
//
// Small string helpers shared by the libraries.
#pragma once

#include <string>
#include <string_view>

namespace sb {

// `s` without leading and trailing ASCII whitespace (space, \t, \r, \n, \v, \f).
[[nodiscard]] inline std::string TrimWhitespace(std::string_view s) {
  constexpr std::string_view kWs = " \t\r\n\v\f";
  std::size_t first = s.find_first_not_of(kWs);
  if (first == std::string_view::npos) {
    return {};
  }
  return std::string(s.substr(first, s.find_last_not_of(kWs) - first + 1));
}

}  // namespace sb
