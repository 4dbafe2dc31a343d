// SPDX-License-Identifier: Apache-2.0
// The fake apiserver merges strategic-merge patches, deletes and serves Events as the real one
// does for what the bridge sends (test audit N3): the unit tests of the scheduler and the
// controllers rely on it. The shared scenario of testing/apiserver_contract.h runs here and
// against the real 1.36 apiserver (src/kube/kube_e2e_test.cc).
#include "testing/fake_apiserver.h"

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "async/clock.h"
#include "kube/client.h"
#include "net/http_client.h"
#include "testing/apiserver_contract.h"
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
    api_.now = [this] { return clock_.WallNow(); };
  }
  json::value Patch(kube::ResourceRef ref, kube::PatchType type, const std::string& body) {
    Result<std::string> r = RunSync(io_, kube_->Patch(std::move(ref), type, body));
    EXPECT_TRUE(r) << r.error().message;
    return r ? json::parse(*r) : json::value();
  }
  json::value Delete(kube::ResourceRef ref, kube::DeleteOptions options = {}) {
    Result<std::string> r = RunSync(io_, kube_->Delete(std::move(ref), std::move(options)));
    EXPECT_TRUE(r) << r.error().message;
    return r ? json::parse(*r) : json::value();
  }
  json::value Pod(const std::string& name) {
    const std::string j = api_.PodJson("ns", name);
    return j.empty() ? json::value() : json::parse(j);
  }
  // The FakeClock starts at 2026-01-01T00:00:00Z.
  async::FakeClock clock_;
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
            json::parse(R"(["scheduler.slinky.slurm.net/finalizer","other.example.com/keep"])"))
      << "the new one first, as the real apiserver (apiserver_contract.h)";
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
  EXPECT_EQ(conds[1].at("status"), "False") << "merged where it was, as the apiserver does";
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

// deletionTimestamp is the time of the DELETE plus the grace period, on the fake's clock (it was
// a constant, the FakeClock's epoch, so every grace period was over at once).
TEST_F(FakeApiServerTest, DeletionTimestampIsNowPlusTheGracePeriod) {
  clock_.Advance(std::chrono::seconds(100));  // 2026-01-01T00:01:40Z
  api_.AddPod("ns", "bound", {}, "n1");
  json::value got = Delete(kube::PodsRef("ns").WithName("bound"));
  EXPECT_EQ(got.at_pointer("/metadata/deletionTimestamp"), "2026-01-01T00:02:10Z");
  EXPECT_EQ(got.at_pointer("/metadata/deletionGracePeriodSeconds"), 30);
  EXPECT_FALSE(Pod("bound").is_null()) << "a bound pod waits for the kubelet";

  // spec.terminationGracePeriodSeconds, then DeleteOptions.gracePeriodSeconds, set the grace.
  api_.AddPod("ns", "short", {}, "n1");
  api_.PatchPod("ns", "short", R"({"spec":{"terminationGracePeriodSeconds":5}})");
  got = Delete(kube::PodsRef("ns").WithName("short"));
  EXPECT_EQ(got.at_pointer("/metadata/deletionTimestamp"), "2026-01-01T00:01:45Z");
  api_.AddPod("ns", "asked", {}, "n1");
  got = Delete(kube::PodsRef("ns").WithName("asked"), {.grace_period_seconds = 7});
  EXPECT_EQ(got.at_pointer("/metadata/deletionTimestamp"), "2026-01-01T00:01:47Z");
  EXPECT_EQ(got.at_pointer("/metadata/deletionGracePeriodSeconds"), 7);

  // An unbound pod has no grace: with a finalizer it is marked at "now" with grace 0.
  api_.AddPod("ns", "unbound");
  api_.PatchPod("ns", "unbound", R"({"metadata":{"finalizers":["example.com/f"]}})");
  got = Delete(kube::PodsRef("ns").WithName("unbound"));
  EXPECT_EQ(got.at_pointer("/metadata/deletionTimestamp"), "2026-01-01T00:01:40Z");
  EXPECT_EQ(got.at_pointer("/metadata/deletionGracePeriodSeconds"), 0);

  // Without a clock of its own the fake uses the system clock.
  FakeApiServer plain(io_);
  const auto before = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  const auto now = plain.now();
  EXPECT_GE(now, before);
  EXPECT_LT(now, before + std::chrono::seconds(60));
}

// A PATCH that removes the last finalizer of an object being deleted removes the object, as the
// apiserver does when its grace period is 0 (it never did).
TEST_F(FakeApiServerTest, RemovingTheLastFinalizerOfAnUnboundPodBeingDeletedRemovesIt) {
  api_.AddPod("ns", "p");
  api_.PatchPod("ns", "p", R"({"metadata":{"finalizers":["a.example.com/f","b.example.com/f"]}})");
  const kube::ResourceRef pod = kube::PodsRef("ns").WithName("p");
  Delete(pod);
  ASSERT_FALSE(Pod("p").is_null()) << "held by its finalizers";
  // One finalizer left: it stays.
  Patch(pod, kube::PatchType::kStrategicMerge,
        R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["a.example.com/f"]}})");
  ASSERT_FALSE(Pod("p").is_null());
  EXPECT_FALSE(Pod("p").at_pointer("/metadata/deletionTimestamp").as_string().empty())
      << "a patch keeps the deletionTimestamp";
  const std::int64_t rv = api_.rv();
  json::value got =
      Patch(pod, kube::PatchType::kStrategicMerge,
            R"({"metadata":{"$deleteFromPrimitiveList/finalizers":["b.example.com/f"]}})");
  EXPECT_EQ(got.at_pointer("/metadata/name"), "p");
  EXPECT_TRUE(Pod("p").is_null()) << "gone with its last finalizer";
  EXPECT_EQ(api_.rv(), rv + 1);
  // A watch from before sees it DELETED.
  std::string lines;
  RunSync(io_, kube_->Watch(kube::PodsRef("ns"), {.resource_version = std::to_string(rv)},
                            [&](std::string_view line) {
                              lines += line;
                              return false;
                            }));
  EXPECT_NE(lines.find(R"("type":"DELETED")"), std::string::npos) << lines;
}

// A bound pod with a grace period waits for the kubelet: its finalizers going does not remove it;
// the kubelet's DELETE with grace 0 does. With finalizers left, that DELETE sets grace 0 and
// the pod goes with its last finalizer (by PUT here).
TEST_F(FakeApiServerTest, BoundPodBeingDeletedGoesAtTheKubeletsGraceZeroDelete) {
  clock_.Advance(std::chrono::seconds(10));
  api_.AddPod("ns", "p", {}, "n1");
  api_.PatchPod("ns", "p", R"({"metadata":{"finalizers":["example.com/f"]}})");
  const kube::ResourceRef pod = kube::PodsRef("ns").WithName("p");
  Delete(pod);
  Patch(pod, kube::PatchType::kJsonMerge, R"({"metadata":{"finalizers":null}})");
  ASSERT_FALSE(Pod("p").is_null()) << "bound, grace 30: left to the kubelet";
  // A DELETE that does not shorten the grace period changes nothing.
  std::int64_t rv = api_.rv();
  Delete(pod, {.grace_period_seconds = 60});
  Delete(pod);
  EXPECT_EQ(api_.rv(), rv);
  EXPECT_EQ(Pod("p").at_pointer("/metadata/deletionTimestamp"), "2026-01-01T00:00:40Z");
  json::value got = Delete(pod, {.grace_period_seconds = 0});
  EXPECT_EQ(got.at_pointer("/metadata/deletionGracePeriodSeconds"), 0);
  EXPECT_TRUE(Pod("p").is_null()) << "the kubelet's DELETE with grace 0 removes it";

  // Again with a finalizer still there at the grace-0 DELETE.
  api_.AddPod("ns", "q", {}, "n1");
  api_.PatchPod("ns", "q", R"({"metadata":{"finalizers":["example.com/f"]}})");
  const kube::ResourceRef q = kube::PodsRef("ns").WithName("q");
  Delete(q, {.grace_period_seconds = 20});
  got = Delete(q, {.grace_period_seconds = 0});
  ASSERT_FALSE(Pod("q").is_null()) << "held by its finalizer";
  EXPECT_EQ(got.at_pointer("/metadata/deletionGracePeriodSeconds"), 0);
  EXPECT_EQ(got.at_pointer("/metadata/deletionTimestamp"), "2026-01-01T00:00:10Z")
      << "the first DELETE's time plus the new grace";
  json::value body = Pod("q");
  body.at("metadata").as_object().erase("finalizers");
  body.at("metadata").as_object().erase("deletionTimestamp");  // kept by the server anyway
  Result<std::string> put = RunSync(io_, kube_->Update(q, json::serialize(body)));
  ASSERT_TRUE(put) << put.error().message;
  EXPECT_TRUE(Pod("q").is_null()) << "grace 0 and no finalizers: gone";
}

// A node (no graceful deletion) with a finalizer is marked (grace 0) and goes with its last
// finalizer.
TEST_F(FakeApiServerTest, NodeBeingDeletedGoesWithItsLastFinalizer) {
  api_.PutNode("n1", R"({"metadata":{"finalizers":["example.com/f"]}})");
  const kube::ResourceRef node = kube::NodesRef().WithName("n1");
  json::value got = Delete(node);
  EXPECT_EQ(got.at_pointer("/metadata/deletionTimestamp"), "2026-01-01T00:00:00Z");
  EXPECT_EQ(got.at_pointer("/metadata/deletionGracePeriodSeconds"), 0);
  ASSERT_FALSE(api_.NodeJson("n1").empty());
  Patch(node, kube::PatchType::kJsonMerge, R"({"metadata":{"finalizers":[]}})");
  EXPECT_TRUE(api_.NodeJson("n1").empty());
}

// Events are stored by name and can be read and PATCHed in either group, so a de-duplicated
// repeat patches its count instead of creating another Event (the paths answered 404).
TEST_F(FakeApiServerTest, EventsAreAddressableAndPatchable) {
  const std::string core = R"({"apiVersion":"v1","kind":"Event",)"
                           R"("metadata":{"name":"p.1","namespace":"ns"},"count":1,)"
                           R"("reason":"Scheduled","message":"bound"})";
  Result<std::string> created = RunSync(io_, kube_->Create(kube::EventsRef("ns"), core));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_FALSE(json::parse(*created).at_pointer("/metadata/resourceVersion").as_string().empty());
  const kube::ResourceRef event = kube::EventsRef("ns").WithName("p.1");
  json::value got =
      Patch(event, kube::PatchType::kStrategicMerge, R"({"count":2,"message":"bound again"})");
  EXPECT_EQ(got.at("count"), 2);
  EXPECT_EQ(got.at("reason"), "Scheduled");
  json::value now = json::parse(api_.EventJson("ns", "p.1"));
  EXPECT_EQ(now.at("count"), 2);
  EXPECT_EQ(now.at("message"), "bound again");
  ASSERT_EQ(api_.events().size(), 1u);
  EXPECT_EQ(api_.events()[0], core) << "events() keeps the POSTed bodies";
  Result<std::string> read = RunSync(io_, kube_->Get(event));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(json::parse(*read).at("count"), 2);
  // A second POST of the name: 409, as the apiserver.
  Result<std::string> again = RunSync(io_, kube_->Create(kube::EventsRef("ns"), core));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  // Unknown: 404 (the recorder creates it again).
  Result<std::string> missing =
      RunSync(io_, kube_->Patch(kube::EventsRef("ns").WithName("nope"),
                                kube::PatchType::kStrategicMerge, R"({"count":2})"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  // events.k8s.io/v1, with generateName.
  const kube::ResourceRef v1{"events.k8s.io", "v1", "events", "ns", "", ""};
  created = RunSync(io_, kube_->Create(v1, R"({"apiVersion":"events.k8s.io/v1","kind":"Event",)"
                                           R"("metadata":{"generateName":"p."},"note":"x",)"
                                           R"("series":{"count":1}})"));
  ASSERT_TRUE(created) << created.error().message;
  const std::string name(json::parse(*created).at_pointer("/metadata/name").as_string());
  EXPECT_TRUE(name.starts_with("p.") && name.size() > 2) << name;
  got = Patch(v1.WithName(name), kube::PatchType::kJsonMerge, R"({"series":{"count":3}})");
  EXPECT_EQ(got.at_pointer("/series/count"), 3);
  EXPECT_EQ(json::parse(api_.EventJson("ns", name)).at_pointer("/series/count"), 3);
  EXPECT_EQ(api_.events().size(), 3u) << "every POST is logged, the refused one too";
}

// The scenario the real apiserver passes too (kube_e2e_test.cc).
TEST_F(FakeApiServerTest, PassesTheApiserverContract) {
  RunPatchAndDeleteContract(io_, *kube_, "ns",
                            [&](const std::string& name) { api_.AddPod("ns", name); });
}

}  // namespace
}  // namespace sb::testing
