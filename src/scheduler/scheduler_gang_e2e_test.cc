// SPDX-License-Identifier: Apache-2.0
//
// Gangs end to end (review items 3 and 7): the `slurm-bridge scheduler` binary against the test
// environment's real slurmctld/slurmrestd, kube-apiserver and kube-controller-manager (whose Job
// controller makes the pods). Nothing runs the pods: the test plays the kubelet by patching a
// pod's phase.
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "testing/bridge_e2e.h"
#include "testing/slurm_proxy.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;

class SchedulerGangE2e : public sb::testing::BridgeE2e {
 protected:
  void CreateGangJob(const std::string& name, int parallelism, int completions) {
    std::string manifest = fmt::format(
        R"({{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{{"slurmjob.slinky.slurm.net/gang":"true"}}}},
        "spec":{{"parallelism":{},"completions":{},"backoffLimit":6,"template":{{"spec":{{
        "schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "containers":[{{"name":"c","image":"busybox","resources":{{"limits":{{"cpu":"1"}}}}}}]}}}}}}}})",
        name, ns_, parallelism, completions);
    auto created = RunSync(io_, kube_->Create(kube::JobsRef(ns_), manifest));
    ASSERT_TRUE(created) << created.error().message;
  }

  void PatchPhase(const std::string& pod, const std::string& phase) {
    auto r = RunSync(io_, kube::PatchPodStatus(*kube_, ns_, pod, kube::PatchType::kJsonMerge,
                                               R"({"status":{"phase":")" + phase + "\"}}"));
    ASSERT_TRUE(r) << r.error().message;
  }

  // The pods of this namespace not being deleted.
  std::vector<kube::Pod> LivePods() {
    std::vector<kube::Pod> out;
    for (kube::Pod& p : Pods()) {
      if (p.metadata.deletion_timestamp.empty()) out.push_back(std::move(p));
    }
    return out;
  }

  // An external job of one CPU tagged `tag`, submitted straight to Slurm (as a lost submit
  // reply or an old leader would have left it).
  std::int64_t SubmitTagged(const bridge::JobTag& tag) {
    return SubmitExternal("dup-test", bridge::EncodeJobTag(tag));
  }

  std::string State(std::int64_t job) {
    auto j = RunSync(io_, slurm_->GetJob(job));
    return j ? std::string(j->BaseState()) : "?" + j.error().message;
  }

  bridge::JobTag TagFor(const kube::Pod& pod) {
    return bridge::JobTag{.pods = {ns_ + "/" + pod.metadata.name},
                          .uids = {pod.metadata.uid},
                          .group = "Pod/" + ns_ + "/" + pod.metadata.name,
                          .cluster = "kubernetes",
                          .scheduler = "slurm-bridge-scheduler"};
  }

  std::optional<bridge::JobTag> Tag(std::int64_t job) {
    auto j = RunSync(io_, slurm_->GetJob(job));
    if (!j) return std::nullopt;
    return bridge::ParseJobTag(j->admin_comment);
  }
};

// Item 3: a member deleted after its gang was bound is re-created by the Job controller and
// binds to the node it left, in the same Slurm job, once the old pod has terminated (review N-8:
// never beside it while it terminates).
TEST_F(SchedulerGangE2e, ReplacementOfADeletedMemberBindsToTheFreeNodeOfTheSameJob) {
  StartScheduler();
  CreateGangJob("pair", 2, 2);
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return pods.size() == 2 && CountBound(pods) == 2;
      },
      90s))
      << "bound: " << CountBound(pods) << " of " << pods.size();
  const std::int64_t job = JobId(pods[0]);
  ASSERT_GT(job, 0);
  ASSERT_EQ(JobId(pods[1]), job);
  const kube::Pod gone = pods[1];
  // Deleted (the finalizer keeps it Terminating: there is no kubelet); the Job makes another.
  auto del = RunSync(io_, kube_->Delete(kube::PodsRef(ns_).WithName(gone.metadata.name), {}));
  ASSERT_TRUE(del) << del.error().message;
  // The replacement comes and waits while the old pod terminates (the scheduler looks every
  // 2 s meanwhile: a few of those pass here).
  std::optional<kube::Pod> replacement;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const kube::Pod& p : LivePods()) {
          if (p.metadata.uid != pods[0].metadata.uid) replacement = p;
        }
        return replacement.has_value();
      },
      90s))
      << "no replacement";
  std::this_thread::sleep_for(6s);
  for (const kube::Pod& p : LivePods()) {
    EXPECT_TRUE(p.metadata.uid == pods[0].metadata.uid || p.spec.node_name.empty())
        << p.metadata.name << " was bound to " << p.spec.node_name
        << " while its predecessor terminates there";
  }
  // The kubelet's part: the old pod's containers stopped, its phase is terminal.
  PatchPhase(gone.metadata.name, "Failed");
  replacement.reset();
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const kube::Pod& p : LivePods()) {
          if (p.metadata.uid != pods[0].metadata.uid && !p.spec.node_name.empty()) {
            replacement = p;
          }
        }
        return replacement.has_value();
      },
      90s))
      << "the replacement was not bound";
  EXPECT_EQ(replacement->spec.node_name, gone.spec.node_name);
  EXPECT_EQ(JobId(*replacement), job);
  auto state = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(state);
  EXPECT_EQ(state->BaseState(), "RUNNING");
  // The job's tag lists the replacement, so that the controllers know it as the job's.
  std::optional<bridge::JobTag> tag = Tag(job);
  ASSERT_TRUE(tag);
  EXPECT_NE(std::ranges::find(tag->uids, replacement->metadata.uid), tag->uids.end());
  // No second job was submitted for the group.
  std::set<std::int64_t> all;
  for (const auto& [uid, ids] : JobsByUid()) all.insert(ids.begin(), ids.end());
  EXPECT_EQ(all, std::set<std::int64_t>{job});
}

// Item 3: completions 3, parallelism 2: the third pod (a smaller last wave) runs and the Job
// completes.
TEST_F(SchedulerGangE2e, JobWithALastSmallerWaveCompletes) {
  // Scheduler and controllers: the jobs of the finished waves are the controllers' to cancel.
  scheduler_ = StartBridge("all");
  CreateGangJob("waves", 2, 3);
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return pods.size() == 2 && CountBound(pods) == 2;
      },
      90s))
      << "bound: " << CountBound(pods) << " of " << pods.size();
  std::set<std::string> done;
  // The kubelet's part: every bound pod succeeds, until the Job has its three completions.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const kube::Pod& p : Pods()) {
          if (!p.spec.node_name.empty() && p.status.phase != "Succeeded" &&
              done.insert(p.metadata.name).second) {
            PatchPhase(p.metadata.name, "Succeeded");
            break;  // one at a time: the Job controller makes the third pod meanwhile
          }
        }
        auto j = RunSync(io_, kube::GetAs<kube::Job>(*kube_, kube::JobsRef(ns_).WithName("waves")));
        return j && j->succeeded >= 3;
      },
      120s))
      << done.size() << " pod(s) succeeded";
  std::vector<kube::Pod> all = Pods();
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(CountBound(all), 3u);
}

// Item 7: max-nodes "2" on a single pod on an idle cluster: Slurm would give two nodes for one
// pod. The job asks for one node, says so in an event, and the pod binds.
TEST_F(SchedulerGangE2e, SinglePodWithMaxNodesTwoBindsOnOneNode) {
  StartScheduler();
  CreatePod(
      "ranged", R"({"limits":{"cpu":"1"}})",
      R"({"slurmjob.slinky.slurm.net/max-nodes":"2","slurmjob.slinky.slurm.net/min-nodes":"1"})");
  std::optional<kube::Pod> bound = WaitForPod("ranged", IsBound);
  ASSERT_TRUE(bound) << "ranged not bound";
  const std::string show = Slurm(fmt::format("scontrol show job -o {}", JobId(*bound)));
  EXPECT_NE(show.find("NumNodes=1 "), std::string::npos) << show;
  bool said = false;
  for (const kube::Event& e : Events("ranged")) {
    said = said || (e.reason == "SlurmNodeCountSet" &&
                    e.message.find("ask for 1-2 node(s)") != std::string::npos);
  }
  EXPECT_TRUE(said);
}

// Items 2 and 16: a second live job tagged for a group that has one (a submit whose reply was
// lost, an old leader's late submit) is cancelled by the next job list; the group keeps its own.
TEST_F(SchedulerGangE2e, SecondJobTaggedForATrackedGroupIsCancelled) {
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=drain reason=e2e-hold");
  StartScheduler();
  CreatePod("dup", R"({"limits":{"cpu":"1"}})");
  std::optional<kube::Pod> pod = WaitForPod("dup", HasJob, 30s);
  ASSERT_TRUE(pod);
  const std::int64_t own = JobId(*pod);
  const std::int64_t second = SubmitTagged(TagFor(*pod));
  ASSERT_GT(second, 0);
  EXPECT_TRUE(WaitFor([&] { return State(second) == "CANCELLED"; }, 30s)) << State(second);
  EXPECT_EQ(State(own), "PENDING");
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=resume");
  std::optional<kube::Pod> bound = WaitForPod("dup", IsBound);
  ASSERT_TRUE(bound);
  EXPECT_EQ(JobId(*bound), own);
}

// Items 2 and 16 at start-up: two live jobs tagged for one waiting pod. One is adopted, the other
// cancelled (not "first wins" with the other left to run for ever).
TEST_F(SchedulerGangE2e, StartupKeepsOneOfTwoJobsTaggedForAPod) {
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=drain reason=e2e-hold");
  CreatePod("twice", R"({"limits":{"cpu":"1"}})");
  std::optional<kube::Pod> pod = WaitForPod("twice", [](const kube::Pod&) { return true; });
  ASSERT_TRUE(pod);
  const std::int64_t first = SubmitTagged(TagFor(*pod));
  const std::int64_t second = SubmitTagged(TagFor(*pod));
  ASSERT_GT(first, 0);
  ASSERT_GT(second, 0);
  StartScheduler();
  std::optional<kube::Pod> labelled = WaitForPod("twice", HasJob, 30s);
  ASSERT_TRUE(labelled);
  const std::int64_t kept = JobId(*labelled);
  ASSERT_TRUE(kept == first || kept == second) << kept;
  const std::int64_t other = kept == first ? second : first;
  EXPECT_TRUE(WaitFor([&] { return State(other) == "CANCELLED"; }, 30s)) << State(other);
  EXPECT_EQ(State(kept), "PENDING");
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=resume");
  std::optional<kube::Pod> bound = WaitForPod("twice", IsBound);
  ASSERT_TRUE(bound);
  EXPECT_EQ(JobId(*bound), kept);
  EXPECT_EQ(State(other), "CANCELLED");
}

// Item 6: a pod of a coscheduling PodGroup that cannot be read (here NotFound: the PodGroup CRD
// is installed, but no PodGroup pg exists) is reported and waits; it never becomes a job of its
// own.
TEST_F(SchedulerGangE2e, PodOfAnUnreadablePodGroupIsNeverScheduledAlone) {
  StartScheduler();
  std::string manifest = fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"member","namespace":"{}",
      "labels":{{"scheduling.x-k8s.io/pod-group":"pg"}}}},"spec":{{
      "schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "containers":[{{"name":"c","image":"busybox","resources":{{"limits":{{"cpu":"1"}}}}}}]}}}})",
      ns_);
  auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
  ASSERT_TRUE(r) << r.error().message;
  const std::string message = WaitForEvent("member");
  ASSERT_FALSE(message.empty()) << "no FailedScheduling event";
  EXPECT_EQ(message.rfind("PodGroup pg cannot be read (", 0), 0u) << message;
  EXPECT_NE(message.find("never scheduled alone"), std::string::npos) << message;
  // A plain pod created afterwards is scheduled: the scheduler has moved on, and still the
  // member has no job.
  CreatePod("plain", R"({"limits":{"cpu":"1"}})");
  ASSERT_TRUE(WaitForPod("plain", IsBound));
  std::optional<kube::Pod> pod = WaitForPod("member", [](const kube::Pod&) { return true; });
  ASSERT_TRUE(pod);
  EXPECT_FALSE(HasJob(*pod));
  EXPECT_TRUE(pod->spec.node_name.empty());
  EXPECT_EQ(JobsByUid().count(pod->metadata.uid), 0u);
}

// Item 2: the reply to a submit is lost after Slurm made the job. The scheduler finds that job
// (tagged for the group) before submitting again: one job, and the pod runs in it.
TEST_F(SchedulerGangE2e, LostSubmitReplyLeavesOneJob) {
  sb::testing::LossyProxy proxy(env_.Get("SLURM_REST_URL"),
                                sb::testing::LossyProxy::Fault::kLoseSubmitReply);
  UseSlurmAt(proxy.url());
  StartScheduler();
  CreatePod("lost", R"({"limits":{"cpu":"1"}})");
  std::optional<kube::Pod> bound = WaitForPod("lost", IsBound);
  ASSERT_TRUE(bound) << "lost not bound";
  EXPECT_EQ(proxy.lost(), 1);
  std::map<std::string, std::vector<std::int64_t>> jobs = JobsByUid();
  ASSERT_EQ(jobs[bound->metadata.uid].size(), 1u) << "a second job was submitted";
  EXPECT_EQ(jobs[bound->metadata.uid][0], JobId(*bound));
}

// Item 14: the scheduler's cancel of a job whose pod is gone fails once (slurmrestd briefly
// down); it is tried again until Slurm has cancelled the job.
TEST_F(SchedulerGangE2e, FailedCancelIsRetriedUntilSlurmConfirms) {
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=drain reason=e2e-hold");
  sb::testing::LossyProxy proxy(env_.Get("SLURM_REST_URL"),
                                sb::testing::LossyProxy::Fault::kFailCancel);
  UseSlurmAt(proxy.url());
  StartScheduler();
  CreatePod("short", R"({"limits":{"cpu":"1"}})");
  std::optional<kube::Pod> pod = WaitForPod("short", HasJob, 30s);
  ASSERT_TRUE(pod);
  const std::int64_t job = JobId(*pod);
  ASSERT_EQ(State(job), "PENDING");
  auto del = RunSync(io_, kube_->Delete(kube::PodsRef(ns_).WithName("short"), {}));
  ASSERT_TRUE(del) << del.error().message;
  EXPECT_TRUE(WaitFor([&] { return State(job) == "CANCELLED"; }, 30s)) << State(job);
  EXPECT_EQ(proxy.lost(), 3);
}

// Item 5: until a Slurm node list succeeded, the Kubernetes-side exclusions cannot be computed:
// nothing is submitted, the pod says why, and it is scheduled once the list works.
TEST_F(SchedulerGangE2e, NothingIsSubmittedBeforeSlurmsNodesAreKnown) {
  sb::testing::LossyProxy proxy(env_.Get("SLURM_REST_URL"),
                                sb::testing::LossyProxy::Fault::kFailNodeListUntilReleased);
  UseSlurmAt(proxy.url());
  StartScheduler();
  CreatePod("early", R"({"limits":{"cpu":"1"}})");
  const std::string message = WaitForEvent("early");
  ASSERT_FALSE(message.empty()) << "no FailedScheduling event";
  EXPECT_EQ(message.rfind("waiting for Slurm's node list", 0), 0u) << message;
  EXPECT_TRUE(JobsByUid().empty());
  proxy.Release();
  std::optional<kube::Pod> bound = WaitForPod("early", IsBound);
  ASSERT_TRUE(bound) << "early not bound";
  EXPECT_GT(proxy.lost(), 0);
}

// Item 5: a job allocated a Slurm node that no Kubernetes node maps to is cancelled after a
// bounded time (30 s), with an event, and the pod gets a new job.
TEST_F(SchedulerGangE2e, JobOnANodeKubernetesLacksIsCancelledAndReplaced) {
  sb::testing::LossyProxy proxy(env_.Get("SLURM_REST_URL"),
                                sb::testing::LossyProxy::Fault::kUnmappedFirstJob);
  UseSlurmAt(proxy.url());
  StartScheduler();
  CreatePod("stray", R"({"limits":{"cpu":"1"}})");
  std::optional<kube::Pod> first = WaitForPod("stray", HasJob, 30s);
  ASSERT_TRUE(first);
  const std::int64_t stray_job = JobId(*first);
  std::optional<kube::Pod> bound = WaitForPod("stray", IsBound, 90s);
  ASSERT_TRUE(bound) << "stray not bound";
  EXPECT_NE(JobId(*bound), stray_job);
  EXPECT_EQ(State(stray_job), "CANCELLED");
  bool said = false;
  for (const kube::Event& e : Events("stray")) {
    said = said || (e.reason == "SlurmNodeNotInKubernetes" &&
                    e.message.find(fmt::format("Slurm job {} was allocated node(s) x",
                                               stray_job)) != std::string::npos);
  }
  EXPECT_TRUE(said);
  EXPECT_GT(proxy.lost(), 0);
}

}  // namespace
}  // namespace sb::scheduler
