// SPDX-License-Identifier: Apache-2.0
//
// The node controller's loop against an in-memory Slurm (FakeSlurmClient) and the fake apiserver,
// which holds the Nodes: LIST and WATCH, taint PATCHes applied with their resourceVersion
// precondition (409 on a stale one), status PATCHes merged, Events recorded; its hook records the
// node PATCHes and can race a write of its own with the bridge's. Time is a FakeClock: the Slurm
// node list and the requeue backoff run when the test advances it. Covers the safety rules of
// node_controller.h.
#include "controllers/node/node_controller.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "async/clock.h"
#include "bridge/names.h"
#include "net/http_client.h"
#include "testing/fake_apiserver.h"
#include "testing/fake_slurm_client.h"
#include "testing/run.h"

namespace sb::controllers {
namespace {
namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using sb::testing::FakeApiServer;
using sb::testing::FakeReply;
using sb::testing::FakeRequest;

constexpr std::string_view kScheduler = "slurm-bridge-scheduler";
constexpr std::string_view kNodesPath = "/api/v1/nodes";

// One Kubernetes Node as the hook serves it.
struct FakeNode {
  bool unschedulable = false;
  std::vector<kube::Taint> taints;
};

kube::Taint ManagedTaint() {
  return {.key = std::string(bridge::kManagedNodeTaint),
          .value = std::string(kScheduler),
          .effect = std::string(kManagedNodeEffect)};
}

slurm::NodeInfo SlurmNode(const std::string& name, std::vector<std::string> state,
                          const std::string& reason = "") {
  slurm::NodeInfo n;
  n.name = name;
  n.state = std::move(state);
  n.reason = reason;
  return n;
}

class NodeControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ep = net::ParseEndpoint(api_.url());
    ASSERT_TRUE(ep);
    http_ = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, {}));
    kube_ = kube::MakeClient(*http_, nullptr);
    // The fake apiserver stamps deletions (deletionTimestamp = now + grace) on the test's clock.
    api_.now = [this] { return clock_.WallNow(); };
    api_.Intercept([this](const FakeRequest& req) { return Hook(req); });
    config_.node_list_interval = 10s;
  }

  void TearDown() override {
    if (controller_) {
      controller_->Stop();
      EXPECT_TRUE(RunUntil([&] { return done_; })) << "Run() did not return after Stop()";
    }
  }

  // Store changes on the fake apiserver: each takes the next resourceVersion and reaches the
  // controller's watch.
  void PutNode(const std::string& name, const FakeNode& node) {
    json::array taints;
    for (const kube::Taint& t : node.taints) {
      json::object o{{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) o["value"] = t.value;
      taints.push_back(std::move(o));
    }
    json::object spec;
    if (node.unschedulable) spec["unschedulable"] = true;
    if (!taints.empty()) spec["taints"] = std::move(taints);
    ASSERT_GT(api_.PutNode(name, json::serialize(json::object{{"spec", std::move(spec)}})), 0);
  }

  // Records the node PATCHes; the fake apiserver answers them (409 on a stale resourceVersion
  // precondition). With `race_next_taint_patch`, someone else writes the Node just before the
  // fake sees the bridge's taint patch, whose precondition is then stale.
  std::optional<FakeReply> Hook(const FakeRequest& req) {
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (path.starts_with("/apis/resource.k8s.io")) return DraHook(req, path);
    if (path == kNodesPath && req.target.find("watch=") != std::string::npos) ++node_watches_;
    const std::string prefix = std::string(kNodesPath) + "/";
    if (path.starts_with(prefix) && req.method == "PATCH") {
      std::string name = path.substr(prefix.size());
      if (name.ends_with("/status")) {
        name.resize(name.size() - std::string_view("/status").size());
        status_patches_.push_back(name);
      } else {
        taint_patches_.push_back(name);
        if (race_next_taint_patch_) {
          race_next_taint_patch_ = false;
          api_.PatchNode(name, R"({"metadata":{"labels":{"someone":"else"}}})");
        }
      }
    }
    return std::nullopt;
  }

  // resource.k8s.io: 404 unless `dra_served_`; then the APIGroup, a LIST of `slices_` and a
  // watch held open (`slice_watch_`, to push events to).
  std::optional<FakeReply> DraHook(const FakeRequest& req, const std::string& path) {
    dra_paths_.push_back(path);
    if (!dra_served_) return std::nullopt;  // the fake's 404
    if (path == "/apis/resource.k8s.io") {
      return sb::testing::HttpReply(
          200, R"({"kind":"APIGroup","apiVersion":"v1","name":"resource.k8s.io","versions":[)"
               R"({"groupVersion":"resource.k8s.io/v1","version":"v1"}]})");
    }
    if (path != "/apis/resource.k8s.io/v1/resourceslices") return std::nullopt;
    if (req.target.find("watch=") == std::string::npos) {
      std::string items;
      for (const std::string& s : slices_) items += (items.empty() ? "" : ",") + s;
      return sb::testing::HttpReply(
          200, R"({"kind":"ResourceSliceList","apiVersion":"resource.k8s.io/v1","metadata":)"
               R"({"resourceVersion":"1"},"items":[)" +
                   items + "]}");
    }
    slice_watch_ = std::make_shared<sb::testing::FakeStream>();
    return FakeReply{
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
        {},
        slice_watch_};
  }
  // One watch event line as a chunk of slice_watch_.
  void PushSliceEvent(const std::string& type, const std::string& slice) {
    const std::string line = R"({"type":")" + type + R"(","object":)" + slice + "}\n";
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", line.size());
    slice_watch_->Push(size + line + "\r\n");
  }
  static std::string SliceJson(const std::string& node, const std::vector<int>& indices,
                               const std::string& rv) {
    std::string devices;
    for (int i : indices) {
      devices += (devices.empty() ? "" : ",") + std::string(R"({"name":"gpu-)") +
                 std::to_string(i) + R"(","attributes":{"index":{"int":)" + std::to_string(i) +
                 "}}}";
    }
    return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":")" +
           node + R"(-gpus","resourceVersion":")" + rv +
           R"("},"spec":{"driver":"gpu.example.com","nodeName":")" + node +
           R"(","pool":{"name":")" + node + R"(","generation":1,"resourceSliceCount":1},)" +
           R"("devices":[)" + devices + "]}}";
  }
  // The node's SlinkySlurmGRESCompatible status ("" when absent).
  std::string GresStatus(const std::string& name) const {
    const json::value node = json::parse(api_.NodeJson(name));
    const json::value* conditions = node.find_pointer("/status/conditions", ec_);
    if (conditions == nullptr || !conditions->is_array()) return "";
    for (const json::value& c : conditions->as_array()) {
      if (c.at("type") == std::string(kGresCompatibleCondition).c_str()) {
        return std::string(c.at("status").as_string());
      }
    }
    return "";
  }

  // Starts the controller; waits for the Node informer's first list (not for Ready(): some tests
  // keep Slurm away).
  void Start() {
    controller_ =
        std::make_unique<NodeController>(io_.get_executor(), *kube_, slurm_, clock_, config_);
    asio::co_spawn(io_, controller_->Run(), [this](std::exception_ptr e) {
      EXPECT_FALSE(e);
      done_ = true;
    });
    ASSERT_TRUE(RunUntil([&] { return node_watches_ >= 1; }));
  }

  // Drives the loop until `pred` holds (a guard against a hang, not a timed assertion).
  bool RunUntil(const std::function<bool()>& pred) {
    return sb::testing::RunLoopUntil(io_, pred, 10s);
  }

  // Runs the loop a little with nothing to wait for: before asserting that something did NOT
  // happen (a guard, not a synchronisation: what is asserted absent would have been sent by now).
  void Settle() {
    const auto until = std::chrono::steady_clock::now() + 200ms;
    while (std::chrono::steady_clock::now() < until) {
      if (io_.stopped()) io_.restart();
      io_.run_one_for(5ms);
    }
  }

  int EventsWith(const std::string& reason) const {
    int n = 0;
    for (const std::string& e : api_.events()) {
      n += e.find("\"reason\":\"" + reason + "\"") != std::string::npos ? 1 : 0;
    }
    return n;
  }
  int TaintPatchesOf(const std::string& name) const {
    return static_cast<int>(std::count(taint_patches_.begin(), taint_patches_.end(), name));
  }
  bool HasManagedTaint(const std::string& name) const {
    const json::value node = json::parse(api_.NodeJson(name));
    const json::value* taints = node.find_pointer("/spec/taints", ec_);
    if (taints == nullptr || !taints->is_array()) return false;
    const kube::Taint want = ManagedTaint();
    return std::ranges::any_of(taints->as_array(), [&](const json::value& t) {
      const json::object& o = t.as_object();
      return o.contains("key") && o.at("key") == want.key.c_str() && o.contains("value") &&
             o.at("value") == want.value.c_str() && o.contains("effect") &&
             o.at("effect") == want.effect.c_str();
    });
  }

  asio::io_context io_;
  FakeApiServer api_{io_};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  sb::testing::FakeSlurmClient slurm_;
  async::FakeClock clock_;
  bridge::Config config_;
  std::unique_ptr<NodeController> controller_;
  bool done_ = false;
  int node_watches_ = 0;
  mutable json::error_code ec_;

  bool dra_served_ = false;
  std::vector<std::string> slices_;
  std::shared_ptr<sb::testing::FakeStream> slice_watch_;
  std::vector<std::string> dra_paths_;

  bool race_next_taint_patch_ = false;
  std::vector<std::string> taint_patches_;
  std::vector<std::string> status_patches_;
};

const Error kSlurmDown{ErrorCode::kUnavailable, "slurmrestd: connection refused"};

// While Slurm's node list cannot be read at start-up, nothing is reconciled: a Slurm node keeps
// its managed-node taint (with no list it would look like a non-Slurm node and lose it), and no
// node is drained or patched. Once the list is read, the nodes are reconciled.
TEST_F(NodeControllerTest, NothingIsReconciledBeforeTheFirstSlurmList) {
  slurm_.AddNode(SlurmNode("n1", {"IDLE"}));
  PutNode("n1", {.unschedulable = true, .taints = {ManagedTaint()}});
  PutNode("k1", {.taints = {ManagedTaint()}});  // not a Slurm node: loses the taint, later
  slurm_.FailNext("ListNodes", kSlurmDown, 4);
  Start();
  // Four failed reads (backoff 1 s, 2 s, 4 s), with Node events in between.
  ASSERT_TRUE(RunUntil([&] {
    if (slurm_.calls("ListNodes") >= 4) return true;
    clock_.Advance(1s);
    return false;
  }));
  PutNode("n1", {.unschedulable = true, .taints = {ManagedTaint()}});  // a watch event
  Settle();
  EXPECT_FALSE(controller_->Ready());
  EXPECT_EQ(controller_->stats().slurm_lists, 0u);
  EXPECT_EQ(controller_->stats().reconciles, 0u);
  EXPECT_TRUE(taint_patches_.empty());
  EXPECT_TRUE(status_patches_.empty());
  EXPECT_EQ(slurm_.calls("GetNode"), 0);
  EXPECT_EQ(slurm_.calls("UpdateNode"), 0);
  EXPECT_TRUE(HasManagedTaint("n1"));
  EXPECT_TRUE(HasManagedTaint("k1"));

  // Slurm answers: the next read reconciles everything.
  ASSERT_TRUE(RunUntil([&] {
    if (controller_->Ready() && TaintPatchesOf("k1") >= 1 && slurm_.calls("UpdateNode") >= 1) {
      return true;
    }
    clock_.Advance(1s);
    return false;
  }));
  EXPECT_TRUE(HasManagedTaint("n1"));
  EXPECT_FALSE(HasManagedTaint("k1"));
}

// Drain and undrain decide on a fresh GET /node/{name}, not on the last list: an administrator's
// drain made since the list is never overwritten by the bridge's drain, nor undone by an undrain.
TEST_F(NodeControllerTest, DrainAndUndrainReReadTheSlurmNodeFirst) {
  slurm_.AddNode(SlurmNode("n1", {"IDLE"}));
  PutNode("n1", {.taints = {ManagedTaint()}});
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->Ready() && status_patches_.size() >= 1; }));
  EXPECT_EQ(slurm_.calls("GetNode"), 0) << "no drain, no undrain: no GET";

  // Cordon: read again, then drained with the bridge's reason.
  PutNode("n1", {.unschedulable = true, .taints = {ManagedTaint()}});
  ASSERT_TRUE(RunUntil([&] { return slurm_.calls("UpdateNode") == 1; }));
  EXPECT_EQ(slurm_.calls("GetNode"), 1);
  EXPECT_EQ(slurm_.calls("ListNodes"), 1) << "no list in between";

  // An administrator re-drains the node for a disk (after the list, which still says "ours");
  // then the node is uncordoned. The bridge must keep the administrator's drain.
  slurm_.AddNode(SlurmNode("n1", {"IDLE", "DRAIN"}, "admin: disk"));
  PutNode("n1", {.taints = {ManagedTaint()}});
  ASSERT_TRUE(RunUntil([&] { return EventsWith(std::string(kEventAdminDrainKept)) == 1; }));
  EXPECT_EQ(slurm_.calls("GetNode"), 2);
  EXPECT_EQ(slurm_.calls("UpdateNode"), 1) << "no undrain";

  // The administrator undrains (the next list says IDLE), then drains again for a fan; the node
  // is cordoned before the next list. The stale list says IDLE: a drain would overwrite the
  // administrator's reason.
  slurm_.AddNode(SlurmNode("n1", {"IDLE"}));
  clock_.Advance(config_.node_list_interval);
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().slurm_lists == 2; }));
  slurm_.AddNode(SlurmNode("n1", {"IDLE", "DRAIN"}, "admin: fan"));
  const std::size_t status_before = status_patches_.size();
  PutNode("n1", {.unschedulable = true, .taints = {ManagedTaint()}});
  ASSERT_TRUE(RunUntil([&] { return slurm_.calls("GetNode") == 3; }));
  // The administrator's drain turns the condition to SlurmNodeDrained: written after the decision.
  ASSERT_TRUE(RunUntil([&] { return status_patches_.size() > status_before; }));
  Settle();
  EXPECT_EQ(slurm_.calls("UpdateNode"), 1) << "no drain over the administrator's";
  EXPECT_EQ(controller_->stats().drains, 1u);
  EXPECT_EQ(controller_->stats().undrains, 0u);
}

// N-18: a successful list that lost most Slurm nodes at once (a token that cannot see them, a
// slurmrestd answering `nodes: []`) is not acted on: the nodes keep the managed-node taint. Only
// when kShrinkConfirmations lists in a row say so is it believed.
TEST_F(NodeControllerTest, ListLosingMostNodesAtOnceIsNotActedOnUntilConfirmed) {
  for (const char* n : {"n1", "n2", "n3"}) {
    slurm_.AddNode(SlurmNode(n, {"IDLE"}));
    PutNode(n, {.taints = {ManagedTaint()}});
  }
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->Ready() && status_patches_.size() >= 3; }));
  for (const char* n : {"n1", "n2", "n3"}) slurm_.RemoveNode(n);
  for (int i = 1; i < kShrinkConfirmations; ++i) {
    clock_.Advance(config_.node_list_interval);
    ASSERT_TRUE(RunUntil(
        [&] { return controller_->stats().slurm_lists_held == static_cast<std::uint64_t>(i); }));
    PutNode("n1", {.taints = {ManagedTaint()}});  // a Node event: reconciled on the kept list
    const std::uint64_t reconciles = controller_->stats().reconciles;
    ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles > reconciles; }));
    Settle();
    for (const char* n : {"n1", "n2", "n3"}) {
      EXPECT_TRUE(HasManagedTaint(n)) << n << " after " << i << " empty list(s)";
      EXPECT_EQ(TaintPatchesOf(n), 0) << n;
    }
  }
  // The third empty list in a row: believed, the nodes are no longer Slurm's.
  clock_.Advance(config_.node_list_interval);
  ASSERT_TRUE(RunUntil(
      [&] { return !HasManagedTaint("n1") && !HasManagedTaint("n2") && !HasManagedTaint("n3"); }));
  EXPECT_EQ(controller_->stats().slurm_lists_held,
            static_cast<std::uint64_t>(kShrinkConfirmations - 1));
}

// Test audit N3: a node that leaves Slurm loses SlurmNodeReady (the `$patch: delete` that the
// fake apiserver now applies as the real one does) and the managed-node taint.
TEST_F(NodeControllerTest, NodeThatLeavesSlurmLosesItsCondition) {
  for (const char* n : {"n1", "n2"}) {
    slurm_.AddNode(SlurmNode(n, {"IDLE"}));
    PutNode(n, {.taints = {ManagedTaint()}});
  }
  Start();
  auto has_condition = [&](const std::string& name) {
    return api_.NodeJson(name).find(std::string(kSlurmNodeReadyCondition)) != std::string::npos;
  };
  ASSERT_TRUE(RunUntil([&] { return has_condition("n1") && has_condition("n2"); }));
  slurm_.RemoveNode("n1");
  clock_.Advance(config_.node_list_interval);
  ASSERT_TRUE(RunUntil([&] { return !has_condition("n1") && !HasManagedTaint("n1"); }))
      << api_.NodeJson("n1");
  EXPECT_TRUE(has_condition("n2"));
  EXPECT_TRUE(HasManagedTaint("n2"));
}

// N-13: a Slurm node that counts more CPUs than the kubelet offers gets one Warning event on its
// Node, not one per reconcile.
TEST_F(NodeControllerTest, SlurmCapacityBeyondAllocatableIsReportedOnce) {
  slurm::NodeInfo n = SlurmNode("n1", {"IDLE"});
  n.cpus = 64;
  slurm_.AddNode(n);
  ASSERT_GT(api_.PutNode("n1", R"({"spec":{"taints":[{"key":"slinky.slurm.net/managed-node",
      "value":"slurm-bridge-scheduler","effect":"NoExecute"}]},
      "status":{"allocatable":{"cpu":"62","memory":"250Gi"}}})"),
            0);
  Start();
  ASSERT_TRUE(RunUntil([&] { return EventsWith(std::string(kEventCapacityGap)) == 1; }));
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(config_.node_list_interval);
    const std::uint64_t lists = controller_->stats().slurm_lists;
    ASSERT_TRUE(RunUntil([&] { return controller_->stats().slurm_lists > lists; }));
  }
  Settle();
  EXPECT_EQ(EventsWith(std::string(kEventCapacityGap)), 1);
}

// A failed Slurm node list keeps the previous one (a Slurm node does not turn into a non-Slurm
// node and lose its taint), and the read is retried after 1 s, then 2 s, not after the interval.
TEST_F(NodeControllerTest, FailedSlurmListKeepsThePreviousOneAndBacksOff) {
  slurm_.AddNode(SlurmNode("n1", {"IDLE"}));
  PutNode("n1", {.taints = {ManagedTaint()}});
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->Ready() && status_patches_.size() >= 1; }));
  ASSERT_EQ(slurm_.calls("ListNodes"), 1);

  slurm_.FailNext("ListNodes", kSlurmDown, 2);
  clock_.Advance(config_.node_list_interval);
  ASSERT_TRUE(RunUntil([&] { return slurm_.calls("ListNodes") == 2; }));
  EXPECT_EQ(controller_->stats().errors, 1u);

  // A Node event reconciles n1 on the list kept from before.
  const std::uint64_t reconciles = controller_->stats().reconciles;
  PutNode("n1", {.taints = {ManagedTaint()}});
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles > reconciles; }));
  Settle();
  EXPECT_EQ(TaintPatchesOf("n1"), 0);
  EXPECT_TRUE(HasManagedTaint("n1"));

  // Backoff: 1 s after the first failure, 2 s after the second.
  clock_.Advance(999ms);
  Settle();
  EXPECT_EQ(slurm_.calls("ListNodes"), 2);
  clock_.Advance(1ms);
  ASSERT_TRUE(RunUntil([&] { return slurm_.calls("ListNodes") == 3; }));
  clock_.Advance(1999ms);
  Settle();
  EXPECT_EQ(slurm_.calls("ListNodes"), 3);
  clock_.Advance(1ms);
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().slurm_lists == 2; }));
  EXPECT_EQ(controller_->stats().errors, 2u);
  EXPECT_EQ(TaintPatchesOf("n1"), 0);
}

// A 409 on the taint patch (the Node changed since the cache saw it: the apiserver's answer to the
// patch's stale resourceVersion) requeues the node, which is patched again after the per-key
// backoff (250 ms), well before the next Slurm list would queue it; the conflict is counted, not
// taken for an error.
TEST_F(NodeControllerTest, ConflictOnTheTaintPatchRequeuesTheNode) {
  slurm_.AddNode(SlurmNode("n1", {"IDLE"}));
  PutNode("n1", {});
  race_next_taint_patch_ = true;
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().conflicts == 1; }));
  EXPECT_EQ(TaintPatchesOf("n1"), 1);
  EXPECT_FALSE(HasManagedTaint("n1"));
  // Before the next Slurm list (the list interval is 10 s): at most 9 s of fake time.
  int steps = 0;
  ASSERT_TRUE(RunUntil([&] {
    if (controller_->stats().taints_added >= 1) return true;
    if (steps < 36) {
      ++steps;
      clock_.Advance(250ms);
    }
    return false;
  }));
  // The controller's own status patch moves the Node's resourceVersion too (as on the real
  // apiserver): a retry sent before that write's watch event arrived conflicts again (seen up to
  // 3 times on a loaded machine); each conflict is requeued, none is an error.
  const std::uint64_t conflicts = controller_->stats().conflicts;
  EXPECT_GE(conflicts, 1u);
  EXPECT_EQ(TaintPatchesOf("n1"), static_cast<int>(conflicts) + 1);
  EXPECT_TRUE(HasManagedTaint("n1"));
  EXPECT_EQ(controller_->stats().errors, 0u);
  EXPECT_EQ(controller_->stats().taints_added, 1u);
  EXPECT_EQ(slurm_.calls("ListNodes"), 1) << "requeued, not picked up by a later list";
}

// --- External nodes (issue #26) -------------------------------------------------------------

// A Node as a kubelet without slurmd would register it: capacity, an InternalIP; labelled for
// external-node registration when `labelled`, with the partitions annotation `partitions`.
std::string ExternalNodeJson(bool labelled, const std::string& partitions, const std::string& cpu,
                             const std::string& gpus = "") {
  json::object labels;
  if (labelled) labels[std::string(kExternalNodeLabel)] = "";
  json::object annotations;
  if (!partitions.empty()) annotations[std::string(kExternalNodePartitionsAnnotation)] = partitions;
  json::object capacity{{"cpu", cpu}, {"memory", "8Gi"}};
  if (!gpus.empty()) capacity["nvidia.com/gpu"] = gpus;
  return json::serialize(json::object{
      {"metadata", json::object{{"labels", labels}, {"annotations", annotations}}},
      {"status", json::object{{"capacity", capacity},
                              {"allocatable", capacity},
                              {"addresses", json::array{json::object{{"type", "InternalIP"},
                                                                     {"address", "10.0.0.7"}}}}}}});
}

class ExternalNodeTest : public NodeControllerTest {
 protected:
  void SetUp() override {
    NodeControllerTest::SetUp();
    slurm::PartitionInfo ext;
    ext.name = "ext";
    slurm_.AddPartition(ext);
  }
  int EventsWithText(const std::string& reason, const std::string& text) const {
    int n = 0;
    for (const std::string& e : api_.events()) {
      n += e.find("\"reason\":\"" + reason + "\"") != std::string::npos &&
                   e.find(text) != std::string::npos
               ? 1
               : 0;
    }
    return n;
  }
  // One more Slurm list, and the reconciles it queues.
  void NextList() {
    const std::uint64_t lists = controller_->stats().slurm_lists;
    clock_.Advance(config_.node_list_interval);
    ASSERT_TRUE(RunUntil([&] { return controller_->stats().slurm_lists > lists; }));
    Settle();
  }
  int SlurmCalls() const {
    int n = 0;
    for (const char* c : {"GetNode", "UpdateNode", "CreateNode", "DeleteNode", "GetPartition"}) {
      n += slurm_.calls(c);
    }
    return n;
  }
};

// A labelled Node is registered: POST /new/node/ with its capacity, InternalIP and the
// partitions Slurm knows (an unknown one is a Warning, once), marked as the bridge's, and it
// gets the managed-node taint in the same reconcile.
TEST_F(ExternalNodeTest, LabelledNodeIsRegisteredMarkedAndTainted) {
  ASSERT_GT(api_.PutNode("ext-1", ExternalNodeJson(true, "ext,nope", "4", "2")), 0);
  Start();
  ASSERT_TRUE(RunUntil([&] { return HasManagedTaint("ext-1"); }));
  ASSERT_EQ(slurm_.created().size(), 1u);
  EXPECT_EQ(slurm_.created()[0],
            "NodeName=ext-1 NodeAddr=10.0.0.7 CPUs=4 RealMemory=8192 State=External Feature=ext "
            "Gres=gpu:2 GresConf=\"count=2,name=gpu,file=/dev/nvidia[0-1]\"");
  const slurm::NodeInfo* n = slurm_.Node("ext-1");
  ASSERT_NE(n, nullptr);
  EXPECT_TRUE(n->HasState("EXTERNAL"));
  EXPECT_EQ(n->comment, ExternalNodeComment("ext-1"));
  ASSERT_TRUE(RunUntil([&] { return EventsWith(std::string(kEventExternalRegistered)) == 1; }));
  ASSERT_TRUE(RunUntil([&] {
    return EventsWithText(std::string(kEventExternalInvalid),
                          "partition nope does not exist in Slurm: left out") == 1;
  }));
  EXPECT_EQ(controller_->stats().external_registered, 1u);

  // Later lists: nothing to do, the unknown partition is not reported again.
  const int calls = slurm_.calls("CreateNode") + slurm_.calls("UpdateNode");
  for (int i = 0; i < 3; ++i) NextList();
  EXPECT_EQ(slurm_.calls("CreateNode") + slurm_.calls("UpdateNode"), calls);
  EXPECT_EQ(slurm_.calls("DeleteNode"), 0);
  EXPECT_EQ(EventsWith(std::string(kEventExternalInvalid)), 1);
  EXPECT_EQ(EventsWith(std::string(kEventExternalRegistered)), 1);
}

// A capacity change drains the node; while jobs hold it nothing is deleted; once it is empty it
// is deleted and registered again with the new capacity, in one reconcile.
TEST_F(ExternalNodeTest, CapacityChangeDrainsWaitsAndRecreates) {
  ASSERT_GT(api_.PutNode("ext-1", ExternalNodeJson(true, "ext", "4")), 0);
  Start();
  ASSERT_TRUE(
      RunUntil([&] { return slurm_.Node("ext-1") != nullptr && HasManagedTaint("ext-1"); }));
  slurm_.SetNodeState("ext-1", {"ALLOCATED", "EXTERNAL"});  // a job runs there
  NextList();

  ASSERT_GT(api_.PatchNode("ext-1", R"({"status":{"capacity":{"cpu":"8"}}})"), 0);
  ASSERT_TRUE(RunUntil([&] {
    const slurm::NodeInfo* n = slurm_.Node("ext-1");
    return n != nullptr && n->HasState("DRAIN");
  }));
  EXPECT_EQ(slurm_.Node("ext-1")->reason,
            "slurm-bridge: external node of Kubernetes node ext-1: re-creating (CPUs 4 -> 8)");
  ASSERT_TRUE(RunUntil([&] { return EventsWith(std::string(kEventExternalDraining)) == 1; }));
  for (int i = 0; i < 2; ++i) NextList();
  EXPECT_EQ(slurm_.calls("DeleteNode"), 0) << "deleted under a running job";
  EXPECT_TRUE(HasManagedTaint("ext-1")) << "still a Slurm node";
  EXPECT_EQ(slurm_.Node("ext-1")->reason.find("slurm-bridge:"), 0u)
      << "the cordon logic undid the drain";

  slurm_.SetNodeState("ext-1", {"IDLE", "EXTERNAL", "DRAIN"});  // the job ended
  NextList();
  ASSERT_TRUE(RunUntil([&] { return EventsWith(std::string(kEventExternalRecreated)) == 1; }));
  EXPECT_EQ(slurm_.calls("DeleteNode"), 1);
  ASSERT_EQ(slurm_.created().size(), 2u);
  EXPECT_EQ(slurm_.created()[1],
            "NodeName=ext-1 NodeAddr=10.0.0.7 CPUs=8 RealMemory=8192 State=External Feature=ext");
  const slurm::NodeInfo* n = slurm_.Node("ext-1");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->cpus, 8);
  EXPECT_FALSE(n->HasState("DRAIN")) << "the new node is not drained";
  EXPECT_EQ(n->comment, ExternalNodeComment("ext-1"));
  EXPECT_EQ(controller_->stats().external_recreated, 1u);
  EXPECT_TRUE(HasManagedTaint("ext-1"));
  NextList();
  EXPECT_EQ(slurm_.calls("DeleteNode"), 1);
  EXPECT_EQ(slurm_.created().size(), 2u);
}

// Losing the label drains the bridge's external node, waits for it to empty and deletes it;
// the Node then loses the managed-node taint. A non-external Slurm node that gets and loses
// the label is never drained, re-created or deleted (one Warning while labelled).
TEST_F(ExternalNodeTest, LosingTheLabelRemovesOnlyTheBridgesExternalNode) {
  slurm::NodeInfo n1 = SlurmNode("n1", {"IDLE"});
  n1.cpus = 8;
  n1.real_memory = 16000;
  slurm_.AddNode(n1);
  // An external node registered by someone else (a benchmark), with an unlabelled Node.
  slurm::NodeInfo k1 = SlurmNode("k1", {"IDLE", "EXTERNAL"});
  slurm_.AddNode(k1);
  ASSERT_GT(api_.PutNode("k1", ExternalNodeJson(false, "", "64")), 0);
  ASSERT_GT(api_.PutNode("n1", ExternalNodeJson(true, "ext", "4")), 0);  // differs from Slurm
  ASSERT_GT(api_.PutNode("ext-1", ExternalNodeJson(true, "ext", "4")), 0);
  Start();
  ASSERT_TRUE(RunUntil([&] { return HasManagedTaint("ext-1") && HasManagedTaint("n1"); }));
  ASSERT_TRUE(RunUntil([&] { return EventsWith(std::string(kEventExternalNotExternal)) == 1; }));
  slurm_.SetNodeState("ext-1", {"MIXED", "EXTERNAL"});

  ASSERT_GT(api_.PutNode("ext-1", ExternalNodeJson(false, "ext", "4")), 0);
  ASSERT_GT(api_.PutNode("n1", ExternalNodeJson(false, "ext", "4")), 0);
  ASSERT_TRUE(RunUntil([&] { return EventsWith(std::string(kEventExternalDraining)) == 1; }));
  EXPECT_TRUE(slurm_.Node("ext-1")->HasState("DRAIN"));
  NextList();
  EXPECT_EQ(slurm_.calls("DeleteNode"), 0);
  slurm_.SetNodeState("ext-1", {"IDLE", "EXTERNAL", "DRAIN"});
  NextList();
  ASSERT_TRUE(RunUntil([&] { return EventsWith(std::string(kEventExternalRemoved)) == 1; }));
  EXPECT_EQ(slurm_.Node("ext-1"), nullptr);
  NextList();
  EXPECT_FALSE(HasManagedTaint("ext-1"));

  // n1 and k1: untouched.
  for (const auto& [name, update] : slurm_.node_updates()) {
    EXPECT_NE(name, "n1") << "n1 was updated";
    EXPECT_NE(name, "k1") << "k1 was updated";
  }
  EXPECT_EQ(slurm_.calls("DeleteNode"), 1);
  EXPECT_EQ(slurm_.created().size(), 1u);
  ASSERT_NE(slurm_.Node("n1"), nullptr);
  EXPECT_EQ(slurm_.Node("n1")->state, std::vector<std::string>{"IDLE"});
  ASSERT_NE(slurm_.Node("k1"), nullptr);
  EXPECT_EQ(controller_->stats().external_removed, 1u);
}

// A deleted Node's external node (the bridge's) is drained, waited for and deleted too.
TEST_F(ExternalNodeTest, DeletedNodeLeavesSlurm) {
  ASSERT_GT(api_.PutNode("ext-1", ExternalNodeJson(true, "ext", "4")), 0);
  Start();
  ASSERT_TRUE(RunUntil([&] { return HasManagedTaint("ext-1"); }));
  slurm_.SetNodeState("ext-1", {"ALLOCATED", "EXTERNAL"});
  NextList();
  auto deleted = sb::testing::RunSync(io_, kube_->Delete(kube::NodesRef().WithName("ext-1"), {}));
  ASSERT_TRUE(deleted) << deleted.error().message;
  ASSERT_TRUE(RunUntil([&] { return slurm_.Node("ext-1")->HasState("DRAIN"); }));
  EXPECT_NE(slurm_.Node("ext-1")->reason.find("was deleted"), std::string::npos);
  NextList();
  EXPECT_EQ(slurm_.calls("DeleteNode"), 0);
  slurm_.SetNodeState("ext-1", {"IDLE", "EXTERNAL", "DRAIN"});
  NextList();
  ASSERT_TRUE(RunUntil([&] { return slurm_.Node("ext-1") == nullptr; }));
  EXPECT_EQ(EventsWith(std::string(kEventExternalRemoved)), 1);
  // Forgotten once gone: later lists make no call for it.
  const int calls = SlurmCalls();
  NextList();
  EXPECT_EQ(SlurmCalls(), calls);
}

// Upstream #52: a Kubernetes node that is neither labelled nor a Slurm node (a control plane
// node) costs no per-node Slurm call (no GET /node/{name}, no GET /partition) and no Event,
// however many lists and Node changes go by.
TEST_F(ExternalNodeTest, UnlabelledNonSlurmNodeCostsNoSlurmCall) {
  ASSERT_GT(api_.PutNode("control-plane", ExternalNodeJson(false, "ext", "4")), 0);
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->Ready(); }));
  for (int i = 0; i < 3; ++i) {
    NextList();
    ASSERT_GT(api_.PatchNode("control-plane", R"({"metadata":{"annotations":{"x":"y"}}})"), 0);
    Settle();
  }
  EXPECT_GE(controller_->stats().reconciles, 4u);
  EXPECT_EQ(SlurmCalls(), 0);
  EXPECT_TRUE(api_.events().empty());
  EXPECT_TRUE(taint_patches_.empty());
  EXPECT_TRUE(status_patches_.empty());
}

// Slurm refusing a registration (a topology it does not have) is a Warning on the Node, once,
// and retried with backoff; a labelled Node without capacity is a Warning and is not registered.
TEST_F(ExternalNodeTest, RefusedOrInvalidRegistrationIsAWarning) {
  slurm_.FailNext("CreateNode",
                  Error{ErrorCode::kInvalidArgument,
                        "create node: Requested topology configuration is not available"},
                  3);
  ASSERT_GT(api_.PutNode("ext-1", ExternalNodeJson(true, "ext", "4")), 0);
  ASSERT_GT(api_.PutNode("ext-2", R"({"metadata":{"labels":{
      "scheduler.slinky.slurm.net/external-node":""}}})"),
            0);
  Start();
  ASSERT_TRUE(RunUntil([&] {
    if (slurm_.Node("ext-1") != nullptr) return true;
    clock_.Advance(1s);
    return false;
  }));
  EXPECT_EQ(slurm_.calls("CreateNode"), 4);
  ASSERT_TRUE(RunUntil([&] {
    return EventsWithText(std::string(kEventExternalInvalid),
                          "no cpu in status.capacity; no memory in status.capacity") == 1;
  }));
  ASSERT_TRUE(RunUntil(
      [&] { return EventsWithText(std::string(kEventExternalRegistered), "ext-1") == 1; }));
  Settle();
  EXPECT_EQ(EventsWithText(std::string(kEventExternalFailed), "topology"), 1) << "said once";
  EXPECT_EQ(slurm_.Node("ext-2"), nullptr);
  EXPECT_EQ(slurm_.created().size(), 4u) << "ext-2 never";
}

slurm::NodeInfo GpuNode(const std::string& name) {
  slurm::NodeInfo n = SlurmNode(name, {"IDLE"});
  n.gres = "gpu:fake:4";
  return n;
}

// Issue #28: the ResourceSlice informer feeds SlinkySlurmGRESCompatible: n1's slice has GPUs 0-1
// of Slurm's 0-3 (False, one Warning), n2 has none (True); a watch event fixing n1's slice
// turns it True; later lists write nothing more.
TEST_F(NodeControllerTest, GresConditionFollowsTheResourceSlices) {
  dra_served_ = true;
  slices_ = {SliceJson("n1", {0, 1}, "1")};
  for (const char* n : {"n1", "n2"}) {
    slurm_.AddNode(GpuNode(n));
    PutNode(n, {.taints = {ManagedTaint()}});
  }
  Start();
  // The clock moves for the informer's sync poll (100 ms).
  ASSERT_TRUE(RunUntil([&] {
    if (GresStatus("n1") == "False" && GresStatus("n2") == "True") return true;
    clock_.Advance(100ms);
    return false;
  })) << api_.NodeJson("n1");
  EXPECT_NE(api_.NodeJson("n1").find("IncompatibleSlurmGRES"), std::string::npos);
  ASSERT_TRUE(RunUntil([&] { return EventsWith("IncompatibleSlurmGRES") == 1; }));
  // The slices' watch opens after their list; on a loaded machine later than the events.
  ASSERT_TRUE(RunUntil([&] { return slice_watch_ != nullptr; }));
  PushSliceEvent("MODIFIED", SliceJson("n1", {0, 1, 2, 3}, "2"));
  ASSERT_TRUE(RunUntil([&] { return GresStatus("n1") == "True"; })) << api_.NodeJson("n1");
  // The counter moves after the patch's reply, which the test may see first.
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().gres_condition_updates >= 3; }));
  const std::uint64_t writes = controller_->stats().gres_condition_updates;
  EXPECT_EQ(writes, 3u);  // n1 False, n2 True, n1 True
  Settle();  // the Node watch shows the writes (a write unseen for 10 s is written again)
  clock_.Advance(config_.node_list_interval);
  Settle();
  clock_.Advance(config_.node_list_interval);
  Settle();
  EXPECT_EQ(controller_->stats().gres_condition_updates, writes) << "written only when it changes";
  EXPECT_EQ(EventsWith("IncompatibleSlurmGRES"), 1);
  EXPECT_EQ(controller_->stats().errors, 0u);
}

// Without resource.k8s.io/v1 (Kubernetes before 1.34) the controller asks once, writes no
// SlinkySlurmGRESCompatible and keeps doing the rest.
TEST_F(NodeControllerTest, WithoutTheDraApiNoGresCondition) {
  slurm_.AddNode(GpuNode("n1"));
  PutNode("n1", {});
  Start();
  ASSERT_TRUE(RunUntil([&] { return HasManagedTaint("n1"); }));
  ASSERT_TRUE(RunUntil([&] {
    return api_.NodeJson("n1").find(std::string(kSlurmNodeReadyCondition)) != std::string::npos;
  }));
  clock_.Advance(config_.node_list_interval);
  Settle();
  EXPECT_EQ(GresStatus("n1"), "");
  EXPECT_EQ(dra_paths_, (std::vector<std::string>{"/apis/resource.k8s.io"}));
  EXPECT_EQ(controller_->stats().gres_condition_updates, 0u);
  EXPECT_EQ(controller_->stats().errors, 0u);
}

}  // namespace
}  // namespace sb::controllers
