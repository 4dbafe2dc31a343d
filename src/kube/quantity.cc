// SPDX-License-Identifier: Apache-2.0
#include "kube/quantity.h"

#include <limits>
#include <string>

namespace sb::kube {
namespace {

__extension__ typedef __int128 Int128;  // NOLINT: GCC extension, kept out of headers

Result<std::int64_t> Bad(std::string_view text, const char* why) {
  return MakeError(ErrorCode::kInvalidArgument,
                   "quantity \"" + std::string(text) + "\": " + std::string(why));
}

}  // namespace

Result<std::int64_t> ParseQuantityScaled(std::string_view text, int scale) {
  std::string_view s = text;
  if (s.empty()) {
    return Bad(text, "empty");
  }
  bool negative = false;
  if (s.front() == '+' || s.front() == '-') {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  // Mantissa: digits [. digits]. Significant digits are kept in `mant` (at most 20, so that
  // mant * 2^60 fits in 128 bits), the decimal
  // exponent of the last kept digit in `exp10`.
  Int128 mant = 0;
  int exp10 = 0;
  int kept = 0;
  bool dropped_nonzero = false;  // digits beyond what fits, for rounding
  bool any_digit = false;
  bool in_fraction = false;
  std::size_t i = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (in_fraction) {
        return Bad(text, "two decimal points");
      }
      in_fraction = true;
      continue;
    }
    if (c < '0' || c > '9') {
      break;
    }
    any_digit = true;
    if (kept < 20) {
      mant = mant * 10 + (c - '0');
      if (mant != 0) {
        ++kept;
      }
      if (in_fraction) {
        --exp10;
      }
    } else {
      if (c != '0') {
        dropped_nonzero = true;
      }
      if (!in_fraction) {
        ++exp10;
      }
    }
  }
  if (!any_digit) {
    return Bad(text, "no digits");
  }
  std::string_view suffix = s.substr(i);
  int binary_shift = 0;
  if (suffix.empty()) {
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    switch (suffix[0]) {
      case 'K':
        binary_shift = 10;
        break;
      case 'M':
        binary_shift = 20;
        break;
      case 'G':
        binary_shift = 30;
        break;
      case 'T':
        binary_shift = 40;
        break;
      case 'P':
        binary_shift = 50;
        break;
      case 'E':
        binary_shift = 60;
        break;
      default:
        return Bad(text, "unknown suffix");
    }
  } else if (suffix.size() == 1 && suffix != "e") {
    switch (suffix[0]) {
      case 'n':
        exp10 -= 9;
        break;
      case 'u':
        exp10 -= 6;
        break;
      case 'm':
        exp10 -= 3;
        break;
      case 'k':
        exp10 += 3;
        break;
      case 'M':
        exp10 += 6;
        break;
      case 'G':
        exp10 += 9;
        break;
      case 'T':
        exp10 += 12;
        break;
      case 'P':
        exp10 += 15;
        break;
      case 'E':
        exp10 += 18;
        break;
      default:
        return Bad(text, "unknown suffix");
    }
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    std::string_view e = suffix.substr(1);
    bool eneg = false;
    if (!e.empty() && (e.front() == '+' || e.front() == '-')) {
      eneg = e.front() == '-';
      e.remove_prefix(1);
    }
    if (e.empty() || e.size() > 4) {
      return Bad(text, "bad exponent");
    }
    int ev = 0;
    for (char c : e) {
      if (c < '0' || c > '9') {
        return Bad(text, "bad exponent");
      }
      ev = ev * 10 + (c - '0');
    }
    exp10 += eneg ? -ev : ev;
  } else {
    return Bad(text, "unknown suffix");
  }
  exp10 += scale;

  const Int128 limit = static_cast<Int128>(std::numeric_limits<std::int64_t>::max());
  Int128 value = mant;
  bool inexact = dropped_nonzero;
  if (value != 0) {
    // Apply 2^binary_shift first (exact), then the power of ten.
    value <<= binary_shift;
    while (exp10 > 0) {
      // Checked before multiplying: 20 digits shifted by Ei are close to 2^127 already.
      if (value > limit / 10) {
        return Bad(text, "out of range");
      }
      value *= 10;
      --exp10;
    }
    while (exp10 < 0) {
      if (value == 0) {
        break;
      }
      if (value % 10 != 0) {
        inexact = true;
      }
      value /= 10;
      ++exp10;
    }
  }
  if (inexact) {
    value += 1;  // away from zero
  }
  if (value > limit) {
    return Bad(text, "out of range");
  }
  auto out = static_cast<std::int64_t>(value);
  return negative ? -out : out;
}

Result<std::int64_t> ParseQuantityValue(std::string_view text) {
  return ParseQuantityScaled(text, 0);
}

Result<std::int64_t> ParseQuantityMilli(std::string_view text) {
  return ParseQuantityScaled(text, 3);
}

}  // namespace sb::kube
