// SPDX-License-Identifier: Apache-2.0
//
// The scheduler against APIs that exist only on a current Kubernetes (the test environment's
// 1.36.2 apiserver; 1.34.2 under scripts/compat.sh): scheduling gates removed by an outside
// controller, pod sizing with native sidecars and pod-level resources, and pods that name a
// Workload API PodGroup. The `slurm-bridge scheduler` binary runs as a child process against the
// real slurmctld/slurmrestd and kube-apiserver; Node objects stand in for the kubelets.
#include <string>
#include <vector>

#include "testing/bridge_e2e.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;

using CurrentApiE2e = sb::testing::BridgeE2e;

// As kube-scheduler: a gated pod is not scheduled (no Slurm job), whatever else happens, until
// an outside controller (here the test, as Kueue would) removes its last gate; then it is.
TEST_F(CurrentApiE2e, GatedPodGetsNoJobUntilItsLastGateIsRemoved) {
  StartScheduler();
  CreatePod(
      "gated", R"({"limits":{"cpu":"1"}})", "{}",
      R"(,"schedulingGates":[{"name":"example.com/quota"},{"name":"kueue.x-k8s.io/admission"}])");
  // The apiserver itself marks the pod gated.
  auto gated = RunSync(io_, kube::GetPod(*kube_, ns_, "gated"));
  ASSERT_TRUE(gated) << gated.error().message;
  const kube::Condition* cond = kube::FindCondition(gated->status.conditions, "PodScheduled");
  ASSERT_NE(cond, nullptr) << "no PodScheduled condition on a gated pod";
  EXPECT_EQ(cond->reason, "SchedulingGated");
  // A pod created after it is bound: the scheduler has looked at the gated one and passed it by.
  CreatePod("control", R"({"limits":{"cpu":"1"}})");
  ASSERT_TRUE(WaitForPod("control", IsBound)) << "control not bound";
  const std::string uid = gated->metadata.uid;
  const std::string kubectl = "KUBECONFIG=" + env_.Get("KUBECONFIG") + " kubectl -n " + ns_ + " ";
  auto expect_nothing = [&](const std::string& when) {
    auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "gated"));
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_TRUE(p->spec.node_name.empty()) << when << ": bound to " << p->spec.node_name;
    EXPECT_EQ(JobId(*p), 0) << when;
    EXPECT_TRUE(JobsByUid()[uid].empty()) << when << ": a Slurm job names the gated pod";
  };
  expect_nothing("two gates");
  // One gate removed: still gated. The update reaches the scheduler (it is an update event).
  Shell(kubectl +
        R"(patch pod gated --type=json -p '[{"op":"remove","path":"/spec/schedulingGates/0"}]')");
  auto one = RunSync(io_, kube::GetPod(*kube_, ns_, "gated"));
  ASSERT_TRUE(one) << one.error().message;
  ASSERT_EQ(one->spec.scheduling_gates, std::vector<std::string>{"kueue.x-k8s.io/admission"});
  CreatePod("control2", R"({"limits":{"cpu":"1"}})");
  ASSERT_TRUE(WaitForPod("control2", IsBound)) << "control2 not bound";
  expect_nothing("one gate left");
  // The last gate removed: scheduled, one job.
  Shell(kubectl +
        R"(patch pod gated --type=json -p '[{"op":"remove","path":"/spec/schedulingGates/0"}]')");
  std::optional<kube::Pod> bound = WaitForPod("gated", IsBound);
  ASSERT_TRUE(bound) << "the pod was not scheduled after its last gate was removed";
  EXPECT_GT(JobId(*bound), 0);
  EXPECT_EQ(JobsByUid()[uid].size(), 1u);
}

// The Slurm job asks for the CPU and memory kube-scheduler would reserve for the pod: with native
// sidecars (init containers with restartPolicy Always) they add to the main containers, and a
// plain init container that starts after a sidecar needs its own request plus that sidecar's; a
// pod-level spec.resources replaces the containers' sum.
TEST_F(CurrentApiE2e, SidecarsAndPodLevelResourcesSizeTheJobAsKubeSchedulerDoes) {
  StartScheduler();
  // Containers: main 1 CPU / 1Gi + sidecar 500m / 256Mi = 1.5 CPU / 1280Mi. Init: "setup" runs
  // after the sidecar started, 2 CPU / 64Mi + 500m / 256Mi = 2.5 CPU / 320Mi. The pod: max of
  // both = 2.5 CPU -> 3 CPUs for Slurm, 1280 MiB.
  const std::string sidecar_spec = R"(,"initContainers":[
      {"name":"proxy","image":"busybox","restartPolicy":"Always",
       "resources":{"requests":{"cpu":"500m","memory":"256Mi"}}},
      {"name":"setup","image":"busybox",
       "resources":{"requests":{"cpu":"2","memory":"64Mi"}}}])";
  CreatePod("sidecar", R"({"requests":{"cpu":"1","memory":"1Gi"}})", "{}", sidecar_spec);
  // Pod-level resources: 4 CPU / 2Gi for the whole pod, more than the container asks for.
  CreatePod(
      "podlevel", R"({"requests":{"cpu":"1","memory":"512Mi"}})", "{}",
      R"(,"resources":{"requests":{"cpu":"4","memory":"2Gi"},"limits":{"cpu":"4","memory":"2Gi"}})");
  for (const auto& [pod, want] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"sidecar", {"MinCPUsNode=3 ", "MinMemoryNode=1280M "}},
           {"podlevel", {"MinCPUsNode=4 ", "MinMemoryNode=2G "}}}) {
    std::optional<kube::Pod> p = WaitForPod(pod, HasJob);
    ASSERT_TRUE(p) << pod << ": no Slurm job";
    const std::string show = Slurm(fmt::format("scontrol show job -o {}", JobId(*p)));
    for (const std::string& w : want) {
      EXPECT_NE(show.find(w), std::string::npos) << pod << ": " << w << "\n" << show;
    }
    // The apiserver kept what the test wrote: the sizing was read from the real object.
    auto got = RunSync(io_, kube::GetPod(*kube_, ns_, pod));
    ASSERT_TRUE(got) << got.error().message;
    if (pod == "sidecar") {
      ASSERT_EQ(got->spec.init_containers.size(), 2u);
      EXPECT_EQ(got->spec.init_containers[0].restart_policy, "Always");
    } else {
      EXPECT_EQ(got->spec.resources.requests.at("cpu"), "4");
    }
  }
}

// A pod that names a Workload API PodGroup (scheduling.k8s.io/v1alpha2, spec.schedulingGroup) is
// not scheduled until the bridge reads that API: it waits with an event and a condition that say
// so, and no Slurm job is made for it.
TEST_F(CurrentApiE2e, WorkloadApiPodGroupPodWaitsWithAnEventThatSaysWhy) {
  if (env_.Get("KUBE_VERSION").starts_with("1.34.")) {
    GTEST_SKIP() << "Kubernetes 1.34 has no scheduling.k8s.io/v1alpha2 PodGroup";
  }
  StartScheduler();
  const std::string group = fmt::format(
      R"({{"apiVersion":"scheduling.k8s.io/v1alpha2","kind":"PodGroup",
      "metadata":{{"name":"train","namespace":"{}"}},
      "spec":{{"schedulingPolicy":{{"gang":{{"minCount":2}}}}}}}})",
      ns_);
  kube::ResourceRef groups{.group = "scheduling.k8s.io",
                           .version = "v1alpha2",
                           .resource = "podgroups",
                           .namespace_ = ns_};
  auto created = RunSync(io_, kube_->Create(groups, group));
  ASSERT_TRUE(created) << created.error().message;
  for (const char* name : {"w0", "w1"}) {
    CreatePod(name, R"({"limits":{"cpu":"1"}})", "{}",
              R"(,"schedulingGroup":{"podGroupName":"train"})");
  }
  // The apiserver kept the field (feature GenericWorkload on): the pod really names the group.
  auto w0 = RunSync(io_, kube::GetPod(*kube_, ns_, "w0"));
  ASSERT_TRUE(w0) << w0.error().message;
  ASSERT_EQ(w0->spec.scheduling_group, "train");
  for (const char* name : {"w0", "w1"}) {
    const std::string message = WaitForEvent(name);
    EXPECT_FALSE(message.empty()) << name << ": no FailedScheduling event";
    EXPECT_NE(message.find("spec.schedulingGroup names PodGroup train"), std::string::npos)
        << message;
    EXPECT_NE(message.find("does not read yet"), std::string::npos) << message;
  }
  // A plain pod created after them is scheduled; they still have no job.
  CreatePod("control", R"({"limits":{"cpu":"1"}})");
  ASSERT_TRUE(WaitForPod("control", IsBound)) << "control not bound";
  for (const kube::Pod& p : Pods()) {
    if (p.metadata.name == "control") continue;
    EXPECT_TRUE(p.spec.node_name.empty()) << p.metadata.name;
    EXPECT_TRUE(JobsByUid()[p.metadata.uid].empty()) << p.metadata.name << " has a Slurm job";
    const kube::Condition* cond = kube::FindCondition(p.status.conditions, "PodScheduled");
    ASSERT_NE(cond, nullptr) << p.metadata.name;
    EXPECT_EQ(cond->status, "False");
    EXPECT_NE(cond->message.find("Workload API"), std::string::npos) << cond->message;
  }
}

}  // namespace
}  // namespace sb::scheduler
