// SPDX-License-Identifier: Apache-2.0
//
// kube/rate_limit.h
//
// A token bucket for the Kubernetes client's own request rate (config keys clientQPS and
// clientBurst, as upstream's and client-go's): `qps` tokens a second, at most `burst` saved up.
// Pure: the time is an argument.
//
// Example:
//   TokenBucket bucket(50, 100);
//   std::chrono::nanoseconds wait = bucket.Reserve(std::chrono::steady_clock::now());
//   // wait, then send the request
//
// Thread model: not thread-safe; one per client, used on its loop.
#pragma once

#include <chrono>

namespace sb::kube {

class TokenBucket {
 public:
  // qps <= 0: no limit (Reserve always answers 0). burst < 1 counts as 1.
  TokenBucket(double qps, int burst);

  // Takes a token for a request made at `now` and returns how long it must wait first (0 while
  // tokens are left; else until its token is due). Tokens taken ahead are owed: each later
  // request waits for the ones before it, as client-go's limiter does.
  [[nodiscard]] std::chrono::nanoseconds Reserve(std::chrono::steady_clock::time_point now);

  [[nodiscard]] bool limited() const { return qps_ > 0; }

 private:
  double qps_;
  double burst_;
  double tokens_;
  std::chrono::steady_clock::time_point last_{};
  bool started_ = false;
};

}  // namespace sb::kube
