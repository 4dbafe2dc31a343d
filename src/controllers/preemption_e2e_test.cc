// SPDX-License-Identifier: Apache-2.0
//
// Slurm's preemption, both ways, on real kubelets and a Slurm with accounting (ctest fixture
// testenv-policy: testenv/up.sh --kubelets --nodes 2 --accounting; PreemptType=preempt/qos).
// Each test makes a pair of QOS, a low one and a high one that may preempt it (PreemptMode
// CANCEL or REQUEUE on the low one), and removes them at the end.
//   - Slurm over pods: a native sbatch job in the high QOS takes the node of a running pod in
//     the low one. CANCEL: the pod's job ends PREEMPTED; the pod gets DisruptionTarget and a
//     SlurmJobPreempted event and is gone within its grace period, a PodDisruptionBudget
//     notwithstanding (Slurm has already taken the node; the budget guards evictions, and the
//     bridge deletes). REQUEUE: the same Slurm job goes back to the queue; the Job's new pod is
//     bound to it, job id unchanged, when Slurm starts it again.
//   - Pods over Slurm: a pod in the high QOS preempts a native job of the low one on a full
//     cluster and is bound.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "bridge/names.h"
#include "common/time_format.h"
#include "controllers/pod/pod_lifecycle.h"
#include "kube/codec.h"
#include "testing/policy_e2e.h"

namespace sb::controllers {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;

class PreemptionE2e : public sb::testing::PolicyE2eBase {
 protected:
  // QOS `low` (PreemptMode `mode` for its jobs) and `high` (may preempt `low`), both open to
  // the users the jobs run as; removed after the test's jobs.
  void MakeQos(const std::string& low, const std::string& high, const std::string& mode) {
    const std::string users = "root,slurm,k8s";
    // sacctmgr answers on stdout what it did; only its errors (stderr) are kept.
    Slurm(fmt::format("sacctmgr -i add qos {},{} >/dev/null", low, high));
    EXPECT_EQ(Slurm(fmt::format(
                  "sacctmgr -i modify qos {} set PreemptMode={} Priority=0 >/dev/null", low, mode)),
              "");
    EXPECT_EQ(Slurm(fmt::format("sacctmgr -i modify qos {} set Preempt={} Priority=1000 >/dev/null",
                                high, low)),
              "");
    EXPECT_EQ(Slurm(fmt::format("sacctmgr -i modify user where name={} set qos+={},{} >/dev/null",
                                users, low, high)),
              "");
    const std::string shown = Slurm(
        fmt::format("sacctmgr -n -P show qos {},{} format=Name,Preempt,PreemptMode", low, high));
    EXPECT_NE(shown.find(high + "|" + low + "|"), std::string::npos) << shown;
    cleanup_.push_back(fmt::format(
        "sacctmgr -i modify user where name={} set qos-={},{} >/dev/null", users, low, high));
    cleanup_.push_back(fmt::format("sacctmgr -i delete qos {},{} >/dev/null", low, high));
  }

  // The namespace may choose any QOS (identityPolicy); the jobs run as the token's user.
  void AllowQos() {
    AddConfig(fmt::format("identityPolicy:\n- namespaces: [{}]\n  qos: [\"*\"]\n", ns_));
  }

  // A native batch job (root's, not the bridge's) on Slurm node `node` (all of it) in `qos`; its
  // id (a test failure and 0 when Slurm refused it). Cancelled after the test.
  std::int64_t Sbatch(const std::string& qos, const std::string& node) {
    return sb::testing::BridgeE2e::Sbatch(fmt::format(
        "--qos={} -w {} --exclusive --chdir=/tmp -o /dev/null -J native --wrap 'sleep 600'", qos,
        node));
  }

  // The manifest of a container that sleeps, ignoring SIGTERM (busybox sleep as PID 1), so that
  // it ends at its grace period of 5 s.
  static std::string SleeperSpec() {
    return R"("schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "terminationGracePeriodSeconds":5,
      "containers":[{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
      "command":["sleep","600"],"resources":{"limits":{"cpu":"100m","memory":"64Mi"}}}])";
  }

  void CreateSleeper(const std::string& name, const std::string& qos) {
    const std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "labels":{{"app":"{}"}},"annotations":{{"slurmjob.slinky.slurm.net/qos":"{}"}}}},
        "spec":{{{}}}}})",
        name, ns_, name, qos, SleeperSpec());
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(r) << r.error().message;
  }

  static const kube::Condition* Disruption(const kube::Pod& p) {
    return kube::FindCondition(p.status.conditions, "DisruptionTarget");
  }

  std::string SlurmNodeOf(const kube::Pod& p) {
    std::map<std::string, std::string> names = SlurmNames();
    auto it = names.find(p.spec.node_name);
    return it == names.end() ? p.spec.node_name : it->second;
  }
};

// CANCEL: a native job of the high QOS preempts a running pod's job; the pod is marked
// DisruptionTarget, told so in an event, and gone within its grace period, although a
// PodDisruptionBudget protects it; the native job then runs on the node.
TEST_F(PreemptionE2e, SlurmJobPreemptsARunningPodWhichIsGoneWithinItsGracePeriod) {
  MakeQos("pc-low", "pc-high", "cancel");
  AllowQos();
  scheduler_ = StartBridge("all");
  CreateSleeper("victim", "pc-low");
  const std::string pdb = fmt::format(
      R"({{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{{"name":"keep","namespace":"{}"}},
      "spec":{{"minAvailable":1,"selector":{{"matchLabels":{{"app":"victim"}}}}}}}})",
      ns_);
  kube::ResourceRef pdbs{
      .group = "policy", .version = "v1", .resource = "poddisruptionbudgets", .namespace_ = ns_};
  auto made = RunSync(io_, kube_->Create(pdbs, pdb));
  ASSERT_TRUE(made || made.error().code == ErrorCode::kAlreadyExists) << made.error().message;
  std::optional<kube::Pod> running = WaitForPod("victim", IsRunning, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  ASSERT_GT(job, 0);
  const std::string node = SlurmNodeOf(*running);
  EXPECT_NE(Slurm(fmt::format("scontrol show job -o {}", job)).find("QOS=pc-low"),
            std::string::npos);

  const std::int64_t native = Sbatch("pc-high", node);
  ASSERT_GT(native, 0);
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "PREEMPTED"; }, 30s)) << JobState(job);
  const auto preempted_at = std::chrono::steady_clock::now();
  // The condition comes before the deletion: seen while the pod still terminates.
  std::optional<kube::Pod> marked =
      WaitForPod("victim", [](const kube::Pod& p) { return Disruption(p) != nullptr; }, 20s);
  ASSERT_TRUE(marked) << "no DisruptionTarget condition (or the pod is gone already)";
  const kube::Condition* c = Disruption(*marked);
  EXPECT_EQ(c->status, "True");
  EXPECT_EQ(c->reason, "PreemptionByScheduler");
  EXPECT_NE(c->message.find(fmt::format("Slurm preempted job {}", job)), std::string::npos)
      << c->message;
  const std::string msg = WaitForEvent("victim", "SlurmJobPreempted");
  EXPECT_NE(msg.find(fmt::format("Slurm preempted job {} (PREEMPTED", job)), std::string::npos)
      << msg;
  // Gone within its grace period (5 s), and the time the kubelet and the watch take.
  ASSERT_TRUE(WaitFor([&] { return PodGone("victim"); }, 30s)) << "the preempted pod stays";
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::steady_clock::now() - preempted_at);
  EXPECT_LE(took.count(), 20) << "the pod took " << took.count() << " s to go";
  std::cout << "the preempted pod was gone " << took.count()
            << " s after Slurm preempted its job\n";
  // The native job has the node (once the Epilog has seen the pod go).
  EXPECT_TRUE(WaitFor([&] { return JobState(native) == "RUNNING"; }, 60s)) << JobState(native);
  EXPECT_NE(Slurm(fmt::format("squeue -h -j {} -o %N", native)).find(node), std::string::npos);
}

// REQUEUE: the preempted job goes back to Slurm's queue with its id; the pod goes (as above),
// its gang Job makes a new one, and the scheduler binds the new pod to the same Slurm job when
// Slurm starts it again (Slurm holds a requeued batch job about 2 minutes: BeginTime). A Job
// without the gang annotation is a group per pod: its new pod is another group and gets a job
// of its own.
TEST_F(PreemptionE2e, RequeuedJobKeepsItsIdAndTheJobsNewPodIsBoundToIt) {
  MakeQos("pr-low", "pr-high", "requeue");
  AllowQos();
  AddConfig("jobMode: batch\n");  // Slurm requeues batch jobs only
  scheduler_ = StartBridge("all");
  const std::string manifest = fmt::format(
      R"({{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"work","namespace":"{}",
      "annotations":{{"slurmjob.slinky.slurm.net/gang":"true","slurmjob.slinky.slurm.net/qos":"pr-low"}}}},
      "spec":{{"parallelism":1,"completions":1,"backoffLimit":3,"template":{{
      "spec":{{{}}}}}}}}})",
      ns_, SleeperSpec());
  auto created = RunSync(io_, kube_->Create(kube::JobsRef(ns_), manifest));
  ASSERT_TRUE(created) << created.error().message;
  std::optional<kube::Pod> first;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (kube::Pod& p : Pods()) {
          if (IsRunning(p)) first = p;
        }
        return first.has_value();
      },
      120s))
      << "the Job's pod does not run";
  const std::int64_t job = JobId(*first);
  ASSERT_GT(job, 0);
  const std::string node = SlurmNodeOf(*first);

  const std::int64_t native = Sbatch("pr-high", node);
  ASSERT_GT(native, 0);
  const std::string msg = WaitForEvent(first->metadata.name, "SlurmJobPreempted", 60s);
  ASSERT_FALSE(msg.empty()) << "no SlurmJobPreempted event; job " << job << " is " << JobState(job);
  EXPECT_NE(msg.find(fmt::format("Slurm preempted job {} and requeued it", job)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("keeps its id"), std::string::npos) << msg;
  ASSERT_TRUE(WaitFor([&] { return PodGone(first->metadata.name); }, 30s));
  // The Job's new pod is given the requeued job, which names it now (while Slurm holds the job
  // back, SchedulerParameters requeue_delay: 5 s here, 120 s by default).
  std::optional<kube::Pod> waiting;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (kube::Pod& p : Pods()) {
          if (p.metadata.name != first->metadata.name && JobId(p) == job) waiting = p;
        }
        return waiting.has_value();
      },
      60s))
      << "the Job's new pod is not given the requeued job " << job;
  // Slurm's hold cut short where it is longer (what it delays is Slurm's, not the bridge's).
  if (JobState(job) == "PENDING") Slurm(fmt::format("scontrol update jobid={} starttime=now", job));
  // The Job's new pod runs in the same Slurm job, started again by Slurm (on another node: the
  // native job holds the first).
  std::optional<kube::Pod> second;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (kube::Pod& p : Pods()) {
          if (p.metadata.name != first->metadata.name && IsRunning(p)) second = p;
        }
        return second.has_value();
      },
      120s))
      << "the Job's new pod does not run; job " << job << " is " << JobState(job) << ": "
      << Slurm(fmt::format("scontrol show job -o {}", job));
  EXPECT_EQ(JobId(*second), job) << "the new pod got another Slurm job";
  EXPECT_EQ(JobState(job), "RUNNING");
  EXPECT_NE(SlurmNodeOf(*second), node);
  const std::string show = Slurm(fmt::format("scontrol show job -o {}", job));
  EXPECT_NE(show.find("Restarts=1"), std::string::npos) << show;
  // Its tag names the new pod: the controllers hold the job for it.
  const std::string uid_in_tag = "\"" + second->metadata.uid + "\"";
  auto info = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(info);
  EXPECT_NE(info->admin_comment.find(uid_in_tag), std::string::npos) << info->admin_comment;
  EXPECT_EQ(JobState(native), "RUNNING");
}

// Pods over Slurm: every node is full of native jobs of the low QOS; a pod of the high QOS
// preempts one of them and is bound to its node.
TEST_F(PreemptionE2e, PodInAHigherQosPreemptsANativeJob) {
  MakeQos("pp-low", "pp-high", "cancel");
  AllowQos();
  std::vector<std::int64_t> natives;
  std::stringstream nodes(env_.Get("SLURM_NODES"));
  for (std::string n; std::getline(nodes, n, ',');) {
    natives.push_back(Sbatch("pp-low", n));
    ASSERT_GT(natives.back(), 0);
  }
  for (std::int64_t id : natives) {
    ASSERT_TRUE(WaitFor([&] { return JobState(id) == "RUNNING"; }, 30s)) << id;
  }
  scheduler_ = StartBridge("all");
  CreateSleeper("urgent", "pp-high");
  std::optional<kube::Pod> running = WaitForPod("urgent", IsRunning, 120s);
  ASSERT_TRUE(running) << "the pod of the high QOS does not run: "
                       << Slurm("squeue -h -o '%i %q %T %r %N'");
  int preempted = 0;
  for (std::int64_t id : natives) {
    const std::string s = JobState(id);
    if (s == "PREEMPTED") ++preempted;
  }
  EXPECT_EQ(preempted, 1) << Slurm("squeue -h -t all -o '%i %q %T %r %N'");
  const std::int64_t job = JobId(*running);
  EXPECT_NE(Slurm(fmt::format("scontrol show job -o {}", job)).find("QOS=pp-high"),
            std::string::npos);
}

// Test audit T-1, issue #44: how long the preempted pod's container runs on beside the native
// job that preempted it, for each placeholder mode. The victim ignores SIGTERM, so it runs out
// its 5 s grace period. A watch of the pod (kubectl get -w) records the container's finishedAt
// as the kubelet reports it; Slurm's StartTime of the native job is the other end (both whole
// seconds). Batch placeholders: the node's Epilog (slurm-bridge epilog) holds the node until the
// pod is gone, so the native job starts only after the container stopped: no overlap, asserted.
// External placeholders: slurmd runs no Epilog for an EXTERNAL_JOB, so the native job starts as
// soon as Slurm preempted the pod's job, while the container still runs: the overlap is printed
// (and expected, not asserted: it is the reason batch is the safe mode).
class PreemptionOverlapE2e : public PreemptionE2e,
                             public ::testing::WithParamInterface<std::string> {};

TEST_P(PreemptionOverlapE2e, PreemptedContainerStopsBeforeTheNativeJobStartsInBatchMode) {
  const std::string mode = GetParam();
  const std::string low = "po-low-" + mode;
  const std::string high = "po-high-" + mode;
  MakeQos(low, high, "cancel");
  AllowQos();
  AddConfig("jobMode: " + mode + "\n");
  scheduler_ = StartBridge("all");
  CreateSleeper("victim", low);
  std::optional<kube::Pod> running = WaitForPod("victim", IsRunning, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  ASSERT_GT(job, 0);
  const std::string node = SlurmNodeOf(*running);
  // Every status the pod goes through, one line each: the container's finishedAt once it has one.
  const std::string watch_out = fmt::format("{}/victim-watch-{}.txt", env_.dir(), mode);
  Shell(fmt::format(
      "KUBECONFIG={} timeout 180 kubectl get pod -n {} victim -w -o "
      "jsonpath='{{.status.containerStatuses[0].state.terminated.finishedAt}}{{\"\\n\"}}' "
      ">{} 2>&1 &",
      env_.Get("KUBECONFIG"), ns_, watch_out));
  const std::int64_t native = Sbatch(high, node);
  ASSERT_GT(native, 0);
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "PREEMPTED"; }, 30s)) << JobState(job);
  ASSERT_TRUE(WaitFor([&] { return PodGone("victim"); }, 60s)) << "the preempted pod stays";
  ASSERT_TRUE(WaitFor([&] { return JobState(native) == "RUNNING"; }, 120s)) << JobState(native);
  std::string started =
      Slurm(fmt::format("env SLURM_TIME_FORMAT=%s squeue -h -j {} -o %S", native));
  while (!started.empty() && std::isspace(static_cast<unsigned char>(started.back()))) {
    started.pop_back();
  }
  const std::int64_t native_start = std::atoll(started.c_str());
  ASSERT_GT(native_start, 0) << started;
  std::string finished;  // the last finishedAt the watch saw
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(watch_out);
        for (std::string line; std::getline(in, line);) {
          if (!line.empty()) finished = line;
        }
        return !finished.empty();
      },
      10s))
      << "the watch saw no finishedAt";
  const std::optional<WallTime> end = ParseTime(finished);
  ASSERT_TRUE(end) << finished;
  const std::int64_t container_end =
      std::chrono::duration_cast<std::chrono::seconds>(end->time_since_epoch()).count();
  const std::int64_t overlap = container_end - native_start;
  std::cout << "preemption overlap, placeholder " << mode << ": the native job started at "
            << native_start << ", the victim's container stopped at " << container_end
            << ": overlap " << std::max<std::int64_t>(overlap, 0) << " s (" << overlap << " s)\n";
  if (mode == "batch") {
    EXPECT_LE(overlap, 0) << "the native job started " << overlap
                          << " s before the preempted container stopped";
  }
}

INSTANTIATE_TEST_SUITE_P(Placeholder, PreemptionOverlapE2e,
                         ::testing::Values(std::string("batch"), std::string("external")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace sb::controllers
