// SPDX-License-Identifier: Apache-2.0
// N-5: what a pod's claims allow, from objects written as the apiserver serves them.
#include <gtest/gtest.h>

#include "bridge/volumes.h"
#include "kube/codec.h"

namespace sb::bridge {
namespace {

kube::GenericObject Object(const std::string& json) {
  Result<kube::GenericObject> o = kube::Decode<kube::GenericObject>(json);
  EXPECT_TRUE(o) << o.error().message;
  return o.value_or(kube::GenericObject{});
}

TEST(VolumesTest, PodClaimsNameOwnAndEphemeralClaims) {
  Result<kube::Pod> pod = kube::Decode<kube::Pod>(R"({"metadata":{"name":"train","namespace":"ns"},
    "spec":{"containers":[{"name":"c"}],"volumes":[
      {"name":"data","persistentVolumeClaim":{"claimName":"dataset"}},
      {"name":"scratch","ephemeral":{"volumeClaimTemplate":{"spec":{}}}},
      {"name":"cfg","configMap":{"name":"x"}}]}})");
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(PodClaims(*pod), (std::vector<std::string>{"dataset", "train-scratch"}));
}

TEST(VolumesTest, ReadsClaimsClassesAndVolumes) {
  ClaimFacts f{.name = "c"};
  ReadClaim(Object(R"({"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"c"},
    "spec":{"storageClassName":"local","volumeName":"pv-1"},"status":{"phase":"Bound"}})"),
            f);
  EXPECT_EQ(f.phase, "Bound");
  EXPECT_EQ(f.volume, "pv-1");
  EXPECT_EQ(f.storage_class, "local");
  EXPECT_EQ(
      BindingMode(
          R"({"kind":"StorageClass","provisioner":"x","volumeBindingMode":"WaitForFirstConsumer"})"),
      "WaitForFirstConsumer");
  EXPECT_EQ(BindingMode(R"({"kind":"StorageClass","provisioner":"x"})"), "Immediate");
  Result<std::vector<kube::NodeSelectorTerm>> terms = PvNodeAffinity(Object(
      R"({"kind":"PersistentVolume","metadata":{"name":"pv-1"},"spec":{"nodeAffinity":{"required":
      {"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/hostname","operator":"In",
      "values":["n2"]}]}]}}}})"));
  ASSERT_TRUE(terms) << terms.error().message;
  ASSERT_EQ(terms->size(), 1u);
  EXPECT_EQ((*terms)[0].match_expressions[0].values, std::vector<std::string>{"n2"});
  EXPECT_TRUE(
      PvNodeAffinity(Object(R"({"kind":"PersistentVolume","metadata":{"name":"p"},"spec":{}})"))
          ->empty());
  EXPECT_FALSE(PvNodeAffinity(Object(
      R"({"kind":"PersistentVolume","metadata":{"name":"p"},"spec":{"nodeAffinity":{"required":{"nodeSelectorTerms":7}}}})")));
}

TEST(VolumesTest, Verdicts) {
  const std::vector<kube::NodeSelectorTerm> on_n2 = {
      {.match_expressions = {
           {.key = "kubernetes.io/hostname", .operator_ = "In", .values = {"n2"}}}}};
  using V = VolumePlan::Verdict;
  struct Row {
    std::string name;
    std::vector<ClaimFacts> claims;
    V verdict;
    std::string message;  // its beginning
    std::size_t limits;   // PVs that limit the nodes
  };
  for (const Row& r : std::vector<Row>{
           {"no claims", {}, V::kReady, "", 0},
           {"bound, any node", {{.name = "a", .phase = "Bound", .volume = "pv"}}, V::kReady, "", 0},
           {"bound to a local PV",
            {{.name = "a", .phase = "Bound", .volume = "pv", .pv_node_affinity = on_n2}},
            V::kReady,
            "",
            1},
           {"not found",
            {{.name = "a", .found = false}},
            V::kWait,
            "persistentvolumeclaim \"a\" not found",
            0},
           {"pending, immediate",
            {{.name = "a", .phase = "Pending", .binding_mode = "Immediate"}},
            V::kWait,
            "waiting for persistentvolumeclaim \"a\" to be bound",
            0},
           {"pending, no class (static binding)",
            {{.name = "a", .phase = "Pending"}},
            V::kWait,
            "waiting for persistentvolumeclaim \"a\"",
            0},
           {"pending, first consumer",
            {{.name = "a",
              .phase = "Pending",
              .storage_class = "local-path",
              .binding_mode = "WaitForFirstConsumer"}},
            V::kRefuse,
            "persistentvolumeclaim \"a\" waits for its first consumer (StorageClass local-path",
            0},
           {"lost",
            {{.name = "a", .phase = "Lost", .volume = "pv"}},
            V::kRefuse,
            "persistentvolumeclaim \"a\" is Lost",
            0},
           {"a refusal outranks a wait",
            {{.name = "a", .found = false},
             {.name = "b", .phase = "Pending", .binding_mode = "WaitForFirstConsumer"}},
            V::kRefuse,
            "persistentvolumeclaim \"b\" waits",
            0},
       }) {
    SCOPED_TRACE(r.name);
    VolumePlan p = PlanVolumes(r.claims);
    EXPECT_EQ(p.verdict, r.verdict);
    EXPECT_TRUE(p.message.starts_with(r.message)) << p.message;
    EXPECT_EQ(p.node_affinity.size(), r.limits);
  }
}

}  // namespace
}  // namespace sb::bridge
