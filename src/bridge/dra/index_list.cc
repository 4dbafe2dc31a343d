// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/index_list.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include <fmt/format.h>

#include "bridge/dra/internal.h"

namespace sb::bridge {
namespace {

using dra_internal::Invalid;
using dra_internal::IsDigits;
using dra_internal::Quote;
using dra_internal::ToInt;

}  // namespace

Result<std::vector<std::int64_t>> ExpandIndexList(std::string_view list) {
  std::vector<std::int64_t> out;
  const auto bad = [&] {
    return tl::unexpected(Invalid(fmt::format("{} is not an index list like 0-1,3", Quote(list))));
  };
  if (list.empty()) return bad();
  for (std::size_t start = 0; start <= list.size();) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string_view part = list.substr(start, comma - start);
    const std::size_t dash = part.find('-');
    std::optional<std::int64_t> lo;
    std::optional<std::int64_t> hi;
    if (dash == std::string_view::npos) {
      lo = IsDigits(part) ? ToInt(part) : std::nullopt;
      hi = lo;
    } else if (IsDigits(part.substr(0, dash)) && IsDigits(part.substr(dash + 1))) {
      lo = ToInt(part.substr(0, dash));
      hi = ToInt(part.substr(dash + 1));
    }
    if (!lo || !hi || *hi < *lo || *hi - *lo >= 4096) return bad();
    for (std::int64_t i = *lo; i <= *hi; ++i) {
      if (out.size() >= 4096) return bad();
      out.push_back(i);
    }
    start = comma + 1;
  }
  return out;
}

Result<std::vector<std::int64_t>> BitmapBits(std::string_view bitmap) {
  const auto bad = [&] {
    return tl::unexpected(
        Invalid(fmt::format("core bitmap {} is not hex (0x0F) or a list (0-3)", Quote(bitmap))));
  };
  std::vector<std::int64_t> out;
  if (bitmap.starts_with("0x") || bitmap.starts_with("0X")) {
    const std::string_view hex = bitmap.substr(2);
    if (hex.empty() || hex.size() > 65536 / 4) return bad();
    for (std::size_t i = 0; i < hex.size(); ++i) {
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(hex[i])));
      int v = 0;
      if (c >= '0' && c <= '9') {
        v = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v = c - 'a' + 10;
      } else {
        return bad();
      }
      const auto digit = static_cast<std::int64_t>(hex.size() - 1 - i);  // from the right
      for (int b = 0; b < 4; ++b) {
        if ((v & (1 << b)) != 0) out.push_back(digit * 4 + b);
      }
    }
    std::ranges::sort(out);
    return out;
  }
  Result<std::vector<std::int64_t>> list = ExpandIndexList(bitmap);
  if (!list) return bad();
  std::ranges::sort(*list);
  return list;
}

}  // namespace sb::bridge
