// SPDX-License-Identifier: Apache-2.0
// Groups of parts -> one Slurm heterogeneous job (issue #27).
#include "bridge/parts.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bridge/names.h"
#include "bridge/tag.h"

namespace sb::bridge {
namespace {

kube::Pod MakePod(std::string name, kube::ResourceList requests,
                  std::map<std::string, std::string> labels = {}) {
  kube::Pod p;
  p.metadata.name = std::move(name);
  p.metadata.namespace_ = "ns";
  p.metadata.uid = "uid-" + p.metadata.name;
  p.metadata.labels = std::move(labels);
  kube::Container c;
  c.name = "main";
  c.resources.requests = std::move(requests);
  p.spec.containers.push_back(c);
  return p;
}

GroupSpec Group(std::string kind, int size) {
  return {.key = kind + "/ns/g", .kind = kind, .namespace_ = "ns", .name = "g", .size = size};
}

TranslateOptions Options() {
  return {.partition = "batch",
          .cluster_name = "kubernetes",
          .scheduler_name = "slurm-bridge-scheduler",
          .resource_tres = {{"nvidia.com/gpu", "gres/gpu"}}};
}

std::map<std::string, std::string> Replicated(const std::string& job) {
  return {{std::string(kJobSetReplicatedJobLabel), job}};
}

TEST(PartsTest, PartNames) {
  EXPECT_EQ(PartName(Group("JobSet", 2), MakePod("a", {}, Replicated("workers"))), "workers");
  auto lws = [](const std::string& index) {
    return MakePod("p", {}, {{std::string(kLwsWorkerIndexLabel), index}});
  };
  EXPECT_EQ(PartName(Group("LeaderWorkerSet", 2), lws("0")), "leader");
  EXPECT_EQ(PartName(Group("LeaderWorkerSet", 2), lws("3")), "worker");
  EXPECT_EQ(PartName(Group("Job", 2), MakePod("a", {{"cpu", "1"}})), "");
  // A PodGroup's parts are its pods' shapes: equal shapes share a name, whatever the pod's name.
  const GroupSpec pg = Group("PodGroup", 3);
  const std::string one_cpu = PartName(pg, MakePod("a", {{"cpu", "1"}}));
  EXPECT_TRUE(one_cpu.starts_with("shape-")) << one_cpu;
  EXPECT_EQ(one_cpu.size(), std::string("shape-").size() + 16);
  EXPECT_EQ(PartName(pg, MakePod("b", {{"cpu", "1"}})), one_cpu);
  EXPECT_NE(PartName(pg, MakePod("c", {{"cpu", "2"}})), one_cpu);
  kube::Pod pinned = MakePod("d", {{"cpu", "1"}});
  pinned.spec.node_selector["zone"] = "a";
  EXPECT_NE(PartName(pg, pinned), one_cpu) << "a node constraint is part of the shape";
  // The bridge's own toleration, added once the job is submitted, leaves the part as it was.
  kube::Pod labelled = MakePod("e", {{"cpu", "1"}});
  labelled.spec.tolerations.push_back({.key = std::string(kManagedNodeTaint),
                                       .operator_ = "Equal",
                                       .value = "slurm-bridge-scheduler",
                                       .effect = "NoExecute"});
  EXPECT_EQ(PartName(pg, labelled), one_cpu);
}

// The case: a launcher of 1 CPU and 3 workers of 4 CPUs and a GPU each are one job of two
// components, each sized from its own pods; its tag lists every pod, the parts by offset.
TEST(PartsTest, LauncherAndWorkersOfOtherShapeAreOneHeterogeneousJob) {
  kube::Pod l = MakePod("mpi-launcher-0", {{"cpu", "1"}}, Replicated("launcher"));
  std::vector<kube::Pod> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(MakePod("mpi-worker-" + std::to_string(i),
                              {{"cpu", "4"}, {"nvidia.com/gpu", "1"}}, Replicated("worker")));
  }
  // Given in any order: the worker first.
  const std::vector<const kube::Pod*> pods = {&workers[0], &l, &workers[1], &workers[2]};
  Result<GroupJob> job = TranslateGroup(Group("JobSet", 4), pods, Options());
  ASSERT_TRUE(job) << job.error().ToString();
  ASSERT_TRUE(job->heterogeneous());
  EXPECT_EQ(job->parts, (std::vector<std::string>{"launcher", "worker"}));
  ASSERT_EQ(job->components.size(), 2u);
  const slurm::JobDescription& c0 = job->components[0];
  const slurm::JobDescription& c1 = job->components[1];
  EXPECT_EQ(c0.nodes, "1");
  EXPECT_EQ(c0.cpus_per_task, 1);
  EXPECT_EQ(c0.tres_per_node, "");
  EXPECT_EQ(c1.nodes, "3");
  EXPECT_EQ(c1.minimum_nodes, 3);
  EXPECT_EQ(c1.cpus_per_task, 4);
  EXPECT_EQ(c1.tres_per_node, "gres/gpu=1");
  EXPECT_EQ(c0.flags, (std::vector<std::string>{"EXTERNAL_JOB"}));
  EXPECT_EQ(c1.flags, c0.flags);
  EXPECT_EQ(c1.name, c0.name);
  EXPECT_EQ(job->pods[0], (std::vector<const kube::Pod*>{&l}));
  EXPECT_EQ(job->pods[1].size(), 3u);

  std::optional<JobTag> tag = ParseJobTag(c0.admin_comment);
  ASSERT_TRUE(tag);
  EXPECT_TRUE(tag->BelongsTo("kubernetes", "slurm-bridge-scheduler"));
  EXPECT_EQ(tag->group, "JobSet/ns/g");
  EXPECT_EQ(tag->parts, (std::vector<std::string>{"launcher", "worker"}));
  EXPECT_EQ(tag->pods, (std::vector<std::string>{"ns/mpi-launcher-0", "ns/mpi-worker-0",
                                                 "ns/mpi-worker-1", "ns/mpi-worker-2"}));
  EXPECT_EQ(tag->uids.size(), 4u);
  // The other component carries upstream's list of its own pods, which is no bridge's job.
  std::optional<JobTag> other = ParseJobTag(c1.admin_comment);
  ASSERT_TRUE(other);
  EXPECT_FALSE(other->ours);
  EXPECT_EQ(other->pods.size(), 3u);

  EXPECT_EQ(PartOffset(job->parts, "worker"), 1);
  EXPECT_EQ(PartOffset(job->parts, "other"), -1);
  EXPECT_EQ(PartOffset({}, ""), 0);
}

// Parts that ask for the same are one ordinary job, as before; so is a gang cut short.
TEST(PartsTest, AlikePartsAndShortGangsAreOneOrdinaryJob) {
  kube::Pod a = MakePod("a", {{"cpu", "2"}}, Replicated("ps"));
  kube::Pod b = MakePod("b", {{"cpu", "2"}}, Replicated("worker"));
  Result<GroupJob> alike = TranslateGroup(Group("JobSet", 2), {&a, &b}, Options());
  ASSERT_TRUE(alike);
  EXPECT_FALSE(alike->heterogeneous());
  EXPECT_TRUE(alike->parts.empty());
  EXPECT_EQ(alike->components[0].nodes, "2");
  std::optional<JobTag> tag = ParseJobTag(alike->components[0].admin_comment);
  ASSERT_TRUE(tag);
  EXPECT_TRUE(tag->parts.empty());

  kube::Pod c = MakePod("c", {{"cpu", "8"}}, Replicated("worker"));
  Result<GroupJob> cut = TranslateGroup(Group("JobSet", 3), {&a, &c}, Options());
  ASSERT_TRUE(cut);
  EXPECT_FALSE(cut->heterogeneous());

  // Same requests, other node constraints: a PodGroup's two shapes are two components (each
  // kept off the nodes its own pods cannot use).
  kube::Pod x = MakePod("x", {{"cpu", "1"}});
  kube::Pod y = MakePod("y", {{"cpu", "1"}});
  y.spec.node_selector["gpu"] = "a100";
  Result<GroupJob> pg = TranslateGroup(Group("PodGroup", 2), {&x, &y}, Options());
  ASSERT_TRUE(pg);
  EXPECT_TRUE(pg->heterogeneous());
}

// A bad pod in any part fails the whole translation with Translate's error.
TEST(PartsTest, ATranslationErrorOfAPartIsTheGroupsError) {
  kube::Pod a = MakePod("a", {{"cpu", "1"}}, Replicated("launcher"));
  kube::Pod b = MakePod("b", {{"cpu", "1"}}, Replicated("worker"));
  b.spec.required_pod_affinity = 1;
  Result<GroupJob> job = TranslateGroup(Group("JobSet", 2), {&a, &b}, Options());
  ASSERT_FALSE(job);
  EXPECT_NE(job.error().message.find("podAffinity"), std::string::npos) << job.error().message;
}

}  // namespace
}  // namespace sb::bridge
