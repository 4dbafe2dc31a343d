// SPDX-License-Identifier: Apache-2.0
//
// The scheduler against APIs that exist only on a current Kubernetes (the test environment's
// 1.36.2 apiserver; 1.34.2 under scripts/compat.sh): scheduling gates removed by an outside
// controller, pod sizing with native sidecars and pod-level resources, and pods that name a
// Workload API PodGroup (one gang, its status written back). The `slurm-bridge scheduler` binary
// runs as a child process against the real slurmctld/slurmrestd and kube-apiserver; Node objects
// stand in for the kubelets.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "bridge/group.h"
#include "testing/bridge_e2e.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;

class CurrentApiE2e : public sb::testing::BridgeE2e {
 protected:
  kube::ResourceRef PodGroupsRef() const {
    return kube::ResourceRef{.group = "scheduling.k8s.io",
                             .version = "v1alpha2",
                             .resource = "podgroups",
                             .namespace_ = ns_};
  }
  // A scheduling.k8s.io/v1alpha2 PodGroup of policy gang (1.36 types.go).
  void CreateWorkloadPodGroup(const std::string& name, int min_count,
                              const std::string& annotations = "{}") {
    const std::string group = fmt::format(
        R"({{"apiVersion":"scheduling.k8s.io/v1alpha2","kind":"PodGroup",
        "metadata":{{"name":"{}","namespace":"{}","annotations":{}}},
        "spec":{{"schedulingPolicy":{{"gang":{{"minCount":{}}}}}}}}})",
        name, ns_, annotations, min_count);
    auto created = RunSync(io_, kube_->Create(PodGroupsRef(), group));
    ASSERT_TRUE(created) << created.error().message;
  }
  // The PodGroup's PodGroupScheduled condition (v1alpha2's: 1.36 serves no v1beta1) once its
  // status is `status`, else nullopt; `generation` gets the PodGroup's metadata.generation.
  std::optional<kube::Condition> WaitForPodGroupScheduled(const std::string& name,
                                                          const std::string& status,
                                                          std::chrono::seconds limit = 60s,
                                                          std::int64_t* observed = nullptr,
                                                          std::int64_t* generation = nullptr) {
    std::optional<bridge::PodGroupCondition> found;
    WaitFor(
        [&] {
          auto pg =
              RunSync(io_, kube::GetAs<kube::GenericObject>(*kube_, PodGroupsRef().WithName(name)));
          if (!pg) return false;
          std::optional<bridge::PodGroupCondition> c =
              bridge::FindPodGroupCondition(*pg, bridge::kPodGroupScheduled);
          if (c && c->condition.status == status) {
            found = c;
            if (generation != nullptr) *generation = pg->metadata.generation;
          }
          return found.has_value();
        },
        limit);
    if (!found) return std::nullopt;
    if (observed != nullptr) *observed = found->observed_generation;
    return found->condition;
  }
};

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

// Pods that name a Workload API PodGroup (scheduling.k8s.io/v1alpha2, spec.schedulingGroup) of
// policy gang minCount 4 are one gang: one Slurm job of 4 nodes, all bound, and the PodGroup's
// status (the podgroups/status subresource, strategic merge patch) shows PodGroupScheduled=True
// with observedGeneration as the PodGroup's metadata.generation. (1.36 serves no v1beta1:
// discovery picks v1alpha2; v1beta1 is covered by unit tests written from the 1.37 OpenAPI
// document.)
TEST_F(CurrentApiE2e, WorkloadApiPodGroupGangRunsAsOneJobAndShowsScheduled) {
  if (env_.Get("KUBE_VERSION").starts_with("1.34.")) {
    GTEST_SKIP() << "Kubernetes 1.34 has no scheduling.k8s.io/v1alpha2 PodGroup";
  }
  StartScheduler();
  CreateWorkloadPodGroup("train", 4, R"({"slurmjob.slinky.slurm.net/job-name":"train-gang"})");
  std::vector<std::string> names = {"w0", "w1", "w2", "w3"};
  for (const std::string& name : names) {
    CreatePod(name, R"({"limits":{"cpu":"1"}})", "{}",
              R"(,"schedulingGroup":{"podGroupName":"train"})");
  }
  // The apiserver kept the field (feature GenericWorkload on): the pods really name the group.
  auto w0 = RunSync(io_, kube::GetPod(*kube_, ns_, "w0"));
  ASSERT_TRUE(w0) << w0.error().message;
  ASSERT_EQ(w0->spec.scheduling_group, "train");
  std::set<std::int64_t> jobs;
  std::set<std::string> nodes;
  for (const std::string& name : names) {
    std::optional<kube::Pod> p = WaitForPod(name, IsBound);
    ASSERT_TRUE(p) << name << " not bound";
    jobs.insert(JobId(*p));
    nodes.insert(p->spec.node_name);
  }
  ASSERT_EQ(jobs.size(), 1u) << "not one Slurm job";
  EXPECT_EQ(nodes.size(), 4u);
  const std::int64_t job = *jobs.begin();
  const std::string show = Slurm(fmt::format("scontrol show job -o {}", job));
  EXPECT_NE(show.find("NumNodes=4 "), std::string::npos) << show;
  EXPECT_NE(show.find("JobName=train-gang "), std::string::npos) << show;
  std::int64_t observed = 0;
  std::int64_t generation = 0;
  std::optional<kube::Condition> c =
      WaitForPodGroupScheduled("train", "True", 60s, &observed, &generation);
  ASSERT_TRUE(c) << "no PodGroupScheduled=True on the PodGroup";
  EXPECT_EQ(c->reason, "Scheduled");
  EXPECT_NE(c->message.find(fmt::format("Slurm job {} ", job)), std::string::npos) << c->message;
  EXPECT_FALSE(c->last_transition_time.empty());
  // observedGeneration is the PodGroup's metadata.generation. (The 1.36 apiserver sets none on
  // PodGroups, their registry strategy does not, so both are 0 here: the field is left out.)
  EXPECT_EQ(observed, generation);
}

// A PodGroup gang that cannot run now (every Slurm node drained) waits with its job PENDING, and
// the PodGroup says so with Slurm's reason; once the nodes are back it runs and says Scheduled.
// A pod naming a PodGroup that does not exist waits with an event that says so.
TEST_F(CurrentApiE2e, WorkloadApiPodGroupThatCannotRunShowsSlurmsReason) {
  if (env_.Get("KUBE_VERSION").starts_with("1.34.")) {
    GTEST_SKIP() << "Kubernetes 1.34 has no scheduling.k8s.io/v1alpha2 PodGroup";
  }
  StartScheduler();
  CreatePod("lost", R"({"limits":{"cpu":"1"}})", "{}",
            R"(,"schedulingGroup":{"podGroupName":"nowhere"})");
  const std::string lost = WaitForEvent("lost");
  EXPECT_NE(lost.find("PodGroup nowhere (scheduling.k8s.io/v1alpha2)"), std::string::npos) << lost;
  EXPECT_NE(lost.find("never scheduled alone"), std::string::npos) << lost;

  std::unique_ptr<Restore> drained = DrainAllNodes();
  CreateWorkloadPodGroup("big", 2);
  for (const char* name : {"b0", "b1"}) {
    CreatePod(name, R"({"limits":{"cpu":"1"}})", "{}",
              R"(,"schedulingGroup":{"podGroupName":"big"})");
  }
  std::optional<kube::Pod> b0 = WaitForPod("b0", HasJob);
  ASSERT_TRUE(b0) << "no Slurm job for the gang";
  const std::int64_t job = JobId(*b0);
  std::int64_t observed = 0;
  std::int64_t generation = 0;
  std::optional<kube::Condition> c =
      WaitForPodGroupScheduled("big", "False", 90s, &observed, &generation);
  ASSERT_TRUE(c) << "no PodGroupScheduled=False on the PodGroup";
  EXPECT_EQ(c->reason, "Unschedulable");
  EXPECT_EQ(observed, generation);
  EXPECT_NE(c->message.find(fmt::format("Slurm job {} is PENDING (", job)), std::string::npos)
      << c->message;
  for (const char* name : {"b0", "b1"}) {
    auto p = RunSync(io_, kube::GetPod(*kube_, ns_, name));
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_TRUE(p->spec.node_name.empty()) << name;
  }
  EXPECT_EQ(JobsByUid()[b0->metadata.uid].size(), 1u);
  drained.reset();
  for (const char* name : {"b0", "b1"}) {
    std::optional<kube::Pod> p = WaitForPod(name, IsBound, 90s);
    ASSERT_TRUE(p) << name << " not bound after the nodes came back";
    EXPECT_EQ(JobId(*p), job);
  }
  c = WaitForPodGroupScheduled("big", "True");
  ASSERT_TRUE(c) << "no PodGroupScheduled=True after the job ran";
}

// A PodGroup gang of 5 (minCount 5) on a cluster of 4 Slurm nodes cannot run: no pod is bound,
// and the PodGroup says why with Slurm's word (here Slurm's refusal of the submit).
TEST_F(CurrentApiE2e, WorkloadApiPodGroupLargerThanTheClusterSaysWhyOnThePodGroup) {
  if (env_.Get("KUBE_VERSION").starts_with("1.34.")) {
    GTEST_SKIP() << "Kubernetes 1.34 has no scheduling.k8s.io/v1alpha2 PodGroup";
  }
  StartScheduler();
  CreateWorkloadPodGroup("five", 5);
  for (int i = 0; i < 5; ++i) {
    CreatePod(fmt::format("f{}", i), R"({"limits":{"cpu":"1"}})", "{}",
              R"(,"schedulingGroup":{"podGroupName":"five"})");
  }
  std::optional<kube::Condition> c = WaitForPodGroupScheduled("five", "False", 90s);
  ASSERT_TRUE(c) << "no PodGroupScheduled=False on the PodGroup";
  EXPECT_EQ(c->reason, "Unschedulable");
  // Slurm refuses a 5-node job on a 4-node partition at submit (it never pends).
  EXPECT_NE(c->message.find("Slurm refused the job"), std::string::npos) << c->message;
  EXPECT_NE(c->message.find("Node count specification invalid"), std::string::npos) << c->message;
  for (const kube::Pod& p : Pods()) {
    EXPECT_TRUE(p.spec.node_name.empty()) << p.metadata.name << " bound";
  }
}

}  // namespace
}  // namespace sb::scheduler
