// SPDX-License-Identifier: Apache-2.0
#include "bridge/invariants.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bridge/names.h"
#include "bridge/tag.h"

namespace sb::bridge {
namespace {
using namespace std::chrono_literals;

// 2026-01-01T00:01:00Z
const auto kNow = std::chrono::system_clock::from_time_t(1767225600) + 60s;

kube::Pod MakePod(const std::string& name, const std::string& node, std::int64_t job) {
  kube::Pod p;
  p.metadata.name = name;
  p.metadata.namespace_ = "ns";
  p.metadata.uid = "uid-" + name;
  p.spec.scheduler_name = "slurm-bridge-scheduler";
  p.spec.node_name = node;
  p.status.phase = "Pending";  // no kubelet: bound pods stay Pending
  if (job > 0) p.metadata.labels[std::string(kJobIdLabel)] = std::to_string(job);
  p.metadata.finalizers = {std::string(kFinalizer)};
  return p;
}

kube::Node MakeNode(const std::string& name, bool ready = true) {
  kube::Node n;
  n.metadata.name = name;
  n.conditions.push_back({.type = "Ready", .status = ready ? "True" : "False"});
  return n;
}

slurm::JobInfo MakeJob(std::int64_t id, const std::string& state, const std::string& nodes,
                       const std::vector<std::string>& pod_names,
                       const std::string& group = "Pod/ns/a") {
  JobTag tag{.group = group, .cluster = "kubernetes", .scheduler = "slurm-bridge-scheduler"};
  for (const std::string& n : pod_names) {
    tag.pods.push_back("ns/" + n);
    tag.uids.push_back("uid-" + n);
  }
  slurm::JobInfo j;
  j.job_id = id;
  j.job_state = {state};
  j.nodes = nodes;
  j.admin_comment = EncodeJobTag(tag);
  return j;
}

struct Row {
  std::string name;
  Snapshot snapshot;
  std::vector<std::string> want;  // the violations' texts
};

Snapshot Base() {
  Snapshot s;
  for (const char* n : {"n1", "n2", "n3"}) s.nodes.push_back(MakeNode(n));
  return s;
}

std::vector<Row> Rows() {
  std::vector<Row> rows;
  {
    Row r{.name = "a bound pod on its running job's node is fine", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    rows.push_back(r);
  }
  {
    // Issue #27: a heterogeneous job's pods are checked against their own component's nodes
    // (the het-job-offset label): the launcher on component 0's n1, a worker on component 1's
    // n2 are fine; a worker on n1 (the launcher's) and a pod of a component the job has not are
    // not.
    Row r{.name = "heterogeneous job: each pod on its component's nodes", .snapshot = Base()};
    auto het = [](kube::Pod p, int offset) {
      p.metadata.labels[std::string(kHetJobIdLabel)] = "7";
      p.metadata.labels[std::string(kHetJobOffsetLabel)] = std::to_string(offset);
      return p;
    };
    r.snapshot.pods = {het(MakePod("l", "n1", 7), 0), het(MakePod("w", "n2", 7), 1),
                       het(MakePod("x", "n1", 7), 1), het(MakePod("y", "n3", 7), 2)};
    slurm::JobInfo leader = MakeJob(7, "RUNNING", "n1", {"l", "w", "x", "y"}, "JobSet/ns/mpi");
    leader.het_job_id = 7;
    slurm::JobInfo workers = MakeJob(8, "RUNNING", "n[2-3]", {});
    workers.admin_comment = R"({"pods":["ns/w","ns/x","ns/y"]})";
    workers.het_job_id = 7;
    workers.het_job_offset = 1;
    r.snapshot.jobs = {leader, workers};
    r.want = {
        "bound-without-allocation: pod ns/x is bound to node n1 (Slurm node n1) but Slurm job 8 "
        "runs on 'n[2-3]'",
        "bound-without-allocation: pod ns/y is bound to node n3 for component +2 of Slurm job 7, "
        "which it has not"};
    rows.push_back(r);
  }
  {
    Row r{.name = "a gang on the job's hostlist is fine", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7), MakePod("b", "n3", 7)};
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n[1,3]", {"a", "b"}, "Job/ns/train")};
    rows.push_back(r);
  }
  {
    Row r{.name = "a pending pod with a pending job is fine", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "", 7)};
    r.snapshot.jobs = {MakeJob(7, "PENDING", "", {"a"})};
    rows.push_back(r);
  }
  {
    Row r{.name = "bound, its job cancelled", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.jobs = {MakeJob(7, "CANCELLED", "n1", {"a"})};
    r.want = {
        "bound-without-running-job: pod ns/a is bound to node n1 but its Slurm job 7 is "
        "CANCELLED"};
    rows.push_back(r);
  }
  {
    Row r{.name = "bound, its job pending", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.jobs = {MakeJob(7, "PENDING", "", {"a"})};
    r.want = {
        "bound-without-running-job: pod ns/a is bound to node n1 but its Slurm job 7 is "
        "PENDING"};
    rows.push_back(r);
  }
  {
    Row r{.name = "bound, job tag lists another UID (re-created pod)", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.pods[0].metadata.uid = "uid-new";
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    r.want = {
        "bound-without-running-job: pod ns/a is bound to node n1 but the tag of Slurm job "
        "7 does not list its UID uid-new",
        "orphan-job: Slurm job 7 (group Pod/ns/a) is RUNNING but none of its pods is "
        "alive (ns/a gone)"};
    rows.push_back(r);
  }
  {
    Row r{.name = "bound, the job is someone else's", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    r.snapshot.jobs[0].admin_comment = R"({"pods":["ns/a"]})";
    r.want = {
        "bound-without-running-job: pod ns/a is bound to node n1 but Slurm job 7 is not "
        "this bridge's (tag {\"pods\":[\"ns/a\"]})"};
    rows.push_back(r);
  }
  {
    Row r{.name = "bound on a node the job does not hold", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n2", 7)};
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    r.want = {
        "bound-without-allocation: pod ns/a is bound to node n2 (Slurm node n2) but Slurm "
        "job 7 runs on 'n1'"};
    rows.push_back(r);
  }
  {
    Row r{.name = "the node's Slurm name counts", .snapshot = Base()};
    r.snapshot.nodes[1].metadata.labels[std::string(kSlurmNodeNameLabel)] = "slurm-2";
    r.snapshot.pods = {MakePod("a", "n2", 7)};
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "slurm-[1-2]", {"a"})};
    rows.push_back(r);
  }
  {
    Row r{.name = "bound without a job id", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 0)};
    r.want = {
        "bound-without-allocation: pod ns/a is bound to node n1 but carries no Slurm job "
        "id"};
    rows.push_back(r);
  }
  {
    Row r{.name = "bound, Slurm forgot the job", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.want = {"bound-without-allocation: pod ns/a is bound to node n1 but Slurm has no job 7"};
    rows.push_back(r);
  }
  {
    Row r{.name = "finished and terminating pods are not held to their job", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7), MakePod("b", "n2", 8)};
    r.snapshot.pods[0].status.phase = "Succeeded";
    r.snapshot.pods[1].metadata.deletion_timestamp = "2026-01-01T00:00:30Z";
    r.snapshot.pods[1].metadata.finalizers.clear();
    r.snapshot.jobs = {MakeJob(7, "CANCELLED", "n1", {"a"}),
                       MakeJob(8, "CANCELLED", "n2", {"b"}, "Pod/ns/b")};
    rows.push_back(r);
  }
  {
    Row r{.name = "other schedulers' pods and other namespaces are skipped", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 0), MakePod("b", "n1", 0)};
    r.snapshot.pods[0].spec.scheduler_name = "default-scheduler";
    r.snapshot.pods[1].metadata.namespace_ = "elsewhere";
    rows.push_back(r);
  }
  {
    Row r{.name = "two live jobs for one group", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "", 8)};
    r.snapshot.jobs = {MakeJob(7, "PENDING", "", {"a"}), MakeJob(8, "PENDING", "", {"a"}),
                       MakeJob(6, "CANCELLED", "", {"a"})};
    r.want = {"two-live-jobs: group Pod/ns/a has 2 live Slurm jobs: 7, 8"};
    rows.push_back(r);
  }
  {
    Row r{.name = "one pod in two groups' live jobs", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "", 8)};
    r.snapshot.jobs = {MakeJob(7, "PENDING", "", {"a"}, "Job/ns/x"),
                       MakeJob(8, "PENDING", "", {"a"}, "Job/ns/y")};
    r.want = {"two-live-jobs: pod UID uid-a is listed by 2 live Slurm jobs: 7, 8"};
    rows.push_back(r);
  }
  {
    Row r{.name = "a live job whose pods are gone or done", .snapshot = Base()};
    r.snapshot.pods = {MakePod("b", "n1", 7)};
    r.snapshot.pods[0].status.phase = "Failed";
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a", "b"}, "Job/ns/g")};
    r.want = {
        "orphan-job: Slurm job 7 (group Job/ns/g) is RUNNING but none of its pods is alive "
        "(ns/a gone; ns/b Failed)"};
    rows.push_back(r);
  }
  {
    Row r{.name = "one live pod keeps its gang's job", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7), MakePod("b", "n2", 7)};
    r.snapshot.pods[0].status.phase = "Succeeded";
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n[1-2]", {"a", "b"}, "Job/ns/g")};
    rows.push_back(r);
  }
  {
    Row r{.name = "a pod within its grace period keeps its job", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.pods[0].metadata.deletion_timestamp = "2026-01-01T00:02:00Z";
    r.snapshot.nodes[0] = MakeNode("n1", false);
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    rows.push_back(r);
  }
  {
    Row r{.name = "past the grace period on a NotReady node the job must go", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.pods[0].metadata.deletion_timestamp = "2026-01-01T00:00:30Z";
    r.snapshot.nodes[0] = MakeNode("n1", false);
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    r.want = {
        "orphan-job: Slurm job 7 (group Pod/ns/a) is RUNNING but none of its pods is alive "
        "(ns/a grace period over, node n1 not Ready)"};
    rows.push_back(r);
  }
  {
    Row r{.name = "past the grace period on a Ready node: the kubelet may still run it",
          .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.pods[0].metadata.deletion_timestamp = "2026-01-01T00:00:30Z";
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    rows.push_back(r);
  }
  {
    Row r{.name = "past the grace period, node deleted", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n4", 7)};
    r.snapshot.pods[0].metadata.deletion_timestamp = "2026-01-01T00:00:30Z";
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n4", {"a"})};
    r.want = {
        "orphan-job: Slurm job 7 (group Pod/ns/a) is RUNNING but none of its pods is alive "
        "(ns/a grace period over, node n4 gone)"};
    rows.push_back(r);
  }
  {
    Row r{.name = "released by the bridge while its job lives", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.pods[0].metadata.deletion_timestamp = "2026-01-01T00:02:00Z";
    r.snapshot.pods[0].metadata.finalizers.clear();
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    r.want = {
        "orphan-job: Slurm job 7 (group Pod/ns/a) is RUNNING but none of its pods is alive "
        "(ns/a being deleted, released by the bridge)"};
    rows.push_back(r);
  }
  {
    Row r{.name = "stuck long past the grace period", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.pods[0].metadata.deletion_timestamp = "2025-12-31T23:55:00Z";
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
    r.want = {
        "orphan-job: Slurm job 7 (group Pod/ns/a) is RUNNING but none of its pods is alive "
        "(ns/a stuck past its grace period)"};
    rows.push_back(r);
  }
  {
    Row r{.name = "a pending job for a pod deleted before binding", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "", 7)};
    r.snapshot.pods[0].metadata.deletion_timestamp = "2026-01-01T00:02:00Z";
    r.snapshot.jobs = {MakeJob(7, "PENDING", "", {"a"})};
    r.want = {
        "orphan-job: Slurm job 7 (group Pod/ns/a) is PENDING but none of its pods is alive "
        "(ns/a deleted before binding)"};
    rows.push_back(r);
  }
  {
    Row r{.name = "foreign, upstream and other-cluster jobs are not ours", .snapshot = Base()};
    slurm::JobInfo plain;
    plain.job_id = 1;
    plain.job_state = {"RUNNING"};
    slurm::JobInfo upstream = plain;
    upstream.job_id = 2;
    upstream.admin_comment = R"({"pods":["ns/x"]})";
    slurm::JobInfo other = MakeJob(3, "RUNNING", "n1", {"x"});
    JobTag t = *ParseJobTag(other.admin_comment);
    t.cluster = "another";
    other.admin_comment = EncodeJobTag(t);
    r.snapshot.jobs = {plain, upstream, other, MakeJob(4, "RUNNING", "n1", {"x"})};
    r.snapshot.jobs[3].admin_comment = EncodeJobTag({.pods = {"elsewhere/x"},
                                                     .uids = {"u"},
                                                     .cluster = "kubernetes",
                                                     .scheduler = "slurm-bridge-scheduler"});
    rows.push_back(r);
  }
  {
    Row r{.name = "an unbound pod whose job runs", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "", 7)};
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n2", {"a"})};
    r.want = {
        "waiting-on-running-job: pod ns/a waits unbound while its Slurm job 7 is RUNNING "
        "on n2"};
    rows.push_back(r);
  }
  {
    Row r{.name = "an unlabelled unbound pod whose job (by tag) runs", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "", 0)};
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n2", {"a"})};
    r.want = {
        "waiting-on-running-job: pod ns/a waits unbound while its Slurm job 7 is RUNNING "
        "on n2"};
    rows.push_back(r);
  }
  {
    Row r{.name = "two alive pods of one job on one node (review N-8)", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7), MakePod("b", "n1", 7)};
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n[1-2]", {"a", "b"}, "Job/ns/train")};
    r.want = {"two-pods-on-a-node: Slurm job 7 has 2 alive pods on node n1: ns/a, ns/b"};
    rows.push_back(r);
  }
  {
    Row r{.name = "a replacement beside its terminating predecessor (review N-8)",
          .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7), MakePod("b", "n1", 7)};
    r.snapshot.pods[0].metadata.deletion_timestamp = "2026-01-01T00:01:30Z";  // in its grace
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n[1-2]", {"a", "b"}, "Job/ns/train")};
    r.want = {"two-pods-on-a-node: Slurm job 7 has 2 alive pods on node n1: ns/a, ns/b"};
    rows.push_back(r);
  }
  {
    Row r{.name = "a replacement where its predecessor finished is fine", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7), MakePod("b", "n1", 7)};
    r.snapshot.pods[0].status.phase = "Succeeded";
    r.snapshot.jobs = {MakeJob(7, "RUNNING", "n[1-2]", {"a", "b"}, "Job/ns/train")};
    rows.push_back(r);
  }
  {
    Row r{.name = "a job of ours without a readable state is not over", .snapshot = Base()};
    r.snapshot.pods = {MakePod("a", "n1", 7)};
    r.snapshot.jobs = {MakeJob(7, "", "n1", {"a"})};
    r.want = {
        "bound-without-running-job: pod ns/a is bound to node n1 but its Slurm job 7 is "
        "without a state",
        "job-without-state: Slurm job 7 (group Pod/ns/a) has no state Slurm's answer could be "
        "read from"};
    rows.push_back(r);
  }
  return rows;
}

TEST(CheckInvariantsTest, Table) {
  InvariantOptions o;
  o.namespace_ = "ns";
  for (const Row& r : Rows()) {
    std::vector<std::string> got;
    for (const Violation& v : CheckInvariants(r.snapshot, kNow, o)) got.push_back(v.text);
    EXPECT_EQ(got, r.want) << r.name;
  }
}

TEST(CheckInvariantsTest, EmptyNamespaceChecksAll) {
  Snapshot s = Base();
  s.pods = {MakePod("a", "n1", 0)};
  s.pods[0].metadata.namespace_ = "elsewhere";
  std::vector<Violation> v = CheckInvariants(s, kNow, {});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].invariant, Invariant::kNoAllocation);
  EXPECT_EQ(v[0].subject, "pod elsewhere/a");
}

TEST(CheckInvariantsTest, OtherSchedulerName) {
  Snapshot s = Base();
  s.pods = {MakePod("a", "n1", 7)};
  s.jobs = {MakeJob(7, "RUNNING", "n1", {"a"})};
  InvariantOptions o{.scheduler_name = "other"};
  EXPECT_TRUE(CheckInvariants(s, kNow, o).empty());  // neither pod nor job is "other"'s
  s.pods[0].spec.scheduler_name = "other";
  std::vector<Violation> v = CheckInvariants(s, kNow, o);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].invariant, Invariant::kUnboundJob) << v[0].text;
}

// Invariant 8: with max_wait, a pod that waits unbound with no job for longer is a violation;
// one with a job (label or live tag), a gated one, or a younger one is not.
TEST(InvariantsTest, LivenessWithMaxWait) {
  Snapshot s = Base();
  s.pods = {MakePod("idle", "", 0), MakePod("young", "", 0), MakePod("labelled", "", 7),
            MakePod("gated", "", 0), MakePod("tagged", "", 0)};
  s.pods[0].metadata.creation_timestamp = "2026-01-01T00:00:00Z";
  s.pods[1].metadata.creation_timestamp = "2026-01-01T00:00:50Z";
  s.pods[2].metadata.creation_timestamp = "2026-01-01T00:00:00Z";
  s.pods[3].metadata.creation_timestamp = "2026-01-01T00:00:00Z";
  s.pods[3].spec.scheduling_gates = {"example.com/wait"};
  s.pods[4].metadata.creation_timestamp = "2026-01-01T00:00:00Z";
  s.jobs = {MakeJob(7, "PENDING", "", {"labelled"}, "Pod/ns/labelled"),
            MakeJob(8, "PENDING", "", {"tagged"}, "Pod/ns/tagged")};
  EXPECT_TRUE(CheckInvariants(s, kNow, {}).empty()) << "off by default";
  InvariantOptions o;
  o.max_wait = 30s;
  std::vector<Violation> v = CheckInvariants(s, kNow, o);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].text,
            "waiting-without-job: pod ns/idle has waited 60 s (more than 30 s) with no Slurm job");
}

}  // namespace
}  // namespace sb::bridge
