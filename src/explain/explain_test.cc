// SPDX-License-Identifier: Apache-2.0
//
// bridge/explain.h: what `explain` says for a pod, from objects written as the apiserver and
// slurmrestd serve them (no I/O).
#include "bridge/explain.h"

#include <gtest/gtest.h>
#include <boost/json.hpp>

namespace sb::bridge {
namespace {

constexpr std::int64_t kNow = 1'796'414'400;  // 2026-12-04T20:00:00Z

kube::Pod MakePod(const std::string& name, const std::string& phase = "Pending") {
  kube::Pod p;
  p.metadata.name = name;
  p.metadata.namespace_ = "ns";
  p.metadata.uid = "uid-" + name;
  p.spec.scheduler_name = "slurm-bridge-scheduler";
  p.status.phase = phase;
  return p;
}

kube::Node MakeNode(const std::string& name) {
  kube::Node n;
  n.metadata.name = name;
  n.conditions.push_back({.type = "Ready", .status = "True"});
  n.allocatable["cpu"] = "8";
  n.allocatable["memory"] = "16Gi";
  n.allocatable["pods"] = "110";
  return n;
}

slurm::JobInfo PendingJob(std::int64_t id, const std::string& reason) {
  slurm::JobInfo j;
  j.job_id = id;
  j.job_state = {"PENDING"};
  j.state_reason = reason;
  j.partition = "batch";
  j.account = "default";
  j.qos = "normal";
  j.user_name = "k8s";
  j.priority = slurm::NoValNumber::Of(4294901757);
  j.submit_time = slurm::NoValNumber::Of(kNow - 120);
  j.start_time = slurm::NoValNumber::Of(kNow + 540);
  j.time_limit = slurm::NoValNumber::Of(5);
  return j;
}

GroupSpec PodGroupSpec(int size) {
  return GroupSpec{
      .key = "PodGroup/ns/pg", .kind = "PodGroup", .namespace_ = "ns", .name = "pg", .size = size};
}

TEST(ExplainTest, PendingJobGivesReasonPriorityFairShareAndExpectedStart) {
  kube::Pod pod = MakePod("p");
  pod.status.conditions.push_back(
      {.type = "PodScheduled",
       .status = "False",
       .reason = "Unschedulable",
       .message = "waiting for Slurm job 12 in partition batch: Priority"});
  ExplainInput in{
      .pod = &pod,
      .group =
          GroupSpec{.key = "Pod/ns/p", .kind = "Pod", .namespace_ = "ns", .name = "p", .size = 1},
      .members = {&pod},
      .job = PendingJob(12, "Priority"),
      .job_source = "label",
      .fairshare = 0.5,
      .now = kNow};
  Explanation e = Explain(in);
  ASSERT_TRUE(e.job);
  EXPECT_EQ(e.job->reason, "Priority");
  EXPECT_EQ(e.job->expected_start, kNow + 540);
  EXPECT_FALSE(e.job->start_time);
  ASSERT_EQ(e.waiting_for.size(), 1u) << "the scheduler's message repeats Slurm's: not shown twice";
  EXPECT_EQ(e.waiting_for[0],
            "Slurm to start job 12 (Priority: jobs of higher priority are ahead of it for these "
            "nodes or this partition); Slurm expects it to start at 2026-12-04T20:09:00Z (in 9m)");
  const std::string text = RenderText(e, kNow);
  EXPECT_NE(text.find("Slurm job  12  PENDING (Priority)  (found by its pod's job-id label)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("partition batch  account default  QOS normal  user k8s"), std::string::npos)
      << text;
  EXPECT_NE(text.find("priority 4294901757  fair-share factor 0.500"), std::string::npos) << text;
  EXPECT_NE(text.find("expected start 2026-12-04T20:09:00Z (in 9m;"), std::string::npos) << text;
  EXPECT_NE(text.find("submitted 2026-12-04T19:58:00Z (2m ago)  time limit 5m"), std::string::npos)
      << text;

  boost::json::value j = boost::json::parse(RenderJson(e));
  EXPECT_EQ(j.at("slurmJob").at("expectedStart").as_string(), "2026-12-04T20:09:00Z");
  EXPECT_EQ(j.at("slurmJob").at("priority").as_int64(), 4294901757);
  EXPECT_EQ(j.at("slurmJob").at("fairshare").as_double(), 0.5);
  EXPECT_TRUE(j.at("slurmJob").at("startTime").is_null());
  EXPECT_EQ(j.at("group").at("key").as_string(), "Pod/ns/p");
}

TEST(ExplainTest, GangShortOfMembersSaysHowManyAndNoJobYet) {
  kube::Pod a = MakePod("pg-0");
  kube::Pod b = MakePod("pg-1");
  kube::Pod done = MakePod("pg-2", "Succeeded");  // ended: not a live member
  ExplainInput in{.pod = &a, .group = PodGroupSpec(3), .members = {&a, &b, &done}, .now = kNow};
  Explanation e = Explain(in);
  EXPECT_FALSE(e.job);
  ASSERT_EQ(e.waiting_for.size(), 1u) << testing::PrintToString(e.waiting_for);
  EXPECT_EQ(e.waiting_for[0],
            "the rest of its gang: 2 of 3 pods of PodGroup pg exist, 1 more before a Slurm job "
            "is submitted");
  const std::string text = RenderText(e, kNow);
  EXPECT_NE(text.find("Group      PodGroup/ns/pg (PodGroup), 2 of 3 pods"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ns/pg-2"), std::string::npos) << "every member is listed\n" << text;
  EXPECT_NE(text.find("Slurm job  none"), std::string::npos) << text;
}

TEST(ExplainTest, CompleteGroupWithoutJobWaitsForTheScheduler) {
  kube::Pod a = MakePod("p");
  ExplainInput in{.pod = &a, .group = PodGroupSpec(1), .members = {&a}, .now = kNow};
  EXPECT_EQ(Explain(in).waiting_for,
            std::vector<std::string>{
                "the scheduler to submit a Slurm job (none is tagged for the group yet)"});
  in.job_error = "no Slurm token (give --slurm-token-file, or set SLURM_JWT or SLURM_JWT_FILE)";
  Explanation e = Explain(in);
  EXPECT_EQ(e.waiting_for[0], "Slurm, which could not be read: " + in.job_error);
  EXPECT_NE(RenderText(e, kNow).find("Slurm job  unknown: no Slurm token"), std::string::npos);
}

TEST(ExplainTest, GatedPodAndTheSchedulersOwnWordsAreShown) {
  kube::Pod a = MakePod("p");
  a.spec.scheduling_gates = {"example.com/quota"};
  ExplainInput in{.pod = &a, .group = PodGroupSpec(1), .members = {&a}, .now = kNow};
  Explanation e = Explain(in);
  ASSERT_EQ(e.waiting_for.size(), 1u);
  EXPECT_EQ(e.waiting_for[0],
            "its scheduling gates to be removed (example.com/quota): no scheduler looks at a "
            "gated pod");

  kube::Pod v = MakePod("v");
  v.status.conditions.push_back({.type = "PodScheduled",
                                 .status = "False",
                                 .message = "waiting for persistentvolumeclaim \"data\" to be "
                                            "bound"});
  ExplainInput vin{.pod = &v, .group = PodGroupSpec(1), .members = {&v}, .now = kNow};
  Explanation ve = Explain(vin);
  EXPECT_EQ(ve.waiting_for, std::vector<std::string>{"what the scheduler last said: waiting for "
                                                     "persistentvolumeclaim \"data\" to be bound"})
      << "no job yet: the scheduler's words say why, not a generic line";
}

TEST(ExplainTest, UnresolvedGroupIsSaidWithItsError) {
  kube::Pod a = MakePod("p");
  ExplainInput in{.pod = &a,
                  .group_error =
                      "PodGroup pg cannot be read: not found; the pod is never "
                      "scheduled alone",
                  .members = {&a},
                  .now = kNow};
  Explanation e = Explain(in);
  ASSERT_FALSE(e.waiting_for.empty());
  EXPECT_EQ(e.waiting_for[0],
            "a group it can be scheduled in: PodGroup pg cannot be read: not found; the pod is "
            "never scheduled alone");
  EXPECT_NE(RenderText(e, kNow).find("Group      unknown: PodGroup pg"), std::string::npos);
}

TEST(ExplainTest, ExcludedNodesCarryTheBridgesReasons) {
  kube::Pod a = MakePod("p");
  kube::Node n1 = MakeNode("n1");
  kube::Node n2 = MakeNode("n2");
  n2.unschedulable = true;
  kube::Node n3 = MakeNode("n3");
  n3.taints.push_back({.key = "x", .value = "y", .effect = "NoSchedule"});
  ExplainInput in{.pod = &a,
                  .group = PodGroupSpec(1),
                  .members = {&a},
                  .slurm_nodes = {"n1", "n2", "n3", "n4"},
                  .k8s_nodes_by_slurm_name = {{"n1", &n1}, {"n2", &n2}, {"n3", &n3}},
                  .now = kNow};
  Explanation e = Explain(in);
  ASSERT_EQ(e.excluded.size(), 3u);
  EXPECT_EQ(e.excluded[0], (Exclusion{"n2", "unschedulable"}));
  EXPECT_EQ(e.excluded[1].slurm_node, "n3");
  EXPECT_NE(e.excluded[1].reason.find("taint x=y:NoSchedule"), std::string::npos);
  EXPECT_EQ(e.excluded[2], (Exclusion{"n4", "no Kubernetes node"}));
  const std::string text = RenderText(e, kNow);
  EXPECT_NE(text.find("Excluded   3 of 4 Slurm nodes"), std::string::npos) << text;

  // Every node excluded: said as what it waits for.
  n1.unschedulable = true;
  Explanation all = Explain(in);
  EXPECT_EQ(all.waiting_for.back(),
            "a node it can run on: the bridge keeps the job off every Slurm node (see Excluded)");
}

TEST(ExplainTest, BoundRunningAndEndedJobs) {
  kube::Pod bound = MakePod("p", "Running");
  bound.spec.node_name = "n1";
  slurm::JobInfo running = PendingJob(7, "None");
  running.job_state = {"RUNNING"};
  running.nodes = "n1";
  ExplainInput in{.pod = &bound,
                  .group = PodGroupSpec(1),
                  .members = {&bound},
                  .job = running,
                  .job_source = "label",
                  .now = kNow};
  Explanation e = Explain(in);
  EXPECT_EQ(e.waiting_for, std::vector<std::string>{"nothing: bound to node n1 by Slurm job 7"});
  ASSERT_TRUE(e.job);
  EXPECT_EQ(e.job->start_time, kNow + 540) << "a running job's start is when it started";
  EXPECT_FALSE(e.job->expected_start);
  EXPECT_EQ(e.job->reason, "") << "Slurm's None is no reason";

  kube::Pod pending = MakePod("q");
  in.pod = &pending;
  in.members = {&pending};
  EXPECT_EQ(Explain(in).waiting_for[0], "the scheduler to bind it: Slurm job 7 runs on n1");
  in.job->job_state = {"CANCELLED"};
  EXPECT_EQ(Explain(in).waiting_for[0], "a new Slurm job: job 7 is CANCELLED");
}

TEST(ExplainTest, SlurmReasonWords) {
  EXPECT_EQ(SlurmReasonWords("Resources"),
            "it is next, and waits for nodes, CPUs, memory or GPUs to become free");
  EXPECT_EQ(SlurmReasonWords("QOSMaxJobsPerUserLimit"),
            "a per-job or per-user limit of its QOS is reached (QOSMaxJobsPerUserLimit); it "
            "starts when jobs under that limit end");
  EXPECT_EQ(SlurmReasonWords("AssocGrpCpuLimit"),
            "a group limit of its account (association) is reached (AssocGrpCpuLimit); it starts "
            "when jobs under that limit end");
  EXPECT_EQ(SlurmReasonWords("SomethingNew"), "SomethingNew");
}

TEST(ExplainTest, Times) {
  EXPECT_EQ(FormatUnixTime(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatUnixTime(kNow), "2026-12-04T20:00:00Z");
  EXPECT_EQ(RelativeTime(kNow + 10, kNow), "now");
  EXPECT_EQ(RelativeTime(kNow + 540, kNow), "in 9m");
  EXPECT_EQ(RelativeTime(kNow + 3900, kNow), "in 1h5m");
  EXPECT_EQ(RelativeTime(kNow + 7200, kNow), "in 2h");
  EXPECT_EQ(RelativeTime(kNow - 120, kNow), "2m ago");
  EXPECT_EQ(RelativeTime(kNow + 3 * 86400, kNow), "in 3d");
}

}  // namespace
}  // namespace sb::bridge
