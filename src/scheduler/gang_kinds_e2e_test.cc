// SPDX-License-Identifier: Apache-2.0
//
// Gang kinds other than a batch Job, end to end (test audit, untested behaviour 10): the
// `slurm-bridge scheduler` binary against the test environment's real slurmctld/slurmd/slurmrestd
// and kube-apiserver, which serves the PodGroup, LeaderWorkerSet and JobSet CRDs
// (testenv/kube/crds). No LWS or JobSet controller runs here: each test creates the objects those
// controllers (and LWS's pod webhook) would, with their labels, annotations and owner references
// as upstream sets them; kube-controller-manager's Job and ReplicaSet controllers make the pods of
// Jobs and ReplicaSets. Nothing runs the pods; a test plays the kubelet by patching a pod's phase.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bridge/hostlist.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "testing/bridge_e2e.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;

kube::ResourceRef Ref(std::string group, std::string version, std::string resource,
                      std::string ns) {
  kube::ResourceRef r;
  r.group = std::move(group);
  r.version = std::move(version);
  r.resource = std::move(resource);
  r.namespace_ = std::move(ns);
  return r;
}

class GangKindsE2e : public sb::testing::BridgeE2e {
 protected:
  void SetUp() override {
    BridgeE2e::SetUp();
    if (HasFatalFailure()) return;
    Clean();  // what an earlier run of this test left in its namespace
  }

  void TearDown() override {
    BridgeE2e::TearDown();
    // After the base (invariants, pods and Jobs removed): the workloads, then the pods a
    // ReplicaSet made again meanwhile.
    if (kube_) Clean();
  }

  // The workload kinds these tests create, in this namespace.
  std::vector<kube::ResourceRef> WorkloadRefs() const {
    return {Ref("scheduling.x-k8s.io", "v1alpha1", "podgroups", ns_),
            Ref("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", ns_),
            Ref("jobset.x-k8s.io", "v1alpha2", "jobsets", ns_),
            Ref("apps", "v1", "deployments", ns_),
            Ref("apps", "v1", "replicasets", ns_),
            Ref("apps", "v1", "statefulsets", ns_)};
  }
  void Clean() {
    for (const kube::ResourceRef& r : WorkloadRefs()) {
      (void)RunSync(io_, kube_->Delete(r, {.propagation_policy = "Background"}));
    }
    auto pods = RunSync(io_, kube::ListAs<kube::Pod>(*kube_, kube::PodsRef(ns_), {}));
    if (!pods) return;
    for (const kube::Pod& p : pods->items) {
      (void)RunSync(
          io_, kube_->Patch(kube::PodsRef(ns_).WithName(p.metadata.name),
                            kube::PatchType::kJsonMerge, R"({"metadata":{"finalizers":null}})"));
    }
    (void)RunSync(io_, kube_->Delete(kube::PodsRef(ns_), {.grace_period_seconds = 0}));
  }

  // Creates `manifest` (JSON) at `ref`; the object as the apiserver stored it (its UID).
  kube::GenericObject Create(const kube::ResourceRef& ref, const std::string& manifest) {
    auto r = RunSync(io_, kube_->Create(ref, manifest));
    EXPECT_TRUE(r) << r.error().message << "\n" << manifest;
    if (!r) return {};
    auto o = kube::Decode<kube::GenericObject>(*r);
    EXPECT_TRUE(o) << o.error().message;
    return o ? *o : kube::GenericObject{};
  }

  // The SHA-1 of `s` in hex, as LWS (group-key) and JobSet (job-key) label their pods.
  static std::string Sha1Hex(const std::string& s) {
    return sb::testing::Shell(
        fmt::format("printf %s '{}' | sha1sum | cut -c1-40 | tr -d '\\n'", s));
  }

  // A controller reference to `owner`, as controller-runtime's SetControllerReference writes it.
  static std::string ControllerRef(const std::string& api_version, const std::string& kind,
                                   const kube::GenericObject& owner) {
    return fmt::format(
        R"({{"apiVersion":"{}","kind":"{}","name":"{}","uid":"{}","controller":true,)"
        R"("blockOwnerDeletion":true}})",
        api_version, kind, owner.metadata.name, owner.metadata.uid);
  }

  // A pod spec for the bridge: one container asking for `cpu` CPUs (one).
  static std::string PodSpec(const std::string& restart_policy = "Never",
                             const std::string& extra = "", const std::string& cpu = "1") {
    return fmt::format(R"({{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"{}",)"
                       R"("containers":[{{"name":"c","image":"busybox",)"
                       R"("resources":{{"limits":{{"cpu":"{}"}}}}}}]{}}})",
                       restart_policy, cpu, extra);
  }

  // Creates pod `name` with the given labels, annotations (JSON objects) and owner references
  // (a JSON array).
  kube::GenericObject CreatePodWith(const std::string& name, const std::string& labels,
                                    const std::string& annotations,
                                    const std::string& owners = "[]",
                                    const std::string& spec = PodSpec()) {
    return Create(kube::PodsRef(ns_),
                  fmt::format(R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}",)"
                              R"("namespace":"{}","labels":{},"annotations":{},)"
                              R"("ownerReferences":{}}},"spec":{}}})",
                              name, ns_, labels, annotations, owners, spec));
  }

  std::optional<slurm::JobInfo> Job(std::int64_t id) {
    auto j = RunSync(io_, slurm_->GetJob(id));
    EXPECT_TRUE(j) << "job " << id << ": " << j.error().message;
    if (!j) return std::nullopt;
    return *j;
  }

  // The Slurm nodes of job `id` (its hostlist expanded).
  std::set<std::string> JobNodes(const slurm::JobInfo& job) {
    auto nodes = bridge::ExpandHostlist(job.nodes);
    EXPECT_TRUE(nodes) << job.nodes;
    return nodes ? std::set<std::string>(nodes->begin(), nodes->end()) : std::set<std::string>{};
  }

  // Every distinct Slurm job that a pod of this namespace is tagged in.
  std::set<std::int64_t> AllJobs() {
    std::set<std::int64_t> all;
    for (const auto& [uid, ids] : JobsByUid()) all.insert(ids.begin(), ids.end());
    return all;
  }

  // The pods of this namespace whose name starts with `prefix`, by name.
  std::map<std::string, kube::Pod> PodsNamed(const std::string& prefix) {
    std::map<std::string, kube::Pod> out;
    for (kube::Pod& p : Pods()) {
      if (p.metadata.name.starts_with(prefix)) out.emplace(p.metadata.name, std::move(p));
    }
    return out;
  }

  // Waits until `count` pods named `prefix`... exist and are all bound; them, by name.
  std::map<std::string, kube::Pod> WaitAllBound(const std::string& prefix, std::size_t count,
                                                std::chrono::seconds limit = 90s) {
    std::map<std::string, kube::Pod> pods;
    const bool ok = WaitFor(
        [&] {
          pods = PodsNamed(prefix);
          return pods.size() == count &&
                 std::ranges::all_of(pods, [](const auto& kv) { return IsBound(kv.second); });
        },
        limit);
    EXPECT_TRUE(ok) << "pods " << prefix << "*: " << pods.size() << " of " << count << ", "
                    << std::ranges::count_if(pods,
                                             [](const auto& kv) { return IsBound(kv.second); })
                    << " bound";
    return pods;
  }

  // The newest FailedScheduling message on `pod` that contains `part`, once there is one.
  std::string WaitForReport(const std::string& pod, const std::string& part,
                            std::chrono::seconds limit = 30s) {
    std::string found;
    WaitFor(
        [&] {
          for (const kube::Event& e : Events(pod)) {
            if (e.reason == "FailedScheduling" && e.message.find(part) != std::string::npos) {
              found = e.message;
            }
          }
          return !found.empty();
        },
        limit);
    EXPECT_FALSE(found.empty()) << "no FailedScheduling event on " << pod << " saying \"" << part
                                << "\"";
    return found;
  }

  // Checks that `pods` are bound to the distinct nodes of one Slurm job, each labelled with it,
  // and that no other job names them; the job.
  std::optional<slurm::JobInfo> ExpectOneJobFor(const std::vector<kube::Pod>& pods) {
    if (pods.empty()) return std::nullopt;
    const std::int64_t id = JobId(pods.front());
    EXPECT_GT(id, 0) << pods.front().metadata.name << " has no job label";
    std::optional<slurm::JobInfo> job = Job(id);
    if (!job) return std::nullopt;
    EXPECT_EQ(job->BaseState(), "RUNNING");
    EXPECT_EQ(job->node_count, static_cast<std::int64_t>(pods.size())) << job->nodes;
    const std::set<std::string> nodes = JobNodes(*job);
    std::set<std::string> used;
    const std::map<std::string, std::vector<std::int64_t>> by_uid = JobsByUid();
    for (const kube::Pod& p : pods) {
      EXPECT_EQ(JobId(p), id) << p.metadata.name;
      EXPECT_TRUE(nodes.contains(p.spec.node_name)) << p.metadata.name << " on " << p.spec.node_name
                                                    << ", job " << id << " on " << job->nodes;
      EXPECT_TRUE(used.insert(p.spec.node_name).second)
          << p.metadata.name << " shares node " << p.spec.node_name;
      auto it = by_uid.find(p.metadata.uid);
      EXPECT_TRUE(it != by_uid.end() && it->second == std::vector<std::int64_t>{id})
          << p.metadata.name << " is tagged in other jobs than " << id;
    }
    return job;
  }

  // A replicated job of a JobSet: `replicas` Jobs of `parallelism` pods with `pod_spec`.
  struct ReplicatedJob {
    std::string name;
    int replicas = 1;
    int parallelism = 1;
    std::string pod_spec = PodSpec("Never");
    int backoff_limit = 0;
  };

  // A JobSet `name` with one replicated job "w" of `replicas` Jobs of `parallelism` pods each.
  void CreateJobSet(const std::string& name, const std::string& annotations, int replicas,
                    int parallelism) {
    CreateJobSetOf(name, annotations,
                   {{.name = "w", .replicas = replicas, .parallelism = parallelism}});
  }

  // A JobSet `name` of `parts`, and its Jobs as the JobSet controller makes them
  // (kubernetes-sigs/jobset, labelAndAnnotateObject: the jobset.sigs.k8s.io/ keys as labels and
  // annotations on the Job and its pod template; the Job named <jobset>-<replicated job>-<index>,
  // controlled by the JobSet). Indexed, JobSet's default completion mode (the Job controller
  // then names each pod's index).
  void CreateJobSetOf(const std::string& name, const std::string& annotations,
                      const std::vector<ReplicatedJob>& parts) {
    auto job_spec = [](const ReplicatedJob& r) {
      return fmt::format(
          R"({{"parallelism":{0},"completions":{0},"completionMode":"Indexed","backoffLimit":0,)"
          R"("template":{{"spec":{1}}}}})",
          r.parallelism, r.pod_spec);
    };
    std::vector<std::string> replicated;
    int global = 0;
    for (const ReplicatedJob& r : parts) {
      replicated.push_back(fmt::format(R"({{"name":"{}","replicas":{},"template":{{"spec":{}}}}})",
                                       r.name, r.replicas, job_spec(r)));
      global += r.replicas;
    }
    kube::GenericObject js = Create(
        Ref("jobset.x-k8s.io", "v1alpha2", "jobsets", ns_),
        fmt::format(R"({{"apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet","metadata":)"
                    R"({{"name":"{}","namespace":"{}","annotations":{}}},"spec":{{)"
                    R"("replicatedJobs":[{}]}}}})",
                    name, ns_, annotations, fmt::join(replicated, ",")));
    ASSERT_FALSE(js.metadata.uid.empty());
    int global_index = 0;
    for (const ReplicatedJob& r : parts) {
      for (int i = 0; i < r.replicas; ++i, ++global_index) {
        const std::string job = fmt::format("{}-{}-{}", name, r.name, i);
        const std::string key = Sha1Hex(ns_ + "/" + job);
        const std::string keys = fmt::format(
            R"({{"jobset.sigs.k8s.io/jobset-name":"{0}",)"
            R"("jobset.sigs.k8s.io/replicatedjob-name":"{1}",)"
            R"("jobset.sigs.k8s.io/restart-attempt":"0",)"
            R"("jobset.sigs.k8s.io/replicatedjob-replicas":"{2}",)"
            R"("jobset.sigs.k8s.io/global-replicas":"{3}","jobset.sigs.k8s.io/job-index":"{4}",)"
            R"("jobset.sigs.k8s.io/job-global-index":"{5}","jobset.sigs.k8s.io/job-key":"{6}"}})",
            name, r.name, r.replicas, global, i, global_index, key);
        Create(kube::JobsRef(ns_),
               fmt::format(R"({{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{0}",)"
                           R"("namespace":"{1}","labels":{2},"annotations":{2},)"
                           R"("ownerReferences":[{3}]}},"spec":{{"parallelism":{4},)"
                           R"("completions":{4},"backoffLimit":{6},"template":{{"metadata":)"
                           R"({{"labels":{2},"annotations":{2}}},"spec":{5}}}}}}})",
                           job, ns_, keys, ControllerRef("jobset.x-k8s.io/v1alpha2", "JobSet", js),
                           r.parallelism, r.pod_spec, r.backoff_limit));
      }
    }
  }

  // The batch script that a process of Slurm job `id` runs (found by SLURM_JOB_ID in its
  // environment; the script read through the process's root, the Slurm chroot); "" if none.
  static std::string RunningScript(std::int64_t id) {
    namespace fs = std::filesystem;
    const std::string want = fmt::format("SLURM_JOB_ID={}", id);
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
      const std::string pid = e.path().filename().string();
      if (pid.empty() || !std::ranges::all_of(pid, [](char c) { return c >= '0' && c <= '9'; })) {
        continue;
      }
      auto read = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
      };
      const std::string env = read(e.path() / "environ");
      bool has = false;
      for (std::size_t at = 0; at < env.size();) {
        const std::size_t end = std::min(env.find('\0', at), env.size());
        has = has || env.compare(at, end - at, want) == 0;
        at = end + 1;
      }
      if (!has) continue;
      const std::string cmdline = read(e.path() / "cmdline");
      for (std::size_t at = 0; at < cmdline.size();) {
        const std::size_t end = std::min(cmdline.find('\0', at), cmdline.size());
        const std::string arg = cmdline.substr(at, end - at);
        at = end + 1;
        if (arg.find("slurm_script") == std::string::npos || !arg.starts_with("/")) continue;
        std::string script = read(e.path() / "root" / arg.substr(1));
        if (!script.empty()) return script;
      }
    }
    return "";
  }

  static std::vector<kube::Pod> Values(const std::map<std::string, kube::Pod>& m) {
    std::vector<kube::Pod> out;
    for (const auto& [name, pod] : m) out.push_back(pod);
    return out;
  }
};

// A coscheduling PodGroup with minMember 3: no Slurm job while two of its pods exist (the pods
// say why), then one job for the three, each bound to a node of it. A fourth pod (beyond
// minMember) is not given a job of its own while the group's job runs: it waits for a node of
// that job, and binds into it when a member finishes.
TEST_F(GangKindsE2e, PodGroupWaitsForMinMemberThenRunsAsOneJob) {
  Create(Ref("scheduling.x-k8s.io", "v1alpha1", "podgroups", ns_),
         fmt::format(R"({{"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup",)"
                     R"("metadata":{{"name":"pg","namespace":"{}","annotations":)"
                     R"({{"slurmjob.slinky.slurm.net/comment":"from-podgroup"}}}},)"
                     R"("spec":{{"minMember":3,"scheduleTimeoutSeconds":60}}}})",
                     ns_));
  StartScheduler();
  const std::string label = R"({"scheduling.x-k8s.io/pod-group":"pg"})";
  CreatePodWith("pg-0", label, "{}");
  CreatePodWith("pg-1", label, "{}");
  WaitForReport("pg-0", "waiting for 1 more pod(s) of PodGroup pg");
  ASSERT_TRUE(scheduler_->Alive()) << scheduler_->HowItEnded();
  EXPECT_TRUE(AllJobs().empty()) << "a job before the group had minMember pods";
  for (const auto& [name, pod] : PodsNamed("pg-")) {
    EXPECT_FALSE(HasJob(pod)) << name;
    EXPECT_FALSE(IsBound(pod)) << name;
  }

  CreatePodWith("pg-2", label, "{}");
  std::map<std::string, kube::Pod> pods = WaitAllBound("pg-", 3);
  ASSERT_EQ(pods.size(), 3u);
  std::optional<slurm::JobInfo> job = ExpectOneJobFor(Values(pods));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->name, "pg");
  EXPECT_EQ(job->comment, "from-podgroup");
  EXPECT_EQ(AllJobs(), std::set<std::int64_t>{job->job_id});

  // Beyond minMember: no job of its own; it waits for a node of the group's job.
  CreatePodWith("pg-3", label, "{}");
  const std::string waits = WaitForReport("pg-3", "waiting for one to be free");
  EXPECT_NE(waits.find(fmt::format("Slurm job {} of PodGroup pg has a pod on each of its 3 node(s)",
                                   job->job_id)),
            std::string::npos)
      << waits;
  std::optional<kube::Pod> extra = WaitForPod("pg-3", [](const kube::Pod&) { return true; });
  ASSERT_TRUE(extra);
  EXPECT_FALSE(IsBound(*extra));
  EXPECT_EQ(JobsByUid().count(extra->metadata.uid), 0u) << "pg-3 got a job of its own";
  EXPECT_EQ(AllJobs(), std::set<std::int64_t>{job->job_id});

  // A member finishes (the kubelet's part): its node in the job is free, and pg-3 binds there.
  FinishPod("pg-0");
  std::optional<kube::Pod> bound = WaitForPod("pg-3", IsBound, 60s);
  ASSERT_TRUE(bound) << "pg-3 was not bound after pg-0 finished";
  EXPECT_EQ(bound->spec.node_name, pods.at("pg-0").spec.node_name);
  EXPECT_EQ(JobId(*bound), job->job_id);
  const std::map<std::string, std::vector<std::int64_t>> by_uid = JobsByUid();
  auto it = by_uid.find(bound->metadata.uid);
  EXPECT_TRUE(it != by_uid.end() && it->second == std::vector<std::int64_t>{job->job_id})
      << "the job's tag does not list pg-3";
}

// A LeaderWorkerSet of two groups of two (leader + one worker). Its pods carry what LWS's
// controllers and pod webhook write (kubernetes-sigs/lws: leaderworkerset.sigs.k8s.io/name,
// group-index, worker-index, group-key = sha1("<ns>/<leader pod>"), size, leader-name) and its
// owner chain: worker pod -> worker StatefulSet -> leader pod -> leader StatefulSet -> LWS. A
// leader alone waits for its group; then each group is one Slurm job named <lws>-<index>.
TEST_F(GangKindsE2e, LeaderWorkerSetGroupIsOneJobEach) {
  const std::string apps = "apps/v1";
  kube::GenericObject lws = Create(
      Ref("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", ns_),
      fmt::format(
          R"({{"apiVersion":"leaderworkerset.x-k8s.io/v1","kind":"LeaderWorkerSet",)"
          R"("metadata":{{"name":"lws","namespace":"{}"}},"spec":{{"replicas":2,)"
          R"("startupPolicy":"LeaderCreated","leaderWorkerTemplate":{{"size":2,)"
          R"("restartPolicy":"RecreateGroupOnPodRestart","workerTemplate":{{"spec":{}}}}}}}}})",
          ns_, PodSpec("Always")));
  ASSERT_FALSE(lws.metadata.uid.empty());
  const std::string rev = "5b8f7d6c9";  // leaderworkerset.sigs.k8s.io/template-revision-hash
  // The leader StatefulSet, named after the set, controlled by it.
  kube::GenericObject leader_sts = Create(
      Ref("apps", "v1", "statefulsets", ns_),
      fmt::format(R"({{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{{"name":"lws",)"
                  R"("namespace":"{0}","labels":{{"leaderworkerset.sigs.k8s.io/name":"lws",)"
                  R"("leaderworkerset.sigs.k8s.io/template-revision-hash":"{1}"}},)"
                  R"("annotations":{{"leaderworkerset.sigs.k8s.io/replicas":"2"}},)"
                  R"("ownerReferences":[{2}]}},)"
                  R"("spec":{{"replicas":2,"serviceName":"lws","podManagementPolicy":"Parallel",)"
                  R"("selector":{{"matchLabels":{{"leaderworkerset.sigs.k8s.io/name":"lws",)"
                  R"("leaderworkerset.sigs.k8s.io/worker-index":"0"}}}},"template":{{"metadata":)"
                  R"({{"labels":{{"leaderworkerset.sigs.k8s.io/name":"lws",)"
                  R"("leaderworkerset.sigs.k8s.io/worker-index":"0",)"
                  R"("leaderworkerset.sigs.k8s.io/template-revision-hash":"{1}"}},)"
                  R"("annotations":{{"leaderworkerset.sigs.k8s.io/size":"2"}}}},"spec":{3}}}}}}})",
                  ns_, rev, ControllerRef("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", lws),
                  PodSpec("Always")));
  ASSERT_FALSE(leader_sts.metadata.uid.empty());

  // The leaders first (the StatefulSet controller makes them; LWS's webhook adds group-index
  // and group-key).
  std::map<int, kube::GenericObject> leaders;
  std::map<int, std::string> keys;
  for (int g = 0; g < 2; ++g) {
    const std::string leader = fmt::format("lws-{}", g);
    keys[g] = Sha1Hex(ns_ + "/" + leader);
    ASSERT_EQ(keys[g].size(), 40u) << keys[g];
    leaders[g] = CreatePodWith(
        leader,
        fmt::format(R"({{"leaderworkerset.sigs.k8s.io/name":"lws",)"
                    R"("leaderworkerset.sigs.k8s.io/worker-index":"0",)"
                    R"("leaderworkerset.sigs.k8s.io/group-index":"{0}",)"
                    R"("leaderworkerset.sigs.k8s.io/group-key":"{1}",)"
                    R"("leaderworkerset.sigs.k8s.io/template-revision-hash":"{2}",)"
                    R"("controller-revision-hash":"lws-{2}",)"
                    R"("statefulset.kubernetes.io/pod-name":"{3}"}})",
                    g, keys[g], rev, leader),
        R"({"leaderworkerset.sigs.k8s.io/size":"2"})",
        "[" + ControllerRef(apps, "StatefulSet", leader_sts) + "]",
        PodSpec("Always", fmt::format(R"(,"hostname":"{}","subdomain":"lws")", leader)));
    ASSERT_FALSE(leaders[g].metadata.uid.empty());
  }
  StartScheduler();
  // A leader alone is not scheduled: its group has two pods.
  WaitForReport("lws-0", "waiting for 1 more pod(s) of LeaderWorkerSet lws-0");
  ASSERT_TRUE(scheduler_->Alive()) << scheduler_->HowItEnded();
  EXPECT_TRUE(AllJobs().empty()) << "a job for a leader without its worker";

  // Each leader's worker StatefulSet (LWS's pod controller: named after the leader, controlled
  // by the leader pod) and its worker (ordinal 1).
  for (int g = 0; g < 2; ++g) {
    const std::string leader = fmt::format("lws-{}", g);
    const std::string group_labels =
        fmt::format(R"("leaderworkerset.sigs.k8s.io/group-index":"{}",)"
                    R"("leaderworkerset.sigs.k8s.io/name":"lws",)"
                    R"("leaderworkerset.sigs.k8s.io/group-key":"{}")",
                    g, keys[g]);
    kube::GenericObject worker_sts = Create(
        Ref("apps", "v1", "statefulsets", ns_),
        fmt::format(
            R"({{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{{"name":"{0}",)"
            R"("namespace":"{1}","labels":{{{2},)"
            R"("leaderworkerset.sigs.k8s.io/template-revision-hash":"{3}"}},)"
            R"("ownerReferences":[{4}]}},)"
            R"("spec":{{"replicas":1,"serviceName":"lws","podManagementPolicy":"Parallel",)"
            R"("selector":{{"matchLabels":{{{2}}}}},"template":{{"metadata":{{"labels":{{{2},)"
            R"("leaderworkerset.sigs.k8s.io/template-revision-hash":"{3}"}},"annotations":)"
            R"({{"leaderworkerset.sigs.k8s.io/size":"2",)"
            R"("leaderworkerset.sigs.k8s.io/leader-name":"{0}"}}}},)"
            R"("spec":{5}}}}}}})",
            leader, ns_, group_labels, rev, ControllerRef("v1", "Pod", leaders[g]),
            PodSpec("Always")));
    ASSERT_FALSE(worker_sts.metadata.uid.empty());
    const std::string worker = leader + "-1";
    CreatePodWith(worker,
                  fmt::format(R"({{{0},"leaderworkerset.sigs.k8s.io/template-revision-hash":"{1}",)"
                              R"("leaderworkerset.sigs.k8s.io/worker-index":"1",)"
                              R"("controller-revision-hash":"{2}-{1}",)"
                              R"("statefulset.kubernetes.io/pod-name":"{3}"}})",
                              group_labels, rev, leader, worker),
                  fmt::format(R"({{"leaderworkerset.sigs.k8s.io/size":"2",)"
                              R"("leaderworkerset.sigs.k8s.io/leader-name":"{}"}})",
                              leader),
                  "[" + ControllerRef(apps, "StatefulSet", worker_sts) + "]",
                  PodSpec("Always", fmt::format(R"(,"hostname":"{}","subdomain":"lws")", worker)));
  }

  std::map<std::string, kube::Pod> pods = WaitAllBound("lws-", 4);
  ASSERT_EQ(pods.size(), 4u);
  std::set<std::int64_t> ids;
  for (int g = 0; g < 2; ++g) {
    SCOPED_TRACE(fmt::format("group {}", g));
    const std::string leader = fmt::format("lws-{}", g);
    std::optional<slurm::JobInfo> job = ExpectOneJobFor({pods.at(leader), pods.at(leader + "-1")});
    ASSERT_TRUE(job);
    EXPECT_EQ(job->name, leader);
    ids.insert(job->job_id);
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(AllJobs(), ids);
}

// A JobSet annotated slurmjob.slinky.slurm.net/gang: "true", one replicated job of 2 Jobs x
// parallelism 2. Its Jobs carry what the JobSet controller writes (jobset.sigs.k8s.io/* labels
// and annotations on the Job and its pod template, controller reference to the JobSet); their
// pods are made by the real Job controller: pod -> Job -> JobSet. All four are one Slurm job.
TEST_F(GangKindsE2e, GangJobSetIsOneJob) {
  StartScheduler();
  CreateJobSet("js", R"({"slurmjob.slinky.slurm.net/gang":"true"})", 2, 2);
  std::map<std::string, kube::Pod> pods = WaitAllBound("js-", 4);
  ASSERT_EQ(pods.size(), 4u);
  std::optional<slurm::JobInfo> job = ExpectOneJobFor(Values(pods));
  ASSERT_TRUE(job);
  EXPECT_EQ(job->name, "js");
  EXPECT_EQ(AllJobs(), std::set<std::int64_t>{job->job_id});
}

// Issue #27: a gang JobSet of a launcher (1 CPU) and 3 workers of another shape (2 CPUs each)
// is one Slurm heterogeneous job of two components, allocated at once: the launcher on the node
// of component 0, each worker on a node of component 1, every pod labelled with the het job's
// id and its component's offset (upstream's labels). The invariants (TearDown) check each pod
// against its own component's nodes.
TEST_F(GangKindsE2e, LauncherAndWorkersOfOtherShapeAreOneHeterogeneousJob) {
  StartScheduler();
  CreateJobSetOf("mpi", R"({"slurmjob.slinky.slurm.net/gang":"true"})",
                 {{.name = "launcher"},
                  {.name = "worker", .parallelism = 3, .pod_spec = PodSpec("Never", "", "2")}});
  std::map<std::string, kube::Pod> pods = WaitAllBound("mpi-", 4, 120s);
  ASSERT_EQ(pods.size(), 4u);
  const std::int64_t id = JobId(pods.begin()->second);
  auto records = RunSync(io_, slurm_->GetJobRecords(id));
  ASSERT_TRUE(records) << records.error().message;
  ASSERT_EQ(records->size(), 2u) << "components of Slurm job " << id;
  const std::set<std::string> launcher_nodes = JobNodes((*records)[0]);
  const std::set<std::string> worker_nodes = JobNodes((*records)[1]);
  for (std::size_t k = 0; k < 2; ++k) {
    const slurm::JobInfo& c = (*records)[k];
    EXPECT_EQ(c.job_id, id + static_cast<std::int64_t>(k));
    EXPECT_EQ(c.het_job_id, id);
    EXPECT_EQ(c.het_job_offset, static_cast<std::int64_t>(k));
    EXPECT_EQ(c.BaseState(), "RUNNING");
  }
  EXPECT_EQ(launcher_nodes.size(), 1u);
  EXPECT_EQ(worker_nodes.size(), 3u);
  std::set<std::string> used;
  for (const auto& [name, pod] : pods) {
    SCOPED_TRACE(name);
    const bool launcher = name.starts_with("mpi-launcher-");
    EXPECT_EQ(JobId(pod), id);
    EXPECT_EQ(pod.metadata.labels.at(std::string(bridge::kHetJobIdLabel)), std::to_string(id));
    EXPECT_EQ(pod.metadata.labels.at(std::string(bridge::kHetJobOffsetLabel)),
              launcher ? "0" : "1");
    EXPECT_TRUE((launcher ? launcher_nodes : worker_nodes).contains(pod.spec.node_name))
        << pod.spec.node_name;
    EXPECT_TRUE(used.insert(pod.spec.node_name).second) << "two pods on " << pod.spec.node_name;
  }
  // One job of the bridge's: the second component is no job of a group.
  EXPECT_EQ(AllJobs(), std::set<std::int64_t>{id});
}

// Issue #27, the lifecycle of a heterogeneous job is a plain gang's (scheduler and controllers):
// a worker that fails is re-created by its Job and the new pod binds to the node its
// predecessor left in the worker component (the job's tag then lists it, its parts kept); when
// Slurm cancels the job, every running pod of both components is deleted.
TEST_F(GangKindsE2e, HeterogeneousJobRefillsAPartAndEndsAsAGang) {
  scheduler_ = StartBridge("all");
  CreateJobSetOf("het", R"({"slurmjob.slinky.slurm.net/gang":"true"})",
                 {{.name = "launcher"},
                  {.name = "worker",
                   .parallelism = 2,
                   .pod_spec = PodSpec("Never", "", "2"),
                   .backoff_limit = 2}});
  std::map<std::string, kube::Pod> pods = WaitAllBound("het-", 3, 120s);
  ASSERT_EQ(pods.size(), 3u);
  const std::int64_t id = JobId(pods.begin()->second);
  const auto worker = std::ranges::find_if(
      pods, [](const auto& kv) { return kv.first.starts_with("het-worker-"); });
  ASSERT_NE(worker, pods.end());
  const std::string failed = worker->first;
  const std::string freed = worker->second.spec.node_name;
  // The test is the kubelet: the worker fails.
  auto f = RunSync(io_, kube::PatchPodStatus(*kube_, ns_, failed, kube::PatchType::kJsonMerge,
                                             R"({"status":{"phase":"Failed"}})"));
  ASSERT_TRUE(f) << f.error().message;
  std::optional<kube::Pod> replacement;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& [name, pod] : PodsNamed("het-worker-")) {
          if (!pods.contains(name) && IsBound(pod)) replacement = pod;
        }
        return replacement.has_value();
      },
      60s))
      << "no new worker was bound";
  EXPECT_EQ(replacement->spec.node_name, freed);
  EXPECT_EQ(JobId(*replacement), id);
  EXPECT_EQ(replacement->metadata.labels.at(std::string(bridge::kHetJobOffsetLabel)), "1");
  std::optional<slurm::JobInfo> leader = Job(id);
  ASSERT_TRUE(leader);
  std::optional<bridge::JobTag> tag = bridge::ParseJobTag(leader->admin_comment);
  ASSERT_TRUE(tag);
  EXPECT_EQ(tag->parts, (std::vector<std::string>{"launcher", "worker"}));
  EXPECT_NE(std::ranges::find(tag->uids, replacement->metadata.uid), tag->uids.end());

  // Slurm ends the job: both components, and every running pod of the group goes.
  auto c = RunSync(io_, slurm_->CancelJob(id, {}));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const kube::Pod& p : Pods()) {
          if (!p.metadata.name.starts_with("het-") || bridge::PodFinished(p)) continue;
          if (p.metadata.deletion_timestamp.empty()) return false;
        }
        return true;
      },
      60s))
      << "a running pod of the cancelled heterogeneous job was not deleted";
  auto records = RunSync(io_, slurm_->GetJobRecords(id));
  ASSERT_TRUE(records) << records.error().message;
  ASSERT_EQ(records->size(), 2u);
  for (const slurm::JobInfo& r : *records) EXPECT_EQ(r.BaseState(), "CANCELLED") << r.job_id;
}

// The same JobSet without the gang annotation: each pod is a Slurm job of its own (as
// upstream), and the JobSet (the root of pod -> Job -> JobSet) gives every job its annotations.
TEST_F(GangKindsE2e, JobSetWithoutGangAnnotationIsOneJobPerPod) {
  StartScheduler();
  CreateJobSet("solo", R"({"slurmjob.slinky.slurm.net/comment":"from-jobset"})", 1, 2);
  std::map<std::string, kube::Pod> pods = WaitAllBound("solo-", 2);
  ASSERT_EQ(pods.size(), 2u);
  std::set<std::int64_t> ids;
  for (const auto& [name, pod] : pods) {
    SCOPED_TRACE(name);
    std::optional<slurm::JobInfo> job = ExpectOneJobFor({pod});
    ASSERT_TRUE(job);
    EXPECT_EQ(job->comment, "from-jobset");
    ids.insert(job->job_id);
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(AllJobs(), ids);
}

// Owner chain beyond a Job: a pod of a ReplicaSet (made by kube-controller-manager's ReplicaSet
// controller) of a Deployment. The job's annotations come from the highest owner, the
// Deployment, not from the ReplicaSet or the pod; the pod is scheduled alone.
TEST_F(GangKindsE2e, OwnerChainReadsTheDeploymentsAnnotations) {
  const std::string selector = R"({"app":"web"})";
  kube::GenericObject deployment = Create(
      Ref("apps", "v1", "deployments", ns_),
      fmt::format(R"({{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"web",)"
                  R"("namespace":"{}","annotations":{{)"
                  R"("slurmjob.slinky.slurm.net/job-name":"from-deployment",)"
                  R"("slurmjob.slinky.slurm.net/comment":"deployment"}}}},)"
                  R"("spec":{{"replicas":1,"selector":{{"matchLabels":{}}},)"
                  R"("template":{{"metadata":{{"labels":{}}},"spec":{}}}}}}})",
                  ns_, selector, selector, PodSpec("Always")));
  ASSERT_FALSE(deployment.metadata.uid.empty());
  StartScheduler();
  // The ReplicaSet the deployment controller (not running here) would make: pod-template-hash
  // label, revision annotations, controlled by the Deployment. Its pod template carries an
  // annotation of its own that must not win over the Deployment's.
  const std::string hash = "6d4cf56db6";
  const std::string labels = fmt::format(R"({{"app":"web","pod-template-hash":"{}"}})", hash);
  Create(Ref("apps", "v1", "replicasets", ns_),
         fmt::format(
             R"({{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{{"name":"web-{0}",)"
             R"("namespace":"{1}","labels":{2},"annotations":{{)"
             R"("deployment.kubernetes.io/desired-replicas":"1",)"
             R"("deployment.kubernetes.io/max-replicas":"2",)"
             R"("deployment.kubernetes.io/revision":"1"}},)"
             R"("ownerReferences":[{3}]}},"spec":{{"replicas":1,"selector":{{"matchLabels":{2}}},)"
             R"("template":{{"metadata":{{"labels":{2},"annotations":{{)"
             R"("slurmjob.slinky.slurm.net/job-name":"from-pod"}}}},"spec":{4}}}}}}})",
             hash, ns_, labels, ControllerRef("apps/v1", "Deployment", deployment),
             PodSpec("Always")));
  std::map<std::string, kube::Pod> pods = WaitAllBound("web-", 1);
  ASSERT_EQ(pods.size(), 1u);
  const kube::Pod& pod = pods.begin()->second;
  ASSERT_EQ(pod.metadata.owner_references.size(), 1u);
  EXPECT_EQ(pod.metadata.owner_references[0].kind, "ReplicaSet");
  std::optional<slurm::JobInfo> job = ExpectOneJobFor({pod});
  ASSERT_TRUE(job);
  EXPECT_EQ(job->name, "from-deployment");
  EXPECT_EQ(job->comment, "deployment");
}

// jobMode: batch: the pod's placeholder is a batch job whose script (the bridge's sleeping
// placeholder) slurmd really runs, and the pod is bound to its node.
TEST_F(GangKindsE2e, BatchModePlaceholderRunsUnderSlurmd) {
  std::ofstream(config_path_, std::ios::app) << "jobMode: batch\n";
  StartScheduler();
  CreatePod("batch", R"({"limits":{"cpu":"1"}})");
  std::optional<kube::Pod> pod = WaitForPod("batch", IsBound);
  ASSERT_TRUE(pod) << "batch not bound";
  std::optional<slurm::JobInfo> job = ExpectOneJobFor({*pod});
  ASSERT_TRUE(job);
  EXPECT_EQ(job->batch_host, pod->spec.node_name);
  // The job's script runs: a process slurmstepd started with the job's id in its environment,
  // running the script the bridge submitted (read through the process's own root: the Slurm
  // chroot).
  std::string script;
  ASSERT_TRUE(WaitFor([&] { return !(script = RunningScript(job->job_id)).empty(); }, 30s))
      << "no process of Slurm job " << job->job_id << " runs its batch script";
  EXPECT_NE(script.find("slurm-bridge placeholder for Pod/" + ns_ + "/batch"), std::string::npos)
      << script;
}

}  // namespace
}  // namespace sb::scheduler
