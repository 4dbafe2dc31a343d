// SPDX-License-Identifier: Apache-2.0
#include "slurm/token_source.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/base64.h"

namespace sb::slurm {
namespace {

class TempFile {
 public:
  TempFile()
      : path_("/tmp/sb-token-test-" + std::to_string(getpid()) + "-" + std::to_string(n_++)) {}
  ~TempFile() { std::remove(path_.c_str()); }
  void Write(const std::string& text) const {
    // Write to a new file and rename over, as kubelet does for projected secrets.
    std::string tmp = path_ + ".new";
    std::ofstream(tmp, std::ios::binary) << text;
    std::rename(tmp.c_str(), path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  static inline int n_ = 0;
  std::string path_;
};

TEST(FileTokenSource, StripsWhitespaceAndThePrefix) {
  struct Case {
    std::string file, want;
  };
  for (const Case& c : std::vector<Case>{{"abc.def.ghi", "abc.def.ghi"},
                                         {"  abc.def.ghi\n", "abc.def.ghi"},
                                         {"SLURM_JWT=abc.def.ghi\n", "abc.def.ghi"},
                                         {"\tSLURM_JWT= abc\r\n", "abc"}}) {
    SCOPED_TRACE(c.file);
    TempFile f;
    f.Write(c.file);
    auto src = MakeFileTokenSource(f.path());
    Result<std::string> t = src->Token();
    ASSERT_TRUE(t.has_value()) << t.error().ToString();
    EXPECT_EQ(*t, c.want);
  }
}

TEST(FileTokenSource, EmptyOrMissingFileIsUnauthenticatedWithoutLeakingContent) {
  TempFile f;
  f.Write("SLURM_JWT=\n");
  auto src = MakeFileTokenSource(f.path());
  Result<std::string> t = src->Token();
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code, ErrorCode::kUnauthenticated);
  EXPECT_NE(t.error().message.find("empty"), std::string::npos);
  auto missing = MakeFileTokenSource("/nonexistent/token");
  ASSERT_FALSE(missing->Token().has_value());
  EXPECT_EQ(missing->Token().error().code, ErrorCode::kUnauthenticated);
}

TEST(FileTokenSource, PicksUpARotatedToken) {
  TempFile f;
  f.Write("first-token");
  auto src = MakeFileTokenSource(f.path());
  EXPECT_EQ(src->Token().value(), "first-token");
  f.Write("second-token-longer");
  EXPECT_EQ(src->Token().value(), "second-token-longer");
  f.Write("third-token-longer!");  // same size, new inode through rename
  EXPECT_EQ(src->Token().value(), "third-token-longer!");
}

TEST(SignHs256Jwt, MatchesAKnownVector) {
  // The widely published HS256 example (header {"alg":"HS256","typ":"JWT"}).
  EXPECT_EQ(SignHs256Jwt(R"({"sub":"1234567890","name":"John Doe","iat":1516239022})",
                         "your-256-bit-secret"),
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
            "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
            "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c");
}

TEST(Hs256TokenSource, MintsForTheUserAndRenewsAtHalfLife) {
  TempFile key;
  key.Write("0123456789abcdef0123456789abcdef");
  std::chrono::system_clock::time_point now{std::chrono::seconds(1'800'000'000)};
  auto src =
      MakeHs256TokenSource(key.path(), "slurm", std::chrono::seconds(600), [&] { return now; });
  ASSERT_TRUE(src.has_value()) << src.error().ToString();
  std::string t1 = (*src)->Token().value();
  std::string payload = t1.substr(t1.find('.') + 1);
  payload = payload.substr(0, payload.find('.'));
  EXPECT_EQ(Base64UrlDecode(payload).value(),
            R"({"exp":1800000600,"iat":1800000000,"sun":"slurm"})");
  now += std::chrono::seconds(299);
  EXPECT_EQ((*src)->Token().value(), t1);
  now += std::chrono::seconds(2);
  EXPECT_NE((*src)->Token().value(), t1);
  EXPECT_FALSE(MakeHs256TokenSource("/nonexistent", "slurm", std::chrono::seconds(60)));
}

}  // namespace
}  // namespace sb::slurm
