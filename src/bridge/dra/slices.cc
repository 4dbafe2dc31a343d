// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/slices.h"

#include <optional>
#include <utility>

#include <fmt/format.h>
#include <boost/json.hpp>

#include "bridge/dra/internal.h"
#include "bridge/json_path.h"
#include "kube/codec.h"

namespace sb::bridge {
namespace json = boost::json;
namespace {

using dra_internal::Invalid;
using dra_internal::ParseJson;
using dra_internal::Quote;

}  // namespace

Result<ResourceSliceInfo> ParseResourceSlice(const kube::GenericObject& slice) {
  const std::string what = fmt::format("ResourceSlice {}", Quote(slice.metadata.name));
  Result<json::value> spec = ParseJson(slice.spec_json, what + " spec");
  if (!spec) return tl::unexpected(spec.error());
  ResourceSliceInfo out;
  out.name = slice.metadata.name;
  const json::value* s = &*spec;
  out.driver = StringAt(s, {"driver"});
  out.pool = StringAt(s, {"pool", "name"});
  out.node_name = StringAt(s, {"nodeName"});
  out.per_device_node_selection = BoolAt(s, {"perDeviceNodeSelection"});
  if (out.driver.empty()) return tl::unexpected(Invalid(what + ": spec.driver is missing"));
  if (out.pool.empty()) return tl::unexpected(Invalid(what + ": spec.pool.name is missing"));
  std::optional<std::int64_t> gen = IntAt(s, {"pool", "generation"});
  std::optional<std::int64_t> count = IntAt(s, {"pool", "resourceSliceCount"});
  if (!count || *count <= 0) {
    return tl::unexpected(Invalid(what + ": spec.pool.resourceSliceCount must be above 0"));
  }
  out.generation = gen.value_or(0);
  out.resource_slice_count = *count;
  if (const json::array* devices = ArrayAt(s, {"devices"}); devices != nullptr) {
    for (std::size_t i = 0; i < devices->size(); ++i) {
      const json::value* d = &(*devices)[i];
      SliceDevice dev;
      dev.name = StringAt(d, {"name"});
      if (dev.name.empty()) {
        return tl::unexpected(Invalid(fmt::format("{}: spec.devices[{}] has no name", what, i)));
      }
      dev.node_name = StringAt(d, {"nodeName"});
      if (const json::value* attrs = JsonAt(d, {"attributes"});
          attrs != nullptr && attrs->is_object()) {
        for (const auto& [key, value] : attrs->get_object()) {
          std::string qualified(key);
          if (qualified.find('/') == std::string::npos) qualified = out.driver + "/" + qualified;
          DeviceAttribute a;
          if (const json::value* v = JsonAt(&value, {"int"}); v != nullptr) {
            std::optional<std::int64_t> n = JsonInt(v);
            if (!n) continue;
            a.type = DeviceAttribute::Type::kInt;
            a.int_value = *n;
          } else if (const json::value* b = JsonAt(&value, {"bool"});
                     b != nullptr && b->is_bool()) {
            a.type = DeviceAttribute::Type::kBool;
            a.bool_value = b->get_bool();
          } else if (const json::value* t = JsonAt(&value, {"string"});
                     t != nullptr && t->is_string()) {
            a.type = DeviceAttribute::Type::kString;
            a.string_value = std::string(t->get_string());
          } else if (JsonAt(&value, {"version"}) != nullptr) {
            a.type = DeviceAttribute::Type::kVersion;
            a.string_value = StringAt(&value, {"version"});
          } else {
            continue;  // a list ("strings") or a type of a later API: not compared here
          }
          dev.attributes[qualified] = std::move(a);
        }
      }
      out.devices.push_back(std::move(dev));
    }
  }
  return out;
}

Result<ResourceSliceInfo> ParseResourceSliceJson(std::string_view text) {
  Result<kube::GenericObject> o = kube::Decode<kube::GenericObject>(text);
  if (!o) {
    return tl::unexpected(
        Invalid(fmt::format("ResourceSlice is not a Kubernetes object: {}", o.error().message)));
  }
  if (!o->kind.empty() && o->kind != "ResourceSlice") {
    return tl::unexpected(
        Invalid(fmt::format("{} {} is not a ResourceSlice", o->kind, Quote(o->metadata.name))));
  }
  return ParseResourceSlice(*o);
}

}  // namespace sb::bridge
