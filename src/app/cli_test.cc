// SPDX-License-Identifier: Apache-2.0
#include "app/cli.h"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/version.h"

namespace sb::app {
namespace {

struct Outcome {
  int status;
  std::string out;
  std::string err;
};

Outcome Invoke(std::vector<const char*> args) {
  args.insert(args.begin(), "slurm-bridge");
  std::ostringstream out;
  std::ostringstream err;
  int status = RunCli(static_cast<int>(args.size()), args.data(), out, err);
  return {status, out.str(), err.str()};
}

TEST(RunCli, VersionSubcommandAndFlagPrintTheVersion) {
  const std::string want = std::string("slurm-bridge ") + kVersion + "\n";
  for (const auto& args : {std::vector<const char*>{"version"}, {"--version"}}) {
    Outcome o = Invoke(args);
    EXPECT_EQ(o.status, 0);
    EXPECT_EQ(o.out, want);
    EXPECT_EQ(o.err, "");
  }
}

TEST(RunCli, UsageErrorsExitWithTwoAndSayWhy) {
  struct Case {
    std::string name;
    std::vector<const char*> args;
    std::string want_in_err;
  };
  const std::vector<Case> cases = {
      {"no subcommand", {}, "subcommand"},
      {"unknown subcommand", {"frobnicate"}, "frobnicate"},
      {"unknown flag", {"version", "--bogus"}, "--bogus"},
      {"unknown log format", {"admission", "--log-format", "xml"}, "--log-format"},
      {"unknown log level", {"scheduler", "--log-level", "loud"}, "--log-level"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Outcome o = Invoke(c.args);
    EXPECT_EQ(o.status, 2);
    EXPECT_NE(o.err.find(c.want_in_err), std::string::npos) << o.err;
    EXPECT_EQ(o.out, "");
  }
}

TEST(RunCli, HelpListsSubcommands) {
  Outcome o = Invoke({"--help"});
  EXPECT_EQ(o.status, 0);
  EXPECT_NE(o.out.find("version"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace sb::app
