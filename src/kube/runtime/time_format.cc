// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/time_format.h"

#include <cstdio>
#include <ctime>

namespace sb::kube {
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

}  // namespace sb::kube
