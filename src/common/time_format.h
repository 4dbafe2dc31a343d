// SPDX-License-Identifier: Apache-2.0
//
// common/time_format.h
//
// The two timestamp formats the Kubernetes API writes: metav1.Time (RFC 3339, whole seconds,
// "2026-01-01T00:00:00Z") and metav1.MicroTime (RFC 3339 with microseconds,
// "2026-01-01T00:00:00.000000Z"), always written in UTC; and the one parser of RFC 3339 times
// the project reads them with (deletionTimestamp, lastTransitionTime, creationTimestamp).
//
// Thread model: pure functions.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace sb {

// metav1.Time: "2026-01-01T00:00:00Z" (sub-second part truncated, as the apiserver does).
[[nodiscard]] std::string FormatTime(std::chrono::system_clock::time_point t);
// metav1.MicroTime: "2026-01-01T00:00:00.123456Z".
[[nodiscard]] std::string FormatMicroTime(std::chrono::system_clock::time_point t);

// An RFC 3339 date-time: "2026-01-01T00:00:00Z", with or without a fraction of a second (read
// and dropped: whole seconds, as metav1.Time keeps them), with "Z", "z" or a numeric offset
// ("+01:00"). nullopt when it is anything else: another layout, trailing text, a field out of
// range (month 13, hour 24; second 60, a leap second, is accepted and counts as the next
// minute's first).
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> ParseTime(
    std::string_view rfc3339);

}  // namespace sb
