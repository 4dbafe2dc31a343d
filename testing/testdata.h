// SPDX-License-Identifier: Apache-2.0
//
// testing/testdata.h
//
// Reads a file under testing/testdata/ (found at run time: testing/paths.h).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "testing/paths.h"

namespace sb::testing {

inline std::string ReadTestData(const std::string& relative) {
  std::ifstream in(sb::testing::TestdataDir() + "/" + relative, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sb::testing
