// SPDX-License-Identifier: Apache-2.0
#include "common/error.h"

#include <string>

namespace sb {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kAlreadyExists:
      return "already_exists";
    case ErrorCode::kConflict:
      return "conflict";
    case ErrorCode::kGone:
      return "gone";
    case ErrorCode::kTooManyRequests:
      return "too_many_requests";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case ErrorCode::kUnauthenticated:
      return "unauthenticated";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kFailedPrecondition:
      return "failed_precondition";
    case ErrorCode::kUnimplemented:
      return "unimplemented";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

ErrorCode ErrorCodeFromHttpStatus(int status) {
  switch (status) {
    case 400:
    case 422:
      return ErrorCode::kInvalidArgument;
    case 401:
    case 511:  // slurmrestd answers 511 for a rejected JWT
      return ErrorCode::kUnauthenticated;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 408:
    case 504:
      return ErrorCode::kDeadlineExceeded;
    case 409:
      return ErrorCode::kConflict;
    case 410:
      return ErrorCode::kGone;
    case 429:
      return ErrorCode::kTooManyRequests;
    default:
      break;
  }
  if (status >= 400 && status < 500) {
    return ErrorCode::kInvalidArgument;
  }
  if (status >= 500 && status < 600) {
    return ErrorCode::kUnavailable;
  }
  return ErrorCode::kInternal;
}

std::string Error::ToString() const {
  std::string out(ErrorCodeName(code));
  out += ": ";
  out += message;
  if (http_status != 0) {
    out += " (HTTP " + std::to_string(http_status) + ")";
  }
  return out;
}

std::string Error::Words() const {
  std::string words = message;
  for (const ErrorDetail& d : details) {
    if (!d.error.empty() && words.find(d.error) == std::string::npos) words += "; " + d.error;
  }
  return words;
}

}  // namespace sb
