// SPDX-License-Identifier: Apache-2.0
//
// kube/runtime/time_format.h
//
// The two timestamp formats the Kubernetes API writes: metav1.Time (RFC 3339, whole seconds,
// "2026-01-01T00:00:00Z") and metav1.MicroTime (RFC 3339 with microseconds,
// "2026-01-01T00:00:00.000000Z"). Always UTC.
//
// Thread model: pure functions.
#pragma once

#include <chrono>
#include <string>

namespace sb::kube {

// metav1.Time: "2026-01-01T00:00:00Z" (sub-second part truncated, as the apiserver does).
[[nodiscard]] std::string FormatTime(std::chrono::system_clock::time_point t);
// metav1.MicroTime: "2026-01-01T00:00:00.123456Z".
[[nodiscard]] std::string FormatMicroTime(std::chrono::system_clock::time_point t);

}  // namespace sb::kube
