// SPDX-License-Identifier: Apache-2.0
//
// common/base64.h
//
// Base64 in both alphabets: standard (RFC 4648 section 4, padded; kubeconfig *-data fields,
// AdmissionReview patches) and URL-safe (section 5, unpadded; JWT segments). Decoding is strict:
// characters outside the alphabet, bad padding and non-zero trailing bits are rejected.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sb {

[[nodiscard]] std::string Base64Encode(std::string_view data);
[[nodiscard]] std::string Base64UrlEncode(std::string_view data);  // no padding
// nullopt on malformed input. The standard decoder requires padding; the URL decoder accepts
// input with or without it.
[[nodiscard]] std::optional<std::string> Base64Decode(std::string_view text);
[[nodiscard]] std::optional<std::string> Base64UrlDecode(std::string_view text);

}  // namespace sb
