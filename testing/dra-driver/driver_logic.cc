// SPDX-License-Identifier: Apache-2.0
#include "testing/dra-driver/driver_logic.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <boost/json.hpp>

namespace sb::dra_driver {
namespace json = boost::json;

namespace {

Error Invalid(std::string message) {
  return Error{.code = ErrorCode::kInvalidArgument, .message = std::move(message)};
}

Result<json::value> Parse(std::string_view text, std::string_view what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return tl::unexpected(Invalid(fmt::format("{}: not JSON: {}", what, ec.message())));
  return v;
}

// The value at `path` of objects; nullptr when any step is missing or not an object.
const json::value* At(const json::value& root, std::initializer_list<std::string_view> path) {
  const json::value* v = &root;
  for (std::string_view key : path) {
    const json::object* o = v->if_object();
    if (o == nullptr) return nullptr;
    v = o->if_contains(key);
    if (v == nullptr) return nullptr;
  }
  return v;
}

std::string StrAt(const json::value& root, std::initializer_list<std::string_view> path) {
  const json::value* v = At(root, path);
  if (v == nullptr || !v->is_string()) return "";
  return std::string(v->get_string());
}

// The CDI class of a driver's devices: "gpu" for gpu.example.com, "cpu" for dra.cpu.
std::string CdiKind(std::string_view driver) {
  return fmt::format("{}/{}", driver, driver == kCpuDriver ? "cpu" : "gpu");
}

}  // namespace

const FakeDevice* DriverSpec::Find(std::string_view name) const {
  auto it = std::ranges::find(devices, name, &FakeDevice::name);
  return it == devices.end() ? nullptr : &*it;
}

DriverSpec GpuDriver(int count) {
  DriverSpec spec{.driver = std::string(kGpuDriver)};
  for (int i = 0; i < count; ++i)
    spec.devices.push_back({.name = fmt::format("gpu-{}", i), .index = i});
  return spec;
}

DriverSpec CpuDriver(int cpus, int threads_per_core) {
  DriverSpec spec{.driver = std::string(kCpuDriver)};
  const int cores = std::max(1, cpus / std::max(1, threads_per_core));
  for (int c = 0; c < cpus; ++c) {
    spec.devices.push_back(
        {.name = fmt::format("cpudev{:03}", c), .index = c, .core_id = c % cores, .socket_id = 0});
  }
  return spec;
}

std::string SliceName(std::string_view node, std::string_view driver) {
  return fmt::format("{}-{}", node, driver);
}

std::string SliceJson(const DriverSpec& spec, std::string_view node, std::string_view node_uid) {
  json::array devices;
  for (const FakeDevice& d : spec.devices) {
    json::object attrs;
    if (spec.driver == kCpuDriver) {
      // Qualified, as dra-driver-cpu publishes them.
      attrs["dra.cpu/cpuID"] = {{"int", d.index}};
      attrs["dra.cpu/coreID"] = {{"int", d.core_id}};
      attrs["dra.cpu/socketID"] = {{"int", d.socket_id}};
      attrs["dra.cpu/coreType"] = {{"string", "standard"}};
    } else {
      attrs["index"] = {{"int", d.index}};
      attrs["uuid"] = {{"string", fmt::format("gpu-{}-{}", node, d.index)}};
      attrs["model"] = {{"string", "SB-TEST-GPU"}};
    }
    devices.push_back(json::object{{"name", d.name}, {"attributes", std::move(attrs)}});
  }
  json::object metadata{{"name", SliceName(node, spec.driver)}};
  if (!node_uid.empty()) {
    metadata["ownerReferences"] = json::array{
        json::object{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node_uid}}};
  }
  json::object slice{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceSlice"},
      {"metadata", std::move(metadata)},
      {"spec",
       json::object{
           {"driver", spec.driver},
           {"nodeName", node},
           {"pool", json::object{{"name", node}, {"generation", 1}, {"resourceSliceCount", 1}}},
           {"devices", std::move(devices)}}},
  };
  return json::serialize(slice);
}

Result<std::vector<AllocatedDevice>> ClaimDevices(std::string_view claim_json, std::string_view uid,
                                                  std::string_view driver, std::string_view node) {
  Result<json::value> claim = Parse(claim_json, "ResourceClaim");
  if (!claim) return tl::unexpected(claim.error());
  const std::string name = StrAt(*claim, {"metadata", "name"});
  const std::string have_uid = StrAt(*claim, {"metadata", "uid"});
  if (have_uid != uid) {
    return tl::unexpected(
        Error{.code = ErrorCode::kFailedPrecondition,
              .message = fmt::format("ResourceClaim {} has uid {}, not {}", name, have_uid, uid)});
  }
  const json::value* results = At(*claim, {"status", "allocation", "devices", "results"});
  if (At(*claim, {"status", "allocation"}) == nullptr) {
    return tl::unexpected(Error{.code = ErrorCode::kFailedPrecondition,
                                .message = fmt::format("ResourceClaim {} is not allocated", name)});
  }
  std::vector<AllocatedDevice> out;
  if (results == nullptr) return out;
  if (!results->is_array()) {
    return tl::unexpected(Invalid(
        fmt::format("ResourceClaim {}: status.allocation.devices.results is not a list", name)));
  }
  for (const json::value& r : results->get_array()) {
    if (StrAt(r, {"driver"}) != driver) continue;
    AllocatedDevice d{.request = StrAt(r, {"request"}),
                      .pool = StrAt(r, {"pool"}),
                      .device = StrAt(r, {"device"})};
    if (d.device.empty()) {
      return tl::unexpected(
          Invalid(fmt::format("ResourceClaim {}: a result of {} names no device", name, driver)));
    }
    if (d.pool != node) {
      return tl::unexpected(Invalid(
          fmt::format("ResourceClaim {}: device {} of {} is in pool {}, not this node's ({})", name,
                      d.device, driver, d.pool, node)));
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string CdiFileName(std::string_view driver, std::string_view claim_uid) {
  return fmt::format("{}-{}.json", driver, claim_uid);
}

Result<PreparedClaim> PrepareClaim(const DriverSpec& spec, std::string_view claim_uid,
                                   const std::vector<AllocatedDevice>& allocated,
                                   std::string_view hook_binary, std::string_view hook_log) {
  PreparedClaim out;
  if (allocated.empty()) return out;
  const std::string kind = CdiKind(spec.driver);
  // One device per allocated device, in the allocation's order; a device allocated for two
  // requests is one device with both request names.
  std::vector<const FakeDevice*> devices;
  for (const AllocatedDevice& a : allocated) {
    const FakeDevice* d = spec.Find(a.device);
    if (d == nullptr) {
      return tl::unexpected(Invalid(fmt::format("{} has no device {}", spec.driver, a.device)));
    }
    auto it = std::ranges::find(out.devices, a.device, &PreparedDevice::device);
    if (it != out.devices.end()) {
      if (std::ranges::find(it->requests, a.request) == it->requests.end()) {
        it->requests.push_back(a.request);
      }
      continue;
    }
    out.devices.push_back({.requests = {a.request}, .pool = a.pool, .device = a.device});
    devices.push_back(d);
  }
  json::array cdi_devices;
  std::vector<int> cpus;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const FakeDevice& d = *devices[i];
    const std::string cdi_name = fmt::format("{}-{}", claim_uid, d.name);
    json::array env;
    if (spec.driver == kCpuDriver) {
      env.push_back(json::string(fmt::format("DRA_CPU_{}=1", d.index)));
      cpus.push_back(d.index);
    } else {
      env.push_back(json::string(fmt::format("GPU_DEVICE_{}={}", d.index, d.name)));
    }
    cdi_devices.push_back(json::object{{"name", cdi_name},
                                       {"containerEdits", json::object{{"env", std::move(env)}}}});
    out.devices[i].cdi_ids.push_back(fmt::format("{}={}", kind, cdi_name));
  }
  if (spec.driver == kCpuDriver) {
    // The claim's whole CPU set: one more CDI device, named by the first CPU device only (a
    // container's CDI devices are the union of its claims' devices' ids; listed twice, the hook
    // would run twice).
    const std::string list = FormatCpuList(cpus);
    const std::string cdi_name = fmt::format("{}-cpuset", claim_uid);
    json::array args{"sb-test-dra-driver", "cpuset-hook", json::string(list)};
    if (!hook_log.empty()) {
      args.push_back("--log");
      args.push_back(json::string(hook_log));
    }
    json::object edits{
        {"env", json::array{json::string(fmt::format("DRA_CPUS={}", list))}},
        {"hooks", json::array{json::object{
                      {"hookName", "createRuntime"},
                      {"path", hook_binary},
                      {"args", std::move(args)},
                      {"timeout", 10},
                  }}},
    };
    cdi_devices.push_back(json::object{{"name", cdi_name}, {"containerEdits", std::move(edits)}});
    out.devices.front().cdi_ids.push_back(fmt::format("{}={}", kind, cdi_name));
  }
  json::object cdi{
      {"cdiVersion", kCdiVersion}, {"kind", kind}, {"devices", std::move(cdi_devices)}};
  out.cdi_file = CdiFileName(spec.driver, claim_uid);
  out.cdi_json = json::serialize(cdi);
  return out;
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::ranges::sort(cpus);
  auto last = std::unique(cpus.begin(), cpus.end());
  cpus.erase(last, cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> ParseCpuList(std::string_view list) {
  auto bad = [&] { return tl::unexpected(Invalid(fmt::format("bad CPU list \"{}\"", list))); };
  auto number = [](std::string_view s, int* n) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *n);
    return ec == std::errc() && p == s.data() + s.size() && *n >= 0;
  };
  std::vector<int> out;
  if (list.empty()) return bad();
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    std::string_view part =
        list.substr(start, comma == std::string_view::npos ? list.npos : comma - start);
    std::size_t dash = part.find('-');
    int a = 0;
    int b = 0;
    if (dash == std::string_view::npos) {
      if (!number(part, &a)) return bad();
      b = a;
    } else if (!number(part.substr(0, dash), &a) || !number(part.substr(dash + 1), &b) || b < a) {
      return bad();
    }
    for (int c = a; c <= b; ++c) out.push_back(c);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

Result<std::string> BundleFromState(std::string_view state_json) {
  Result<json::value> state = Parse(state_json, "OCI state");
  if (!state) return tl::unexpected(state.error());
  std::string bundle = StrAt(*state, {"bundle"});
  if (bundle.empty()) return tl::unexpected(Invalid("OCI state: no bundle"));
  return bundle;
}

Result<std::string> CgroupsPathFromConfig(std::string_view config_json) {
  Result<json::value> config = Parse(config_json, "OCI config.json");
  if (!config) return tl::unexpected(config.error());
  std::string path = StrAt(*config, {"linux", "cgroupsPath"});
  if (path.empty()) return tl::unexpected(Invalid("config.json: no linux.cgroupsPath"));
  if (path.front() != '/' && path.find(':') != std::string::npos) {
    return tl::unexpected(Invalid(fmt::format(
        "config.json: linux.cgroupsPath \"{}\" is the systemd driver's form; the cpuset hook "
        "knows cgroupfs paths only",
        path)));
  }
  return path;
}

std::string CpusetCpusFile(std::string_view cpuset_root, std::string_view cgroups_path) {
  std::string root(cpuset_root);
  while (!root.empty() && root.back() == '/') root.pop_back();
  std::string_view rel = cgroups_path;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  while (!rel.empty() && rel.back() == '/') rel.remove_suffix(1);
  return rel.empty() ? root + "/cpuset.cpus" : fmt::format("{}/{}/cpuset.cpus", root, rel);
}

}  // namespace sb::dra_driver
