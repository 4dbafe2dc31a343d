// SPDX-License-Identifier: Apache-2.0
//
// The pod lifecycle on real kubelets: `slurm-bridge all` (scheduler + controllers) against the
// test environment started with `testenv/up.sh --kubelets` (ctest fixture testenv-kubelets),
// where every Slurm node has a kubelet and a containerd of its own. Nothing here plays the
// kubelet: pods run real containers (image localhost/busybox:1, imported at node start) and
// their phases come from the kubelets.
#include <cstdio>
#include <ctime>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <boost/json.hpp>

#include "admission/review.h"
#include "bridge/gres.h"
#include "bridge/names.h"
#include "kube/codec.h"
#include "testing/kubelet_e2e.h"
#include "testing/paths.h"

namespace sb::controllers {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;

class KubeletE2e : public sb::testing::KubeletE2eBase {
 protected:
  // A pod for the bridge whose one container runs `script` in busybox.
  void CreateRunningPod(const std::string& name, const std::string& script) {
    std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},
        "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "terminationGracePeriodSeconds":5,
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c",{}],
        "env":[{{"name":"NODE_NAME","valueFrom":{{"fieldRef":{{"fieldPath":"spec.nodeName"}}}}}}],
        "resources":{{"limits":{{"cpu":"100m","memory":"64Mi"}}}}}}]}}}})",
        name, ns_, boost::json::serialize(boost::json::string(script)));
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(r) << r.error().message;
  }

  bool HasEvent(const std::string& pod, const std::string& reason) {
    return std::ranges::any_of(Events(pod),
                               [&](const kube::Event& e) { return e.reason == reason; });
  }

  static bool HasEnded(const kube::Pod& p) {
    return p.status.phase == "Succeeded" || p.status.phase == "Failed";
  }

  // `kubectl` against the test cluster; its output (a test failure when it fails).
  std::string Kubectl(const std::string& args) {
    return Shell(fmt::format("KUBECONFIG={} kubectl {} 2>&1", env_.Get("KUBECONFIG"), args));
  }

  // Polls `kubectl <args>` until it prints exactly `want` (for `limit`); the failure names what it
  // printed last.
  ::testing::AssertionResult KubectlShows(const std::string& args, const std::string& want,
                                          std::chrono::seconds limit = 60s) {
    std::string shown;
    if (WaitFor(
            [&] {
              shown = Kubectl(args);
              return shown == want;
            },
            limit)) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "kubectl " << args << " shows '" << shown << "', not '" << want << "'";
  }

  // The Slurm node names that Slurm's host list `nodes` ("n[1-3],n5") names.
  std::set<std::string> Hostnames(const std::string& nodes) {
    std::set<std::string> out;
    std::stringstream in(Slurm("scontrol show hostnames " + nodes));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.insert(line);
    }
    return out;
  }

  // Whether the Kubernetes Node `name` is Ready as the node lifecycle controller sees it.
  std::optional<bool> NodeReady(const std::string& name) {
    auto n = RunSync(io_, kube::GetNode(*kube_, name));
    if (!n) return std::nullopt;
    for (const kube::Condition& c : n->conditions) {
      if (c.type == "Ready") return c.status == "True";
    }
    return std::nullopt;
  }

  // Seconds since the epoch of an RFC 3339 UTC time ("2026-12-01T10:00:05Z"); 0 when malformed.
  static std::int64_t EpochOf(const std::string& t) {
    std::tm tm{};
    if (std::sscanf(t.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
      return 0;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<std::int64_t>(timegm(&tm));
  }

  // The container log of `pod`, through the apiserver and the pod's kubelet.
  std::string LogsCommand(const std::string& pod) {
    return fmt::format("KUBECONFIG={} kubectl logs -n {} {} 2>/dev/null", env_.Get("KUBECONFIG"),
                       ns_, pod);
  }
  std::string Logs(const std::string& pod) { return Shell(LogsCommand(pod)); }
  // The container log of `pod` once it has one (a failure after `timeout` without).
  std::string WaitForLogs(const std::string& pod,
                          std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::string logs;
    EXPECT_TRUE(WaitFor(
        [&] {
          // (Not Logs(): kubectl fails until the container has started.)
          return testing::RunCommand(LogsCommand(pod), &logs) == 0 && !logs.empty();
        },
        timeout))
        << pod << ": no log";
    return logs;
  }

  // A non-exclusive pod on `node` running `command`, asking one device of the DRA extended
  // resource `resource`; `more_annotations`: further ,"key":"value" pairs.
  void CreateDraPod(const std::string& name, const std::string& node, const std::string& command,
                    const std::string& resource, const std::string& more_annotations = "") {
    const std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"{}}}}},
        "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "terminationGracePeriodSeconds":5,"nodeSelector":{{"kubernetes.io/hostname":"{}"}},
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c",{}],
        "resources":{{"limits":{{"memory":"64Mi","{}":"1"}}}}}}]}}}})",
        name, ns_, more_annotations, node, boost::json::serialize(boost::json::string(command)),
        resource);
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(r) << r.error().message;
  }
};

TEST_F(KubeletE2e, BoundPodRunsToSucceededAndItsJobEnds) {
  scheduler_ = StartBridge("all");
  CreateRunningPod("runs", "echo ran on $NODE_NAME; sleep 2; echo done");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> bound = WaitForPod("runs", IsBound, 60s);
  ASSERT_TRUE(bound) << "not bound";
  const std::int64_t job = JobId(*bound);
  ASSERT_GT(job, 0);
  // Bound where Slurm placed the job.
  auto info = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->nodes, SlurmNames()[bound->spec.node_name]) << bound->spec.node_name;

  // The kubelet runs the container, which ends by itself: the phase comes from the kubelet.
  std::optional<kube::Pod> done = WaitForPod(
      "runs",
      [](const kube::Pod& p) {
        return p.status.phase == "Succeeded" || p.status.phase == "Failed";
      },
      120s);
  ASSERT_TRUE(done) << "the container did not end";
  ASSERT_EQ(done->status.phase, "Succeeded") << done->status.message;
  EXPECT_TRUE(HasEvent("runs", "Started"));  // the kubelet's event: the container really ran
  const std::string logs = Logs("runs");
  EXPECT_NE(logs.find("ran on " + bound->spec.node_name + "\n"), std::string::npos) << logs;
  EXPECT_NE(logs.find("done"), std::string::npos) << logs;

  // The controllers then end its Slurm job and release the pod.
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "runs"));
        if (!p) return p.error().code == ErrorCode::kNotFound;
        return std::ranges::count(p->metadata.finalizers, std::string(bridge::kFinalizer)) == 0;
      },
      30s));
}

// scancel of a running pod's job: the controllers delete the pod, its kubelet stops the container
// (the graceful deletion completes only then) and the pod object goes.
TEST_F(KubeletE2e, ScancelStopsTheContainerAndThePodGoes) {
  scheduler_ = StartBridge("all");
  CreateRunningPod("long", "echo started; sleep 600");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> running = WaitForPod("long", IsRunning, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  ASSERT_GT(job, 0);
  EXPECT_EQ(JobState(job), "RUNNING");
  Slurm(fmt::format("scancel {}", job));
  EXPECT_TRUE(WaitFor([&] { return PodGone("long"); }, 90s)) << "the pod was not deleted";
  EXPECT_TRUE(HasEvent("long", "SlurmJobEnded"));
  EXPECT_TRUE(HasEvent("long", "Killing")) << "the kubelet stopped the container";
  EXPECT_EQ(JobState(job), "CANCELLED");
}

// A container that fails (exit 1): the pod is Failed by its kubelet and its job is ended.
TEST_F(KubeletE2e, FailedContainerEndsItsJob) {
  scheduler_ = StartBridge("all");
  CreateRunningPod("fails", "echo failing; exit 1");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> ended = WaitForPod("fails", HasEnded, 120s);
  ASSERT_TRUE(ended) << "the container did not end";
  EXPECT_EQ(ended->status.phase, "Failed");
  const std::int64_t job = JobId(*ended);
  ASSERT_GT(job, 0);
  EXPECT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
  EXPECT_NE(Logs("fails").find("failing"), std::string::npos);
}

// A gang Job of 4 pods: one Slurm job of 4 nodes, each pod bound to (and its container run on) a
// different node of that job; all Succeed, then the job is ended.
TEST_F(KubeletE2e, GangJobRunsItsFourContainersOnTheFourNodesOfOneSlurmJob) {
  scheduler_ = StartBridge("all");
  const std::string manifest = fmt::format(
      R"({{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"gang","namespace":"{}",
      "annotations":{{"slurmjob.slinky.slurm.net/gang":"true"}}}},
      "spec":{{"parallelism":4,"completions":4,"backoffLimit":0,"template":{{"spec":{{
      "schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "terminationGracePeriodSeconds":5,
      "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
      "command":["sh","-c","echo member on $NODE_NAME; sleep 3"],
      "env":[{{"name":"NODE_NAME","valueFrom":{{"fieldRef":{{"fieldPath":"spec.nodeName"}}}}}}],
      "resources":{{"limits":{{"cpu":"100m","memory":"64Mi"}}}}}}]}}}}}}}})",
      ns_);
  auto created = RunSync(io_, kube_->Create(kube::JobsRef(ns_), manifest));
  ASSERT_TRUE(created) << created.error().message;
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return pods.size() == 4 &&
               std::ranges::all_of(pods, [](const kube::Pod& p) { return HasEnded(p); });
      },
      180s))
      << pods.size() << " pods";
  std::set<std::int64_t> jobs;
  std::set<std::string> kube_nodes;
  std::set<std::string> slurm_nodes;
  for (const kube::Pod& p : pods) {
    EXPECT_EQ(p.status.phase, "Succeeded") << p.metadata.name << ": " << p.status.message;
    jobs.insert(JobId(p));
    kube_nodes.insert(p.spec.node_name);
    slurm_nodes.insert(SlurmNames()[p.spec.node_name]);
    EXPECT_NE(Logs(p.metadata.name).find("member on " + p.spec.node_name + "\n"), std::string::npos)
        << p.metadata.name;
  }
  ASSERT_EQ(jobs.size(), 1u) << "one Slurm job for the gang";
  EXPECT_EQ(kube_nodes.size(), 4u) << "four different nodes";
  const std::int64_t job = *jobs.begin();
  auto info = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(Hostnames(info->nodes), slurm_nodes)
      << "the pods ran on the job's nodes: " << info->nodes;
  EXPECT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
}

// Issue #27 on real kubelets: a coscheduling PodGroup of a launcher (no GPU) and 3 workers of
// another shape (a GPU each), not exclusive, is one Slurm heterogeneous job of two components
// (which may share a node: the launcher beside a worker). Every container
// runs, on a node of its own component, and reads the GPUs Slurm gave that component on its node
// (the workers one index each); the pods carry the het job's labels.
TEST_F(KubeletE2e, HeterogeneousPodGroupRunsEachPartOnItsOwnComponent) {
  scheduler_ = StartBridge("all");
  auto pg = RunSync(
      io_, kube_->Create(kube::ResourceRef{.group = "scheduling.x-k8s.io",
                                           .version = "v1alpha1",
                                           .resource = "podgroups",
                                           .namespace_ = ns_},
                         fmt::format(R"({{"apiVersion":"scheduling.x-k8s.io/v1alpha1",)"
                                     R"("kind":"PodGroup","metadata":{{"name":"mpi",)"
                                     R"("namespace":"{}","annotations":)"
                                     R"({{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},)"
                                     R"("spec":{{"minMember":4}}}})",
                                     ns_)));
  ASSERT_TRUE(pg) << pg.error().message;
  auto create = [&](const std::string& name, const std::string& limits) {
    const std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "labels":{{"scheduling.x-k8s.io/pod-group":"mpi"}}}},
        "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "terminationGracePeriodSeconds":5,
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c","echo on $NODE_NAME gpus=$GPUS; sleep 3"],
        "env":[{{"name":"NODE_NAME","valueFrom":{{"fieldRef":{{"fieldPath":"spec.nodeName"}}}}}},
        {{"name":"GPUS","valueFrom":{{"fieldRef":{{"fieldPath":
        "metadata.annotations['slinky.slurm.net/slurm-job-gpus']"}}}}}}],
        "resources":{{"limits":{}}}}}]}}}})",
        name, ns_, limits);
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(r) << r.error().message;
  };
  create("launcher", R"({"cpu":"100m","memory":"64Mi"})");
  for (int i = 0; i < 3; ++i) {
    create("worker-" + std::to_string(i), R"({"cpu":"200m","memory":"64Mi","nvidia.com/gpu":"1"})");
  }
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return pods.size() == 4 &&
               std::ranges::all_of(pods, [](const kube::Pod& p) { return HasEnded(p); });
      },
      180s))
      << pods.size() << " pods";
  const std::int64_t id = JobId(pods.front());
  auto records = RunSync(io_, slurm_->GetJobRecords(id));
  ASSERT_TRUE(records) << records.error().ToString();
  ASSERT_EQ(records->size(), 2u) << "components of Slurm job " << id;
  std::map<std::string, std::string> offset_of;  // pod -> its het-job-offset label
  for (const kube::Pod& p : pods) {
    SCOPED_TRACE(p.metadata.name);
    EXPECT_EQ(p.status.phase, "Succeeded") << p.status.message;
    EXPECT_EQ(JobId(p), id);
    EXPECT_EQ(p.metadata.labels.at(std::string(bridge::kHetJobIdLabel)), std::to_string(id));
    const std::string offset = p.metadata.labels.at(std::string(bridge::kHetJobOffsetLabel));
    offset_of[p.metadata.name] = offset;
    const slurm::JobInfo& component = (*records)[offset == "1" ? 1 : 0];
    EXPECT_TRUE(Hostnames(component.nodes).contains(SlurmNames()[p.spec.node_name]))
        << p.spec.node_name << " is not a node of component " << offset << " (" << component.nodes
        << ")";
    const std::string log = Logs(p.metadata.name);
    EXPECT_NE(log.find("on " + p.spec.node_name + " gpus="), std::string::npos) << log;
    // Not exclusive, so each component holds what it asks for: a worker's component one GPU per
    // node (one index), the launcher's none (an exclusive job would hold the node's four).
    const std::size_t at = log.find("gpus=");
    const std::string gpus =
        at == std::string::npos ? "?" : log.substr(at + 5, log.find('\n', at) - at - 5);
    EXPECT_EQ(gpus.size(), p.metadata.name == "launcher" ? 0u : 1u) << log;
  }
  EXPECT_NE(offset_of["launcher"], offset_of["worker-0"]);
  EXPECT_EQ(offset_of["worker-0"], offset_of["worker-1"]);
  EXPECT_EQ(offset_of["worker-1"], offset_of["worker-2"]);
  // Every member done: the controllers cancel the het job, every component with it.
  EXPECT_TRUE(WaitFor([&] { return JobState(id) == "CANCELLED"; }, 30s)) << JobState(id);
}

// A kubelet stopped under a running pod: its Node turns NotReady (node lifecycle controller), the
// pod is deleted and stays Terminating (no kubelet confirms). Its job is released only once the
// grace period has passed, not at the deletion (the containers may still run), and the pod goes
// when the kubelet is back.
TEST_F(KubeletE2e, StoppedKubeletReleasesTheJobOnlyAfterTheGracePeriod) {
  scheduler_ = StartBridge("all");
  CreateRunningPod("stranded", "sleep 600");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> running = WaitForPod("stranded", IsRunning, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  const std::string node = running->spec.node_name;
  auto node_sh = [&](const std::string& what) {
    return fmt::format("{}/testenv/kube/node.sh {} {} {} 2>&1", sb::testing::SourceDir(), what,
                       env_.dir(), node);
  };
  Shell(node_sh("stop-kubelet"));
  Restore restart([&] { Shell(node_sh("start-kubelet")); });
  ASSERT_TRUE(WaitFor([&] { return NodeReady(node) == false; }, 120s)) << node << " stays Ready";
  EXPECT_EQ(JobState(job), "RUNNING");

  auto deleted = RunSync(io_, kube::DeletePod(*kube_, ns_, "stranded", {}));
  ASSERT_TRUE(deleted) << deleted.error().message;
  auto terminating = RunSync(io_, kube::GetPod(*kube_, ns_, "stranded"));
  ASSERT_TRUE(terminating) << terminating.error().message;
  // The apiserver sets deletionTimestamp to the deletion time plus the grace period (5 s).
  const std::int64_t grace_end = EpochOf(terminating->metadata.deletion_timestamp);
  ASSERT_GT(grace_end, 0) << terminating->metadata.deletion_timestamp;
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 60s)) << JobState(job);
  auto info = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(info) << info.error().ToString();
  ASSERT_TRUE(info->end_time.Value());
  EXPECT_GE(*info->end_time.Value(), grace_end) << "released before the grace period ended";
  EXPECT_FALSE(PodGone("stranded")) << "no kubelet confirmed the deletion";

  Shell(node_sh("start-kubelet"));
  restart.undo = nullptr;
  EXPECT_TRUE(WaitFor([&] { return PodGone("stranded"); }, 90s))
      << "the kubelet back did not finish the deletion";
}

// `kubectl drain` of a node with a running pod: the cordon drains the Slurm node (with the
// bridge's reason), the eviction deletes the pod through its kubelet and the job is ended.
TEST_F(KubeletE2e, KubectlDrainDrainsTheSlurmNodeAndEndsTheJob) {
  scheduler_ = StartBridge("all");
  CreateRunningPod("evicted", "sleep 600");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> running = WaitForPod("evicted", IsRunning, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  const std::string node = running->spec.node_name;
  const std::string slurm_node = SlurmNames()[node];
  Restore uncordon([&] { Kubectl("uncordon " + node); });
  // Not managed by a controller: --force, as an operator would.
  Kubectl("drain " + node + " --force --ignore-daemonsets --timeout=120s");
  EXPECT_TRUE(PodGone("evicted"));
  EXPECT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
  std::string shown;
  EXPECT_TRUE(WaitFor(
      [&] {
        shown = Slurm("scontrol show node " + slurm_node);
        return shown.find("DRAIN") != std::string::npos &&
               shown.find("slurm-bridge: Corresponding Kubernetes node") != std::string::npos;
      },
      30s))
      << shown;
}

// `kubectl drain` of a Slurm node whose pod a policy/v1 PodDisruptionBudget protects (the
// disruption controller keeps the budget's status): while the budget forbids it, the eviction is
// refused, and the pod and its Slurm job stay; once it allows it, the pod goes and its job is
// cancelled.
TEST_F(KubeletE2e, DrainHonoursAPodDisruptionBudget) {
  scheduler_ = StartBridge("all");
  const std::string manifest = fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"guarded","namespace":"{}",
      "labels":{{"app":"guarded"}},"annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},
      "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "terminationGracePeriodSeconds":5,
      "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
      "command":["sleep","600"],"resources":{{"limits":{{"cpu":"100m","memory":"64Mi"}}}}}}]}}}})",
      ns_);
  auto created = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
  ASSERT_TRUE(created) << created.error().message;
  const std::string pdb = fmt::format(
      R"({{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{{"name":"keep","namespace":"{}"}},
      "spec":{{"minAvailable":1,"selector":{{"matchLabels":{{"app":"guarded"}}}}}}}})",
      ns_);
  kube::ResourceRef pdbs{
      .group = "policy", .version = "v1", .resource = "poddisruptionbudgets", .namespace_ = ns_};
  auto made = RunSync(io_, kube_->Create(pdbs, pdb));
  ASSERT_TRUE(made) << made.error().message;
  std::optional<kube::Pod> running = WaitForPod("guarded", IsRunning, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  const std::string node = running->spec.node_name;
  // The disruption controller has counted the pod: 1 healthy, 0 disruptions allowed.
  const std::string status = "get pdb keep -n " + ns_ +
                             " -o jsonpath='{.status.currentHealthy}/{.status.disruptionsAllowed}'";
  ASSERT_TRUE(KubectlShows(status, "1/0"));
  Restore uncordon([&] { Kubectl("uncordon " + node); });
  std::string out;
  const int rc = sb::testing::RunCommand(
      fmt::format("KUBECONFIG={} kubectl drain {} --force --ignore-daemonsets --timeout=15s 2>&1",
                  env_.Get("KUBECONFIG"), node),
      &out);
  EXPECT_NE(rc, 0) << "the drain went through the budget:\n" << out;
  EXPECT_NE(out.find("disruption budget"), std::string::npos) << out;
  auto still = RunSync(io_, kube::GetPod(*kube_, ns_, "guarded"));
  ASSERT_TRUE(still) << "the protected pod is gone: " << still.error().message;
  EXPECT_EQ(still->status.phase, "Running");
  EXPECT_TRUE(still->metadata.deletion_timestamp.empty());
  EXPECT_EQ(JobState(job), "RUNNING");
  // The budget allows one disruption now (minAvailable 0: a bare pod has no controller whose
  // scale a maxUnavailable could be counted against): the drain evicts the pod, and its job ends.
  Kubectl("patch pdb keep -n " + ns_ + R"( --type=merge -p '{"spec":{"minAvailable":0}}')");
  ASSERT_TRUE(KubectlShows(status, "1/1"));
  Kubectl("drain " + node + " --force --ignore-daemonsets --timeout=120s");
  EXPECT_TRUE(WaitFor([&] { return PodGone("guarded"); }, 60s)) << "the pod was not evicted";
  EXPECT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
}

// A native sidecar (an init container with restartPolicy Always) runs beside the main container
// on the node of the pod's Slurm job; when the main container ends, the kubelet stops the sidecar,
// the pod Succeeds and its job is ended.
// N-13 on real kubelets: another scheduler's pod requests a CPU on every node but the last (a
// node agent bound there directly); a bridge pod asking for a whole node's allocatable CPU is
// placed on the last node, not on one where the kubelet would refuse it (OutOfcpu), and runs.
// (Without the others' requests Slurm takes its first idle node.)
TEST_F(KubeletE2e, OtherPodsRequestsKeepAWholeNodePodOffTheirNodes) {
  const std::map<std::string, std::string> names = SlurmNames();
  ASSERT_GE(names.size(), 2u);
  const std::string free = names.rbegin()->first;
  auto node = RunSync(io_, kube::GetNode(*kube_, free));
  ASSERT_TRUE(node) << node.error().message;
  const std::string cpus = node->allocatable.at("cpu");
  std::vector<std::string> agents;
  for (const auto& [k8s, slurm] : names) {
    if (k8s == free) continue;
    const std::string name = "agent-" + std::to_string(agents.size());
    const std::string agent = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}"}},
        "spec":{{"nodeName":"{}","restartPolicy":"Never","terminationGracePeriodSeconds":1,
        "tolerations":[{{"operator":"Exists"}}],
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
          "command":["sleep","600"],"resources":{{"requests":{{"cpu":"1"}}}}}}]}}}})",
        name, ns_, k8s);
    auto created = RunSync(io_, kube_->Create(kube::PodsRef(ns_), agent));
    ASSERT_TRUE(created) << created.error().message;
    agents.push_back(name);
  }
  for (const std::string& a : agents) {
    ASSERT_TRUE(WaitForPod(a, IsRunning, 120s)) << a << " did not start";
  }
  scheduler_ = StartBridge("all");
  const std::string whole = fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"whole","namespace":"{}"}},
      "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "terminationGracePeriodSeconds":1,
      "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sleep","5"],"resources":{{"requests":{{"cpu":"{}"}}}}}}]}}}})",
      ns_, cpus);
  auto created = RunSync(io_, kube_->Create(kube::PodsRef(ns_), whole));
  ASSERT_TRUE(created) << created.error().message;
  std::optional<kube::Pod> done = WaitForPod("whole", HasEnded, 180s);
  ASSERT_TRUE(done) << "the whole-node pod did not run";
  EXPECT_EQ(done->status.phase, "Succeeded") << done->status.reason << ": " << done->status.message;
  EXPECT_EQ(done->spec.node_name, free) << "placed beside an agent's CPU";
  for (const std::string& a : agents) {
    (void)RunSync(io_, kube_->Delete(kube::PodsRef(ns_).WithName(a), {.grace_period_seconds = 0}));
  }
}

TEST_F(KubeletE2e, NativeSidecarRunsBesideTheMainContainerOnTheSlurmNode) {
  scheduler_ = StartBridge("all");
  const std::string manifest = fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"withsidecar","namespace":"{}",
      "annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},
      "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "terminationGracePeriodSeconds":5,
      "initContainers":[{{"name":"proxy","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "restartPolicy":"Always","command":["sh","-c","echo proxy on $NODE_NAME; exec sleep 600"],
        "env":[{{"name":"NODE_NAME","valueFrom":{{"fieldRef":{{"fieldPath":"spec.nodeName"}}}}}}],
        "resources":{{"limits":{{"cpu":"100m","memory":"32Mi"}}}}}}],
      "containers":[{{"name":"main","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c","sleep 15; echo main done"],
        "resources":{{"limits":{{"cpu":"100m","memory":"64Mi"}}}}}}]}}}})",
      ns_);
  auto created = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
  ASSERT_TRUE(created) << created.error().message;
  std::optional<kube::Pod> running = WaitForPod("withsidecar", IsRunning, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  ASSERT_GT(job, 0);
  auto info = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->nodes, SlurmNames()[running->spec.node_name]);
  // Both containers run at once, on that node.
  const std::string states = "get pod withsidecar -n " + ns_ +
                             " -o "
                             "jsonpath='{.status.initContainerStatuses[0].started}/"
                             "{.status.containerStatuses[0].started}'";
  ASSERT_TRUE(KubectlShows(states, "true/true"));
  std::string logs;
  EXPECT_TRUE(WaitFor(
      [&] {
        logs = Kubectl("logs -n " + ns_ + " withsidecar -c proxy");
        return logs.find("proxy on " + running->spec.node_name) != std::string::npos;
      },
      30s))
      << logs;
  // The main container ends: the sidecar is stopped with it and the pod Succeeds.
  std::optional<kube::Pod> done = WaitForPod("withsidecar", HasEnded, 120s);
  ASSERT_TRUE(done) << "the pod did not end";
  EXPECT_EQ(done->status.phase, "Succeeded") << done->status.message;
  EXPECT_TRUE(WaitFor([&] { return JobState(job) == "CANCELLED"; }, 30s)) << JobState(job);
}

// Slurm's allocation reaches the container: two non-exclusive one-GPU pods on one node, their
// containers given the environment the webhook adds (admission::SlurmEnv: the job-id label and
// the GPU annotation through the downward API), each see their own Slurm job and a different GPU
// index, the one Slurm gave that job (its gres_detail).
TEST_F(KubeletE2e, TwoOneGpuPodsOnOneNodeSeeTheirOwnJobsGpus) {
  scheduler_ = StartBridge("all");
  boost::json::array env;
  for (const auto& [name, path] : admission::SlurmEnv(admission::Policy{})) {
    env.push_back({{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}});
  }
  const std::vector<std::string> pods = {"gpu-a", "gpu-b"};
  for (const std::string& name : pods) {
    const std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},
        "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "terminationGracePeriodSeconds":5,"nodeSelector":{{"kubernetes.io/hostname":"n2"}},
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c","echo job=$SLURM_JOB_ID gpus=$SLURM_JOB_GPUS; sleep 30"],
        "env":{},
        "resources":{{"limits":{{"cpu":"100m","memory":"64Mi","nvidia.com/gpu":"1"}}}}}}]}}}})",
        name, ns_, boost::json::serialize(env));
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(r) << r.error().message;
  }
  std::set<std::string> seen;
  for (const std::string& name : pods) {
    std::optional<kube::Pod> running = WaitForPod(name, IsRunning, 120s);
    ASSERT_TRUE(running) << name << " not running";
    EXPECT_EQ(running->spec.node_name, "n2");
    const std::int64_t job = JobId(*running);
    auto info = RunSync(io_, slurm_->GetJob(job));
    ASSERT_TRUE(info) << info.error().ToString();
    ASSERT_EQ(info->gres_detail.size(), 1u) << name;
    const std::string gpus = bridge::GpuIndices(info->gres_detail[0]);
    ASSERT_FALSE(gpus.empty()) << info->gres_detail[0];
    EXPECT_EQ(gpus.find(','), std::string::npos) << "one GPU: " << gpus;
    seen.insert(gpus);
    const std::string logs = WaitForLogs(name);
    EXPECT_EQ(logs, fmt::format("job={} gpus={}\n", job, gpus)) << name;
  }
  EXPECT_EQ(seen.size(), 2u) << "both pods were given the same GPU";
}

// External-node registration on a real kubelet without slurmd (the environment's kube-x1, in no
// Slurm partition): labelled, it becomes a Slurm external node in partition `ext` and gets the
// managed-node taint; a bridge pod asking for that partition gets a job there and its container
// runs on that kubelet; unlabelled, the node is drained, deleted in Slurm and loses the taint.
TEST_F(KubeletE2e, ExternalKubeletNodeJoinsSlurmRunsAPodAndLeaves) {
  const std::string node = env_.Get("KUBE_EXTERNAL_NODES");
  ASSERT_FALSE(node.empty()) << "the environment has no kubelet without slurmd";
  AddConfig("identityPolicy: [{namespaces: [\"*\"], partitions: [ext]}]\n");
  scheduler_ = StartBridge("all");
  Restore unlabel([&] {
    Kubectl("label node " + node + " scheduler.slinky.slurm.net/external-node-");
    WaitFor(
        [&] { return Slurm("scontrol show node " + node).find("not found") != std::string::npos; },
        60s);
  });
  Kubectl("annotate --overwrite node " + node +
          " scheduler.slinky.slurm.net/external-node-partitions=ext");
  Kubectl("label --overwrite node " + node + " scheduler.slinky.slurm.net/external-node=");
  std::string shown;
  ASSERT_TRUE(WaitFor(
      [&] {
        shown = Slurm("scontrol show node " + node);
        return shown.find("EXTERNAL") != std::string::npos &&
               shown.find("Partitions=ext") != std::string::npos;
      },
      60s))
      << shown;
  EXPECT_TRUE(KubectlShows("get node " + node + " -o jsonpath={.spec.taints[*].key}",
                           "slinky.slurm.net/managed-node"));
  const std::string manifest = fmt::format(
      R"j({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"on-ext","namespace":"{}",
      "annotations":{{"slurmjob.slinky.slurm.net/partition":"ext"}}}},
      "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "terminationGracePeriodSeconds":5,
      "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
      "command":["sh","-c","echo ran on $(hostname)"],
      "resources":{{"limits":{{"cpu":"100m","memory":"64Mi"}}}}}}]}}}})j",
      ns_);
  auto created = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
  ASSERT_TRUE(created) << created.error().message;
  std::optional<kube::Pod> done = WaitForPod("on-ext", HasEnded, 120s);
  ASSERT_TRUE(done) << "the pod did not run";
  EXPECT_EQ(done->status.phase, "Succeeded");
  EXPECT_EQ(done->spec.node_name, node);
  const std::int64_t job = JobId(*done);
  auto info = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(info) << info.error().ToString();
  EXPECT_EQ(info->nodes, node);
  EXPECT_EQ(info->partition, "ext");
  EXPECT_TRUE(WaitFor([&] { return JobState(job) != "RUNNING"; }, 30s))
      << "the job outlived its pod";
  // Unlabelled: drained, deleted in Slurm (no job holds it), and no longer a managed node.
  Kubectl("label node " + node + " scheduler.slinky.slurm.net/external-node-");
  EXPECT_TRUE(WaitFor(
      [&] { return Slurm("scontrol show node " + node).find("not found") != std::string::npos; },
      60s))
      << Slurm("scontrol show node " + node);
  EXPECT_TRUE(KubectlShows("get node " + node + " -o jsonpath={.spec.taints[*].key}", ""));
}

// nodeSharing coResident (upstream 1.3, their #48): a native `sbatch` job holding 6 of n3's 8
// Slurm CPUs and two bridge pods of 500m each (1 Slurm CPU, rounded up) run on n3 at once, each
// Slurm job given what its pod requests, and each container capped by its kubelet at its
// request (cgroup cpu.max). A third pod, for which n3 has no core left in Slurm, gets no node:
// its job waits (Resources) and the pod stays unbound until the native job ends, then runs
// there. (The test kubelets offer 2 CPUs, the machine's, while Slurm counts 8.)
TEST_F(KubeletE2e, CoResidentPodsShareANodeCoreByCoreWithANativeJob) {
  AddConfig("nodeSharing: coResident\n");
  scheduler_ = StartBridge("all");
  const std::string native = Slurm(
      "sbatch --parsable -p batch -w n3 -c 6 --mem=100M -o /dev/null -J native --wrap='sleep 600'");
  const std::int64_t native_id = std::atoll(native.c_str());
  ASSERT_GT(native_id, 0) << native;
  Restore cancel([&] { Slurm(fmt::format("scancel {}", native_id)); });
  ASSERT_TRUE(WaitFor([&] { return JobState(native_id) == "RUNNING"; }, 30s))
      << JobState(native_id);
  auto create = [&](const std::string& name, const std::string& cpu) {
    const std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}"}},
        "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "terminationGracePeriodSeconds":5,"nodeSelector":{{"kubernetes.io/hostname":"n3"}},
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c","cut -d' ' -f1 /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us; sleep 600"],
        "resources":{{"requests":{{"cpu":"{}","memory":"64Mi"}},
                      "limits":{{"cpu":"{}","memory":"64Mi"}}}}}}]}}}})",
        name, ns_, cpu, cpu);
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(r) << r.error().message;
  };
  create("share-a", "500m");
  create("share-b", "500m");
  if (HasFatalFailure()) return;
  for (const std::string name : {"share-a", "share-b"}) {
    std::optional<kube::Pod> running = WaitForPod(name, IsRunning, 120s);
    ASSERT_TRUE(running) << name << " not running";
    EXPECT_EQ(running->spec.node_name, "n3");
    auto info = RunSync(io_, slurm_->GetJob(JobId(*running)));
    ASSERT_TRUE(info) << info.error().ToString();
    EXPECT_EQ(info->nodes, "n3") << name;
    EXPECT_EQ(info->cpus, 1) << name << ": Slurm gave what the pod requests";
    const std::string logs = WaitForLogs(name);
    EXPECT_EQ(logs, "50000\n") << name
                               << ": the kubelet caps it at its 500m (CFS quota per 100 ms)";
  }
  EXPECT_EQ(JobState(native_id), "RUNNING") << "the native job shares n3 all along";
  // n3's 8 Slurm CPUs are all held (6 + 1 + 1): a third pod waits for Slurm.
  create("share-c", "500m");
  if (HasFatalFailure()) return;
  std::int64_t third = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "share-c"));
        third = p ? JobId(*p) : 0;
        return third > 0;
      },
      60s))
      << "share-c got no job";
  std::string state, reason;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto j = RunSync(io_, slurm_->GetJob(third));
        state = j ? std::string(j->BaseState()) : "?";
        reason = j ? j->state_reason : "?";
        return state == "PENDING" && reason == "Resources";
      },
      30s))
      << state << " " << reason << "\n"
      << Slurm("scontrol show node n3") << Slurm("squeue -w n3 -o '%i %j %C %T'");
  std::this_thread::sleep_for(3s);
  auto waiting = RunSync(io_, kube::GetPod(*kube_, ns_, "share-c"));
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->spec.node_name, "") << "bound where Slurm gave it nothing";
  Slurm(fmt::format("scancel {}", native_id));
  std::optional<kube::Pod> running = WaitForPod("share-c", IsRunning, 120s);
  ASSERT_TRUE(running) << "share-c did not run once the native job ended";
  EXPECT_EQ(running->spec.node_name, "n3");
}

// Upstream #16 on real kubelets: a deleted pod whose preStop hook takes 20 s keeps its Slurm job
// (and the GPU the job holds) while its container still runs; the job ends only once the kubelet
// has stopped the container and the pod is gone.
TEST_F(KubeletE2e, PreStopHookKeepsTheJobUntilTheContainerHasStopped) {
  scheduler_ = StartBridge("all");
  const std::string manifest = fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"graceful","namespace":"{}",
      "annotations":{{"slurmjob.slinky.slurm.net/exclusive":"false"}}}},
      "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
      "terminationGracePeriodSeconds":60,
      "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
      "command":["sh","-c","trap 'exit 0' TERM; sleep 600 & wait"],
      "lifecycle":{{"preStop":{{"exec":{{"command":["sleep","20"]}}}}}},
      "resources":{{"limits":{{"cpu":"100m","memory":"64Mi","nvidia.com/gpu":"1"}}}}}}]}}}})",
      ns_);
  auto created = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
  ASSERT_TRUE(created) << created.error().message;
  std::optional<kube::Pod> running = WaitForPod("graceful", IsRunning, 120s);
  ASSERT_TRUE(running) << "not running";
  const std::int64_t job = JobId(*running);
  ASSERT_GT(job, 0);
  Kubectl(fmt::format("delete pod -n {} graceful --wait=false", ns_));
  const auto deleted = std::chrono::steady_clock::now();
  // Well inside the preStop's 20 s: the container runs, so the job and its GPU stay held.
  std::this_thread::sleep_for(12s);
  EXPECT_FALSE(PodGone("graceful")) << "the pod went before its preStop hook ended";
  auto held = RunSync(io_, slurm_->GetJob(job));
  ASSERT_TRUE(held) << held.error().ToString();
  EXPECT_EQ(held->BaseState(), "RUNNING") << "the job ended while the container still ran";
  EXPECT_EQ(held->gres_detail.size(), 1u) << "the job holds its GPU";
  EXPECT_TRUE(WaitFor([&] { return PodGone("graceful"); }, 60s)) << "the pod never went";
  EXPECT_GE(std::chrono::steady_clock::now() - deleted, 18s);
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::string s = JobState(job);
        return s == "CANCELLED" || s == "COMPLETED" || s == "NOTFOUND";
      },
      30s))
      << "the job outlived its pod: " << JobState(job);
}

// Issue #28 on real kubelets with the test DRA driver (testing/dra-driver: ResourceSlices for
// each node's 4 fake GPUs and 8 CPUs, CDI through containerd 1.7): two non-exclusive pods asking
// for deviceclass.resource.kubernetes.io/gpu.example.com on one node each see, from inside the
// container, exactly the GPU index Slurm gave their own job (`scontrol show job -d`), which their
// claims name; a dra.cpu pod's cpuset is exactly its job's CPU_IDs. When the CPU pod ends, its
// claim and its Slurm job are both released.
TEST_F(KubeletE2e, DraPodsSeeExactlyTheDevicesSlurmGaveTheirJobs) {
  ASSERT_FALSE(env_.Get("SB_DRA_DRIVER").empty()) << "the environment runs no DRA driver";
  scheduler_ = StartBridge("all");
  const std::string gpu = "deviceclass.resource.kubernetes.io/gpu.example.com";
  for (const std::string name : {"gpu-a", "gpu-b"}) {
    CreateDraPod(name, "n2", "env | grep ^GPU_DEVICE_ | sort; sleep 30", gpu);
  }
  // Alone on its node: Slurm gives it the node's first core, which this host has (a 2-CPU
  // machine has no CPU 2 to pin).
  CreateDraPod("cpus", "n3", "grep Cpus_allowed_list /proc/self/status; sleep 5",
               "deviceclass.resource.kubernetes.io/dra.cpu");
  auto detail = [&](std::int64_t job, const std::string& key) {
    const std::string out = Slurm("scontrol show job -d " + std::to_string(job));
    std::smatch m;
    std::regex re("[ \t]" + key + "=([^ \n]+)");
    return std::regex_search(out, m, re) ? std::string(m[1]) : std::string();
  };
  auto claim_devices = [&](const kube::Pod& pod) {
    std::vector<std::string> out;
    auto name = pod.metadata.annotations.find(std::string(bridge::kResourceClaimAnnotation));
    if (name == pod.metadata.annotations.end()) return out;
    kube::ResourceRef ref{.group = "resource.k8s.io",
                          .version = "v1",
                          .resource = "resourceclaims",
                          .namespace_ = ns_,
                          .name = name->second};
    auto claim = RunSync(io_, kube::GetAs<kube::GenericObject>(*kube_, ref));
    if (!claim) return out;
    boost::json::value status = boost::json::parse(claim->status_json);
    for (const auto& r : status.at_pointer("/allocation/devices/results").as_array()) {
      out.push_back(std::string(r.at("device").as_string()));
    }
    return out;
  };
  // What Slurm gave each job and what its claim names are read as soon as the pods are bound
  // (a job runs at least as long as its container); the containers' own view comes after. A
  // kubelet that saw a Binding before the apiserver's node authorizer did cannot read the claim
  // at first: the pod controller nudges it 5 s after the Binding (without that, it would try
  // again a minute later), so a container may start late, and another may have ended by then.
  struct Given {
    std::int64_t job = 0;
    std::string slurm;  // GRES=gpu:fake:1(IDX:2), or CPU_IDs=0
    std::vector<std::string> claimed;
    std::string claim;  // its ResourceClaim's name
  };
  std::map<std::string, Given> given;
  for (const std::string name : {"gpu-a", "gpu-b", "cpus"}) {
    std::optional<kube::Pod> bound = WaitForPod(name, IsBound, 120s);
    ASSERT_TRUE(bound) << name << " not bound";
    Given& g = given[name];
    g.job = JobId(*bound);
    g.slurm = detail(g.job, name == "cpus" ? "CPU_IDs" : "GRES");
    g.claimed = claim_devices(*bound);
    g.claim = bound->metadata.annotations[std::string(bridge::kResourceClaimAnnotation)];
  }
  constexpr auto kStartedBy = std::chrono::seconds(150);
  std::set<std::string> seen;
  for (const std::string name : {"gpu-a", "gpu-b"}) {
    const Given& g = given[name];
    std::smatch m;
    ASSERT_TRUE(std::regex_search(g.slurm, m, std::regex(R"(IDX:(\d+)\))"))) << g.slurm;
    const std::string idx = m[1];
    seen.insert(idx);
    EXPECT_EQ(g.claimed, std::vector<std::string>{"gpu-" + idx}) << name;
    const std::string logs = WaitForLogs(name, kStartedBy);
    EXPECT_EQ(logs, fmt::format("GPU_DEVICE_{}=gpu-{}\n", idx, idx))
        << name << ": Slurm gave job " << g.job << " " << g.slurm;
  }
  EXPECT_EQ(seen.size(), 2u) << "both pods were given the same GPU";

  // Each pod whose kubelet was refused its claims was nudged, not left to the next sync.
  int refused = 0;
  for (const std::string name : {"gpu-a", "gpu-b", "cpus"}) {
    if (!HasEvent(name, "FailedPrepareDynamicResources")) continue;
    ++refused;
    // (The kubelet may act on the annotation before the bridge's recorder writes the Event.)
    EXPECT_TRUE(WaitFor([&] { return HasEvent(name, "KubeletNudged"); }, 15s))
        << name << ": refused its claims, never nudged";
  }
  std::printf("kubelets refused their pod's claims: %d of 3\n", refused);

  const std::int64_t cpu_job = given["cpus"].job;
  const std::string cpu_ids = given["cpus"].slurm;
  ASSERT_FALSE(cpu_ids.empty());
  const std::string logs = WaitForLogs("cpus", kStartedBy);
  EXPECT_EQ(logs, "Cpus_allowed_list:\t" + cpu_ids + "\n") << "Slurm's CPU_IDs " << cpu_ids;
  // The driver names its CPUs cpudev<3-digit id>; one CPU asked for, one id.
  EXPECT_EQ(given["cpus"].claimed,
            std::vector<std::string>{fmt::format("cpudev{:03}", std::stoi(cpu_ids))});
  // It ends (sleep 5): its claim is deleted and its job ended.
  const std::string claim = given["cpus"].claim;
  ASSERT_FALSE(claim.empty());
  kube::ResourceRef claim_ref{.group = "resource.k8s.io",
                              .version = "v1",
                              .resource = "resourceclaims",
                              .namespace_ = ns_,
                              .name = claim};
  EXPECT_TRUE(WaitFor(
      [&] {
        auto c = RunSync(io_, kube::GetAs<kube::GenericObject>(*kube_, claim_ref));
        return !c && c.error().code == ErrorCode::kNotFound;
      },
      90s))
      << "claim " << claim << " outlived its pod";
  EXPECT_TRUE(WaitFor([&] { return JobState(cpu_job) != "RUNNING"; }, 60s))
      << "job " << cpu_job << ": " << JobState(cpu_job);
}

// A kubelet whose first prepare of a pod's claims failed (here the test driver fails it on
// purpose; the node authorizer's race does the same) tries again only at its next sync, a minute
// later. The pod controller sees the bound pod without a sandbox 5 s after its Binding and
// annotates it once (KubeletNudged); the kubelet syncs the pod at that change, the second prepare
// succeeds, and the container runs.
TEST_F(KubeletE2e, KubeletRefusedItsClaimIsNudgedAndThePodStarts) {
  ASSERT_FALSE(env_.Get("SB_DRA_DRIVER").empty()) << "the environment runs no DRA driver";
  scheduler_ = StartBridge("all");
  CreateDraPod("refused", "n4", "env | grep ^GPU_DEVICE_ | sort; sleep 5",
               "deviceclass.resource.kubernetes.io/gpu.example.com",
               R"(,"dra.test/fail-first-prepare":"true")");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> bound = WaitForPod("refused", IsBound, 120s);
  ASSERT_TRUE(bound) << "not bound";
  EXPECT_TRUE(WaitFor([&] { return HasEvent("refused", "FailedPrepareDynamicResources"); }, 60s))
      << "the driver's refusal did not reach the kubelet's events";
  EXPECT_TRUE(WaitFor([&] { return HasEvent("refused", "KubeletNudged"); }, 60s))
      << "the pod controller did not nudge the kubelet";
  auto nudged = RunSync(io_, kube::GetPod(*kube_, ns_, "refused"));
  ASSERT_TRUE(nudged) << nudged.error().message;
  EXPECT_TRUE(nudged->metadata.annotations.contains(std::string(bridge::kKubeletNudgeAnnotation)));
  const std::string logs = WaitForLogs("refused", std::chrono::seconds(150));
  EXPECT_TRUE(logs.starts_with("GPU_DEVICE_")) << logs;
  const std::string at = nudged->metadata.annotations[std::string(bridge::kKubeletNudgeAnnotation)];
  std::printf("nudged at %s\n", at.c_str());
}

}  // namespace
}  // namespace sb::controllers
