// SPDX-License-Identifier: Apache-2.0
//
// node_logic: every decision of the node controller, table-driven, no I/O.
#include "controllers/node/node_logic.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bridge/names.h"
#include "kube/codec.h"

namespace sb::controllers {
namespace {

constexpr std::string_view kSched = "slurm-bridge-scheduler";
constexpr std::string_view kNow = "2025-01-02T03:04:05Z";
constexpr std::string_view kBefore = "2024-12-31T00:00:00Z";

kube::Taint Managed(std::string value = std::string(kSched)) {
  return {std::string(bridge::kManagedNodeTaint), std::move(value), "NoExecute"};
}
kube::Taint Unavailable(std::string value) {
  return {std::string(kSlurmUnavailableTaint), std::move(value), "NoSchedule"};
}
const kube::Taint kOther{"example.com/gpu-broken", "", "NoSchedule"};

class NodeBuilder {
 public:
  explicit NodeBuilder(std::string name) {
    node_.metadata.name = std::move(name);
    node_.metadata.resource_version = "42";
  }
  NodeBuilder& SlurmName(std::string n) {
    node_.metadata.labels[std::string(bridge::kSlurmNodeNameLabel)] = std::move(n);
    return *this;
  }
  NodeBuilder& Cordoned() {
    node_.unschedulable = true;
    return *this;
  }
  NodeBuilder& Taints(std::vector<kube::Taint> t) {
    node_.taints = std::move(t);
    return *this;
  }
  NodeBuilder& Condition(std::string status, std::string reason, std::string message,
                         std::string ltt = std::string(kBefore)) {
    node_.conditions.push_back({"Ready", "True", "KubeletReady", "", std::string(kBefore)});
    node_.conditions.push_back({std::string(kSlurmNodeReadyCondition), std::move(status),
                                std::move(reason), std::move(message), std::move(ltt)});
    return *this;
  }
  NodeBuilder& ReadyCondition() {
    return Condition("True", std::string(kReasonSlurmNodeReady),
                     "Slurm node " + SlurmNameOf() + " is available");
  }
  operator kube::Node() const { return node_; }  // NOLINT: builder

 private:
  std::string SlurmNameOf() const {
    auto it = node_.metadata.labels.find(std::string(bridge::kSlurmNodeNameLabel));
    return it == node_.metadata.labels.end() ? node_.metadata.name : it->second;
  }
  kube::Node node_;
};

slurm::NodeInfo Slurm(std::string name, std::vector<std::string> state, std::string reason = "") {
  slurm::NodeInfo n;
  n.name = std::move(name);
  n.state = std::move(state);
  n.reason = std::move(reason);
  return n;
}

kube::Condition Cond(std::string status, std::string_view reason, std::string message,
                     std::string_view ltt = kNow) {
  return {std::string(kSlurmNodeReadyCondition), std::move(status), std::string(reason),
          std::move(message), std::string(ltt)};
}

struct Want {
  std::optional<std::vector<kube::Taint>> taints;
  DrainAction drain = DrainAction::kNone;
  std::vector<std::string> update_state;  // sent to Slurm; empty: nothing
  std::string update_reason;
  std::optional<kube::Condition> condition;
  bool remove_condition = false;
  std::optional<PlannedEvent> drain_event;
  std::optional<PlannedEvent> health_event;
  std::string slurm_name;  // "" : the node's name
};

struct Case {
  std::string name;
  kube::Node node;
  std::optional<slurm::NodeInfo> slurm;
  Want want;
};

void Check(const Case& c) {
  SCOPED_TRACE(c.name);
  NodePlan got = PlanNode(c.node, c.slurm ? &*c.slurm : nullptr, kSched, kNow);
  EXPECT_EQ(got.slurm_name, c.want.slurm_name.empty() ? c.node.metadata.name : c.want.slurm_name);
  EXPECT_EQ(got.is_slurm_node, c.slurm.has_value());
  EXPECT_EQ(got.taints, c.want.taints);
  EXPECT_EQ(got.drain, c.want.drain);
  if (c.want.update_state.empty()) {
    EXPECT_FALSE(got.slurm_update.has_value());
  } else {
    ASSERT_TRUE(got.slurm_update.has_value());
    EXPECT_EQ(got.slurm_update->state, c.want.update_state);
    EXPECT_EQ(got.slurm_update->reason, c.want.update_reason);
  }
  EXPECT_EQ(got.condition, c.want.condition);
  EXPECT_EQ(got.remove_condition, c.want.remove_condition);
  EXPECT_EQ(got.drain_event, c.want.drain_event);
  EXPECT_EQ(got.health_event, c.want.health_event);
}

const std::string kBridgeReason =
    "slurm-bridge: Corresponding Kubernetes node (n1) is unschedulable";
const std::string kAvailable = "Slurm node n1 is available";

TEST(PlanNodeTest, Taints) {
  const std::vector<Case> cases = {
      {"a Slurm node gets the managed taint and the Ready condition",
       NodeBuilder("n1"),
       Slurm("n1", {"IDLE"}),
       {.taints = std::vector<kube::Taint>{Managed()},
        .condition = Cond("True", kReasonSlurmNodeReady, kAvailable)}},
      {"a Slurm node with everything in place: nothing to do",
       NodeBuilder("n1").Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"ALLOCATED"}),
       {}},
      {"other taints are kept, in their order, ours appended",
       NodeBuilder("n1").Taints({kOther}).ReadyCondition(),
       Slurm("n1", {"IDLE"}),
       {.taints = std::vector<kube::Taint>{kOther, Managed()}}},
      {"the slurm-nodename label names the Slurm node",
       NodeBuilder("k8s-node-a").SlurmName("n1"),
       Slurm("n1", {"MIXED"}),
       {.taints = std::vector<kube::Taint>{Managed()},
        .condition = Cond("True", kReasonSlurmNodeReady, kAvailable),
        .slurm_name = "n1"}},
      {"a non-Slurm node loses a stale managed taint, other taints stay",
       NodeBuilder("k8s-only").Taints({Managed(), kOther}),
       std::nullopt,
       {.taints = std::vector<kube::Taint>{kOther}}},
      {"a non-Slurm node loses a stale unavailable taint and our condition",
       NodeBuilder("k8s-only")
           .Taints({Unavailable("down")})
           .Condition("False", std::string(kReasonSlurmNodeDown), "broken"),
       std::nullopt,
       {.taints = std::vector<kube::Taint>{}, .remove_condition = true}},
      {"a non-Slurm node without our taints: nothing to do",
       NodeBuilder("k8s-only").Taints({kOther}),
       std::nullopt,
       {}},
      {"a managed taint naming another scheduler is replaced",
       NodeBuilder("n1").Taints({Managed("other-scheduler")}).ReadyCondition(),
       Slurm("n1", {"IDLE"}),
       {.taints = std::vector<kube::Taint>{Managed()}}},
      {"a managed taint with the wrong effect is replaced",
       NodeBuilder("n1")
           .Taints({{std::string(bridge::kManagedNodeTaint), std::string(kSched), "NoSchedule"}})
           .ReadyCondition(),
       Slurm("n1", {"IDLE"}),
       {.taints = std::vector<kube::Taint>{Managed()}}},
      {"a duplicate managed taint is dropped",
       NodeBuilder("n1").Taints({Managed(), kOther, Managed()}).ReadyCondition(),
       Slurm("n1", {"IDLE"}),
       {.taints = std::vector<kube::Taint>{Managed(), kOther}}},
  };
  for (const Case& c : cases) Check(c);
}

TEST(PlanNodeTest, CordonAndDrain) {
  const PlannedEvent drained{false, std::string(kEventDrained),
                             "Drained Slurm node n1: Kubernetes node n1 is unschedulable"};
  const PlannedEvent undrained{false, std::string(kEventUndrained),
                               "Undrained Slurm node n1: Kubernetes node n1 is schedulable"};
  const std::vector<Case> cases = {
      {"cordon drains with the bridge's reason",
       NodeBuilder("n1").Cordoned().Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"IDLE"}),
       {.drain = DrainAction::kDrain,
        .update_state = {"DRAIN"},
        .update_reason = kBridgeReason,
        .drain_event = drained}},
      {"cordon of a mapped node drains the Slurm name, the reason names the Kubernetes node",
       NodeBuilder("k8s-a").SlurmName("n1").Cordoned().Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"ALLOCATED"}),
       {.drain = DrainAction::kDrain,
        .update_state = {"DRAIN"},
        .update_reason = "slurm-bridge: Corresponding Kubernetes node (k8s-a) is unschedulable",
        .drain_event = PlannedEvent{false, std::string(kEventDrained),
                                    "Drained Slurm node n1: Kubernetes node k8s-a is "
                                    "unschedulable"},
        .slurm_name = "n1"}},
      {"cordon of a node the bridge drained already: nothing",
       NodeBuilder("n1").Cordoned().Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"IDLE", "DRAIN"}, kBridgeReason),
       {}},
      {"cordon of a node an admin drained: no second drain (the admin's reason stays)",
       NodeBuilder("n1")
           .Cordoned()
           .Taints({Managed(), Unavailable("drain")})
           .Condition("False", std::string(kReasonSlurmNodeDrained), "maintenance"),
       Slurm("n1", {"IDLE", "DRAIN"}, "maintenance"),
       {}},
      {"uncordon undrains the bridge's drain",
       NodeBuilder("n1").Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"IDLE", "DRAIN"}, kBridgeReason),
       {.drain = DrainAction::kUndrain, .update_state = {"UNDRAIN"}, .drain_event = undrained}},
      {"uncordon undrains a drain without reason; judged on the undrained state",
       NodeBuilder("n1").Taints({Managed(), Unavailable("drain")}),
       Slurm("n1", {"IDLE", "DRAIN"}),
       {.taints = std::vector<kube::Taint>{Managed()},
        .drain = DrainAction::kUndrain,
        .update_state = {"UNDRAIN"},
        .condition = Cond("True", kReasonSlurmNodeReady, kAvailable),
        .drain_event = undrained}},
      {"uncordon keeps an admin's drain",
       NodeBuilder("n1")
           .Taints({Managed(), Unavailable("drain")})
           .Condition("False", std::string(kReasonSlurmNodeDrained), "maintenance"),
       Slurm("n1", {"IDLE", "DRAIN"}, "maintenance"),
       {.drain = DrainAction::kKeepAdminDrain,
        .drain_event =
            PlannedEvent{
                false, std::string(kEventAdminDrainKept),
                "Slurm node n1 stays drained although Kubernetes node n1 is schedulable: its drain "
                "was not made by slurm-bridge (reason: maintenance)"}}},
      {"schedulable and not drained: nothing",
       NodeBuilder("n1").Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"IDLE"}),
       {}},
      {"a cordoned non-Slurm node is not drained",
       NodeBuilder("k8s-only").Cordoned(),
       std::nullopt,
       {}},
  };
  for (const Case& c : cases) Check(c);
}

TEST(PlanNodeTest, SlurmHealth) {
  const std::vector<Case> cases = {
      {"DOWN: unavailable taint and condition False with Slurm's reason",
       NodeBuilder("n1").Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"DOWN"}, "broken"),
       {.taints = std::vector<kube::Taint>{Managed(), Unavailable("down")},
        .condition = Cond("False", kReasonSlurmNodeDown, "broken"),
        .health_event = PlannedEvent{true, std::string(kReasonSlurmNodeDown),
                                     "Slurm node n1 is down: broken"}}},
      {"DOWN on a new node: taints and condition at once",
       NodeBuilder("n1"),
       Slurm("n1", {"DOWN", "NOT_RESPONDING"}),
       {.taints = std::vector<kube::Taint>{Managed(), Unavailable("down")},
        .condition = Cond("False", kReasonSlurmNodeDown, "Slurm node n1 is down"),
        .health_event =
            PlannedEvent{true, std::string(kReasonSlurmNodeDown), "Slurm node n1 is down"}}},
      {"DRAINED by an admin",
       NodeBuilder("n1").Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"IDLE", "DRAIN"}, "maintenance"),
       {.taints = std::vector<kube::Taint>{Managed(), Unavailable("drain")},
        .drain = DrainAction::kKeepAdminDrain,
        .condition = Cond("False", kReasonSlurmNodeDrained, "maintenance"),
        .drain_event =
            PlannedEvent{
                false, std::string(kEventAdminDrainKept),
                "Slurm node n1 stays drained although Kubernetes node n1 is schedulable: its drain "
                "was not made by slurm-bridge (reason: maintenance)"},
        .health_event = PlannedEvent{true, std::string(kReasonSlurmNodeDrained),
                                     "Slurm node n1 is drained: maintenance"}}},
      {"DRAINING (jobs still running) counts as drained",
       NodeBuilder("n1").Cordoned().Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"MIXED", "DRAIN"}, "hw check"),
       {.taints = std::vector<kube::Taint>{Managed(), Unavailable("drain")},
        .condition = Cond("False", kReasonSlurmNodeDrained, "hw check"),
        .health_event = PlannedEvent{true, std::string(kReasonSlurmNodeDrained),
                                     "Slurm node n1 is drained: hw check"}}},
      {"FAIL: failing",
       NodeBuilder("n1").Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"ALLOCATED", "FAIL"}, "ecc errors"),
       {.taints = std::vector<kube::Taint>{Managed(), Unavailable("fail")},
        .condition = Cond("False", kReasonSlurmNodeFailing, "ecc errors"),
        .health_event = PlannedEvent{true, std::string(kReasonSlurmNodeFailing),
                                     "Slurm node n1 is failing: ecc errors"}}},
      {"DOWN wins over DRAIN and FAIL",
       NodeBuilder("n1")
           .Cordoned()
           .Taints({Managed(), Unavailable("drain")})
           .Condition("False", std::string(kReasonSlurmNodeDrained), "x"),
       Slurm("n1", {"DOWN", "DRAIN", "FAIL"}, "x"),
       {.taints = std::vector<kube::Taint>{Managed(), Unavailable("down")},
        .condition = Cond("False", kReasonSlurmNodeDown, "x", kBefore),
        .health_event =
            PlannedEvent{true, std::string(kReasonSlurmNodeDown), "Slurm node n1 is down: x"}}},
      {"the bridge's own cordon drain is not reported as unavailable",
       NodeBuilder("n1").Cordoned().Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"IDLE", "DRAIN"}, kBridgeReason),
       {}},
      {"the bridge's own drain replaces a stale unavailable taint by nothing",
       NodeBuilder("n1")
           .Cordoned()
           .Taints({Managed(), Unavailable("drain")})
           .Condition("False", std::string(kReasonSlurmNodeDrained), "maintenance"),
       Slurm("n1", {"IDLE", "DRAIN"}, kBridgeReason),
       {.taints = std::vector<kube::Taint>{Managed()},
        .condition = Cond("True", kReasonSlurmNodeReady, kAvailable),
        .health_event = PlannedEvent{false, std::string(kEventSlurmNodeReady),
                                     "Slurm node n1 is available again"}}},
      {"resume clears the taint and turns the condition True",
       NodeBuilder("n1")
           .Taints({kOther, Managed(), Unavailable("down")})
           .Condition("False", std::string(kReasonSlurmNodeDown), "broken"),
       Slurm("n1", {"IDLE"}),
       {.taints = std::vector<kube::Taint>{kOther, Managed()},
        .condition = Cond("True", kReasonSlurmNodeReady, kAvailable),
        .health_event = PlannedEvent{false, std::string(kEventSlurmNodeReady),
                                     "Slurm node n1 is available again"}}},
      {"DOWN -> DRAIN changes the taint value, keeps lastTransitionTime",
       NodeBuilder("n1")
           .Taints({Managed(), Unavailable("down")})
           .Condition("False", std::string(kReasonSlurmNodeDown), "broken"),
       Slurm("n1", {"IDLE", "DRAIN"}, "broken"),
       {.taints = std::vector<kube::Taint>{Managed(), Unavailable("drain")},
        .drain = DrainAction::kKeepAdminDrain,
        .condition = Cond("False", kReasonSlurmNodeDrained, "broken", kBefore),
        .drain_event =
            PlannedEvent{
                false, std::string(kEventAdminDrainKept),
                "Slurm node n1 stays drained although Kubernetes node n1 is schedulable: its drain "
                "was not made by slurm-bridge (reason: broken)"},
        .health_event = PlannedEvent{true, std::string(kReasonSlurmNodeDrained),
                                     "Slurm node n1 is drained: broken"}}},
      {"a new Slurm reason only rewrites the message, lastTransitionTime kept",
       NodeBuilder("n1")
           .Taints({Managed(), Unavailable("down")})
           .Condition("False", std::string(kReasonSlurmNodeDown), "broken"),
       Slurm("n1", {"DOWN"}, "broken psu"),
       {.condition = Cond("False", kReasonSlurmNodeDown, "broken psu", kBefore),
        .health_event = PlannedEvent{true, std::string(kReasonSlurmNodeDown),
                                     "Slurm node n1 is down: broken psu"}}},
      {"an Unknown condition turning True gets a new lastTransitionTime",
       NodeBuilder("n1").Taints({Managed()}).Condition("Unknown", "Whatever", ""),
       Slurm("n1", {"IDLE"}),
       {.condition = Cond("True", kReasonSlurmNodeReady, kAvailable),
        .health_event = PlannedEvent{false, std::string(kEventSlurmNodeReady),
                                     "Slurm node n1 is available again"}}},
      {"flags that are not health (NOT_RESPONDING alone, POWERED_DOWN) do not count",
       NodeBuilder("n1").Taints({Managed()}).ReadyCondition(),
       Slurm("n1", {"IDLE", "NOT_RESPONDING", "POWERED_DOWN"}),
       {}},
  };
  for (const Case& c : cases) Check(c);
}

TEST(NodeLogicTest, ReasonsAndHealth) {
  EXPECT_EQ(CordonDrainReason("n7"),
            "slurm-bridge: Corresponding Kubernetes node (n7) is unschedulable");
  EXPECT_TRUE(IsBridgeOrEmptyReason(""));
  EXPECT_TRUE(IsBridgeOrEmptyReason("slurm-bridge: Corresponding Kubernetes node (n7) is x"));
  EXPECT_TRUE(IsBridgeOrEmptyReason("note: slurm-bridge: anything"));
  EXPECT_FALSE(IsBridgeOrEmptyReason("maintenance"));
  EXPECT_FALSE(IsBridgeOrEmptyReason("slurm-bridge maintenance"));

  EXPECT_EQ(SlurmNodeHealth(Slurm("n1", {"IDLE"})).health, SlurmHealth::kReady);
  EXPECT_EQ(
      SlurmNodeHealth(Slurm("n1", {"DOWN"}, "x")),
      (HealthStatus{SlurmHealth::kDown, "down", std::string(kReasonSlurmNodeDown), "x", "down"}));
  EXPECT_EQ(SlurmNodeHealth(Slurm("n1", {"IDLE", "DRAIN"}, "m")).taint_value, "drain");
  EXPECT_EQ(SlurmNodeHealth(Slurm("n1", {"IDLE", "DRAIN"}, kBridgeReason)).health,
            SlurmHealth::kReady);
  EXPECT_EQ(SlurmNodeHealth(Slurm("n1", {"IDLE", "FAIL"}, "f")).taint_value, "fail");
}

TEST(NodeLogicTest, Patches) {
  EXPECT_EQ(TaintsPatch({Managed(), kOther}, "17"),
            R"({"metadata":{"resourceVersion":"17"},"spec":{"taints":[)"
            R"({"key":"slinky.slurm.net/managed-node","value":"slurm-bridge-scheduler",)"
            R"("effect":"NoExecute"},{"key":"example.com/gpu-broken","effect":"NoSchedule"}]}})");
  EXPECT_EQ(TaintsPatch({}, "18"), R"({"metadata":{"resourceVersion":"18"},"spec":{"taints":[]}})");
  // Another controller's NoExecute taint keeps its timeAdded (tolerationSeconds count from it).
  kube::Taint unreachable{.key = "node.kubernetes.io/unreachable",
                          .effect = "NoExecute",
                          .time_added = "2026-01-01T00:00:00Z"};
  EXPECT_EQ(TaintsPatch({unreachable}, "19"),
            R"({"metadata":{"resourceVersion":"19"},"spec":{"taints":[)"
            R"({"key":"node.kubernetes.io/unreachable","effect":"NoExecute",)"
            R"("timeAdded":"2026-01-01T00:00:00Z"}]}})");
  EXPECT_EQ(ConditionPatch(Cond("False", kReasonSlurmNodeDown, "say \"hi\""), "T"),
            R"({"status":{"conditions":[{"type":"SlurmNodeReady","status":"False",)"
            R"("reason":"SlurmNodeDown","message":"say \"hi\"",)"
            R"("lastTransitionTime":"2025-01-02T03:04:05Z","lastHeartbeatTime":"T"}]}})");
  EXPECT_EQ(RemoveConditionPatch(),
            R"({"status":{"conditions":[{"$patch":"delete","type":"SlurmNodeReady"}]}})");
}

TEST(SuspiciousShrinkTest, MoreThanHalfAndAtLeastTwo) {
  struct Row {
    std::size_t known, lost;
    bool suspicious;
  };
  for (const Row& r : std::vector<Row>{{0, 0, false},
                                       {1, 1, false},  // one node removed: believed at once
                                       {2, 1, false},
                                       {2, 2, true},  // every node gone
                                       {3, 2, true},
                                       {4, 2, false},  // half: an administrator's reshuffle
                                       {10, 5, false},
                                       {10, 6, true},
                                       {1000, 1000, true},
                                       {1000, 10, false}}) {
    EXPECT_EQ(SuspiciousShrink(r.known, r.lost), r.suspicious) << r.known << " " << r.lost;
  }
}

// N-13: Slurm counting more CPUs or memory than the kubelet offers is reported.
TEST(CapacityGapTest, SlurmBeyondAllocatableIsNamed) {
  kube::Node node;
  node.metadata.name = "kube-n1";
  node.allocatable = {{"cpu", "3800m"}, {"memory", "15Gi"}};
  slurm::NodeInfo n;
  n.name = "n1";
  n.cpus = 4;
  n.real_memory = 16384;
  const std::string gap = CapacityGap(node, n);
  EXPECT_NE(gap.find("Slurm counts 4 CPUs (allocatable cpu 3800m) and RealMemory 16384 MiB "
                     "(allocatable memory 15Gi) on node n1"),
            std::string::npos)
      << gap;
  n.cpus = 3;
  n.real_memory = 15360;
  EXPECT_EQ(CapacityGap(node, n), "") << "fits";
  n.real_memory = 0;  // not reported by Slurm
  node.allocatable.erase("memory");
  EXPECT_EQ(CapacityGap(node, n), "");
}

// --- External nodes -------------------------------------------------------------------------

kube::Node ExternalNode(std::string name = "ext-1") {
  kube::Node node;
  node.metadata.name = std::move(name);
  node.metadata.labels[std::string(kExternalNodeLabel)] = "";
  node.metadata.annotations[std::string(kExternalNodePartitionsAnnotation)] = "ext";
  node.capacity = {{"cpu", "4"}, {"memory", "8Gi"}};
  node.addresses = {{"Hostname", "ext-1"}, {"InternalIP", "10.0.0.7"}};
  return node;
}

TEST(DesiredExternalNodeTest, FromLabelsAnnotationsAndCapacity) {
  struct SpecCase {
    std::string name;
    std::function<void(kube::Node&)> edit;
    std::function<void(ExternalNodeSpec&)> want;  // edits of the default expectation
  };
  const ExternalNodeSpec base{.slurm_name = "ext-1",
                              .address = "10.0.0.7",
                              .cpus = 4,
                              .real_memory = 8192,
                              .partitions = {"ext"},
                              .valid = true};
  const std::vector<SpecCase> cases = {
      {"plain", [](kube::Node&) {}, [](ExternalNodeSpec&) {}},
      {"slurm-nodename label names the Slurm node",
       [](kube::Node& n) {
         n.metadata.labels[std::string(bridge::kSlurmNodeNameLabel)] = "slurm-ext";
       },
       [](ExternalNodeSpec& w) { w.slurm_name = "slurm-ext"; }},
      {"gpus, topology, partitions trimmed and deduplicated",
       [](kube::Node& n) {
         n.capacity["nvidia.com/gpu"] = "2";
         n.metadata.annotations[std::string(kExternalNodePartitionsAnnotation)] =
             " ext, batch,,ext ";
         n.metadata.annotations[std::string(kTopologyAnnotation)] = "topo-switch:s1,topo-block:b1";
       },
       [](ExternalNodeSpec& w) {
         w.gpus = 2;
         w.partitions = {"ext", "batch"};
         w.topology = "topo-switch:s1,topo-block:b1";
       }},
      {"no partitions annotation: no partitions",
       [](kube::Node& n) { n.metadata.annotations.clear(); },
       [](ExternalNodeSpec& w) { w.partitions.clear(); }},
      {"memory rounds down to MiB, quantities in any unit",
       [](kube::Node& n) { n.capacity = {{"cpu", "16000m"}, {"memory", "16G"}}; },
       [](ExternalNodeSpec& w) {
         w.cpus = 16;
         w.real_memory = 15258;  // 16e9 / 2^20
       }},
      {"no InternalIP: the node's name, said",
       [](kube::Node& n) { n.addresses = {{"Hostname", "ext-1"}}; },
       [](ExternalNodeSpec& w) {
         w.address = "ext-1";
         w.address_is_name = true;
         w.problems = {
             "no InternalIP in status.addresses: NodeAddr is the node's name, which slurmctld "
             "must resolve"};
       }},
      {"an InternalIP that would inject parameters is not used",
       [](kube::Node& n) { n.addresses = {{"InternalIP", "1.2.3.4 State=Down"}}; },
       [](ExternalNodeSpec& w) {
         w.address = "ext-1";
         w.address_is_name = true;
         w.problems = {"InternalIP \"1.2.3.4 State=Down\" is not an address",
                       "no InternalIP in status.addresses: NodeAddr is the node's name, which "
                       "slurmctld must resolve"};
       }},
      {"fractional cpu: rounded down, said", [](kube::Node& n) { n.capacity["cpu"] = "3500m"; },
       [](ExternalNodeSpec& w) {
         w.cpus = 3;
         w.problems = {"capacity cpu \"3500m\" is fractional: 3 CPUs registered"};
       }},
      {"no capacity: not valid", [](kube::Node& n) { n.capacity.clear(); },
       [](ExternalNodeSpec& w) {
         w.cpus = 0;
         w.real_memory = 0;
         w.valid = false;
         w.problems = {"no cpu in status.capacity", "no memory in status.capacity"};
       }},
      {"garbage capacity: not valid, no crash",
       [](kube::Node& n) {
         n.capacity = {{"cpu", "lots"}, {"memory", "-1"}, {"nvidia.com/gpu", "x"}};
       },
       [](ExternalNodeSpec& w) {
         w.cpus = 0;
         w.real_memory = 0;
         w.valid = false;
         w.problems = {"capacity cpu \"lots\" is not a quantity",
                       "capacity memory \"-1\" is less than 1 MiB",
                       "capacity nvidia.com/gpu \"x\" is not a count: no GPUs registered"};
       }},
      {"cpu below one: not valid", [](kube::Node& n) { n.capacity["cpu"] = "500m"; },
       [](ExternalNodeSpec& w) {
         w.cpus = 0;
         w.valid = false;
         w.problems = {"capacity cpu \"500m\" is fractional: 0 CPUs registered",
                       "capacity cpu \"500m\" is less than 1"};
       }},
      {"malformed partition and topology are left out, said",
       [](kube::Node& n) {
         n.metadata.annotations[std::string(kExternalNodePartitionsAnnotation)] =
             "ext,bad name Gres=gpu:9";
         n.metadata.annotations[std::string(kTopologyAnnotation)] = "s1 State=DOWN";
       },
       [](ExternalNodeSpec& w) {
         w.problems = {
             "partition \"bad name Gres=gpu:9\" of "
             "scheduler.slinky.slurm.net/external-node-partitions is not a partition name: left "
             "out",
             "topology.slinky.slurm.net/spec \"s1 State=DOWN\" is not a topology spec: left out"};
       }},
  };
  for (const SpecCase& c : cases) {
    SCOPED_TRACE(c.name);
    kube::Node node = ExternalNode();
    c.edit(node);
    ExternalNodeSpec want = base;
    c.want(want);
    EXPECT_EQ(DesiredExternalNode(node), want);
  }
}

TEST(ExternalNodeConfTest, WhatSlurmAccepts) {
  ExternalNodeSpec spec = DesiredExternalNode(ExternalNode());
  EXPECT_EQ(ExternalNodeConf(spec),
            "NodeName=ext-1 NodeAddr=10.0.0.7 CPUs=4 RealMemory=8192 State=External Feature=ext");
  EXPECT_EQ(ExternalNodeGres(spec), "");
  spec.partitions = {"ext", "batch"};
  spec.topology = "topo-switch:s1";
  spec.gpus = 2;
  EXPECT_EQ(ExternalNodeConf(spec),
            "NodeName=ext-1 NodeAddr=10.0.0.7 CPUs=4 RealMemory=8192 State=External "
            "Feature=ext,batch Topology=topo-switch:s1 Gres=gpu:2 "
            "GresConf=\"count=2,name=gpu,file=/dev/nvidia[0-1]\"");
  EXPECT_EQ(ExternalNodeGres(spec), "gpu:2");
  spec.gpus = 1;
  spec.partitions.clear();
  spec.topology.clear();
  EXPECT_EQ(ExternalNodeConf(spec),
            "NodeName=ext-1 NodeAddr=10.0.0.7 CPUs=4 RealMemory=8192 State=External Gres=gpu:1 "
            "GresConf=\"count=1,name=gpu,file=/dev/nvidia0\"");
}

TEST(RegistrationTest, ReasonsAndMarks) {
  EXPECT_EQ(ExternalNodeComment("ext-1"), "slurm-bridge: external node of Kubernetes node ext-1");
  const std::string reason = RegistrationDrainReason("ext-1", "removing (gone)");
  EXPECT_EQ(reason, "slurm-bridge: external node of Kubernetes node ext-1: removing (gone)");
  EXPECT_TRUE(IsRegistrationDrainReason(reason));
  EXPECT_TRUE(IsBridgeOrEmptyReason(reason)) << "contains slurm-bridge:";
  EXPECT_FALSE(IsRegistrationDrainReason(CordonDrainReason("ext-1")));
  EXPECT_FALSE(IsRegistrationDrainReason("maintenance"));
  slurm::NodeInfo n;
  for (const char* busy : {"ALLOCATED", "MIXED", "COMPLETING"}) {
    n.state = {busy, "EXTERNAL", "DRAIN"};
    EXPECT_TRUE(SlurmNodeBusy(n)) << busy;
  }
  n.state = {"IDLE", "EXTERNAL", "DRAIN", "DYNAMIC_NORM"};
  EXPECT_FALSE(SlurmNodeBusy(n));
}

// The Slurm node as registered for ExternalNode(): matches its spec.
slurm::NodeInfo RegisteredExternal(std::vector<std::string> state = {"IDLE", "EXTERNAL",
                                                                     "DYNAMIC_NORM"}) {
  slurm::NodeInfo n;
  n.name = "ext-1";
  n.state = std::move(state);
  n.cpus = 4;
  n.real_memory = 8192;
  n.features = {"ext"};
  n.comment = ExternalNodeComment("ext-1");
  return n;
}

TEST(PlanRegistrationTest, Decisions) {
  struct RegWant {
    RegistrationAction action = RegistrationAction::kNone;
    bool recreate = false;
    bool remove = false;
    std::string why;
    std::optional<std::string> node_conf;
    std::vector<std::string> update_state;
    std::string update_reason;
    std::string update_comment;
    std::optional<std::string> update_topology;
    std::string keep_drain_reason;
    std::string event_reason;  // "" none
    std::string warning_reason;
  };
  struct RegCase {
    std::string name;
    std::optional<kube::Node> node;  // labelled when it has the label; nullopt: deleted
    std::optional<slurm::NodeInfo> slurm;
    RegWant want;
  };
  const std::string conf =
      "NodeName=ext-1 NodeAddr=10.0.0.7 CPUs=4 RealMemory=8192 State=External Feature=ext";
  auto unlabelled = [] {
    kube::Node n = ExternalNode();
    n.metadata.labels.clear();
    return n;
  };
  auto with = [](std::function<void(kube::Node&)> f) {
    kube::Node n = ExternalNode();
    f(n);
    return n;
  };
  auto slurm_with = [](std::function<void(slurm::NodeInfo&)> f,
                       std::vector<std::string> state = {"IDLE", "EXTERNAL", "DYNAMIC_NORM"}) {
    slurm::NodeInfo n = RegisteredExternal(std::move(state));
    f(n);
    return n;
  };
  const std::string recreate_reason =
      "slurm-bridge: external node of Kubernetes node ext-1: re-creating (CPUs 4 -> 8)";
  const std::vector<RegCase> cases = {
      {"labelled, unknown to Slurm: created",
       ExternalNode(),
       std::nullopt,
       {.action = RegistrationAction::kCreate,
        .node_conf = conf,
        .event_reason = std::string(kEventExternalRegistered)}},
      {"labelled, registered as wanted: nothing", ExternalNode(), RegisteredExternal(), {}},
      // Review R-6: a kubelet may label its own Node; that takes over no one else's node.
      {"labelled, external but registered by someone else: left alone, a warning",
       ExternalNode(),
       slurm_with([](slurm::NodeInfo& n) { n.comment = "someone's"; }),
       {.action = RegistrationAction::kIgnored,
        .warning_reason = std::string(kEventExternalNotOurs)}},
      {"labelled, external, registered for another Node: left alone, a warning",
       with([](kube::Node& n) { n.capacity["cpu"] = "8"; }),
       slurm_with([](slurm::NodeInfo& n) { n.comment = ExternalNodeComment("w5"); }),
       {.action = RegistrationAction::kIgnored,
        .warning_reason = std::string(kEventExternalNotOurs)}},
      {"labelled, topology differs: updated in place",
       with([](kube::Node& n) {
         n.metadata.annotations[std::string(kTopologyAnnotation)] = "topo-switch:s2";
       }),
       RegisteredExternal(),
       {.action = RegistrationAction::kUpdate,
        .why = "topology \"\" -> \"topo-switch:s2\"",
        .update_topology = "topo-switch:s2",
        .event_reason = std::string(kEventExternalUpdated)}},
      {"labelled, CPUs differ, not drained: drained for re-creation",
       with([](kube::Node& n) { n.capacity["cpu"] = "8"; }),
       RegisteredExternal({"ALLOCATED", "EXTERNAL"}),
       {.action = RegistrationAction::kDrain,
        .recreate = true,
        .why = "CPUs 4 -> 8",
        .update_state = {"DRAIN"},
        .update_reason = recreate_reason,
        .event_reason = std::string(kEventExternalDraining)}},
      {"labelled, memory differs, drained but busy: wait",
       with([](kube::Node& n) { n.capacity["memory"] = "4Gi"; }),
       RegisteredExternal({"MIXED", "EXTERNAL", "DRAIN"}),
       {.action = RegistrationAction::kWait,
        .recreate = true,
        .why = "RealMemory 8192 -> 4096 MiB"}},
      {"labelled, gres differs, drained and empty: deleted and re-created",
       with([](kube::Node& n) { n.capacity["nvidia.com/gpu"] = "1"; }),
       slurm_with([](slurm::NodeInfo& n) { n.reason = "slurm-bridge: external node of ..."; },
                  {"IDLE", "EXTERNAL", "DRAIN"}),
       {.action = RegistrationAction::kDelete,
        .recreate = true,
        .why = "Gres \"\" -> \"gpu:1\"",
        .node_conf = conf + " Gres=gpu:1 GresConf=\"count=1,name=gpu,file=/dev/nvidia0\"",
        .event_reason = std::string(kEventExternalRecreated)}},
      {"labelled, features differ, drained by an administrator: re-created, the drain kept",
       with([](kube::Node& n) {
         n.metadata.annotations[std::string(kExternalNodePartitionsAnnotation)] = "ext,gpu";
       }),
       slurm_with([](slurm::NodeInfo& n) { n.reason = "disk"; }, {"IDLE", "EXTERNAL", "DRAIN"}),
       {.action = RegistrationAction::kDelete,
        .recreate = true,
        .why = "features [ext] -> [ext,gpu]",
        .node_conf = "NodeName=ext-1 NodeAddr=10.0.0.7 CPUs=4 RealMemory=8192 State=External "
                     "Feature=ext,gpu",
        .keep_drain_reason = "disk",
        .event_reason = std::string(kEventExternalRecreated)}},
      {"labelled, features in another order: the same",
       with([](kube::Node& n) {
         n.metadata.annotations[std::string(kExternalNodePartitionsAnnotation)] = "b,a";
       }),
       slurm_with([](slurm::NodeInfo& n) { n.features = {"a", "b"}; }),
       {}},
      {"labelled, registered as wanted but drained by this step earlier: undrained",
       ExternalNode(),
       slurm_with(
           [](slurm::NodeInfo& n) {
             n.reason = RegistrationDrainReason("ext-1", "removing (lost the label)");
           },
           {"IDLE", "EXTERNAL", "DRAIN"}),
       {.action = RegistrationAction::kUpdate,
        .why = "undrained (no longer re-created or removed)",
        .update_state = {"UNDRAIN"},
        .event_reason = std::string(kEventExternalUpdated)}},
      {"labelled, drained by a cordon: left to the cordon logic",
       ExternalNode(),
       slurm_with([](slurm::NodeInfo& n) { n.reason = CordonDrainReason("ext-1"); },
                  {"IDLE", "EXTERNAL", "DRAIN"}),
       {}},
      {"labelled, Slurm node is not external: ignored, warned, never re-created",
       with([](kube::Node& n) { n.capacity["cpu"] = "64"; }),
       slurm_with([](slurm::NodeInfo& n) { n.comment.clear(); }, {"IDLE"}),
       {.action = RegistrationAction::kIgnored,
        .warning_reason = std::string(kEventExternalNotExternal)}},
      {"labelled without capacity, unknown to Slurm: warned, not created",
       with([](kube::Node& n) { n.capacity.clear(); }),
       std::nullopt,
       {.warning_reason = std::string(kEventExternalInvalid)}},
      {"labelled without capacity, registered: warned, left as it is",
       with([](kube::Node& n) { n.capacity.clear(); }),
       RegisteredExternal(),
       {.warning_reason = std::string(kEventExternalInvalid)}},
      {"unlabelled, not in Slurm: nothing", unlabelled(), std::nullopt, {}},
      {"unlabelled, Slurm node not external: never removed",
       unlabelled(),
       slurm_with([](slurm::NodeInfo&) {}, {"IDLE"}),
       {}},
      {"unlabelled, external but not registered by the bridge for it: left alone",
       unlabelled(),
       slurm_with([](slurm::NodeInfo& n) { n.comment.clear(); }),
       {}},
      {"unlabelled, external, marked for another Kubernetes node: left alone",
       unlabelled(),
       slurm_with([](slurm::NodeInfo& n) { n.comment = ExternalNodeComment("ext-2"); }),
       {}},
      {"unlabelled, ours, busy: drained for removal",
       unlabelled(),
       RegisteredExternal({"ALLOCATED", "EXTERNAL"}),
       {.action = RegistrationAction::kDrain,
        .remove = true,
        .why = "Kubernetes node ext-1 lost the label scheduler.slinky.slurm.net/external-node",
        .update_state = {"DRAIN"},
        .update_reason = "slurm-bridge: external node of Kubernetes node ext-1: removing "
                         "(Kubernetes node ext-1 lost the label "
                         "scheduler.slinky.slurm.net/external-node)",
        .event_reason = std::string(kEventExternalDraining)}},
      {"unlabelled, ours, drained, completing: wait",
       unlabelled(),
       RegisteredExternal({"IDLE", "EXTERNAL", "DRAIN", "COMPLETING"}),
       {.action = RegistrationAction::kWait,
        .remove = true,
        .why = "Kubernetes node ext-1 lost the label scheduler.slinky.slurm.net/external-node"}},
      {"unlabelled, ours, drain and undrain flags: not drained yet",
       unlabelled(),
       RegisteredExternal({"IDLE", "EXTERNAL", "DRAIN", "UNDRAIN"}),
       {.action = RegistrationAction::kDrain,
        .remove = true,
        .why = "Kubernetes node ext-1 lost the label scheduler.slinky.slurm.net/external-node",
        .update_state = {"DRAIN"},
        .update_reason = "slurm-bridge: external node of Kubernetes node ext-1: removing "
                         "(Kubernetes node ext-1 lost the label "
                         "scheduler.slinky.slurm.net/external-node)",
        .event_reason = std::string(kEventExternalDraining)}},
      {"deleted, ours, drained and empty: deleted",
       std::nullopt,
       RegisteredExternal({"IDLE", "EXTERNAL", "DRAIN"}),
       {.action = RegistrationAction::kDelete,
        .remove = true,
        .why = "Kubernetes node ext-1 was deleted",
        .event_reason = std::string(kEventExternalRemoved)}},
      {"deleted, not external: never",
       std::nullopt,
       slurm_with([](slurm::NodeInfo&) {}, {"IDLE"}),
       {}},
  };
  for (const RegCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<ExternalNodeSpec> desired;
    if (c.node && HasExternalNodeLabel(*c.node)) desired = DesiredExternalNode(*c.node);
    const RegistrationPlan plan = PlanRegistration(
        "ext-1", !c.node.has_value(), desired ? &*desired : nullptr, c.slurm ? &*c.slurm : nullptr);
    EXPECT_EQ(plan.action, c.want.action);
    EXPECT_EQ(plan.recreate, c.want.recreate);
    EXPECT_EQ(plan.remove, c.want.remove);
    EXPECT_EQ(plan.why, c.want.why);
    EXPECT_EQ(plan.node_conf, c.want.node_conf);
    EXPECT_EQ(plan.keep_drain_reason, c.want.keep_drain_reason);
    const bool wants_update = !c.want.update_state.empty() || !c.want.update_comment.empty() ||
                              c.want.update_topology.has_value();
    ASSERT_EQ(plan.update.has_value(), wants_update);
    if (plan.update) {
      EXPECT_EQ(plan.update->state, c.want.update_state);
      EXPECT_EQ(plan.update->reason, c.want.update_reason);
      EXPECT_EQ(plan.update->comment, c.want.update_comment);
      EXPECT_EQ(plan.update->topology_str, c.want.update_topology);
      EXPECT_FALSE(plan.update->features) << "features change only by re-creation";
    }
    EXPECT_EQ(plan.event ? plan.event->reason : "", c.want.event_reason);
    if (plan.event) {
      EXPECT_FALSE(plan.event->warning);
    }
    EXPECT_EQ(plan.warning ? plan.warning->reason : "", c.want.warning_reason);
    if (plan.warning) {
      EXPECT_TRUE(plan.warning->warning);
    }
  }
}

TEST(PlanRegistrationTest, PartitionCheckOnlyWhenCreatingOrFeaturesDiffer) {
  const ExternalNodeSpec spec = DesiredExternalNode(ExternalNode());
  EXPECT_TRUE(NeedsPartitionCheck(spec, nullptr));
  slurm::NodeInfo n = RegisteredExternal();
  EXPECT_FALSE(NeedsPartitionCheck(spec, &n));
  n.features = {"other"};
  EXPECT_TRUE(NeedsPartitionCheck(spec, &n));
  n.state = {"IDLE"};  // not external: never touched, never checked
  EXPECT_FALSE(NeedsPartitionCheck(spec, &n));
  ExternalNodeSpec none = spec;
  none.partitions.clear();
  EXPECT_FALSE(NeedsPartitionCheck(none, nullptr));
}

// The cordon logic leaves a drain for re-creation or removal alone: no undrain of it.
TEST(PlanNodeTest, RegistrationDrainIsNotUndrained) {
  slurm::NodeInfo n = RegisteredExternal({"MIXED", "EXTERNAL", "DRAIN"});
  n.reason = RegistrationDrainReason("ext-1", "removing (gone)");
  kube::Node node = ExternalNode();
  node.taints = {Managed()};
  const NodePlan plan = PlanNode(node, &n, kSched, kNow);
  EXPECT_EQ(plan.drain, DrainAction::kNone);
  EXPECT_FALSE(plan.slurm_update);
}

// --- DRA inventory vs Slurm's GRES (5.) ---

// A complete one-slice pool of the example driver on `node`: devices gpu-<i> with attribute
// index i.
bridge::ResourceSliceInfo ExampleSlice(const std::string& node, const std::vector<int>& indices) {
  std::string devices;
  for (int i : indices) {
    devices += fmt::format(R"({}{{"name":"gpu-{}","attributes":{{"index":{{"int":{}}}}}}})",
                           devices.empty() ? "" : ",", i, i);
  }
  Result<bridge::ResourceSliceInfo> s = bridge::ParseResourceSliceJson(fmt::format(
      R"({{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"{}-gpus"}},)"
      R"("spec":{{"driver":"gpu.example.com","nodeName":"{}","pool":{{"name":"{}","generation":1,)"
      R"("resourceSliceCount":1}},"devices":[{}]}}}})",
      node, node, node, devices));
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  return s.value_or(bridge::ResourceSliceInfo{});
}

slurm::NodeInfo GresNode(std::string gres) {
  slurm::NodeInfo n;
  n.name = "n1";
  n.state = {"IDLE"};
  n.gres = std::move(gres);
  return n;
}

kube::Node WithGresCondition(kube::Node node, std::string status, std::string reason,
                             std::string message) {
  node.conditions.push_back({std::string(kGresCompatibleCondition), std::move(status),
                             std::move(reason), std::move(message), std::string(kBefore)});
  return node;
}

TEST(PlanGresConditionTest, TrueFalseUnknownAndWhenNothingChanges) {
  const std::vector<bridge::DeviceProfile> profiles = bridge::DefaultDeviceProfiles();
  const kube::Node n1 = NodeBuilder("n1");
  const slurm::NodeInfo slurm = GresNode("gpu:fake:4");
  const std::vector<bridge::ResourceSliceInfo> agree = {ExampleSlice("n1", {0, 1, 2, 3}),
                                                        ExampleSlice("n2", {0})};
  const std::vector<bridge::ResourceSliceInfo> disagree = {ExampleSlice("n1", {0, 1})};

  GresPlan ok = PlanGresCondition(n1, &slurm, &agree, profiles, kNow);
  ASSERT_TRUE(ok.condition);
  EXPECT_EQ(ok.condition->type, kGresCompatibleCondition);
  EXPECT_EQ(ok.condition->status, "True");
  EXPECT_EQ(ok.condition->reason, kReasonGresCompatible);
  EXPECT_NE(ok.condition->message.find("0-3"), std::string::npos) << ok.condition->message;
  EXPECT_EQ(ok.condition->last_transition_time, kNow);
  EXPECT_FALSE(ok.event);
  EXPECT_FALSE(ok.remove_condition);

  GresPlan bad = PlanGresCondition(n1, &slurm, &disagree, profiles, kNow);
  ASSERT_TRUE(bad.condition);
  EXPECT_EQ(bad.condition->status, "False");
  EXPECT_EQ(bad.condition->reason, kReasonGresIncompatible);
  EXPECT_NE(bad.condition->message.find("0-1"), std::string::npos) << bad.condition->message;
  ASSERT_TRUE(bad.event);
  EXPECT_TRUE(bad.event->warning);
  EXPECT_EQ(bad.event->reason, kReasonGresIncompatible);
  EXPECT_NE(bad.event->message.find(bad.condition->message), std::string::npos);

  // Written already: nothing. False again with another message: written, no second Warning, the
  // transition time kept.
  const kube::Node n1_false =
      WithGresCondition(n1, "False", bad.condition->reason, bad.condition->message);
  GresPlan same = PlanGresCondition(n1_false, &slurm, &disagree, profiles, kNow);
  EXPECT_FALSE(same.condition);
  EXPECT_FALSE(same.event);
  const std::vector<bridge::ResourceSliceInfo> other = {ExampleSlice("n1", {0})};
  GresPlan changed = PlanGresCondition(n1_false, &slurm, &other, profiles, kNow);
  ASSERT_TRUE(changed.condition);
  EXPECT_EQ(changed.condition->status, "False");
  EXPECT_EQ(changed.condition->last_transition_time, kBefore);
  EXPECT_FALSE(changed.event);
  // Back to True.
  GresPlan healed = PlanGresCondition(n1_false, &slurm, &agree, profiles, kNow);
  ASSERT_TRUE(healed.condition);
  EXPECT_EQ(healed.condition->status, "True");
  EXPECT_EQ(healed.condition->last_transition_time, kNow);

  // No ResourceSlices on the node (no DRA driver): True, as upstream's hybrid nodes, saying so.
  const std::vector<bridge::ResourceSliceInfo> none;
  GresPlan no_driver = PlanGresCondition(n1, &slurm, &none, profiles, kNow);
  ASSERT_TRUE(no_driver.condition);
  EXPECT_EQ(no_driver.condition->status, "True");
  EXPECT_NE(no_driver.condition->message.find("no DRA driver"), std::string::npos)
      << no_driver.condition->message;

  // An inventory that cannot be built (two devices with one index): Unknown.
  const std::vector<bridge::ResourceSliceInfo> twice = {ExampleSlice("n1", {0, 0})};
  GresPlan unknown = PlanGresCondition(n1, &slurm, &twice, profiles, kNow);
  ASSERT_TRUE(unknown.condition);
  EXPECT_EQ(unknown.condition->status, "Unknown");
  EXPECT_EQ(unknown.condition->reason, kReasonGresVerificationError);
  EXPECT_TRUE(unknown.condition->message.starts_with("Could not verify Slurm GRES compatibility: "))
      << unknown.condition->message;
  EXPECT_FALSE(unknown.event);
}

TEST(PlanGresConditionTest, RemovedOffSlurmAndWithoutProfilesKeptWhenSlicesUnknown) {
  const std::vector<bridge::DeviceProfile> profiles = bridge::DefaultDeviceProfiles();
  const slurm::NodeInfo slurm = GresNode("gpu:fake:4");
  const std::vector<bridge::ResourceSliceInfo> none;
  const kube::Node with =
      WithGresCondition(NodeBuilder("n1"), "False", std::string(kReasonGresIncompatible), "x");
  // Not a Slurm node (any more), or no profiles: the condition goes; nothing when absent.
  EXPECT_TRUE(PlanGresCondition(with, nullptr, &none, profiles, kNow).remove_condition);
  EXPECT_TRUE(PlanGresCondition(with, &slurm, &none, {}, kNow).remove_condition);
  GresPlan absent = PlanGresCondition(NodeBuilder("n1"), nullptr, &none, profiles, kNow);
  EXPECT_FALSE(absent.remove_condition);
  EXPECT_FALSE(absent.condition);
  // Slices not known (API not served, informer not synced): nothing changes.
  GresPlan unknown = PlanGresCondition(with, &slurm, nullptr, profiles, kNow);
  EXPECT_FALSE(unknown.condition);
  EXPECT_FALSE(unknown.remove_condition);
  EXPECT_FALSE(unknown.event);
  EXPECT_EQ(
      RemoveConditionPatch(kGresCompatibleCondition),
      R"({"status":{"conditions":[{"$patch":"delete","type":"SlinkySlurmGRESCompatible"}]}})");
}

TEST(GresIncompatibleTest, OnlyFalseExcludes) {
  const kube::Node plain = NodeBuilder("n1");
  EXPECT_FALSE(GresIncompatible(plain));
  EXPECT_TRUE(GresIncompatible(WithGresCondition(plain, "False", "IncompatibleSlurmGRES", "")));
  EXPECT_FALSE(GresIncompatible(WithGresCondition(plain, "True", "SlurmGRESCompatible", "")));
  EXPECT_FALSE(
      GresIncompatible(WithGresCondition(plain, "Unknown", "SlurmGRESVerificationError", "")));
}

TEST(ResourceSliceNodesTest, NodeNameAndPerDeviceNodes) {
  auto nodes = [](std::string_view spec) {
    Result<kube::GenericObject> o = kube::Decode<kube::GenericObject>(
        R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":)" +
        std::string(spec) + "}");
    EXPECT_TRUE(o.has_value());
    return ResourceSliceNodes(o.value_or(kube::GenericObject{}));
  };
  EXPECT_EQ(
      nodes(
          R"({"driver":"d","nodeName":"n1","pool":{"name":"p","resourceSliceCount":1},"devices":[]})"),
      (std::vector<std::string>{"n1"}));
  EXPECT_EQ(
      nodes(
          R"({"driver":"d","perDeviceNodeSelection":true,"pool":{"name":"p","resourceSliceCount":1},)"
          R"("devices":[{"name":"a","nodeName":"n2"},{"name":"b","nodeName":"n1"},{"name":"c","nodeName":"n2"}]})"),
      (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(
      nodes(
          R"({"driver":"d","allNodes":true,"pool":{"name":"p","resourceSliceCount":1},"devices":[]})")
          .empty());
  EXPECT_TRUE(nodes(R"({"nodeName":"n1"})").empty()) << "malformed: no driver";
}

}  // namespace
}  // namespace sb::controllers
