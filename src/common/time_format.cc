// SPDX-License-Identifier: Apache-2.0
#include "common/time_format.h"

#include <cstdio>
#include <ctime>

namespace sb {
namespace {

// Floor division, so times before 1970 still split into a valid second and a non-negative
// fraction.
std::chrono::microseconds::rep FloorMicros(std::chrono::system_clock::time_point t,
                                           std::time_t* seconds) {
  const auto us = std::chrono::floor<std::chrono::microseconds>(t.time_since_epoch()).count();
  auto s = us / 1000000;
  auto frac = us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    --s;
  }
  *seconds = static_cast<std::time_t>(s);
  return frac;
}

std::string Format(std::chrono::system_clock::time_point t, bool micro) {
  std::time_t seconds = 0;
  const auto frac = FloorMicros(t, &seconds);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  int n = 0;
  if (micro) {
    n = std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                      static_cast<long long>(frac));
  } else {
    n = std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  if (n < 0) {
    return {};
  }
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

std::string FormatTime(std::chrono::system_clock::time_point t) { return Format(t, false); }

std::string FormatMicroTime(std::chrono::system_clock::time_point t) { return Format(t, true); }

std::optional<std::chrono::system_clock::time_point> ParseTime(std::string_view text) {
  if (text.size() < 20) return std::nullopt;
  std::string s(text);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0, used = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &used) != 6 ||
      used != 19) {
    return std::nullopt;
  }
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  }
  long offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
    int oh = 0, om = 0;
    if (std::sscanf(s.c_str() + i + 1, "%2d:%2d", &oh, &om) != 2) return std::nullopt;
    offset = (s[i] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size() || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  const std::time_t t = ::timegm(&tm) - offset;
  return std::chrono::system_clock::from_time_t(t);
}

}  // namespace sb
