// SPDX-License-Identifier: Apache-2.0
//
// The scheduler end to end: the `slurm-bridge scheduler` binary as a child process against the
// test environment's real slurmctld/slurmrestd and kube-apiserver. Kubernetes Node objects
// stand in for the kubelets of n1..n4 (testenv/kube/register-nodes.sh); nothing runs the pods.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "testing/bridge_e2e.h"
#include "testing/paths.h"
#include "testing/slurm_proxy.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;

using SchedulerE2e = sb::testing::BridgeE2e;

TEST_F(SchedulerE2e, SeedYoloPodIsBoundToTheNodeOfItsSlurmJob) {
  StartScheduler();
  // The seed's manifest, unchanged, applied with kubectl as a user would.
  Shell(fmt::format(
      "KUBECONFIG={} kubectl apply -n {} -f {}/examples/yolo-benchmark-slurm-bridge.yaml",
      env_.Get("KUBECONFIG"), ns_, sb::testing::SourceDir()));
  std::optional<kube::Pod> bound = WaitForPod("yolo-benchmark-slurm-bridge", IsBound);
  ASSERT_TRUE(bound) << "yolo-benchmark-slurm-bridge not bound";
  kube::Pod pod = *bound;
  const std::int64_t job_id = JobId(pod);
  ASSERT_GT(job_id, 0);
  auto job = RunSync(io_, slurm_->GetJob(job_id));
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->BaseState(), "RUNNING");
  EXPECT_EQ(job->nodes, pod.spec.node_name);  // one node: the hostlist is the name
  EXPECT_TRUE(job->HasState("RUNNING"));
  EXPECT_NE(std::ranges::find(job->flags, "EXTERNAL_JOB"), job->flags.end());
  EXPECT_EQ(job->partition, env_.Get("SLURM_PARTITION"));
  EXPECT_EQ(pod.metadata.annotations[std::string(bridge::kNodeAnnotation)], pod.spec.node_name);
  EXPECT_NE(std::ranges::find(pod.metadata.finalizers, std::string(bridge::kFinalizer)),
            pod.metadata.finalizers.end());
  // The GPU Slurm gave the job: one device, with its index on that node.
  auto res = RunSync(io_, slurm_->JobResources(job_id));
  ASSERT_TRUE(res) << res.error().message;
  ASSERT_EQ(res->size(), 1u);
  ASSERT_EQ((*res)[0].gres.size(), 1u);
  EXPECT_EQ((*res)[0].gres[0].name, "gpu");
  // The job asked for one GPU per node; being exclusive (upstream's default) it holds the node.
  EXPECT_EQ(job->tres_per_node, "gres/gpu=1");
  EXPECT_GE((*res)[0].gres[0].count, 1);
  EXPECT_FALSE((*res)[0].gres[0].index.empty());
  // The tag names the pod and its UID.
  std::optional<bridge::JobTag> tag = bridge::ParseJobTag(job->admin_comment);
  ASSERT_TRUE(tag);
  EXPECT_EQ(tag->pods, std::vector<std::string>{ns_ + "/yolo-benchmark-slurm-bridge"});
  EXPECT_EQ(tag->uids, std::vector<std::string>{pod.metadata.uid});
  // What kubectl describe shows.
  bool scheduled = false;
  for (const kube::Event& e : Events("yolo-benchmark-slurm-bridge")) {
    if (e.reason == "Scheduled") {
      scheduled = true;
      EXPECT_EQ(e.message, fmt::format("Successfully assigned {}/yolo-benchmark-slurm-bridge to {} "
                                       "(Slurm job {})",
                                       ns_, pod.spec.node_name, job_id));
      EXPECT_EQ(e.source_component, "slurm-bridge-scheduler");
    }
  }
  EXPECT_TRUE(scheduled);
  // Exactly one Slurm job for the pod.
  EXPECT_EQ(JobsByUid()[pod.metadata.uid].size(), 1u);
}

TEST_F(SchedulerE2e, GangOfFourLandsOnFourDistinctNodesAsOneJob) {
  StartScheduler();
  std::string manifest = fmt::format(
      R"({{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"train","namespace":"{}",
      "annotations":{{"slurmjob.slinky.slurm.net/gang":"true",
                      "slurmjob.slinky.slurm.net/timelimit":"30"}}}},
      "spec":{{"parallelism":4,"completions":4,"template":{{"spec":{{
      "schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "containers":[{{"name":"c","image":"busybox","resources":{{"limits":{{"nvidia.com/gpu":"2"}}}}}}]}}}}}}}})",
      ns_);
  auto created = RunSync(io_, kube_->Create(kube::JobsRef(ns_), manifest));
  ASSERT_TRUE(created) << created.error().message;
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return pods.size() == 4 && CountBound(pods) == 4;
      },
      90s))
      << "bound: " << CountBound(pods) << " of " << pods.size();
  std::set<std::string> nodes;
  std::set<std::int64_t> ids;
  for (const kube::Pod& p : pods) {
    nodes.insert(p.spec.node_name);
    ids.insert(JobId(p));
  }
  EXPECT_EQ(nodes.size(), 4u) << "two pods on one node";
  ASSERT_EQ(ids.size(), 1u) << "the group was split over several Slurm jobs";
  auto job = RunSync(io_, slurm_->GetJob(*ids.begin()));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->node_count, 4);
  EXPECT_EQ(job->time_limit.Value(), 30);
  std::optional<bridge::JobTag> tag = bridge::ParseJobTag(job->admin_comment);
  ASSERT_TRUE(tag);
  EXPECT_EQ(tag->group, "Job/" + ns_ + "/train");
  EXPECT_EQ(tag->pods.size(), 4u);
  // Only one job was ever submitted for the group.
  std::set<std::int64_t> all;
  for (const auto& [uid, js] : JobsByUid()) all.insert(js.begin(), js.end());
  EXPECT_EQ(all.size(), 1u);
}

TEST_F(SchedulerE2e, PodsBeyondCapacityWaitWithSlurmsReasonThenBind) {
  StartScheduler();
  // Four nodes, whole-node (exclusive) jobs: six pods cannot all run.
  for (int i = 0; i < 6; ++i) {
    CreatePod(fmt::format("p{}", i), R"({"limits":{"nvidia.com/gpu":"1"}})");
  }
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return CountBound(pods) == 4;
      },
      60s));
  std::vector<const kube::Pod*> waiting;
  std::vector<const kube::Pod*> bound;
  for (const kube::Pod& p : pods) (p.spec.node_name.empty() ? waiting : bound).push_back(&p);
  ASSERT_EQ(waiting.size(), 2u);
  // The waiting pods say why, in Slurm's words, once the reason is known.
  for (const kube::Pod* p : waiting) {
    std::string message;
    EXPECT_TRUE(WaitFor(
        [&] {
          for (const kube::Event& e : Events(p->metadata.name)) {
            if (e.reason == "FailedScheduling" && e.type == "Warning") message = e.message;
          }
          return message.find(": Resources") != std::string::npos ||
                 message.find(": Priority") != std::string::npos;
        },
        30s))
        << message;
    EXPECT_EQ(message.rfind("waiting for Slurm job ", 0), 0u) << message;
    EXPECT_NE(message.find("in partition " + env_.Get("SLURM_PARTITION")), std::string::npos);
    auto fresh = RunSync(io_, kube::GetPod(*kube_, ns_, p->metadata.name));
    ASSERT_TRUE(fresh);
    bool condition = false;
    for (const kube::Condition& c : fresh->status.conditions) {
      if (c.type == "PodScheduled" && c.status == "False" && c.reason == "Unschedulable") {
        condition = true;
        EXPECT_EQ(c.message, message);
      }
    }
    EXPECT_TRUE(condition);
  }
  // Capacity frees when two running pods end and their jobs with them (the test plays their
  // kubelet and the pod controller): the waiting pods take their place.
  for (int i = 0; i < 2; ++i) {
    FinishPod(bound[static_cast<std::size_t>(i)]->metadata.name);
    auto r = RunSync(io_, slurm_->CancelJob(JobId(*bound[static_cast<std::size_t>(i)]), {}));
    ASSERT_TRUE(r) << r.error().message;
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return CountBound(pods) == 6;
      },
      60s));
  // No pod got more than one job, and no event storm: one event per distinct message.
  for (const auto& [uid, jobs] : JobsByUid()) EXPECT_EQ(jobs.size(), 1u) << uid;
  for (const kube::Pod& p : pods) {
    for (const kube::Event& e : Events(p.metadata.name)) {
      EXPECT_LE(e.count, 1) << p.metadata.name << ": " << e.message;
    }
  }
}

// Time-only sharing (issue #44, as upstream's fix of its #53), in the default mode: a
// non-exclusive pod's job asks for MCS exclusivity under the bridge's label (the test Slurm has
// MCSPlugin=mcs/label, MCSParameters=ondemand,ondemandselect), so another such pod shares its
// node while a native job that asks for that node waits until the pods' jobs end.
TEST_F(SchedulerE2e, NativeJobWaitsForTheNodeOfNonExclusivePodsWhichShareIt) {
  StartScheduler();
  const std::string part = env_.Get("SLURM_PARTITION");
  const std::string on_n1 = R"(,"nodeSelector":{"kubernetes.io/hostname":"n1"})";
  const std::string small =
      R"({"requests":{"cpu":"1","memory":"64Mi"},"limits":{"cpu":"1","memory":"64Mi"}})";
  const std::string shared = R"({"slurmjob.slinky.slurm.net/exclusive":"false"})";
  CreatePod("s1", small, shared, on_n1);
  CreatePod("s2", small, shared, on_n1);
  std::optional<kube::Pod> s1 = WaitForPod("s1", IsBound);
  std::optional<kube::Pod> s2 = WaitForPod("s2", IsBound);
  ASSERT_TRUE(s1 && s2) << "the non-exclusive pods are not bound";
  EXPECT_EQ(s1->spec.node_name, "n1");
  EXPECT_EQ(s2->spec.node_name, "n1") << "two non-exclusive pods do not share n1";
  const std::string show = Slurm(fmt::format("scontrol show job {}", JobId(*s1)));
  EXPECT_NE(show.find("MCS_label=kubernetes"), std::string::npos) << show;
  EXPECT_NE(show.find("Exclusive=MCS"), std::string::npos) << show;
  const std::string native = Slurm("sbatch --parsable -p " + part +
                                   " -w n1 -c 1 --mem=100 -o /dev/null --wrap 'sleep 300'");
  const std::int64_t native_id = std::atoll(native.c_str());
  ASSERT_GT(native_id, 0) << native;
  Restore cancel_native([&] { Slurm(fmt::format("scancel {}", native_id)); });
  // Slurm looked at it and found no room: n1 has 6 free CPUs, but its jobs are the bridge's.
  std::string reason;
  EXPECT_TRUE(WaitFor(
      [&] {
        reason = Slurm(fmt::format("squeue -h -j {} -o %T:%r", native_id));
        return reason.starts_with("PENDING:Resources");
      },
      30s))
      << reason;
  // No controllers here: the test ends the pods' jobs (as they would once the pods are done).
  Slurm(fmt::format("scancel {} {}", JobId(*s1), JobId(*s2)));
  FinishPod("s1");
  FinishPod("s2");
  EXPECT_TRUE(WaitFor([&] { return JobState(native_id) == "RUNNING"; }, 30s))
      << "the native job did not start once n1's pods were gone: " << JobState(native_id);
}

// nodeSharing coResident: a pod's job is not exclusive, and the scheduler warns when the
// partition's OverSubscribe (as the real slurmrestd reports it) lets jobs share cores, and says
// so when it is safe again. A pod that is not Guaranteed (no limits: it could take the whole
// node while Slurm gives the rest to other jobs) gets no job (review R-2).
TEST_F(SchedulerE2e, CoResidentJobsShareAndUnsafeOverSubscribeIsReported) {
  AddConfig("nodeSharing: coResident\n");
  const std::string part = env_.Get("SLURM_PARTITION");
  Restore restore([&] { Slurm("scontrol update partitionname=" + part + " oversubscribe=no"); });
  StartScheduler();
  const std::string on_n1 = R"(,"nodeSelector":{"kubernetes.io/hostname":"n1"})";
  const std::string small =
      R"({"requests":{"cpu":"1","memory":"64Mi"},"limits":{"cpu":"1","memory":"64Mi"}})";
  CreatePod("unlimited", R"({"requests":{"cpu":"1","memory":"64Mi"}})", "{}", on_n1);
  CreatePod("a", small, "{}", on_n1);
  CreatePod("a2", small, "{}", on_n1);
  auto bound = [](const kube::Pod& p) { return !p.spec.node_name.empty(); };
  std::optional<kube::Pod> a = WaitForPod("a", bound);
  std::optional<kube::Pod> a2 = WaitForPod("a2", bound);
  ASSERT_TRUE(a && a2);
  EXPECT_EQ(a->spec.node_name, "n1");
  EXPECT_EQ(a2->spec.node_name, "n1") << "two coResident jobs share n1";
  const std::string refused = WaitForEvent("unlimited");
  EXPECT_NE(refused.find("must be Guaranteed for cpu and memory (limits equal to requests in "
                         "every container): container c has no cpu limit"),
            std::string::npos)
      << refused;
  const kube::Pod unlimited =
      RunSync(io_, kube::GetPod(*kube_, ns_, "unlimited")).value_or(kube::Pod{});
  EXPECT_EQ(unlimited.metadata.name, "unlimited");
  EXPECT_FALSE(HasJob(unlimited));
  EXPECT_FALSE(IsBound(unlimited));
  // A native job shares n1 with them (on purpose in this mode: no MCS exclusivity).
  const std::string native = Slurm("sbatch --parsable -p " + part +
                                   " -w n1 -c 1 --mem=100 -o /dev/null --wrap 'sleep 300'");
  const std::int64_t native_id = std::atoll(native.c_str());
  ASSERT_GT(native_id, 0) << native;
  Restore cancel_native([&] { Slurm(fmt::format("scancel {}", native_id)); });
  EXPECT_TRUE(WaitFor([&] { return JobState(native_id) == "RUNNING"; }, 30s))
      << "a native job does not share n1 with coResident pods: " << JobState(native_id);
  Slurm(fmt::format("scancel {}", native_id));
  // The exclusive annotation still takes a whole node: n1 is not free, so its job waits.
  CreatePod("b", small, R"({"slurmjob.slinky.slurm.net/exclusive":"true"})", on_n1);
  std::int64_t b_job = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "b"));
        b_job = p ? JobId(*p) : 0;
        return b_job > 0;
      },
      30s));
  EXPECT_TRUE(WaitFor([&] { return JobState(b_job) == "PENDING"; }, 10s));
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(JobState(b_job), "PENDING") << "an exclusive job started beside two others";
  EXPECT_EQ(CountInLog("scheduler", "nodeSharing coResident is unsafe"), 0);
  Slurm("scontrol update partitionname=" + part + " oversubscribe=yes:4");
  const std::string want =
      "nodeSharing coResident is unsafe: partition " + part + " has OverSubscribe=YES:4";
  EXPECT_TRUE(WaitFor([&] { return CountInLog("scheduler", want) == 1; }, 30s));
  Slurm("scontrol update partitionname=" + part + " oversubscribe=force:2");
  EXPECT_TRUE(
      WaitFor([&] { return CountInLog("scheduler", "has OverSubscribe=FORCE:2") == 1; }, 30s));
  Slurm("scontrol update partitionname=" + part + " oversubscribe=no");
  EXPECT_TRUE(
      WaitFor([&] { return CountInLog("scheduler", "OverSubscribe is safe again") == 1; }, 30s));
  EXPECT_EQ(CountInLog("scheduler", want), 1) << "said once per change";
  // No controllers here: the test ends the jobs (as they would once the pods are done).
  Slurm(fmt::format("scancel {} {}", JobId(*a), JobId(*a2)));
  FinishPod("a");
  FinishPod("a2");
  EXPECT_TRUE(WaitForPod("b", bound).has_value()) << "b runs once n1 is free";
  Slurm(fmt::format("scancel {}", b_job));
  FinishPod("b");
}

TEST_F(SchedulerE2e, EveryAnnotationReachesTheSlurmJob) {
  Slurm("scontrol update nodename=n3 availablefeatures=fast activefeatures=fast");
  Slurm("scontrol create reservation reservationname=" + ns_ +
        " users=root,slurm,k8s nodes=n3 starttime=now duration=60 flags=ignore_jobs");
  cleanup_.push_back("scontrol delete reservation=" + ns_);
  cleanup_.push_back("scontrol update nodename=n3 availablefeatures= activefeatures=");
  // The namespace's identity policy allows exactly what the pod asks for.
  AddConfig(
      fmt::format("identityPolicy:\n- namespaces: [{}]\n  user: \"*\"\n  group: \"*\"\n"
                  "  accounts: [physics]\n  partitions: [batch]\n  reservations: [{}]\n"
                  "  wckeys: [proj1]\n  maxPriority: 5000\n",
                  ns_, ns_));
  StartScheduler();
  CreatePod("annotated", R"({"limits":{"cpu":"1"}})", R"({
      "slurmjob.slinky.slurm.net/job-name":"renamed",
      "slurmjob.slinky.slurm.net/timelimit":"42",
      "slurmjob.slinky.slurm.net/priority":"4242",
      "slurmjob.slinky.slurm.net/cpu-per-task":"3",
      "slurmjob.slinky.slurm.net/mem-per-node":"1500Mi",
      "slurmjob.slinky.slurm.net/partition":"batch",
      "slurmjob.slinky.slurm.net/gres":"gres/gpu:fake=2",
      "slurmjob.slinky.slurm.net/exclusive":"false",
      "slurmjob.slinky.slurm.net/min-nodes":"1",
      "slurmjob.slinky.slurm.net/max-nodes":"1",
      "slurmjob.slinky.slurm.net/constraints":"fast",
      "slurmjob.slinky.slurm.net/reservation":")" + ns_ + R"(",
      "slurmjob.slinky.slurm.net/account":"physics",
      "slurmjob.slinky.slurm.net/licenses":"matlab:2",
      "slurmjob.slinky.slurm.net/wckey":"proj1",
      "slurmjob.slinky.slurm.net/comment":"from kubernetes",
      "slurmjob.slinky.slurm.net/user-id":"k8s",
      "slurmjob.slinky.slurm.net/group-id":"k8s"})");
  std::optional<kube::Pod> bound = WaitForPod("annotated", IsBound);
  ASSERT_TRUE(bound) << "annotated not bound";
  kube::Pod pod = *bound;
  EXPECT_EQ(pod.spec.node_name, "n3");  // the reservation's and the feature's node
  // As Slurm reports the job. Not checked: wckey and qos, which this Slurm (no accounting
  // database, TrackWCKey off) does not keep or refuses; they are passed like the rest.
  const std::string show = Slurm(fmt::format("scontrol show job -o {}", JobId(pod)));
  for (const char* want :
       {"JobName=renamed ", "TimeLimit=00:42:00", "Priority=4242 ", "MinCPUsNode=3",
        "MinMemoryNode=1500M", "Partition=batch ", "TresPerNode=gres/gpu:fake=2",
        "NumCPUs=3 ",  // not exclusive: only the CPUs asked for, not the whole node
        "NumNodes=1 ", "Features=fast ", "Account=physics ", "Licenses=matlab:2",
        "Comment=from kubernetes", "UserId=k8s(", "GroupId=k8s(", "MCS_label=kubernetes"}) {
    EXPECT_NE(show.find(want), std::string::npos) << want << "\n" << show;
  }
  EXPECT_NE(show.find("Reservation=" + ns_ + " "), std::string::npos) << show;
}

// N-4 at submit (the webhook may be off): a pod of a namespace whose rule fixes the Slurm user
// runs as that user; one asking for more than its rule allows gets no job and an event naming
// the annotation and the rule.
TEST_F(SchedulerE2e, IdentityPolicyIsEnforcedAtSubmit) {
  AddConfig(
      fmt::format("identityPolicy:\n- namespaces: [{}]\n  user: k8s\n  maxPriority: 10\n", ns_));
  StartScheduler();
  CreatePod("fixed", R"({"limits":{"cpu":"1"}})");
  CreatePod("greedy", R"({"limits":{"cpu":"1"}})",
            R"({"slurmjob.slinky.slurm.net/priority":"2000000000",
                "slurmjob.slinky.slurm.net/account":"physics"})");
  std::optional<kube::Pod> bound = WaitForPod("fixed", IsBound);
  ASSERT_TRUE(bound) << "fixed not bound";
  const std::string show = Slurm(fmt::format("scontrol show job -o {}", JobId(*bound)));
  EXPECT_NE(show.find("UserId=k8s("), std::string::npos) << show;
  const std::string message = WaitForEvent("greedy");
  EXPECT_FALSE(message.empty()) << "no FailedScheduling event";
  EXPECT_NE(message.find("annotation slurmjob.slinky.slurm.net/priority: \"2000000000\" is not "
                         "allowed in namespace " +
                         ns_ + " (identityPolicy rule 1"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("slurmjob.slinky.slurm.net/account: \"physics\""), std::string::npos)
      << message;
  // Nothing reached Slurm for it: the only job of the namespace's pods is fixed's.
  std::optional<kube::Pod> greedy = WaitForPod("greedy", [](const kube::Pod&) { return true; });
  ASSERT_TRUE(greedy);
  EXPECT_TRUE(greedy->spec.node_name.empty());
  EXPECT_FALSE(greedy->metadata.labels.contains(std::string(bridge::kJobIdLabel)));
}

// N-5 on the real apiserver (the PV binder of kube-controller-manager binds the claim): a pod
// whose claim is bound to a local PersistentVolume of n2 is placed on n2 only; a pod whose claim
// waits for its first consumer is not bound, and says why.
TEST_F(SchedulerE2e, PersistentVolumeNodeAffinityIsHonouredAndFirstConsumerClaimsRefused) {
  const kube::ResourceRef pvs{.version = "v1", .resource = "persistentvolumes"};
  const kube::ResourceRef pvcs{
      .version = "v1", .resource = "persistentvolumeclaims", .namespace_ = ns_};
  const kube::ResourceRef classes{
      .group = "storage.k8s.io", .version = "v1", .resource = "storageclasses"};
  const std::string pv = "local-" + ns_;
  const std::string wffc = "wffc-" + ns_;
  auto created = RunSync(io_, kube_->Create(pvs, fmt::format(R"({{"apiVersion":"v1",
      "kind":"PersistentVolume","metadata":{{"name":"{}"}},"spec":{{"capacity":{{"storage":"1Gi"}},
      "accessModes":["ReadWriteOnce"],"storageClassName":"","local":{{"path":"/tmp"}},
      "claimRef":{{"namespace":"{}","name":"data"}},
      "nodeAffinity":{{"required":{{"nodeSelectorTerms":[{{"matchExpressions":[{{
      "key":"kubernetes.io/hostname","operator":"In","values":["n2"]}}]}}]}}}}}}}})",
                                                             pv, ns_)));
  ASSERT_TRUE(created) << created.error().message;
  created = RunSync(io_, kube_->Create(classes, fmt::format(R"({{"apiVersion":"storage.k8s.io/v1",
      "kind":"StorageClass","metadata":{{"name":"{}"}},"provisioner":"example.com/none",
      "volumeBindingMode":"WaitForFirstConsumer"}})",
                                                            wffc)));
  ASSERT_TRUE(created) << created.error().message;
  auto cleanup = [&] {
    (void)RunSync(io_, kube_->Delete(kube::ResourceRef(pvs).WithName(pv), {}));
    (void)RunSync(io_, kube_->Delete(kube::ResourceRef(classes).WithName(wffc), {}));
  };
  for (const auto& [claim, cls] :
       std::vector<std::pair<std::string, std::string>>{{"data", ""}, {"scratch", wffc}}) {
    created = RunSync(
        io_, kube_->Create(pvcs, fmt::format(R"({{"apiVersion":"v1",
        "kind":"PersistentVolumeClaim","metadata":{{"name":"{}"}},"spec":{{
        "accessModes":["ReadWriteOnce"],"storageClassName":"{}",{}
        "resources":{{"requests":{{"storage":"1Gi"}}}}}}}})",
                                             claim, cls,
                                             cls.empty() ? fmt::format(R"("volumeName":"{}",)", pv)
                                                         : std::string())));
    ASSERT_TRUE(created) << created.error().message;
  }
  StartScheduler();
  CreatePod("local", R"({"limits":{"cpu":"1"}})", "{}",
            R"(,"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"data"}}])");
  CreatePod("first-consumer", R"({"limits":{"cpu":"1"}})", "{}",
            R"(,"volumes":[{"name":"s","persistentVolumeClaim":{"claimName":"scratch"}}])");
  std::optional<kube::Pod> bound = WaitForPod("local", IsBound, 60s);
  EXPECT_TRUE(bound) << "the pod with the bound local claim was not bound";
  if (bound) {
    EXPECT_EQ(bound->spec.node_name, "n2") << "the PV's node affinity";
    const std::string show = Slurm(fmt::format("scontrol show job -o {}", JobId(*bound)));
    EXPECT_NE(show.find("NodeList=n2 "), std::string::npos) << show;
  }
  const std::string message = WaitForEvent("first-consumer");
  EXPECT_FALSE(message.empty()) << "no FailedScheduling event";
  EXPECT_NE(message.find("persistentvolumeclaim \"scratch\" waits for its first consumer"),
            std::string::npos)
      << message;
  auto pod = RunSync(io_, kube::GetPod(*kube_, ns_, "first-consumer"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_FALSE(IsBound(*pod));
  EXPECT_EQ(JobId(*pod), 0) << "no Slurm job for a pod that could not start";
  cleanup();
}

TEST_F(SchedulerE2e, BadAnnotationIsReportedOnThePod) {
  StartScheduler();
  CreatePod("bad", R"({"limits":{"cpu":"1"}})",
            R"({"slurmjob.slinky.slurm.net/timelimit":"one hour"})");
  const std::string want =
      "annotation slurmjob.slinky.slurm.net/timelimit: \"one hour\" is not a time limit: minutes "
      "(90), a duration (90s, 2h, 1h30m) or a Slurm --time string (MM:SS, HH:MM:SS, D-HH, "
      "D-HH:MM, D-HH:MM:SS)";
  const std::string message = WaitForEvent("bad");
  EXPECT_FALSE(message.empty()) << "no FailedScheduling event";
  EXPECT_EQ(message, want);
  // An edit of the pod makes the scheduler read it again: it still refuses (a second report in
  // its log), and never submits.
  Shell(fmt::format("KUBECONFIG={} kubectl label pod bad -n {} --overwrite touched=1",
                    env_.Get("KUBECONFIG"), ns_));
  EXPECT_TRUE(WaitFor([&] { return CountInLog("scheduler", want) >= 2; }, 45s))
      << CountInLog("scheduler", want) << " reports";
  AssertAlive(*scheduler_, "the scheduler");
  auto pod = RunSync(io_, kube::GetPod(*kube_, ns_, "bad"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(JobId(*pod), 0);
  auto jobs = RunSync(io_, slurm_->ListJobs());
  ASSERT_TRUE(jobs) << jobs.error().message;
  for (const slurm::JobInfo& j : *jobs) {
    EXPECT_EQ(j.admin_comment.find(pod->metadata.uid), std::string::npos)
        << "Slurm job " << j.job_id << " names the pod: " << j.admin_comment;
  }
}

// Review N-2: a toleration written without `operator`, the common form in users' manifests (the
// API does not default it). The bridge adds its own toleration; the real apiserver refuses an
// update that changes an existing one, so the user's is sent back exactly as stored.
TEST_F(SchedulerE2e, TolerationWithoutOperatorIsKeptAndThePodBinds) {
  StartScheduler();
  CreatePod("tol", R"({"limits":{"cpu":"1"}})", "{}",
            R"(,"tolerations":[{"key":"dedicated","value":"gpu","effect":"NoSchedule"}])");
  std::optional<kube::Pod> bound = WaitForPod("tol", IsBound, 60s);
  ASSERT_TRUE(bound) << "the pod was not bound";
  EXPECT_GT(JobId(*bound), 0);
  ASSERT_GE(bound->spec.tolerations.size(), 2u);
  EXPECT_EQ(bound->spec.tolerations[0],
            (kube::Toleration{.key = "dedicated", .value = "gpu", .effect = "NoSchedule"}));
  EXPECT_TRUE(std::ranges::any_of(bound->spec.tolerations, [](const kube::Toleration& t) {
    return t.key == bridge::kManagedNodeTaint && t.value == "slurm-bridge-scheduler";
  }));
  for (const kube::Event& e : Events("tol")) {
    EXPECT_NE(e.reason, "SlurmJobLabelRefused") << e.message;
  }
}

// Issue #25: a host port that a pod already bound to a node holds (here other schedulers' pods,
// bound by nodeName as a DaemonSet's are) keeps a bridge pod that opens the same port off that
// node: Slurm is told to exclude it; another port excludes nothing.
TEST_F(SchedulerE2e, HostPortsHeldOnNodesKeepPodsOffThem) {
  const auto create = [&](const std::string& name, const std::string& scheduler,
                          const std::string& node, int port) {
    auto r = RunSync(
        io_, kube_->Create(kube::PodsRef(ns_),
                           fmt::format(R"({{"apiVersion":"v1",
        "kind":"Pod","metadata":{{"name":"{}","namespace":"{}"}},"spec":{{"schedulerName":"{}",
        {}"restartPolicy":"Never","tolerations":[{{"operator":"Exists"}}],
        "containers":[{{"name":"c","image":"busybox","resources":{{"limits":{{"cpu":"1"}}}},
        "ports":[{{"containerPort":80,"hostPort":{}}}]}}]}}}})",
                                       name, ns_, scheduler,
                                       node.empty() ? std::string()
                                                    : fmt::format(R"("nodeName":"{}",)", node),
                                       port)));
    ASSERT_TRUE(r) << r.error().message;
  };
  for (const char* n : {"n1", "n2", "n3"}) {
    ASSERT_NO_FATAL_FAILURE(create(fmt::format("exporter-{}", n), "default-scheduler", n, 9100));
  }
  StartScheduler();
  ASSERT_NO_FATAL_FAILURE(create("web", "slurm-bridge-scheduler", "", 9100));
  std::optional<kube::Pod> bound = WaitForPod("web", IsBound, 60s);
  ASSERT_TRUE(bound) << "the pod with a free host port elsewhere was not bound";
  EXPECT_EQ(bound->spec.node_name, "n4") << "n1-n3 hold host port 9100";
  std::string show = Slurm(fmt::format("scontrol show job -o {}", JobId(*bound)));
  EXPECT_NE(show.find("ExcNodeList=n[1-3] "), std::string::npos) << show;

  ASSERT_NO_FATAL_FAILURE(create("other-port", "slurm-bridge-scheduler", "", 9101));
  bound = WaitForPod("other-port", IsBound, 60s);
  ASSERT_TRUE(bound);
  show = Slurm(fmt::format("scontrol show job -o {}", JobId(*bound)));
  EXPECT_NE(show.find("ExcNodeList=(null)"), std::string::npos) << show;
}

// Issue #25: required pod anti-affinity, which Slurm cannot honour, is refused at submit with
// an event that names the term (the webhook refuses it too, but can be off); no Slurm job.
TEST_F(SchedulerE2e, RequiredPodAntiAffinityIsRefusedAtSubmit) {
  StartScheduler();
  CreatePod("apart", R"({"limits":{"cpu":"1"}})", "{}",
            R"(,"affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
            {"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"a":"b"}}}]}})");
  const std::string message = WaitForEvent("apart");
  EXPECT_NE(message.find("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuring"
                         "Execution is not supported"),
            std::string::npos)
      << message;
  auto pod = RunSync(io_, kube::GetPod(*kube_, ns_, "apart"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_FALSE(IsBound(*pod));
  EXPECT_EQ(JobId(*pod), 0) << "no Slurm job";
}

TEST_F(SchedulerE2e, NodeSelectorKeepsPodsOffExcludedNode) {
  Restore unlabel{[this] {
    Shell(
        fmt::format("KUBECONFIG={} kubectl label node n1 n2 n3 n4 zone-", env_.Get("KUBECONFIG")));
  }};
  for (const char* n : {"n1", "n3", "n4"}) {
    Shell(fmt::format("KUBECONFIG={} kubectl label node {} --overwrite zone=a",
                      env_.Get("KUBECONFIG"), n));
  }
  Shell(fmt::format("KUBECONFIG={} kubectl label node n2 --overwrite zone=b",
                    env_.Get("KUBECONFIG")));
  StartScheduler();
  for (int i = 0; i < 3; ++i) {
    CreatePod(fmt::format("sel{}", i), R"({"limits":{"cpu":"1"}})", "{}",
              R"(,"nodeSelector":{"zone":"a"})");
  }
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return CountBound(pods) == 3;
      },
      60s));
  for (const kube::Pod& p : pods) {
    EXPECT_NE(p.spec.node_name, "n2") << p.metadata.name;
    const std::string show = Slurm(fmt::format("scontrol show job -o {}", JobId(p)));
    EXPECT_NE(show.find("ExcNodeList=n2 "), std::string::npos) << show;
  }
}

TEST_F(SchedulerE2e, JobEndingBeforeBindingIsReplaced) {
  auto drained = DrainAllNodes();
  StartScheduler();
  CreatePod("again", R"({"limits":{"cpu":"1"}})");
  std::optional<kube::Pod> pod = WaitForPod("again", HasJob, 30s);
  ASSERT_TRUE(pod);
  const std::int64_t first = JobId(*pod);
  ASSERT_TRUE(RunSync(io_, slurm_->CancelJob(first, {})));
  pod =
      WaitForPod("again", [&](const kube::Pod& p) { return HasJob(p) && JobId(p) != first; }, 30s);
  ASSERT_TRUE(pod) << "no second job";
  ResumeAllNodes();
  ASSERT_TRUE(WaitForPod("again", IsBound));
  bool ended_event = false;
  for (const kube::Event& e : Events("again")) {
    ended_event = ended_event || (e.reason == "SlurmJobEnded" &&
                                  e.message.find(std::to_string(first)) != std::string::npos);
  }
  EXPECT_TRUE(ended_event);
}

// A pending job follows its pod and the nodes: a comment and the exclusions in place; a time
// limit (which Slurm checks against the partition's MaxTime at submit only) by a new job, the
// old one cancelled (review R-1). Each new job is checked by Slurm as a user's submit.
TEST_F(SchedulerE2e, PendingJobFollowsEditsOfItsPodAndNodes) {
  // Drained nodes keep the job pending while the pod and the nodes change.
  auto drained = DrainAllNodes();
  StartScheduler();
  CreatePod("edited", R"({"limits":{"cpu":"1"}})",
            R"({"slurmjob.slinky.slurm.net/comment":"before",
                "slurmjob.slinky.slurm.net/timelimit":"30"})");
  std::optional<kube::Pod> submitted = WaitForPod("edited", HasJob, 30s);
  ASSERT_TRUE(submitted);
  std::int64_t job = JobId(*submitted);
  const std::string kubectl = "KUBECONFIG=" + env_.Get("KUBECONFIG") + " kubectl ";
  auto show = [&] { return Slurm(fmt::format("scontrol show job -o {}", job)); };
  auto shows = [&](const std::vector<std::string>& wants, const std::string& absent) {
    std::string text;
    const bool ok = WaitFor(
        [&] {
          text = show();
          for (const std::string& w : wants) {
            if (text.find(w) == std::string::npos) return false;
          }
          return absent.empty() || text.find(absent) == std::string::npos;
        },
        30s);
    EXPECT_TRUE(ok) << text;
    return ok;
  };
  // The pod's job once it is another than `before` (the old one cancelled): 0 when none came.
  auto next_job = [&](std::int64_t before) -> std::int64_t {
    std::optional<kube::Pod> p = WaitForPod(
        "edited", [&](const kube::Pod& q) { return HasJob(q) && JobId(q) != before; }, 30s);
    EXPECT_TRUE(p) << "no new job after Slurm job " << before;
    if (!p) return 0;
    EXPECT_TRUE(WaitFor([&] { return JobState(before) == "CANCELLED"; }, 30s))
        << "Slurm job " << before << " is " << JobState(before);
    return JobId(*p);
  };
  // A comment edited on the pod reaches the pending job in place.
  Shell(kubectl + "annotate pod edited -n " + ns_ +
        " --overwrite slurmjob.slinky.slurm.net/comment=after");
  ASSERT_TRUE(shows({"Comment=after", "TimeLimit=00:30:00"}, ""));
  // A time limit edited: a new job, never an operator's update of the pending one.
  Shell(kubectl + "annotate pod edited -n " + ns_ +
        " --overwrite slurmjob.slinky.slurm.net/timelimit=20");
  const std::int64_t first = job;
  job = next_job(first);
  ASSERT_NE(job, 0);
  ASSERT_TRUE(shows({"Comment=after", "TimeLimit=00:20:00"}, ""));
  EXPECT_NE(WaitForEvent("edited", "SlurmJobResubmitted")
                .find(fmt::format("time_limit changed: pending Slurm job {} cancelled", first)),
            std::string::npos);
  // A bad edit is reported and the job keeps what it had.
  Shell(kubectl + "annotate pod edited -n " + ns_ +
        " --overwrite slurmjob.slinky.slurm.net/timelimit=soon");
  std::string message;
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const kube::Event& e : Events("edited")) {
          if (e.message.find("\"soon\"") != std::string::npos) message = e.message;
        }
        return !message.empty();
      },
      30s));
  EXPECT_NE(message.find(fmt::format("Slurm job {} waits with the description it had", job)),
            std::string::npos)
      << message;
  EXPECT_NE(show().find("TimeLimit=00:20:00"), std::string::npos);
  // Upstream 1.3's forms: a duration, a Slurm --time string.
  Shell(kubectl + "annotate pod edited -n " + ns_ +
        " --overwrite slurmjob.slinky.slurm.net/timelimit=25m");
  job = next_job(job);
  ASSERT_NE(job, 0);
  ASSERT_TRUE(shows({"TimeLimit=00:25:00"}, ""));
  Shell(kubectl + "annotate pod edited -n " + ns_ +
        " --overwrite slurmjob.slinky.slurm.net/timelimit=1-2:30");
  job = next_job(job);
  ASSERT_NE(job, 0);
  ASSERT_TRUE(shows({"TimeLimit=1-02:30:00"}, ""));
  // A node tainted in Kubernetes is excluded, and no longer when the taint goes; a removed
  // comment is cleared: in place, the same job.
  Shell(kubectl + "taint node n2 e2e-edit=x:NoSchedule");
  struct Untaint {
    std::string cmd;
    ~Untaint() { (void)sb::testing::RunCommand(cmd, nullptr); }
  } untaint{kubectl + "taint node n2 e2e-edit- 2>/dev/null"};
  ASSERT_TRUE(shows({"ExcNodeList=n2 "}, ""));
  Shell(kubectl + "taint node n2 e2e-edit-");
  Shell(kubectl + "annotate pod edited -n " + ns_ + " slurmjob.slinky.slurm.net/comment-");
  ASSERT_TRUE(shows({"ExcNodeList=(null)", "TimeLimit=1-02:30:00"}, "Comment=after"));
  // The last job runs the pod; the others were cancelled before they started.
  ResumeAllNodes();
  std::optional<kube::Pod> bound = WaitForPod("edited", IsBound);
  ASSERT_TRUE(bound) << "edited not bound";
  kube::Pod pod = *bound;
  EXPECT_EQ(JobId(pod), job);
  const std::map<std::string, std::vector<std::int64_t>> jobs = JobsByUid();
  ASSERT_TRUE(jobs.contains(pod.metadata.uid));
  for (std::int64_t id : jobs.at(pod.metadata.uid)) {
    if (id != job) {
      EXPECT_EQ(JobState(id), "CANCELLED") << "Slurm job " << id;
    }
  }
}

TEST_F(SchedulerE2e, KilledAndRestartedSchedulerMakesNoDuplicateJobs) {
  // Hold the pods in Slurm's queue while the scheduler is killed in the middle of them: one
  // submit at a time, each reply held 150 ms by a proxy after Slurm made the job, so that the
  // kill lands while most pods still wait for their job and, likely, while a job exists whose
  // submitter never heard of it.
  sb::testing::LossyProxy proxy(env_.Get("SLURM_REST_URL"),
                                sb::testing::LossyProxy::Fault::kSlowSubmitReply);
  UseSlurmAt(proxy.url());
  std::ofstream(config_path_, std::ios::app) << "maxConcurrentSubmits: 1\n";
  auto drained = DrainAllNodes();
  StartScheduler();
  constexpr int kPods = 50;
  for (int i = 0; i < kPods; ++i) {
    CreatePod(fmt::format("w{:02}", i), R"({"limits":{"cpu":"1","memory":"64Mi"}})",
              R"({"slurmjob.slinky.slurm.net/exclusive":"false"})");
  }
  // Kill it once some, not all, pods have their job.
  ASSERT_TRUE(WaitFor([&] { return JobsByUid().size() >= 3; }, 60s));
  AssertAlive(*scheduler_, "the first scheduler");
  scheduler_->Kill(SIGKILL);
  const std::size_t before = JobsByUid().size();
  ASSERT_LT(before, static_cast<std::size_t>(kPods)) << "every job existed at the kill";
  scheduler_ = StartBridge("scheduler", {}, "restarted");
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return std::ranges::all_of(pods, [](const kube::Pod& p) { return JobId(p) > 0; });
      },
      90s));
  // The restarted scheduler took over the jobs it found instead of submitting again.
  EXPECT_GE(CountInLog("restarted", "adopted Slurm job "), 1);
  std::map<std::string, std::vector<std::int64_t>> jobs = JobsByUid();
  EXPECT_EQ(jobs.size(), static_cast<std::size_t>(kPods)) << "had " << before << " at the kill";
  for (const auto& [uid, ids] : jobs) EXPECT_EQ(ids.size(), 1u) << "duplicate jobs for " << uid;
  // Release the nodes: 32 one-CPU jobs fit at once; end the running ones (their pods first, as
  // their kubelet and the pod controller would) until all are bound.
  ResumeAllNodes();
  std::set<std::int64_t> ended;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        if (CountBound(pods) == static_cast<std::size_t>(kPods)) return true;
        for (const kube::Pod& p : pods) {
          if (!p.spec.node_name.empty() && ended.insert(JobId(p)).second) {
            FinishPod(p.metadata.name);
            (void)RunSync(io_, slurm_->CancelJob(JobId(p), {}));
          }
        }
        return false;
      },
      120s))
      << CountBound(pods) << " bound";
  jobs = JobsByUid();
  for (const auto& [uid, ids] : jobs) EXPECT_EQ(ids.size(), 1u) << "duplicate jobs for " << uid;
  for (const kube::Pod& p : pods) {
    auto a = p.metadata.annotations.find(std::string(bridge::kNodeAnnotation));
    ASSERT_NE(a, p.metadata.annotations.end()) << p.metadata.name;
    EXPECT_EQ(a->second, p.spec.node_name);
  }
}

TEST_F(SchedulerE2e, SlurmRefusalIsReportedOnThePod) {
  AddConfig(fmt::format("identityPolicy:\n- namespaces: [{}]\n  partitions: [\"*\"]\n", ns_));
  StartScheduler();
  CreatePod("refused", R"({"limits":{"cpu":"1"}})",
            R"({"slurmjob.slinky.slurm.net/partition":"no-such-partition"})");
  const std::string message = WaitForEvent("refused");
  EXPECT_FALSE(message.empty()) << "no FailedScheduling event";
  EXPECT_EQ(message.rfind("Slurm refused the job: ", 0), 0u) << message;
  EXPECT_NE(message.find("Invalid partition name specified"), std::string::npos) << message;
  AssertAlive(*scheduler_, "the scheduler");
  auto pod = RunSync(io_, kube::GetPod(*kube_, ns_, "refused"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_FALSE(IsBound(*pod));
  EXPECT_EQ(JobId(*pod), 0);
}

TEST_F(SchedulerE2e, PodDeletedBeforeBindingHasItsJobCancelled) {
  auto drained = DrainAllNodes();
  StartScheduler();
  CreatePod("short-lived", R"({"limits":{"cpu":"1"}})");
  std::optional<kube::Pod> pod = WaitForPod("short-lived", HasJob, 30s);
  ASSERT_TRUE(pod);
  const std::int64_t job = JobId(*pod);
  auto d = RunSync(io_, kube::DeletePod(*kube_, ns_, "short-lived", {}));
  ASSERT_TRUE(d) << d.error().message;
  // The pending pod loses the finalizer and goes; its pending job is cancelled.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "short-lived"));
        return !p && p.error().code == ErrorCode::kNotFound;
      },
      30s));
  std::string state;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto j = RunSync(io_, slurm_->GetJob(job));
        state = j ? std::string(j->BaseState()) : j.error().ToString();
        return state == "CANCELLED";
      },
      30s))
      << state;
}

TEST_F(SchedulerE2e, SigtermReleasesTheLeaseAndExitsZero) {
  const std::string lease = "e2e-" + ns_;
  scheduler_ = StartBridge("scheduler", {"--leader-elect", "--leader-election-namespace", ns_,
                                         "--leader-election-id", lease});
  auto holder = [&] {
    auto l = RunSync(io_, kube::GetAs<kube::Lease>(*kube_, kube::LeasesRef(ns_).WithName(lease)));
    return l ? l->holder_identity.value_or("") : std::string("?");
  };
  ASSERT_TRUE(WaitFor([&] { return CountInLog("scheduler", "leading (") == 1; }, 30s));
  EXPECT_NE(holder(), "");
  const int status = scheduler_->Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << scheduler_->HowItEnded();
  EXPECT_EQ(holder(), "") << "the Lease was not released";
}

}  // namespace
}  // namespace sb::scheduler
