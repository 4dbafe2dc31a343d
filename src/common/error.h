// SPDX-License-Identifier: Apache-2.0
//
// common/error.h
//
// The project's one error type and `Result<T>`. Expected failures (a 404 from the apiserver, a
// refused Slurm submit, a malformed annotation) are values, never exceptions; callers branch on
// `code`. `message` is for humans and never contains a credential.
//
// Thread model: plain values.
//
// Example:
//   Result<Pod> pod = client.GetPod("ns", "name");
//   if (!pod && pod.error().code == ErrorCode::kNotFound) { ... }
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace sb {

enum class ErrorCode {
  kInvalidArgument,     // the request or the input is malformed; retrying will not help
  kNotFound,            // the object does not exist
  kAlreadyExists,       // create of an object that exists
  kConflict,            // optimistic-concurrency conflict: re-read and retry
  kGone,                // resource version too old: relist
  kTooManyRequests,     // throttled: retry after the server's delay
  kUnavailable,         // connect failure, reset, 5xx: retry with backoff
  kDeadlineExceeded,    // timed out
  kUnauthenticated,     // missing or rejected credentials
  kPermissionDenied,    // authenticated but not allowed
  kCancelled,           // the caller stopped the operation
  kFailedPrecondition,  // the object is not in a state that allows this (a job no longer pending)
  kUnimplemented,       // the server or API version does not offer this operation
  kInternal,            // a bug or an impossible reply
};

// Stable lower-case name of `code`, for logs and metrics labels ("not_found").
[[nodiscard]] std::string_view ErrorCodeName(ErrorCode code);

// The code a bare HTTP status maps to. 2xx and 1xx map to kInternal: they are not errors, and a
// caller that asks has a bug. Unknown 4xx map to kInvalidArgument, unknown 5xx to kUnavailable.
[[nodiscard]] ErrorCode ErrorCodeFromHttpStatus(int status);

// One error reported by the server inside its reply: Slurm's `errors[]` entries
// (error_number, error, description, source), or a Kubernetes Status cause.
struct ErrorDetail {
  int number = 0;           // Slurm's error_number; 0 when none
  std::string error;        // Slurm's `error` ("Invalid job id specified"), or a cause type
  std::string description;  // what the server says it was doing
  std::string source;       // the server function that failed ("slurm_submit_batch_job()")
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // for humans; never contains a token
  int http_status = 0;  // 0 when the error did not come from an HTTP reply
  std::string reason;   // machine-readable reason from the server (a Kubernetes Status reason)
  std::vector<ErrorDetail> details;  // what the server listed, in its order

  // "not_found: pods \"x\" not found (HTTP 404)".
  [[nodiscard]] std::string ToString() const;
  // The message with the server's details it does not already say, for pods and logs
  // ("Invalid job id specified; Unable to submit").
  [[nodiscard]] std::string Words() const;
};

template <typename T>
using Result = tl::expected<T, Error>;

// Shorthand for returning an error from a function that returns Result<T>.
[[nodiscard]] inline tl::unexpected<Error> MakeError(ErrorCode code, std::string message,
                                                     int http_status = 0) {
  return tl::unexpected<Error>(Error{code, std::move(message), http_status});
}

}  // namespace sb
