// SPDX-License-Identifier: Apache-2.0
// The claims written from assigned devices (bridge/dra/claims.h).
#include "bridge/dra/claims.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "bridge/dra/assign.h"
#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

namespace json = boost::json;
using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

TEST_F(DraAssignTest, TheClaimNamesExactlySlurmsDevices) {
  // The pod asks for 2 CPUs and 1 GPU; Slurm gave cores 1-2 and GPUs 2-3 on n1.
  const kube::Pod pod = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"},
                                   {"deviceclass.resource.kubernetes.io/dra.cpu", "2"}});
  Result<std::vector<DraRequest>> requests = PodDraRequests(pod, kDefaults, {});
  ASSERT_TRUE(requests) << requests.error().message;
  Result<std::vector<DeviceAssignment>> assigned =
      AssignDevices(*requests, inventory_, Layout("2-3", "0x06"), kDefaults);
  ASSERT_TRUE(assigned) << assigned.error().message;
  std::optional<PlannedClaim> claim = PlanExtendedResourceClaim(pod, "n1", *assigned);
  ASSERT_TRUE(claim);
  EXPECT_EQ(json::parse(claim->object_json),
            json::parse(sb::testing::ReadTestData("kube/resourceclaim_extended_n1.json")))
      << claim->object_json;
  // The status alone, for the status subresource.
  const json::value expected =
      json::parse(sb::testing::ReadTestData("kube/resourceclaim_extended_n1.json"));
  EXPECT_EQ(json::parse(claim->status_json),
            json::value(json::object{{"status", expected.at("status")}}));
  EXPECT_EQ(claim->mappings,
            (std::vector<RequestMapping>{
                {"main", "deviceclass.resource.kubernetes.io/dra.cpu", "cpu"},
                {"main", "deviceclass.resource.kubernetes.io/gpu.example.com", "gpu"}}));
  EXPECT_EQ(json::parse(ExtendedResourceClaimStatusPatch("train-0-extended-resources-k8x2q",
                                                         claim->mappings)),
            json::parse(R"({"status":{"extendedResourceClaimStatus":{
              "resourceClaimName":"train-0-extended-resources-k8x2q",
              "requestMappings":[
                {"containerName":"main","resourceName":"deviceclass.resource.kubernetes.io/dra.cpu","requestName":"cpu"},
                {"containerName":"main","resourceName":"deviceclass.resource.kubernetes.io/gpu.example.com","requestName":"gpu"}]}}})"));
}

TEST_F(DraAssignTest, TemplateClaimsGetTheirOwnStatus) {
  DraRequest r = Gpu(1);
  r.resource_name.clear();
  r.container.clear();
  r.pod_claim = "gpu";
  r.claim_request = "gpu";
  const kube::Pod pod = PodAsking({});
  Result<std::vector<DeviceAssignment>> assigned =
      AssignDevices({r}, inventory_, Layout("1"), kDefaults);
  ASSERT_TRUE(assigned) << assigned.error().message;
  EXPECT_FALSE(PlanExtendedResourceClaim(pod, "n1", *assigned));  // no claim of its own
  EXPECT_EQ(json::parse(AllocationStatusJson(*assigned, pod, "n1")), json::parse(R"({"status":{
      "allocation":{"devices":{"results":[
        {"request":"gpu","driver":"gpu.example.com","pool":"n1","device":"gpu-1"}]},
        "nodeSelector":{"nodeSelectorTerms":[{"matchFields":[
          {"key":"metadata.name","operator":"In","values":["n1"]}]}]}},
      "reservedFor":[{"resource":"pods","name":"train-0",
                      "uid":"0b7a1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"}]}})"));
}

TEST(DraAssignNvidiaTest, NoSelectorWhereTheIndexIsTheName) {
  Result<NodeInventory> inv =
      BuildNodeInventory("n2", {SliceFile("resourceslice_gpu_nvidia_n2.json")}, kDefaults);
  ASSERT_TRUE(inv) << inv.error().message;
  const kube::Pod pod = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.nvidia.com", "1"}});
  Result<std::vector<DraRequest>> requests = PodDraRequests(pod, kDefaults, {});
  ASSERT_TRUE(requests);
  Result<std::vector<DeviceAssignment>> assigned = AssignDevices(
      *requests, *inv,
      {.node = "n2", .gres = {{.name = "gpu", .type = "h100", .count = 1, .index = "1"}}},
      kDefaults);
  ASSERT_TRUE(assigned) << assigned.error().message;
  std::optional<PlannedClaim> claim = PlanExtendedResourceClaim(pod, "k8s-n2", *assigned);
  ASSERT_TRUE(claim);
  const json::value v = json::parse(claim->object_json);
  const json::object& exactly =
      v.at("spec").at("devices").at("requests").at(0).at("exactly").as_object();
  EXPECT_FALSE(exactly.contains("selectors"));
  EXPECT_EQ(v.at("status").at("allocation").at("devices").at("results").at(0).at("device"),
            "gpu-1");
  EXPECT_EQ(v.at("status")
                .at("allocation")
                .at("nodeSelector")
                .at("nodeSelectorTerms")
                .at(0)
                .at("matchFields")
                .at(0)
                .at("values")
                .at(0),
            "k8s-n2");
}

}  // namespace
}  // namespace sb::bridge
