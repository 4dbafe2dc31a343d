// SPDX-License-Identifier: Apache-2.0
#include "kube/rate_limit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sb::kube {

TokenBucket::TokenBucket(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)) {}

std::chrono::nanoseconds TokenBucket::Reserve(std::chrono::steady_clock::time_point now) {
  if (qps_ <= 0) return std::chrono::nanoseconds(0);
  if (started_ && now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  }
  if (!started_ || now > last_) last_ = now;
  started_ = true;
  tokens_ -= 1;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::ceil(-tokens_ / qps_ * 1e9)));
}

}  // namespace sb::kube
