// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/assign.h"

#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "bridge/dra/index_list.h"
#include "bridge/dra/internal.h"
#include "bridge/dra/profiles.h"

namespace sb::bridge {
namespace {

using dra_internal::Invalid;
using dra_internal::Quote;

}  // namespace

Result<std::vector<DeviceAssignment>> AssignDevices(const std::vector<DraRequest>& requests,
                                                    const NodeInventory& inventory,
                                                    const slurm::NodeAllocation& allocation,
                                                    const std::vector<DeviceProfile>& profiles) {
  std::vector<DeviceAssignment> out;
  const std::string& node = allocation.node;
  // Slurm's indices per (gresName, gresType) and its CPUs, each consumed in order by a cursor.
  std::map<std::pair<std::string, std::string>, std::vector<std::int64_t>> indices;
  std::map<std::pair<std::string, std::string>, std::size_t> index_cursor;
  std::map<std::string, std::vector<const InventoryDevice*>> cpus;  // by profile
  std::map<std::string, std::size_t> cpu_cursor;
  std::set<std::string> used_names;

  for (const DraRequest& r : requests) {
    const DeviceProfile* p = FindProfile(profiles, r.profile);
    if (p == nullptr) {
      return tl::unexpected(Invalid(fmt::format("device class {}: profile {} is not configured",
                                                Quote(r.device_class), Quote(r.profile))));
    }
    DeviceAssignment a{.request = r, .request_name = r.claim_request};
    if (a.request_name.empty()) {
      // One request per class in the pod's own claim: "cpu", or the GRES name; then -2, -3, ...
      const std::string base = p->backend == DeviceBackend::kCoreBitmap ? "cpu" : p->gres_name;
      a.request_name = base;
      for (int n = 2; used_names.contains(a.request_name); ++n) {
        a.request_name = fmt::format("{}-{}", base, n);
      }
      used_names.insert(a.request_name);
    }
    const std::string who =
        fmt::format("device class {} (profile {})", Quote(r.device_class), Quote(p->name));
    if (p->backend == DeviceBackend::kCoreBitmap) {
      auto [it, fresh] = cpus.try_emplace(p->name);
      if (fresh) {
        if (allocation.core_bitmap.empty()) {
          return tl::unexpected(Invalid(fmt::format(
              "{}: Slurm's layout of node {} has no core bitmap, so its CPUs are unknown", who,
              node)));
        }
        Result<std::vector<std::int64_t>> bits = BitmapBits(allocation.core_bitmap);
        if (!bits) {
          return tl::unexpected(Invalid(fmt::format("node {}: {}", node, bits.error().message)));
        }
        const std::int64_t cores = inventory.CoreCount(p->name);
        if (cores == 0) {
          return tl::unexpected(Invalid(fmt::format(
              "{}: node {} publishes no CPU device of the profile in its ResourceSlices", who,
              node)));
        }
        // 0: Slurm did not say; an overflowing product is a mismatch like any other.
        std::int64_t slurm_cores = 0;
        if (__builtin_mul_overflow(allocation.sockets_per_node, allocation.cores_per_socket,
                                   &slurm_cores)) {
          slurm_cores = -1;
        }
        if (slurm_cores != 0 && slurm_cores != cores) {
          return tl::unexpected(Invalid(fmt::format(
              "{}: Slurm counts {} cores on node {} ({} socket(s) x {}), its ResourceSlices {}: "
              "Slurm's core bitmap cannot be mapped to CPUs",
              who, slurm_cores, node, allocation.sockets_per_node, allocation.cores_per_socket,
              cores)));
        }
        const std::vector<InventoryDevice>& devs = inventory.devices.find(p->name)->second;
        for (std::int64_t bit : *bits) {
          const std::size_t before = it->second.size();
          for (const InventoryDevice& d : devs) {
            if (d.core == bit) it->second.push_back(&d);
          }
          if (it->second.size() == before) {
            return tl::unexpected(Invalid(fmt::format(
                "{}: core {} of Slurm's core bitmap {} has no CPU in node {}'s ResourceSlices "
                "({} cores)",
                who, bit, allocation.core_bitmap, node, cores)));
          }
        }
      }
      std::size_t& cursor = cpu_cursor[p->name];
      const std::size_t left = it->second.size() - cursor;
      if (static_cast<std::int64_t>(left) < r.count) {
        return tl::unexpected(Invalid(
            fmt::format("{}: requested {} CPUs, Slurm allocated {} on node {} (core bitmap {})",
                        who, r.count, left, node, allocation.core_bitmap)));
      }
      for (std::int64_t i = 0; i < r.count; ++i) a.devices.push_back(*it->second[cursor++]);
      out.push_back(std::move(a));
      continue;
    }

    const std::pair<std::string, std::string> key{p->gres_name, p->gres_type};
    auto [it, fresh] = indices.try_emplace(key);
    if (fresh) {
      // An untyped profile takes the GRES of its name whose type no typed profile claims.
      std::set<std::string> typed;
      for (const DeviceProfile& other : profiles) {
        if (other.backend == DeviceBackend::kIndexedGres && other.gres_name == p->gres_name &&
            !other.gres_type.empty()) {
          typed.insert(other.gres_type);
        }
      }
      for (const slurm::GresAllocation& g : allocation.gres) {
        if (g.name != p->gres_name) continue;
        if (p->gres_type.empty() ? typed.contains(g.type) : g.type != p->gres_type) continue;
        const std::string gres = g.type.empty() ? g.name : g.name + ":" + g.type;
        if (g.index.empty()) {
          return tl::unexpected(Invalid(fmt::format(
              "{}: Slurm's layout of node {} lists GRES {} (count {}) without device indices "
              "(upstream slurm-bridge #33), so which devices Slurm chose is unknown and no claim "
              "can name them",
              who, node, gres, g.count)));
        }
        Result<std::vector<std::int64_t>> v = ExpandIndexList(g.index);
        if (!v) {
          return tl::unexpected(Invalid(
              fmt::format("{}: GRES {} on node {}: {}", who, gres, node, v.error().message)));
        }
        it->second.insert(it->second.end(), v->begin(), v->end());
      }
    }
    std::size_t& cursor = index_cursor[key];
    const std::size_t left = it->second.size() - cursor;
    if (static_cast<std::int64_t>(left) < r.count) {
      return tl::unexpected(
          Invalid(fmt::format("{}: requested {}, Slurm allocated {} {} on node {}", who, r.count,
                              left, DraTres(*p), node)));
    }
    for (std::int64_t i = 0; i < r.count; ++i) {
      const std::int64_t index = it->second[cursor++];
      const InventoryDevice* d = inventory.ByIndex(p->name, index);
      if (d == nullptr) {
        // Perhaps a device of another profile with the same GRES name: say which.
        std::string owner;
        for (const DeviceProfile& other : profiles) {
          if (&other == p || other.gres_name != p->gres_name) continue;
          if (const InventoryDevice* o = inventory.ByIndex(other.name, index)) {
            owner = fmt::format(" (it is {} of profile {})", o->Id(), Quote(other.name));
          }
        }
        return tl::unexpected(Invalid(fmt::format(
            "{}: Slurm's {} index {} on node {} is no device of the profile in the node's "
            "ResourceSlices{}",
            who, p->gres_name, index, node, owner)));
      }
      a.devices.push_back(*d);
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace sb::bridge
