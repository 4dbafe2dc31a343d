// SPDX-License-Identifier: Apache-2.0
#include "bridge/job_update.h"

#include <gtest/gtest.h>

namespace sb::bridge {
namespace {

using slurm::JobDescription;
using slurm::NoValNumber;
using Names = std::vector<std::string>;

JobDescription Submitted() {
  JobDescription j;
  j.name = "pod-a";
  j.partition = "batch";
  j.flags = {"EXTERNAL_JOB"};
  j.current_working_directory = "/tmp";
  j.nodes = "1";
  j.minimum_nodes = 1;
  j.maximum_nodes = 1;
  j.tasks_per_node = 1;
  j.cpus_per_task = 2;
  j.memory_per_node = NoValNumber::Of(512);
  j.time_limit = NoValNumber::Of(60);
  j.comment = "first";
  j.excluded_nodes = {"n2"};
  j.shared = {"none"};
  j.user_id = "1000";
  j.admin_comment = R"({"pods":["ns/a"]})";
  return j;
}

TEST(PendingJobUpdate, UnchangedJobSendsNothing) {
  JobUpdate u = PendingJobUpdate(Submitted(), Submitted());
  EXPECT_TRUE(u.changed.empty());
  EXPECT_TRUE(u.kept.empty());
  EXPECT_TRUE(u.changes.clear.empty());
}

TEST(PendingJobUpdate, OnlyChangedFieldsAreSent) {
  JobDescription wanted = Submitted();
  wanted.comment = "second";
  wanted.excluded_nodes = {"n2", "n3"};
  wanted.constraints = "fast";
  wanted.priority = NoValNumber::Of(10);
  JobUpdate u = PendingJobUpdate(Submitted(), wanted);
  EXPECT_EQ(u.changed, (Names{"constraints", "comment", "priority", "excluded_nodes"}));
  EXPECT_EQ(u.changes.comment, "second");
  EXPECT_EQ(u.changes.excluded_nodes, (Names{"n2", "n3"}));
  EXPECT_EQ(u.changes.constraints, "fast");
  EXPECT_EQ(u.changes.priority, NoValNumber::Of(10));
  // Unchanged fields are not sent.
  EXPECT_EQ(u.changes.name, "");
  EXPECT_EQ(u.changes.partition, "");
  EXPECT_FALSE(u.changes.memory_per_node.set);
  EXPECT_FALSE(u.changes.cpus_per_task.has_value());
  EXPECT_TRUE(u.changes.shared.empty());
  EXPECT_TRUE(u.kept.empty());
  EXPECT_TRUE(u.resubmit.empty());
}

// Review R-1: Slurm takes an operator's update of a pending job's time limit or TRES as set by
// an admin, past the partition's MaxTime and the QOS's MaxTRESPerJob. A change of any field a
// limit looks at is never sent: the job is to be submitted anew, and Slurm checks it then.
TEST(PendingJobUpdate, ChangesThatLimitsLookAtAreResubmittedNotSent) {
  struct Case {
    const char* name;
    void (*change)(JobDescription&);
  };
  const Case cases[] = {
      {"time_limit", [](JobDescription& j) { j.time_limit = NoValNumber::Of(525600); }},
      {"time_limit", [](JobDescription& j) { j.time_limit = NoValNumber::Of(5); }},
      {"cpus_per_task", [](JobDescription& j) { j.cpus_per_task = 64; }},
      {"memory_per_node", [](JobDescription& j) { j.memory_per_node = NoValNumber::Of(1 << 20); }},
      {"tres_per_node", [](JobDescription& j) { j.tres_per_node = "gres/gpu=8"; }},
      {"tres_per_job", [](JobDescription& j) { j.tres_per_job = "gres/gpu=8"; }},
      {"licenses", [](JobDescription& j) { j.licenses = "matlab:50"; }},
      {"partition", [](JobDescription& j) { j.partition = "long"; }},
      {"account", [](JobDescription& j) { j.account = "rich"; }},
      {"qos", [](JobDescription& j) { j.qos = "high"; }},
      {"reservation", [](JobDescription& j) { j.reservation = "theirs"; }},
      {"wckey", [](JobDescription& j) { j.wckey = "w"; }},
      {"mcs_label", [](JobDescription& j) { j.mcs_label = "other"; }},
      {"nodes", [](JobDescription& j) { j.nodes = "64"; }},
      {"minimum_nodes", [](JobDescription& j) { j.minimum_nodes = 64; }},
      {"tasks", [](JobDescription& j) { j.tasks = 64; }},
      {"tasks_per_node", [](JobDescription& j) { j.tasks_per_node = 64; }},
      {"shared", [](JobDescription& j) { j.shared = {}; }},
      // Removed: Slurm cannot be told to forget it in place, a new job goes without it.
      {"time_limit", [](JobDescription& j) { j.time_limit = NoValNumber::Unset(); }},
  };
  for (const Case& c : cases) {
    JobDescription wanted = Submitted();
    wanted.comment = "also changed";
    c.change(wanted);
    JobUpdate u = PendingJobUpdate(Submitted(), wanted);
    EXPECT_EQ(u.resubmit, Names{c.name}) << c.name;
    EXPECT_TRUE(u.changed.empty()) << c.name << ": nothing is sent to a job submitted anew";
    EXPECT_TRUE(u.changes.clear.empty()) << c.name;
    EXPECT_FALSE(u.changes.time_limit.set) << c.name;
    EXPECT_FALSE(u.changes.cpus_per_task.has_value()) << c.name;
    EXPECT_EQ(u.changes.comment, "") << c.name;
  }
}

TEST(PendingJobUpdate, FieldsSlurmFixesAtSubmitAreNeverSent) {
  JobDescription wanted = Submitted();
  wanted.flags = {};
  wanted.user_id = "2000";
  wanted.current_working_directory = "/home";
  wanted.script = "#!/bin/sh\n";
  JobUpdate u = PendingJobUpdate(Submitted(), wanted);
  EXPECT_TRUE(u.changed.empty());
  EXPECT_TRUE(u.changes.flags.empty());
  EXPECT_FALSE(u.changes.script.has_value());
  EXPECT_EQ(u.changes.user_id, "");
}

TEST(PendingJobUpdate, RemovedValuesAreClearedWhereSlurmAllowsIt) {
  JobDescription submitted = Submitted();
  submitted.priority = NoValNumber::Of(5);
  submitted.constraints = "fast";
  JobDescription wanted = submitted;
  wanted.comment.clear();
  wanted.excluded_nodes.clear();
  wanted.constraints.clear();
  wanted.priority = NoValNumber::Unset();
  JobUpdate u = PendingJobUpdate(submitted, wanted);
  EXPECT_EQ(u.changes.clear, (Names{"constraints", "comment", "excluded_nodes"}));
  EXPECT_EQ(u.changed, (Names{"constraints", "comment", "excluded_nodes"}));
  // No way to tell Slurm "no priority annotation": it keeps the one it has.
  EXPECT_EQ(u.kept, (Names{"priority"}));
  EXPECT_TRUE(u.resubmit.empty());
}

TEST(PendingJobUpdate, FromNothingSendsEveryFieldUpdatedInPlace) {
  // An adopted job: what it was submitted with is not known. The fields updated in place are
  // sent once; those that limits look at are taken to be as submitted (never sent: review R-1).
  JobDescription wanted = Submitted();
  wanted.constraints = "fast";
  JobUpdate u = PendingJobUpdate(std::nullopt, wanted);
  EXPECT_EQ(u.changed,
            (Names{"name", "constraints", "comment", "admin_comment", "excluded_nodes"}));
  EXPECT_TRUE(u.resubmit.empty());
  EXPECT_TRUE(u.changes.flags.empty());
  EXPECT_EQ(u.changes.user_id, "");
  EXPECT_FALSE(u.changes.time_limit.set);
  EXPECT_FALSE(u.changes.cpus_per_task.has_value());
  EXPECT_EQ(u.changes.partition, "");
}

}  // namespace
}  // namespace sb::bridge
