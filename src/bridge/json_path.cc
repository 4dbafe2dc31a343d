// SPDX-License-Identifier: Apache-2.0
#include "bridge/json_path.h"

#include <limits>

namespace sb::bridge {
namespace json = boost::json;
namespace {

// The walk every root shares: from `o` along `path` (not empty).
const json::value* Walk(const json::object* o, JsonPath path) {
  const json::value* v = nullptr;
  for (std::string_view key : path) {
    if (o == nullptr) return nullptr;
    v = o->if_contains(key);
    if (v == nullptr) return nullptr;
    o = v->if_object();
  }
  return v;
}

}  // namespace

const json::value* JsonAt(const json::value* root, JsonPath path) {
  if (path.size() == 0) return root;
  return Walk(root == nullptr ? nullptr : root->if_object(), path);
}

const json::value* JsonAt(const json::value& root, JsonPath path) { return JsonAt(&root, path); }

const json::value* JsonAt(const json::object& root, JsonPath path) {
  return path.size() == 0 ? nullptr : Walk(&root, path);
}

std::string JsonString(const json::value* v) {
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::optional<std::int64_t> JsonInt(const json::value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() &&
      v->get_uint64() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return static_cast<std::int64_t>(v->get_uint64());
  }
  return std::nullopt;
}

bool JsonTrue(const json::value* v) { return v != nullptr && v->is_bool() && v->get_bool(); }

const json::array* JsonArray(const json::value* v) {
  return v == nullptr ? nullptr : v->if_array();
}

const json::object* JsonObject(const json::value* v) {
  return v == nullptr ? nullptr : v->if_object();
}

}  // namespace sb::bridge
