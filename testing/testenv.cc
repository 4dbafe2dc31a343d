// SPDX-License-Identifier: Apache-2.0
#include "testing/testenv.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/strings.h"

namespace sb::testing {

std::optional<TestEnv> TestEnv::Load(std::string* why) {
  const char* path = std::getenv("SB_TESTENV");
  if (path == nullptr || *path == '\0') {
    *why = "SB_TESTENV is not set: run e2e tests through ctest (label e2e)";
    return std::nullopt;
  }
  std::ifstream in(path);
  if (!in) {
    *why = std::string("cannot read ") + path;
    return std::nullopt;
  }
  TestEnv env;
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos || line.starts_with("#")) {
      continue;
    }
    env.values_[line.substr(0, eq)] = line.substr(eq + 1);
  }
  // The environment's own kubectl (the apiserver's version) before any other on PATH, for the
  // tests that run kubectl as a user would.
  if (std::string bin = env.Get("KUBE_BIN_DIR"); !bin.empty()) {
    const char* search = std::getenv("PATH");
    std::string want = bin + ":" + (search != nullptr ? search : "/usr/bin:/bin");
    if (search == nullptr || !std::string_view(search).starts_with(bin + ":")) {
      setenv("PATH", want.c_str(), 1);
    }
  }
  return env;
}

std::string TestEnv::Get(const std::string& key) const {
  auto it = values_.find(key);
  return it == values_.end() ? std::string() : it->second;
}

std::string TestEnv::ReadFile(const std::string& key) const {
  std::ifstream in(Get(key));
  std::stringstream ss;
  ss << in.rdbuf();
  return TrimWhitespace(ss.str());
}

int RunCommand(const std::string& command, std::string* out) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) {
    return -1;
  }
  std::array<char, 4096> buf{};
  std::string text;
  std::size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) {
    text.append(buf.data(), n);
  }
  int status = pclose(p);
  if (out != nullptr) {
    *out = std::move(text);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace sb::testing
