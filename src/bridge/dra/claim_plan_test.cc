// SPDX-License-Identifier: Apache-2.0
// The binder's DRA plan (bridge/dra/claim_plan.h): per pod, Slurm's layout on its node through
// the node's ResourceSlices to the claims to write, or the first pod whose devices cannot be
// named and why.
#include "bridge/dra/claim_plan.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

DraRequest GpuRequest(std::int64_t n) {
  return {.device_class = "gpu.example.com",
          .profile = "gpu-example",
          .count = n,
          .resource_name = "deviceclass.resource.kubernetes.io/gpu.example.com",
          .container = "main"};
}

// A request of the pod's template claim "gpu" (its request "gpu").
DraRequest TemplateGpuRequest(std::int64_t n) {
  return {.device_class = "gpu.example.com",
          .profile = "gpu-example",
          .count = n,
          .pod_claim = "gpu",
          .claim_request = "gpu"};
}

// Slurm's layout entry of `node`: GPUs `index` of GRES gpu:fake.
slurm::NodeAllocation OnNode(std::string node, std::string index) {
  return {.node = std::move(node),
          .gres = {{.name = "gpu", .type = "fake", .count = 2, .index = std::move(index)}}};
}

TEST(DraClaimPlanTest, SlurmsLayoutToTheClaimsOfEachPod) {
  const kube::Pod train0 = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "2"}});
  kube::Pod train1 = train0;
  train1.metadata.name = "train-1";
  train1.metadata.uid = "1c8b2d3e-4f50-4b6c-9d7e-8f9a0b1c2d3e";
  kube::Pod templated = PodAsking({});
  templated.status.resource_claim_statuses = {{"gpu", "train-0-gpu-x7k2p"}};
  const kube::Pod not_made = PodAsking({});  // its template claim is not made yet
  // The example driver's gpu-0..3 on `node` (testdata's n1 slice, moved).
  const auto gpus_on = [](const std::string& node) {
    ResourceSliceInfo s = SliceFile("resourceslice_gpu_example_n1.json");
    s.name = "gpu-example-" + node;
    s.node_name = s.pool = node;
    return std::vector<ResourceSliceInfo>{s};
  };
  const std::vector<ResourceSliceInfo> n1 = gpus_on("n1");
  // Two slices publishing gpu-0 of pool n1 twice: no inventory.
  std::vector<ResourceSliceInfo> twice = n1;
  twice.push_back(n1.front());
  twice.back().name += "-again";
  twice[0].resource_slice_count = twice[1].resource_slice_count = 2;

  struct Want {
    std::optional<std::size_t> failed_pod;
    std::string problem;  // a part of it
    // Per planned pod: its extended claim's name ("" none), template claims, devices.
    std::vector<std::string> extended;
    std::vector<std::vector<std::string>> template_claims;
    std::vector<std::vector<std::string>> devices;
  };
  struct Case {
    std::string name;
    ClaimPlanInput in;
    Want want;
  };
  const std::string name0 = ExtendedResourceClaimName(train0);
  const std::string name1 = ExtendedResourceClaimName(train1);
  const std::vector<Case> cases = {
      {"one pod: its claim names the GPUs Slurm gave on its node",
       {.pods = {{&train0, "n1", "n1", {GpuRequest(2)}}},
        .layout = {OnNode("n1", "1-2")},
        .slices = {{"n1", n1}}},
       {.extended = {name0},
        .template_claims = {{}},
        .devices = {{"gpu-1 (GRES index 1)", "gpu-2 (GRES index 2)"}}}},
      {"a Kubernetes node that Slurm knows by another name: the layout by the Slurm name",
       {.pods = {{&train0, "k8s-a", "n1", {GpuRequest(1)}}},
        .layout = {OnNode("n1", "3")},
        .slices = {{"k8s-a", gpus_on("k8s-a")}}},
       {.extended = {name0}, .template_claims = {{}}, .devices = {{"gpu-3 (GRES index 3)"}}}},
      {"two pods on two nodes: each its node's entry and its own claim",
       {.pods = {{&train0, "n1", "n1", {GpuRequest(1)}}, {&train1, "n2", "n2", {GpuRequest(1)}}},
        .layout = {OnNode("n1", "1"), OnNode("n2", "3")},
        .slices = {{"n1", n1}, {"n2", gpus_on("n2")}}},
       {.extended = {name0, name1},
        .template_claims = {{}, {}},
        .devices = {{"gpu-1 (GRES index 1)"}, {"gpu-3 (GRES index 3)"}}}},
      {"a template claim: its status, no claim of the pod's own",
       {.pods = {{&templated, "n1", "n1", {TemplateGpuRequest(1)}}},
        .layout = {OnNode("n1", "2")},
        .slices = {{"n1", n1}}},
       {.extended = {""},
        .template_claims = {{"train-0-gpu-x7k2p"}},
        .devices = {{"gpu-2 (GRES index 2)"}}}},
      {"a template claim not made yet",
       {.pods = {{&not_made, "n1", "n1", {TemplateGpuRequest(1)}}},
        .layout = {OnNode("n1", "2")},
        .slices = {{"n1", n1}}},
       {.failed_pod = 0,
        .problem = "claim gpu of the pod has not been made from its template yet"}},
      {"a node without a Slurm name",
       {.pods = {{&train0, "n1", "", {GpuRequest(1)}}},
        .layout = {OnNode("n1", "1")},
        .slices = {{"n1", n1}}},
       {.failed_pod = 0, .problem = "the job's resource layout has no entry for node n1"}},
      {"the layout lacks the pod's node",
       {.pods = {{&train0, "n1", "n1", {GpuRequest(1)}}},
        .layout = {OnNode("n2", "1")},
        .slices = {{"n1", n1}}},
       {.failed_pod = 0, .problem = "the job's resource layout has no entry for node n1"}},
      {"the node publishes no device: the index names none",
       {.pods = {{&train0, "n1", "n1", {GpuRequest(1)}}}, .layout = {OnNode("n1", "1")}},
       {.failed_pod = 0, .problem = "index 1 on node n1 is no device of the profile"}},
      {"slices that make no inventory",
       {.pods = {{&train0, "n1", "n1", {GpuRequest(1)}}},
        .layout = {OnNode("n1", "1")},
        .slices = {{"n1", twice}}},
       {.failed_pod = 0, .problem = "the ResourceSlices of node n1: "}},
      {"the second pod fails: nothing is written for the first either",
       {.pods = {{&train0, "n1", "n1", {GpuRequest(1)}}, {&train1, "n2", "n2", {GpuRequest(2)}}},
        .layout = {OnNode("n1", "1"), OnNode("n2", "3")},
        .slices = {{"n1", n1}, {"n2", gpus_on("n2")}}},
       {.failed_pod = 1, .problem = "requested 2, Slurm allocated 1"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ClaimsPlan plan = PlanClaims(c.in, kDefaults);
    EXPECT_EQ(plan.failed_pod, c.want.failed_pod) << plan.problem;
    if (c.want.failed_pod) {
      EXPECT_NE(plan.problem.find(c.want.problem), std::string::npos) << plan.problem;
      EXPECT_TRUE(plan.pods.empty());
      continue;
    }
    EXPECT_EQ(plan.problem, "");
    ASSERT_EQ(plan.pods.size(), c.in.pods.size());
    for (std::size_t i = 0; i < plan.pods.size(); ++i) {
      const PodClaimWrites& got = plan.pods[i];
      const kube::Pod& pod = *c.in.pods[i].pod;
      EXPECT_EQ(got.extended_name, c.want.extended[i]);
      EXPECT_EQ(got.extended.has_value(), !c.want.extended[i].empty());
      if (got.extended) {
        // The claim and its status as PlanExtendedResourceClaim writes them for these devices.
        EXPECT_NE(got.extended->object_json.find(pod.metadata.uid), std::string::npos);
        EXPECT_NE(got.extended->status_json.find("\"device\":\"gpu-"), std::string::npos);
      }
      std::vector<std::string> claims;
      for (const PodClaimWrites::StatusWrite& w : got.template_claims) {
        claims.push_back(w.claim);
        EXPECT_NE(w.body.find("\"reservedFor\""), std::string::npos) << w.body;
      }
      EXPECT_EQ(claims, c.want.template_claims[i]);
      EXPECT_EQ(got.devices, c.want.devices[i]);
    }
  }
}

}  // namespace
}  // namespace sb::bridge
