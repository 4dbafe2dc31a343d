// SPDX-License-Identifier: Apache-2.0
//
// The controllers end to end: `slurm-bridge all` (scheduler + controllers) as a child process
// against the real daemons; the test plays the kubelet where one is needed (pod phases, node
// readiness).
#include <string>
#include <vector>

#include "common/time_format.h"
#include "controllers/pod/pod_lifecycle.h"
#include "testing/bridge_e2e.h"
#include "testing/paths.h"

namespace sb::controllers {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;

class ControllersE2e : public sb::testing::BridgeE2e {
 protected:
  // Creates pod `name` and waits until it is bound; returns it.
  kube::Pod BoundPod(const std::string& name, const std::string& selector = "") {
    CreatePod(name, R"({"limits":{"cpu":"1","memory":"64Mi"}})",
              R"({"slurmjob.slinky.slurm.net/exclusive":"false"})",
              selector.empty()
                  ? ""
                  : R"(,"nodeSelector":{"kubernetes.io/hostname":")" + selector + "\"}");
    std::optional<kube::Pod> pod = WaitForPod(name, IsBound);
    EXPECT_TRUE(pod) << name << " not bound";
    return pod.value_or(kube::Pod{});
  }

  slurm::JobInfo Job(std::int64_t id) {
    auto j = RunSync(io_, slurm_->GetJob(id));
    EXPECT_TRUE(j) << "reading Slurm job " << id << ": " << j.error().ToString();
    return j ? *j : slurm::JobInfo{};
  }

  // The message of `pod`'s last event with `reason`; "" when none.
  std::string EventMessage(const std::string& pod, const std::string& reason) {
    std::string message;
    for (const kube::Event& e : Events(pod)) {
      if (e.reason == reason) message = e.message;
    }
    return message;
  }

  // Sets node `node`'s Ready condition until the guard goes (then Ready again).
  [[nodiscard]] std::unique_ptr<Restore> NodeNotReady(const std::string& node) {
    SetNodeReady(node, false);
    return std::make_unique<Restore>([this, node] { SetNodeReady(node, true); });
  }

  // Gone, or left only for its kubelet (or the pod garbage collector) to remove: the bridge's
  // finalizer no longer holds it.
  bool Released(const std::string& name) {
    auto p = RunSync(io_, kube::GetPod(*kube_, ns_, name));
    if (!p) return p.error().code == ErrorCode::kNotFound;
    return std::ranges::count(p->metadata.finalizers, std::string(bridge::kFinalizer)) == 0;
  }

  void PatchPodStatus(const std::string& name, const std::string& phase) {
    auto r = RunSync(io_, kube::PatchPodStatus(*kube_, ns_, name, kube::PatchType::kJsonMerge,
                                               R"({"status":{"phase":")" + phase + "\"}}"));
    ASSERT_TRUE(r) << r.error().message;
  }

  // An external job of one CPU with `comment` as admin_comment, submitted straight to Slurm.
  std::int64_t SubmitTagged(const std::string& comment) {
    return SubmitExternal("tag-test", comment);
  }

  void SetNodeReady(const std::string& node, bool ready) {
    std::string patch =
        fmt::format(R"({{"status":{{"conditions":[{{"type":"Ready","status":"{}","reason":"Test",)"
                    R"("message":"set by the e2e test","lastHeartbeatTime":"2026-01-01T00:00:00Z",)"
                    R"("lastTransitionTime":"2026-01-01T00:00:00Z"}}]}}}})",
                    ready ? "True" : "False");
    auto r =
        RunSync(io_, kube::PatchNodeStatus(*kube_, node, kube::PatchType::kStrategicMerge, patch));
    ASSERT_TRUE(r) << r.error().message;
  }
};

TEST_F(ControllersE2e, ScancelDeletesTheBoundPodWithAnEvent) {
  scheduler_ = StartBridge("all");
  kube::Pod pod = BoundPod("victim");
  const std::int64_t job = JobId(pod);
  ASSERT_GT(job, 0);
  Slurm(fmt::format("scancel {}", job));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "victim"));
        if (!p) {
          EXPECT_EQ(p.error().code, ErrorCode::kNotFound) << p.error().ToString();
          return p.error().code == ErrorCode::kNotFound;
        }
        return !p->metadata.deletion_timestamp.empty();
      },
      30s));
  std::string message;
  for (const kube::Event& e : Events("victim")) {
    if (e.reason == "SlurmJobEnded") message = e.message;
  }
  EXPECT_EQ(message.rfind(fmt::format("Slurm job {} ended: CANCELLED", job), 0), 0u) << message;
  // The finalizer is released, so the pod goes once its kubelet (here: nobody) lets it.
  EXPECT_TRUE(WaitFor([&] { return Released("victim"); }, 30s));
}

TEST_F(ControllersE2e, SucceededPodCancelsItsJob) {
  scheduler_ = StartBridge("all");
  kube::Pod pod = BoundPod("worker");
  const std::int64_t job = JobId(pod);
  EXPECT_EQ(JobState(job), "RUNNING");
  PatchPodStatus("worker", "Succeeded");  // the test is the kubelet
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
  ASSERT_TRUE(WaitFor([&] { return Released("worker"); }, 30s));
  bool cancelled_event = false;
  for (const kube::Event& e : Events("worker")) {
    cancelled_event = cancelled_event || e.reason == "SlurmJobCancelled";
  }
  EXPECT_TRUE(cancelled_event);
}

TEST_F(ControllersE2e, DeletedPodKeepsItsJobUntilTheGracePeriodEnds) {
  scheduler_ = StartBridge("all");
  kube::Pod pod = BoundPod("graceful", "n3");
  const std::int64_t job = JobId(pod);
  ASSERT_GT(job, 0);
  // Its kubelet is gone (NotReady): only the grace period decides.
  auto not_ready = NodeNotReady("n3");
  auto d = RunSync(io_, kube::DeletePod(*kube_, ns_, "graceful", {.grace_period_seconds = 6}));
  ASSERT_TRUE(d) << d.error().message;
  auto deleting = RunSync(io_, kube::GetPod(*kube_, ns_, "graceful"));
  ASSERT_TRUE(deleting) << deleting.error().message;
  // deletionTimestamp is the end of the grace period (whole seconds, as the apiserver writes).
  std::optional<WallTime> grace_end = ParseTime(deleting->metadata.deletion_timestamp);
  ASSERT_TRUE(grace_end) << deleting->metadata.deletion_timestamp;
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
  // Slurm's own clock: the job ended no earlier than the grace period (upstream #16 cancelled
  // it at once).
  std::optional<std::int64_t> ended = Job(job).end_time.Value();
  ASSERT_TRUE(ended);
  EXPECT_GE(
      *ended,
      std::chrono::duration_cast<std::chrono::seconds>(grace_end->time_since_epoch()).count());
  std::string why;  // the event follows the cancel
  EXPECT_TRUE(
      WaitFor([&] { return !(why = EventMessage("graceful", "SlurmJobCancelled")).empty(); }, 10s));
  EXPECT_EQ(why.rfind(fmt::format("cancelled Slurm job {}:", job), 0), 0u) << why;
  EXPECT_NE(why.find("node n3 is not Ready"), std::string::npos) << why;
  // The finalizer is released (upstream #49 kept it for ever without a kubelet).
  EXPECT_TRUE(WaitFor([&] { return Released("graceful"); }, 30s));
}

TEST_F(ControllersE2e, NodeDeletedUnderATerminatingPodReleasesTheJob) {
  scheduler_ = StartBridge("all");
  kube::Pod pod = BoundPod("stranded", "n4");
  const std::int64_t job = JobId(pod);
  ASSERT_GT(job, 0);
  auto d = RunSync(io_, kube::DeletePod(*kube_, ns_, "stranded", {.grace_period_seconds = 2}));
  ASSERT_TRUE(d) << d.error().message;
  Restore reregister{[this] {
    Shell(fmt::format("{}/testenv/kube/register-nodes.sh {}/env n4 2>&1", sb::testing::SourceDir(),
                      env_.dir()));
  }};
  auto n = RunSync(io_, kube_->Delete(kube::NodesRef().WithName("n4"), {}));
  ASSERT_TRUE(n) << n.error().message;
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
  std::string why;  // the event follows the cancel
  EXPECT_TRUE(
      WaitFor([&] { return !(why = EventMessage("stranded", "SlurmJobCancelled")).empty(); }, 10s));
  EXPECT_EQ(why.rfind(fmt::format("cancelled Slurm job {}:", job), 0), 0u) << why;
  EXPECT_NE(why.find("node n4 is gone"), std::string::npos) << why;
  EXPECT_TRUE(WaitFor([&] { return Released("stranded"); }, 30s));
}

// #46: the controllers read Slurm's whole job list once, at start-up, and sweep the jobs of this
// bridge they know from it and from their reads since. The orphans are there before they start:
// one whose pod never existed, and one whose pod exists until the test deletes it (a scheduler
// that died between its submit and its label: no label names the job); foreign jobs with the
// same pods in their tags are left alone.
TEST_F(ControllersE2e, OrphanJobIsSweptForeignJobsAreLeftAlone) {
  bridge::JobTag ours{.pods = {ns_ + "/never-existed"},
                      .uids = {"00000000-0000-0000-0000-000000000000"},
                      .group = "Pod/" + ns_ + "/never-existed",
                      .cluster = "kubernetes",
                      .scheduler = "slurm-bridge-scheduler"};
  bridge::JobTag other_cluster = ours;
  other_cluster.cluster = "another-cluster";
  const std::int64_t foreign = SubmitTagged(bridge::EncodeJobTag(other_cluster));
  const std::int64_t upstream = SubmitTagged(R"({"pods":[")" + ns_ + R"(/never-existed"]})");
  const std::int64_t plain = SubmitTagged("");
  ASSERT_TRUE(foreign && upstream && plain);
  Restore cancel_foreign{[&] {
    for (std::int64_t id : {foreign, upstream, plain})
      (void)RunSync(io_, slurm_->CancelJob(id, {}));
  }};
  // No scheduler runs: the pod stays Pending, without a label.
  CreatePod("late", R"({"limits":{"cpu":"1","memory":"64Mi"}})");
  auto late = RunSync(io_, kube::GetPod(*kube_, ns_, "late"));
  ASSERT_TRUE(late) << late.error().message;
  bridge::JobTag late_tag{.pods = {ns_ + "/late"},
                          .uids = {late->metadata.uid},
                          .group = "Pod/" + ns_ + "/late",
                          .cluster = "kubernetes",
                          .scheduler = "slurm-bridge-scheduler"};
  const std::int64_t second = SubmitTagged(bridge::EncodeJobTag(late_tag));
  ASSERT_GT(second, 0);
  // The orphan just before the controllers start: one that ignored the minimum age (5 s here)
  // would cancel it within a sweep or two (every second) of the start-up list.
  const std::int64_t orphan = SubmitTagged(bridge::EncodeJobTag(ours));
  ASSERT_GT(orphan, 0);
  scheduler_ = StartBridge("controllers");
  ASSERT_TRUE(WaitFor([&] { return CountInLog("scheduler", "pod controller started") > 0; }, 30s));
  // One read per check: the job may go from PENDING to RUNNING between two reads.
  std::string orphan_state;
  ASSERT_TRUE(WaitFor(
      [&] {
        orphan_state = JobState(orphan);
        return orphan_state != "RUNNING" && orphan_state != "PENDING";
      },
      60s));
  EXPECT_EQ(orphan_state, "CANCELLED");
  // Slurm's clock: submitted and ended at least the minimum age apart.
  slurm::JobInfo o = Job(orphan);
  ASSERT_TRUE(o.submit_time.Value() && o.end_time.Value());
  EXPECT_GE(*o.end_time.Value() - *o.submit_time.Value(), 5) << "swept younger than 5 s";
  // The log line follows the cancel's reply: Slurm may show CANCELLED a moment before it.
  EXPECT_TRUE(WaitFor(
      [&] {
        return CountInLog("scheduler", fmt::format("cancelled orphan Slurm job {}:", orphan)) == 1;
      },
      10s));
  // The second orphan, cancelled by a later sweep once its pod is gone: known from the start-up
  // list, with no list read since.
  const std::string second_state = JobState(second);
  EXPECT_TRUE(second_state == "RUNNING" || second_state == "PENDING")
      << "its pod exists: " << second_state;
  auto d = RunSync(io_, kube::DeletePod(*kube_, ns_, "late", {.grace_period_seconds = 0}));
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_TRUE(WaitFor([&] { return JobState(second) == "CANCELLED"; }, 60s)) << JobState(second);
  EXPECT_TRUE(WaitFor(
      [&] {
        return CountInLog("scheduler", fmt::format("cancelled orphan Slurm job {}:", second)) == 1;
      },
      10s));
  AssertAlive(*scheduler_, "the controllers");
  for (std::int64_t id : {foreign, upstream, plain}) {
    const std::string s = JobState(id);
    EXPECT_TRUE(s == "RUNNING" || s == "PENDING") << "job " << id << " was touched: " << s;
  }
}

TEST_F(ControllersE2e, OnlyTheLeaderActs) {
  const std::string lease = "e2e-" + ns_;
  std::vector<std::string> le = {"--leader-elect", "--leader-election-namespace", ns_,
                                 "--leader-election-id", lease};
  // An orphan for both to find, once its pod is gone (only the leader may cancel it): a job of
  // this bridge for a pod no label names (its scheduler died before labelling it), there before
  // the controllers start, so that their start-up list knows it (#46: none is read after).
  CreatePod("gone", R"({"limits":{"cpu":"1","memory":"64Mi"}})");
  auto pod = RunSync(io_, kube::GetPod(*kube_, ns_, "gone"));
  ASSERT_TRUE(pod) << pod.error().message;
  bridge::JobTag ours{.pods = {ns_ + "/gone"},
                      .uids = {pod->metadata.uid},
                      .group = "Pod/" + ns_ + "/gone",
                      .cluster = "kubernetes",
                      .scheduler = "slurm-bridge-scheduler"};
  const std::int64_t orphan = SubmitTagged(bridge::EncodeJobTag(ours));
  ASSERT_GT(orphan, 0);
  others_.push_back(StartBridge("controllers", le, "a"));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto l =
            RunSync(io_, kube::GetAs<kube::Lease>(*kube_, kube::LeasesRef(ns_).WithName(lease)));
        return l && l->holder_identity && !l->holder_identity->empty();
      },
      30s));
  others_.push_back(StartBridge("controllers", le, "b"));
  // b is a live standby: it has seen the Lease and who holds it.
  ASSERT_TRUE(WaitFor([&] { return CountInLog("b", "leader: ") >= 1; }, 30s));
  const std::string before = JobState(orphan);
  EXPECT_TRUE(before == "RUNNING" || before == "PENDING") << "its pod exists: " << before;
  auto d = RunSync(io_, kube::DeletePod(*kube_, ns_, "gone", {.grace_period_seconds = 0}));
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_TRUE(WaitFor([&] { return JobState(orphan) == "CANCELLED"; }, 60s));
  AssertAlive(*others_[0], "replica a");
  AssertAlive(*others_[1], "replica b");
  const std::string cancelled = fmt::format("cancelled orphan Slurm job {}", orphan);
  EXPECT_EQ(CountInLog("a", cancelled), 1);
  EXPECT_EQ(CountInLog("b", cancelled), 0);
  EXPECT_EQ(CountInLog("a", "leading ("), 1);
  EXPECT_EQ(CountInLog("b", "leading ("), 0);
}

// `slurm-bridge check --all-jobs` as an operator runs it: a live job of ours whose pod never
// existed is an orphan (no bridge runs here to sweep it); once it is gone, nothing is left to
// report. No pod names that job: only the scan of Slurm's whole list (--all-jobs) finds it;
// plain `check` reads only the jobs the pods name (issue #46) and does not see it.
TEST_F(ControllersE2e, CheckCommandReportsViolations) {
  bridge::JobTag ours{.pods = {ns_ + "/nobody"},
                      .uids = {"22222222-0000-0000-0000-000000000000"},
                      .group = "Pod/" + ns_ + "/nobody",
                      .cluster = "kubernetes",
                      .scheduler = "slurm-bridge-scheduler"};
  const std::int64_t orphan = SubmitTagged(bridge::EncodeJobTag(ours));
  ASSERT_GT(orphan, 0);
  const std::string check =
      fmt::format("SLURM_JWT_FILE={} KUBECONFIG={} {} check --config {} -n {} --settle 0{} 2>&1",
                  env_.Get("SLURM_JWT_FILE"), env_.Get("KUBECONFIG"), sb::testing::BridgeBinary(),
                  config_path_, ns_, " --all-jobs");
  std::string out;
  const std::string plain =
      fmt::format("SLURM_JWT_FILE={} KUBECONFIG={} {} check --config {} -n {} --settle 0 2>&1",
                  env_.Get("SLURM_JWT_FILE"), env_.Get("KUBECONFIG"), sb::testing::BridgeBinary(),
                  config_path_, ns_);
  int rc = sb::testing::RunCommand(plain, &out);
  EXPECT_EQ(rc, 0) << "plain check reads only the jobs pods name: " << out;
  rc = sb::testing::RunCommand(check, &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find(fmt::format("orphan-job: Slurm job {} (group Pod/{}/nobody)", orphan, ns_)),
            std::string::npos)
      << out;
  ASSERT_TRUE(RunSync(io_, slurm_->CancelJob(orphan, {})));
  rc = sb::testing::RunCommand(check, &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("no violations"), std::string::npos) << out;
}

}  // namespace
}  // namespace sb::controllers
