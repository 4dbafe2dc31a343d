// SPDX-License-Identifier: Apache-2.0
//
// testing/testenv.h
//
// Access for e2e tests to the running test environment: the KEY=value file that testenv/up.sh
// wrote, named by $SB_TESTENV (ctest sets it for every e2e test).
#pragma once

#include <map>
#include <optional>
#include <string>

namespace sb::testing {

class TestEnv {
 public:
  // Loads $SB_TESTENV; nullopt (with `why` set) when it is unset or unreadable.
  static std::optional<TestEnv> Load(std::string* why);

  // The value of `key`; "" when absent.
  [[nodiscard]] std::string Get(const std::string& key) const;
  // The contents of the file named by `key` with surrounding whitespace removed.
  [[nodiscard]] std::string ReadFile(const std::string& key) const;
  // The directory of the environment (SB_ENV_DIR).
  [[nodiscard]] std::string dir() const { return Get("SB_ENV_DIR"); }

 private:
  std::map<std::string, std::string> values_;
};

// Runs a shell command, returns its exit status and (optionally) its standard output.
int RunCommand(const std::string& command, std::string* out = nullptr);

}  // namespace sb::testing
