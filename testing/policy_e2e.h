// SPDX-License-Identifier: Apache-2.0
//
// testing/policy_e2e.h (tests only)
//
// The base of the e2e tests of Slurm's policy (ctest fixture testenv-policy: testenv/up.sh
// --kubelets --nodes 2 --accounting): KubeletE2eBase in an environment whose Slurm keeps accounts
// (slurmdbd), orders jobs by fair share and QOS, and preempts by QOS.
#pragma once

#include <optional>
#include <string>

#include "testing/kubelet_e2e.h"

namespace sb::testing {

class PolicyE2eBase : public KubeletE2eBase {
 protected:
  static void SetUpTestSuite() {
    KubeletE2eBase::SetUpTestSuite();
    if (HasFatalFailure()) return;
    std::string why;
    std::optional<TestEnv> env = TestEnv::Load(&why);
    ASSERT_TRUE(env) << why;
    ASSERT_EQ(env->Get("SB_ACCOUNTING"), "1")
        << "needs Slurm accounting (testenv/up.sh --kubelets --nodes 2 --accounting)";
  }
};

}  // namespace sb::testing
