// SPDX-License-Identifier: Apache-2.0
// The scheduler's decisions, one reviewed scenario per row (review items 2-7, 16, 17).
#include "scheduler/planner.h"

#include <gtest/gtest.h>

#include "bridge/group.h"
#include "bridge/names.h"
#include "kube/codec.h"
#include "testing/testdata.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;

const TimePoint kT0 = TimePoint{} + 1000h;

kube::Pod MakePod(std::string name, std::string uid = "") {
  kube::Pod p;
  p.metadata.name = name;
  p.metadata.namespace_ = "ns";
  p.metadata.uid = uid.empty() ? "uid-" + name : uid;
  return p;
}

kube::Pod Labelled(kube::Pod p, std::int64_t job) {
  p.metadata.labels[std::string(bridge::kJobIdLabel)] = std::to_string(job);
  p.metadata.finalizers.push_back(std::string(bridge::kFinalizer));
  return p;
}

bridge::GroupSpec Gang(int size, std::string key = "Job/ns/train") {
  return bridge::GroupSpec{
      .key = key, .kind = "Job", .namespace_ = "ns", .name = "train", .size = size};
}

JobView Job(std::int64_t id, std::string state, std::vector<std::string> uids,
            std::vector<Holder> holders = {}, bool holders_known = true) {
  return JobView{.id = id,
                 .state = std::move(state),
                 .reason = "Resources",
                 .partition = "p",
                 .uids = std::move(uids),
                 .holders = std::move(holders),
                 .holders_known = holders_known};
}

std::vector<std::string> Names(const std::vector<const kube::Pod*>& pods) {
  std::vector<std::string> out;
  for (const kube::Pod* p : pods) out.push_back(p->metadata.name);
  return out;
}

// ---- PlanGroup ---------------------------------------------------------------------------

}  // namespace

void PrintTo(const Cancel& c, std::ostream* os) { *os << "{" << c.id << ", " << c.reason << "}"; }

namespace {

struct GroupRow {
  std::string name;
  GroupInput in;
  // Expected:
  std::vector<Cancel> cancel;
  bool forget = false;
  std::optional<std::int64_t> adopt;
  bool list_jobs = false;
  bool scan_jobs = false;
  std::vector<std::string> submit;
  std::vector<std::string> label;
  bool bind = false;
  std::string report_prefix;  // "" : no report
  bool recheck = false;
  // The rest of the plan (test audit N10: every field of the plan is checked in every row).
  std::string event_prefix;  // "" : no event (event_reason and event_message empty)
  std::vector<std::string> members;
  bool update_pending = false;
  bool incomplete = false;
  bool recheck_owners = false;
  int submit_size = 0;
};

TEST(PlanGroupTest, Table) {
  kube::Pod a = MakePod("a"), b = MakePod("b"), c = MakePod("c"), b2 = MakePod("b", "uid-b2");
  kube::Pod la = Labelled(a, 7), lb = Labelled(b, 7);
  // As the webhook makes them: the finalizer, no job-id label.
  kube::Pod fa = a, fb = b;
  fa.metadata.finalizers = fb.metadata.finalizers = {std::string(bridge::kFinalizer)};
  const GroupInput base{.spec = Gang(2), .jobs_listed_at = kT0 - 1s, .now = kT0};
  auto with = [&](auto&& edit) {
    GroupInput in = base;
    edit(in);
    return in;
  };
  std::vector<GroupRow> rows = {
      {.name = "complete group, no job: submit",
       .in = with([&](GroupInput& in) { in.pods = {&b, &a}; }),
       .submit = {"a", "b"}},
      // Item 4: pods beyond the group size wait for a job of their own.
      {.name = "more pods than the size: submit the first size",
       .in = with([&](GroupInput& in) { in.pods = {&c, &b, &a}; }),
       .submit = {"a", "b"}},
      {.name = "short of pods, within the fill grace: quiet recheck",
       .in = with([&](GroupInput& in) {
         in.pods = {&a};
         in.incomplete_since = kT0 - 1s;
       }),
       .recheck = true,
       .incomplete = true},
      {.name = "short of pods past the grace: report, read the owners again (item 3: size shrinks)",
       .in = with([&](GroupInput& in) {
         in.pods = {&a};
         in.incomplete_since = kT0 - 2min;
       }),
       .report_prefix = "waiting for 1 more pod(s) of Job train",
       .recheck = true,
       .incomplete = true,
       .recheck_owners = true},
      // Item 3: a member re-created after binding: the running job is found in a list read after.
      {.name = "short of pods, no job list since: read Slurm's jobs first",
       .in = with([&](GroupInput& in) {
         in.pods = {&b2};
         in.incomplete_since = kT0;
       }),
       .list_jobs = true,
       .incomplete = true},
      {.name = "re-created member: the running gang job with an active member is refilled",
       .in = with([&](GroupInput& in) {
         in.pods = {&b2};
         in.incomplete_since = kT0 - 1min;
         in.tagged = {Job(7, "RUNNING", {"uid-a", "uid-b"},
                          {{"uid-a", "n1", true}, {"uid-b", "n2", false}})};
       }),
       .adopt = 7,
       .bind = true},
      {.name = "finishing job (its pods done) is not refilled nor cancelled: a new job",
       .in = with([&](GroupInput& in) {
         in.spec = Gang(1);
         in.pods = {&c};
         in.tagged = {Job(7, "RUNNING", {"uid-a", "uid-b"},
                          {{"uid-a", "n1", false}, {"uid-b", "n2", false}})};
       }),
       .submit = {"c"}},
      // Test audit N10: this row expected a second job beside the running one (two live jobs).
      {.name = "running job, holders unknown: look again, never a second job",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.tagged = {Job(7, "RUNNING", {"uid-a", "uid-b"}, {}, /*holders_known=*/false)};
       }),
       .recheck = true},
      // Item 2: after a submit with an unknown outcome, look before submitting again.
      {.name = "submit outcome unknown, no list since: read Slurm's jobs",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.submit_doubt_since = kT0 - 1s;
         in.jobs_scanned_at = kT0 - 2s;
       }),
       .scan_jobs = true},
      // Issue #46: a refresh of the known jobs cannot show the lost submit's job.
      {.name = "submit outcome unknown, the known jobs refreshed since: still read the list",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.submit_doubt_since = kT0 - 2s;
         in.jobs_listed_at = kT0 - 1s;
         in.jobs_scanned_at = kT0 - 3s;
       }),
       .scan_jobs = true},
      {.name = "submit outcome unknown, the job exists: adopt it, never submit",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.submit_doubt_since = kT0 - 2s;
         in.jobs_listed_at = kT0 - 1s;
         in.jobs_scanned_at = kT0 - 1s;
         in.tagged = {Job(9, "PENDING", {"uid-a", "uid-b"})};
       }),
       .adopt = 9,
       .label = {"a", "b"},
       .report_prefix = "waiting for Slurm job 9",
       .members = {"a", "b"},
       .update_pending = true},
      {.name = "submit outcome unknown, no job in a fresh list: submit",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.submit_doubt_since = kT0 - 2s;
         in.jobs_listed_at = kT0 - 1s;
         in.jobs_scanned_at = kT0 - 1s;
       }),
       .submit = {"a", "b"}},
      // Item 2 / 16 at start-up: one job kept, the other unbound ones cancelled.
      {.name = "three unbound jobs tagged for the group: the running one is kept",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.tagged = {Job(5, "PENDING", {"uid-x", "uid-y"}), Job(8, "PENDING", {"uid-a", "uid-b"}),
                      Job(6, "RUNNING", {"uid-a", "uid-b"}, {})};
       }),
       .cancel = {{5, "a second Slurm job of Job/ns/train (job 6 is kept)",
                   CancelCause::kDuplicate},
                  {8, "a second Slurm job of Job/ns/train (job 6 is kept)",
                   CancelCause::kDuplicate}},
       .adopt = 6,
       .bind = true},
      {.name = "two pending jobs tagged for the group: keep the one for these pods",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.tagged = {Job(5, "PENDING", {"uid-x", "uid-y"}), Job(8, "PENDING", {"uid-a", "uid-b"})};
       }),
       .cancel = {{5, "a second Slurm job of Job/ns/train (job 8 is kept)",
                   CancelCause::kDuplicate}},
       .adopt = 8,
       .label = {"a", "b"},
       .report_prefix = "waiting for Slurm job 8",
       .members = {"a", "b"},
       .update_pending = true},
      {.name = "a refill job beside an unbound one: refill kept, unbound cancelled",
       .in = with([&](GroupInput& in) {
         in.pods = {&b2};
         in.tagged = {Job(4, "RUNNING", {"uid-a", "uid-b"}, {{"uid-a", "n1", true}}),
                      Job(9, "PENDING", {"uid-b2"})};
       }),
       .cancel = {{9, "a second Slurm job of Job/ns/train (job 4 is kept)",
                   CancelCause::kDuplicate}},
       .adopt = 4,
       .bind = true},
      // Item 4: only the pods the job is for are labelled.
      {.name = "pending job: label only its pods; the extra pod is left alone",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b, &c};
         in.tracked = Job(7, "PENDING", {"uid-a", "uid-b"});
       }),
       .label = {"a", "b"},
       .report_prefix = "waiting for Slurm job 7 in partition p: Resources",
       .members = {"a", "b"},
       .update_pending = true},
      {.name = "pending job, pods labelled already: no label patch",
       .in = with([&](GroupInput& in) {
         in.pods = {&la, &lb};
         in.tracked = Job(7, "PENDING", {"uid-a", "uid-b"});
       }),
       .report_prefix = "waiting for Slurm job 7",
       .members = {"a", "b"},
       .update_pending = true},
      {.name = "pending job, labels ride the Binding, finalizers from the webhook: no patch",
       .in = with([&](GroupInput& in) {
         in.pods = {&fa, &fb};
         in.tracked = Job(7, "PENDING", {"uid-a", "uid-b"});
         in.labels_ride_binding = true;
       }),
       .report_prefix = "waiting for Slurm job 7",
       .members = {"a", "b"},
       .update_pending = true},
      {.name = "pending job, labels ride the Binding, no finalizer: patched",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &fb};
         in.tracked = Job(7, "PENDING", {"uid-a", "uid-b"});
         in.labels_ride_binding = true;
       }),
       .label = {"a"},
       .report_prefix = "waiting for Slurm job 7",
       .members = {"a", "b"},
       .update_pending = true},
      {.name = "pending job, labels ride the Binding, a pod labelled with an ended job: patched",
       .in = with([&](GroupInput& in) {
         in.pods = {&la, &fb};
         in.tracked = Job(8, "PENDING", {"uid-a", "uid-b"});
         in.labels_ride_binding = true;
       }),
       .label = {"a"},
       .report_prefix = "waiting for Slurm job 8",
       .members = {"a", "b"},
       .update_pending = true},
      {.name = "pending job, labels set before the Binding: the webhook's pods are labelled",
       .in = with([&](GroupInput& in) {
         in.pods = {&fa, &fb};
         in.tracked = Job(7, "PENDING", {"uid-a", "uid-b"});
       }),
       .label = {"a", "b"},
       .report_prefix = "waiting for Slurm job 7",
       .members = {"a", "b"},
       .update_pending = true},
      {.name = "running tracked job: bind",
       .in = with([&](GroupInput& in) {
         in.pods = {&la, &lb};
         in.tracked = Job(7, "RUNNING", {"uid-a", "uid-b"});
       }),
       .bind = true},
      {.name = "tracked job ended before binding: forget, event, look again",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.tracked = Job(7, "CANCELLED", {"uid-a", "uid-b"});
       }),
       .forget = true,
       .recheck = true,
       .event_prefix = "Slurm job 7 ended (CANCELLED) before the pods were bound"},
      {.name = "pods gone: cancel the tracked job",
       .in = with([&](GroupInput& in) { in.tracked = Job(7, "PENDING", {"uid-a", "uid-b"}); }),
       .cancel = {{7, "its pods are gone"}},
       .forget = true},
      {.name = "single pod re-created: its old job is cancelled, a new one submitted",
       .in = with([&](GroupInput& in) {
         in.spec = bridge::GroupSpec{
             .key = "Pod/ns/b", .kind = "Pod", .namespace_ = "ns", .name = "b", .size = 1};
         in.pods = {&b2};
         in.tracked = Job(7, "PENDING", {"uid-b"});
       }),
       .cancel = {{7, "its pod was re-created"}},
       .forget = true,
       .submit = {"b"}},
      {.name = "single pod re-created, its old pod's jobs listed: pending one cancelled, a new job",
       .in = with([&](GroupInput& in) {
         in.spec = bridge::GroupSpec{
             .key = "Pod/ns/b", .kind = "Pod", .namespace_ = "ns", .name = "b", .size = 1};
         in.pods = {&b2};
         in.tagged = {Job(7, "PENDING", {"uid-b"}), Job(8, "RUNNING", {"uid-b"}, {})};
       }),
       .cancel = {{7, "its pod was re-created"}},
       .submit = {"b"}},
      {.name = "refilled job, no pod waits any more: forgotten, never cancelled",
       .in = with([&](GroupInput& in) {
         in.tracked = Job(7, "RUNNING", {"uid-a", "uid-b"}, {{"uid-a", "n1", true}});
         in.tracked->refill = true;
       }),
       .forget = true},
      // Item 5: no submit before a Slurm node list succeeded.
      {.name = "Slurm's nodes unknown: wait",
       .in = with([&](GroupInput& in) {
         in.pods = {&a, &b};
         in.slurm_nodes_known = false;
       }),
       .report_prefix = "waiting for Slurm's node list",
       .recheck = true},
  };
  for (const GroupRow& row : rows) {
    SCOPED_TRACE(row.name);
    GroupPlan plan = PlanGroup(row.in, PlannerOptions{});
    EXPECT_EQ(plan.cancel, row.cancel);
    EXPECT_EQ(plan.forget, row.forget);
    EXPECT_EQ(plan.adopt ? std::optional<std::int64_t>(plan.adopt->id) : std::nullopt, row.adopt);
    EXPECT_EQ(plan.list_jobs, row.list_jobs);
    EXPECT_EQ(plan.scan_jobs, row.scan_jobs);
    EXPECT_EQ(Names(plan.submit), row.submit);
    EXPECT_EQ(Names(plan.label), row.label);
    EXPECT_EQ(plan.bind, row.bind);
    if (row.report_prefix.empty()) {
      EXPECT_EQ(plan.report, "");
    } else {
      EXPECT_EQ(plan.report.rfind(row.report_prefix, 0), 0u) << plan.report;
    }
    EXPECT_EQ(plan.recheck_at.has_value(), row.recheck);
    if (row.event_prefix.empty()) {
      EXPECT_EQ(plan.event_reason, "");
      EXPECT_EQ(plan.event_message, "");
    } else {
      EXPECT_FALSE(plan.event_reason.empty());
      EXPECT_EQ(plan.event_message.rfind(row.event_prefix, 0), 0u) << plan.event_message;
    }
    EXPECT_EQ(Names(plan.members), row.members);
    EXPECT_EQ(plan.update_pending, row.update_pending);
    EXPECT_EQ(plan.incomplete, row.incomplete);
    EXPECT_EQ(plan.recheck_owners, row.recheck_owners);
    EXPECT_EQ(plan.submit_size, row.submit_size);
  }
}

TEST(PlanGroupTest, EndedJobSaysWhyInAnEvent) {
  kube::Pod a = MakePod("a");
  GroupPlan plan = PlanGroup({.spec = Gang(1),
                              .pods = {&a},
                              .tracked = Job(7, "GONE", {"uid-a"}),
                              .jobs_listed_at = kT0,
                              .now = kT0},
                             {});
  EXPECT_EQ(plan.event_reason, "SlurmJobEnded");
  EXPECT_EQ(plan.event_message,
            "Slurm job 7 ended (no longer known to Slurm) before the pods were bound; submitting a "
            "new job");
}

// Issue #29: a Job's new pod whose group Slurm's last list shows with a live job (bound
// before, then requeued) reads the list again before it adopts or submits; with a fresh list it
// adopts the requeued job, which keeps its id. A group new to Slurm's list submits at once.
TEST(PlanGroupTest, GroupWithAJobInAnOlderListReadsTheListFirst) {
  kube::Pod fresh = MakePod("fresh");
  const JobView stale = Job(7, "RUNNING", {"uid-old"}, {}, true);
  GroupInput in{.spec = Gang(1),
                .pods = {&fresh},
                .tagged = {stale},
                .jobs_listed_at = kT0 - 5s,
                .group_since = kT0 - 1s,
                .now = kT0};
  GroupPlan plan = PlanGroup(in, {});
  EXPECT_TRUE(plan.list_jobs);
  EXPECT_FALSE(plan.adopt);
  EXPECT_TRUE(plan.submit.empty());
  // Read again: the job is PENDING (requeued); the new pod's group adopts it.
  in.tagged = {Job(7, "PENDING", {"uid-old"})};
  in.jobs_listed_at = kT0;
  plan = PlanGroup(in, {});
  EXPECT_FALSE(plan.list_jobs);
  ASSERT_TRUE(plan.adopt);
  EXPECT_EQ(plan.adopt->id, 7);
  EXPECT_TRUE(plan.submit.empty());
  EXPECT_TRUE(plan.update_pending);
  // Nothing of the group in the list: submitted without a list.
  in.tagged.clear();
  in.jobs_listed_at = kT0 - 5s;
  plan = PlanGroup(in, {});
  EXPECT_FALSE(plan.list_jobs);
  EXPECT_EQ(Names(plan.submit), (std::vector<std::string>{"fresh"}));
}

TEST(PlanGroupTest, NewJobIsQuietUntilSlurmGivesAReason) {
  kube::Pod a = Labelled(MakePod("a"), 7);
  JobView job = Job(7, "PENDING", {"uid-a"});
  job.reason = "None";
  job.submitted = kT0 - 1s;
  GroupPlan plan = PlanGroup(
      {.spec = Gang(1), .pods = {&a}, .tracked = job, .jobs_listed_at = kT0, .now = kT0}, {});
  EXPECT_EQ(plan.report, "");
  EXPECT_EQ(plan.recheck_at, kT0 + 1s);
  EXPECT_TRUE(plan.update_pending);
}

TEST(PlanGroupTest, GatedPodsAreNotSchedulable) {
  // A pod as Kubernetes 1.30+ sends it, with two scheduling gates.
  Result<kube::Pod> pod =
      kube::Decode<kube::Pod>(sb::testing::ReadTestData("kube/pod_scheduling_gates.json"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(pod->spec.scheduling_gates,
            (std::vector<std::string>{"kueue.x-k8s.io/admission", "example.com/quota"}));
  EXPECT_FALSE(Schedulable(*pod));
  pod->spec.scheduling_gates.clear();
  EXPECT_TRUE(Schedulable(*pod));
  EXPECT_TRUE(Schedulable(MakePod("plain")));
}

// ---- PlanBind ----------------------------------------------------------------------------

std::vector<std::pair<std::string, std::string>> Assigned(const BindPlan& plan) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [pod, node] : plan.assign) out.emplace_back(pod->metadata.name, node);
  return out;
}

TEST(PlanBindTest, Table) {
  kube::Pod a = MakePod("a"), b = MakePod("b"), c = MakePod("c"), b2 = MakePod("b", "uid-b2");
  const std::map<std::string, std::string> map = {
      {"s1", "n1"}, {"s2", "n2"}, {"s3", "n3"}, {"s4", "n4"}};
  const BindInput base{.job = Job(7, "RUNNING", {"uid-a", "uid-b"}),
                       .slurm_nodes = {"s1", "s2"},
                       .kube_node_of = map,
                       .kind = "Job",
                       .name = "train",
                       .now = kT0};
  // The whole plan (test audit N10): every field of BindPlan, and with a retag the UIDs the
  // job's tag then lists (MergeTag).
  struct Row {
    std::string name;
    BindInput in;
    std::vector<std::pair<std::string, std::string>> assign;
    std::vector<std::string> retag;
    bool done = false;
    std::string report;
    std::optional<std::chrono::seconds> recheck_after;  // of kT0
  };
  auto with = [&](auto&& edit) {
    BindInput in = base;
    edit(in);
    return in;
  };
  std::vector<Row> rows = {
      {.name = "whole gang: one pod per node",
       .in = with([&](BindInput& in) { in.pods = {&b, &a}; }),
       .assign = {{"a", "n1"}, {"b", "n2"}},
       .done = true},
      {.name = "gang not complete and never bound: wait, bind nothing",
       .in = with([&](BindInput& in) { in.pods = {&a}; }),
       .report = "Slurm job 7 is running on 2 node(s); waiting for 1 more pod(s) of Job train to "
                 "bind them all at once"},
      // Item 4: a pod beyond the job's pods is not bound or labelled.
      {.name = "extra pod: only the job's pods bind",
       .in = with([&](BindInput& in) { in.pods = {&c, &b, &a}; }),
       .assign = {{"a", "n1"}, {"b", "n2"}},
       .done = true},
      // Item 3: a member re-created after binding takes its predecessor's node.
      {.name = "re-created member: bound into the free node, the tag gets its UID",
       .in = with([&](BindInput& in) {
         in.pods = {&b2};
         in.holders = {{"uid-a", "n1", true}, {"uid-b", "n2", false}};
       }),
       .assign = {{"b", "n2"}},
       .retag = {"uid-a", "uid-b", "uid-b2"},
       .done = true},
      {.name = "Job's last wave: one new pod into a two-node job, one node still busy",
       .in = with([&](BindInput& in) {
         in.pods = {&c};
         in.holders = {{"uid-a", "n1", false}, {"uid-b", "n2", true}};
       }),
       .assign = {{"c", "n1"}},
       .retag = {"uid-a", "uid-b", "uid-c"},
       .done = true},
      {.name = "refill with every node busy: wait for one",
       .in = with([&](BindInput& in) {
         in.pods = {&c};
         in.holders = {{"uid-a", "n1", true}, {"uid-b", "n2", true}};
       }),
       .report = "Slurm job 7 of Job train has a pod on each of its 2 node(s); waiting for one to "
                 "be free",
       .recheck_after = 10s},
      {.name = "binding cut short earlier: the rest binds",
       .in = with([&](BindInput& in) {
         in.pods = {&b};
         in.holders = {{"uid-a", "n1", true}};
       }),
       .assign = {{"b", "n2"}},
       .done = true},
      {.name = "pod annotated with a free node keeps it",
       .in = with([&](BindInput& in) {
         static kube::Pod annotated = [] {
           kube::Pod p = MakePod("a");
           p.metadata.annotations[std::string(bridge::kNodeAnnotation)] = "n2";
           return p;
         }();
         in.pods = {&annotated, &b};
       }),
       .assign = {{"a", "n2"}, {"b", "n1"}},
       .done = true},
      // Item 7 (when Slurm gave more nodes than pods, e.g. an adopted job): all-or-nothing.
      {.name = "more nodes than pods: wait",
       .in = with([&](BindInput& in) {
         in.job.uids = {"uid-a"};
         in.pods = {&a};
       }),
       .report = "Slurm job 7 is running on 2 node(s); waiting for 1 more pod(s) of Job train to "
                 "bind them all at once"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    BindPlan plan = PlanBind(row.in, {});
    EXPECT_EQ(Assigned(plan), row.assign);
    EXPECT_EQ(plan.retag, !row.retag.empty());
    if (plan.retag) {
      const TagMembers current{.uids = row.in.job.uids, .pods = row.in.job.pods};
      EXPECT_EQ(MergeTag(current, row.in.holders, row.in.pods, plan.assign).uids, row.retag);
    }
    EXPECT_EQ(plan.done, row.done);
    EXPECT_TRUE(plan.unmapped.empty());
    EXPECT_FALSE(plan.cancel);
    EXPECT_EQ(plan.event_reason, "");
    EXPECT_EQ(plan.event_message, "");
    EXPECT_EQ(plan.report, row.report);
    if (row.recheck_after) {
      EXPECT_EQ(plan.recheck_at, kT0 + *row.recheck_after);
    } else {
      EXPECT_FALSE(plan.recheck_at);
    }
  }
}

// Item 5: a node Slurm allocated that Kubernetes lacks.
TEST(PlanBindTest, UnmappedNodeIsCancelledAfterTheGrace) {
  kube::Pod a = MakePod("a");
  BindInput in{.job = Job(7, "RUNNING", {"uid-a"}),
               .slurm_nodes = {"x9"},
               .kube_node_of = {{"s1", "n1"}},
               .pods = {&a},
               .kind = "Pod",
               .name = "a",
               .now = kT0};
  BindPlan first = PlanBind(in, {});
  EXPECT_EQ(first.unmapped, std::vector<std::string>{"x9"});
  EXPECT_FALSE(first.cancel);
  EXPECT_TRUE(first.assign.empty());
  EXPECT_EQ(first.report, "Slurm job 7 was allocated node x9, which matches no Kubernetes node");
  EXPECT_EQ(first.recheck_at, kT0 + 5s);
  in.unmapped_since = kT0 - 29s;
  EXPECT_FALSE(PlanBind(in, {}).cancel);
  EXPECT_EQ(PlanBind(in, {}).recheck_at, kT0 + 1s);
  in.unmapped_since = kT0 - 30s;
  BindPlan late = PlanBind(in, {});
  ASSERT_TRUE(late.cancel);
  EXPECT_EQ(late.cancel->id, 7);
  EXPECT_EQ(late.cancel->cause, CancelCause::kNodeNotInKubernetes);
  EXPECT_EQ(late.event_reason, "SlurmNodeNotInKubernetes");
  EXPECT_EQ(late.event_message,
            "Slurm job 7 was allocated node(s) x9, which match no Kubernetes node; cancelled it, "
            "the next job excludes them");
}

// ---- PlanDuplicates (items 2, 16) --------------------------------------------------------

TEST(PlanDuplicatesTest, SecondUnboundJobOfATrackedGroupIsCancelled) {
  std::map<std::string, std::vector<JobView>> listed = {
      {"Job/ns/a",
       {Job(1, "PENDING", {"u"}), Job(2, "PENDING", {"u"}), Job(3, "RUNNING", {"u"}, {}),
        Job(4, "RUNNING", {"u"}, {{"u", "n1", true}}),          // bound pods: controllers'
        Job(5, "RUNNING", {"u"}, {}, /*holders_known=*/false),  // unknown: left alone
        Job(6, "COMPLETED", {"u"})}},
      {"Job/ns/untracked", {Job(10, "PENDING", {"v"})}},
  };
  std::vector<Cancel> c = PlanDuplicates({{"Job/ns/a", 1}}, listed);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].id, 2);
  EXPECT_EQ(c[1].id, 3);
  EXPECT_EQ(c[0].reason, "a second Slurm job of Job/ns/a (job 1 is kept)");
  EXPECT_EQ(c[0].cause, CancelCause::kDuplicate);
  EXPECT_TRUE(PlanDuplicates({}, listed).empty());
}

// ---- FitNodeCount (item 7) ---------------------------------------------------------------

TEST(FitNodeCountTest, RangeIsSetToThePodCount) {
  slurm::JobDescription j;
  j.nodes = "2";
  j.minimum_nodes = 2;
  j.maximum_nodes = 2;
  EXPECT_FALSE(FitNodeCount(j, 2));
  EXPECT_EQ(j.nodes, "2");

  // A single pod with max-nodes 2 would get two nodes and never bind: it gets one.
  j = {};
  j.nodes = "1-2";
  j.minimum_nodes = 1;
  j.maximum_nodes = 2;
  std::optional<std::string> why = FitNodeCount(j, 1);
  ASSERT_TRUE(why);
  EXPECT_EQ(*why,
            "annotations slurmjob.slinky.slurm.net/min-nodes/slurmjob.slinky.slurm.net/max-nodes "
            "ask for 1-2 node(s); the bridge binds one pod per node, so the job of 1 pod(s) asks "
            "Slurm for 1 node(s)");
  EXPECT_EQ(j.nodes, "1");
  EXPECT_EQ(j.minimum_nodes, 1);
  EXPECT_EQ(j.maximum_nodes, 1);

  // A gang of 4 with min-nodes 2 (only min set: Translate keeps nodes "4") gets exactly 4.
  j = {};
  j.nodes = "4";
  j.minimum_nodes = 2;
  j.maximum_nodes = 4;
  ASSERT_TRUE(FitNodeCount(j, 4));
  EXPECT_EQ(j.nodes, "4");
  EXPECT_EQ(j.minimum_nodes, 4);
}

// ---- MapSlurmNodes (item 17) -------------------------------------------------------------

TEST(MapSlurmNodesTest, LabelledNodeWinsWhateverTheOrder) {
  kube::Node labelled;
  labelled.metadata.name = "gpu-01";
  labelled.metadata.labels[std::string(bridge::kSlurmNodeNameLabel)] = "n1";
  kube::Node named;
  named.metadata.name = "n1";
  kube::Node other;
  other.metadata.name = "n2";
  for (const auto& order : std::vector<std::vector<const kube::Node*>>{
           {&labelled, &named, &other}, {&named, &labelled, &other}}) {
    NodeMapping m = MapSlurmNodes(order);
    EXPECT_EQ(m.by_slurm_name.at("n1"), &labelled);
    EXPECT_EQ(m.by_slurm_name.at("n2"), &other);
    EXPECT_EQ(m.duplicates, std::vector<std::string>{"n1"});
  }
}

// ---- PodGroup read errors (item 6) and submit outcomes (item 2) --------------------------

TEST(SubmitOutcomeTest, TimeoutsAndLostRepliesAreUnknown) {
  EXPECT_TRUE(SubmitOutcomeUnknown(ErrorCode::kDeadlineExceeded));
  EXPECT_TRUE(SubmitOutcomeUnknown(ErrorCode::kUnavailable));
  EXPECT_TRUE(SubmitOutcomeUnknown(ErrorCode::kInternal));
  EXPECT_FALSE(SubmitOutcomeUnknown(ErrorCode::kInvalidArgument));
  EXPECT_FALSE(SubmitOutcomeUnknown(ErrorCode::kPermissionDenied));
}

// ---- Group size of a gang Job (item 3: the last smaller wave) ----------------------------

TEST(GangJobSizeTest, FromTheWorkLeft) {
  kube::Pod pod = MakePod("train-x");
  pod.metadata.owner_references.push_back(
      {.api_version = "batch/v1", .kind = "Job", .name = "train", .controller = true});
  kube::GenericObject job;
  job.api_version = "batch/v1";
  job.kind = "Job";
  job.metadata.name = "train";
  job.metadata.namespace_ = "ns";
  job.metadata.annotations[std::string(bridge::kGangAnnotation)] = "true";
  job.spec_json = R"({"parallelism":2,"completions":3})";
  struct Row {
    std::string status;
    int size;
  };
  for (const Row& r : std::vector<Row>{{"", 2},
                                       {R"({"active":2})", 2},
                                       {R"({"active":1,"succeeded":1})", 2},
                                       {R"({"succeeded":2})", 1},
                                       {R"({"succeeded":3})", 1}}) {
    job.status_json = r.status;
    Result<bridge::GroupSpec> g = bridge::ResolveGroup(pod, {job}, nullptr);
    ASSERT_TRUE(g) << g.error().message;
    EXPECT_EQ(g->size, r.size) << r.status;
  }
}

// Review N-1, N-16: the retag starts from Slurm's tag, keeps the pods bound to the job (running
// or done) and those still waiting, drops the pods that are gone, and adds the assigned ones.
TEST(MergeTagTest, FromSlurmsTagKeepsLivePodsDropsGoneOnesAddsTheAssigned) {
  kube::Pod d = MakePod("d");
  kube::Pod e = MakePod("e");
  const TagMembers current{.uids = {"uid-a", "uid-b", "uid-c", "uid-d"},
                           .pods = {"ns/a", "ns/b", "ns/c", "ns/d"}};
  const std::vector<Holder> holders = {{"uid-a", "n1", false}, {"uid-b", "n2", true}};
  const TagMembers merged = MergeTag(current, holders, {&d, &e}, {{&e, "n1"}});
  EXPECT_EQ(merged.uids, (std::vector<std::string>{"uid-a", "uid-b", "uid-d", "uid-e"}));
  EXPECT_EQ(merged.pods, (std::vector<std::string>{"ns/a", "ns/b", "ns/d", "ns/e"}));
  // An assigned pod already listed is not listed twice.
  EXPECT_EQ(MergeTag(merged, holders, {&d, &e}, {{&d, "n1"}}), merged);
}

// Review N-8: a pod being deleted still holds its node (the kubelet counts it until it is gone):
// the replacement waits, and the group is looked at again soon.
TEST(PlanBindTest, TerminatingHolderKeepsItsNodeUntilGone) {
  kube::Pod c = MakePod("c");
  BindInput in{.job = Job(7, "RUNNING", {"uid-a", "uid-b"}),
               .slurm_nodes = {"n1", "n2"},
               .kube_node_of = {{"n1", "n1"}, {"n2", "n2"}},
               .pods = {&c},
               .holders = {{.uid = "uid-a", .node = "n1"},
                           {.uid = "uid-b", .node = "n2", .active = true, .terminating = true}},
               .kind = "Job",
               .name = "train",
               .now = kT0};
  BindPlan plan = PlanBind(in, {});
  EXPECT_TRUE(plan.assign.empty());
  EXPECT_FALSE(plan.cancel);
  EXPECT_NE(plan.report.find("a pod is terminating on n2"), std::string::npos) << plan.report;
  EXPECT_EQ(plan.recheck_at, kT0 + 2s);
  // Its phase terminal (the kubelet stopped it): the node is free.
  in.holders[1] = {.uid = "uid-b", .node = "n2", .active = false};
  plan = PlanBind(in, {});
  EXPECT_EQ(Assigned(plan), (std::vector<std::pair<std::string, std::string>>{{"c", "n2"}}));
}

// Review N-14: a running job with pods bound is never cancelled for a node Kubernetes lacks;
// its other free nodes still take pods.
TEST(PlanBindTest, RefillIsNeverCancelledForAnUnmappedNode) {
  kube::Pod c = MakePod("c");
  kube::Pod d = MakePod("d");
  BindInput in{.job = Job(7, "RUNNING", {"uid-a", "uid-b", "uid-x"}),
               .slurm_nodes = {"n1", "n2", "n3"},
               .kube_node_of = {{"n1", "n1"}, {"n2", "n2"}},
               .pods = {&c},
               .holders = {{.uid = "uid-a", .node = "n1"}, {.uid = "uid-b", .node = "n2"}},
               .kind = "Job",
               .name = "train",
               .unmapped_since = kT0 - 1h,
               .now = kT0};
  BindPlan plan = PlanBind(in, {});
  EXPECT_FALSE(plan.cancel);
  EXPECT_TRUE(plan.assign.empty());
  EXPECT_EQ(plan.unmapped, std::vector<std::string>{"n3"});
  EXPECT_NE(plan.report.find("its node(s) n3 match no Kubernetes node"), std::string::npos)
      << plan.report;
  // n2's pod done: the waiting pod binds there; still no cancel.
  in.holders[1].active = false;
  in.pods = {&c, &d};
  plan = PlanBind(in, {});
  EXPECT_FALSE(plan.cancel);
  EXPECT_EQ(Assigned(plan), (std::vector<std::pair<std::string, std::string>>{{"c", "n2"}}));
}

// Review N-10: a job this process tried to bind is cancelled as "pods gone" only when the
// apiserver shows no pod bound to it.
TEST(PlanGroupTest, PodsGoneAfterABindCancelOnlyWithNoHolder) {
  JobView job = Job(7, "RUNNING", {"uid-a"}, {}, /*holders_known=*/false);
  job.bind_tried = true;
  GroupPlan plan = PlanGroup({.spec = Gang(1), .tracked = job, .now = kT0}, {});
  EXPECT_TRUE(plan.cancel.empty()) << "holders not read";
  EXPECT_TRUE(plan.forget);
  job.holders_known = true;
  job.holders = {{.uid = "uid-a", .node = "n1"}};
  plan = PlanGroup({.spec = Gang(1), .tracked = job, .now = kT0}, {});
  EXPECT_TRUE(plan.cancel.empty()) << "a pod is bound to it";
  job.holders.clear();
  plan = PlanGroup({.spec = Gang(1), .tracked = job, .now = kT0}, {});
  ASSERT_EQ(plan.cancel.size(), 1u);
  EXPECT_EQ(plan.cancel.front().reason, "its pods are gone");
}

// Review N-9: the remainder of a PodGroup that ran before, with no live job in a list read after
// it became short, is submitted at its own size; other kinds, or a group that never ran, wait.
TEST(PlanGroupTest, PodGroupThatRanBeforeSubmitsItsRemainder) {
  kube::Pod c = MakePod("c");
  bridge::GroupSpec pg = Gang(3, "PodGroup/ns/pg");
  pg.kind = "PodGroup";
  pg.name = "pg";
  GroupInput in{.spec = pg,
                .pods = {&c},
                .jobs_listed_at = kT0 - 1s,
                .incomplete_since = kT0 - 5s,
                .ran_before = true,
                .now = kT0};
  GroupPlan plan = PlanGroup(in, {});
  EXPECT_EQ(Names(plan.submit), std::vector<std::string>{"c"});
  EXPECT_EQ(plan.submit_size, 1);
  EXPECT_EQ(plan.event_reason, "PodGroupRemainder");
  // The list is older than the shortage: read it first (a live job would be the group's).
  in.jobs_listed_at = kT0 - 10s;
  EXPECT_TRUE(PlanGroup(in, {}).list_jobs);
  in.jobs_listed_at = kT0 - 1s;
  in.ran_before = false;
  plan = PlanGroup(in, {});
  EXPECT_TRUE(plan.submit.empty());
  EXPECT_EQ(plan.report.rfind("waiting for 2 more pod(s) of PodGroup pg", 0), 0u) << plan.report;
  in.ran_before = true;
  in.spec = Gang(3);
  EXPECT_TRUE(PlanGroup(in, {}).submit.empty()) << "a Job's size follows its spec";
}

// Review N-15: a refill binds a waiting pod only onto a free node of the job it may run on.
TEST(PlanBindTest, RefillLeavesOutNodesThePodCannotRunOn) {
  kube::Pod c = MakePod("c");
  BindInput in{
      .job = Job(7, "RUNNING", {"uid-a", "uid-b"}),
      .slurm_nodes = {"n1", "n2"},
      .kube_node_of = {{"n1", "n1"}, {"n2", "n2"}},
      .pods = {&c},
      .holders = {{.uid = "uid-a", .node = "n1", .active = false}, {.uid = "uid-b", .node = "n2"}},
      .excluded_for = {{"uid-c", {"n1"}}},
      .kind = "PodGroup",
      .name = "pg",
      .now = kT0};
  BindPlan plan = PlanBind(in, {});
  EXPECT_TRUE(plan.assign.empty());
  EXPECT_NE(plan.report.find("has free node(s) n1, which the pod cannot run on"), std::string::npos)
      << plan.report;
  EXPECT_EQ(plan.recheck_at, kT0 + 10s);
  in.holders[1].active = false;  // n2 is free too, and fits
  plan = PlanBind(in, {});
  EXPECT_EQ(Assigned(plan), (std::vector<std::pair<std::string, std::string>>{{"c", "n2"}}));
}

// Issue #27: a heterogeneous job's pods bind only to the nodes of their own component, all at
// once (every component's nodes need a pod of its part); a refill fills its own part's place.
TEST(PlanBindTest, HeterogeneousJobBindsEachPartToItsComponentsNodes) {
  kube::Pod l = MakePod("launcher"), w0 = MakePod("w0"), w1 = MakePod("w1"), w2 = MakePod("w2");
  BindInput in{.job = Job(9, "RUNNING", {"uid-launcher", "uid-w0", "uid-w1", "uid-w2"}),
               // component 0 on s1, component 1 on s2..s4
               .slurm_nodes = {"s1", "s2", "s3", "s4"},
               .node_part = {0, 1, 1, 1},
               .part_of = {{"uid-launcher", 0}, {"uid-w0", 1}, {"uid-w1", 1}, {"uid-w2", 1}},
               .kube_node_of = {{"s1", "n1"}, {"s2", "n2"}, {"s3", "n3"}, {"s4", "n4"}},
               // the workers first by name: an ordinary job would give w0 n1
               .pods = {&w0, &w1, &w2, &l},
               .kind = "JobSet",
               .name = "mpi",
               .now = kT0};
  in.job.parts = {"launcher", "worker"};
  BindPlan plan = PlanBind(in, {});
  std::map<std::string, std::string> got;
  for (const auto& [pod, node] : plan.assign) got[pod->metadata.name] = node;
  EXPECT_EQ(got["launcher"], "n1");
  EXPECT_EQ((std::set<std::string>{got["w0"], got["w1"], got["w2"]}),
            (std::set<std::string>{"n2", "n3", "n4"}));
  EXPECT_TRUE(plan.done);
  EXPECT_FALSE(plan.retag);

  // Four workers and no launcher: as many pods as nodes, yet the launcher's place is empty, so
  // nothing binds.
  kube::Pod w3 = MakePod("w3");
  BindInput short_of_launcher = in;
  short_of_launcher.pods = {&w0, &w1, &w2, &w3};
  short_of_launcher.part_of.erase("uid-launcher");
  short_of_launcher.part_of["uid-w3"] = 1;
  BindPlan waits = PlanBind(short_of_launcher, {});
  EXPECT_TRUE(waits.assign.empty());
  EXPECT_EQ(waits.report,
            "Slurm job 9 is running on 4 node(s); waiting for 1 more pod(s) of JobSet mpi to bind "
            "them all at once");

  // A refill: the launcher is bound on n1; a re-created worker takes the free worker node, never
  // a launcher's node, and a re-created launcher waits while n1 is held.
  BindInput refill = in;
  refill.holders = {{.uid = "uid-launcher", .node = "n1", .part = 0},
                    {.uid = "uid-w0", .node = "n2", .part = 1},
                    {.uid = "uid-w1", .node = "n3", .part = 1}};
  kube::Pod w2b = MakePod("w2", "uid-w2b");
  refill.pods = {&w2b};
  refill.part_of = {{"uid-w2b", 1}};
  BindPlan filled = PlanBind(refill, {});
  ASSERT_EQ(filled.assign.size(), 1u);
  EXPECT_EQ(filled.assign[0].second, "n4");
  EXPECT_TRUE(filled.retag);

  // A re-created launcher while the old one still terminates on n1: the free node n4 is a
  // worker's, so it waits.
  kube::Pod l2 = MakePod("launcher", "uid-l2");
  refill.holders[0].terminating = true;
  refill.pods = {&l2};
  refill.part_of = {{"uid-l2", 0}};
  BindPlan none = PlanBind(refill, {});
  EXPECT_TRUE(none.assign.empty()) << "bound to " << none.assign[0].second;
  EXPECT_EQ(none.report,
            "Slurm job 9 of JobSet mpi has free node(s) n4, which the pod cannot run on (its node "
            "selector, affinity, tolerations or requests, or its part of the heterogeneous job); "
            "waiting for a node of the job it fits, or for a job of its own");

  // A pod of a part the job has not (-1) never binds to it.
  BindInput unknown = in;
  unknown.holders = {{.uid = "uid-w0", .node = "n2", .part = 1}};
  kube::Pod odd = MakePod("odd");
  unknown.pods = {&odd};
  unknown.part_of = {{"uid-odd", -1}};
  EXPECT_TRUE(PlanBind(unknown, {}).assign.empty());
}

// The pods of a pending job hear Slurm's reason and, once its planner gives one, the expected
// start; the metric's reason comes from the same words.
TEST(WaitingMessageTest, SlurmReasonAndExpectedStart) {
  JobView j = Job(12, "PENDING", {"uid-a"});
  j.reason = "Priority";
  EXPECT_EQ(WaitingMessage(j), "waiting for Slurm job 12 in partition p: Priority");
  j.expected_start = 1'796'414'940;  // 2026-12-04T20:09:00Z
  const std::string msg = WaitingMessage(j);
  EXPECT_EQ(msg,
            "waiting for Slurm job 12 in partition p: Priority; expected to start "
            "2026-12-04T20:09:00Z");
  EXPECT_EQ(WithoutExpectedStart(msg), "waiting for Slurm job 12 in partition p: Priority");
  EXPECT_TRUE(HasExpectedStart(msg));
  EXPECT_FALSE(HasExpectedStart(WithoutExpectedStart(msg)));
  j.state = "RUNNING";
  j.reason = "None";
  EXPECT_EQ(WaitingMessage(j), "waiting for Slurm job 12 in partition p: RUNNING")
      << "a running job has no expected start";

  EXPECT_EQ(WaitingReason(msg), "Priority");
  EXPECT_EQ(WaitingReason("waiting for Slurm job 3 in partition p: QOSMaxJobsPerUserLimit"),
            "QOSMaxJobsPerUserLimit");
  EXPECT_EQ(WaitingReason("waiting for Slurm job 3 in partition p"), "slurm_pending");
  EXPECT_EQ(WaitingReason("waiting for 1 more pod(s) of PodGroup pg: Slurm allocates the group "
                          "of 3 as one job"),
            "gang_incomplete");
  EXPECT_EQ(WaitingReason("submitting the Slurm job failed: connection refused; trying again"),
            "submitting");
  EXPECT_EQ(WaitingReason("waiting for persistentvolumeclaim \"data\" to be bound"),
            "not_described");
}

}  // namespace
}  // namespace sb::scheduler
