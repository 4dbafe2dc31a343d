// SPDX-License-Identifier: Apache-2.0
//
// testing/paths.h
//
// Where the tests find the checkout and this build, looked up at run time. They were compiled
// in once (-DSB_SOURCE_DIR="/abs/path"), which made every test object differ between two clones
// of the same sources, so ccache could share none of them and a fresh clone compiled the tests
// again (about 15 minutes of CPU on CI's two cores).
//
// The build directory: SB_BUILD_DIR, else the nearest directory above the running executable
// that holds a CMakeCache.txt (every test and benchmark binary lives under its build directory).
// The checkout: SB_SOURCE_DIR, else that cache's CMAKE_HOME_DIRECTORY.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace sb::testing {

namespace paths_detail {

inline std::filesystem::path FindBuildDir() {
  if (const char* env = std::getenv("SB_BUILD_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("testing/paths.h: cannot read /proc/self/exe: " + ec.message());
  for (auto dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (std::filesystem::exists(dir / "CMakeCache.txt")) return dir;
    if (dir == dir.root_path()) break;
  }
  throw std::runtime_error("testing/paths.h: no CMakeCache.txt above " + exe.string() +
                           "; set SB_BUILD_DIR to the build directory");
}

inline std::string FindSourceDir() {
  if (const char* env = std::getenv("SB_SOURCE_DIR"); env != nullptr && *env != '\0') return env;
  const auto cache = FindBuildDir() / "CMakeCache.txt";
  std::ifstream in(cache);
  constexpr std::string_view kKey = "CMAKE_HOME_DIRECTORY:INTERNAL=";
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(kKey)) return line.substr(kKey.size());
  }
  throw std::runtime_error("testing/paths.h: " + cache.string() +
                           " names no CMAKE_HOME_DIRECTORY; set SB_SOURCE_DIR to the checkout");
}

}  // namespace paths_detail

// This build's directory (holds CMakeCache.txt and the slurm-bridge binary).
inline const std::string& BuildDir() {
  static const std::string dir = paths_detail::FindBuildDir().string();
  return dir;
}

// The checkout: testenv/, docs/, testing/testdata/.
inline const std::string& SourceDir() {
  static const std::string dir = paths_detail::FindSourceDir();
  return dir;
}

// This build's slurm-bridge binary.
inline const std::string& BridgeBinary() {
  static const std::string path = BuildDir() + "/slurm-bridge";
  return path;
}

// testing/testdata/ of the checkout.
inline const std::string& TestdataDir() {
  static const std::string dir = SourceDir() + "/testing/testdata";
  return dir;
}

}  // namespace sb::testing
