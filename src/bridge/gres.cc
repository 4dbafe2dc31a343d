// SPDX-License-Identifier: Apache-2.0
#include "bridge/gres.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace sb::bridge {
namespace {

bool Number(std::string_view s, std::int64_t* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= 0;
}

// "0-1,3" -> "0,1,3"; "" when malformed. At most 1024 indices (no node has more GPUs).
std::string ExpandIndices(std::string_view idx) {
  std::string out;
  int count = 0;
  std::size_t start = 0;
  while (start <= idx.size()) {
    std::size_t comma = idx.find(',', start);
    if (comma == std::string_view::npos) comma = idx.size();
    std::string_view part = idx.substr(start, comma - start);
    std::size_t dash = part.find('-');
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    if (dash == std::string_view::npos) {
      if (!Number(part, &lo)) return "";
      hi = lo;
    } else if (!Number(part.substr(0, dash), &lo) || !Number(part.substr(dash + 1), &hi) ||
               hi < lo) {
      return "";
    }
    for (std::int64_t i = lo; i <= hi; ++i) {
      if (++count > 1024) return "";
      if (!out.empty()) out += ',';
      out += std::to_string(i);
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace

// Splits at commas outside parentheses.
std::vector<std::string_view> SplitTopLevel(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    } else if (s[i] == '(') {
      ++depth;
    } else if (s[i] == ')') {
      --depth;
    }
  }
  return out;
}

std::string GpuIndices(std::string_view gres_detail) {
  std::string out;
  for (std::string_view g : SplitTopLevel(gres_detail)) {
    if (!g.starts_with("gpu")) continue;
    const std::size_t at = g.find("(IDX:");
    if (at == std::string_view::npos || !g.ends_with(')')) continue;
    const std::string_view idx = g.substr(at + 5, g.size() - at - 6);
    std::string one = ExpandIndices(idx);
    if (one.empty()) return "";
    if (!out.empty()) out += ',';
    out += one;
  }
  return out;
}

std::string GpuIndicesOn(const std::vector<std::string>& gres_detail,
                         const std::vector<std::string>& job_nodes, std::string_view slurm_node) {
  auto it = std::ranges::find(job_nodes, slurm_node);
  if (it == job_nodes.end()) return "";
  const auto i = static_cast<std::size_t>(it - job_nodes.begin());
  return i < gres_detail.size() ? GpuIndices(gres_detail[i]) : "";
}

std::string GresDetail(const std::vector<slurm::GresAllocation>& gres) {
  std::string out;
  for (const slurm::GresAllocation& g : gres) {
    if (!out.empty()) out += ',';
    out += g.name;
    if (!g.type.empty()) out += ':' + g.type;
    out += ':' + std::to_string(g.count);
    if (!g.index.empty()) out += "(IDX:" + g.index + ')';
  }
  return out;
}

}  // namespace sb::bridge
