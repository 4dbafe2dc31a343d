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
  wanted.cpus_per_task = 4;
  wanted.time_limit = NoValNumber::Of(30);
  wanted.excluded_nodes = {"n2", "n3"};
  wanted.tres_per_node = "gres/gpu=1";
  JobUpdate u = PendingJobUpdate(Submitted(), wanted);
  EXPECT_EQ(u.changed,
            (Names{"comment", "cpus_per_task", "time_limit", "tres_per_node", "excluded_nodes"}));
  EXPECT_EQ(u.changes.comment, "second");
  EXPECT_EQ(u.changes.cpus_per_task, 4);
  EXPECT_EQ(u.changes.time_limit, NoValNumber::Of(30));
  EXPECT_EQ(u.changes.excluded_nodes, (Names{"n2", "n3"}));
  EXPECT_EQ(u.changes.tres_per_node, "gres/gpu=1");
  // Unchanged fields are not sent.
  EXPECT_EQ(u.changes.name, "");
  EXPECT_EQ(u.changes.partition, "");
  EXPECT_FALSE(u.changes.memory_per_node.set);
  EXPECT_TRUE(u.changes.shared.empty());
  EXPECT_TRUE(u.kept.empty());
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
  JobDescription wanted = Submitted();
  wanted.comment.clear();
  wanted.excluded_nodes.clear();
  wanted.time_limit = NoValNumber::Unset();
  wanted.partition.clear();
  JobUpdate u = PendingJobUpdate(Submitted(), wanted);
  EXPECT_EQ(u.changes.clear, (Names{"comment", "excluded_nodes"}));
  EXPECT_EQ(u.changed, (Names{"comment", "excluded_nodes"}));
  // No way to tell Slurm "no time limit annotation" or "default partition": it keeps them.
  EXPECT_EQ(u.kept, (Names{"partition", "time_limit"}));
}

TEST(PendingJobUpdate, FromNothingSendsEveryUpdatableField) {
  // An adopted job: what it was submitted with is not known.
  JobUpdate u = PendingJobUpdate(JobDescription{}, Submitted());
  EXPECT_EQ(u.changed, (Names{"name", "partition", "comment", "admin_comment", "nodes",
                              "minimum_nodes", "maximum_nodes", "tasks_per_node", "cpus_per_task",
                              "memory_per_node", "time_limit", "excluded_nodes", "shared"}));
  EXPECT_TRUE(u.changes.flags.empty());
  EXPECT_EQ(u.changes.user_id, "");
}

}  // namespace
}  // namespace sb::bridge
