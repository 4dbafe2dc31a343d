// SPDX-License-Identifier: Apache-2.0
//
// The node Epilog (`slurm-bridge epilog`) on real kubelets: the environment of the fixture
// testenv-kubelets runs it as every slurmd's Epilog (testenv/up.sh with SB_EPILOG_BINARY). With
// batch placeholders (placeholder: batch), a job Slurm ends itself (scancel) stays COMPLETING,
// its node's GPU still allocated, until the pod's containers have stopped and the pod is gone;
// a native job's epilog returns at once.
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <boost/json.hpp>

#include "testing/kubelet_e2e.h"

namespace sb::controllers {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using Clock = std::chrono::steady_clock;

class EpilogE2e : public sb::testing::KubeletE2eBase {
 protected:
  static void SetUpTestSuite() {
    KubeletE2eBase::SetUpTestSuite();
    std::string why;
    std::optional<sb::testing::TestEnv> env = sb::testing::TestEnv::Load(&why);
    ASSERT_TRUE(env) << why;
    ASSERT_EQ(env->Get("SB_EPILOG"), "1")
        << "needs an environment whose slurmd run the Epilog (testenv/up.sh with "
           "SB_EPILOG_BINARY set)";
  }

  // Slurm's job record (REST), nullopt when Slurm no longer knows it.
  std::optional<slurm::JobInfo> Job(std::int64_t id) {
    auto j = RunSync(io_, slurm_->GetJob(id));
    if (j) return *j;
    return std::nullopt;
  }
  bool Completing(std::int64_t id) {
    std::optional<slurm::JobInfo> j = Job(id);
    return j && j->HasState("COMPLETING");
  }
  // `scontrol show job` of a job submitted with sbatch: its JobState word ("PENDING").
  std::string SbatchState(const std::string& id) {
    const std::string out = Slurm("scontrol show job " + id);
    auto at = out.find("JobState=");
    if (at == std::string::npos) return "NOTFOUND";
    at += 9;
    return out.substr(at, out.find_first_of(" \n", at) - at);
  }
  // The GRES node `node` has in use ("gpu:fake:1(IDX:0)").
  std::string GresUsed(const std::string& node) {
    const std::string out = Slurm("scontrol show node -d " + node);
    auto at = out.find("GresUsed=");
    if (at == std::string::npos) return "";
    at += 9;
    return out.substr(at, out.find_first_of(" \n", at) - at);
  }
  // Slurm(cmd)'s output without its trailing newline (sbatch --parsable: the job id).
  std::string TrimmedSlurm(const std::string& cmd) {
    std::string out = Slurm(cmd);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    EXPECT_TRUE(!out.empty() && out.find_first_not_of("0123456789") == std::string::npos)
        << cmd << ": " << out;
    return out.find_first_not_of("0123456789") == std::string::npos ? out : "";
  }
  std::string EpilogLog(const std::string& node) {
    std::ifstream in(env_.Get("SB_EPILOG_LOG_DIR") + "/epilog-" + node + ".log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

// scancel of a running batch placeholder whose pod takes ~20 s to stop (preStop `sleep 20`):
// Slurm keeps the job COMPLETING with the GPU allocated, and a job wanting all 4 GPUs of the
// node pends, until the pod is gone; then the job ends and the other job runs.
TEST_F(EpilogE2e, ScancelHoldsTheNodeUntilThePodIsGone) {
  AddConfig("placeholder: batch\n");
  scheduler_ = StartBridge("all");
  const std::string script = "trap 'exit 0' TERM; sleep 600 & wait";
  const std::string manifest = fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"gpu","namespace":"{}",
      "annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},
      "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "terminationGracePeriodSeconds":60,
      "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
      "command":["sh","-c",{}],
      "lifecycle":{{"preStop":{{"exec":{{"command":["sh","-c","sleep 20"]}}}}}},
      "resources":{{"limits":{{"cpu":"100m","memory":"64Mi","nvidia.com/gpu":"1"}}}}}}]}}}})",
      ns_, boost::json::serialize(boost::json::string(script)));
  auto created = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
  ASSERT_TRUE(created) << created.error().message;
  std::optional<kube::Pod> running =
      WaitForPod("gpu", [](const kube::Pod& p) { return p.status.phase == "Running"; }, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  ASSERT_GT(job, 0);
  const std::string node = SlurmNames()[running->spec.node_name];
  ASSERT_FALSE(node.empty()) << running->spec.node_name;
  std::optional<slurm::JobInfo> info = Job(job);
  ASSERT_TRUE(info);
  EXPECT_TRUE(std::ranges::find(info->flags, "EXTERNAL_JOB") == info->flags.end())
      << "a batch placeholder expected";
  EXPECT_NE(GresUsed(node).find("gpu:fake:1"), std::string::npos) << GresUsed(node);

  Slurm(fmt::format("scancel {}", job));
  // The controllers delete the pod; its container runs the preStop hook for 20 s.
  ASSERT_TRUE(WaitForPod(
      "gpu", [](const kube::Pod& p) { return !p.metadata.deletion_timestamp.empty(); }, 30s))
      << "the pod was not deleted";
  const auto deleted_at = Clock::now();
  // A job for every GPU of that node.
  const std::string other =
      TrimmedSlurm(fmt::format("sbatch --parsable -p {} -w {} --gres=gpu:4 -n 1 --chdir=/tmp "
                               "-o /dev/null --wrap 'sleep 3'",
                               env_.Get("SLURM_PARTITION"), node));
  ASSERT_FALSE(other.empty());
  cleanup_.push_back("scancel " + other);
  // While the pod's container still runs: COMPLETING, GPU allocated, the other job pending.
  int checks = 0;
  while (Clock::now() - deleted_at < 12s && !PodGone("gpu")) {
    EXPECT_TRUE(Completing(job)) << "job " << job << " left COMPLETING while its pod remains";
    // Measured (Slurm 26.05): the node's AllocTRES and GresUsed are already empty, but the node
    // is COMPLETING (State=IDLE+COMPLETING), the job still lists its GPU, and slurmctld starts
    // no job on the node: the other job pends with Reason=Resources.
    EXPECT_NE(Slurm("scontrol show node " + node).find("COMPLETING"), std::string::npos);
    EXPECT_NE(Slurm(fmt::format("scontrol show job -d {}", job)).find("JOB_GRES=gpu:fake:1"),
              std::string::npos);
    EXPECT_EQ(SbatchState(other), "PENDING");
    ++checks;
    std::this_thread::sleep_for(1s);
  }
  // The hold lasted the 12 s watched (the preStop hook takes 20), whatever the number of
  // rounds a loaded machine managed in them.
  EXPECT_FALSE(PodGone("gpu")) << "the pod went too early to see the hold";
  EXPECT_GE(checks, 3) << "too few looks at the hold";
  const std::string log = EpilogLog(node);
  EXPECT_NE(log.find(fmt::format("job {} on {}: waiting for pod(s) {}/gpu", job, node, ns_)),
            std::string::npos)
      << log;
  // Then the pod goes, the epilog returns, the job ends and the other job runs.
  ASSERT_TRUE(WaitFor([&] { return PodGone("gpu"); }, 60s)) << "the pod did not go";
  const auto gone_at = Clock::now();
  EXPECT_TRUE(WaitFor([&] { return !Completing(job); }, 15s)) << "still COMPLETING";
  EXPECT_TRUE(WaitFor([&] { return SbatchState(other) != "PENDING"; }, 30s)) << SbatchState(other);
  std::cerr << "held " << std::chrono::duration<double>(gone_at - deleted_at).count()
            << " s after the pod's deletion; epilog log:\n"
            << EpilogLog(node);
  EXPECT_NE(EpilogLog(node).find(fmt::format("job {} on {}: the job's pods on this node are gone "
                                             "or finished",
                                             job, node)),
            std::string::npos);
}

// A native job (no pod lists it): its epilog returns after one LIST, the job ends at once.
TEST_F(EpilogE2e, NativeJobsEpilogReturnsAtOnce) {
  const std::string node = "n1";
  const auto start = Clock::now();
  const std::string id = TrimmedSlurm(
      fmt::format("sbatch --parsable -p {} -w {} -n 1 --chdir=/tmp -o /dev/null --wrap true",
                  env_.Get("SLURM_PARTITION"), node));
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string s = SbatchState(id);
        return s == "COMPLETED" || s == "NOTFOUND";
      },
      10s))
      << SbatchState(id);
  EXPECT_FALSE(WaitFor([&] { return Completing(std::stoll(id)); }, 0ms));
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(took, 5.0);
  EXPECT_NE(EpilogLog(node).find(fmt::format("job {} on {}: no pod lists the job", id, node)),
            std::string::npos)
      << EpilogLog(node);
}

}  // namespace
}  // namespace sb::controllers
