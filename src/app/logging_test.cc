// SPDX-License-Identifier: Apache-2.0
#include "app/logging.h"

#include <memory>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <boost/json.hpp>

namespace sb::app {
namespace {

TEST(JsonEscape, QuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonEscape("plain"), "plain");
  EXPECT_EQ(JsonEscape(R"(say "hi")"), R"(say \"hi\")");
  EXPECT_EQ(JsonEscape(R"(C:\x)"), R"(C:\\x)");
  EXPECT_EQ(JsonEscape("a\nb\tc\rd"), R"(a\nb\tc\rd)");
  EXPECT_EQ(JsonEscape(std::string("\x01\x1f", 2)), R"(\u0001\u001f)");
  EXPECT_EQ(JsonEscape("ünïcode"), "ünïcode");
}

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }
  void TearDown() override {
    ConfigureLogging("info", "text");
    spdlog::set_default_logger(previous_);
  }
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(LoggingTest, JsonLinesParseAndKeepTheMessage) {
  ConfigureLogging("debug", "json");
  spdlog::debug("job {} of \"{}\"\nended", 12, "ns/pod");
  spdlog::trace("not at this level");
  const std::string line = out_.str();
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per record: " << line;
  boost::json::error_code ec;
  boost::json::value v = boost::json::parse(line, ec);
  ASSERT_FALSE(ec) << line;
  EXPECT_EQ(v.at("level").as_string(), "debug");
  EXPECT_EQ(v.at("msg").as_string(), "job 12 of \"ns/pod\"\nended");
  const std::string ts(v.at("ts").as_string());
  ASSERT_EQ(ts.size(), 24u) << ts;  // 2026-11-30T05:13:00.946Z
  EXPECT_EQ(ts[10], 'T');
  EXPECT_EQ(ts.back(), 'Z');
}

TEST_F(LoggingTest, TextIsTheDefaultFormatAndLevelsFilter) {
  ConfigureLogging("warn", "text");
  spdlog::info("hidden");
  spdlog::warn("shown");
  const std::string text = out_.str();
  EXPECT_EQ(text.find("hidden"), std::string::npos);
  EXPECT_NE(text.find("[warning] shown"), std::string::npos) << text;
  EXPECT_NE(text.front(), '{');
}

}  // namespace
}  // namespace sb::app
