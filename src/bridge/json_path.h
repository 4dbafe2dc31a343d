// SPDX-License-Identifier: Apache-2.0
//
// bridge/json_path.h
//
// Reading a parsed Boost.JSON document by path, never throwing: the one set of helpers for the
// code that reads objects the typed decoders (kube/codec.h) do not hold — a CRD's or a DRA
// object's spec, an AdmissionReview. A path is a list of object keys, outermost first. A value
// that is absent, or not of the type asked for, reads as absent ("", nullopt, nullptr, false):
// the callers treat a wrong type as a missing field, as the apiserver's own defaulting would.
//
// Three kinds of root: a value pointer (nullptr reads as absent, so lookups chain), a value, or
// an object (an AdmissionReview's parts are held as objects).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

namespace sb::bridge {

using JsonPath = std::initializer_list<std::string_view>;

// The value at `path` under the root; nullptr when a key is absent or a value on the way is not
// an object. An empty path gives the root itself (a value root only).
[[nodiscard]] const boost::json::value* JsonAt(const boost::json::value* root, JsonPath path);
[[nodiscard]] const boost::json::value* JsonAt(const boost::json::value& root, JsonPath path);
[[nodiscard]] const boost::json::value* JsonAt(const boost::json::object& root, JsonPath path);

// One value, typed: a string ("" otherwise); an integer that fits int64 (a uint64 above
// INT64_MAX does not); true only for the boolean true; an array or an object (nullptr otherwise).
[[nodiscard]] std::string JsonString(const boost::json::value* v);
[[nodiscard]] std::optional<std::int64_t> JsonInt(const boost::json::value* v);
[[nodiscard]] bool JsonTrue(const boost::json::value* v);
[[nodiscard]] const boost::json::array* JsonArray(const boost::json::value* v);
[[nodiscard]] const boost::json::object* JsonObject(const boost::json::value* v);

// The typed value at `path`: JsonAt, then the typed read above.
template <typename Root>
[[nodiscard]] std::string StringAt(const Root& root, JsonPath path) {
  return JsonString(JsonAt(root, path));
}
template <typename Root>
[[nodiscard]] std::optional<std::int64_t> IntAt(const Root& root, JsonPath path) {
  return JsonInt(JsonAt(root, path));
}
template <typename Root>
[[nodiscard]] bool BoolAt(const Root& root, JsonPath path) {
  return JsonTrue(JsonAt(root, path));
}
template <typename Root>
[[nodiscard]] const boost::json::array* ArrayAt(const Root& root, JsonPath path) {
  return JsonArray(JsonAt(root, path));
}
template <typename Root>
[[nodiscard]] const boost::json::object* ObjectAt(const Root& root, JsonPath path) {
  return JsonObject(JsonAt(root, path));
}

}  // namespace sb::bridge
