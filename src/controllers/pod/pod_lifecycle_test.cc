// SPDX-License-Identifier: Apache-2.0
#include "controllers/pod/pod_lifecycle.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "bridge/names.h"
#include "bridge/tag.h"
#include "common/time_format.h"

namespace sb::controllers {
namespace {
using namespace std::chrono_literals;

const WallTime kNow = *ParseTime("2026-11-30T12:00:00Z");

kube::Pod MakePod(std::string name, std::string phase, std::string node = "n1") {
  kube::Pod p;
  p.metadata.name = std::move(name);
  p.metadata.namespace_ = "ns";
  p.metadata.uid = "uid-" + p.metadata.name;
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

const Owner kOwner{"kubernetes", "slurm-bridge-scheduler"};

// The tag this bridge's scheduler writes for `pods`.
bridge::JobTag OurTag(const std::vector<const kube::Pod*>& pods) {
  bridge::JobTag t{
      .group = "Job/ns/g", .cluster = kOwner.cluster, .scheduler = kOwner.scheduler, .ours = true};
  for (const kube::Pod* p : pods) {
    t.pods.push_back(p->metadata.namespace_ + "/" + p->metadata.name);
    t.uids.push_back(p->metadata.uid);
  }
  return t;
}

// PlanJob for job 7 in `state`, tagged by this bridge for all of `pods`.
JobPlan Plan(std::string_view state, const std::vector<const kube::Pod*>& pods,
             const std::map<std::string, const kube::Node*>& nodes, WallTime now) {
  JobFacts facts{.state = std::string(state), .tag = OurTag(pods)};
  return PlanJob(7, facts, kOwner, pods, nodes, now, {});
}

std::vector<const kube::Pod*> Deleted(const JobPlan& plan) {
  std::vector<const kube::Pod*> out;
  for (const PodDeletion& d : plan.delete_pods) out.push_back(d.pod);
  return out;
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
  for (const char* state : {"CANCELLED", "PREEMPTED", "TIMEOUT", "NODE_FAIL"}) {
    JobPlan plan = Plan(state, {&running, &pending, &done}, nodes, kNow);
    EXPECT_FALSE(plan.cancel_job) << state;
    ASSERT_EQ(plan.delete_pods.size(), 1u) << state;
    EXPECT_EQ(plan.delete_pods[0].pod, &running);
    const PodDeletion& d = plan.delete_pods[0];
    if (std::string_view(state) == "PREEMPTED") {
      // Slurm gave the nodes to another job: a disruption, as Kubernetes' own preemption is.
      EXPECT_EQ(d.reason, "SlurmJobPreempted");
      EXPECT_EQ(d.disruption, "PreemptionByScheduler");
      EXPECT_NE(d.message.find("Slurm preempted job 7 (PREEMPTED)"), std::string::npos)
          << d.message;
    } else {
      EXPECT_EQ(d.reason, "SlurmJobEnded") << state;
      EXPECT_EQ(d.disruption, "") << state;
    }
    if (std::string_view(state) == "TIMEOUT") {
      EXPECT_NE(d.message.find("Slurm job 7 reached its time limit (TIMEOUT)"), std::string::npos)
          << d.message;
    }
    // Finalizers go from the running (being deleted now) and the done pod; the pending pod
    // keeps it: the scheduler submits a new job for it.
    EXPECT_EQ(plan.release_pods, (std::vector<const kube::Pod*>{&running, &done})) << state;
  }
}

// R-5: `kubectl delete --grace-period=86400` before the job ends: at its end the pod is deleted
// again with the cap (the apiserver shortens a grace period, never lengthens it), or it would run
// on after the node epilog released the node.
TEST(PlanJobTest, EndedJobCutsATerminatingMembersGracePeriodToTheCap) {
  kube::Node n1 = ReadyNode("n1");
  std::map<std::string, const kube::Node*> nodes = {{"n1", &n1}};
  // Deleted 60 s ago with a day's grace period.
  auto terminating = [](std::string name, std::int64_t grace, std::string node = "n1") {
    kube::Pod p = MakePod(std::move(name), "Running", std::move(node));
    p.metadata.deletion_grace_period_seconds = grace;
    p.metadata.deletion_timestamp = FormatTime(kNow - 60s + std::chrono::seconds(grace));
    return p;
  };
  kube::Pod day = terminating("day", 86400);
  kube::Pod short_grace = terminating("short", 200);  // within the cap
  kube::Pod unbound = terminating("unbound", 86400, "");
  kube::Pod over = terminating("over", 30);  // grace period over, kubelet still at it
  LifecycleOptions o;
  o.max_termination_grace_seconds = 300;
  auto plan = [&](std::string_view state, const LifecycleOptions& options) {
    std::vector<const kube::Pod*> pods = {&day, &short_grace, &unbound, &over};
    JobFacts facts{.state = std::string(state), .tag = OurTag(pods)};
    return PlanJob(7, facts, kOwner, pods, nodes, kNow, options);
  };
  for (const char* state : {"TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL"}) {
    SCOPED_TRACE(state);
    JobPlan p = plan(state, o);
    ASSERT_EQ(p.delete_pods.size(), 1u);
    const PodDeletion& d = p.delete_pods[0];
    EXPECT_EQ(d.pod, &day);
    EXPECT_EQ(d.grace_period_seconds, 300);
    EXPECT_EQ(d.reason, "SlurmJobEnded");
    EXPECT_NE(d.message.find("86400"), std::string::npos) << d.message;
    EXPECT_TRUE(p.Acts()) << "the job is read again before";
  }
  // No cap (external jobs), or a job that still runs (it holds the node itself): nothing.
  EXPECT_TRUE(plan("TIMEOUT", {}).delete_pods.empty());
  EXPECT_TRUE(plan("RUNNING", o).delete_pods.empty());
  // Running members of an ended job are deleted as before, without a grace period of the
  // bridge's (the pod's own, capped at CREATE).
  kube::Pod running = MakePod("running", "Running");
  JobFacts facts{.state = "TIMEOUT", .tag = OurTag({&running})};
  JobPlan p = PlanJob(7, facts, kOwner, {&running}, nodes, kNow, o);
  ASSERT_EQ(p.delete_pods.size(), 1u);
  EXPECT_FALSE(p.delete_pods[0].grace_period_seconds);
}

TEST(PlanJobTest, LiveJobCancelledOnlyWhenEveryPodIsDone) {
  kube::Node n1 = ReadyNode("n1");
  std::map<std::string, const kube::Node*> nodes = {{"n1", &n1}};
  kube::Pod a = MakePod("a", "Succeeded");
  kube::Pod b = MakePod("b", "Running");
  JobPlan plan = Plan("RUNNING", {&a, &b}, nodes, kNow);
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_TRUE(plan.release_pods.empty()) << "the job still holds the done pod";
  EXPECT_TRUE(plan.delete_pods.empty());

  b.status.phase = "Failed";
  plan = Plan("RUNNING", {&a, &b}, nodes, kNow);
  EXPECT_TRUE(plan.cancel_job);
  EXPECT_NE(plan.cancel_reason.find("a: Succeeded"), std::string::npos) << plan.cancel_reason;
  EXPECT_EQ(plan.release_pods.size(), 2u);

  // A terminating pod within its grace period keeps the job and says when to look again.
  kube::Pod c = MakePod("c", "Running");
  c.metadata.deletion_timestamp = "2026-11-30T12:00:10Z";
  plan = Plan("RUNNING", {&a, &c}, nodes, kNow);
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_EQ(plan.recheck_at, ParseTime("2026-11-30T12:00:10Z"));
  plan = Plan("RUNNING", {&a, &c}, {}, kNow + 11s);  // node gone by then
  EXPECT_TRUE(plan.cancel_job);

  // No pods left at all: cancel.
  plan = Plan("PENDING", {}, nodes, kNow);
  EXPECT_TRUE(plan.cancel_job);
  EXPECT_EQ(plan.cancel_reason, "its pods are gone");
}

// Review item 1: a label is never enough. The job is acted on only when its tag is this
// bridge's and lists the pod's UID; otherwise the pod is a stray: reported, the job untouched.
TEST(PlanJobTest, ActsOnlyOnJobsWhoseTagListsThePod) {
  kube::Node n1 = ReadyNode("n1");
  std::map<std::string, const kube::Node*> nodes = {{"n1", &n1}};
  kube::Pod done = MakePod("done", "Succeeded");
  kube::Pod running = MakePod("running", "Running");
  kube::Pod unbound = MakePod("unbound", "Pending", "");
  bridge::JobTag ours = OurTag({&done, &running});
  bridge::JobTag other_cluster = ours;
  other_cluster.cluster = "elsewhere";
  bridge::JobTag other_scheduler = ours;
  other_scheduler.scheduler = "other-scheduler";
  bridge::JobTag upstream{.pods = {"ns/done", "ns/running"}};  // upstream's tag: ours = false
  kube::Pod active_member = MakePod("member", "Running");
  bridge::JobTag lists_another = OurTag({&active_member});

  struct Row {
    std::string name;
    std::string state;
    std::optional<bridge::JobTag> tag;
    std::vector<const kube::Pod*> pods;
  };
  const std::vector<Row> rows = {
      // A forged label, then the pod deleted: nothing labelled left, the job is a stranger's.
      {"untagged, no pods", "RUNNING", std::nullopt, {}},
      {"foreign cluster, no pods", "RUNNING", other_cluster, {}},
      {"upstream tag, no pods", "PENDING", upstream, {}},
      // Job id reused: a Succeeded pod labelled 5, and job 5 is now someone else's.
      {"reused id, untagged", "RUNNING", std::nullopt, {&done}},
      {"reused id, other cluster", "RUNNING", other_cluster, {&done}},
      {"reused id, other scheduler", "PENDING", other_scheduler, {&done}},
      {"reused id, upstream tag", "RUNNING", upstream, {&done}},
      // A forged label on a running pod: never a reason to delete it here.
      {"untagged job ended", "CANCELLED", std::nullopt, {&running, &done}},
      {"foreign job ended", "TIMEOUT", other_cluster, {&running}},
      // Our job, but the pod is not one it was submitted for (its own member still runs).
      {"tag lists another UID", "RUNNING", lists_another, {&active_member, &done}},
      {"tag lists another UID, ended", "CANCELLED", lists_another, {&running}},
  };
  for (const Row& row : rows) {
    JobFacts facts{.state = row.state, .tag = row.tag};
    JobPlan plan = PlanJob(5, facts, kOwner, row.pods, nodes, kNow, {});
    EXPECT_FALSE(plan.cancel_job) << row.name << ": " << plan.cancel_reason;
    EXPECT_TRUE(plan.delete_pods.empty()) << row.name;
    for (const kube::Pod* pod : row.pods) {
      if (pod == &active_member) continue;
      EXPECT_NE(std::ranges::find(plan.strays, pod, &StrayPod::pod), plan.strays.end())
          << row.name << ": " << pod->metadata.name << " not reported";
    }
    // A done stray loses the finalizer (no job of ours holds it); a running one keeps it.
    EXPECT_EQ(std::ranges::count(plan.release_pods, &done), std::ranges::count(row.pods, &done))
        << row.name;
    EXPECT_EQ(std::ranges::count(plan.release_pods, &running), 0) << row.name;
  }
  // The reasons name what is wrong.
  JobFacts untagged{.state = "RUNNING"};
  EXPECT_EQ(WhyNotMember(5, untagged, done, kOwner), "Slurm job 5 has no slurm-bridge tag");
  JobFacts foreign{.state = "RUNNING", .tag = other_cluster};
  EXPECT_NE(WhyNotMember(5, foreign, done, kOwner).find("cluster \"elsewhere\""),
            std::string::npos);
  JobFacts other{.state = "RUNNING", .tag = lists_another};
  EXPECT_NE(WhyNotMember(5, other, done, kOwner).find("does not list UID uid-done"),
            std::string::npos);
  JobFacts mine{.state = "RUNNING", .tag = ours};
  EXPECT_EQ(WhyNotMember(5, mine, done, kOwner), "");
  // A tag without UIDs (not written by this bridge) names its pods by name only.
  bridge::JobTag no_uids = ours;
  no_uids.uids.clear();
  JobFacts by_name{.state = "RUNNING", .tag = no_uids};
  EXPECT_EQ(WhyNotMember(5, by_name, done, kOwner), "");
  EXPECT_NE(WhyNotMember(5, by_name, MakePod("stranger", "Running"), kOwner), "");
  // An unbound stray is the scheduler's: nothing to do but report.
  JobPlan plan = PlanJob(5, JobFacts{.state = "RUNNING"}, kOwner, {&unbound}, nodes, kNow, {});
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_TRUE(plan.release_pods.empty());
  ASSERT_EQ(plan.strays.size(), 1u);
}

// A job Slurm no longer knows has no tag to read: its labelled pods are taken as its own (it
// holds nothing; no Slurm write follows) and bound ones are deleted once a read has shown it
// gone for confirm_after (review 888ec7d, design risks: a slurmctld restarted without its state
// must not kill every workload at the first poll).
TEST(PlanJobTest, GoneJobDeletesItsBoundPodsAfterConfirmation) {
  kube::Node n1 = ReadyNode("n1");
  std::map<std::string, const kube::Node*> nodes = {{"n1", &n1}};
  kube::Pod running = MakePod("running", "Running");
  kube::Pod done = MakePod("done", "Succeeded");
  const LifecycleOptions o;
  JobPlan first = PlanJob(5, JobFacts{.state = "GONE"}, kOwner, {&running, &done}, nodes, kNow, o);
  EXPECT_FALSE(first.Acts()) << "not at the first sight";
  EXPECT_TRUE(first.release_pods.empty()) << "the running pod keeps its finalizer";
  ASSERT_TRUE(first.gone_since);
  EXPECT_EQ(*first.gone_since, kNow);
  ASSERT_TRUE(first.recheck_at);
  EXPECT_EQ(*first.recheck_at, kNow + o.confirm_after);
  const JobFacts seen{.state = "GONE", .gone_since = kNow};
  JobPlan early = PlanJob(5, seen, kOwner, {&running}, nodes, kNow + o.confirm_after - 1s, o);
  EXPECT_FALSE(early.Acts());
  JobPlan plan = PlanJob(5, seen, kOwner, {&running, &done}, nodes, kNow + o.confirm_after, o);
  EXPECT_EQ(Deleted(plan), (std::vector<const kube::Pod*>{&running}));
  EXPECT_NE(plan.delete_pods[0].message.find("Slurm no longer knows it"), std::string::npos);
  EXPECT_EQ(plan.release_pods, (std::vector<const kube::Pod*>{&running, &done}));
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_TRUE(plan.strays.empty());
}

// Review item 10: a bound pod whose job is alive but not RUNNING is deleted after
// confirm_after; a requeued job (PENDING after binding) has lost the pods' allocation even if it
// runs again; SUSPENDED then resumed keeps it.
TEST(PlanJobTest, JobNotRunningDeletesBoundPodsAfterConfirmation) {
  kube::Node n1 = ReadyNode("n1");
  std::map<std::string, const kube::Node*> nodes = {{"n1", &n1}};
  kube::Pod bound = MakePod("bound", "Running");
  kube::Pod unbound = MakePod("unbound", "Pending", "");
  kube::Pod done = MakePod("done", "Succeeded");
  const LifecycleOptions o;  // confirm_after 10 s
  struct Row {
    std::string name;
    std::string state;
    std::optional<WallTime> since;
    bool requeued;
    std::vector<const kube::Pod*> pods;
    bool deletes;
    std::optional<WallTime> want_since;
    bool want_requeued;
    std::optional<WallTime> recheck;
  };
  const WallTime t0 = kNow - 10s;
  const std::vector<Row> rows = {
      {"requeued, first seen", "PENDING", {}, false, {&bound}, false, kNow, true, kNow + 10s},
      {"requeued, confirmed", "PENDING", t0, true, {&bound, &done}, true, t0, true, {}},
      {"suspended, first seen", "SUSPENDED", {}, false, {&bound}, false, kNow, false, kNow + 10s},
      {"suspended, not yet",
       "SUSPENDED",
       kNow - 9s,
       false,
       {&bound},
       false,
       kNow - 9s,
       false,
       kNow + 1s},
      {"suspended, confirmed", "SUSPENDED", t0, false, {&bound}, true, t0, false, {}},
      {"suspended, resumed", "RUNNING", t0, false, {&bound}, false, {}, false, {}},
      {"requeued, running again", "RUNNING", t0, true, {&bound}, true, t0, true, {}},
      {"configuring", "CONFIGURING", {}, false, {&bound}, false, {}, false, {}},
      {"completing", "COMPLETING", {}, false, {&bound}, false, {}, false, {}},
      {"running", "RUNNING", {}, false, {&bound}, false, {}, false, {}},
      // Unbound pods of a pending job are the scheduler's.
      {"pending before binding", "PENDING", {}, false, {&unbound}, false, {}, false, {}},
  };
  for (const Row& row : rows) {
    std::vector<const kube::Pod*> all = row.pods;
    JobFacts facts{.state = row.state,
                   .tag = OurTag(all),
                   .reason = "JobHeldAdmin",
                   .not_running_since = row.since,
                   .requeued = row.requeued};
    JobPlan plan = PlanJob(7, facts, kOwner, row.pods, nodes, kNow, o);
    EXPECT_FALSE(plan.cancel_job) << row.name;
    if (row.deletes) {
      EXPECT_EQ(Deleted(plan), (std::vector<const kube::Pod*>{&bound})) << row.name;
      ASSERT_FALSE(plan.delete_pods.empty());
      EXPECT_EQ(plan.delete_pods[0].reason, "SlurmJobNotRunning") << row.name;
      EXPECT_NE(plan.delete_pods[0].message.find("Slurm job 7"), std::string::npos);
    } else {
      EXPECT_TRUE(plan.delete_pods.empty()) << row.name;
    }
    EXPECT_EQ(plan.not_running_since, row.want_since) << row.name;
    EXPECT_EQ(plan.requeued, row.want_requeued) << row.name;
    EXPECT_EQ(plan.recheck_at, row.recheck) << row.name;
  }
}

// Issue #29: a job Slurm preempted and requeued (or suspended) has given its nodes to the
// preemptor: its bound pods go at once, with the DisruptionTarget condition, not after
// confirm_after.
TEST(PlanJobTest, PreemptedJobDeletesBoundPodsAtOnceAsADisruption) {
  kube::Node n1 = ReadyNode("n1");
  std::map<std::string, const kube::Node*> nodes = {{"n1", &n1}};
  kube::Pod bound = MakePod("bound", "Running");
  for (const char* state : {"PENDING", "SUSPENDED"}) {
    JobFacts facts{.state = state, .tag = OurTag({&bound}), .preempted = true};
    JobPlan plan = PlanJob(7, facts, kOwner, {&bound}, nodes, kNow, {});
    ASSERT_EQ(plan.delete_pods.size(), 1u) << state;
    const PodDeletion& d = plan.delete_pods[0];
    EXPECT_EQ(d.reason, "SlurmJobPreempted") << state;
    EXPECT_EQ(d.disruption, "PreemptionByScheduler") << state;
    EXPECT_NE(d.message.find("Slurm preempted job 7"), std::string::npos) << d.message;
    EXPECT_FALSE(plan.cancel_job) << state;
    EXPECT_EQ(plan.not_running_since, kNow) << state;
  }
  // A Job's group comes back: the message says the job waits for it.
  JobFacts requeued{.state = "PENDING", .tag = OurTag({&bound}), .preempted = true};
  JobPlan plan = PlanJob(7, requeued, kOwner, {&bound}, nodes, kNow, {});
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_NE(plan.delete_pods[0].message.find("keeps its id"), std::string::npos);
  // Not preempted (scontrol requeue, scontrol suspend): confirm_after first, no disruption.
  JobFacts plain{.state = "PENDING", .tag = OurTag({&bound})};
  EXPECT_TRUE(PlanJob(7, plain, kOwner, {&bound}, nodes, kNow, {}).delete_pods.empty());
  plain.not_running_since = kNow - 10s;
  plan = PlanJob(7, plain, kOwner, {&bound}, nodes, kNow, {});
  ASSERT_EQ(plan.delete_pods.size(), 1u);
  EXPECT_EQ(plan.delete_pods[0].disruption, "");
}

// Issue #29: a requeued job whose pods are all gone waits requeue_grace for its group's new
// pods (the scheduler adopts it for them, and it keeps its id); a bare pod's job is cancelled
// at once (nothing re-creates the pod); a job never bound is the scheduler's.
TEST(PlanJobTest, RequeuedJobWaitsForItsGroupsNewPods) {
  const std::map<std::string, const kube::Node*> nodes;
  const LifecycleOptions o;  // requeue_grace 120 s
  const WallTime since = kNow - 30s;
  bridge::JobTag tag = OurTag({});
  tag.pods = {"ns/old"};
  tag.uids = {"uid-old"};
  JobFacts facts{.state = "PENDING", .tag = tag, .not_running_since = since};
  JobPlan plan = PlanJob(7, facts, kOwner, {}, nodes, kNow, o);
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_EQ(plan.not_running_since, since);
  EXPECT_FALSE(plan.requeued) << "the pods it was requeued under are gone";
  EXPECT_EQ(plan.recheck_at, since + o.requeue_grace);
  // The orphan sweep, which finds none of the tag's pods, holds off as long.
  EXPECT_EQ(plan.hold_until, since + o.requeue_grace);
  // The grace is over: nothing came back for it.
  plan = PlanJob(7, facts, kOwner, {}, nodes, since + o.requeue_grace, o);
  EXPECT_TRUE(plan.cancel_job);
  // A bare pod's job: nothing comes back.
  facts.tag->group = "Pod/ns/old";
  EXPECT_TRUE(PlanJob(7, facts, kOwner, {}, nodes, kNow, o).cancel_job);
  EXPECT_FALSE(PlanJob(7, facts, kOwner, {}, nodes, kNow, o).hold_until);
  facts.tag->group = "Job/ns/g";
  // The requeued job's old pod, done: its finalizer goes although the job lives on (it waits
  // for the group's new pods, not for this one).
  kube::Pod old = MakePod("old", "Failed");
  facts.tag = OurTag({&old});
  plan = PlanJob(7, facts, kOwner, {&old}, nodes, kNow, o);
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_EQ(plan.release_pods, (std::vector<const kube::Pod*>{&old}));
  // Running again, with the group's new pod bound to it: kept, the pod stays.
  kube::Node n1 = ReadyNode("n1");
  kube::Pod fresh = MakePod("fresh", "Running");
  JobFacts again{.state = "RUNNING", .tag = OurTag({&fresh})};
  plan = PlanJob(7, again, kOwner, {&fresh}, {{"n1", &n1}}, kNow, o);
  EXPECT_FALSE(plan.cancel_job);
  EXPECT_TRUE(plan.delete_pods.empty());
  EXPECT_FALSE(plan.hold_until);
}

// Review item 11: bound pods of this scheduler that no live job of this bridge holds.
// R-4: only the claim the binder made for the pod is released with it.
TEST(WhyClaimNotReleasedTest, OwnedByThePodAndMarked) {
  const kube::Pod pod = MakePod("p", "Succeeded");
  auto claim = [](std::string owner_kind, std::string owner_uid, bool controller,
                  std::optional<std::string> mark) {
    kube::GenericObject c;
    c.metadata.name = "c";
    c.metadata.uid = "claim-uid";
    c.metadata.owner_references.push_back({.api_version = "v1",
                                           .kind = std::move(owner_kind),
                                           .name = "p",
                                           .uid = std::move(owner_uid),
                                           .controller = controller});
    if (mark) {
      c.metadata.annotations["resource.kubernetes.io/extended-resource-claim"] = *mark;
    }
    return c;
  };
  EXPECT_EQ(WhyClaimNotReleased(claim("Pod", "uid-p", true, "true"), pod), "");
  struct Case {
    std::string name;
    kube::GenericObject claim;
  };
  const std::vector<Case> refused = {
      {"another pod's", claim("Pod", "uid-other", true, "true")},
      {"owned, not as controller", claim("Pod", "uid-p", false, "true")},
      {"owned by a ReplicaSet of the same UID", claim("ReplicaSet", "uid-p", true, "true")},
      {"the pod's template claim (no mark)", claim("Pod", "uid-p", true, std::nullopt)},
      {"a mark that is not true", claim("Pod", "uid-p", true, "false")},
      {"no owner", kube::GenericObject{}},
  };
  for (const Case& c : refused) {
    SCOPED_TRACE(c.name);
    EXPECT_NE(WhyClaimNotReleased(c.claim, pod), "");
  }
  kube::Pod no_uid = pod;
  no_uid.metadata.uid.clear();
  kube::GenericObject empty_owner = claim("Pod", "", true, "true");
  EXPECT_NE(WhyClaimNotReleased(empty_owner, no_uid), "") << "an empty UID matches nothing";
}

TEST(JudgeBoundPodTest, Matrix) {
  kube::Pod pod = MakePod("p", "Running");
  pod.metadata.labels[std::string(bridge::kJobIdLabel)] = "5";
  const std::set<std::string> none;
  const std::set<std::string> held = {"uid-p"};
  // What a read of job 5 says (its tag parsed from the admin_comment).
  auto job = [](std::string state, const std::string& comment) {
    return JobFacts{.state = std::move(state), .tag = bridge::ParseJobTag(comment)};
  };
  bridge::JobTag tag = OurTag({&pod});
  bridge::JobTag foreign_tag = tag;
  foreign_tag.cluster = "elsewhere";
  const JobFacts ours = job("RUNNING", bridge::EncodeJobTag(tag));
  const JobFacts untagged = job("RUNNING", "");
  const JobFacts foreign = job("RUNNING", bridge::EncodeJobTag(foreign_tag));
  const JobFacts ended = job("COMPLETED", bridge::EncodeJobTag(tag));
  const JobFacts upstream = job("RUNNING", R"({"pods":["ns/p"]})");
  const JobFacts upstream_other = job("RUNNING", R"({"pods":["ns/q"]})");
  const JobFacts gone = job("GONE", "");

  // Held by a live job of ours: fine.
  EXPECT_FALSE(JudgeBoundPod(pod, held, &ours, 5, kOwner));
  // Listed by a live job of ours that the list missed (read since): fine.
  EXPECT_FALSE(JudgeBoundPod(pod, none, &ours, 5, kOwner));
  // Upstream's job for this very pod (a running pod of the bridge this one replaced): left.
  EXPECT_FALSE(JudgeBoundPod(pod, none, &upstream, 5, kOwner));
  // Strays.
  std::optional<std::string> why = JudgeBoundPod(pod, none, &untagged, 5, kOwner);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("no slurm-bridge tag"), std::string::npos) << *why;
  EXPECT_TRUE(JudgeBoundPod(pod, none, &foreign, 5, kOwner));
  EXPECT_TRUE(JudgeBoundPod(pod, none, &upstream_other, 5, kOwner));
  why = JudgeBoundPod(pod, none, &ended, 5, kOwner);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("ended (COMPLETED)"), std::string::npos) << *why;
  why = JudgeBoundPod(pod, none, nullptr, 5, kOwner);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("Slurm does not know its job 5"), std::string::npos) << *why;
  EXPECT_EQ(JudgeBoundPod(pod, none, &gone, 5, kOwner), why) << "a read that found no job";
  kube::Pod unlabelled = MakePod("u", "Running");
  why = JudgeBoundPod(unlabelled, none, nullptr, 0, kOwner);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("without a Slurm job"), std::string::npos) << *why;
  // Only bound, running pods that are not being deleted.
  EXPECT_FALSE(JudgeBoundPod(MakePod("u", "Pending", ""), none, nullptr, 0, kOwner));
  EXPECT_FALSE(JudgeBoundPod(MakePod("u", "Succeeded"), none, nullptr, 0, kOwner));
  EXPECT_FALSE(JudgeBoundPod(MakePod("u", "Failed"), none, nullptr, 0, kOwner));
  kube::Pod deleting = MakePod("u", "Running");
  deleting.metadata.deletion_timestamp = "2026-11-30T12:00:30Z";
  EXPECT_FALSE(JudgeBoundPod(deleting, none, nullptr, 0, kOwner));
  // MayBeStray says which pods JudgeBoundPod may find strays (the sweep reads no job for others).
  EXPECT_TRUE(MayBeStray(pod, none));
  EXPECT_FALSE(MayBeStray(pod, held));
  EXPECT_FALSE(MayBeStray(MakePod("u", "Pending", ""), none));
  EXPECT_FALSE(MayBeStray(MakePod("u", "Succeeded"), none));
  EXPECT_FALSE(MayBeStray(deleting, none));
}

// Review item 9: jobs tagged for this cluster whose pods and namespaces do not exist here.
TEST(ForeignLookingJobsTest, NeedsMissingPodsAndMissingNamespaces) {
  auto job = [](std::int64_t id, std::string state, std::string cluster, std::string pod) {
    bridge::JobTag t{.pods = {pod},
                     .uids = {"uid-" + pod},
                     .group = "Pod/" + pod,
                     .cluster = std::move(cluster),
                     .scheduler = kOwner.scheduler};
    slurm::JobInfo j;
    j.job_id = id;
    j.job_state = {std::move(state)};
    j.admin_comment = bridge::EncodeJobTag(t);
    return j;
  };
  const std::vector<slurm::JobInfo> jobs = {
      job(1, "RUNNING", "kubernetes", "here/a"),    // pod exists
      job(2, "RUNNING", "kubernetes", "gone/b"),    // namespace missing: the other cluster's
      job(3, "PENDING", "kubernetes", "here/c"),    // namespace exists: an orphan of ours
      job(4, "RUNNING", "elsewhere", "gone/d"),     // another clusterName: fine
      job(5, "COMPLETED", "kubernetes", "gone/e"),  // not live
  };
  auto pod_exists = [](const std::string& key, const std::string& uid) {
    return key == "here/a" && uid == "uid-here/a";
  };
  auto ns_missing = [](const std::string& ns) { return ns == "gone"; };
  EXPECT_EQ(ForeignLookingJobs(jobs, kOwner, pod_exists, ns_missing),
            (std::vector<std::int64_t>{2}));
}

}  // namespace
}  // namespace sb::controllers

namespace sb::controllers {
namespace {

// A pod bound `ago` before kNow with the bridge's extended-resource claim, Pending, its kubelet
// silent so far.
kube::Pod DraPod(std::chrono::seconds ago) {
  kube::Pod p = MakePod("dra", "Pending");
  p.metadata.annotations[std::string(bridge::kResourceClaimAnnotation)] = "dra-extended-resources";
  p.status.conditions.push_back(
      {.type = "PodScheduled", .status = "True", .last_transition_time = FormatTime(kNow - ago)});
  return p;
}

// A kubelet that saw the Binding before the node authorizer is refused the pod's claims and asks
// again only at its next sync: 5 s after the Binding, a Pending DRA pod without a sandbox is
// nudged once; any other pod is not.
TEST(JudgeKubeletNudgeTest, Matrix) {
  const LifecycleOptions o;
  ASSERT_EQ(o.kubelet_nudge_after, 5s);
  EXPECT_EQ(JudgeKubeletNudge(DraPod(6s), kNow, o), (NudgeVerdict{.nudge = true}));
  EXPECT_EQ(JudgeKubeletNudge(DraPod(5s), kNow, o), (NudgeVerdict{.nudge = true}));
  // Too early: look again when it is due.
  EXPECT_EQ(JudgeKubeletNudge(DraPod(2s), kNow, o), (NudgeVerdict{.recheck_at = kNow + 3s}));
  // Claims made from the pod's own templates count too.
  kube::Pod templated = DraPod(6s);
  templated.metadata.annotations.clear();
  templated.status.resource_claim_statuses["gpu"] = "dra-gpu-x1";
  EXPECT_TRUE(JudgeKubeletNudge(templated, kNow, o).nudge);
  // No claim: its kubelet has nothing it could be refused.
  kube::Pod plain = DraPod(6s);
  plain.metadata.annotations.clear();
  EXPECT_EQ(JudgeKubeletNudge(plain, kNow, o), NudgeVerdict{});
  // Nudged once already.
  kube::Pod nudged = DraPod(600s);
  nudged.metadata.annotations[std::string(bridge::kKubeletNudgeAnnotation)] = "x";
  EXPECT_EQ(JudgeKubeletNudge(nudged, kNow, o), NudgeVerdict{});
  // The sandbox is up (images may still be pulling): nothing to nudge.
  kube::Pod started = DraPod(60s);
  started.status.conditions.push_back({.type = "PodReadyToStartContainers", .status = "True"});
  EXPECT_EQ(JudgeKubeletNudge(started, kNow, o), NudgeVerdict{});
  kube::Pod refused = DraPod(60s);
  refused.status.conditions.push_back({.type = "PodReadyToStartContainers", .status = "False"});
  EXPECT_TRUE(JudgeKubeletNudge(refused, kNow, o).nudge);
  // Running, being deleted, not bound, no readable binding time, or nudging off.
  kube::Pod running = DraPod(60s);
  running.status.phase = "Running";
  EXPECT_EQ(JudgeKubeletNudge(running, kNow, o), NudgeVerdict{});
  kube::Pod deleting = DraPod(60s);
  deleting.metadata.deletion_timestamp = "2026-11-30T12:00:30Z";
  EXPECT_EQ(JudgeKubeletNudge(deleting, kNow, o), NudgeVerdict{});
  kube::Pod unbound = DraPod(60s);
  unbound.spec.node_name.clear();
  EXPECT_EQ(JudgeKubeletNudge(unbound, kNow, o), NudgeVerdict{});
  kube::Pod unreadable = DraPod(60s);
  unreadable.status.conditions[0].last_transition_time = "soon";
  EXPECT_EQ(JudgeKubeletNudge(unreadable, kNow, o), NudgeVerdict{});
  kube::Pod unscheduled = DraPod(60s);
  unscheduled.status.conditions.clear();
  EXPECT_EQ(JudgeKubeletNudge(unscheduled, kNow, o), NudgeVerdict{});
  LifecycleOptions off;
  off.kubelet_nudge_after = 0s;
  EXPECT_EQ(JudgeKubeletNudge(DraPod(60s), kNow, off), NudgeVerdict{});
}

// PlanJob nudges only for a job that runs (a job that does not is the deletion rule's), and asks
// to be called again when a nudge falls due.
TEST(PlanJobTest, RunningJobNudgesTheKubeletOfItsStuckDraPod) {
  kube::Node n1 = ReadyNode("n1");
  const std::map<std::string, const kube::Node*> nodes{{"n1", &n1}};
  kube::Pod stuck = DraPod(6s);
  kube::Pod fresh = DraPod(1s);
  fresh.metadata.name = "fresh";
  fresh.metadata.uid = "uid-fresh";
  kube::Pod plain = MakePod("plain", "Pending");
  JobPlan plan = Plan("RUNNING", {&stuck, &fresh, &plain}, nodes, kNow);
  EXPECT_EQ(plan.nudge_pods, (std::vector<const kube::Pod*>{&stuck}));
  EXPECT_EQ(plan.recheck_at, kNow + 4s);
  EXPECT_FALSE(plan.Acts());
  for (std::string_view state : {"PENDING", "SUSPENDED", "COMPLETED", "CANCELLED"}) {
    EXPECT_TRUE(Plan(state, {&stuck}, nodes, kNow).nudge_pods.empty()) << state;
  }
}

}  // namespace
}  // namespace sb::controllers
