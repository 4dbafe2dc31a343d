// SPDX-License-Identifier: Apache-2.0
//
// The Workload API's versions (bridge/group.h): which one discovery picks, v1beta1 PodGroups
// grouped as v1alpha2 ones, the condition each version gets, and the coscheduling PodGroup's
// spec.scheduleTimeoutSeconds. (The other grouping signals are tested in translate_test.cc.)
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "bridge/group.h"
#include "kube/codec.h"

namespace sb::bridge {
namespace {

kube::Pod PodNaming(const std::string& name, const std::string& pod_group) {
  kube::Pod p;
  p.metadata.name = name;
  p.metadata.namespace_ = "ns";
  p.metadata.uid = "uid-" + name;
  p.spec.scheduling_group = pod_group;
  p.spec.containers.push_back(kube::Container{.name = "main"});
  return p;
}

kube::GenericObject Decoded(const std::string& json) {
  Result<kube::GenericObject> o = kube::Decode<kube::GenericObject>(json);
  EXPECT_TRUE(o) << (o ? "" : o.error().message);
  return o ? *o : kube::GenericObject{};
}

// A scheduling.k8s.io/v1beta1 PodGroup as Kubernetes 1.37 serves it, written from the 1.37
// OpenAPI document (api/openapi-spec/v3/apis__scheduling.k8s.io__v1beta1_openapi.json):
// PodGroupSpec {schedulingPolicy {gang {minCount} | basic {}}, disruptionMode {single | all},
// priority, priorityClassName, workloadRef {workloadName, templateName}, schedulingConstraints
// {topology [{key}]}}, PodGroupStatus {conditions [metav1.Condition]}. (The test cluster runs
// 1.36.2, which does not serve v1beta1.)
std::string V1beta1PodGroup(const std::string& policy, const std::string& status = "{}") {
  return R"({"apiVersion":"scheduling.k8s.io/v1beta1","kind":"PodGroup",)"
         R"("metadata":{"name":"train","namespace":"ns","uid":"pg-1","generation":3,)"
         R"("annotations":{"slurmjob.slinky.slurm.net/account":"pg-acct"}},)"
         R"("spec":{"schedulingPolicy":)" +
         policy +
         R"(,"disruptionMode":{"single":{}},"priority":0,"priorityClassName":"",)"
         R"("workloadRef":{"workloadName":"trainer","templateName":"workers"},)"
         R"("schedulingConstraints":{"topology":[{"key":"topology.kubernetes.io/rack"}]}},)"
         R"("status":)" +
         status + "}";
}

TEST(WorkloadApiTest, DiscoveryPicksV1beta1OverV1alpha2ElseNone) {
  EXPECT_EQ(WorkloadPodGroupApiVersion({"v1", "v1beta1", "v1alpha2"}), "scheduling.k8s.io/v1beta1");
  EXPECT_EQ(WorkloadPodGroupApiVersion({"v1", "v1alpha2", "v1beta1"}), "scheduling.k8s.io/v1beta1")
      << "the server's order does not matter: v1beta1 first";
  EXPECT_EQ(WorkloadPodGroupApiVersion({"v1", "v1alpha2"}), "scheduling.k8s.io/v1alpha2");
  EXPECT_EQ(WorkloadPodGroupApiVersion({"v1beta1"}), "scheduling.k8s.io/v1beta1");
  // 1.35 and before (only PriorityClass's v1), 1.35's v1alpha1 Workload, or nothing: off.
  EXPECT_EQ(WorkloadPodGroupApiVersion({"v1"}), "");
  EXPECT_EQ(WorkloadPodGroupApiVersion({"v1", "v1alpha1"}), "");
  EXPECT_EQ(WorkloadPodGroupApiVersion({}), "");
  EXPECT_EQ(PodGroupConditionType("scheduling.k8s.io/v1beta1"), "PodGroupInitiallyScheduled");
  EXPECT_EQ(PodGroupConditionType("scheduling.k8s.io/v1alpha2"), "PodGroupScheduled");
}

// A v1beta1 gang is the same group as a v1alpha2 one of the same name: key, kind, name, size,
// annotations and membership; everything downstream (the job, its tag) follows from those.
TEST(WorkloadApiTest, V1beta1GangIsTheSameGroupAsV1alpha2) {
  const kube::Pod p = PodNaming("w0", "train");
  const kube::GenericObject beta = Decoded(V1beta1PodGroup(R"({"gang":{"minCount":4}})"));
  ASSERT_EQ(beta.api_version, "scheduling.k8s.io/v1beta1");
  kube::GenericObject alpha =
      Decoded(R"({"apiVersion":"scheduling.k8s.io/v1alpha2","kind":"PodGroup",)"
              R"("metadata":{"name":"train","namespace":"ns","uid":"pg-1",)"
              R"("annotations":{"slurmjob.slinky.slurm.net/account":"pg-acct"}},)"
              R"("spec":{"schedulingPolicy":{"gang":{"minCount":4}}}})");
  Result<GroupSpec> b = ResolveGroup(p, {}, nullptr, &beta);
  Result<GroupSpec> a = ResolveGroup(p, {}, nullptr, &alpha);
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(b->key, "WorkloadPodGroup/ns/train");
  EXPECT_EQ(b->kind, "PodGroup");
  EXPECT_EQ(b->name, "train");
  EXPECT_EQ(b->size, 4);
  EXPECT_EQ(b->annotations.at("slurmjob.slinky.slurm.net/account"), "pg-acct");
  EXPECT_EQ(b->key, a->key);
  EXPECT_EQ(b->kind, a->kind);
  EXPECT_EQ(b->name, a->name);
  EXPECT_EQ(b->size, a->size);
  EXPECT_EQ(b->annotations, a->annotations);
  EXPECT_TRUE(InGroup(PodNaming("w1", "train"), *b));
  EXPECT_FALSE(InGroup(PodNaming("w1", "eval"), *b));

  // minCount is mutable in v1beta1: the PodGroup read again gives the new size.
  const kube::GenericObject scaled = Decoded(V1beta1PodGroup(R"({"gang":{"minCount":6}})"));
  b = ResolveGroup(p, {}, nullptr, &scaled);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->size, 6);

  // Basic: each pod alone, as v1alpha2.
  const kube::GenericObject basic = Decoded(V1beta1PodGroup(R"({"basic":{}})"));
  b = ResolveGroup(p, {}, nullptr, &basic);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->key, "Pod/ns/w0");
  EXPECT_EQ(b->size, 1);
  EXPECT_EQ(b->annotations.at("slurmjob.slinky.slurm.net/account"), "pg-acct");

  // An odd policy names the version it was read in.
  const kube::GenericObject odd = Decoded(V1beta1PodGroup(R"({"gang":{"minCount":0}})"));
  b = ResolveGroup(p, {}, nullptr, &odd);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(b.error().message.find("PodGroup ns/train (scheduling.k8s.io/v1beta1)"),
            std::string::npos)
      << b.error().message;
}

// v1beta1's PodGroupInitiallyScheduled (1.37 OpenAPI: PodGroupStatus.conditions, known types
// "PodGroupInitiallyScheduled" and "DisruptionTarget") is read with its observedGeneration, and
// written with the same metav1.Condition fields as v1alpha2's PodGroupScheduled.
TEST(WorkloadApiTest, ConditionsAreReadAndWrittenByTypeWithObservedGeneration) {
  const kube::GenericObject pg = Decoded(V1beta1PodGroup(
      R"({"gang":{"minCount":2}})",
      R"({"conditions":[{"type":"DisruptionTarget","status":"False","reason":"x","message":"",)"
      R"("lastTransitionTime":"2026-01-01T00:00:00Z"},)"
      R"({"type":"PodGroupInitiallyScheduled","status":"False","reason":"Unschedulable",)"
      R"j("message":"Slurm job 12 is PENDING (Resources)","observedGeneration":3,)j"
      R"("lastTransitionTime":"2026-01-02T00:00:00Z"}]})"));
  EXPECT_EQ(pg.metadata.generation, 3);
  std::optional<PodGroupCondition> c = FindPodGroupCondition(pg, "PodGroupInitiallyScheduled");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->condition.type, "PodGroupInitiallyScheduled");
  EXPECT_EQ(c->condition.status, "False");
  EXPECT_EQ(c->condition.reason, "Unschedulable");
  EXPECT_EQ(c->condition.message, "Slurm job 12 is PENDING (Resources)");
  EXPECT_EQ(c->condition.last_transition_time, "2026-01-02T00:00:00Z");
  EXPECT_EQ(c->observed_generation, 3);
  // v1alpha2's condition type is not v1beta1's.
  EXPECT_FALSE(FindPodGroupCondition(pg, "PodGroupScheduled"));
  EXPECT_FALSE(PodGroupScheduledCondition(pg));

  const std::string patch =
      PodGroupConditionPatch("PodGroupInitiallyScheduled", true, "Scheduled",
                             "Slurm job 12 is RUNNING", "2026-01-03T00:00:00Z", 3);
  boost::json::value v = boost::json::parse(patch);
  const boost::json::array& conds = v.at("status").at("conditions").as_array();
  ASSERT_EQ(conds.size(), 1u);
  EXPECT_EQ(conds[0].at("type"), "PodGroupInitiallyScheduled");
  EXPECT_EQ(conds[0].at("status"), "True");
  EXPECT_EQ(conds[0].at("reason"), "Scheduled");
  EXPECT_EQ(conds[0].at("message"), "Slurm job 12 is RUNNING");
  EXPECT_EQ(conds[0].at("lastTransitionTime"), "2026-01-03T00:00:00Z");
  EXPECT_EQ(conds[0].at("observedGeneration"), 3);
  // Without a generation (0: unknown) the optional field is left out.
  v = boost::json::parse(PodGroupConditionPatch("PodGroupScheduled", false, "Unschedulable", "m",
                                                "2026-01-03T00:00:00Z"));
  EXPECT_FALSE(v.at("status").at("conditions").at(0).as_object().contains("observedGeneration"));
  EXPECT_EQ(v.at("status").at("conditions").at(0).at("type"), "PodGroupScheduled");
}

// scheduling.x-k8s.io/v1alpha1 PodGroup: spec.scheduleTimeoutSeconds (*int32), when positive.
TEST(WorkloadApiTest, CoschedulingScheduleTimeoutSeconds) {
  auto timeout = [](const std::string& spec) {
    kube::GenericObject pg;
    pg.kind = "PodGroup";
    pg.spec_json = spec;
    return ScheduleTimeoutSeconds(pg);
  };
  EXPECT_EQ(timeout(R"({"minMember":3,"scheduleTimeoutSeconds":60})"), 60);
  EXPECT_EQ(timeout(R"({"minMember":3})"), std::nullopt);
  EXPECT_EQ(timeout(R"({"scheduleTimeoutSeconds":0})"), std::nullopt);
  EXPECT_EQ(timeout(R"({"scheduleTimeoutSeconds":-5})"), std::nullopt);
  EXPECT_EQ(timeout(R"({"scheduleTimeoutSeconds":"60"})"), std::nullopt);
  EXPECT_EQ(timeout(R"({"scheduleTimeoutSeconds":99999999999})"), 2147483647);
  EXPECT_EQ(timeout("not json"), std::nullopt);
  EXPECT_EQ(timeout(""), std::nullopt);
}

TEST(PodGroupErrorTest, NeverScheduleAlone) {
  EXPECT_EQ(OnPodGroupError(ErrorCode::kNotFound), PodGroupMiss::kReportAndWait);
  EXPECT_EQ(OnPodGroupError(ErrorCode::kPermissionDenied), PodGroupMiss::kReportAndWait);
  for (ErrorCode c : {ErrorCode::kTooManyRequests, ErrorCode::kUnavailable,
                      ErrorCode::kDeadlineExceeded, ErrorCode::kInternal}) {
    EXPECT_EQ(OnPodGroupError(c), PodGroupMiss::kRetry);
  }
}

}  // namespace
}  // namespace sb::bridge
