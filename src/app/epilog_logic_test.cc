// SPDX-License-Identifier: Apache-2.0
#include "app/epilog_logic.h"

#include <gtest/gtest.h>

#include "bridge/names.h"

namespace sb::app {
namespace {
using namespace std::chrono_literals;

kube::Pod PodOn(const std::string& name, const std::string& annotated_node,
                const std::string& bound_node = "", const std::string& phase = "Running") {
  kube::Pod p;
  p.metadata.namespace_ = "ns";
  p.metadata.name = name;
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

TEST(KubeNodeOfPod, AnnotationFirstThenNodeName) {
  EXPECT_EQ(KubeNodeOfPod(PodOn("a", "n1", "n2")), "n1");
  EXPECT_EQ(KubeNodeOfPod(PodOn("a", "", "n2")), "n2");
  EXPECT_EQ(KubeNodeOfPod(PodOn("a", "", "")), "");
}

TEST(PodsHoldingNode, NoPodsReleaseAtOnce) {
  NodeHold h = PodsHoldingNode({}, "n1", {});
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
  NodeHold h = PodsHoldingNode(pods, "n1", {{"n2", "n2"}});
  EXPECT_EQ(h.holding, (std::vector<std::string>{"ns/here", "ns/pending-phase"}));
  EXPECT_TRUE(h.unknown_nodes.empty());
  EXPECT_TRUE(PodsHoldingNode(pods, "n3", {{"n1", "n1"}, {"n2", "n2"}}).Released());
}

TEST(PodsHoldingNode, BeingDeletedStillHolds) {
  kube::Pod p = PodOn("going", "n1", "n1");
  p.metadata.deletion_timestamp = "2026-12-01T10:00:00Z";
  EXPECT_EQ(PodsHoldingNode({p}, "n1", {}).holding, std::vector<std::string>{"ns/going"});
}

TEST(PodsHoldingNode, KubernetesNamesDifferingFromSlurmNamesAreMapped) {
  const std::vector<kube::Pod> pods = {PodOn("p", "kube-n5", "kube-n5")};
  // Not known yet: holds, and the node is to be read.
  NodeHold h = PodsHoldingNode(pods, "n5", {});
  EXPECT_EQ(h.holding, std::vector<std::string>{"ns/p"});
  EXPECT_EQ(h.unknown_nodes, std::vector<std::string>{"kube-n5"});
  // Known: on n5, not on n1.
  EXPECT_EQ(PodsHoldingNode(pods, "n5", {{"kube-n5", "n5"}}).holding,
            std::vector<std::string>{"ns/p"});
  EXPECT_TRUE(PodsHoldingNode(pods, "n1", {{"kube-n5", "n5"}}).Released());
  // A Kubernetes node named as another Slurm node than its own label says.
  EXPECT_TRUE(PodsHoldingNode({PodOn("q", "n1", "n1")}, "n1", {{"n1", "n7"}}).Released());
}

TEST(PodsHoldingNode, NodeNameServesWhenTheAnnotationIsMissing) {
  EXPECT_EQ(PodsHoldingNode({PodOn("p", "", "n1")}, "n1", {}).holding,
            std::vector<std::string>{"ns/p"});
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
