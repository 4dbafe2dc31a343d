// SPDX-License-Identifier: Apache-2.0
// A pod's DRA requests (bridge/dra/requests.h).
#include "bridge/dra/requests.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

TEST(DraRequestsTest, ExtendedResourcesAndTemplateClaims) {
  const kube::GenericObject cls = ObjectFile("deviceclass_gpu_example.json");
  const kube::GenericObject tmpl = ObjectFile("resourceclaimtemplate_one_gpu.json");
  const ObjectsByName classes = {{"gpu.example.com", &cls}};

  kube::Pod pod = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "2"},
                             {"deviceclass.resource.kubernetes.io/dra.cpu", "4"},
                             {"memory", "1Gi"}});
  Result<std::vector<DraRequest>> got = PodDraRequests(pod, kDefaults, classes);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->size(), 2U);
  EXPECT_EQ((*got)[0], (DraRequest{.device_class = "dra.cpu",
                                   .profile = "cpu",
                                   .count = 4,
                                   .resource_name = "deviceclass.resource.kubernetes.io/dra.cpu",
                                   .container = "main"}));
  EXPECT_EQ((*got)[1].profile, "gpu-example");
  EXPECT_EQ((*got)[1].count, 2);

  // The class's extendedResourceName stands for it too.
  pod = PodAsking({{"example.com/gpu", "1"}});
  got = PodDraRequests(pod, kDefaults, classes);
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->size(), 1U);
  EXPECT_EQ((*got)[0].device_class, "gpu.example.com");
  EXPECT_EQ((*got)[0].resource_name, "example.com/gpu");

  // A template claim, read from the pod's own JSON.
  const std::string pod_json = sb::testing::ReadTestData("kube/pod_dra_claims.json");
  Result<kube::Pod> decoded = kube::Decode<kube::Pod>(pod_json);
  ASSERT_TRUE(decoded) << decoded.error().message;
  Result<std::vector<PodResourceClaim>> claims = PodResourceClaimsOf(pod_json);
  ASSERT_TRUE(claims) << claims.error().message;
  ASSERT_EQ(claims->size(), 1U);
  EXPECT_EQ((*claims)[0], (PodResourceClaim{.name = "gpu",
                                            .resource_claim_template_name = "one-gpu",
                                            .generated_claim_name = "train-0-gpu-8hx2m"}));
  got = PodDraRequests(*decoded, kDefaults, classes, *claims, {{"one-gpu", &tmpl}});
  ASSERT_TRUE(got) << got.error().message;
  ASSERT_EQ(got->size(), 2U);
  EXPECT_EQ((*got)[0].profile, "cpu");  // extended resources first
  EXPECT_EQ((*got)[1], (DraRequest{.device_class = "gpu.example.com",
                                   .profile = "gpu-example",
                                   .count = 1,
                                   .pod_claim = "gpu",
                                   .claim_request = "gpu"}));
}

TEST(DraRequestsTest, WhatSlurmCannotChooseIsAnError) {
  const kube::GenericObject tmpl = ObjectFile("resourceclaimtemplate_one_gpu.json");
  kube::Pod two = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"}});
  two.spec.containers.push_back(two.spec.containers[0]);
  two.spec.containers[1].name = "side";
  auto template_with = [](std::string request) {
    return kube::GenericObject{
        .kind = "ResourceClaimTemplate",
        .metadata = {.name = "t", .namespace_ = "team-a"},
        .spec_json = R"({"spec":{"devices":{"requests":[)" + request + "]}}}"};
  };
  struct Case {
    std::string name;
    kube::Pod pod;
    std::vector<PodResourceClaim> claims;
    kube::GenericObject tmpl;
    std::string error;
  };
  const kube::Pod plain = PodAsking({});
  const std::vector<Case> cases = {
      {"uncovered class",
       PodAsking({{"deviceclass.resource.kubernetes.io/fpga.io", "1"}}),
       {},
       {},
       "resource \"deviceclass.resource.kubernetes.io/fpga.io\": device class \"fpga.io\" is "
       "covered by no device profile"},
      {"two containers", two, {}, {}, "requested by containers \"main\" and \"side\""},
      {"bad quantity",
       PodAsking({{"deviceclass.resource.kubernetes.io/dra.cpu", "lots"}}),
       {},
       {},
       "\"lots\" is not a quantity"},
      {"shared claim",
       plain,
       {{.name = "gpu", .resource_claim_name = "shared"}},
       {},
       "names ResourceClaim \"shared\": a claim shared by pods"},
      {"unread template",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "gone"}},
       {},
       "ResourceClaimTemplate \"gone\" could not be read"},
      {"selectors",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"gpu.example.com",)"
                     R"("selectors":[{"cel":{"expression":"true"}}]}})"),
       "ResourceClaimTemplate \"team-a/t\" request \"g\": selectors are not supported"},
      {"all",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"gpu.example.com",)"
                     R"("allocationMode":"All"}})"),
       "allocationMode All is not supported"},
      {"first available",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","firstAvailable":[{"name":"a","deviceClassName":"x"}]})"),
       "firstAvailable is not supported"},
      {"capacity",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"dra.cpu",)"
                     R"("capacity":{"requests":{"dra.cpu/cpu":"8"}}}})"),
       "capacity requests are not supported"},
      {"uncovered template class",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"fpga.io"}})"),
       "request \"g\": device class \"fpga.io\" is covered by no device profile"},
      {"zero count",
       plain,
       {{.name = "gpu", .resource_claim_template_name = "t"}},
       template_with(R"({"name":"g","exactly":{"deviceClassName":"dra.cpu","count":0}})"),
       "count must be a positive integer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ObjectsByName templates;
    if (!c.tmpl.metadata.name.empty()) templates[c.tmpl.metadata.name] = &c.tmpl;
    Result<std::vector<DraRequest>> got = PodDraRequests(c.pod, kDefaults, {}, c.claims, templates);
    ASSERT_FALSE(got);
    EXPECT_NE(got.error().message.find(c.error), std::string::npos) << got.error().message;
    EXPECT_TRUE(got.error().message.starts_with("pod team-a/train-0: ")) << got.error().message;
  }
  // Constraints make the whole claim unsupported.
  kube::GenericObject constrained{
      .kind = "ResourceClaim",
      .metadata = {.name = "c"},
      .spec_json = R"({"devices":{"requests":[],"constraints":[{"matchAttribute":"x.io/numa"}]}})"};
  Result<std::vector<DraRequest>> got = ClaimRequests(constrained, kDefaults, {});
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("constraints are not supported"), std::string::npos);
  EXPECT_TRUE(ClaimRequests(tmpl, kDefaults, {}));
}

}  // namespace
}  // namespace sb::bridge
