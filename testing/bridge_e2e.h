// SPDX-License-Identifier: Apache-2.0
//
// testing/bridge_e2e.h
//
// BridgeE2e: the fixture of the end-to-end tests of the slurm-bridge binary against the test
// environment's real slurmctld/slurmrestd and kube-apiserver. Kubernetes Node objects stand in
// for the kubelets of n1..n4 (testenv/kube/register-nodes.sh); nothing runs the pods. Each test
// gets a namespace of its own and a folder for its config and logs; TearDown removes the test's
// pods (finalizers first), its batch Jobs and every Slurm job tagged with its namespace, resumes
// the Slurm nodes and runs the Slurm commands queued in cleanup_.
//
// Before that cleanup, TearDown checks (1) that every bridge process the test started and did
// not stop itself is still running (a dead bridge passes every "X did not happen" check), and
// (2) the invariants between Kubernetes and Slurm (bridge/invariants.h) in the test's
// namespace, re-checking while the bridge catches up (CheckSettle()); what remains fails the
// test. A test that ends with a violation on purpose says so with ExemptInvariant(kind, why).
// The e2e tests share n1..n4 (ctest RESOURCE_LOCK testenv-nodes): a test that changes a node
// restores it with a guard (Restore, DrainAllNodes) so that a failed assertion does not leak
// the change. Bridge processes die with the test process.
// The checkout and this build's binary are found at run time (testing/paths.h).
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "bridge/invariants.h"
#include "bridge/names.h"
#include "bridge/tag.h"
#include "check/check.h"
#include "kube/client.h"
#include "kube/config.h"
#include "slurm/client.h"
#include "testing/child_process.h"
#include "testing/e2e_env.h"
#include "testing/paths.h"
#include "testing/run.h"
#include "testing/testenv.h"

namespace sb::testing {
using namespace std::chrono_literals;

class BridgeE2e : public ::testing::Test, protected E2eEnv {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    std::optional<TestEnv> env = TestEnv::Load(&why);
    ASSERT_TRUE(env) << why;
    Shell(fmt::format("{}/testenv/kube/register-nodes.sh {}/env 2>&1", sb::testing::SourceDir(),
                      env->dir()));
  }

  void SetUp() override {
    Connect();
    if (HasFatalFailure()) return;

    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ns_ = "sched-";
    for (char c : name) {
      ns_ += std::isalnum(static_cast<unsigned char>(c))
                 ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                 : '-';
    }
    if (ns_.size() > 50) ns_.resize(50);
    MakeNamespace(ns_);
    if (HasFatalFailure()) return;
    dir_ = env_.dir() + "/" + ns_;
    Shell("mkdir -p " + dir_ + " && rm -f " + dir_ + "/*.log");  // logs of this run only
    config_path_ = dir_ + "/config.yaml";
    UseSlurmAt(env_.Get("SLURM_REST_URL"));
  }

  void TearDown() override {
    if (kube_) {
      ExpectBridgesAlive();
      ExpectInvariants();
    }
    // A sanitized binary (SB_BRIDGE_BINARY, scripts/test.sh): stopped with SIGTERM so that its
    // exit-time checks (LeakSanitizer) run; a report ends it with status 86 (ASAN_OPTIONS and
    // UBSAN_OPTIONS exitcode), which no other exit shares.
    if (std::getenv("SB_BRIDGE_BINARY") != nullptr) {
      auto stop = [&](ChildProcess* p, const std::string& what) {
        if (p == nullptr || !p->Alive()) return;
        const int status = p->Kill(SIGTERM);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 86) {
          ADD_FAILURE() << what << ": a sanitizer report (exit 86); see its log";
        }
      };
      stop(scheduler_.get(), "the scheduler");
      for (auto& o : others_) stop(o.get(), "a bridge process");
      if (HasFailure()) {
        for (const std::string& log : logs_) {
          std::ifstream in(dir_ + "/" + log + ".log");
          if (in) std::cerr << "--- " << log << " log ---\n" << in.rdbuf() << "\n";
        }
        logs_.clear();
      }
    }
    scheduler_.reset();
    others_.clear();
    if (!kube_) return;
    (void)RunSync(io_, kube_->Delete(kube::JobsRef(ns_), {.propagation_policy = "Orphan"}));
    CleanNamespace(ns_);
    (void)RunSync(io_, kube_->Delete(kube::EventsRef(ns_), {}));
    Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=resume");
    // After the jobs are gone (a reservation with jobs cannot be deleted).
    for (const std::string& c : cleanup_) {
      std::string out;
      for (int i = 0; i < 50; ++i) {  // cancelled jobs take a moment to leave
        out = Slurm(c);
        if (out.empty()) break;
        std::this_thread::sleep_for(200ms);
      }
      if (!out.empty()) std::cerr << c << ": " << out;
    }
    if (HasFailure()) {
      for (const std::string& log : logs_) {
        std::ifstream in(dir_ + "/" + log + ".log");
        if (in) std::cerr << "--- " << log << " log ---\n" << in.rdbuf() << "\n";
      }
    }
  }

  // Creates namespace `ns` (a fatal failure when it cannot), or takes the one an earlier run
  // left, without its events.
  void MakeNamespace(const std::string& ns) {
    kube::Namespace n;
    n.metadata.name = ns;
    auto created = RunSync(io_, kube::CreateAs<kube::Namespace>(*kube_, kube::NamespacesRef(), n));
    ASSERT_TRUE(created || created.error().code == ErrorCode::kAlreadyExists)
        << created.error().message;
    (void)RunSync(io_, kube_->Delete(kube::EventsRef(ns), {}));
  }

  // Removes the pods of namespace `ns` (they carry the bridge's finalizer and there may be no
  // kubelet: released, then deleted at once) and cancels every live Slurm job tagged with them.
  void CleanNamespace(const std::string& ns) {
    auto pods = RunSync(io_, kube::ListAs<kube::Pod>(*kube_, kube::PodsRef(ns), {}));
    if (pods) {
      for (const kube::Pod& p : pods->items) {
        (void)RunSync(
            io_, kube_->Patch(kube::PodsRef(ns).WithName(p.metadata.name),
                              kube::PatchType::kJsonMerge, R"({"metadata":{"finalizers":null}})"));
      }
    }
    (void)RunSync(io_, kube_->Delete(kube::PodsRef(ns), {.grace_period_seconds = 0}));
    auto jobs = RunSync(io_, slurm_->ListJobs());
    if (jobs) {
      for (const slurm::JobInfo& j : *jobs) {
        if (j.admin_comment.find("\"" + ns + "/") == std::string::npos) continue;
        if (j.BaseState() == "PENDING" || j.BaseState() == "RUNNING") {
          (void)RunSync(io_, slurm_->CancelJob(j.job_id, {}));
        }
      }
    }
  }

  // Every bridge process the test started and did not Kill() still runs; else a failure with
  // how it ended. Call it before a check that something did NOT happen.
  void ExpectBridgesAlive() {
    auto one = [&](ChildProcess* p) {
      if (p != nullptr && p->Exited()) {
        ADD_FAILURE() << "a slurm-bridge process (pid gone) ended on its own: " << p->HowItEnded();
      }
    };
    one(scheduler_.get());
    for (auto& o : others_) one(o.get());
  }
  static void AssertAlive(ChildProcess& p, const std::string& what) {
    ASSERT_TRUE(p.Alive()) << what << " is not running: " << p.HowItEnded();
  }

  // How long TearDown's invariant check waits for violations to go (the fixture's config:
  // sweeps every 1 s, orphans older than 5 s; plus a margin for a loaded machine).
  static std::chrono::milliseconds CheckSettle() {
    return check::DefaultSettle(std::chrono::seconds(1)) + std::chrono::seconds(5);
  }
  // The invariants of this namespace, re-checked until none is violated or `settle` passed.
  std::vector<bridge::Violation> Violations(std::chrono::milliseconds settle) {
    bridge::InvariantOptions o{.namespace_ = ns_};
    auto v = RunSync(
        io_, check::CheckUntilSettled(*kube_, *slurm_, o, {.settle = settle, .interval = 250ms}));
    EXPECT_TRUE(v) << "the invariant check could not read a server: " << v.error().ToString();
    return v ? *v : std::vector<bridge::Violation>{};
  }
  // Violations of `kind` are expected at the end of this test, for the reason given (printed).
  void ExemptInvariant(bridge::Invariant kind, const std::string& why) { exempt_[kind] = why; }
  void ExpectInvariants() {
    for (const bridge::Violation& v : Violations(CheckSettle())) {
      auto e = exempt_.find(v.invariant);
      if (e != exempt_.end()) {
        std::cerr << "invariant exempted (" << e->second << "): " << v.text << "\n";
      } else {
        ADD_FAILURE() << "invariant violated at the end of the test: " << v.text;
      }
    }
  }

  // Runs its function when the scope ends, however it ends (node changes, labels, taints).
  struct Restore {
    explicit Restore(std::function<void()> f) : undo(std::move(f)) {}
    std::function<void()> undo;
    Restore(const Restore&) = delete;
    Restore& operator=(const Restore&) = delete;
    ~Restore() {
      if (undo) undo();
    }
  };
  // Drains every Slurm node (a job stays pending) until the guard goes.
  [[nodiscard]] std::unique_ptr<Restore> DrainAllNodes() {
    Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=drain reason=e2e-hold");
    return std::make_unique<Restore>([this] { ResumeAllNodes(); });
  }
  void ResumeAllNodes() {
    Slurm("scontrol update nodename=" + env_.Get("SLURM_NODES") + " state=resume");
  }

  // Lines of <dir>/<log>.log that contain `what`.
  int CountInLog(const std::string& log, const std::string& what) {
    std::ifstream in(dir_ + "/" + log + ".log");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.find(what) != std::string::npos ? 1 : 0;
    return n;
  }

  // Takes `pod` out of the picture as its kubelet would after its workload ended (phase
  // Succeeded): the scheduler-only tests end jobs to free capacity, and a bound pod whose job
  // ended must not look like a live one to the invariant check (the pod controller, not
  // running there, would have deleted it).
  void FinishPod(const std::string& pod) {
    auto r = RunSync(io_, kube::PatchPodStatus(*kube_, ns_, pod, kube::PatchType::kJsonMerge,
                                               R"({"status":{"phase":"Succeeded"}})"));
    EXPECT_TRUE(r) << r.error().message;
  }

  // A native batch job (root's, not the bridge's): `sbatch --parsable <args>`; its id, cancelled
  // after the test (a test failure and 0 when Slurm refused it).
  std::int64_t Sbatch(const std::string& args) {
    const std::string out = Slurm("sbatch --parsable " + args);
    std::int64_t id = 0;
    try {
      id = std::stoll(out);
    } catch (const std::exception&) {
      ADD_FAILURE() << "sbatch: " << out;
      return 0;
    }
    cleanup_.insert(cleanup_.begin(), fmt::format("scancel {}", id));
    return id;
  }

  // Starts `slurm-bridge <subcommand> --config ...` (log: <dir>/<log>.log).
  std::unique_ptr<ChildProcess> StartBridge(const std::string& subcommand,
                                            std::vector<std::string> extra = {},
                                            const std::string& log = "scheduler") {
    // SB_BRIDGE_BINARY: another build of the binary (the sanitized one), else this build's.
    const char* other = std::getenv("SB_BRIDGE_BINARY");
    std::vector<std::string> argv = {
        other != nullptr ? std::string(other) : sb::testing::BridgeBinary(),
        subcommand,
        "--config",
        config_path_,
        "--log-level",
        "debug"};
    if (std::ranges::find(extra, "--metrics-bind-address") == extra.end()) {
      extra.insert(extra.end(), {"--metrics-bind-address", "0"});
    }
    if (std::ranges::find(extra, "--health-probe-bind-address") == extra.end()) {
      extra.insert(extra.end(), {"--health-probe-bind-address", "0"});
    }
    GrantLeaseFor(subcommand, extra);
    argv.insert(argv.end(), extra.begin(), extra.end());
    logs_.insert(log);
    return std::make_unique<ChildProcess>(
        argv,
        std::map<std::string, std::string>{{"SLURM_JWT_FILE", env_.Get("SLURM_JWT_FILE")},
                                           {"KUBECONFIG", BridgeKubeconfig(subcommand)}},
        dir_ + "/" + log + ".log");
  }
  // With --leader-election-namespace N --leader-election-id L: the admin who installs the chart
  // with these settings gives the component's ServiceAccount the chart's leader-election Role in
  // N (create Leases; get and update L only), as the chart does in its own namespace.
  void GrantLeaseFor(const std::string& subcommand, const std::vector<std::string>& args) {
    auto value = [&](const std::string& flag) -> std::string {
      const auto it = std::ranges::find(args, flag);
      return it == args.end() || it + 1 == args.end() ? std::string() : *(it + 1);
    };
    const std::string ns = value("--leader-election-namespace");
    const std::string lease = value("--leader-election-id");
    if (ns.empty() || lease.empty() || BridgeKubeconfig(subcommand) == env_.Get("KUBECONFIG")) {
      return;
    }
    const std::string name = "e2e-leader-election-" + subcommand + "-" + lease;
    const std::string sa = "slurm-bridge-" + subcommand;
    const std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"List","items":[
{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{{"name":"{0}","namespace":"{1}"}},
 "rules":[{{"apiGroups":["coordination.k8s.io"],"resources":["leases"],"verbs":["create"]}},
          {{"apiGroups":["coordination.k8s.io"],"resources":["leases"],"resourceNames":["{2}"],
            "verbs":["get","update"]}}]}},
{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{{"name":"{0}","namespace":"{1}"}},
 "roleRef":{{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"{0}"}},
 "subjects":[{{"kind":"ServiceAccount","name":"{3}","namespace":"{4}"}}]}}]}})",
        name, ns, lease, sa, env_.Get("LEADER_ELECTION_NAMESPACE"));
    Shell(fmt::format("KUBECONFIG={} {}/kubectl apply -f - 2>&1 <<'EOF'\n{}\nEOF",
                      env_.Get("KUBECONFIG"), env_.Get("KUBE_BIN_DIR"), manifest));
  }
  // The kubeconfig `slurm-bridge <subcommand>` runs with: a token of the chart's ServiceAccount
  // of that component, bound to the ClusterRoles helm/slurm-bridge renders
  // (testenv/kube/chart-identities.sh; `all`: the union of the three), never the admin's (issue
  // #44). The read-only tools an operator runs (check, explain, jobs, nodes) keep the admin's.
  std::string BridgeKubeconfig(const std::string& subcommand) const {
    static const std::map<std::string, std::string> kKeys = {
        {"scheduler", "KUBECONFIG_SCHEDULER"},
        {"controllers", "KUBECONFIG_CONTROLLERS"},
        {"admission", "KUBECONFIG_ADMISSION"},
        {"all", "KUBECONFIG_ALL"}};
    const auto it = kKeys.find(subcommand);
    if (it == kKeys.end()) return env_.Get("KUBECONFIG");
    std::string path = env_.Get(it->second);
    EXPECT_FALSE(path.empty()) << "the environment has no " << it->second
                               << " (testenv/kube/chart-identities.sh)";
    return path;
  }
  void StartScheduler() { scheduler_ = StartBridge("scheduler"); }
  // The bridge talks to Slurm at `url` (a proxy, testing/slurm_proxy.h): the config rewritten.
  void UseSlurmAt(const std::string& url) {
    slurm_url_ = url;
    std::ofstream(config_path_) << fmt::format(
        "slurmRestApi: {}\npartition: {}\nmcsLabel: kubernetes\njobPollInterval: 200ms\n"
        "jobListInterval: 1s\nnodeListInterval: 2s\njobSweepInterval: 1s\n{}",
        url, env_.Get("SLURM_PARTITION"), extra_config_);
  }
  // More config keys (YAML text) for the bridges started after this call.
  void AddConfig(const std::string& yaml) {
    extra_config_ += yaml;
    UseSlurmAt(slurm_url_);
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

  // Polls pod `name` until `ready` holds for it; the pod then, else nullopt.
  std::optional<kube::Pod> WaitForPod(const std::string& name,
                                      const std::function<bool(const kube::Pod&)>& ready,
                                      std::chrono::seconds limit = 60s) {
    std::optional<kube::Pod> found;
    WaitFor(
        [&] {
          auto p = RunSync(io_, kube::GetPod(*kube_, ns_, name));
          if (p && ready(*p)) found = std::move(*p);
          return found.has_value();
        },
        limit);
    return found;
  }
  static bool IsBound(const kube::Pod& p) { return !p.spec.node_name.empty(); }
  static bool HasJob(const kube::Pod& p) { return JobId(p) > 0; }

  std::size_t CountBound(const std::vector<kube::Pod>& pods) {
    return static_cast<std::size_t>(
        std::ranges::count_if(pods, [](const kube::Pod& p) { return !p.spec.node_name.empty(); }));
  }

  // The events of `pod`; a test failure when they cannot be read (an empty list then proves
  // nothing).
  std::vector<kube::Event> Events(const std::string& pod) {
    kube::ListOptions o;
    o.field_selector = "involvedObject.name=" + pod;
    auto ev = RunSync(io_, kube::ListAs<kube::Event>(*kube_, kube::EventsRef(ns_), o));
    EXPECT_TRUE(ev) << "listing the events of " << pod << ": " << ev.error().message;
    return ev ? ev->items : std::vector<kube::Event>{};
  }

  // The message of the last `reason` Event of `pod`, once one came (within `limit`); "" when
  // none did.
  std::string WaitForEvent(const std::string& pod, const std::string& reason = "FailedScheduling",
                           std::chrono::seconds limit = std::chrono::seconds(30)) {
    std::string message;
    (void)WaitFor(
        [&] {
          for (const kube::Event& e : Events(pod)) {
            if (e.reason == reason) message = e.message;
          }
          return !message.empty();
        },
        limit);
    return message;
  }

  // Slurm's base state of job `id`; "NOTFOUND" when Slurm no longer knows it. Any other error
  // fails the test (and reads "ERROR"): a slurmrestd hiccup is not a cancelled job.
  std::string JobState(std::int64_t id) {
    auto j = RunSync(io_, slurm_->GetJob(id));
    if (j) return std::string(j->BaseState());
    if (j.error().code == ErrorCode::kNotFound) return "NOTFOUND";
    ADD_FAILURE() << "reading Slurm job " << id << ": " << j.error().ToString();
    return "ERROR";
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

  std::string ns_;
  std::string dir_;
  std::string config_path_;
  std::string slurm_url_;
  std::string extra_config_;
  std::unique_ptr<ChildProcess> scheduler_;
  std::vector<std::string> cleanup_;                   // Slurm commands TearDown runs
  std::vector<std::unique_ptr<ChildProcess>> others_;  // more bridge processes
  std::map<bridge::Invariant, std::string> exempt_;    // ExemptInvariant
  std::set<std::string> logs_;                         // of the processes started
};

}  // namespace sb::testing
