// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/inventory.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "bridge/dra/internal.h"
#include "bridge/dra/selector.h"

namespace sb::bridge {
namespace {

using dra_internal::Invalid;
using dra_internal::IsDigits;
using dra_internal::Quote;
using dra_internal::ToInt;

constexpr std::string_view kNvidiaDriver = "gpu.nvidia.com";

// Where a device's Slurm index comes from (the profile's indexFrom): its name or an attribute.
struct IndexSource {
  bool from_name = false;
  std::string attribute;  // qualified
};

IndexSource IndexSourceOf(const DeviceProfile& p) {
  std::string_view from = p.index_from;
  if (from.empty()) from = p.driver == kNvidiaDriver ? "name" : "attribute:index";
  if (from == "name") return {.from_name = true};
  std::string attr(from.substr(std::string_view("attribute:").size()));
  if (attr.find('/') == std::string::npos) attr = p.driver + "/" + attr;
  return {.attribute = attr};
}

std::string CpuAttribute(const DeviceProfile& p, std::string_view name) {
  return p.driver + "/" + std::string(name);
}

std::optional<std::int64_t> IntAttribute(const SliceDevice& d, const std::string& key) {
  auto it = d.attributes.find(key);
  if (it == d.attributes.end() || it->second.type != DeviceAttribute::Type::kInt) {
    return std::nullopt;
  }
  return it->second.int_value;
}

}  // namespace

std::string InventoryDevice::Id() const { return fmt::format("{}/{}/{}", driver, pool, device); }

const InventoryDevice* NodeInventory::ByIndex(std::string_view profile, std::int64_t index) const {
  auto it = devices.find(std::string(profile));
  if (it == devices.end()) return nullptr;
  auto d = std::ranges::find(it->second, index, &InventoryDevice::index);
  return d == it->second.end() ? nullptr : &*d;
}

const InventoryDevice* NodeInventory::ByCpu(std::string_view profile, std::int64_t cpu_id) const {
  auto it = devices.find(std::string(profile));
  if (it == devices.end()) return nullptr;
  auto d = std::ranges::find(it->second, cpu_id, &InventoryDevice::cpu_id);
  return d == it->second.end() ? nullptr : &*d;
}

std::int64_t NodeInventory::CoreCount(std::string_view profile) const {
  auto it = devices.find(std::string(profile));
  if (it == devices.end() || it->second.empty()) return 0;
  std::int64_t top = -1;
  for (const InventoryDevice& d : it->second) top = std::max(top, d.core);
  return top + 1;
}

Result<NodeInventory> BuildNodeInventory(std::string_view node,
                                         const std::vector<ResourceSliceInfo>& slices,
                                         const std::vector<DeviceProfile>& profiles) {
  NodeInventory inv;
  inv.node = std::string(node);
  std::set<std::string> drivers;
  for (const DeviceProfile& p : profiles) drivers.insert(p.driver);

  // Per pool: the slices of its highest generation.
  struct Pool {
    std::int64_t generation = 0;
    std::vector<const ResourceSliceInfo*> slices;
  };
  std::map<std::pair<std::string, std::string>, Pool> pools;
  for (const ResourceSliceInfo& s : slices) {
    if (!drivers.contains(s.driver)) continue;
    auto [it, fresh] = pools.try_emplace({s.driver, s.pool});
    Pool& pool = it->second;
    if (fresh || s.generation > pool.generation) {
      pool.generation = s.generation;
      pool.slices = {&s};
    } else if (s.generation == pool.generation) {
      pool.slices.push_back(&s);
    }
  }

  auto on_node = [&](const ResourceSliceInfo& s, const SliceDevice& d) {
    return s.per_device_node_selection ? d.node_name == node : s.node_name == node;
  };
  std::set<std::string> seen;
  // Slurm's index space is per GRES name: two devices of one name on one index are one too many.
  std::map<std::pair<std::string, std::int64_t>, std::string> gres_index_owner;
  // Core-bitmap devices, per profile, before Slurm's core numbers are known.
  struct Cpu {
    InventoryDevice device;
    std::int64_t socket = 0;
    std::optional<std::int64_t> core;  // coreID; absent: the CPU is a core of its own
  };
  std::map<std::string, std::vector<Cpu>> cpus;
  for (const auto& [key, pool] : pools) {
    const bool relevant = std::ranges::any_of(pool.slices, [&](const ResourceSliceInfo* s) {
      return std::ranges::any_of(s->devices, [&](const SliceDevice& d) { return on_node(*s, d); });
    });
    if (!relevant) continue;
    const std::int64_t want = pool.slices.front()->resource_slice_count;
    const bool consistent = std::ranges::all_of(
        pool.slices, [&](const ResourceSliceInfo* s) { return s->resource_slice_count == want; });
    if (!consistent || static_cast<std::int64_t>(pool.slices.size()) != want) {
      inv.skipped_pools.push_back(
          consistent ? fmt::format("{}/{}: generation {} has {} of {} ResourceSlices", key.first,
                                   key.second, pool.generation, pool.slices.size(), want)
                     : fmt::format("{}/{}: generation {} has slices that disagree on "
                                   "resourceSliceCount",
                                   key.first, key.second, pool.generation));
      continue;
    }
    for (const ResourceSliceInfo* s : pool.slices) {
      for (const SliceDevice& d : s->devices) {
        if (!on_node(*s, d)) continue;
        InventoryDevice dev{.driver = s->driver, .pool = s->pool, .device = d.name};
        const std::string id = dev.Id();
        const DeviceProfile* match = nullptr;
        for (const DeviceProfile& p : profiles) {
          if (!ProfileMatches(p, s->driver, d)) continue;
          if (match != nullptr) {
            return tl::unexpected(Invalid(fmt::format(
                "ResourceSlice device {} matches device profiles {} and {}: a device must belong "
                "to one profile, or Slurm would count it twice",
                id, Quote(match->name), Quote(p.name))));
          }
          match = &p;
        }
        if (match == nullptr) continue;
        if (!seen.insert(id).second) {
          return tl::unexpected(
              Invalid(fmt::format("ResourceSlice device {} is published twice", id)));
        }
        dev.profile = match->name;
        if (match->backend == DeviceBackend::kCoreBitmap) {
          dev.index_attribute = CpuAttribute(*match, "cpuID");
          std::optional<std::int64_t> cpu = IntAttribute(d, dev.index_attribute);
          if (!cpu || *cpu < 0) {
            return tl::unexpected(Invalid(fmt::format(
                "ResourceSlice device {} (profile {}) has no int attribute {}: the core-bitmap "
                "backend needs one device per CPU (dra.cpu's individual mode; its grouped mode "
                "is not supported)",
                id, Quote(match->name), dev.index_attribute)));
          }
          auto type = d.attributes.find(CpuAttribute(*match, "coreType"));
          if (type != d.attributes.end() && type->second.string_value == "e-core") {
            continue;  // Slurm does not count efficiency cores by default (as upstream)
          }
          dev.cpu_id = *cpu;
          cpus[match->name].push_back(
              {.device = std::move(dev),
               .socket = IntAttribute(d, CpuAttribute(*match, "socketID")).value_or(0),
               .core = IntAttribute(d, CpuAttribute(*match, "coreID"))});
          continue;
        }
        const IndexSource src = IndexSourceOf(*match);
        std::optional<std::int64_t> index;
        if (src.from_name) {
          const std::size_t dash = d.name.rfind('-');
          if (dash != std::string::npos && IsDigits(std::string_view(d.name).substr(dash + 1))) {
            index = ToInt(std::string_view(d.name).substr(dash + 1));
          }
        } else {
          index = IntAttribute(d, src.attribute);
          dev.index_attribute = src.attribute;
        }
        if (!index || *index < 0) {
          return tl::unexpected(Invalid(fmt::format(
              "ResourceSlice device {} (profile {}) has no Slurm GRES index: {}", id,
              Quote(match->name),
              src.from_name ? "its name does not end in -<index> (indexFrom name)"
                            : fmt::format("no non-negative int attribute {}", src.attribute))));
        }
        dev.index = *index;
        auto [owner, fresh] = gres_index_owner.try_emplace({match->gres_name, *index}, id);
        if (!fresh) {
          return tl::unexpected(Invalid(
              fmt::format("ResourceSlice devices {} and {} both have Slurm {} index {} on node {}",
                          owner->second, id, match->gres_name, *index, node)));
        }
        inv.devices[match->name].push_back(std::move(dev));
      }
    }
  }
  for (auto& [name, list] : inv.devices) std::ranges::sort(list, {}, &InventoryDevice::index);

  // Slurm's abstract cores: the distinct (socket, core) pairs in order, each standing for its
  // CPUs (hyperthreads), as Slurm numbers the bits of a core bitmap.
  for (auto& [name, list] : cpus) {
    auto core_key = [](const Cpu& c) {
      return std::pair{c.socket, c.core.value_or(c.device.cpu_id)};
    };
    std::ranges::sort(list, [&](const Cpu& a, const Cpu& b) {
      return std::pair{core_key(a), a.device.cpu_id} < std::pair{core_key(b), b.device.cpu_id};
    });
    std::set<std::int64_t> cpu_ids;
    std::vector<InventoryDevice>& devices = inv.devices[name];
    for (std::size_t i = 0; i < list.size(); ++i) {
      Cpu& c = list[i];
      if (!cpu_ids.insert(c.device.cpu_id).second) {
        return tl::unexpected(
            Invalid(fmt::format("ResourceSlice devices of profile {} on node {} repeat CPU {}",
                                Quote(name), node, c.device.cpu_id)));
      }
      const bool new_core = i == 0 || core_key(list[i - 1]) != core_key(c) || !c.core;
      c.device.core = devices.empty() ? 0 : devices.back().core + (new_core ? 1 : 0);
      devices.push_back(std::move(c.device));
    }
  }
  return inv;
}

}  // namespace sb::bridge
