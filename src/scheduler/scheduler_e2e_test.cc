// SPDX-License-Identifier: Apache-2.0
//
// The scheduler end to end: the `slurm-bridge scheduler` binary as a child process against the
// test environment's real slurmctld/slurmrestd and kube-apiserver. Kubernetes Node objects
// stand in for the kubelets of n1..n4 (testenv/kube/register-nodes.sh); nothing runs the pods.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "bridge/names.h"
#include "bridge/tag.h"
#include "kube/client.h"
#include "kube/config.h"
#include "slurm/client.h"
#include "testing/run.h"
#include "testing/testenv.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunCommand;
using sb::testing::RunSync;
using sb::testing::TestEnv;

std::string Shell(const std::string& cmd) {
  std::string out;
  int rc = RunCommand(cmd, &out);
  EXPECT_EQ(rc, 0) << cmd << "\n" << out;
  return out;
}

// A child process with its output in a log file.
class Child {
 public:
  Child(std::vector<std::string> argv, std::map<std::string, std::string> env,
        const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log.c_str(), "a");
      if (f != nullptr) {
        ::dup2(::fileno(f), 1);
        ::dup2(::fileno(f), 2);
      }
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Child() { Kill(SIGKILL); }
  void Kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  [[nodiscard]] bool Running() const { return pid_ > 0 && ::kill(pid_, 0) == 0; }

 private:
  pid_t pid_ = -1;
};

class SchedulerE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    std::optional<TestEnv> env = TestEnv::Load(&why);
    ASSERT_TRUE(env) << why;
    Shell(fmt::format("{}/testenv/kube/register-nodes.sh {}/env 2>&1", SB_SOURCE_DIR, env->dir()));
  }

  void SetUp() override {
    std::string why;
    std::optional<TestEnv> env = TestEnv::Load(&why);
    ASSERT_TRUE(env) << why;
    env_ = *env;
    ::setenv("KUBECONFIG", env_.Get("KUBECONFIG").c_str(), 1);
    Result<kube::Config> cfg = kube::LoadConfig({});
    ASSERT_TRUE(cfg) << cfg.error().message;
    kube_config_ = *cfg;
    auto http = kube::MakeHttpClient(io_.get_executor(), kube_config_);
    ASSERT_TRUE(http) << http.error().message;
    http_ = std::move(*http);
    kube_ = kube::MakeClient(*http_, kube_config_.token);
    auto slurm = slurm::MakeClient(io_.get_executor(), {.url = env_.Get("SLURM_REST_URL")},
                                   slurm::MakeFileTokenSource(env_.Get("SLURM_JWT_FILE")));
    ASSERT_TRUE(slurm) << slurm.error().message;
    slurm_ = std::move(*slurm);

    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ns_ = "sched-";
    for (char c : name) {
      ns_ += std::isalnum(static_cast<unsigned char>(c))
                 ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                 : '-';
    }
    if (ns_.size() > 50) ns_.resize(50);
    kube::Namespace n;
    n.metadata.name = ns_;
    auto created = RunSync(io_, kube::CreateAs<kube::Namespace>(*kube_, kube::NamespacesRef(), n));
    ASSERT_TRUE(created || created.error().code == ErrorCode::kAlreadyExists)
        << created.error().message;
    dir_ = env_.dir() + "/" + ns_;
    Shell("mkdir -p " + dir_);
    config_path_ = dir_ + "/config.yaml";
    std::ofstream(config_path_) << fmt::format(
        "slurmRestApi: {}\npartition: {}\nmcsLabel: kubernetes\njobPollInterval: 200ms\n"
        "jobListInterval: 1s\nnodeListInterval: 2s\n",
        env_.Get("SLURM_REST_URL"), env_.Get("SLURM_PARTITION"));
  }

  void TearDown() override {
    scheduler_.reset();
    for (const std::string& c : cleanup_) Slurm(c);
    if (!kube_) return;
    (void)RunSync(io_, kube_->Delete(kube::JobsRef(ns_), {.propagation_policy = "Orphan"}));
    // The pods carry the bridge's finalizer and there is no kubelet: release and delete them.
    auto pods = RunSync(io_, kube::ListAs<kube::Pod>(*kube_, kube::PodsRef(ns_), {}));
    if (pods) {
      for (const kube::Pod& p : pods->items) {
        (void)RunSync(
            io_, kube_->Patch(kube::PodsRef(ns_).WithName(p.metadata.name),
                              kube::PatchType::kJsonMerge, R"({"metadata":{"finalizers":null}})"));
      }
    }
    (void)RunSync(io_, kube_->Delete(kube::PodsRef(ns_), {.grace_period_seconds = 0}));
    // And every Slurm job this test's pods had.
    auto jobs = RunSync(io_, slurm_->ListJobs());
    if (jobs) {
      for (const slurm::JobInfo& j : *jobs) {
        if (j.admin_comment.find("\"" + ns_ + "/") == std::string::npos) continue;
        if (j.BaseState() == "PENDING" || j.BaseState() == "RUNNING") {
          (void)RunSync(io_, slurm_->CancelJob(j.job_id, {}));
        }
      }
    }
    Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=resume");
    if (HasFailure()) {
      std::ifstream in(dir_ + "/scheduler.log");
      std::cerr << "--- scheduler log ---\n" << in.rdbuf() << "\n";
    }
  }

  void StartScheduler() {
    scheduler_ = std::make_unique<Child>(
        std::vector<std::string>{SB_BINARY, "scheduler", "--config", config_path_, "--log-level",
                                 "debug"},
        std::map<std::string, std::string>{{"SLURM_JWT_FILE", env_.Get("SLURM_JWT_FILE")},
                                           {"KUBECONFIG", env_.Get("KUBECONFIG")}},
        dir_ + "/scheduler.log");
  }

  std::string Slurm(const std::string& cmd) {
    std::string out;
    RunCommand(fmt::format("{}/testenv/slurm/exec.sh {} {} 2>&1", SB_SOURCE_DIR, env_.dir(), cmd),
               &out);
    return out;
  }

  // Creates a pod for the bridge; `extra` is merged into the manifest's top level as JSON text.
  void CreatePod(const std::string& name, const std::string& resources,
                 const std::string& annotations = "{}", const std::string& spec_extra = "") {
    std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{}}},"spec":{{"schedulerName":"slurm-bridge-scheduler",
        "restartPolicy":"Never","containers":[{{"name":"c","image":"busybox",
        "resources":{}}}]{}}}}})",
        name, ns_, annotations, resources, spec_extra);
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), manifest));
    ASSERT_TRUE(r) << r.error().message;
  }

  std::vector<kube::Pod> Pods() {
    auto pods = RunSync(io_, kube::ListAs<kube::Pod>(*kube_, kube::PodsRef(ns_), {}));
    EXPECT_TRUE(pods) << pods.error().message;
    return pods ? pods->items : std::vector<kube::Pod>{};
  }

  bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return done();
  }

  std::size_t CountBound(const std::vector<kube::Pod>& pods) {
    return static_cast<std::size_t>(
        std::ranges::count_if(pods, [](const kube::Pod& p) { return !p.spec.node_name.empty(); }));
  }

  std::vector<kube::Event> Events(const std::string& pod) {
    kube::ListOptions o;
    o.field_selector = "involvedObject.name=" + pod;
    auto ev = RunSync(io_, kube::ListAs<kube::Event>(*kube_, kube::EventsRef(ns_), o));
    return ev ? ev->items : std::vector<kube::Event>{};
  }

  static std::int64_t JobId(const kube::Pod& p) {
    auto it = p.metadata.labels.find(std::string(bridge::kJobIdLabel));
    return it == p.metadata.labels.end() ? 0 : std::stoll(it->second);
  }

  // Slurm jobs (any state) whose tag names a pod of this namespace, by pod UID.
  std::map<std::string, std::vector<std::int64_t>> JobsByUid() {
    std::map<std::string, std::vector<std::int64_t>> out;
    auto jobs = RunSync(io_, slurm_->ListJobs());
    EXPECT_TRUE(jobs) << jobs.error().message;
    if (!jobs) return out;
    for (const slurm::JobInfo& j : *jobs) {
      std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
      if (!tag || tag->pods.empty() || !tag->pods[0].starts_with(ns_ + "/")) continue;
      for (const std::string& uid : tag->uids) out[uid].push_back(j.job_id);
    }
    return out;
  }

  TestEnv env_;
  boost::asio::io_context io_;
  kube::Config kube_config_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  slurm::ClientPtr slurm_;
  std::string ns_;
  std::string dir_;
  std::string config_path_;
  std::unique_ptr<Child> scheduler_;
  std::vector<std::string> cleanup_;  // Slurm commands TearDown runs
};

TEST_F(SchedulerE2e, SeedYoloPodIsBoundToTheNodeOfItsSlurmJob) {
  StartScheduler();
  // The seed's manifest, unchanged, applied with kubectl as a user would.
  Shell(fmt::format(
      "KUBECONFIG={} kubectl apply -n {} -f {}/examples/yolo-benchmark-slurm-bridge.yaml",
      env_.Get("KUBECONFIG"), ns_, SB_SOURCE_DIR));
  kube::Pod pod;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "yolo-benchmark-slurm-bridge"));
        if (p) pod = *p;
        return p && !p->spec.node_name.empty();
      },
      60s));
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
  // Capacity frees when two running jobs end: the waiting pods take their place.
  for (int i = 0; i < 2; ++i) {
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

TEST_F(SchedulerE2e, EveryAnnotationReachesTheSlurmJob) {
  Slurm("scontrol update nodename=n3 availablefeatures=fast activefeatures=fast");
  Slurm("scontrol create reservation reservationname=" + ns_ +
        " users=root,slurm,k8s nodes=n3 starttime=now duration=60 flags=ignore_jobs");
  cleanup_.push_back("scontrol delete reservation=" + ns_);
  cleanup_.push_back("scontrol update nodename=n3 availablefeatures= activefeatures=");
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
  kube::Pod pod;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "annotated"));
        if (p) pod = *p;
        return p && !p->spec.node_name.empty();
      },
      60s));
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

TEST_F(SchedulerE2e, BadAnnotationIsReportedOnThePod) {
  StartScheduler();
  CreatePod("bad", R"({"limits":{"cpu":"1"}})",
            R"({"slurmjob.slinky.slurm.net/timelimit":"one hour"})");
  std::string message;
  EXPECT_TRUE(WaitFor(
      [&] {
        for (const kube::Event& e : Events("bad")) message = e.message;
        return !message.empty();
      },
      30s));
  EXPECT_EQ(message,
            "annotation slurmjob.slinky.slurm.net/timelimit: \"one hour\" is not an integer");
  EXPECT_TRUE(JobsByUid().empty());
}

TEST_F(SchedulerE2e, NodeSelectorKeepsPodsOffExcludedNode) {
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
  Shell(fmt::format("KUBECONFIG={} kubectl label node n1 n2 n3 n4 zone-", env_.Get("KUBECONFIG")));
}

TEST_F(SchedulerE2e, JobEndingBeforeBindingIsReplaced) {
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=drain reason=e2e-hold");
  StartScheduler();
  CreatePod("again", R"({"limits":{"cpu":"1"}})");
  std::int64_t first = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "again"));
        first = p ? JobId(*p) : 0;
        return first > 0;
      },
      30s));
  ASSERT_TRUE(RunSync(io_, slurm_->CancelJob(first, {})));
  std::int64_t second = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "again"));
        second = p ? JobId(*p) : 0;
        return second > 0 && second != first;
      },
      30s));
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=resume");
  ASSERT_TRUE(WaitFor(
      [&] {
        auto p = RunSync(io_, kube::GetPod(*kube_, ns_, "again"));
        return p && !p->spec.node_name.empty();
      },
      60s));
  bool ended_event = false;
  for (const kube::Event& e : Events("again")) {
    ended_event = ended_event || (e.reason == "SlurmJobEnded" &&
                                  e.message.find(std::to_string(first)) != std::string::npos);
  }
  EXPECT_TRUE(ended_event);
}

TEST_F(SchedulerE2e, KilledAndRestartedSchedulerMakesNoDuplicateJobs) {
  // Hold the pods in Slurm's queue while the scheduler is killed in the middle of them.
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=drain reason=e2e-hold");
  StartScheduler();
  constexpr int kPods = 50;
  for (int i = 0; i < kPods; ++i) {
    CreatePod(fmt::format("w{:02}", i), R"({"limits":{"cpu":"1","memory":"64Mi"}})",
              R"({"slurmjob.slinky.slurm.net/exclusive":"false"})");
  }
  // Kill it once some, not all, pods have their job.
  ASSERT_TRUE(WaitFor([&] { return JobsByUid().size() >= 10; }, 60s));
  scheduler_->Kill(SIGKILL);
  const std::size_t before = JobsByUid().size();
  StartScheduler();
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return std::ranges::all_of(pods, [](const kube::Pod& p) { return JobId(p) > 0; });
      },
      90s));
  std::map<std::string, std::vector<std::int64_t>> jobs = JobsByUid();
  EXPECT_EQ(jobs.size(), static_cast<std::size_t>(kPods)) << "had " << before << " at the kill";
  for (const auto& [uid, ids] : jobs) EXPECT_EQ(ids.size(), 1u) << "duplicate jobs for " << uid;
  // Release the nodes: 32 one-CPU jobs fit at once; end the running ones until all are bound.
  Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=resume");
  std::set<std::int64_t> ended;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        if (CountBound(pods) == static_cast<std::size_t>(kPods)) return true;
        for (const kube::Pod& p : pods) {
          if (!p.spec.node_name.empty() && ended.insert(JobId(p)).second) {
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

}  // namespace
}  // namespace sb::scheduler
