// SPDX-License-Identifier: Apache-2.0
#include "controllers/pod_lifecycle.h"

#include <gtest/gtest.h>

#include "bridge/names.h"

namespace sb::controllers {
namespace {
using namespace std::chrono_literals;

const WallTime kNow = *ParseTime("2026-11-30T12:00:00Z");

kube::Pod MakePod(std::string name, std::string phase, std::string node = "n1") {
  kube::Pod p;
  p.metadata.name = std::move(name);
  p.metadata.namespace_ = "ns";
  p.metadata.finalizers = {std::string(bridge::kFinalizer)};
  p.status.phase = std::move(phase);
  p.spec.node_name = std::move(node);
  return p;
}

kube::Node ReadyNode(std::string name, bool ready = true) {
  kube::Node n;
  n.metadata.name = std::move(name);
  n.conditions.push_back({.type = "Ready", .status = ready ? "True" : "False"});
  return n;
}

TEST(ParseTimeTest, Rfc3339) {
  EXPECT_EQ(ParseTime("1970-01-01T00:01:00Z")->time_since_epoch(), std::chrono::seconds(60));
  EXPECT_EQ(ParseTime("1970-01-01T01:01:00+01:00")->time_since_epoch(), std::chrono::seconds(60));
  EXPECT_EQ(ParseTime("1970-01-01T00:01:00.123456Z")->time_since_epoch(), std::chrono::seconds(60));
  for (const char* bad : {"", "yesterday", "1970-01-01 00:01:00Z", "1970-13-01T00:00:00Z",
                          "1970-01-01T00:00:00", "1970-01-01T00:00:00Zjunk"}) {
    EXPECT_FALSE(ParseTime(bad)) << bad;
  }
}

TEST(JudgePodTest, Matrix) {
  kube::Node ready = ReadyNode("n1");
  kube::Node notready = ReadyNode("n1", false);
  LifecycleOptions o;
  // Running, not deleted: active.
  EXPECT_EQ(JudgePod(MakePod("a", "Running"), &ready, true, kNow, o).state, PodState::kActive);
  // Terminal phases: done.
  EXPECT_EQ(JudgePod(MakePod("a", "Succeeded"), &ready, true, kNow, o).state, PodState::kDone);
  EXPECT_EQ(JudgePod(MakePod("a", "Failed"), &ready, true, kNow, o).state, PodState::kDone);
  // Being deleted, grace period not over: the job stays (upstream #16).
  kube::Pod deleting = MakePod("a", "Running");
  deleting.metadata.deletion_timestamp = "2026-11-30T12:00:30Z";
  PodVerdict v = JudgePod(deleting, &ready, true, kNow, o);
  EXPECT_EQ(v.state, PodState::kWaiting);
  EXPECT_EQ(v.recheck_at, ParseTime("2026-11-30T12:00:30Z"));
  // Grace over, kubelet gone (node deleted or NotReady): done (upstream #49).
  deleting.metadata.deletion_timestamp = "2026-11-30T11:59:00Z";
  EXPECT_EQ(JudgePod(deleting, nullptr, false, kNow, o).state, PodState::kDone);
  EXPECT_EQ(JudgePod(deleting, &notready, true, kNow, o).state, PodState::kDone);
  // Grace over on a Ready node: the kubelet reports the end; stuck long after: done.
  v = JudgePod(deleting, &ready, true, kNow, o);
  EXPECT_EQ(v.state, PodState::kWaiting);
  EXPECT_EQ(v.recheck_at, *ParseTime("2026-11-30T11:59:00Z") + o.stuck_after);
  deleting.metadata.deletion_timestamp = "2026-11-30T11:50:00Z";
  EXPECT_EQ(JudgePod(deleting, &ready, true, kNow, o).state, PodState::kDone);
  // Unbound pod deleted: done once its grace period is over.
  kube::Pod unbound = MakePod("u", "Pending", "");
  unbound.metadata.deletion_timestamp = "2026-11-30T11:59:59Z";
  EXPECT_EQ(JudgePod(unbound, nullptr, false, kNow, o).state, PodState::kDone);
}

TEST(PlanJobTest, EndedJobDeletesBoundRunningPodsOnly) {
  kube::Node n1 = ReadyNode("n1");
  std::map<std::string, const kube::Node*> nodes = {{"n1", &n1}};
  kube::Pod running = MakePod("running", "Running");
  kube::Pod pending = MakePod("pending", "Pending", "");
  kube::Pod done = MakePod("done", "Succeeded");
  for (const char* state : {"CANCELLED", "PREEMPTED", "TIMEOUT", "NODE_FAIL", "GONE"}) {
    JobPlan plan = PlanJob(state, {&running, &pending, &done}, nodes, kNow, {});
    EXPECT_FALSE(plan.cancel_job) << state;
    ASSERT_EQ(plan.delete_pods.size(), 1u) << state;
    EXPECT_EQ(plan.delete_pods[0], &running);
    // Finalizers go from the running (being deleted now) and the done pod; the pending pod
    // keeps it: the scheduler submits a new job for it.
    EXPECT_EQ(plan.release_pods, (std::vector<const kube::Pod*>{&running, &done})) << state;
  }
}

TEST(PlanJobTest, LiveJobCancelledOnlyWhenEveryPodIsDone) {
  kube::Node n1 = ReadyNode("n1");
  std::map<std::string, const kube::Node*> nodes = {{"n1", &n1}};
  kube::Pod a = MakePod("a", "Succeeded");
  kube::Pod b = MakePod("b", "Running");
  JobPlan plan = PlanJob("RUNNING", {&a, &b}, nodes, kNow, {});
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_TRUE(plan.release_pods.empty()) << "the job still holds the done pod";
  EXPECT_TRUE(plan.delete_pods.empty());

  b.status.phase = "Failed";
  plan = PlanJob("RUNNING", {&a, &b}, nodes, kNow, {});
  EXPECT_TRUE(plan.cancel_job);
  EXPECT_NE(plan.cancel_reason.find("a: Succeeded"), std::string::npos) << plan.cancel_reason;
  EXPECT_EQ(plan.release_pods.size(), 2u);

  // A terminating pod within its grace period keeps the job and says when to look again.
  kube::Pod c = MakePod("c", "Running");
  c.metadata.deletion_timestamp = "2026-11-30T12:00:10Z";
  plan = PlanJob("RUNNING", {&a, &c}, nodes, kNow, {});
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_EQ(plan.recheck_at, ParseTime("2026-11-30T12:00:10Z"));
  plan = PlanJob("RUNNING", {&a, &c}, {}, kNow + 11s, {});  // node gone by then
  EXPECT_TRUE(plan.cancel_job);

  // No pods left at all: cancel.
  plan = PlanJob("PENDING", {}, nodes, kNow, {});
  EXPECT_TRUE(plan.cancel_job);
  EXPECT_EQ(plan.cancel_reason, "its pods are gone");
}

}  // namespace
}  // namespace sb::controllers
