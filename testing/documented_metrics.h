// SPDX-License-Identifier: Apache-2.0
//
// testing/documented_metrics.h
//
// The metrics docs/operations.md's "Health and metrics" table lists, read at run time, so that
// the tests check the table against what is served (metrics_test: the rendering; serve_e2e_test:
// each process's /metrics). The checkout is found at run time (testing/paths.h).
#pragma once

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "testing/paths.h"

namespace sb::testing {

// A metric of docs/operations.md's "Health and metrics" table: its name and its label keys.
struct ListedMetric {
  std::string name;
  std::vector<std::string> labels;
};

// The metrics docs/operations.md's table lists: the rows after the line that starts
// "| metric | what |", up to the first line that is not a table row. A row names one or more
// metrics in backticks; a name that starts with '_' shares the first name's stem
// ("slurm_bridge_jobs_submitted_total", "_adopted_total" -> "slurm_bridge_jobs_adopted_total");
// "{a,b}" gives the label keys.
inline std::vector<ListedMetric> DocumentedMetrics() {
  std::ifstream in(SourceDir() + "/docs/operations.md");
  std::string line;
  bool in_table = false;
  std::vector<ListedMetric> out;
  const std::regex code("`([^`]+)`");
  while (std::getline(in, line)) {
    if (line.starts_with("| metric | what |")) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (!line.starts_with("|")) break;
    if (line.starts_with("|---")) continue;
    const std::string first = line.substr(1, line.find('|', 1) - 1);
    std::string stem;
    for (auto it = std::sregex_iterator(first.begin(), first.end(), code);
         it != std::sregex_iterator(); ++it) {
      std::string text = (*it)[1];
      ListedMetric m;
      if (auto brace = text.find('{'); brace != std::string::npos) {
        std::stringstream keys(text.substr(brace + 1, text.find('}') - brace - 1));
        for (std::string k; std::getline(keys, k, ',');) m.labels.push_back(k);
        text.resize(brace);
      }
      if (text.starts_with("_")) {
        m.name = stem + text;
      } else {
        m.name = text;
        // The stem: the name less as many '_' parts as a suffix in this row has ("_x_total").
        stem = text.substr(0, text.rfind('_'));
        stem = stem.substr(0, stem.rfind('_'));
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace sb::testing
