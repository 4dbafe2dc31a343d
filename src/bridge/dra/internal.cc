// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/internal.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

#include <fmt/format.h>
#include <boost/json.hpp>

namespace sb::bridge::dra_internal {
namespace json = boost::json;

Error Invalid(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

std::string Quote(std::string_view s) { return fmt::format("\"{}\"", s); }

Result<json::value> ParseJson(std::string_view text, std::string_view what) {
  if (text.empty()) return json::value(json::object());
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return tl::unexpected(Invalid(fmt::format("{} is not JSON: {}", what, ec.message())));
  return v;
}

bool IsDigits(std::string_view s) {
  return !s.empty() && std::ranges::all_of(s, [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::int64_t> ToInt(std::string_view s) {
  std::int64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

bool IsDnsLabel(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  return std::ranges::all_of(s, ok) && s.front() != '-' && s.back() != '-';
}

bool IsDnsSubdomain(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t dot = s.find('.', start);
    if (dot == std::string_view::npos) dot = s.size();
    if (!IsDnsLabel(s.substr(start, dot - start), 63)) return false;
    start = dot + 1;
  }
  return true;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || s.size() > 32 || std::isalpha(static_cast<unsigned char>(s.front())) == 0) {
    return false;
  }
  return std::ranges::all_of(
      s, [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; });
}

}  // namespace sb::bridge::dra_internal
