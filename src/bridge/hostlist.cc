// SPDX-License-Identifier: Apache-2.0
#include "bridge/hostlist.h"

#include <charconv>
#include <cstdint>

#include <fmt/format.h>

namespace sb::bridge {
namespace {

Result<std::vector<std::string>> ExpandBracket(std::string_view inner, std::string_view expr) {
  std::vector<std::string> out;
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("bad hostlist \"{}\": range \"[{}]\"", expr, inner));
  };
  std::size_t start = 0;
  while (start <= inner.size()) {
    std::size_t comma = inner.find(',', start);
    std::string_view part = inner.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (part.empty()) return bad();
    std::size_t dash = part.find('-');
    std::string_view lo = part.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : part.substr(dash + 1);
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    auto r1 = std::from_chars(lo.data(), lo.data() + lo.size(), a);
    auto r2 = std::from_chars(hi.data(), hi.data() + hi.size(), b);
    if (lo.empty() || hi.empty() || r1.ec != std::errc() || r1.ptr != lo.data() + lo.size() ||
        r2.ec != std::errc() || r2.ptr != hi.data() + hi.size() || b < a || b - a > (1 << 20)) {
      return bad();
    }
    const std::size_t width = lo.size();
    // Not `i <= b`: with b the largest uint64 that never fails, and ++i wraps.
    for (std::uint64_t i = a;; ++i) {
      std::string n = std::to_string(i);
      if (n.size() < width) n.insert(0, width - n.size(), '0');
      out.push_back(std::move(n));
      if (i == b) break;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// One name with zero or more bracket groups.
Result<void> ExpandOne(std::string_view name, std::string_view expr, std::size_t limit,
                       std::vector<std::string>& out) {
  std::vector<std::string> acc{""};
  std::size_t i = 0;
  while (i < name.size()) {
    std::size_t open = name.find('[', i);
    std::string_view literal = name.substr(i, open == std::string_view::npos ? open : open - i);
    if (literal.find(']') != std::string_view::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("bad hostlist \"{}\": unbalanced ']'", expr));
    }
    for (std::string& a : acc) a += literal;
    if (open == std::string_view::npos) break;
    std::size_t close = name.find(']', open);
    if (close == std::string_view::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("bad hostlist \"{}\": unbalanced '['", expr));
    }
    Result<std::vector<std::string>> nums =
        ExpandBracket(name.substr(open + 1, close - open - 1), expr);
    if (!nums) return tl::unexpected(nums.error());
    if (acc.size() * nums->size() > limit) {
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("hostlist \"{}\" names more than {} hosts", expr, limit));
    }
    std::vector<std::string> next;
    next.reserve(acc.size() * nums->size());
    for (const std::string& a : acc) {
      for (const std::string& n : *nums) next.push_back(a + n);
    }
    acc = std::move(next);
    i = close + 1;
  }
  if (out.size() + acc.size() > limit) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("hostlist \"{}\" names more than {} hosts", expr, limit));
  }
  for (std::string& a : acc) out.push_back(std::move(a));
  return {};
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expr, std::size_t limit) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= expr.size(); ++i) {
    const char c = i < expr.size() ? expr[i] : ',';
    if (c == '[') {
      if (++depth > 1) {
        return MakeError(ErrorCode::kInvalidArgument,
                         fmt::format("bad hostlist \"{}\": nested '['", expr));
      }
    } else if (c == ']') {
      --depth;
    } else if ((c == ',' || c == ' ') && depth == 0) {
      std::string_view name = expr.substr(start, i - start);
      if (!name.empty()) {
        Result<void> r = ExpandOne(name, expr, limit, out);
        if (!r) return tl::unexpected(r.error());
      }
      start = i + 1;
    }
  }
  if (depth != 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("bad hostlist \"{}\": unbalanced '['", expr));
  }
  return out;
}

}  // namespace sb::bridge
