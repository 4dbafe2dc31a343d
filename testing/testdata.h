// SPDX-License-Identifier: Apache-2.0
//
// testing/testdata.h
//
// Reads a file under testing/testdata/ (the directory is compiled in as SB_TESTDATA_DIR).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace sb::testing {

inline std::string ReadTestData(const std::string& relative) {
  std::ifstream in(std::string(SB_TESTDATA_DIR) + "/" + relative, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sb::testing
