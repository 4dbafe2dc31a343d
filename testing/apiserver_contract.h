// SPDX-License-Identifier: Apache-2.0
//
// testing/apiserver_contract.h
//
// What the bridge relies on the apiserver to do with its patches and deletions, as one scenario
// run against both the fake apiserver (testing/fake_apiserver_test.cc) and the real 1.36
// apiserver of the test environment (src/kube/kube_e2e_test.cc), so that the fake cannot drift
// from the real thing unseen (test audit N3):
//   1. a strategic merge patch merges metadata.finalizers as a set (the scheduler's label patch
//      adds its finalizer beside other controllers' ones), the new ones first;
//   2. `$deleteFromPrimitiveList/finalizers` removes one finalizer and keeps the others;
//   3. status.conditions merge by type (new ones first, merged ones where they were), and
//      `{"$patch":"delete","type":...}` removes one (the node controller's condition removal);
//   4. deleting an unbound pod that has a finalizer sets deletionTimestamp with a grace period of
//      0 (an unbound pod has no kubelet to wait for) and leaves the pod;
//   5. removing its last finalizer then removes it;
//   6. a Binding's annotations and labels join the pod's, in the write that sets its node
//      (labels since 1.35: feature PodTopologyLabelsAdmission; the scheduler's job-id label
//      rides the Binding).
//
// Example:
//   RunPatchAndDeleteContract(io, *client, "ns", [&](const std::string& name) { ...create... });
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "kube/client.h"
#include "testing/run.h"

namespace sb::testing {

// `create_pod(name)` creates an unbound pod `name` in `ns` without finalizers; every check is a
// gtest expectation.
inline void RunPatchAndDeleteContract(boost::asio::io_context& io, kube::Client& client,
                                      const std::string& ns,
                                      const std::function<void(const std::string&)>& create_pod) {
  const std::string name = "contract";
  const std::string ours = "scheduler.slinky.slurm.net/finalizer";
  const std::string theirs = "example.com/keep";
  create_pod(name);
  const kube::ResourceRef ref = kube::PodsRef(ns).WithName(name);
  const auto get = [&]() { return RunSync(io, kube::GetPod(client, ns, name)); };
  const auto patch = [&](kube::PatchType type, const std::string& body) {
    Result<std::string> r = RunSync(io, client.Patch(ref, type, body));
    EXPECT_TRUE(r) << body << ": " << (r ? "" : r.error().message);
  };
  const auto patch_status = [&](const std::string& body) {
    Result<kube::Pod> r =
        RunSync(io, kube::PatchPodStatus(client, ns, name, kube::PatchType::kStrategicMerge, body));
    EXPECT_TRUE(r) << body << ": " << (r ? "" : r.error().message);
  };
  const auto condition_types = [&]() {
    std::vector<std::string> types;
    Result<kube::Pod> p = get();
    if (p) {
      for (const kube::Condition& c : p->status.conditions) {
        if (c.type.starts_with("example.com/")) types.push_back(c.type);
      }
    }
    return types;
  };

  // 1, 2.
  patch(kube::PatchType::kJsonMerge, R"({"metadata":{"finalizers":[")" + theirs + R"("]}})");
  patch(kube::PatchType::kStrategicMerge, R"({"metadata":{"finalizers":[")" + ours + R"("]}})");
  Result<kube::Pod> p = get();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->metadata.finalizers, (std::vector<std::string>{ours, theirs}))
      << "finalizers merge as a set, the patch's first";
  patch(kube::PatchType::kStrategicMerge,
        R"({"metadata":{"$deleteFromPrimitiveList/finalizers":[")" + ours + R"("]}})");
  p = get();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->metadata.finalizers, std::vector<std::string>{theirs});

  // 3.
  patch_status(R"({"status":{"conditions":[{"type":"example.com/A","status":"True"}]}})");
  patch_status(R"({"status":{"conditions":[{"type":"example.com/B","status":"True"}]}})");
  EXPECT_EQ(condition_types(), (std::vector<std::string>{"example.com/B", "example.com/A"}))
      << "conditions merge by type, the patch's first";
  patch_status(R"({"status":{"conditions":[{"type":"example.com/A","status":"False"}]}})");
  EXPECT_EQ(condition_types(), (std::vector<std::string>{"example.com/B", "example.com/A"}))
      << "an element the patch merges into keeps its place";
  p = get();
  ASSERT_TRUE(p) << p.error().message;
  for (const kube::Condition& c : p->status.conditions) {
    if (c.type == "example.com/A") {
      EXPECT_EQ(c.status, "False");
    }
  }
  patch_status(R"({"status":{"conditions":[{"$patch":"delete","type":"example.com/A"}]}})");
  EXPECT_EQ(condition_types(), std::vector<std::string>{"example.com/B"});

  // 4, 5.
  Result<void> deleted =
      RunSync(io, kube::DeletePod(client, ns, name, {.grace_period_seconds = 30}));
  ASSERT_TRUE(deleted) << deleted.error().message;
  p = get();
  ASSERT_TRUE(p) << "a pod with a finalizer stays: " << p.error().message;
  EXPECT_FALSE(p->metadata.deletion_timestamp.empty());
  EXPECT_EQ(p->metadata.deletion_grace_period_seconds, 0) << "an unbound pod has no grace";
  patch(kube::PatchType::kJsonMerge, R"({"metadata":{"finalizers":null}})");
  p = get();
  ASSERT_FALSE(p) << "the pod stayed after its last finalizer went";
  EXPECT_EQ(p.error().code, ErrorCode::kNotFound);

  // 6.
  const std::string bound = "contract-bound";
  create_pod(bound);
  Result<kube::Pod> fresh = RunSync(io, kube::GetPod(client, ns, bound));
  ASSERT_TRUE(fresh) << fresh.error().message;
  Result<void> b =
      RunSync(io, kube::BindPod(client, ns, bound, fresh->metadata.uid, "contract-node",
                                {{"example.com/a", "1"}}, {{"example.com/l", "2"}}));
  ASSERT_TRUE(b) << b.error().message;
  Result<kube::Pod> after = RunSync(io, kube::GetPod(client, ns, bound));
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(after->spec.node_name, "contract-node");
  EXPECT_EQ(after->metadata.annotations["example.com/a"], "1");
  EXPECT_EQ(after->metadata.labels["example.com/l"], "2") << "the Binding's labels join the pod's";
  RunSync(io, kube::DeletePod(client, ns, bound, {.grace_period_seconds = 0}));
}

}  // namespace sb::testing
