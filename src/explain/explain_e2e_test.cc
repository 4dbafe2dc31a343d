// SPDX-License-Identifier: Apache-2.0
//
// `kubectl slurm explain|jobs|nodes` on the test environment's real slurmctld, slurmrestd and
// kube-apiserver, run the way a user runs them: kubectl finds build/kubectl-slurm on PATH.
//   - A pod whose job waits behind a higher-priority native job: explain shows Slurm's reason
//     (Priority) and the start time Slurm's planner expects, the same as `scontrol show job`;
//     the pod's PodScheduled message carries both; `jobs` lists the job with its pod.
//   - A PodGroup one pod short of minMember: explain says the gang misses one pod, and that no
//     job is submitted until it comes.
//   - `nodes`: each Kubernetes node beside its Slurm node and state.
#include <filesystem>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "testing/bridge_e2e.h"
#include "testing/paths.h"

namespace sb::testing {
namespace {

using namespace std::chrono_literals;

class ExplainE2e : public BridgeE2e {
 protected:
  // `kubectl slurm <args>` with this build's kubectl-slurm and the environment's kubectl first on
  // PATH; its exit status, and stdout+stderr in `out`.
  int KubectlSlurm(const std::string& args, std::string* out) {
    const std::string bin =
        std::filesystem::path(sb::testing::BridgeBinary()).parent_path().string();
    return RunCommand(fmt::format("PATH={}:{}:$PATH KUBECONFIG={} SLURM_JWT_FILE={} kubectl slurm "
                                  "{} --config {} 2>&1",
                                  bin, env_.Get("KUBE_BIN_DIR"), env_.Get("KUBECONFIG"),
                                  env_.Get("SLURM_JWT_FILE"), args, config_path_),
                      out);
  }
  // explain -o json of pod `name`, parsed (null when it failed).
  boost::json::value ExplainJson(const std::string& name) {
    std::string out;
    const int rc = KubectlSlurm(fmt::format("explain {} -n {} -o json", name, ns_), &out);
    if (rc != 0) {
      ADD_FAILURE() << "kubectl slurm explain exited " << rc << ": " << out;
      return nullptr;
    }
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(out, ec);
    if (ec) ADD_FAILURE() << "not JSON: " << out;
    return ec ? boost::json::value(nullptr) : v;
  }
  // A native batch job (root's) on `nodes` whole nodes with a time limit of `minutes`; its id.
  std::int64_t Sbatch(int nodes, int minutes) {
    return BridgeE2e::Sbatch(
        fmt::format("-p {} -N {} --exclusive -t {} --chdir=/tmp -o /dev/null -J native --wrap "
                    "'sleep 900'",
                    env_.Get("SLURM_PARTITION"), nodes, minutes));
  }
  static std::string Str(const boost::json::value& v, std::initializer_list<const char*> path) {
    const boost::json::value* at = &v;
    for (const char* key : path) {
      if (!at->is_object() || !at->as_object().contains(key)) return "";
      at = &at->as_object().at(key);
    }
    return at->is_string() ? std::string(at->as_string()) : "";
  }
};

int NodeCount(const std::string& hostlist_csv) {
  return static_cast<int>(std::ranges::count(hostlist_csv, ',')) + 1;
}

// The pod's job waits behind a native job of higher priority: explain gives Slurm's reason and
// the expected start of `scontrol show job`.
TEST_F(ExplainE2e, PendingPodShowsSlurmReasonAndExpectedStartAsScontrol) {
  const int nodes = NodeCount(env_.Get("SLURM_NODES"));
  // A runs on every node for at most 5 minutes; B, submitted next (higher priority), wants every
  // node after it; the pod's job comes third and can start only when B ends.
  const std::int64_t a = Sbatch(nodes, 5);
  ASSERT_GT(a, 0);
  ASSERT_TRUE(WaitFor([&] { return JobState(a) == "RUNNING"; }, 30s)) << JobState(a);
  const std::int64_t b = Sbatch(nodes, 5);
  ASSERT_GT(b, 0);
  StartScheduler();
  CreatePod("waiter", R"({"requests":{"cpu":"1"}})",
            R"({"slurmjob.slinky.slurm.net/timelimit":"5"})");
  std::optional<kube::Pod> pod = WaitForPod("waiter", HasJob);
  ASSERT_TRUE(pod) << "the pod got no Slurm job";
  const std::int64_t job = JobId(*pod);

  // Slurm's planner (backfill, every 2 s here) gives the pending job a start time.
  boost::json::value e;
  ASSERT_TRUE(WaitFor(
      [&] {
        e = ExplainJson("waiter");
        return !Str(e, {"slurmJob", "expectedStart"}).empty() &&
               Str(e, {"slurmJob", "reason"}) == "Priority";
      },
      60s))
      << boost::json::serialize(e);
  EXPECT_EQ(e.at("slurmJob").at("id").to_number<std::int64_t>(), job);
  EXPECT_EQ(Str(e, {"slurmJob", "state"}), "PENDING");
  EXPECT_EQ(Str(e, {"slurmJob", "foundBy"}), "label");
  EXPECT_NE(Str(e, {"slurmJob", "reasonWords"}).find("higher priority"), std::string::npos);
  const std::string expected = Str(e, {"slurmJob", "expectedStart"});
  // scontrol's StartTime of the same job, in UTC.
  const std::string sc = Slurm(fmt::format("env TZ=UTC scontrol show job {}", job));
  const auto at = sc.find("StartTime=");
  ASSERT_NE(at, std::string::npos) << sc;
  const std::string scontrol_start = sc.substr(at + 10, sc.find(' ', at) - at - 10);
  EXPECT_EQ(expected, scontrol_start + "Z") << sc;
  const std::string waiting = boost::json::serialize(e.at("waitingFor"));
  EXPECT_NE(waiting.find(fmt::format("Slurm to start job {} (Priority", job)), std::string::npos)
      << waiting;
  EXPECT_NE(waiting.find("expects it to start at " + expected), std::string::npos) << waiting;

  // The text screen says the same.
  std::string text;
  ASSERT_EQ(KubectlSlurm(fmt::format("explain waiter -n {}", ns_), &text), 0) << text;
  EXPECT_NE(text.find(fmt::format("Slurm job  {}  PENDING (Priority)", job)), std::string::npos)
      << text;
  EXPECT_NE(text.find("expected start " + expected), std::string::npos) << text;
  std::cerr << "--- kubectl slurm explain ---\n" << text;

  // The pod itself carries Slurm's reason and the expected start: the first start at the next
  // job list (1 s here); a start that moved since is rewritten at most once a minute.
  std::optional<kube::Pod> told = WaitForPod(
      "waiter",
      [&](const kube::Pod& p) {
        const kube::Condition* c = kube::FindCondition(p.status.conditions, "PodScheduled");
        return c != nullptr &&
               c->message.find("expected to start " + expected) != std::string::npos;
      },
      75s);
  EXPECT_TRUE(told) << "PodScheduled does not carry the expected start";

  // `jobs` lists it with its pod.
  std::string jobs;
  ASSERT_EQ(KubectlSlurm(fmt::format("jobs -n {}", ns_), &jobs), 0) << jobs;
  EXPECT_NE(jobs.find(std::to_string(job)), std::string::npos) << jobs;
  EXPECT_NE(jobs.find("waiter(Pending)"), std::string::npos) << jobs;
}

// A PodGroup one pod short: explain says so, and that no Slurm job exists yet.
TEST_F(ExplainE2e, GangMissingAMemberIsSaid) {
  auto r =
      RunSync(io_, kube_->Create(kube::ResourceRef{.group = "scheduling.x-k8s.io",
                                                   .version = "v1alpha1",
                                                   .resource = "podgroups",
                                                   .namespace_ = ns_},
                                 fmt::format(R"({{"apiVersion":"scheduling.x-k8s.io/v1alpha1",)"
                                             R"("kind":"PodGroup","metadata":{{"name":"pg",)"
                                             R"("namespace":"{}"}},"spec":{{"minMember":3}}}})",
                                             ns_)));
  ASSERT_TRUE(r) << r.error().message;
  StartScheduler();
  for (const char* name : {"pg-0", "pg-1"}) {
    std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",)"
        R"("labels":{{"scheduling.x-k8s.io/pod-group":"pg"}}}},"spec":{{"schedulerName":)"
        R"("slurm-bridge-scheduler","restartPolicy":"Never","containers":[{{"name":"c",)"
        R"("image":"busybox"}}]}}}})",
        name, ns_);
    auto p = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(p) << p.error().message;
  }
  boost::json::value e = ExplainJson("pg-0");
  ASSERT_TRUE(e.is_object());
  EXPECT_EQ(Str(e, {"group", "key"}), fmt::format("PodGroup/{}/pg", ns_));
  EXPECT_EQ(e.at("group").at("size").to_number<int>(), 3);
  EXPECT_EQ(e.at("group").at("members").as_array().size(), 2u);
  EXPECT_TRUE(e.at("slurmJob").is_null());
  const std::string waiting = boost::json::serialize(e.at("waitingFor"));
  EXPECT_NE(waiting.find("the rest of its gang: 2 of 3 pods of PodGroup pg exist, 1 more"),
            std::string::npos)
      << waiting;
  std::string text;
  ASSERT_EQ(KubectlSlurm(fmt::format("explain pg-1 -n {}", ns_), &text), 0) << text;
  EXPECT_NE(text.find("2 of 3 pods"), std::string::npos) << text;
  std::cerr << "--- kubectl slurm explain ---\n" << text;
}

// `nodes`: each Kubernetes node beside its Slurm node and Slurm's state.
TEST_F(ExplainE2e, NodesShowsBothSides) {
  std::string out;
  ASSERT_EQ(KubectlSlurm("nodes -o json", &out), 0) << out;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(out, ec);
  ASSERT_FALSE(ec) << out;
  const std::string nodes = env_.Get("SLURM_NODES");
  std::size_t seen = 0;
  for (const boost::json::value& n : v.at("nodes").as_array()) {
    if (!n.at("slurm").is_object() || !n.at("kubernetes").is_object()) continue;
    EXPECT_FALSE(Str(n, {"slurm", "state"}).empty()) << boost::json::serialize(n);
    ++seen;
  }
  EXPECT_EQ(seen, static_cast<std::size_t>(NodeCount(nodes))) << out;
  std::string text;
  ASSERT_EQ(KubectlSlurm("nodes", &text), 0) << text;
  EXPECT_NE(text.find("SLURM-NODE"), std::string::npos) << text;
}

}  // namespace
}  // namespace sb::testing
