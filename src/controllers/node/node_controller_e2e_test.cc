// SPDX-License-Identifier: Apache-2.0
//
// The node controller end to end, in-process (its own io_context on its own thread), against the
// test environment's real slurmctld/slurmrestd and kube-apiserver. Kubernetes Node objects stand
// in for the kubelets of n1..n4 (testenv/kube/register-nodes.sh). The test thread checks through
// its own clients, kubectl-free, and drives Slurm with scontrol (testenv/slurm/exec.sh).
//
// Every test leaves the nodes as it found them (resumed, uncordoned, without the controller's
// taints and condition, extra nodes deleted), also on failure: other e2e tests share n1..n4.
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "bridge/names.h"
#include "common/time_format.h"
#include "controllers/node/node_controller.h"
#include "kube/client.h"
#include "kube/config.h"
#include "slurm/client.h"
#include "testing/e2e_env.h"
#include "testing/paths.h"
#include "testing/run.h"
#include "testing/testenv.h"

namespace sb::controllers {
namespace {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;
using sb::testing::TestEnv;

const std::vector<std::string> kSlurmNodes = {"n1", "n2", "n3", "n4"};
const std::vector<std::string> kExtraNodes = {"k8s-only", "k8s-n1", "ext-1"};
// External Slurm nodes the tests register (through the controller); removed by Restore().
const std::vector<std::string> kExternalSlurmNodes = {"ext-1"};

// The controller with its own clients on its own loop thread.
class RunningController {
 public:
  RunningController(const TestEnv& env, const kube::Config& kube_config, bridge::Config config) {
    auto http = kube::MakeHttpClient(io_.get_executor(), kube_config);
    EXPECT_TRUE(http) << http.error().message;
    http_ = std::move(*http);
    kube_ = kube::MakeClient(*http_, kube_config.token);
    auto slurm = slurm::MakeClient(io_.get_executor(), {.url = env.Get("SLURM_REST_URL")},
                                   slurm::MakeFileTokenSource(env.Get("SLURM_JWT_FILE")));
    EXPECT_TRUE(slurm) << slurm.error().message;
    slurm_ = std::move(*slurm);
    controller_ = std::make_unique<NodeController>(io_.get_executor(), *kube_, *slurm_, clock_,
                                                   std::move(config));
    asio::co_spawn(io_, controller_->Run(), [this](const std::exception_ptr&) { done_ = true; });
    thread_ = std::thread([this] { io_.run(); });
  }
  ~RunningController() { Stop(); }
  RunningController(const RunningController&) = delete;
  RunningController& operator=(const RunningController&) = delete;

  void Stop() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] { controller_->Stop(); });
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done_ && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    EXPECT_TRUE(done_) << "Run() did not return after Stop()";
    io_.stop();
    thread_.join();
  }

  // Reads on the controller's own thread.
  template <typename F>
  auto OnLoop(F f) {
    std::promise<decltype(f())> p;
    auto fut = p.get_future();
    asio::post(io_, [&] { p.set_value(f()); });
    return fut.get();
  }
  NodeControllerStats Stats() {
    return OnLoop([this] { return controller_->stats(); });
  }
  bool Ready() {
    return OnLoop([this] { return controller_->Ready(); });
  }

 private:
  asio::io_context io_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  slurm::ClientPtr slurm_;
  async::SystemClock clock_;
  std::unique_ptr<NodeController> controller_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

class NodeControllerE2e : public ::testing::Test, protected sb::testing::E2eEnv {
 protected:
  void SetUp() override {
    Connect();
    if (HasFatalFailure()) return;
    Shell(fmt::format("{}/testenv/kube/register-nodes.sh {}/env 2>&1", sb::testing::SourceDir(),
                      env_.dir()));
    // Other e2e tests (the controllers') leave the bridge's taints: start from clean nodes.
    Restore();
    config_.node_list_interval = 500ms;
    // Events of earlier runs stay in the namespace for an hour; look only at this test's.
    since_ = FormatTime(std::chrono::system_clock::now() - 1s);
  }

  void TearDown() override {
    controller_.reset();
    if (!kube_ || !slurm_) return;
    Restore();
  }

  // Resumes the Slurm nodes, uncordons the Kubernetes nodes and takes the controller's taints and
  // condition off them; deletes the extra nodes.
  void Restore() {
    for (const std::string& n : kSlurmNodes) {
      auto info = RunSync(io_, slurm_->GetNode(n));
      if (info && (info->HasState("DRAIN") || info->HasState("DOWN") || info->HasState("FAIL"))) {
        Slurm("scontrol update nodename=" + n + " state=resume");
      }
      auto node = RunSync(io_, kube::GetNode(*kube_, n));
      if (!node) continue;
      std::vector<kube::Taint> taints;
      for (const kube::Taint& t : node->taints) {
        if (t.key != bridge::kManagedNodeTaint && t.key != kSlurmUnavailableTaint) {
          taints.push_back(t);
        }
      }
      std::string taint_patch = TaintsPatch(taints, node->metadata.resource_version);
      // unschedulable:null uncordons; the resourceVersion makes a racing write fail loudly.
      taint_patch.insert(taint_patch.size() - 2, R"(,"unschedulable":null)");
      // The external-node label and annotation of ExternalNodeLifecycle go too.
      taint_patch.insert(taint_patch.find(R"("resourceVersion")"),
                         fmt::format(R"("labels":{{"{}":null}},"annotations":{{"{}":null}},)",
                                     kExternalNodeLabel, kExternalNodePartitionsAnnotation));
      auto patched = RunSync(io_, kube_->Patch(kube::NodesRef().WithName(n),
                                               kube::PatchType::kJsonMerge, taint_patch));
      EXPECT_TRUE(patched) << n << ": " << patched.error().message;
      for (std::string_view type : {kSlurmNodeReadyCondition, kGresCompatibleCondition}) {
        auto status = RunSync(
            io_, kube_->Patch(kube::NodesRef().WithName(n).WithSubresource("status"),
                              kube::PatchType::kStrategicMerge, RemoveConditionPatch(type)));
        EXPECT_TRUE(status) << n << ": " << status.error().message;
      }
    }
    for (const std::string& n : kSlurmNodes) {
      (void)RunSync(io_, kube_->Delete(SlicesRef().WithName(SliceName(n)), {}));
    }
    for (const std::string& n : kExtraNodes) {
      (void)RunSync(io_, kube_->Delete(kube::NodesRef().WithName(n), {}));
    }
    for (const std::string& n : kExternalSlurmNodes) {
      if (!SlurmNode(n)) continue;
      Slurm("scancel -w " + n);
      (void)WaitFor(
          [&] {
            auto info = SlurmNode(n);
            return !info || !(info->HasState("ALLOCATED") || info->HasState("MIXED"));
          },
          10s);
      Slurm("scontrol delete nodename=" + n);
    }
  }

  static kube::ResourceRef SlicesRef() {
    return {.group = "resource.k8s.io", .version = "v1", .resource = "resourceslices"};
  }
  static std::string SliceName(const std::string& node) { return "sb-e2e-" + node + "-gpus"; }
  // The ResourceSlice of the example driver on `node` (made or replaced): devices gpu-<i> with
  // attribute index i, in pool generation `generation`.
  void PutSlice(const std::string& node, const std::vector<int>& indices, int generation = 1) {
    std::string devices;
    for (int i : indices) {
      devices += fmt::format(R"({}{{"name":"gpu-{}","attributes":{{"index":{{"int":{}}}}}}})",
                             devices.empty() ? "" : ",", i, i);
    }
    const std::string body = fmt::format(
        R"({{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"{}"}},)"
        R"("spec":{{"driver":"gpu.example.com","nodeName":"{}","pool":{{"name":"{}",)"
        R"("generation":{},"resourceSliceCount":1}},"devices":[{}]}}}})",
        SliceName(node), node, node, generation, devices);
    (void)RunSync(io_, kube_->Delete(SlicesRef().WithName(SliceName(node)), {}));
    auto r = RunSync(io_, kube_->Create(SlicesRef(), body));
    ASSERT_TRUE(r) << node << ": " << r.error().message;
  }
  static std::optional<kube::Condition> GresCondition(const kube::Node& n) {
    const kube::Condition* c = kube::FindCondition(n.conditions, kGresCompatibleCondition);
    if (c == nullptr) return std::nullopt;
    return *c;
  }
  // Waits for `node`'s SlinkySlurmGRESCompatible to have `status` and a message containing
  // `text`; the last one seen in `seen`.
  bool WaitForGres(const std::string& node, std::string_view status, std::string_view text,
                   std::optional<kube::Condition>& seen) {
    return WaitFor(
        [&] {
          auto n = Node(node);
          seen = n ? GresCondition(*n) : std::nullopt;
          return seen && seen->status == status && seen->message.find(text) != std::string::npos;
        },
        15s);
  }

  // The controller runs with the chart's controllers ServiceAccount (issue #44), not the admin's.
  void StartController() {
    auto cfg = kube::LoadConfig({.kubeconfig_path = env_.Get("KUBECONFIG_CONTROLLERS")});
    ASSERT_TRUE(cfg) << "KUBECONFIG_CONTROLLERS: " << cfg.error().message;
    controller_ = std::make_unique<RunningController>(env_, *cfg, config_);
    ASSERT_TRUE(WaitFor([&] { return controller_->Ready(); }, 15s)) << "controller not ready";
  }

  std::optional<kube::Node> Node(const std::string& name) {
    auto node = RunSync(io_, kube::GetNode(*kube_, name));
    if (!node) return std::nullopt;
    return *node;
  }
  std::optional<slurm::NodeInfo> SlurmNode(const std::string& name) {
    auto info = RunSync(io_, slurm_->GetNode(name));
    if (!info) return std::nullopt;
    return *info;
  }
  void Patch(const std::string& node, const std::string& merge_patch) {
    auto r = RunSync(io_, kube_->Patch(kube::NodesRef().WithName(node), kube::PatchType::kJsonMerge,
                                       merge_patch));
    ASSERT_TRUE(r) << node << ": " << r.error().message;
  }
  void Cordon(const std::string& node, bool on) {
    Patch(node, on ? R"({"spec":{"unschedulable":true}})" : R"({"spec":{"unschedulable":null}})");
  }

  static bool HasTaint(const kube::Node& n, std::string_view key, std::string_view value,
                       std::string_view effect) {
    for (const kube::Taint& t : n.taints) {
      if (t.key == key && t.value == value && t.effect == effect) return true;
    }
    return false;
  }
  static bool HasTaintKey(const kube::Node& n, std::string_view key) {
    for (const kube::Taint& t : n.taints) {
      if (t.key == key) return true;
    }
    return false;
  }
  static std::optional<kube::Condition> ReadyCondition(const kube::Node& n) {
    for (const kube::Condition& c : n.conditions) {
      if (c.type == kSlurmNodeReadyCondition) return c;
    }
    return std::nullopt;
  }
  bool Managed(const std::string& node) {
    auto n = Node(node);
    return n && HasTaint(*n, bridge::kManagedNodeTaint, config_.scheduler_name, "NoExecute");
  }

  std::vector<kube::Event> Events(const std::string& node) {
    auto events =
        RunSync(io_, kube::ListAs<kube::Event>(*kube_, kube::EventsRef("default"),
                                               {.field_selector = "involvedObject.name=" + node}));
    EXPECT_TRUE(events) << events.error().message;
    std::vector<kube::Event> out;
    if (!events) return out;
    for (kube::Event& e : events->items) {
      if (e.source_component == NodeController::kComponent && e.last_timestamp >= since_) {
        out.push_back(std::move(e));
      }
    }
    return out;
  }
  bool HasEvent(const std::string& node, std::string_view reason, std::string_view text) {
    for (const kube::Event& e : Events(node)) {
      if (e.reason == reason && e.message.find(text) != std::string::npos) return true;
    }
    return false;
  }

  std::string since_;
  bridge::Config config_;
  std::unique_ptr<RunningController> controller_;
};

TEST_F(NodeControllerE2e, TaintsFollowSlurmMembership) {
  // A Kubernetes-only node with a stale bridge taint, and a renamed node mapped to n1.
  Shell(fmt::format("{}/testenv/kube/register-nodes.sh {}/env k8s-only k8s-n1=n1 2>&1",
                    sb::testing::SourceDir(), env_.dir()));
  Patch("k8s-only",
        fmt::format(R"({{"spec":{{"taints":[{{"key":"{}","value":"{}",)"
                    R"("effect":"NoExecute"}},{{"key":"{}","value":"down",)"
                    R"("effect":"NoSchedule"}},{{"key":"example.com/keep",)"
                    R"("effect":"NoSchedule"}}]}}}})",
                    bridge::kManagedNodeTaint, config_.scheduler_name, kSlurmUnavailableTaint));
  StartController();

  for (const std::string& n : kSlurmNodes) {
    EXPECT_TRUE(WaitFor([&] { return Managed(n); }, 10s)) << n << " has no managed taint";
    EXPECT_TRUE(WaitFor(
        [&] {
          auto node = Node(n);
          auto c = node ? ReadyCondition(*node) : std::nullopt;
          return c && c->status == "True" && c->reason == kReasonSlurmNodeReady;
        },
        10s))
        << n << " has no SlurmNodeReady=True";
  }
  EXPECT_TRUE(WaitFor([&] { return Managed("k8s-n1"); }, 10s)) << "k8s-n1 (Slurm n1) untainted";
  EXPECT_TRUE(WaitFor(
      [&] {
        auto node = Node("k8s-only");
        return node && !HasTaintKey(*node, bridge::kManagedNodeTaint) &&
               !HasTaintKey(*node, kSlurmUnavailableTaint);
      },
      10s))
      << "the stale taints stay on k8s-only";
  auto k8s_only = Node("k8s-only");
  ASSERT_TRUE(k8s_only);
  EXPECT_TRUE(HasTaintKey(*k8s_only, "example.com/keep")) << "someone else's taint was lost";
  EXPECT_FALSE(ReadyCondition(*k8s_only).has_value());

  // Level-triggered: a removed taint comes back.
  auto n1 = Node("n1");
  ASSERT_TRUE(n1);
  Patch("n1", R"({"spec":{"taints":null}})");
  EXPECT_TRUE(WaitFor([&] { return Managed("n1"); }, 10s)) << "the managed taint did not return";

  // The counter moves after the patch's reply, which the test may see first.
  EXPECT_TRUE(WaitFor([&] { return controller_->Stats().taints_added >= 6; }, 5s))
      << "taints_added: n1..n4, k8s-n1, n1 again";
  const NodeControllerStats stats = controller_->Stats();
  EXPECT_GE(stats.taints_removed, 2u);  // k8s-only's two
  EXPECT_GE(stats.slurm_lists, 1u);
  EXPECT_EQ(stats.errors, 0u);
}

TEST_F(NodeControllerE2e, CordonDrainsAndUncordonUndrains) {
  StartController();
  ASSERT_TRUE(WaitFor([&] { return Managed("n2"); }, 10s));
  const std::string reason = "slurm-bridge: Corresponding Kubernetes node (n2) is unschedulable";

  Cordon("n2", true);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto info = SlurmNode("n2");
        return info && info->HasState("DRAIN") && info->reason == reason;
      },
      10s))
      << "n2 not drained with the bridge's reason";
  EXPECT_TRUE(WaitFor([&] { return HasEvent("n2", kEventDrained, "Drained Slurm node n2"); }, 10s));
  // Two more lists: the bridge's own drain must not be reported as unavailable.
  const std::uint64_t lists = controller_->Stats().slurm_lists;
  ASSERT_TRUE(WaitFor([&] { return controller_->Stats().slurm_lists >= lists + 2; }, 10s));
  auto n2 = Node("n2");
  ASSERT_TRUE(n2);
  EXPECT_FALSE(HasTaintKey(*n2, kSlurmUnavailableTaint));
  auto cond = ReadyCondition(*n2);
  ASSERT_TRUE(cond);
  EXPECT_EQ(cond->status, "True");

  Cordon("n2", false);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto info = SlurmNode("n2");
        return info && !info->HasState("DRAIN");
      },
      10s))
      << "n2 not undrained";
  EXPECT_TRUE(
      WaitFor([&] { return HasEvent("n2", kEventUndrained, "Undrained Slurm node n2"); }, 10s));
  const NodeControllerStats stats = controller_->Stats();
  EXPECT_EQ(stats.drains, 1u);
  EXPECT_EQ(stats.undrains, 1u);
  EXPECT_EQ(stats.errors, 0u);
}

TEST_F(NodeControllerE2e, AdminDrainIsKept) {
  StartController();
  ASSERT_TRUE(WaitFor([&] { return Managed("n3"); }, 10s));
  Slurm("scontrol update nodename=n3 state=drain reason=maintenance");
  EXPECT_TRUE(WaitFor(
      [&] {
        auto node = Node("n3");
        auto c = node ? ReadyCondition(*node) : std::nullopt;
        return node && HasTaint(*node, kSlurmUnavailableTaint, "drain", "NoSchedule") && c &&
               c->status == "False" && c->reason == kReasonSlurmNodeDrained &&
               c->message == "maintenance";
      },
      10s))
      << "n3's admin drain not reported";

  Cordon("n3", true);
  // Two lists later every node was reconciled with the cordon in the cache.
  const std::uint64_t lists = controller_->Stats().slurm_lists;
  ASSERT_TRUE(WaitFor([&] { return controller_->Stats().slurm_lists >= lists + 2; }, 10s));
  auto info = SlurmNode("n3");
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->HasState("DRAIN"));
  EXPECT_EQ(info->reason, "maintenance");
  EXPECT_FALSE(HasEvent("n3", kEventAdminDrainKept, "")) << "reported before the uncordon";

  Cordon("n3", false);
  EXPECT_TRUE(WaitFor([&] { return HasEvent("n3", kEventAdminDrainKept, "maintenance"); }, 10s));
  info = SlurmNode("n3");
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->HasState("DRAIN"));
  EXPECT_EQ(info->reason, "maintenance");
  const NodeControllerStats stats = controller_->Stats();
  EXPECT_EQ(stats.drains, 0u);
  EXPECT_EQ(stats.undrains, 0u);
  EXPECT_EQ(stats.errors, 0u);
}

TEST_F(NodeControllerE2e, SlurmDownTaintsAndConditions) {
  StartController();
  ASSERT_TRUE(WaitFor([&] { return Managed("n4"); }, 10s));
  // The condition as it was (Ready), and a clock past its whole second, so that a new
  // lastTransitionTime can be told from the old one.
  std::string ready_since;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto node = Node("n4");
        auto c = node ? ReadyCondition(*node) : std::nullopt;
        if (c && c->status == "True") ready_since = c->last_transition_time;
        return !ready_since.empty();
      },
      10s));
  ASSERT_TRUE(
      WaitFor([&] { return FormatTime(std::chrono::system_clock::now()) > ready_since; }, 3s));
  Slurm("scontrol update nodename=n4 state=down reason=broken");
  std::string last_transition;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto node = Node("n4");
        auto c = node ? ReadyCondition(*node) : std::nullopt;
        if (c) last_transition = c->last_transition_time;
        return node && HasTaint(*node, kSlurmUnavailableTaint, "down", "NoSchedule") && c &&
               c->status == "False" && c->reason == kReasonSlurmNodeDown &&
               c->message.find("broken") != std::string::npos;
      },
      10s))
      << "n4 down not reported";
  // The status flipped, so the transition time moved.
  EXPECT_GT(last_transition, ready_since);
  EXPECT_TRUE(WaitFor([&] { return HasEvent("n4", kReasonSlurmNodeDown, "broken"); }, 10s));

  Slurm("scontrol update nodename=n4 state=resume");
  EXPECT_TRUE(WaitFor(
      [&] {
        auto node = Node("n4");
        auto c = node ? ReadyCondition(*node) : std::nullopt;
        return node && !HasTaintKey(*node, kSlurmUnavailableTaint) && c && c->status == "True" &&
               c->reason == kReasonSlurmNodeReady;
      },
      10s))
      << "n4 resume not reported";
  EXPECT_TRUE(
      WaitFor([&] { return HasEvent("n4", kEventSlurmNodeReady, "available again"); }, 10s));
  EXPECT_TRUE(Managed("n4"));
  EXPECT_EQ(controller_->Stats().errors, 0u);
}

// Issue #28 (upstream 1.3's node condition): with the default device profiles, each Slurm node's
// ResourceSlices are compared with its GRES (gpu:fake:4 on every testenv node): n1 publishes the
// example driver's GPUs 0-3 (True), n2 only 0-1 (False, with a Warning), n3 none (True: no DRA
// driver there); n2 fixed by its driver turns True. No kubelet is needed: the slices are written
// here as a DRA driver would.
TEST_F(NodeControllerE2e, GresConditionFollowsResourceSlices) {
  ASSERT_NO_FATAL_FAILURE(PutSlice("n1", {0, 1, 2, 3}));
  ASSERT_NO_FATAL_FAILURE(PutSlice("n2", {0, 1}));
  StartController();
  std::optional<kube::Condition> c;
  EXPECT_TRUE(WaitForGres("n1", "True", "0-3", c))
      << "n1: " << (c ? c->status + " " + c->message : "no condition");
  if (c) {
    EXPECT_EQ(c->reason, kReasonGresCompatible);
  }
  EXPECT_TRUE(WaitForGres("n2", "False", "0-1", c))
      << "n2: " << (c ? c->status + " " + c->message : "no condition");
  if (c) {
    EXPECT_EQ(c->reason, kReasonGresIncompatible);
  }
  EXPECT_TRUE(WaitFor([&] { return HasEvent("n2", kReasonGresIncompatible, "0-1"); }, 10s))
      << "no Warning on n2";
  auto n2 = Node("n2");
  ASSERT_TRUE(n2);
  EXPECT_TRUE(GresIncompatible(*n2));
  EXPECT_TRUE(WaitForGres("n3", "True", "no DRA driver", c))
      << "n3: " << (c ? c->status + " " + c->message : "no condition");

  // The driver publishes all four GPUs in a new generation: the watch brings n2 back to True.
  ASSERT_NO_FATAL_FAILURE(PutSlice("n2", {0, 1, 2, 3}, 2));
  EXPECT_TRUE(WaitForGres("n2", "True", "0-3", c))
      << "n2: " << (c ? c->status + " " + c->message : "no condition");
  n2 = Node("n2");
  ASSERT_TRUE(n2);
  EXPECT_FALSE(GresIncompatible(*n2));
  // n1..n4, then n2 again (counted once the controller has the PATCH's answer, which may come
  // after the apiserver already shows the condition).
  EXPECT_TRUE(WaitFor([&] { return controller_->Stats().gres_condition_updates >= 5u; }, 10s))
      << controller_->Stats().gres_condition_updates << " condition updates";
  EXPECT_EQ(controller_->Stats().errors, 0u);
}

// Issue #26: a Kubernetes Node without slurmd, labelled scheduler.slinky.slurm.net/external-node,
// becomes a Slurm external node in partition `ext` (testenv's NodeSet extset Feature=ext), runs
// an external job, is drained and re-created when its capacity changes (after its job ended),
// and is drained, waited for and deleted when it loses the label. A non-external Slurm node (n1)
// that gets and loses the label is never touched.
TEST_F(NodeControllerE2e, ExternalNodeLifecycle) {
  const std::string ext_partition = env_.Get("SLURM_EXT_PARTITION");
  ASSERT_EQ(ext_partition, "ext");
  // The Node a kubelet without slurmd would register (no kubelet here: the test writes it).
  auto created = RunSync(
      io_, kube_->Create(kube::NodesRef(),
                         fmt::format(R"({{"apiVersion":"v1","kind":"Node","metadata":{{
            "name":"ext-1","labels":{{"{}":""}},"annotations":{{"{}":"ext, nope"}}}}}})",
                                     kExternalNodeLabel, kExternalNodePartitionsAnnotation)));
  ASSERT_TRUE(created) << created.error().message;
  auto status =
      RunSync(io_, kube_->Patch(kube::NodesRef().WithName("ext-1").WithSubresource("status"),
                                kube::PatchType::kStrategicMerge,
                                R"({"status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110",
                                         "nvidia.com/gpu":"2"},
                            "allocatable":{"cpu":"4","memory":"8Gi","pods":"110",
                                           "nvidia.com/gpu":"2"},
                            "addresses":[{"type":"InternalIP","address":"127.0.0.1"},
                                         {"type":"Hostname","address":"ext-1"}]}})"));
  ASSERT_TRUE(status) << status.error().message;
  StartController();

  // Registered: EXTERNAL, the Node's capacity, partition ext (the unknown one left out).
  std::optional<slurm::NodeInfo> info;
  // Marked as the bridge's right after the registration.
  ASSERT_TRUE(WaitFor(
      [&] {
        info = SlurmNode("ext-1");
        return info.has_value() && !info->comment.empty();
      },
      15s))
      << "ext-1 not registered (and marked)";
  EXPECT_TRUE(info->HasState("EXTERNAL"));
  EXPECT_EQ(info->cpus, 4);
  EXPECT_EQ(info->real_memory, 8192);
  EXPECT_EQ(info->features, std::vector<std::string>{"ext"});
  EXPECT_EQ(info->partitions, std::vector<std::string>{"ext"});
  EXPECT_EQ(info->address, "127.0.0.1");
  EXPECT_EQ(info->gres, "gpu:2") << "Gres with its GresConf";
  EXPECT_EQ(info->comment, ExternalNodeComment("ext-1"));
  const std::string shown = Slurm("scontrol show node ext-1");
  EXPECT_NE(shown.find("EXTERNAL"), std::string::npos) << shown;
  EXPECT_NE(shown.find("CPUTot=4"), std::string::npos) << shown;
  EXPECT_NE(shown.find("RealMemory=8192"), std::string::npos) << shown;
  EXPECT_NE(shown.find("AvailableFeatures=ext"), std::string::npos) << shown;
  EXPECT_TRUE(WaitFor([&] { return Managed("ext-1"); }, 10s)) << "no managed-node taint";
  EXPECT_TRUE(WaitFor([&] { return HasEvent("ext-1", kEventExternalRegistered, "ext-1"); }, 10s));
  EXPECT_TRUE(WaitFor(
      [&] { return HasEvent("ext-1", kEventExternalInvalid, "partition nope does not exist"); },
      10s));

  // An external job in partition ext runs there.
  auto submit = [&](const std::string& name, const std::string& tres = "") -> std::int64_t {
    slurm::JobDescription j;
    j.tres_per_node = tres;
    j.name = name;
    j.partition = ext_partition;
    j.flags = {"EXTERNAL_JOB"};
    j.nodes = "1";
    j.required_nodes = {"ext-1"};
    j.cpus_per_task = 1;
    j.memory_per_node = slurm::NoValNumber::Of(64);
    j.current_working_directory = "/tmp";
    auto r = RunSync(io_, slurm_->SubmitJob(j));
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->job_id : 0;
  };
  auto running_on_ext = [&](std::int64_t id) {
    auto j = RunSync(io_, slurm_->GetJob(id));
    return j && j->HasState("RUNNING") && j->nodes == "ext-1";
  };
  const std::int64_t job1 = submit("ext-e2e-1", "gres/gpu=1");
  ASSERT_GT(job1, 0);
  ASSERT_TRUE(WaitFor([&] { return running_on_ext(job1); }, 15s)) << "job 1 not running on ext-1";

  // More CPUs: drained (the job keeps running, the node stays), re-created once the job ended.
  auto cpus =
      RunSync(io_, kube_->Patch(kube::NodesRef().WithName("ext-1").WithSubresource("status"),
                                kube::PatchType::kStrategicMerge,
                                R"({"status":{"capacity":{"cpu":"6"},
                                            "allocatable":{"cpu":"6"}}})"));
  ASSERT_TRUE(cpus) << cpus.error().message;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto n = SlurmNode("ext-1");
        return n && n->HasState("DRAIN") &&
               n->reason.find("re-creating (CPUs 4 -> 6)") != std::string::npos;
      },
      10s))
      << "ext-1 not drained for re-creation";
  EXPECT_TRUE(
      WaitFor([&] { return HasEvent("ext-1", kEventExternalDraining, "CPUs 4 -> 6"); }, 10s));
  const std::uint64_t lists = controller_->Stats().slurm_lists;
  ASSERT_TRUE(WaitFor([&] { return controller_->Stats().slurm_lists >= lists + 3; }, 10s));
  EXPECT_TRUE(running_on_ext(job1)) << "the job was disturbed";
  info = SlurmNode("ext-1");
  ASSERT_TRUE(info) << "deleted under a running job";
  EXPECT_EQ(info->cpus, 4);
  EXPECT_EQ(controller_->Stats().external_recreated, 0u);
  ASSERT_TRUE(RunSync(io_, slurm_->CancelJob(job1, {})));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto n = SlurmNode("ext-1");
        return n && n->cpus == 6 && !n->HasState("DRAIN") && n->HasState("EXTERNAL");
      },
      20s))
      << "ext-1 not re-created with 6 CPUs";
  EXPECT_TRUE(
      WaitFor([&] { return HasEvent("ext-1", kEventExternalRecreated, "CPUs 4 -> 6"); }, 10s));
  EXPECT_EQ(SlurmNode("ext-1")->partitions, std::vector<std::string>{"ext"});
  EXPECT_EQ(SlurmNode("ext-1")->gres, "gpu:2");
  EXPECT_TRUE(Managed("ext-1"));

  // The label goes: drained, waits for the job, deleted; the taint goes.
  const std::int64_t job2 = submit("ext-e2e-2");
  ASSERT_GT(job2, 0);
  ASSERT_TRUE(WaitFor([&] { return running_on_ext(job2); }, 15s)) << "job 2 not running on ext-1";
  Patch("ext-1", fmt::format(R"({{"metadata":{{"labels":{{"{}":null}}}}}})", kExternalNodeLabel));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto n = SlurmNode("ext-1");
        return n && n->HasState("DRAIN") && n->reason.find("removing") != std::string::npos;
      },
      10s))
      << "ext-1 not drained for removal";
  EXPECT_TRUE(
      WaitFor([&] { return HasEvent("ext-1", kEventExternalDraining, "lost the label"); }, 10s));
  const std::uint64_t lists2 = controller_->Stats().slurm_lists;
  ASSERT_TRUE(WaitFor([&] { return controller_->Stats().slurm_lists >= lists2 + 3; }, 10s));
  EXPECT_TRUE(SlurmNode("ext-1").has_value()) << "deleted under a running job";
  EXPECT_TRUE(running_on_ext(job2));
  ASSERT_TRUE(RunSync(io_, slurm_->CancelJob(job2, {})));
  EXPECT_TRUE(WaitFor([&] { return !SlurmNode("ext-1").has_value(); }, 20s))
      << "ext-1 not deleted from Slurm";
  EXPECT_TRUE(
      WaitFor([&] { return HasEvent("ext-1", kEventExternalRemoved, "lost the label"); }, 10s));
  EXPECT_TRUE(WaitFor([&] { return !Managed("ext-1"); }, 10s)) << "the managed taint stays";

  // n1 (a slurmd node) labelled, then unlabelled: a Warning, never drained or deleted.
  Patch("n1", fmt::format(R"({{"metadata":{{"labels":{{"{}":""}},"annotations":{{"{}":"ext"}}}}}})",
                          kExternalNodeLabel, kExternalNodePartitionsAnnotation));
  EXPECT_TRUE(WaitFor([&] { return HasEvent("n1", kEventExternalNotExternal, "n1"); }, 10s));
  Patch("n1", fmt::format(R"({{"metadata":{{"labels":{{"{}":null}}}}}})", kExternalNodeLabel));
  const std::uint64_t lists3 = controller_->Stats().slurm_lists;
  ASSERT_TRUE(WaitFor([&] { return controller_->Stats().slurm_lists >= lists3 + 3; }, 10s));
  auto n1 = SlurmNode("n1");
  ASSERT_TRUE(n1) << "n1 was deleted";
  EXPECT_FALSE(n1->HasState("DRAIN")) << n1->reason;
  EXPECT_FALSE(n1->HasState("EXTERNAL"));

  const NodeControllerStats stats = controller_->Stats();
  EXPECT_EQ(stats.external_registered, 2u);
  EXPECT_EQ(stats.external_recreated, 1u);
  EXPECT_EQ(stats.external_removed, 1u);
  EXPECT_EQ(stats.external_drains, 2u);
}

}  // namespace
}  // namespace sb::controllers
