// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/internal.h
//
// Small helpers the files of bridge/dra/ share: the error they return, quoting, number and name
// checks, and JSON text to a document. Not for callers outside the folder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/json/value.hpp>

#include "common/error.h"

namespace sb::bridge::dra_internal {

// kInvalidArgument with `message`: every DRA refusal is one.
[[nodiscard]] Error Invalid(std::string message);
// `s` in double quotes, for messages.
[[nodiscard]] std::string Quote(std::string_view s);

// Only ASCII digits, at least one.
[[nodiscard]] bool IsDigits(std::string_view s);
// The whole of `s` as a (signed) integer; nullopt when it is not one or out of range.
[[nodiscard]] std::optional<std::int64_t> ToInt(std::string_view s);
// A DNS label (lower-case letters, digits, '-'; not at either end) of at most `max` characters.
[[nodiscard]] bool IsDnsLabel(std::string_view s, std::size_t max);
// Dot-separated DNS labels of at most 63 characters each, at most `max` in all.
[[nodiscard]] bool IsDnsSubdomain(std::string_view s, std::size_t max);
// A CEL attribute name: a letter, then letters, digits or '_'; at most 32 characters.
[[nodiscard]] bool IsIdentifier(std::string_view s);

// `text` as a JSON document; "" parses as an empty object (an absent spec). kInvalidArgument
// "<what> is not JSON: ..." otherwise.
[[nodiscard]] Result<boost::json::value> ParseJson(std::string_view text, std::string_view what);

}  // namespace sb::bridge::dra_internal
