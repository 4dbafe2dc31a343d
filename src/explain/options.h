// SPDX-License-Identifier: Apache-2.0
//
// explain/options.h
//
// The options the read-only commands share (explain.h runs the commands; session.h opens their
// clients from these).
#pragma once

#include <string>

namespace sb::explain {

struct ToolOptions {
  std::string config_path;  // the bridge's config.yaml ("" none: the defaults)
  std::string kubeconfig;   // "" : $KUBECONFIG, else in-cluster
  std::string slurm_url;
  std::string slurm_token_file;
  std::string namespace_;  // "" : the kubeconfig context's
  bool all_namespaces = false;
  // `jobs`: also the jobs tagged for the bridge that no pod names (their pods all gone), from a
  // scan of Slurm's whole job list; false: only the jobs the pods name (wiring/bridge_jobs.h).
  bool all_jobs = false;
  std::string output = "text";           // text or json
  std::string command = "slurm-bridge";  // how the user called us, for messages
};

}  // namespace sb::explain
