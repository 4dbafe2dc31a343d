// SPDX-License-Identifier: Apache-2.0
#include "common/error.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sb {
namespace {

TEST(ErrorCodeFromHttpStatus, MapsStatusesCallersBranchOn) {
  struct Case {
    int status;
    ErrorCode want;
  };
  const std::vector<Case> cases = {
      {400, ErrorCode::kInvalidArgument},
      {401, ErrorCode::kUnauthenticated},
      {403, ErrorCode::kPermissionDenied},
      {404, ErrorCode::kNotFound},
      {408, ErrorCode::kDeadlineExceeded},
      {409, ErrorCode::kConflict},
      {410, ErrorCode::kGone},
      {418, ErrorCode::kInvalidArgument},
      {422, ErrorCode::kInvalidArgument},
      {429, ErrorCode::kTooManyRequests},
      {500, ErrorCode::kUnavailable},
      {502, ErrorCode::kUnavailable},
      {503, ErrorCode::kUnavailable},
      {504, ErrorCode::kDeadlineExceeded},
      {511, ErrorCode::kUnauthenticated},
      {200, ErrorCode::kInternal},
      {302, ErrorCode::kInternal},
      {0, ErrorCode::kInternal},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.status);
    EXPECT_EQ(ErrorCodeFromHttpStatus(c.status), c.want);
  }
}

TEST(ErrorCodeName, EveryCodeHasADistinctName) {
  std::set<std::string_view> names;
  for (int i = 0; i <= static_cast<int>(ErrorCode::kInternal); ++i) {
    names.insert(ErrorCodeName(static_cast<ErrorCode>(i)));
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(ErrorCode::kInternal) + 1);
  EXPECT_EQ(ErrorCodeName(ErrorCode::kNotFound), "not_found");
}

TEST(Error, ToStringCarriesCodeMessageAndStatus) {
  EXPECT_EQ((Error{ErrorCode::kNotFound, "job 7 not found", 404}).ToString(),
            "not_found: job 7 not found (HTTP 404)");
  EXPECT_EQ((Error{ErrorCode::kUnavailable, "connection refused", 0}).ToString(),
            "unavailable: connection refused");
}

TEST(Result, MakeErrorBuildsAnUnexpected) {
  Result<int> r = MakeError(ErrorCode::kConflict, "stale", 409);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_EQ(r.error().http_status, 409);
  Result<int> ok = 3;
  EXPECT_EQ(ok.value(), 3);
}

}  // namespace
}  // namespace sb
