// SPDX-License-Identifier: Apache-2.0
//
// testing/kubelet_e2e.h (tests only)
//
// The base of the e2e tests on real kubelets (ctest fixture testenv-kubelets: testenv/up.sh
// --kubelets): BridgeE2e whose Nodes the kubelets register, with the lookups those tests share.
#pragma once

#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "testing/bridge_e2e.h"

namespace sb::testing {

class KubeletE2eBase : public BridgeE2e {
 protected:
  // Hides BridgeE2e's: the kubelets register the Nodes, no Node objects are faked.
  static void SetUpTestSuite() {
    std::string why;
    std::optional<TestEnv> env = TestEnv::Load(&why);
    ASSERT_TRUE(env) << why;
    ASSERT_EQ(env->Get("SB_KUBELETS"), "1")
        << "needs an environment with kubelets (testenv/up.sh --kubelets)";
  }

  // Kubernetes node name -> Slurm node name, from the environment (KUBE_SLURM_NODES).
  std::map<std::string, std::string> SlurmNames() {
    std::map<std::string, std::string> out;
    std::stringstream in(env_.Get("KUBE_SLURM_NODES"));
    std::string pair;
    while (std::getline(in, pair, ',')) {
      auto eq = pair.find('=');
      if (eq != std::string::npos) out[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
    return out;
  }

  static bool IsRunning(const kube::Pod& p) { return p.status.phase == "Running"; }

  // Pod `name` no longer exists (its deletion completed: the kubelet confirmed its containers
  // stopped, or the pod was never bound).
  bool PodGone(const std::string& name) {
    auto p = RunSync(io_, kube::GetPod(*kube_, ns_, name));
    return !p && p.error().code == ErrorCode::kNotFound;
  }
};

}  // namespace sb::testing
