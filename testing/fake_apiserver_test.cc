// SPDX-License-Identifier: Apache-2.0
// The fake apiserver merges strategic-merge patches as the real one does for what the bridge
// sends (test audit N3): the unit tests of the scheduler and the controllers rely on it. The
// same patches against the real 1.36 apiserver: src/kube/kube_e2e_test.cc.
#include "testing/fake_apiserver.h"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "kube/client.h"
#include "net/http_client.h"
#include "testing/run.h"

namespace sb::testing {
namespace {
namespace json = boost::json;

class FakeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ep = net::ParseEndpoint(api_.url());
    ASSERT_TRUE(ep);
    http_ = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, {}));
    kube_ = kube::MakeClient(*http_, nullptr);
  }
  json::value Patch(kube::ResourceRef ref, kube::PatchType type, const std::string& body) {
    Result<std::string> r = RunSync(io_, kube_->Patch(std::move(ref), type, body));
    EXPECT_TRUE(r) << r.error().message;
    return r ? json::parse(*r) : json::value();
  }
  boost::asio::io_context io_;
  FakeApiServer api_{io_};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
};

TEST_F(FakeApiServerTest, FinalizersMergeAsASetAndDeleteFromPrimitiveListRemoves) {
  api_.AddPod("ns", "p");
  api_.PatchPod("ns", "p", R"({"metadata":{"finalizers":["other.example.com/keep"]}})");
  const kube::ResourceRef pod = kube::PodsRef("ns").WithName("p");
  json::value got =
      Patch(pod, kube::PatchType::kStrategicMerge,
            R"({"metadata":{"finalizers":["scheduler.slinky.slurm.net/finalizer"]}})");
  EXPECT_EQ(got.at_pointer("/metadata/finalizers"),
            json::parse(R"(["other.example.com/keep","scheduler.slinky.slurm.net/finalizer"])"));
  // Again: a set, no duplicate.
  got = Patch(pod, kube::PatchType::kStrategicMerge,
              R"({"metadata":{"finalizers":["scheduler.slinky.slurm.net/finalizer"]}})");
  EXPECT_EQ(got.at_pointer("/metadata/finalizers").as_array().size(), 2u);
  got = Patch(
      pod, kube::PatchType::kStrategicMerge,
      R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["scheduler.slinky.slurm.net/finalizer"]}})");
  EXPECT_EQ(got.at_pointer("/metadata/finalizers"), json::parse(R"(["other.example.com/keep"])"));
  // A JSON merge patch replaces the list, as the real apiserver does.
  got = Patch(pod, kube::PatchType::kJsonMerge, R"({"metadata":{"finalizers":["x"]}})");
  EXPECT_EQ(got.at_pointer("/metadata/finalizers"), json::parse(R"(["x"])"));
}

TEST_F(FakeApiServerTest, KeyedListsMergeByKeyAndPatchDeleteRemovesTheMatch) {
  api_.PutNode("n1", R"({"status":{"conditions":[{"type":"Ready","status":"True"},
      {"type":"SlurmNodeReady","status":"True","reason":"SlurmNodeReady"}]}})");
  const kube::ResourceRef status = kube::NodesRef().WithName("n1").WithSubresource("status");
  json::value got =
      Patch(status, kube::PatchType::kStrategicMerge,
            R"({"status":{"conditions":[{"type":"SlurmNodeReady","status":"False"}]}})");
  const json::array& conds = got.at_pointer("/status/conditions").as_array();
  ASSERT_EQ(conds.size(), 2u);
  EXPECT_EQ(conds[1].at("status"), "False");
  EXPECT_EQ(conds[1].at("reason"), "SlurmNodeReady") << "merged, not replaced";
  got = Patch(status, kube::PatchType::kStrategicMerge,
              R"({"status":{"conditions":[{"$patch":"delete","type":"SlurmNodeReady"}]}})");
  EXPECT_EQ(got.at_pointer("/status/conditions"),
            json::parse(R"([{"type":"Ready","status":"True"}])"))
      << "the condition is removed, not added as data";
  // Lists without a merge key (taints) are replaced.
  api_.PutNode("n2", R"({"spec":{"taints":[{"key":"a","effect":"NoSchedule"}]}})");
  got = Patch(kube::NodesRef().WithName("n2"), kube::PatchType::kStrategicMerge,
              R"({"spec":{"taints":[{"key":"b","effect":"NoExecute"}]}})");
  EXPECT_EQ(got.at_pointer("/spec/taints"), json::parse(R"([{"key":"b","effect":"NoExecute"}])"));
}

}  // namespace
}  // namespace sb::testing
