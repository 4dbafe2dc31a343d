// SPDX-License-Identifier: Apache-2.0
//
// The pod lifecycle on real kubelets: `slurm-bridge all` (scheduler + controllers) against the
// test environment started with `testenv/up.sh --kubelets` (ctest fixture testenv-kubelets),
// where every Slurm node has a kubelet and a containerd of its own. Nothing here plays the
// kubelet: pods run real containers (image localhost/busybox:1, imported at node start) and
// their phases come from the kubelets.
#include <map>
#include <sstream>
#include <string>

#include <boost/json.hpp>

#include "testing/bridge_e2e.h"

namespace sb::controllers {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;

class KubeletE2e : public sb::testing::BridgeE2e {
 protected:
  // Hides BridgeE2e's: the kubelets register the Nodes, no Node objects are faked.
  static void SetUpTestSuite() {
    std::string why;
    std::optional<sb::testing::TestEnv> env = sb::testing::TestEnv::Load(&why);
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

  // A pod for the bridge whose one container runs `script` in busybox and ends by itself.
  void CreateRunningPod(const std::string& name, const std::string& script) {
    std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},
        "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "terminationGracePeriodSeconds":5,
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c",{}],
        "env":[{{"name":"NODE_NAME","valueFrom":{{"fieldRef":{{"fieldPath":"spec.nodeName"}}}}}}],
        "resources":{{"limits":{{"cpu":"100m","memory":"64Mi"}}}}}}]}}}})",
        name, ns_, boost::json::serialize(boost::json::string(script)));
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(r) << r.error().message;
  }

  bool HasEvent(const std::string& pod, const std::string& reason) {
    return std::ranges::any_of(Events(pod),
                               [&](const kube::Event& e) { return e.reason == reason; });
  }

  // The container log of `pod`, through the apiserver and the pod's kubelet.
  std::string Logs(const std::string& pod) {
    return Shell(fmt::format("KUBECONFIG={} kubectl logs -n {} {} 2>/dev/null",
                             env_.Get("KUBECONFIG"), ns_, pod));
  }
};

TEST_F(KubeletE2e, BoundPodRunsToSucceededAndItsJobEnds) {
  scheduler_ = StartBridge("all");
  CreateRunningPod("runs", "echo ran on $NODE_NAME; sleep 2; echo done");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> bound = WaitForPod("runs", IsBound, 60s);
  ASSERT_TRUE(bound) << "not bound";
  const std::int64_t job = JobId(*bound);
  ASSERT_GT(job, 0);
  // Bound where Slurm placed the job.
  auto info = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->nodes, SlurmNames()[bound->spec.node_name]) << bound->spec.node_name;

  // The kubelet runs the container, which ends by itself: the phase comes from the kubelet.
  std::optional<kube::Pod> done = WaitForPod(
      "runs",
      [](const kube::Pod& p) {
        return p.status.phase == "Succeeded" || p.status.phase == "Failed";
      },
      120s);
  ASSERT_TRUE(done) << "the container did not end";
  ASSERT_EQ(done->status.phase, "Succeeded") << done->status.message;
  EXPECT_TRUE(HasEvent("runs", "Started"));  // the kubelet's event: the container really ran
  const std::string logs = Logs("runs");
  EXPECT_NE(logs.find("ran on " + bound->spec.node_name + "\n"), std::string::npos) << logs;
  EXPECT_NE(logs.find("done"), std::string::npos) << logs;

  // The controllers then end its Slurm job and release the pod.
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "runs"));
        if (!p) return p.error().code == ErrorCode::kNotFound;
        return std::ranges::count(p->metadata.finalizers, std::string(bridge::kFinalizer)) == 0;
      },
      30s));
}

}  // namespace
}  // namespace sb::controllers
