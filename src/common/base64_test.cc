// SPDX-License-Identifier: Apache-2.0
#include "common/base64.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace sb {
namespace {

TEST(Base64, Rfc4648Vectors) {
  struct Case {
    std::string plain, std_text, url_text;
  };
  const std::vector<Case> cases = {
      {"", "", ""},
      {"f", "Zg==", "Zg"},
      {"fo", "Zm8=", "Zm8"},
      {"foo", "Zm9v", "Zm9v"},
      {"foob", "Zm9vYg==", "Zm9vYg"},
      {"fooba", "Zm9vYmE=", "Zm9vYmE"},
      {"foobar", "Zm9vYmFy", "Zm9vYmFy"},
      {"\xfb\xff", "+/8=", "-_8"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.plain);
    EXPECT_EQ(Base64Encode(c.plain), c.std_text);
    EXPECT_EQ(Base64UrlEncode(c.plain), c.url_text);
    EXPECT_EQ(Base64Decode(c.std_text), c.plain);
    EXPECT_EQ(Base64UrlDecode(c.url_text), c.plain);
    EXPECT_EQ(Base64UrlDecode(c.std_text.find_first_of("+/") == std::string::npos ? c.std_text
                                                                                  : c.url_text),
              c.plain);
  }
}

TEST(Base64, RejectsMalformedInput) {
  for (const char* bad : {"Zg", "Zg=", "Z===", "Zm9v!", "Zh==", "-_8=", "A"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(Base64Decode(bad).has_value());
  }
  for (const char* bad : {"Zh", "+/8", "A", "Zm9v*"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(Base64UrlDecode(bad).has_value());
  }
}

}  // namespace
}  // namespace sb
