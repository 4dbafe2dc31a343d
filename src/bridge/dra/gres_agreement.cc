// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/gres_agreement.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/dra/index_list.h"
#include "bridge/dra/internal.h"
#include "bridge/gres.h"

namespace sb::bridge {
namespace {

using dra_internal::Invalid;
using dra_internal::IsDigits;
using dra_internal::Quote;
using dra_internal::ToInt;

// {0,1,2,3,5} -> "0-3,5".
std::string FormatIndices(std::vector<std::int64_t> v) {
  std::ranges::sort(v);
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(v[i]) : fmt::format("{}-{}", v[i], v[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

Result<std::vector<NodeGres>> ParseNodeGres(std::string_view gres) {
  std::vector<NodeGres> out;
  std::map<std::string, std::int64_t> next_index;
  if (gres.empty() || gres == "(null)") return out;
  for (std::string_view entry : SplitTopLevel(gres)) {
    const auto bad = [&](std::string_view why) {
      return tl::unexpected(
          Invalid(fmt::format("Slurm GRES {} in {}: {}", Quote(entry), Quote(gres), why)));
    };
    std::string_view head = entry;
    std::string_view extra;
    if (const std::size_t paren = entry.find('('); paren != std::string_view::npos) {
      if (!entry.ends_with(')')) return bad("unbalanced parenthesis");
      head = entry.substr(0, paren);
      extra = entry.substr(paren + 1, entry.size() - paren - 2);
    }
    std::vector<std::string_view> parts;
    for (std::size_t start = 0;;) {
      const std::size_t colon = head.find(':', start);
      parts.push_back(head.substr(
          start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
      if (colon == std::string_view::npos) break;
      start = colon + 1;
    }
    if (parts.size() > 3 || parts[0].empty()) return bad("not name[:type][:count]");
    NodeGres g{.name = std::string(parts[0])};
    auto count_of = [](std::string_view c) -> std::optional<std::int64_t> {
      std::int64_t scale = 1;
      if (!c.empty() && (c.back() == 'K' || c.back() == 'M' || c.back() == 'G')) {
        scale = c.back() == 'K' ? 1024 : c.back() == 'M' ? 1024 * 1024 : 1024 * 1024 * 1024;
        c.remove_suffix(1);
      }
      if (!IsDigits(c)) return std::nullopt;
      std::optional<std::int64_t> n = ToInt(c);
      if (!n || *n > INT64_MAX / scale) return std::nullopt;
      return *n * scale;
    };
    g.count = 1;
    if (parts.size() == 3) {
      g.type = std::string(parts[1]);
      std::optional<std::int64_t> n = count_of(parts[2]);
      if (!n) return bad("the count is not a number");
      g.count = *n;
    } else if (parts.size() == 2) {
      if (std::optional<std::int64_t> n = count_of(parts[1])) {
        g.count = *n;
      } else {
        g.type = std::string(parts[1]);
      }
    }
    if (const std::size_t idx = extra.find("IDX:"); idx != std::string_view::npos) {
      std::string_view list = extra.substr(idx + 4);
      if (list != "N/A") {
        Result<std::vector<std::int64_t>> v = ExpandIndexList(list);
        if (!v) return bad(v.error().message);
        g.indices = std::move(*v);
      }
    } else if (g.count <= 4096) {
      std::int64_t& next = next_index[g.name];
      for (std::int64_t i = 0; i < g.count; ++i) g.indices.push_back(next++);
    }
    out.push_back(std::move(g));
  }
  return out;
}

GresAgreement CheckGresAgreement(const NodeInventory& inventory, const slurm::NodeInfo& slurm_node,
                                 const std::vector<DeviceProfile>& profiles) {
  GresAgreement out;
  std::vector<std::string> clauses;
  Result<std::vector<NodeGres>> gres = ParseNodeGres(slurm_node.gres);
  if (!gres) {
    out.agrees = false;
    out.reason = gres.error().message;
    return out;
  }
  // Groups: per GRES name, one per gresType of its profiles, and one of its untyped profiles.
  struct Group {
    std::vector<const DeviceProfile*> members;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const DeviceProfile& p : profiles) {
    if (p.backend == DeviceBackend::kIndexedGres) {
      groups[{p.gres_name, p.gres_type}].members.push_back(&p);
    }
  }
  for (const auto& [key, group] : groups) {
    const auto& [name, type] = key;
    std::vector<std::int64_t> slurm;
    for (const NodeGres& g : *gres) {
      if (g.name != name) continue;
      const bool typed_elsewhere =
          type.empty() && !g.type.empty() && groups.contains({name, g.type});
      if ((type.empty() && !typed_elsewhere) || (!type.empty() && g.type == type)) {
        slurm.insert(slurm.end(), g.indices.begin(), g.indices.end());
      }
    }
    std::vector<std::int64_t> ours;
    std::vector<std::string> member_names;
    for (const DeviceProfile* p : group.members) {
      member_names.push_back(p->name);
      if (auto it = inventory.devices.find(p->name); it != inventory.devices.end()) {
        for (const InventoryDevice& d : it->second) ours.push_back(d.index);
      }
    }
    std::ranges::sort(slurm);
    std::ranges::sort(ours);
    const std::string label = type.empty() ? name : name + ":" + type;
    const std::string who = fmt::format("{}", fmt::join(member_names, ", "));
    if (ours.empty() && slurm.empty()) continue;
    if (ours.empty()) {
      clauses.push_back(
          fmt::format("{}: Slurm has indices {}, no ResourceSlice device of {} (no "
                      "DRA driver for them here)",
                      label, FormatIndices(slurm), who));
      continue;
    }
    if (ours != slurm) {
      out.agrees = false;
      clauses.push_back(fmt::format("{}: Slurm has indices {}, the ResourceSlices of {} {}", label,
                                    FormatIndices(slurm), who, FormatIndices(ours)));
      continue;
    }
    clauses.push_back(fmt::format("{}: indices {} as Slurm", label, FormatIndices(slurm)));
    for (const DeviceProfile* p : group.members) {
      if (inventory.devices.contains(p->name)) out.usable_profiles.insert(p->name);
    }
  }
  for (const DeviceProfile& p : profiles) {
    if (p.backend != DeviceBackend::kCoreBitmap) continue;
    auto it = inventory.devices.find(p.name);
    const std::int64_t n =
        it == inventory.devices.end() ? 0 : static_cast<std::int64_t>(it->second.size());
    if (n == 0) {
      clauses.push_back(fmt::format("{}: no ResourceSlice CPU device", p.name));
    } else if (slurm_node.cpus > 0 && n != slurm_node.cpus) {
      out.agrees = false;
      clauses.push_back(
          fmt::format("{}: Slurm has {} CPUs, the ResourceSlices {}", p.name, slurm_node.cpus, n));
    } else {
      clauses.push_back(fmt::format("{}: {} CPUs as Slurm", p.name, n));
      out.usable_profiles.insert(p.name);
    }
  }
  if (!inventory.skipped_pools.empty()) {
    clauses.push_back(fmt::format("left out: {}", fmt::join(inventory.skipped_pools, "; ")));
  }
  out.reason = clauses.empty() ? "no device of the device profiles on either side"
                               : fmt::format("{}", fmt::join(clauses, "; "));
  return out;
}

}  // namespace sb::bridge
