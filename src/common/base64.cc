// SPDX-License-Identifier: Apache-2.0
#include "common/base64.h"

#include <array>
#include <cstdint>

namespace sb {
namespace {

constexpr std::string_view kStd =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kUrl =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string Encode(std::string_view data, std::string_view alphabet, bool pad) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto byte = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(data[k]));
  };
  for (; i + 3 <= data.size(); i += 3) {
    std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += alphabet[v >> 18 & 63];
    out += alphabet[v >> 12 & 63];
    out += alphabet[v >> 6 & 63];
    out += alphabet[v & 63];
  }
  std::size_t rest = data.size() - i;
  if (rest == 1) {
    std::uint32_t v = byte(i) << 16;
    out += alphabet[v >> 18 & 63];
    out += alphabet[v >> 12 & 63];
    if (pad) {
      out += "==";
    }
  } else if (rest == 2) {
    std::uint32_t v = byte(i) << 16 | byte(i + 1) << 8;
    out += alphabet[v >> 18 & 63];
    out += alphabet[v >> 12 & 63];
    out += alphabet[v >> 6 & 63];
    if (pad) {
      out += '=';
    }
  }
  return out;
}

std::optional<std::string> Decode(std::string_view text, std::string_view alphabet,
                                  bool require_pad) {
  std::array<int, 256> rev{};
  rev.fill(-1);
  for (std::size_t k = 0; k < alphabet.size(); ++k) {
    rev[static_cast<unsigned char>(alphabet[k])] = static_cast<int>(k);
  }
  std::size_t padding = 0;
  while (!text.empty() && text.back() == '=' && padding < 2) {
    text.remove_suffix(1);
    ++padding;
  }
  if (require_pad ? (text.size() + padding) % 4 != 0
                  : (padding > 0 && (text.size() + padding) % 4 != 0)) {
    return std::nullopt;
  }
  if (text.size() % 4 == 1) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = rev[static_cast<unsigned char>(c)];
    if (v < 0) {
      return std::nullopt;
    }
    acc = acc << 6 | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(acc >> bits & 0xFF);
    }
  }
  if ((acc & ((1u << bits) - 1)) != 0) {  // leftover bits must be zero (canonical encoding)
    return std::nullopt;
  }
  return out;
}

}  // namespace

std::string Base64Encode(std::string_view data) { return Encode(data, kStd, true); }
std::string Base64UrlEncode(std::string_view data) { return Encode(data, kUrl, false); }
std::optional<std::string> Base64Decode(std::string_view text) { return Decode(text, kStd, true); }
std::optional<std::string> Base64UrlDecode(std::string_view text) {
  return Decode(text, kUrl, false);
}

}  // namespace sb
