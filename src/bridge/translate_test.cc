// SPDX-License-Identifier: Apache-2.0
// Pod groups -> Slurm job descriptions, exclusions, group resolution.
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bridge/group.h"
#include "bridge/names.h"
#include "bridge/tag.h"
#include "bridge/translate.h"
#include "kube/codec.h"
#include "testing/testdata.h"

namespace sb::bridge {
namespace {

kube::Pod MakePod(std::string name, kube::ResourceList requests = {},
                  kube::ResourceList limits = {}) {
  kube::Pod p;
  p.metadata.name = std::move(name);
  p.metadata.namespace_ = "ns";
  p.metadata.uid = "uid-" + p.metadata.name;
  kube::Container c;
  c.name = "main";
  c.resources.requests = std::move(requests);
  c.resources.limits = std::move(limits);
  p.spec.containers.push_back(c);
  return p;
}

GroupSpec Single(const kube::Pod& p) {
  return {.key = "Pod/ns/" + p.metadata.name,
          .kind = "Pod",
          .namespace_ = "ns",
          .name = p.metadata.name,
          .size = 1,
          .annotations = p.metadata.annotations};
}

TranslateOptions Options() {
  return {.partition = "batch",
          .mcs_label = "kubernetes",
          .cluster_name = "kubernetes",
          .scheduler_name = "slurm-bridge-scheduler",
          .mode = JobMode::kExternal,
          .resource_tres = {{"nvidia.com/gpu", "gres/gpu"},
                            {"amd.com/gpu", "gres/gpu"},
                            {"example.com/fpga", "gres/fpga"}},
          .device_profiles = DefaultDeviceProfiles()};
}

// Options whose identity policy lets every namespace use every annotation (upstream's behaviour).
TranslateOptions AllowAll() {
  TranslateOptions o = Options();
  o.identity.rules = {IdentityRule{.namespaces = {"*"},
                                   .user = "*",
                                   .group = "*",
                                   .accounts = {"*"},
                                   .qos = {"*"},
                                   .partitions = {"*"},
                                   .reservations = {"*"},
                                   .wckeys = {"*"},
                                   .max_priority = INT32_MAX}};
  return o;
}

// nodeSharing coResident (upstream 1.3): no `shared` value, so Slurm packs jobs core by core on
// a partition with OverSubscribe=NO; the pod's CPU and memory requests are what Slurm gives it.
// The `exclusive` annotation still takes a whole node.
TEST(TranslateTest, CoResidentJobsAreNotExclusive) {
  kube::Pod pod = MakePod("share", {{"cpu", "1500m"}, {"memory", "100Mi"}},
                          {{"cpu", "1.5"}, {"memory", "100Mi"}});
  TranslateOptions o = Options();
  o.node_sharing = NodeSharing::kCoResident;
  Result<slurm::JobDescription> job = Translate(Single(pod), {&pod}, o);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_TRUE(job->shared.empty());
  EXPECT_EQ(job->cpus_per_task, 2);
  EXPECT_EQ(job->memory_per_node, slurm::NoValNumber::Of(100));
  pod.metadata.annotations["slurmjob.slinky.slurm.net/exclusive"] = "true";
  job = Translate(Single(pod), {&pod}, o);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->shared, std::vector<std::string>{"none"});
}

// Time-only sharing (issue #44, as upstream's fix of its #53): in the default mode a job the
// exclusive annotation makes non-exclusive asks for MCS sharing with the bridge's label, so that
// with MCSPlugin=mcs/label it shares its nodes with the bridge's jobs only, never with native
// ones. mcsSharing false gives the old sharing with anything; coResident shares with native jobs
// on purpose, and an exclusive job holds the node alone.
TEST(TranslateTest, NonExclusiveJobsShareNodesOnlyUnderTheBridgesMcsLabel) {
  kube::Pod pod =
      MakePod("p", {{"cpu", "1"}, {"memory", "1Gi"}}, {{"cpu", "1"}, {"memory", "1Gi"}});
  pod.metadata.annotations["slurmjob.slinky.slurm.net/exclusive"] = "false";
  TranslateOptions o = Options();
  Result<slurm::JobDescription> job = Translate(Single(pod), {&pod}, o);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->shared, std::vector<std::string>{"mcs"});
  EXPECT_EQ(job->mcs_label, "kubernetes");
  o.mcs_label = "k8s-prod";
  job = Translate(Single(pod), {&pod}, o);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->shared, std::vector<std::string>{"mcs"});
  EXPECT_EQ(job->mcs_label, "k8s-prod");
  o.mcs_sharing = false;
  job = Translate(Single(pod), {&pod}, o);
  ASSERT_TRUE(job);
  EXPECT_TRUE(job->shared.empty());
  o.mcs_sharing = true;
  o.node_sharing = NodeSharing::kCoResident;
  job = Translate(Single(pod), {&pod}, o);
  ASSERT_TRUE(job);
  EXPECT_TRUE(job->shared.empty()) << "coResident shares with native jobs";
  pod.metadata.annotations["slurmjob.slinky.slurm.net/exclusive"] = "true";
  for (NodeSharing mode : {NodeSharing::kExclusive, NodeSharing::kCoResident}) {
    o.node_sharing = mode;
    job = Translate(Single(pod), {&pod}, o);
    ASSERT_TRUE(job);
    EXPECT_EQ(job->shared, std::vector<std::string>{"none"});
  }
}

// Review R-2: beside other jobs, only its limits hold a pod to what Slurm gave it. In
// coResident mode a pod that is not Guaranteed for cpu and memory is refused, with the reason;
// one whose job takes the whole node (the exclusive annotation) is not held to it.
TEST(TranslateTest, CoResidentPodsMustBeGuaranteed) {
  TranslateOptions o = Options();
  o.node_sharing = NodeSharing::kCoResident;
  struct Case {
    kube::Pod pod;
    std::string why;  // "" when accepted
  };
  kube::Pod init = MakePod("init", {}, {{"cpu", "1"}, {"memory", "1Gi"}});
  init.spec.init_containers.push_back(kube::Container{.name = "setup"});
  kube::Pod pod_level = MakePod("podlevel");
  pod_level.spec.resources.limits = {{"cpu", "2"}, {"memory", "1Gi"}};
  const Case cases[] = {
      {MakePod("requests-only", {{"cpu", "1"}, {"memory", "1Gi"}}),
       "container main has no cpu limit"},
      {MakePod("no-memory-limit", {}, {{"cpu", "1"}}), "container main has no memory limit"},
      {MakePod("burstable", {{"cpu", "1"}, {"memory", "1Gi"}}, {{"cpu", "4"}, {"memory", "1Gi"}}),
       "container main requests 1 cpu but its limit is 4"},
      {init, "init container setup has no cpu limit"},
      // Limits only: the apiserver sets the requests to them.
      {MakePod("limits-only", {}, {{"cpu", "1"}, {"memory", "1Gi"}}), ""},
      {MakePod("same-value", {{"cpu", "1000m"}, {"memory", "1024Mi"}},
               {{"cpu", "1"}, {"memory", "1Gi"}}),
       ""},
      {pod_level, ""},
  };
  for (const Case& c : cases) {
    Result<slurm::JobDescription> job = Translate(Single(c.pod), {&c.pod}, o);
    if (c.why.empty()) {
      EXPECT_TRUE(job) << c.pod.metadata.name << ": " << job.error().message;
      continue;
    }
    ASSERT_FALSE(job) << c.pod.metadata.name;
    EXPECT_EQ(job.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(job.error().message.find("must be Guaranteed for cpu and memory"), std::string::npos)
        << job.error().message;
    EXPECT_TRUE(job.error().message.ends_with(": " + c.why)) << job.error().message;
    // Exclusive, or in the default mode: the node is the job's alone.
    kube::Pod whole = c.pod;
    whole.metadata.annotations["slurmjob.slinky.slurm.net/exclusive"] = "true";
    EXPECT_TRUE(Translate(Single(whole), {&whole}, o)) << c.pod.metadata.name;
    EXPECT_TRUE(Translate(Single(c.pod), {&c.pod}, Options())) << c.pod.metadata.name;
  }
}

// Review R-2: the resource annotations may ask Slurm for more than the pod's containers can
// take, never for less (Slurm would give the rest to other jobs while the pod uses it).
TEST(TranslateTest, ResourceAnnotationsCannotAskForLessThanThePodTakes) {
  TranslateOptions o = Options();
  o.resource_tres = {{"nvidia.com/gpu", "gres/gpu"}};
  const kube::Pod base = MakePod("p", {{"cpu", "2"}, {"memory", "1Gi"}},
                                 {{"cpu", "4"}, {"memory", "2Gi"}, {"nvidia.com/gpu", "8"}});
  struct Case {
    std::string key;
    std::string value;
    std::string refused;  // "" when accepted
  };
  const Case cases[] = {
      {"cpu-per-task", "1", "is less than the pod's 4 CPU(s)"},
      {"cpu-per-task", "3", "is less than the pod's 4 CPU(s)"},
      {"cpu-per-task", "4", ""},
      {"cpu-per-task", "16", ""},
      {"mem-per-node", "1Gi", "is less than the pod's 2048Mi"},
      {"mem-per-node", "2Gi", ""},
      {"mem-per-node", "8Gi", ""},
      {"gres", "gres/gpu=1", "asks for fewer gres/gpu than the pod's 8"},
      {"gres", "gres/shard=8", "asks for fewer gres/gpu than the pod's 8"},
      {"gres", "gres/gpu:a100=4,gres/gpu:h100=4", ""},
      {"gres", "gres/gpu=8", ""},
      {"gres", "gres/gpu:8", ""},
      {"gres", "gpu:8", ""},
      {"gres", "gres/gpu:a100:8", ""},
      {"gres", "gres/gpu:a100:7", "asks for fewer gres/gpu than the pod's 8"},
      {"gres", "gres/gpu", "asks for fewer gres/gpu than the pod's 8"},
      {"gres", "gres/gpu=lots", "asks for fewer gres/gpu than the pod's 8"},
  };
  for (const Case& c : cases) {
    kube::Pod pod = base;
    pod.metadata.annotations["slurmjob.slinky.slurm.net/" + c.key] = c.value;
    Result<slurm::JobDescription> job = Translate(Single(pod), {&pod}, o);
    if (c.refused.empty()) {
      EXPECT_TRUE(job) << c.key << "=" << c.value << ": " << job.error().message;
      continue;
    }
    ASSERT_FALSE(job) << c.key << "=" << c.value;
    EXPECT_NE(job.error().message.find(c.refused), std::string::npos) << job.error().message;
  }
}

TEST(TranslateTest, CoResidentSharingRiskNamesUnsafeOverSubscribe) {
  slurm::PartitionInfo p{.name = "batch"};
  for (auto [jobs, force] :
       std::vector<std::pair<int, bool>>{{-1, false}, {0, false}, {1, false}, {1, true}}) {
    p.oversubscribe_jobs = jobs;
    p.oversubscribe_force = force;
    EXPECT_EQ(CoResidentSharingRisk(p), "") << jobs << " " << force;
  }
  p.oversubscribe_jobs = 4;
  p.oversubscribe_force = false;
  EXPECT_NE(CoResidentSharingRisk(p).find("partition batch has OverSubscribe=YES:4"),
            std::string::npos)
      << CoResidentSharingRisk(p);
  p.oversubscribe_force = true;
  EXPECT_NE(CoResidentSharingRisk(p).find("OverSubscribe=FORCE:4"), std::string::npos);
}

TEST(TranslateTest, SeedYoloPod) {
  // The seed's Pod: nvidia.com/gpu: 1 in requests and limits, nothing else.
  kube::Pod pod =
      MakePod("yolo-benchmark-slurm-bridge", {{"nvidia.com/gpu", "1"}}, {{"nvidia.com/gpu", "1"}});
  pod.metadata.namespace_ = "default";
  GroupSpec g = Single(pod);
  g.namespace_ = "default";
  g.key = "Pod/default/yolo-benchmark-slurm-bridge";
  Result<slurm::JobDescription> job = Translate(g, {&pod}, Options());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->flags, std::vector<std::string>{"EXTERNAL_JOB"});
  EXPECT_FALSE(job->script);
  EXPECT_EQ(job->tres_per_node, "gres/gpu=1");
  EXPECT_EQ(job->partition, "batch");
  EXPECT_EQ(job->mcs_label, "kubernetes");
  EXPECT_EQ(job->nodes, "1");
  EXPECT_EQ(job->minimum_nodes, 1);
  EXPECT_EQ(job->maximum_nodes, 1);
  EXPECT_EQ(job->tasks_per_node, 1);
  EXPECT_EQ(job->shared, std::vector<std::string>{"none"});
  EXPECT_FALSE(job->cpus_per_task);
  EXPECT_FALSE(job->memory_per_node.set);
  EXPECT_EQ(job->name, "yolo-benchmark-slurm-bridge");
  EXPECT_EQ(job->current_working_directory, "/tmp");
  std::optional<JobTag> tag = ParseJobTag(job->admin_comment);
  ASSERT_TRUE(tag);
  EXPECT_EQ(tag->pods, std::vector<std::string>{"default/yolo-benchmark-slurm-bridge"});
  EXPECT_EQ(tag->uids, std::vector<std::string>{"uid-yolo-benchmark-slurm-bridge"});
  EXPECT_EQ(tag->group, "Pod/default/yolo-benchmark-slurm-bridge");
  EXPECT_TRUE(tag->BelongsTo("kubernetes", "slurm-bridge-scheduler"));
}

TEST(TranslateTest, ResourcesAreTheLargestPodsNeeds) {
  kube::Pod a = MakePod("a", {{"cpu", "500m"}, {"memory", "1Gi"}}, {{"cpu", "1500m"}});
  kube::Container init;
  init.resources.requests = {{"cpu", "3"}, {"memory", "100Mi"}};
  a.spec.init_containers.push_back(init);  // init containers count as a max, not a sum
  kube::Pod b = MakePod("b", {{"memory", "2Gi"}, {"example.com/fpga", "2"}},
                        {{"nvidia.com/gpu", "2"}, {"example.com/fpga", "2"}});
  kube::Container side;
  side.resources.requests = {{"memory", "512Mi"}, {"cpu", "250m"}};
  b.spec.containers.push_back(side);
  b.spec.overhead = {{"memory", "512Mi"}};
  GroupSpec g{.key = "Job/ns/j", .kind = "Job", .namespace_ = "ns", .name = "j", .size = 2};
  Result<slurm::JobDescription> job = Translate(g, {&a, &b}, Options());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->cpus_per_task, 3);                   // a's init container: 3 CPUs
  EXPECT_EQ(job->memory_per_node.Value(), 3 * 1024);  // b: 2Gi + 512Mi + 512Mi overhead
  EXPECT_EQ(job->tres_per_node, "gres/fpga=2,gres/gpu=2");
  EXPECT_EQ(job->nodes, "2");
  EXPECT_EQ(job->minimum_nodes, 2);
  EXPECT_EQ(job->maximum_nodes, 2);
  std::optional<JobTag> tag = ParseJobTag(job->admin_comment);
  ASSERT_TRUE(tag);
  EXPECT_EQ(tag->pods, (std::vector<std::string>{"ns/a", "ns/b"}));
}

TEST(TranslateTest, SidecarsAndPodLevelResourcesAreCounted) {
  // A sidecar of 2 CPUs beside a 4-CPU main container: 6, as kube-scheduler counts.
  kube::Pod p = MakePod("p", {{"cpu", "4"}, {"memory", "1Gi"}});
  kube::Container side;
  side.name = "proxy";
  side.restart_policy = "Always";
  side.resources.requests = {{"cpu", "2"}, {"memory", "512Mi"}};
  p.spec.init_containers.push_back(side);
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, Options());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->cpus_per_task, 6);
  EXPECT_EQ(job->memory_per_node.Value(), 1536);
  // Pod-level spec.resources: the pod's own budget for cpu and memory.
  kube::Pod q = MakePod("q", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}});
  q.spec.resources.requests = {{"cpu", "8"}, {"memory", "4Gi"}};
  q.spec.resources.limits = {{"cpu", "8"}, {"memory", "4Gi"}};
  job = Translate(Single(q), {&q}, Options());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->cpus_per_task, 8);
  EXPECT_EQ(job->memory_per_node.Value(), 4096);
  EXPECT_EQ(job->tres_per_node, "gres/gpu=1");
}

TEST(TranslateTest, MemoryBelowOneMiBIsOneMiBNotAllOfTheNode) {
  // Slurm reads memory_per_node 0 as "all the node's memory".
  for (const char* q : {"512Ki", "1", "1Mi", "1025Ki"}) {
    SCOPED_TRACE(q);
    kube::Pod p = MakePod("p", {{"memory", q}});
    Result<slurm::JobDescription> job = Translate(Single(p), {&p}, Options());
    ASSERT_TRUE(job) << job.error().message;
    ASSERT_TRUE(job->memory_per_node.set);
    EXPECT_GE(job->memory_per_node.Value(), 1);
  }
  kube::Pod p = MakePod("p", {{"memory", "1025Ki"}});
  EXPECT_EQ(Translate(Single(p), {&p}, Options())->memory_per_node.Value(), 2);  // rounded up
}

// Quantities near the int64 limit: sums of containers, sidecars and overhead, two resources
// of one TRES, dra.cpu in millis and the rounding up of cpu and memory overflowed (UBSan: signed
// overflow). They are errors naming the pod and the resource, or round up without overflowing.
TEST(TranslateTest, HugeQuantitiesAreErrorsNotOverflows) {
  const std::string big = "9E";  // 9e18, below the int64 limit, twice above it
  struct Case {
    std::string name;
    kube::Pod pod;
    std::string want;  // in the error; "" = no error
  };
  kube::Pod two_containers = MakePod("a", {{"memory", big}});
  two_containers.spec.containers.push_back(two_containers.spec.containers[0]);
  kube::Pod sidecar = MakePod("b", {{"memory", big}});
  sidecar.spec.init_containers.push_back(sidecar.spec.containers[0]);
  sidecar.spec.init_containers[0].restart_policy = "Always";
  kube::Pod init = MakePod("c");
  init.spec.init_containers.push_back(MakePod("x", {{"memory", big}}).spec.containers[0]);
  init.spec.init_containers[0].restart_policy = "Always";
  init.spec.init_containers.push_back(init.spec.init_containers[0]);
  init.spec.init_containers[1].restart_policy = "";
  kube::Pod overhead = MakePod("d", {{"memory", big}});
  overhead.spec.overhead = {{"memory", big}};
  const std::vector<Case> cases = {
      {"two containers", two_containers, "pod ns/a: total memory is too large"},
      {"sidecar", sidecar, "pod ns/b: total memory is too large"},
      {"init after sidecar", init, "pod ns/c: total memory is too large"},
      {"overhead", overhead, "pod ns/d: total memory is too large"},
      {"one TRES", MakePod("e", {{"nvidia.com/gpu", big}, {"amd.com/gpu", big}}),
       "pod ns/e: total nvidia.com/gpu is too large"},
      {"dra.cpu", MakePod("f", {{"deviceclass.resource.kubernetes.io/dra.cpu", big}}),
       "pod ns/f: total deviceclass.resource.kubernetes.io/dra.cpu is too large"},
      {"cpu", MakePod("g", {{"cpu", "9P"}}), "9000000000000000 CPUs per pod is too many"},
      {"memory rounds up", MakePod("h", {{"memory", "9223372036854775807"}}), ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<slurm::JobDescription> job = Translate(Single(c.pod), {&c.pod}, Options());
    if (c.want.empty()) {
      ASSERT_TRUE(job) << job.error().message;
      EXPECT_EQ(job->memory_per_node.Value(), std::int64_t{1} << 43);  // 2^63 B in MiB
      continue;
    }
    ASSERT_FALSE(job);
    EXPECT_NE(job.error().message.find(c.want), std::string::npos) << job.error().message;
  }
}

TEST(TranslateTest, FractionalCpuRoundsUpAndDraClassesAskForTheirProfilesGres) {
  kube::Pod p =
      MakePod("p", {{"cpu", "100m"}}, {{"deviceclass.resource.kubernetes.io/gpu.nvidia.com", "2"}});
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, Options());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->cpus_per_task, 1);
  // The gpu-nvidia profile: Slurm's GRES gpu, any type (not upstream's old "gres/gpu:<class>").
  EXPECT_EQ(job->tres_per_node, "gres/gpu=2");
  // With a device plugin's GPUs beside them: one GRES count.
  kube::Pod both = MakePod("b", {{"nvidia.com/gpu", "1"}},
                           {{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"}});
  job = Translate(Single(both), {&both}, Options());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->tres_per_node, "gres/gpu=2");
}

TEST(TranslateTest, DraCpusBecomeCpusPerTaskAndAProfileWithATypeAsksForIt) {
  kube::Pod p = MakePod("p", {{"deviceclass.resource.kubernetes.io/dra.cpu", "3"}});
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, Options());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->cpus_per_task, 3);
  EXPECT_EQ(job->tres_per_node, "");
  TranslateOptions typed = Options();
  typed.device_profiles[1].gres_type = "fake";  // gpu-example
  ASSERT_EQ(typed.device_profiles[1].driver, "gpu.example.com");
  kube::Pod g = MakePod("g", {{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"}});
  job = Translate(Single(g), {&g}, typed);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->tres_per_node, "gres/gpu:fake=1");
}

TEST(TranslateTest, DraClassesResolveThroughTheDeviceClassesRead) {
  // The class's extendedResourceName (example.com/gpu) asks for it too, once the class is read.
  Result<kube::GenericObject> cls = kube::Decode<kube::GenericObject>(
      sb::testing::ReadTestData("kube/deviceclass_gpu_example.json"));
  ASSERT_TRUE(cls) << cls.error().message;
  TranslateOptions o = Options();
  o.device_classes = {{"gpu.example.com", &*cls}};
  o.dra_resource_names = {"example.com/gpu"};
  kube::Pod p = MakePod("p", {{"example.com/gpu", "2"}});
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, o);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->tres_per_node, "gres/gpu=2");
  // A class no profile covers, and DRA off (no profiles): errors that say so.
  kube::Pod other = MakePod("o", {{"deviceclass.resource.kubernetes.io/fpga.example.com", "1"}});
  job = Translate(Single(other), {&other}, Options());
  ASSERT_FALSE(job);
  EXPECT_NE(job.error().message.find("fpga.example.com"), std::string::npos) << job.error().message;
  TranslateOptions off = Options();
  off.device_profiles.clear();
  job = Translate(Single(p), {&p}, off);
  EXPECT_TRUE(job) << "without the class read, example.com/gpu is not a DRA name";
  kube::Pod implicit = MakePod("i", {{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"}});
  job = Translate(Single(implicit), {&implicit}, off);
  ASSERT_FALSE(job);
  EXPECT_NE(job.error().message.find("gpu.example.com"), std::string::npos) << job.error().message;
}

TEST(TranslateTest, EveryAnnotationReachesTheJob) {
  kube::Pod p = MakePod("p", {{"cpu", "1"}, {"nvidia.com/gpu", "1"}});
  p.metadata.annotations = {
      {"slurmjob.slinky.slurm.net/account", "physics"},
      {"slurmjob.slinky.slurm.net/constraints", "a100&ib"},
      {"slurmjob.slinky.slurm.net/cpu-per-task", "8"},
      {"slurmjob.slinky.slurm.net/exclusive", " False "},
      {"slurmjob.slinky.slurm.net/gres", "gres/gpu:a100=2"},
      {"slurmjob.slinky.slurm.net/group-id", "1000"},
      {"slurmjob.slinky.slurm.net/job-name", "train"},
      {"slurmjob.slinky.slurm.net/licenses", "matlab:1"},
      {"slurmjob.slinky.slurm.net/max-nodes", "3"},
      {"slurmjob.slinky.slurm.net/min-nodes", "2"},
      {"slurmjob.slinky.slurm.net/mem-per-node", "4Gi"},
      {"slurmjob.slinky.slurm.net/partition", "gpu"},
      {"slurmjob.slinky.slurm.net/priority", "100"},
      {"slurmjob.slinky.slurm.net/qos", "high"},
      {"slurmjob.slinky.slurm.net/reservation", "maint"},
      {"slurmjob.slinky.slurm.net/timelimit", "90"},
      {"slurmjob.slinky.slurm.net/user-id", "alice"},
      {"slurmjob.slinky.slurm.net/wckey", "proj1"},
      {"slurmjob.slinky.slurm.net/comment", "from k8s"},
      {"slurmjob.slinky.slurm.net/unknown-key", "ignored"},
      {"slinky.slurm.net/slurm-node", "not-a-job-annotation"},
  };
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, AllowAll());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->account, "physics");
  EXPECT_EQ(job->constraints, "a100&ib");
  EXPECT_EQ(job->cpus_per_task, 8);
  EXPECT_EQ(job->shared, std::vector<std::string>{"mcs"});  // not exclusive: the bridge's nodes
  EXPECT_EQ(job->tres_per_node, "gres/gpu:a100=2");
  EXPECT_EQ(job->group_id, "1000");
  EXPECT_EQ(job->name, "train");
  EXPECT_EQ(job->licenses, "matlab:1");
  EXPECT_EQ(job->maximum_nodes, 3);
  EXPECT_EQ(job->minimum_nodes, 2);
  EXPECT_EQ(job->nodes, "2-3");
  EXPECT_EQ(job->memory_per_node.Value(), 4096);
  EXPECT_EQ(job->partition, "gpu");
  EXPECT_EQ(job->priority.Value(), 100);
  EXPECT_EQ(job->qos, "high");
  EXPECT_EQ(job->reservation, "maint");
  EXPECT_EQ(job->time_limit.Value(), 90);
  EXPECT_EQ(job->user_id, "alice");
  EXPECT_EQ(job->wckey, "proj1");
  EXPECT_EQ(job->comment, "from k8s");
}

// Issue #25: required pod (anti-)affinity is refused at submit as at admission (the webhook can
// be off), with the term named; preferred terms are not read.
TEST(TranslateTest, RequiredPodAffinityIsRefusedWithWhy) {
  kube::Pod p = MakePod("p");
  ASSERT_TRUE(Translate(Single(p), {&p}, Options()));
  p.spec.required_pod_anti_affinity = 1;
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, Options());
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(job.error().message.find("spec.affinity.podAntiAffinity.requiredDuring"),
            std::string::npos)
      << job.error().message;
  p.spec.required_pod_anti_affinity = 0;
  p.spec.required_pod_affinity = 2;
  job = Translate(Single(p), {&p}, Options());
  ASSERT_FALSE(job);
  EXPECT_NE(job.error().message.find("spec.affinity.podAffinity."), std::string::npos);
}

// N-4: a namespace's pods cannot choose another identity, account, QOS, partition, reservation,
// wckey or priority than its rule allows; the rule's user and group are sent for every job.
TEST(TranslateTest, IdentityPolicyRefusesAndSetsTheIdentity) {
  TranslateOptions o = Options();
  o.identity.default_partition = "batch";
  o.identity.rules = {IdentityRule{.namespaces = {"ns"},
                                   .user = "alice",
                                   .group = "physics",
                                   .accounts = {"physics"},
                                   .max_priority = 10}};
  kube::Pod p = MakePod("p");
  p.metadata.annotations = {{"slurmjob.slinky.slurm.net/account", "physics"},
                            {"slurmjob.slinky.slurm.net/priority", "10"},
                            {"slurmjob.slinky.slurm.net/partition", "batch"}};
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, o);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->user_id, "alice");
  EXPECT_EQ(job->group_id, "physics");
  EXPECT_EQ(job->account, "physics");
  EXPECT_EQ(job->priority.Value(), 10);

  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"user-id", "root"},
                                                        {"group-id", "0"},
                                                        {"account", "chemistry"},
                                                        {"qos", "high"},
                                                        {"partition", "gpu"},
                                                        {"reservation", "maint"},
                                                        {"wckey", "w"},
                                                        {"priority", "11"},
                                                        {"priority", "2000000000"}}) {
    kube::Pod q = MakePod("q");
    q.metadata.annotations = {{std::string(kJobAnnotationPrefix) + key, value}};
    Result<slurm::JobDescription> refused = Translate(Single(q), {&q}, o);
    ASSERT_FALSE(refused) << key;
    EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
    EXPECT_TRUE(refused.error().message.starts_with("annotation slurmjob.slinky.slurm.net/" + key +
                                                    ": \"" + value + "\" is not allowed"))
        << refused.error().message;
  }
  // A namespace no rule names: the token's identity, nothing chosen by annotations.
  kube::Pod other = MakePod("o");
  GroupSpec elsewhere = Single(other);
  elsewhere.namespace_ = "elsewhere";
  Result<slurm::JobDescription> plain = Translate(elsewhere, {&other}, o);
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->user_id, "");
  EXPECT_EQ(plain->group_id, "");
  elsewhere.annotations = {{"slinky.slurm.net/user-id", "root"}};  // the legacy prefix too
  EXPECT_FALSE(Translate(elsewhere, {&other}, o));
}

TEST(TranslateTest, LegacyPrefixReadAndCurrentWins) {
  kube::Pod p = MakePod("p");
  p.metadata.annotations = {{"slinky.slurm.net/account", "old"},
                            {"slinky.slurm.net/qos", "legacy"},
                            {"slurmjob.slinky.slurm.net/account", "new"}};
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, AllowAll());
  ASSERT_TRUE(job);
  EXPECT_EQ(job->account, "new");
  EXPECT_EQ(job->qos, "legacy");
}

// Upstream 1.3's timelimit forms: bare minutes, durations, Slurm --time strings; seconds are
// rounded up to a minute, as Slurm does.
TEST(TranslateTest, TimeLimitTakesMinutesDurationsAndSlurmTimeStrings) {
  const std::vector<std::pair<std::string, std::int64_t>> good = {
      {"90", 90},     {"90s", 2},       {"2h", 120},       {"1h30m", 90},   {"1.5h", 90},
      {"59s", 1},     {"30:00", 30},    {"30:01", 31},     {"1:00:00", 60}, {"1-0", 1440},
      {"2-12", 3600}, {"1-2:30", 1590}, {"1-0:0:1", 1441}, {"0:30", 1},     {"10000", 10000}};
  for (const auto& [raw, minutes] : good) {
    Result<slurm::NoValNumber> v = ParseTimeLimit(raw);
    ASSERT_TRUE(v) << raw << ": " << v.error().message;
    EXPECT_EQ(v->Value(), minutes) << raw;
  }
  for (const char* raw : {"UNLIMITED", "infinite"}) {
    Result<slurm::NoValNumber> v = ParseTimeLimit(raw);
    ASSERT_TRUE(v) << raw;
    EXPECT_TRUE(v->infinite) << raw;
  }
  for (const char* raw : {"", "0", "0s", "0:00", "1h30", "-5", "1:2:3:4", "1-2-3", "a:b", "5d",
                          "99999999999", "2h-1", ":30", "1-", "30 min"}) {
    EXPECT_FALSE(ParseTimeLimit(raw)) << raw;
  }
  kube::Pod p = MakePod("p");
  p.metadata.annotations["slurmjob.slinky.slurm.net/timelimit"] = "1-12:00:00";
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, AllowAll());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->time_limit.Value(), 36 * 60);
}

TEST(TranslateTest, BadAnnotationsNameKeyAndValue) {
  struct Case {
    const char* key;
    const char* value;
    const char* want;
  } cases[] = {
      {"timelimit", "one hour",
       "annotation slurmjob.slinky.slurm.net/timelimit: \"one hour\" is not a time limit"},
      {"timelimit", "0", "slurmjob.slinky.slurm.net/timelimit: \"0\" must be at least 1"},
      {"priority", "-3",
       "slurmjob.slinky.slurm.net/priority: \"-3\" must be at least 1 (Slurm holds a job of "
       "priority 0)"},
      {"priority", "0",
       "slurmjob.slinky.slurm.net/priority: \"0\" must be at least 1 (Slurm holds a job of "
       "priority 0)"},
      {"max-nodes", "two", "slurmjob.slinky.slurm.net/max-nodes: \"two\" is not an integer"},
      {"cpu-per-task", "lots", "slurmjob.slinky.slurm.net/cpu-per-task: \"lots\""},
      {"mem-per-node", "12", "slurmjob.slinky.slurm.net/mem-per-node: \"12\""},
      {"min-nodes", "99999999999", "slurmjob.slinky.slurm.net/min-nodes"},
  };
  for (const Case& c : cases) {
    kube::Pod p = MakePod("p");
    p.metadata.annotations[std::string(kJobAnnotationPrefix) + c.key] = c.value;
    Result<slurm::JobDescription> job = Translate(Single(p), {&p}, AllowAll());
    ASSERT_FALSE(job) << c.key;
    EXPECT_NE(job.error().message.find(c.want), std::string::npos) << job.error().message;
  }
  kube::Pod p = MakePod("p");
  p.metadata.annotations = {{"slurmjob.slinky.slurm.net/min-nodes", "4"},
                            {"slurmjob.slinky.slurm.net/max-nodes", "2"}};
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, AllowAll());
  ASSERT_FALSE(job);
  EXPECT_NE(job.error().message.find("contradict"), std::string::npos);
  kube::Pod q = MakePod("q", {{"cpu", "two"}});
  EXPECT_FALSE(Translate(Single(q), {&q}, Options()));
}

TEST(TranslateTest, BatchModeHasAScript) {
  kube::Pod p = MakePod("p");
  TranslateOptions o = Options();
  o.mode = JobMode::kBatch;
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, o);
  ASSERT_TRUE(job);
  ASSERT_TRUE(job->script);
  EXPECT_TRUE(job->flags.empty());
  EXPECT_FALSE(job->environment.empty());
}

TEST(TranslateTest, JobTimeLimitFromActiveDeadline) {
  kube::Pod p = MakePod("p");
  GroupSpec g = Single(p);
  g.time_limit_minutes = 2;
  Result<slurm::JobDescription> job = Translate(g, {&p}, Options());
  ASSERT_TRUE(job);
  EXPECT_EQ(job->time_limit.Value(), 2);
}

// Review 888ec7d (design risks): a placeholder with no limit of its own gets the configured
// default, so a leaked job does not hold its nodes for ever; the pod's own limit wins.
TEST(TranslateTest, DefaultTimeLimitOnlyWhenThePodsGiveNone) {
  kube::Pod p = MakePod("p");
  TranslateOptions o = Options();
  Result<slurm::JobDescription> none = Translate(Single(p), {&p}, o);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->time_limit.Value()) << "unset: Slurm's partition default";
  o.default_time_limit_minutes = 1440;
  Result<slurm::JobDescription> job = Translate(Single(p), {&p}, o);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->time_limit.Value(), 1440);
  GroupSpec g = Single(p);
  g.time_limit_minutes = 2;
  job = Translate(g, {&p}, o);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->time_limit.Value(), 2) << "activeDeadlineSeconds wins";
  p.metadata.annotations["slurmjob.slinky.slurm.net/timelimit"] = "90";
  job = Translate(Single(p), {&p}, o);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->time_limit.Value(), 90) << "the annotation wins";
}

kube::Node MakeNode(std::string name, bool ready = true) {
  kube::Node n;
  n.metadata.name = std::move(name);
  n.allocatable = {{"cpu", "8"}, {"memory", "32Gi"}, {"nvidia.com/gpu", "4"}, {"pods", "110"}};
  if (ready) n.conditions.push_back({.type = "Ready", .status = "True"});
  return n;
}

TEST(ExcludedNodesTest, KubernetesConstraintsBecomeExclusions) {
  kube::Node ok = MakeNode("ok");
  kube::Node cordoned = MakeNode("cordoned");
  cordoned.unschedulable = true;
  kube::Node notready = MakeNode("notready", false);
  kube::Node tainted = MakeNode("tainted");
  tainted.taints.push_back({.key = "dedicated", .value = "db", .effect = "NoSchedule"});
  kube::Node ours = MakeNode("ours");  // the bridge's own taint is tolerated by its pods
  ours.taints.push_back(
      {.key = "slinky.slurm.net/managed-node", .value = "x", .effect = "NoExecute"});
  kube::Node soft = MakeNode("soft");  // PreferNoSchedule does not exclude
  soft.taints.push_back({.key = "dedicated", .value = "db", .effect = "PreferNoSchedule"});
  kube::Node wrongzone = MakeNode("wrongzone");
  wrongzone.metadata.labels = {{"zone", "b"}};
  ok.metadata.labels = {{"zone", "a"}};
  cordoned.metadata.labels = notready.metadata.labels = tainted.metadata.labels = {{"zone", "a"}};
  ours.metadata.labels = soft.metadata.labels = {{"zone", "a"}};
  kube::Node small = MakeNode("small");
  small.metadata.labels = {{"zone", "a"}};
  small.allocatable["nvidia.com/gpu"] = "0";
  kube::Node renamed = MakeNode("k8s-name");  // Slurm calls it "slurm-name"
  renamed.metadata.labels = {{"zone", "a"}, {"slinky.slurm.net/slurm-nodename", "slurm-name"}};

  kube::Pod pod = MakePod("p", {{"nvidia.com/gpu", "1"}, {"cpu", "2"}});
  pod.spec.node_selector = {{"zone", "a"}};
  std::map<std::string, const kube::Node*> by_slurm;
  for (const kube::Node* n :
       {&ok, &cordoned, &notready, &tainted, &ours, &soft, &wrongzone, &small, &renamed}) {
    by_slurm[SlurmNodeName(*n)] = n;
  }
  std::vector<std::string> slurm = {"ok",   "cordoned",  "notready", "tainted",    "ours",
                                    "soft", "wrongzone", "small",    "slurm-name", "nok8s"};
  std::vector<Exclusion> got = ExcludedNodes({&pod}, slurm, by_slurm);
  std::vector<Exclusion> want = {{"cordoned", "unschedulable"},
                                 {"nok8s", "no Kubernetes node"},
                                 {"notready", "not Ready"},
                                 {"small", "insufficient nvidia.com/gpu"},
                                 {"tainted", "taint dedicated=db:NoSchedule"},
                                 {"wrongzone", "node selector"}};
  EXPECT_EQ(got, want);

  // Tolerating the taint makes that node usable, and only that one.
  pod.spec.tolerations.push_back({.key = "dedicated", .operator_ = "Exists"});
  got = ExcludedNodes({&pod}, slurm, by_slurm);
  std::vector<Exclusion> want_tolerated = want;
  std::erase(want_tolerated, Exclusion{"tainted", "taint dedicated=db:NoSchedule"});
  ASSERT_EQ(want_tolerated.size(), want.size() - 1);
  EXPECT_EQ(got, want_tolerated);
}

// Issue #28: a DRA class's extended resource is no node's allocatable; it excludes no node (Slurm
// counts the devices), unless the node advertises it (a device plugin's) and has too few.
TEST(ExcludedNodesTest, DraExtendedResourcesExcludeOnlyNodesThatAdvertiseTooFew) {
  kube::Node plain = MakeNode("plain");
  kube::Node plugin = MakeNode("plugin");
  plugin.allocatable["example.com/gpu"] = "0";
  std::map<std::string, const kube::Node*> by_slurm = {{"plain", &plain}, {"plugin", &plugin}};
  const std::vector<std::string> slurm = {"plain", "plugin"};
  kube::Pod implicit = MakePod("i", {{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"}});
  EXPECT_TRUE(ExcludedNodes({&implicit}, slurm, by_slurm).empty());
  kube::Pod named = MakePod("n", {{"example.com/gpu", "1"}});
  const std::set<std::string, std::less<>> names = {"example.com/gpu"};
  EXPECT_EQ(ExcludedNodes({&named}, slurm, by_slurm, nullptr, nullptr, &names),
            (std::vector<Exclusion>{{"plugin", "insufficient example.com/gpu"}}));
  EXPECT_EQ(ExcludedNodes({&named}, slurm, by_slurm).size(), 2u)
      << "without the class read, example.com/gpu is an ordinary extended resource";
}

// Issue #25: a node where a bound pod holds one of the group's host ports is excluded (the
// same port and protocol, on overlapping addresses), as kube-scheduler's NodePorts filter does;
// sidecars' ports count, other init containers' do not.
TEST(ExcludedNodesTest, HostPortsHeldOnANodeExcludeIt) {
  kube::Node n1 = MakeNode("n1");
  kube::Node n2 = MakeNode("n2");
  kube::Node n3 = MakeNode("n3");
  kube::Node n4 = MakeNode("n4");
  std::map<std::string, const kube::Node*> by_slurm = {
      {"n1", &n1}, {"n2", &n2}, {"n3", &n3}, {"n4", &n4}};
  const std::vector<std::string> slurm = {"n1", "n2", "n3", "n4"};
  kube::Pod held1 = MakePod("exporter", {});
  held1.spec.node_name = "n1";
  held1.spec.containers[0].host_ports = {{.port = 9100, .container_port = 9100}};
  kube::Pod held2 = MakePod("dns", {});
  held2.spec.node_name = "n2";
  held2.spec.containers[0].host_ports = {{.port = 9100, .protocol = "UDP"}};
  kube::Pod held3 = MakePod("bound-to-an-address", {});
  held3.spec.node_name = "n3";
  held3.spec.containers[0].host_ports = {{.port = 9100, .host_ip = "10.0.0.3"}};
  kube::Pod unbound = MakePod("waiting", {});
  unbound.spec.containers[0].host_ports = {{.port = 9100}};
  const NodePorts in_use = PortsOf({&held1, &held2, &held3, &unbound});
  ASSERT_EQ(in_use.size(), 3u) << "an unbound pod holds no port";

  kube::Pod pod = MakePod("p", {});
  pod.spec.containers[0].host_ports = {{.port = 9100}};
  std::vector<Exclusion> want = {{"n1", "host port TCP/9100 in use"},
                                 {"n3", "host port TCP/9100 in use"}};
  EXPECT_EQ(ExcludedNodes({&pod}, slurm, by_slurm, nullptr, &in_use), want)
      << "UDP on n2 is another port; 0.0.0.0 overlaps 10.0.0.3";
  EXPECT_TRUE(ExcludedNodes({&pod}, slurm, by_slurm).empty()) << "no ports in use given";

  pod.spec.containers[0].host_ports = {{.port = 9100, .host_ip = "10.0.0.9"}};
  EXPECT_EQ(ExcludedNodes({&pod}, slurm, by_slurm, nullptr, &in_use),
            (std::vector<Exclusion>{{"n1", "host port TCP/9100 in use"}}))
      << "another address of n3";

  // A sidecar opens its port for the pod's life; a plain init container does not count.
  pod.spec.containers[0].host_ports.clear();
  kube::Container init{.name = "init", .host_ports = {{.port = 9100}}};
  pod.spec.init_containers = {init};
  EXPECT_TRUE(ExcludedNodes({&pod}, slurm, by_slurm, nullptr, &in_use).empty());
  pod.spec.init_containers[0].restart_policy = "Always";
  EXPECT_EQ(ExcludedNodes({&pod}, slurm, by_slurm, nullptr, &in_use), want);
}

TEST(ExcludedNodesTest, PortsConflictOnPortProtocolAndAddress) {
  using kube::HostPort;
  EXPECT_TRUE(PortsConflict(HostPort{.port = 80}, HostPort{.port = 80, .protocol = ""}));
  EXPECT_FALSE(PortsConflict(HostPort{.port = 80}, HostPort{.port = 81}));
  EXPECT_FALSE(PortsConflict(HostPort{.port = 80}, HostPort{.port = 80, .protocol = "SCTP"}));
  EXPECT_TRUE(PortsConflict(HostPort{.port = 80, .host_ip = "0.0.0.0"},
                            HostPort{.port = 80, .host_ip = "10.0.0.1"}));
  EXPECT_TRUE(PortsConflict(HostPort{.port = 80, .host_ip = "10.0.0.1"},
                            HostPort{.port = 80, .host_ip = "10.0.0.1"}));
  EXPECT_FALSE(PortsConflict(HostPort{.port = 80, .host_ip = "10.0.0.1"},
                             HostPort{.port = 80, .host_ip = "10.0.0.2"}));
}

// Every input of ExcludedNodes changes the key; the pod's name and other fields do not.
TEST(ExcludedNodesTest, ExclusionKeyFollowsWhatExclusionsRead) {
  kube::Pod a = MakePod("a", {{"cpu", "2"}});
  kube::Pod b = MakePod("b", {{"cpu", "2"}});
  b.metadata.labels = {{"app", "x"}};
  b.spec.scheduler_name = "other";
  EXPECT_EQ(ExclusionKey({&a}), ExclusionKey({&b}));
  EXPECT_NE(ExclusionKey({&a}), ExclusionKey({&a, &b}));
  const std::string base = ExclusionKey({&a});
  std::vector<std::function<void(kube::Pod&)>> changes = {
      [](kube::Pod& p) { p.spec.tolerations.push_back({.key = "k", .operator_ = "Exists"}); },
      [](kube::Pod& p) { p.spec.tolerations.push_back({.key = "k", .effect = "NoSchedule"}); },
      [](kube::Pod& p) { p.spec.node_selector["zone"] = "a"; },
      [](kube::Pod& p) {
        p.spec.required_node_affinity.push_back(
            {.match_expressions = {{.key = "zone", .operator_ = "In", .values = {"a"}}}});
      },
      [](kube::Pod& p) {
        p.spec.required_node_affinity.push_back(
            {.match_fields = {{.key = "metadata.name", .operator_ = "In", .values = {"n1"}}}});
      },
      [](kube::Pod& p) { p.spec.containers[0].resources.requests["cpu"] = "3"; },
      [](kube::Pod& p) { p.spec.containers[0].resources.requests["nvidia.com/gpu"] = "1"; },
      [](kube::Pod& p) { p.spec.containers[0].host_ports.push_back({.port = 8080}); },
      [](kube::Pod& p) {
        p.spec.containers[0].host_ports.push_back({.port = 8080, .protocol = "UDP"});
      },
  };
  std::set<std::string> keys = {base};
  for (const auto& change : changes) {
    kube::Pod c = a;
    change(c);
    EXPECT_TRUE(keys.insert(ExclusionKey({&c})).second) << ExclusionKey({&c});
  }
  // Strings that run into each other stay apart ("ab"+"c" is not "a"+"bc").
  kube::Pod x = a;
  kube::Pod y = a;
  x.spec.node_selector = {{"ab", "c"}};
  y.spec.node_selector = {{"a", "bc"}};
  EXPECT_NE(ExclusionKey({&x}), ExclusionKey({&y}));
}

TEST(ExcludedNodesTest, RequestsNotLimitsMustFit) {
  // kube-scheduler fits requests: a limit above every node's allocatable (legal) excludes
  // nothing, a request above it does.
  kube::Node n = MakeNode("n");  // 8 cpu, 32Gi
  std::map<std::string, const kube::Node*> by_slurm = {{"n", &n}};
  kube::Pod limited =
      MakePod("p", {{"memory", "1Gi"}, {"cpu", "1"}}, {{"memory", "64Gi"}, {"cpu", "16"}});
  EXPECT_EQ(ExcludedNodes({&limited}, {"n"}, by_slurm), std::vector<Exclusion>{});
  kube::Pod big = MakePod("q", {{"memory", "33Gi"}});
  EXPECT_EQ(ExcludedNodes({&big}, {"n"}, by_slurm),
            (std::vector<Exclusion>{{"n", "insufficient memory"}}));
  // A sidecar counts: 6 + 3 > 8 CPUs.
  kube::Pod with_sidecar = MakePod("s", {{"cpu", "6"}});
  kube::Container side;
  side.name = "proxy";
  side.restart_policy = "Always";
  side.resources.requests = {{"cpu", "3"}};
  with_sidecar.spec.init_containers.push_back(side);
  EXPECT_EQ(ExcludedNodes({&with_sidecar}, {"n"}, by_slurm),
            (std::vector<Exclusion>{{"n", "insufficient cpu"}}));
}

// N-13: what other schedulers' pods on a node request (a DaemonSet's agent) is not Slurm's to
// give: a whole-node pod no longer fits there, and the node is excluded before the kubelet would
// refuse the pod (OutOfcpu).
TEST(ExcludedNodesTest, OtherPodsRequestsCountAgainstAllocatable) {
  kube::Node a = MakeNode("a");  // 8 cpu, 32Gi
  kube::Node b = MakeNode("b");
  std::map<std::string, const kube::Node*> by_slurm = {{"a", &a}, {"b", &b}};
  kube::Pod agent = MakePod("agent", {{"cpu", "500m"}, {"memory", "1Gi"}});
  agent.spec.node_name = "a";
  kube::Pod unbound = MakePod("unbound", {{"cpu", "8"}});  // not on a node: counts nowhere
  const NodeUsage used = UsageOf({&agent, &unbound});
  EXPECT_EQ(used, (NodeUsage{{"a", {{"cpu", 500}, {"memory", std::int64_t{1} << 30}}}}));
  kube::Pod whole = MakePod("whole", {{"cpu", "8"}});
  EXPECT_EQ(ExcludedNodes({&whole}, {"a", "b"}, by_slurm, &used),
            (std::vector<Exclusion>{{"a", "insufficient cpu (other pods request some)"}}));
  EXPECT_EQ(ExcludedNodes({&whole}, {"a", "b"}, by_slurm), std::vector<Exclusion>{})
      << "without the others' usage both fit";
  kube::Pod fits = MakePod("fits", {{"cpu", "7500m"}, {"memory", "31Gi"}});
  EXPECT_EQ(ExcludedNodes({&fits}, {"a", "b"}, by_slurm, &used), std::vector<Exclusion>{});
}

TEST(PodRequestsTest, SidecarsPodLevelResourcesAndOverheadAsKubeScheduler) {
  struct Case {
    std::string name;
    kube::Pod pod;
    std::int64_t want_cpu_milli;
  };
  auto init = [](std::string cpu, bool sidecar) {
    kube::Container c;
    c.name = "i";
    c.resources.requests = {{"cpu", std::move(cpu)}};
    if (sidecar) c.restart_policy = "Always";
    return c;
  };
  std::vector<Case> cases;
  {
    kube::Pod p = MakePod("plain-init", {{"cpu", "4"}});
    p.spec.init_containers = {init("2", false)};
    cases.push_back({"a plain init container counts as a max", p, 4000});
  }
  {
    kube::Pod p = MakePod("sidecar", {{"cpu", "4"}});
    p.spec.init_containers = {init("2", true)};
    cases.push_back({"a sidecar adds to the containers' sum", p, 6000});
  }
  {
    // sidecar 1 then init 5: the init container runs beside the sidecar (6); main 2 + 1 = 3.
    kube::Pod p = MakePod("init-after-sidecar", {{"cpu", "2"}});
    p.spec.init_containers = {init("1", true), init("5", false)};
    cases.push_back({"an init container after a sidecar needs both", p, 6000});
  }
  {
    // init 5 first (no sidecar yet): 5; then sidecar 1; main 2 + 1 = 3 -> 5.
    kube::Pod p = MakePod("init-before-sidecar", {{"cpu", "2"}});
    p.spec.init_containers = {init("5", false), init("1", true)};
    cases.push_back({"an init container before a sidecar needs itself", p, 5000});
  }
  {
    kube::Pod p = MakePod("pod-level", {{"cpu", "1"}});
    p.spec.resources.requests = {{"cpu", "3"}};
    p.spec.overhead = {{"cpu", "250m"}};
    cases.push_back({"pod-level resources replace the containers', overhead adds", p, 3250});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<std::map<std::string, std::int64_t>> r = PodRequests(c.pod);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->at("cpu"), c.want_cpu_milli);
  }
}

TEST(ExcludedNodesTest, RequiredNodeAffinity) {
  kube::Node a = MakeNode("a");
  a.metadata.labels = {{"gpu", "a100"}, {"rank", "5"}};
  kube::Node b = MakeNode("b");
  b.metadata.labels = {{"gpu", "t4"}, {"rank", "1"}};
  kube::Node c = MakeNode("c");
  std::map<std::string, const kube::Node*> by_slurm = {{"a", &a}, {"b", &b}, {"c", &c}};
  kube::Pod pod = MakePod("p");
  kube::NodeSelectorTerm t1;
  t1.match_expressions = {{.key = "gpu", .operator_ = "In", .values = {"a100", "h100"}},
                          {.key = "rank", .operator_ = "Gt", .values = {"2"}}};
  kube::NodeSelectorTerm t2;
  t2.match_fields = {{.key = "metadata.name", .operator_ = "In", .values = {"c"}}};
  pod.spec.required_node_affinity = {t1, t2};
  std::vector<Exclusion> got = ExcludedNodes({&pod}, {"a", "b", "c"}, by_slurm);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], (Exclusion{"b", "node affinity"}));
}

TEST(TolerationTest, Semantics) {
  kube::Taint t{.key = "k", .value = "v", .effect = "NoSchedule"};
  EXPECT_TRUE(Tolerates({{.key = "k", .operator_ = "Equal", .value = "v"}}, t));
  EXPECT_TRUE(Tolerates({{.key = "k", .operator_ = "", .value = "v", .effect = "NoSchedule"}}, t));
  EXPECT_FALSE(Tolerates({{.key = "k", .operator_ = "Equal", .value = "w"}}, t));
  EXPECT_FALSE(Tolerates({{.key = "k", .operator_ = "Exists", .effect = "NoExecute"}}, t));
  EXPECT_TRUE(Tolerates({{.key = "", .operator_ = "Exists"}}, t));
  EXPECT_FALSE(Tolerates({}, t));
}

kube::GenericObject Owner(std::string kind, std::string name, std::string spec,
                          kube::StringMap annotations = {}) {
  kube::GenericObject o;
  o.kind = std::move(kind);
  o.metadata.name = std::move(name);
  o.metadata.namespace_ = "ns";
  o.metadata.annotations = std::move(annotations);
  o.spec_json = std::move(spec);
  return o;
}

TEST(GroupTest, PlainPodIsItsOwnGroupWithItsAnnotations) {
  kube::Pod p = MakePod("p");
  p.metadata.annotations = {{"slurmjob.slinky.slurm.net/qos", "x"}};
  Result<GroupSpec> g = ResolveGroup(p, {}, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "Pod/ns/p");
  EXPECT_EQ(g->size, 1);
  EXPECT_EQ(g->annotations.at("slurmjob.slinky.slurm.net/qos"), "x");
  EXPECT_TRUE(InGroup(p, *g));
  EXPECT_FALSE(InGroup(MakePod("q"), *g));
}

TEST(GroupTest, JobPodsAreSingleUnlessGangAndReadTheJobsAnnotations) {
  kube::Pod p = MakePod("train-abc");
  p.metadata.labels = {{"job-name", "train"}};
  kube::GenericObject job = Owner("Job", "train", R"({"parallelism":4,"completions":6,
      "activeDeadlineSeconds":61})",
                                  {{"slurmjob.slinky.slurm.net/account", "a"}});
  Result<GroupSpec> g = ResolveGroup(p, {job}, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "Pod/ns/train-abc");
  EXPECT_EQ(g->kind, "Job");
  EXPECT_EQ(g->annotations.at("slurmjob.slinky.slurm.net/account"), "a");
  EXPECT_EQ(g->time_limit_minutes, 2);

  job.metadata.annotations[std::string(kGangAnnotation)] = "true";
  g = ResolveGroup(p, {job}, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "Job/ns/train");
  EXPECT_EQ(g->size, 4);
  EXPECT_TRUE(InGroup(p, *g));
  kube::Pod other = MakePod("x");
  other.metadata.labels = {{"job-name", "other"}};
  EXPECT_FALSE(InGroup(other, *g));

  // completions caps the gang
  job.spec_json = R"({"parallelism":4,"completions":3})";
  EXPECT_EQ(ResolveGroup(p, {job}, nullptr)->size, 3);
}

TEST(GroupTest, JobSetGangSumsReplicatedJobs) {
  kube::Pod p = MakePod("js-w-0-0");
  p.metadata.labels = {{"jobset.sigs.k8s.io/jobset-name", "js"}};
  kube::GenericObject job = Owner("Job", "js-w-0", R"({"parallelism":2})");
  kube::GenericObject js = Owner("JobSet", "js", R"({"replicatedJobs":[
      {"name":"w","replicas":3,"template":{"spec":{"parallelism":2}}},
      {"name":"l","template":{"spec":{}}}]})",
                                 {{std::string(kGangAnnotation), "True"}});
  Result<GroupSpec> g = ResolveGroup(p, {job, js}, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "JobSet/ns/js");
  EXPECT_EQ(g->size, 7);
  EXPECT_TRUE(InGroup(p, *g));
}

TEST(GroupTest, LeaderWorkerSetGroup) {
  kube::Pod p = MakePod("lws-1-2");
  p.metadata.labels = {{"leaderworkerset.sigs.k8s.io/group-key", "h1"},
                       {"leaderworkerset.sigs.k8s.io/group-index", "1"}};
  kube::GenericObject sts = Owner("StatefulSet", "lws-1", "{}");
  kube::GenericObject lws =
      Owner("LeaderWorkerSet", "lws", R"({"leaderWorkerTemplate":{"size":3}})",
            {{"slurmjob.slinky.slurm.net/qos", "q"}});
  Result<GroupSpec> g = ResolveGroup(p, {sts, lws}, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "LeaderWorkerSet/ns/lws/h1");
  EXPECT_EQ(g->name, "lws-1");
  EXPECT_EQ(g->size, 3);
  EXPECT_EQ(g->annotations.at("slurmjob.slinky.slurm.net/qos"), "q");
  EXPECT_TRUE(InGroup(p, *g));
  kube::Pod q = MakePod("lws-0-1");
  q.metadata.labels = {{"leaderworkerset.sigs.k8s.io/group-key", "h0"}};
  EXPECT_FALSE(InGroup(q, *g));
}

TEST(GroupTest, CoschedulingPodGroupOnlyWhenReadable) {
  kube::Pod p = MakePod("w0");
  p.metadata.labels = {{"scheduling.x-k8s.io/pod-group", "pg"}};
  kube::GenericObject pg = Owner("PodGroup", "pg", R"({"minMember":4})",
                                 {{"slurmjob.slinky.slurm.net/account", "pg-acct"}});
  Result<GroupSpec> g = ResolveGroup(p, {}, &pg);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "PodGroup/ns/pg");
  EXPECT_EQ(g->size, 4);
  EXPECT_EQ(g->annotations.at("slurmjob.slinky.slurm.net/account"), "pg-acct");
  EXPECT_TRUE(InGroup(p, *g));
  g = ResolveGroup(p, {}, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "Pod/ns/w0");
}

// Kubernetes 1.36's Workload API (scheduling.k8s.io/v1alpha2). The PodGroup specs below are
// written from the 1.36.2 types (staging/src/k8s.io/api/scheduling/v1alpha2/types.go):
// spec.schedulingPolicy is a union of `gang: {minCount}` and `basic: {}`.
TEST(GroupTest, WorkloadApiGangPodGroupIsOneGroupOfMinCount) {
  kube::Pod p = MakePod("w0");
  p.spec.scheduling_group = "train";
  kube::GenericObject pg =
      Owner("PodGroup", "train", R"({"schedulingPolicy":{"gang":{"minCount":4}}})",
            {{"slurmjob.slinky.slurm.net/account", "pg-acct"}});
  pg.api_version = "scheduling.k8s.io/v1alpha2";
  Result<GroupSpec> g = ResolveGroup(p, {}, nullptr, &pg);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->key, "WorkloadPodGroup/ns/train");
  EXPECT_EQ(g->kind, "PodGroup");
  EXPECT_EQ(g->name, "train");
  EXPECT_EQ(g->size, 4);
  EXPECT_EQ(g->annotations.at("slurmjob.slinky.slurm.net/account"), "pg-acct");
  EXPECT_TRUE(InGroup(p, *g));
  kube::Pod other = MakePod("w1");
  other.spec.scheduling_group = "eval";
  EXPECT_FALSE(InGroup(other, *g));
  other.spec.scheduling_group = "train";
  EXPECT_TRUE(InGroup(other, *g));
  // A pod with only the coscheduling label of the same name is not a member.
  kube::Pod cos_pod = MakePod("c0");
  cos_pod.metadata.labels = {{"scheduling.x-k8s.io/pod-group", "train"}};
  EXPECT_FALSE(InGroup(cos_pod, *g));
  // The coscheduling label on the same pod loses: spec.schedulingGroup decides.
  other.metadata.labels = {{"scheduling.x-k8s.io/pod-group", "pg"}};
  kube::GenericObject cos = Owner("PodGroup", "pg", R"({"minMember":2})", {});
  g = ResolveGroup(other, {}, &cos, &pg);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "WorkloadPodGroup/ns/train");
  EXPECT_EQ(g->size, 4);
  // Without the schedulingGroup the label groups as before.
  other.spec.scheduling_group.clear();
  g = ResolveGroup(other, {}, &cos, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "PodGroup/ns/pg");
}

// Basic policy (no gang): each pod is its own job, with the PodGroup's annotations.
TEST(GroupTest, WorkloadApiBasicPodGroupLeavesEachPodAlone) {
  kube::Pod p = MakePod("w0");
  p.spec.scheduling_group = "svc";
  kube::GenericObject pg = Owner("PodGroup", "svc", R"({"schedulingPolicy":{"basic":{}}})",
                                 {{"slurmjob.slinky.slurm.net/qos", "q"}});
  Result<GroupSpec> g = ResolveGroup(p, {}, nullptr, &pg);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->key, "Pod/ns/w0");
  EXPECT_EQ(g->size, 1);
  EXPECT_EQ(g->annotations.at("slurmjob.slinky.slurm.net/qos"), "q");
  EXPECT_TRUE(InGroup(p, *g));
}

// Bad input never schedules the pod alone and never crashes: each gives a clear error.
TEST(GroupTest, WorkloadApiPodGroupBadPolicyOrUnreadIsAnError) {
  kube::Pod p = MakePod("w0");
  p.spec.scheduling_group = "train";
  Result<GroupSpec> g = ResolveGroup(p, {}, nullptr, nullptr);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(g.error().message.find("PodGroup train"), std::string::npos) << g.error().message;
  EXPECT_NE(g.error().message.find("scheduling.k8s.io/v1alpha2"), std::string::npos);
  for (const char* spec :
       {R"({})", R"({"schedulingPolicy":{}})",
        R"({"schedulingPolicy":{"basic":{},"gang":{"minCount":2}}})",
        R"({"schedulingPolicy":{"gang":{}}})", R"({"schedulingPolicy":{"gang":{"minCount":0}}})",
        R"({"schedulingPolicy":{"gang":{"minCount":"4"}}})",
        R"({"schedulingPolicy":{"gang":{"minCount":4294967296}}})",
        R"({"schedulingPolicy":{"gang":7}})", R"({"schedulingPolicy":"gang"})", "not json"}) {
    kube::GenericObject pg = Owner("PodGroup", "train", spec, {});
    g = ResolveGroup(p, {}, nullptr, &pg);
    ASSERT_FALSE(g) << spec;
    EXPECT_EQ(g.error().code, ErrorCode::kInvalidArgument) << spec;
    EXPECT_NE(g.error().message.find("train"), std::string::npos) << g.error().message;
  }
}

TEST(GroupTest, PodGroupScheduledConditionAndPatch) {
  kube::GenericObject pg = Owner("PodGroup", "train", "{}", {});
  EXPECT_FALSE(PodGroupScheduledCondition(pg));
  pg.status_json =
      R"j({"conditions":[{"type":"Other","status":"True"},{"type":"PodGroupScheduled",
      "status":"False","reason":"Unschedulable","message":"Slurm job 12 is PENDING (Resources)",
      "lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1}]})j";
  std::optional<kube::Condition> c = PodGroupScheduledCondition(pg);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, "False");
  EXPECT_EQ(c->reason, "Unschedulable");
  EXPECT_EQ(c->message, "Slurm job 12 is PENDING (Resources)");
  EXPECT_EQ(c->last_transition_time, "2026-01-01T00:00:00Z");
  pg.status_json = "garbage";
  EXPECT_FALSE(PodGroupScheduledCondition(pg));
  EXPECT_EQ(PodGroupScheduledPatch(true, "Scheduled", "job \"1\"", "2026-01-01T00:00:00Z"),
            R"({"status":{"conditions":[{"type":"PodGroupScheduled","status":"True",)"
            R"("reason":"Scheduled","message":"job \"1\"","lastTransitionTime":)"
            R"("2026-01-01T00:00:00Z"}]}})");
}

TEST(GroupTest, UnsupportedOwnersGiveAnnotationsOnly) {
  kube::Pod p = MakePod("web-1");
  kube::GenericObject rs = Owner("ReplicaSet", "web-5d", "{}");
  kube::GenericObject dep =
      Owner("Deployment", "web", "{}", {{"slurmjob.slinky.slurm.net/qos", "d"}});
  Result<GroupSpec> g = ResolveGroup(p, {rs, dep}, nullptr);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->key, "Pod/ns/web-1");
  EXPECT_EQ(g->kind, "Deployment");
  EXPECT_EQ(g->annotations.at("slurmjob.slinky.slurm.net/qos"), "d");
}

// Counts beyond int32 in an owner's spec (a CRD's schema may let them through) made the group
// size a signed overflow (UBSan) and the time limit too: they are clamped to int32, the deadline
// rounds up without overflowing.
TEST(GroupTest, HugeCountsInOwnerSpecsDoNotOverflow) {
  kube::Pod p = MakePod("js-w-0-0");
  p.metadata.labels = {{"jobset.sigs.k8s.io/jobset-name", "js"}};
  kube::GenericObject js = Owner("JobSet", "js", R"({"replicatedJobs":[
      {"replicas":9223372036854775807,"template":{"spec":{"parallelism":9223372036854775807}}},
      {"replicas":4611686018427387904,"template":{"spec":{"parallelism":2}}}]})",
                                 {{std::string(kGangAnnotation), "true"}});
  Result<GroupSpec> g = ResolveGroup(p, {js}, nullptr);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->size, std::numeric_limits<std::int32_t>::max());

  kube::GenericObject job =
      Owner("Job", "j", R"({"activeDeadlineSeconds":9223372036854775807,"parallelism":-5,
                            "completions":-9223372036854775807})",
            {{std::string(kGangAnnotation), "true"}});
  job.status_json = R"({"succeeded":9223372036854775807})";
  g = ResolveGroup(MakePod("j-0"), {job}, nullptr);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->size, 1);
  EXPECT_EQ(g->time_limit_minutes, 9223372036854775807 / 60 + 1);
}

TEST(GroupTest, BrokenOwnerSpecIsAnError) {
  kube::Pod p = MakePod("p");
  kube::GenericObject job = Owner("Job", "j", "{not json");
  Result<GroupSpec> g = ResolveGroup(p, {job}, nullptr);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("Job ns/j"), std::string::npos);
}

}  // namespace
}  // namespace sb::bridge
