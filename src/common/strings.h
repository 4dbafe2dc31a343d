// SPDX-License-Identifier: Apache-2.0
//
// common/strings.h
//
// Small string helpers shared by the libraries.
#pragma once

#include <algorithm>
#include <cctype>
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

// ASCII case-insensitive equality (HTTP header names, tokens).
[[nodiscard]] inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace sb
