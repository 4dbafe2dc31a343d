// SPDX-License-Identifier: Apache-2.0
#include "app/epilog_logic.h"

#include <gtest/gtest.h>

#include "bridge/names.h"

namespace sb::app {
namespace {
using namespace std::chrono_literals;

constexpr std::string_view kScheduler = "slurm-bridge-scheduler";

kube::Pod PodOn(const std::string& name, const std::string& annotated_node,
                const std::string& bound_node = "", const std::string& phase = "Running") {
  kube::Pod p;
  p.metadata.namespace_ = "ns";
  p.metadata.name = name;
  p.spec.scheduler_name = kScheduler;
  if (!annotated_node.empty()) {
    p.metadata.annotations[std::string(bridge::kNodeAnnotation)] = annotated_node;
  }
  p.spec.node_name = bound_node;
  p.status.phase = phase;
  return p;
}

TEST(ParseEpilogJobId, TakesPositiveDecimalsOnly) {
  EXPECT_EQ(ParseEpilogJobId("1"), 1);
  EXPECT_EQ(ParseEpilogJobId("123456789"), 123456789);
  for (const char* bad : {"", "0", "-3", "+3", " 3", "3 ", "12a", "1+0", "99999999999999999999"}) {
    EXPECT_FALSE(ParseEpilogJobId(bad)) << bad;
  }
}

// the node annotation is anyone's to write on a pod that is never bound; spec.nodeName is
// where a pod runs.
TEST(KubeNodeOfPod, NodeNameOnly) {
  EXPECT_EQ(KubeNodeOfPod(PodOn("a", "n1", "n2")), "n2");
  EXPECT_EQ(KubeNodeOfPod(PodOn("a", "", "n2")), "n2");
  EXPECT_EQ(KubeNodeOfPod(PodOn("a", "n1", "")), "");
  EXPECT_EQ(KubeNodeOfPod(PodOn("a", "", "")), "");
}

TEST(PodsHoldingNode, NoPodsReleaseAtOnce) {
  NodeHold h = PodsHoldingNode({}, "n1", {}, kScheduler);
  EXPECT_TRUE(h.Released());
  EXPECT_TRUE(h.unknown_nodes.empty());
}

TEST(PodsHoldingNode, OnlyUnfinishedPodsOnThisNodeHold) {
  const std::vector<kube::Pod> pods = {
      PodOn("here", "n1", "n1"),
      PodOn("pending-phase", "n1", "n1", "Pending"),  // containers may be starting
      PodOn("succeeded", "n1", "n1", "Succeeded"),
      PodOn("failed", "n1", "n1", "Failed"),
      PodOn("unbound", "", ""),
      PodOn("other-node", "n2", "n2"),
  };
  NodeHold h = PodsHoldingNode(pods, "n1", {{"n2", "n2"}}, kScheduler);
  EXPECT_EQ(h.holding, (std::vector<std::string>{"ns/here", "ns/pending-phase"}));
  EXPECT_TRUE(h.unknown_nodes.empty());
  EXPECT_TRUE(PodsHoldingNode(pods, "n3", {{"n1", "n1"}, {"n2", "n2"}}, kScheduler).Released());
}

TEST(PodsHoldingNode, BeingDeletedStillHolds) {
  kube::Pod p = PodOn("going", "n1", "n1");
  p.metadata.deletion_timestamp = "2026-12-01T10:00:00Z";
  EXPECT_EQ(PodsHoldingNode({p}, "n1", {}, kScheduler).holding,
            std::vector<std::string>{"ns/going"});
}

TEST(PodsHoldingNode, KubernetesNamesDifferingFromSlurmNamesAreMapped) {
  const std::vector<kube::Pod> pods = {PodOn("p", "kube-n5", "kube-n5")};
  // Not known yet: holds, and the node is to be read.
  NodeHold h = PodsHoldingNode(pods, "n5", {}, kScheduler);
  EXPECT_EQ(h.holding, std::vector<std::string>{"ns/p"});
  EXPECT_EQ(h.unknown_nodes, std::vector<std::string>{"kube-n5"});
  // Known: on n5, not on n1.
  EXPECT_EQ(PodsHoldingNode(pods, "n5", {{"kube-n5", "n5"}}, kScheduler).holding,
            std::vector<std::string>{"ns/p"});
  EXPECT_TRUE(PodsHoldingNode(pods, "n1", {{"kube-n5", "n5"}}, kScheduler).Released());
  // A Kubernetes node named as another Slurm node than its own label says.
  EXPECT_TRUE(
      PodsHoldingNode({PodOn("q", "n1", "n1")}, "n1", {{"n1", "n7"}}, kScheduler).Released());
}

TEST(PodsHoldingNode, NodeNameServesWhenTheAnnotationIsMissing) {
  EXPECT_EQ(PodsHoldingNode({PodOn("p", "", "n1")}, "n1", {}, kScheduler).holding,
            std::vector<std::string>{"ns/p"});
}

// a tenant's pod labelled with any job id (a native job's too) and annotated with the node
// held it COMPLETING for the max wait: only pods of the bridge's scheduler, bound to the node,
// count.
TEST(PodsHoldingNode, OnlyBoundPodsOfTheBridgesSchedulerHold) {
  kube::Pod nobody = PodOn("nobody", "n1", "n1");
  nobody.spec.scheduler_name = "nobody";
  kube::Pod pending = PodOn("hold", "n1", "", "Pending");  // never bound: annotation only
  pending.spec.scheduler_name = "nobody";
  kube::Pod unbound = PodOn("unbound", "n1", "", "Pending");  // the bridge's, not bound
  kube::Pod defaulted = PodOn("defaulted", "n1", "n1");
  defaulted.spec.scheduler_name = "default-scheduler";
  NodeHold h = PodsHoldingNode({nobody, pending, unbound, defaulted}, "n1", {}, kScheduler);
  EXPECT_TRUE(h.Released()) << ::testing::PrintToString(h.holding);
  EXPECT_TRUE(h.unknown_nodes.empty());
  // Annotated with this node, bound elsewhere: where it is bound counts.
  EXPECT_TRUE(
      PodsHoldingNode({PodOn("moved", "n1", "n2")}, "n1", {{"n2", "n2"}}, kScheduler).Released());
  EXPECT_EQ(PodsHoldingNode({PodOn("moved", "n1", "n2")}, "n2", {}, kScheduler).holding,
            std::vector<std::string>{"ns/moved"});
  // Another scheduler name configured: its pods count, the default's do not.
  EXPECT_EQ(PodsHoldingNode({nobody}, "n1", {}, "nobody").holding,
            std::vector<std::string>{"ns/nobody"});
  EXPECT_TRUE(PodsHoldingNode({PodOn("p", "", "n1")}, "n1", {}, "nobody").Released());
}

TEST(DefaultEpilogMaxWait, GracePlusThirtySeconds) {
  EXPECT_EQ(DefaultEpilogMaxWait(std::nullopt), 330s);
  EXPECT_EQ(DefaultEpilogMaxWait(300), 330s);
  EXPECT_EQ(DefaultEpilogMaxWait(60), 90s);
  EXPECT_EQ(DefaultEpilogMaxWait(0), 330s);  // no cap configured: the default grace
  EXPECT_EQ(DefaultEpilogMaxWait(-1), 330s);
}

}  // namespace
}  // namespace sb::app
