// SPDX-License-Identifier: Apache-2.0
//
// Slurm's own policy decides for bridge pods (issue #29): `slurm-bridge all` on real kubelets
// against a Slurm with accounting (ctest fixture testenv-policy: testenv/up.sh --kubelets
// --nodes 2 --accounting: slurmdbd and MariaDB, AccountingStorageEnforce=associations,limits,
// qos,safe, priority/multifactor with fair share, Slurm nodes n1, n2, n3 of 8 CPUs each whose
// kubelets are n1, n2 and kube-n3). Each test makes the accounts, associations, QOS and
// reservations it needs under names of its own, maps its namespace to them with identityPolicy,
// and removes them at the end (after its jobs are gone: Slurm refuses to delete what a running
// job uses). Every Slurm job runs as user k8s (uid 2000, in the chroot) or as the bridge token's
// user: no other Unix user is needed.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "bridge/pods.h"
#include "scheduler/planner.h"
#include "testing/paths.h"
#include "testing/policy_e2e.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;

class PolicyE2e : public sb::testing::PolicyE2eBase {
 protected:
  // After the base's cleanup (pods, the namespace's jobs, cleanup_): the accounting objects the
  // test made, newest first. A delete is retried while jobs that used them are still ending.
  void TearDown() override {
    PolicyE2eBase::TearDown();
    for (auto it = accounting_cleanup_.rbegin(); it != accounting_cleanup_.rend(); ++it) {
      std::string out;
      if (!WaitFor([&] { return SlurmRc(*it, &out) == 0; }, 30s)) {
        ADD_FAILURE() << "cleanup: " << *it << ": " << out;
      }
    }
  }

  // `cmd` in the Slurm chroot: its exit status, its output (errors included) in `out`.
  int SlurmRc(const std::string& cmd, std::string* out) {
    return sb::testing::RunCommand(fmt::format("{}/testenv/slurm/exec.sh {} {} 2>&1",
                                               sb::testing::SourceDir(), env_.dir(), cmd),
                                   out);
  }
  // `cmd` in the Slurm chroot, which must succeed (else a test failure with its output).
  std::string SlurmOk(const std::string& cmd) {
    std::string out;
    EXPECT_EQ(SlurmRc(cmd, &out), 0) << cmd << "\n" << out;
    return out;
  }

  // An account of the cluster, deleted at the end; one of an earlier run is removed first.
  void AddAccount(const std::string& account) {
    std::string ignored;
    (void)SlurmRc("sacctmgr -i delete user name=k8s account=" + account, &ignored);
    (void)SlurmRc("sacctmgr -i delete account " + account, &ignored);
    SlurmOk(
        fmt::format("sacctmgr -i add account {} Description=policy-e2e Organization=e2e", account));
    accounting_cleanup_.push_back("sacctmgr -i delete account " + account);
  }
  // A QOS, deleted at the end (after the associations that name it).
  void AddQos(const std::string& qos, const std::string& settings) {
    std::string ignored;
    (void)SlurmRc("sacctmgr -i delete qos " + qos, &ignored);
    SlurmOk(fmt::format("sacctmgr -i add qos {} {}", qos, settings));
    accounting_cleanup_.push_back("sacctmgr -i delete qos " + qos);
  }
  // User k8s's association with `account` (`extra`: more settings, such as QOS=...), and a wait
  // until slurmctld's cache has it (slurmdbd pushes it; a submit before that is refused).
  void AddK8sTo(const std::string& account, const std::string& extra = "") {
    SlurmOk(fmt::format("sacctmgr -i add user k8s Account={} {}", account, extra));
    accounting_cleanup_.push_back(
        fmt::format("sacctmgr -i delete user name=k8s account={}", account));
    std::string shown;
    EXPECT_TRUE(WaitFor(
        [&] {
          shown = Slurm("scontrol show assoc_mgr flags=assoc users=k8s accounts=" + account);
          return shown.find("UserName=k8s") != std::string::npos;
        },
        30s))
        << "slurmctld does not know k8s in " << account << ":\n"
        << shown;
  }

  // A pod for the bridge in namespace `ns` whose busybox container runs `script`; small
  // requests, so that the kubelets (which advertise the host's CPUs) admit it wherever Slurm
  // places it. `annotations`: JSON object text.
  void CreateBusyPod(const std::string& ns, const std::string& name, const std::string& script,
                     const std::string& annotations = "{}", int grace_seconds = 2) {
    const std::string manifest = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{}}},
        "spec":{{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "terminationGracePeriodSeconds":{},
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c",{}],
        "resources":{{"limits":{{"cpu":"100m","memory":"64Mi"}}}}}}]}}}})",
        name, ns, annotations, grace_seconds, boost::json::serialize(boost::json::string(script)));
    const kube::ResourceRef pods = kube::PodsRef(ns);
    auto r = RunSync(io_, kube_->Create(pods, manifest));
    ASSERT_TRUE(r) << name << ": " << r.error().message;
  }
  // A batch Job `name` in ns_ with the metadata annotations `annotations` (JSON) and the spec
  // fields `spec` (JSON members before the template) whose pods sleep 10 minutes.
  void CreateSleepingJob(const std::string& name, const std::string& annotations,
                         const std::string& spec) {
    const std::string manifest = fmt::format(
        R"({{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{}","namespace":"{}",
        "annotations":{}}},"spec":{{{},"template":{{"spec":{{
        "schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never",
        "terminationGracePeriodSeconds":2,
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sleep","600"],"resources":{{"limits":{{"cpu":"100m","memory":"64Mi"}}}}}}]}}}}}}}})",
        name, ns_, annotations, spec);
    const kube::ResourceRef jobs = kube::JobsRef(ns_);
    auto created = RunSync(io_, kube_->Create(jobs, manifest));
    ASSERT_TRUE(created) << name << ": " << created.error().message;
  }
  // The script of a pod that runs until Release() tells it to end.
  static constexpr const char* kUntilReleased =
      "echo started; until [ -e /tmp/release ]; do sleep 0.2; done; echo released";
  // Ends a kUntilReleased pod's container (it exits 0: the pod Succeeds, as a workload that is
  // done).
  void Release(const std::string& ns, const std::string& pod) {
    Shell(fmt::format("KUBECONFIG={} kubectl exec -n {} {} -- touch /tmp/release 2>&1",
                      env_.Get("KUBECONFIG"), ns, pod));
  }

  std::optional<kube::Pod> GetPodIn(const std::string& ns, const std::string& name) {
    auto p = RunSync(io_, kube::GetPod(*kube_, ns, name));
    if (!p) return std::nullopt;
    return std::move(*p);
  }
  // Polls pod `name` of namespace `ns` until `ready` holds (within `limit`).
  std::optional<kube::Pod> WaitForPodIn(const std::string& ns, const std::string& name,
                                        const std::function<bool(const kube::Pod&)>& ready,
                                        std::chrono::seconds limit) {
    std::optional<kube::Pod> found;
    WaitFor(
        [&] {
          std::optional<kube::Pod> p = GetPodIn(ns, name);
          if (p && ready(*p)) found = std::move(p);
          return found.has_value();
        },
        limit);
    return found;
  }
  static bool Succeeded(const kube::Pod& p) { return p.status.phase == "Succeeded"; }

  // The message of pod `p`'s PodScheduled=False condition ("" when it has none).
  static std::string WaitingCondition(const kube::Pod& p) {
    const kube::Condition* c = kube::FindCondition(p.status.conditions, "PodScheduled");
    return c != nullptr && c->status == "False" ? c->message : "";
  }
  // What the bridge says of a pod whose job waits for `reason` (Slurm's word).
  std::string WaitingFor(std::int64_t job, const std::string& reason) {
    return fmt::format("waiting for Slurm job {} in partition {}: {}", job,
                       env_.Get("SLURM_PARTITION"), reason);
  }
  // Waits until pod `name` of `ns` has a job and its PodScheduled condition says it waits for
  // one of `reasons` (none: for any reason); that message then, else the last one seen (the
  // caller's check fails).
  std::string WaitForWaitingReason(const std::string& ns, const std::string& name,
                                   const std::vector<std::string>& reasons,
                                   std::chrono::seconds limit = 60s) {
    std::string message;
    WaitFor(
        [&] {
          std::optional<kube::Pod> p = GetPodIn(ns, name);
          if (!p || !HasJob(*p)) return false;
          // Slurm's expected start, when its planner gave one, follows the reason.
          message = std::string(scheduler::WithoutExpectedStart(WaitingCondition(*p)));
          if (reasons.empty()) return message.starts_with(WaitingFor(JobId(*p), ""));
          return std::ranges::any_of(
              reasons, [&](const std::string& r) { return message == WaitingFor(JobId(*p), r); });
        },
        limit);
    return message;
  }
  // Whether pod `name` of `ns` has a `reason` Event whose message contains `text`.
  // Whether the pod gets an Event of `reason` whose message holds `text` within 15 s (the
  // bridge's event recorder writes after the status it reports on).
  bool HasEventWith(const std::string& ns, const std::string& name, const std::string& reason,
                    const std::string& text) {
    kube::ListOptions o;
    o.field_selector = "involvedObject.name=" + name;
    return WaitFor(
        [&] {
          auto ev = RunSync(io_, kube::ListAs<kube::Event>(*kube_, kube::EventsRef(ns), o));
          EXPECT_TRUE(ev) << ev.error().message;
          return ev && std::ranges::any_of(ev->items, [&](const kube::Event& e) {
                   return e.reason == reason && e.message.find(text) != std::string::npos;
                 });
        },
        15s);
  }

  // Slurm's job record, read once (a test failure when it cannot be read).
  std::optional<slurm::JobInfo> SlurmJob(std::int64_t id) {
    auto j = RunSync(io_, slurm_->GetJob(id));
    EXPECT_TRUE(j) << "Slurm job " << id << ": " << j.error().ToString();
    if (!j) return std::nullopt;
    return std::move(*j);
  }
  // `squeue -j <id> -h -o <format>` with times as Unix seconds, trimmed.
  std::string Squeue(std::int64_t id, const std::string& format) {
    std::string out =
        Slurm(fmt::format("env SLURM_TIME_FORMAT=%s squeue -h -j {} -o {}", id, format));
    while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
    return out;
  }
  // Slurm's priority of pending job `id` (squeue %Q); nullopt when it is not pending or unread.
  std::optional<std::int64_t> PendingPriority(std::int64_t id) {
    const std::string out = Squeue(id, "%T:%Q");
    if (!out.starts_with("PENDING:")) return std::nullopt;
    try {
      return std::stoll(out.substr(8));
    } catch (...) {
      return std::nullopt;
    }
  }
  // The start time Slurm expects for pending job `id` (squeue %S, set by the backfill
  // scheduler); nullopt while it has none (N/A).
  std::optional<std::int64_t> ExpectedStart(std::int64_t id) {
    const std::string out = Squeue(id, "%T:%S");
    if (!out.starts_with("PENDING:")) return std::nullopt;
    try {
      const std::int64_t t = std::stoll(out.substr(8));
      return t > 0 ? std::optional<std::int64_t>(t) : std::nullopt;
    } catch (...) {
      return std::nullopt;
    }
  }

  // Makes namespace `ns` (for a test with two); its pods and their jobs are removed by the guard
  // returned, before the base's TearDown (which knows only ns_).
  [[nodiscard]] std::unique_ptr<Restore> SecondNamespace(const std::string& ns) {
    MakeNamespace(ns);
    return std::make_unique<Restore>([this, ns] { CleanNamespace(ns); });
  }

  std::vector<std::string> accounting_cleanup_;  // sacctmgr deletes, run after the base's
};

// One sacct line of a job: User|Account|Start|End|State, times as Unix seconds.
struct SacctRecord {
  std::string user;
  std::string account;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::string state;
};
std::optional<SacctRecord> ParseSacct(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, '|');) f.push_back(field);
  if (f.size() < 5) return std::nullopt;
  SacctRecord r{.user = f[0], .account = f[1], .state = f[4]};
  try {
    r.start = std::stoll(f[2]);
    r.end = std::stoll(f[3]);
  } catch (...) {
    return std::nullopt;  // "Unknown" / "None": not there yet
  }
  return r;
}

// identityPolicy maps the test's namespace to Slurm user k8s and lets its pods charge account
// polid: a pod annotated with that account runs under k8s and polid, one without the annotation
// under k8s and k8s's default account in Slurm. Slurm's accounting shows both jobs with a real
// start and an end that comes after the container finished (the controllers cancel a job once
// its pod has Succeeded).
TEST_F(PolicyE2e, IdentityPolicyRunsJobsAsTheMappedUserAndAccount) {
  AddAccount("polid");
  AddK8sTo("polid");
  if (HasFailure()) return;
  std::string default_account = SlurmOk("sacctmgr -n -P show user k8s format=DefaultAccount");
  default_account.erase(default_account.find_last_not_of(" \n") + 1);
  ASSERT_FALSE(default_account.empty());
  ASSERT_NE(default_account, "polid");
  AddConfig(
      fmt::format("identityPolicy:\n- namespaces: [{}]\n  user: k8s\n  accounts: [polid]\n", ns_));
  scheduler_ = StartBridge("all");
  const std::int64_t created_at = std::time(nullptr);
  const std::string script = "echo working; sleep 4; echo done";
  CreateBusyPod(ns_, "charged", script, R"({"slurmjob.slinky.slurm.net/account":"polid"})");
  CreateBusyPod(ns_, "plain", script);
  if (HasFatalFailure()) return;

  std::map<std::string, std::int64_t> job_of;
  for (const char* name : {"charged", "plain"}) {
    SCOPED_TRACE(name);
    // Running, or already done (its container runs 4 s): its job ran.
    std::optional<kube::Pod> running = WaitForPodIn(
        ns_, name, [](const kube::Pod& p) { return IsRunning(p) || Succeeded(p); }, 120s);
    ASSERT_TRUE(running) << "not running";
    job_of[name] = JobId(*running);
    std::optional<slurm::JobInfo> job = SlurmJob(job_of[name]);
    ASSERT_TRUE(job);
    EXPECT_EQ(job->user_name, "k8s");
    EXPECT_EQ(job->account, std::string(name) == "charged" ? "polid" : default_account);
  }
  for (const char* name : {"charged", "plain"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(WaitForPodIn(ns_, name, Succeeded, 60s)) << "the container did not succeed";
    const std::int64_t finished_by = std::time(nullptr);
    const std::int64_t id = job_of[name];
    // explain shows the account the job was charged to and its association's fair share (read
    // from Slurm's /shares, which only a Slurm with accounting serves).
    std::string out;
    ASSERT_EQ(sb::testing::RunCommand(
                  fmt::format("KUBECONFIG={} SLURM_JWT_FILE={} {} explain {} -n {} -o json "
                              "--config {} 2>&1",
                              env_.Get("KUBECONFIG"), env_.Get("SLURM_JWT_FILE"),
                              sb::testing::BridgeBinary(), name, ns_, config_path_),
                  &out),
              0)
        << out;
    boost::system::error_code ec;
    boost::json::value explained = boost::json::parse(out, ec);
    ASSERT_FALSE(ec) << out;
    const boost::json::value& ej = explained.at("slurmJob");
    ASSERT_TRUE(ej.is_object()) << out;
    EXPECT_EQ(ej.at("id").to_number<std::int64_t>(), id) << out;
    EXPECT_EQ(ej.at("account").as_string(),
              std::string(name) == "charged" ? "polid" : default_account)
        << out;
    EXPECT_EQ(ej.at("user").as_string(), "k8s") << out;
    EXPECT_TRUE(ej.at("fairshare").is_number()) << "no fair-share factor: " << out;
    // Accounting has the job's end once the controllers cancelled it and slurmctld told
    // slurmdbd.
    std::optional<SacctRecord> record;
    std::string line;
    EXPECT_TRUE(WaitFor(
        [&] {
          line = Slurm(fmt::format(
              "env SLURM_TIME_FORMAT=%s sacct -X -n -P -j {} -o User,Account,Start,End,State", id));
          record = ParseSacct(line);
          return record.has_value();
        },
        60s))
        << "sacct -j " << id << ": " << line;
    if (!record) continue;
    EXPECT_EQ(record->user, "k8s") << line;
    EXPECT_EQ(record->account, std::string(name) == "charged" ? "polid" : default_account) << line;
    EXPECT_GE(record->start, created_at - 1) << line;
    // The container slept 4 s on the job's allocation: the job ended after that, not before.
    EXPECT_GE(record->end - record->start, 4) << line;
    EXPECT_LE(record->end, finished_by + 60) << line;
    EXPECT_EQ(record->state.rfind("CANCELLED", 0), 0u)
        << "the controllers end a job whose pod is done: " << line;
  }
}

// Fair share. Two namespaces, each mapped to an account of its own (polfa, polfb; user k8s in
// both). At zero usage fair tree cannot tell two accounts apart (each one's level fair share,
// shares / usage, is infinite), so polfa gets usage first: its pods fill the 3 nodes (whole nodes,
// exclusive), and slurmctld's decay thread (every PriorityCalcPeriod) charges polfa for them.
// Meanwhile a burst of 3 whole-node pods of polfa and, created after them (so that at equal
// priority polfa's would go first: Slurm breaks ties by submit order; the environment gives age
// no weight), 3 of polfb wait. Once polfb's pending jobs outrank polfa's in Slurm's priorities
// (read with squeue %Q), the fillers end: the 3 freed nodes go to the 3 jobs Slurm ranked highest,
// polfb's, and polfa's start only after them. The waiting pods said why in Slurm's words
// (Resources for the first in line, Priority behind it).
TEST_F(PolicyE2e, FairShareOrdersTheBurstOfTwoNamespaces) {
  const std::string ns_a = ns_;
  const std::string ns_b = ns_ + "-b";
  auto second = SecondNamespace(ns_b);
  AddAccount("polfa");
  AddAccount("polfb");
  AddK8sTo("polfa");
  AddK8sTo("polfb");
  // Usage of an earlier run (a re-added association keeps its record) would decide instead.
  SlurmOk("sacctmgr -i modify account name=polfa,polfb set RawUsage=0");
  SlurmOk("sacctmgr -i modify user name=k8s account=polfa,polfb set RawUsage=0");
  if (HasFailure()) return;
  AddConfig(
      fmt::format("identityPolicy:\n- namespaces: [{}]\n  user: k8s\n  accounts: [polfa]\n"
                  "- namespaces: [{}]\n  user: k8s\n  accounts: [polfb]\n",
                  ns_a, ns_b));
  scheduler_ = StartBridge("all");
  const std::string to_a = R"({"slurmjob.slinky.slurm.net/account":"polfa"})";
  const std::string to_b = R"({"slurmjob.slinky.slurm.net/account":"polfb"})";
  for (int i = 0; i < 3; ++i) CreateBusyPod(ns_a, fmt::format("fill{}", i), kUntilReleased, to_a);
  if (HasFatalFailure()) return;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitForPodIn(ns_a, fmt::format("fill{}", i), IsRunning, 120s))
        << "fill" << i << " not running";
  }
  const std::string burst = "echo started; sleep 5";
  for (int i = 0; i < 3; ++i) CreateBusyPod(ns_a, fmt::format("a{}", i), burst, to_a);
  for (int i = 0; i < 3; ++i) CreateBusyPod(ns_b, fmt::format("b{}", i), burst, to_b);
  if (HasFatalFailure()) return;

  struct Burst {
    std::string ns;
    std::string name;
    bool b = false;
    std::int64_t job = 0;
    std::int64_t priority = 0;
  };
  std::vector<Burst> pods;
  for (int i = 0; i < 3; ++i) pods.push_back({ns_a, fmt::format("a{}", i), false});
  for (int i = 0; i < 3; ++i) pods.push_back({ns_b, fmt::format("b{}", i), true});
  for (Burst& p : pods) {
    std::optional<kube::Pod> with_job = WaitForPodIn(p.ns, p.name, HasJob, 60s);
    ASSERT_TRUE(with_job) << p.name << " got no Slurm job";
    p.job = JobId(*with_job);
  }
  // Until the decay thread has charged polfa, all six have the same fair-share factor.
  std::string seen;
  const bool ranked = WaitFor(
      [&] {
        std::int64_t lowest_b = INT64_MAX;
        std::int64_t highest_a = 0;
        seen.clear();
        for (Burst& p : pods) {
          std::optional<std::int64_t> prio = PendingPriority(p.job);
          if (!prio) return false;
          p.priority = *prio;
          seen += fmt::format("{}={} ", p.name, *prio);
          if (p.b) {
            lowest_b = std::min(lowest_b, *prio);
          } else {
            highest_a = std::max(highest_a, *prio);
          }
        }
        return lowest_b > highest_a;
      },
      180s);
  ASSERT_TRUE(ranked) << "polfb's jobs never outranked polfa's: " << seen << "\n"
                      << Slurm("sshare -a -l") << Slurm("sprio -l");
  std::cerr << "priorities before the cluster is freed: " << seen << "\n";
  // Each waiting pod says why, in Slurm's words.
  for (const Burst& p : pods) {
    const std::string message = WaitForWaitingReason(p.ns, p.name, {"Resources", "Priority"});
    EXPECT_TRUE(message == WaitingFor(p.job, "Resources") ||
                message == WaitingFor(p.job, "Priority"))
        << p.name << ": " << message;
    EXPECT_TRUE(HasEventWith(p.ns, p.name, "FailedScheduling", message)) << p.name;
  }

  for (int i = 0; i < 3; ++i) Release(ns_a, fmt::format("fill{}", i));
  // Every burst pod runs in the end: polfb's first (the 3 nodes freed), polfa's once those end.
  std::map<std::string, std::int64_t> started;  // pod -> Slurm's start time
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const Burst& p : pods) {
          if (started.contains(p.name)) continue;
          std::optional<kube::Pod> pod = GetPodIn(p.ns, p.name);
          if (!pod || !IsBound(*pod)) continue;
          std::optional<slurm::JobInfo> job = SlurmJob(p.job);
          if (job && job->start_time.Value()) started[p.name] = *job->start_time.Value();
        }
        return started.size() == pods.size();
      },
      150s))
      << started.size() << " of 6 burst pods started";
  std::vector<Burst> by_priority = pods;
  std::ranges::stable_sort(by_priority,
                           [](const Burst& x, const Burst& y) { return x.priority > y.priority; });
  std::vector<Burst> by_start = pods;
  std::ranges::stable_sort(
      by_start, [&](const Burst& x, const Burst& y) { return started[x.name] < started[y.name]; });
  std::string order;
  for (const Burst& p : by_start) order += fmt::format("{}@{} ", p.name, started[p.name]);
  std::set<std::string> first_three;
  std::set<std::string> top_three;
  for (int i = 0; i < 3; ++i) {
    first_three.insert(by_start[static_cast<std::size_t>(i)].name);
    top_three.insert(by_priority[static_cast<std::size_t>(i)].name);
  }
  EXPECT_EQ(first_three, top_three) << "started: " << order << "; priorities: " << seen;
  EXPECT_EQ(top_three, (std::set<std::string>{"b0", "b1", "b2"}));
  std::int64_t last_b = 0;
  std::int64_t first_a = INT64_MAX;
  for (const Burst& p : pods) {
    if (p.b) {
      last_b = std::max(last_b, started[p.name]);
    } else {
      first_a = std::min(first_a, started[p.name]);
    }
  }
  EXPECT_LT(last_b, first_a) << "polfa's pods started before polfb's were all running: " << order;
}

// A QOS that lets a user run 2 jobs at once: of three pods (1 CPU each, not exclusive: they
// would fit on one node), two run and the third waits with Slurm's reason
// QOSMaxJobsPerUserLimit on the pod; when one of the two finishes, the third starts.
TEST_F(PolicyE2e, QosMaxJobsPerUserHoldsTheThirdPodUntilOneFinishes) {
  AddQos("polq", "MaxJobsPerUser=2");
  AddAccount("polqa");
  AddK8sTo("polqa", "QOS=normal,polq");
  if (HasFailure()) return;
  AddConfig(fmt::format(
      "identityPolicy:\n- namespaces: [{}]\n  user: k8s\n  accounts: [polqa]\n  qos: [polq]\n",
      ns_));
  scheduler_ = StartBridge("all");
  const std::string annotations = R"({"slurmjob.slinky.slurm.net/account":"polqa",
      "slurmjob.slinky.slurm.net/qos":"polq","slurmjob.slinky.slurm.net/exclusive":"false"})";
  CreateBusyPod(ns_, "q0", kUntilReleased, annotations);
  CreateBusyPod(ns_, "q1", kUntilReleased, annotations);
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> q0 = WaitForPodIn(ns_, "q0", IsRunning, 120s);
  std::optional<kube::Pod> q1 = WaitForPodIn(ns_, "q1", IsRunning, 120s);
  ASSERT_TRUE(q0 && q1) << "the first two pods do not run";
  std::optional<slurm::JobInfo> job0 = SlurmJob(JobId(*q0));
  ASSERT_TRUE(job0);
  EXPECT_EQ(job0->qos, "polq");
  EXPECT_EQ(job0->account, "polqa");
  CreateBusyPod(ns_, "q2", kUntilReleased, annotations);
  if (HasFatalFailure()) return;
  const std::string message = WaitForWaitingReason(ns_, "q2", {"QOSMaxJobsPerUserLimit"});
  std::optional<kube::Pod> q2 = GetPodIn(ns_, "q2");
  ASSERT_TRUE(q2 && HasJob(*q2)) << "q2 got no Slurm job";
  const std::int64_t job2 = JobId(*q2);
  EXPECT_EQ(message, WaitingFor(job2, "QOSMaxJobsPerUserLimit"));
  EXPECT_TRUE(HasEventWith(ns_, "q2", "FailedScheduling", ": QOSMaxJobsPerUserLimit"));
  EXPECT_FALSE(IsBound(*q2));
  EXPECT_EQ(JobState(job2), "PENDING");

  // q0's workload ends: its pod Succeeds, the controllers cancel its job, and Slurm lets q2's
  // job start (still two at once).
  Release(ns_, "q0");
  std::optional<kube::Pod> bound = WaitForPodIn(ns_, "q2", IsBound, 90s);
  ASSERT_TRUE(bound) << "q2 not bound after q0 finished";
  EXPECT_NE(JobState(JobId(*q0)), "RUNNING") << "three jobs of the QOS running at once";
  EXPECT_EQ(JobState(JobId(*q1)), "RUNNING");
  EXPECT_TRUE(WaitForPodIn(ns_, "q2", IsRunning, 60s)) << "q2's container did not start";
  Release(ns_, "q1");
  Release(ns_, "q2");
}

// A reservation of n2 for user k8s: a pod annotated with it (the namespace's rule allows it)
// runs on n2; pods without it do not get n2 even while it is idle: two take n1 and n3, the third
// waits.
TEST_F(PolicyE2e, ReservationKeepsItsNodeForThePodThatNamesIt) {
  const std::string reservation = "polres";
  Slurm("scontrol delete reservation=" + reservation);  // one of an earlier run
  SlurmOk(
      fmt::format("scontrol create reservation ReservationName={} Nodes=n2 Users=k8s StartTime=now "
                  "Duration=10",
                  reservation));
  cleanup_.push_back("scontrol delete reservation=" + reservation);
  if (HasFailure()) return;
  AddConfig(fmt::format("identityPolicy:\n- namespaces: [{}]\n  user: k8s\n  reservations: [{}]\n",
                        ns_, reservation));
  scheduler_ = StartBridge("all");
  for (int i = 0; i < 3; ++i) CreateBusyPod(ns_, fmt::format("u{}", i), "sleep 600");
  if (HasFatalFailure()) return;
  std::vector<kube::Pod> pods;
  ASSERT_TRUE(WaitFor(
      [&] {
        pods = Pods();
        return CountBound(pods) == 2;
      },
      90s))
      << CountBound(pods) << " of the 3 unreserved pods bound";
  const auto waiting = std::ranges::find_if(pods, [](const kube::Pod& p) { return !IsBound(p); });
  ASSERT_NE(waiting, pods.end());
  const std::string waiting_name = waiting->metadata.name;
  const std::string message = WaitForWaitingReason(ns_, waiting_name, {});
  EXPECT_NE(message.find("waiting for Slurm job"), std::string::npos) << message;
  std::cerr << waiting_name << ": " << message << "\n";
  // n2 is idle, yet the third pod stays unbound: n2 is the reservation's.
  // (sinfo says "planned" there: backfill has planned the waiting job onto n2 for when the
  // reservation ends.)
  const std::string n2 = Slurm("sinfo -h -n n2 -o %T");
  EXPECT_EQ(n2.find("alloc"), std::string::npos) << n2;
  EXPECT_EQ(n2.find("mix"), std::string::npos) << n2;
  const std::string shown = Slurm("scontrol show reservation " + reservation);
  EXPECT_NE(shown.find("State=ACTIVE"), std::string::npos) << shown;
  EXPECT_FALSE(WaitFor(
      [&] {
        std::optional<kube::Pod> p = GetPodIn(ns_, waiting_name);
        return p && IsBound(*p);
      },
      5s))
      << waiting_name << " was bound while n2 is reserved";

  CreateBusyPod(ns_, "reserved", "sleep 600",
                fmt::format(R"({{"slurmjob.slinky.slurm.net/reservation":"{}"}})", reservation));
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> reserved = WaitForPodIn(ns_, "reserved", IsBound, 90s);
  ASSERT_TRUE(reserved) << "the pod of the reservation was not bound";
  EXPECT_EQ(reserved->spec.node_name, "n2");
  EXPECT_EQ(Squeue(JobId(*reserved), "%v"), reservation);
  for (const kube::Pod& p : Pods()) {
    if (p.metadata.name != "reserved") {
      EXPECT_NE(p.spec.node_name, "n2") << p.metadata.name;
    }
  }
}

// Backfill. A blocker pod (time limit 5 minutes) holds one node; a gang of 3 whole-node pods (a
// batch Job with the gang annotation, priority above every other job's) waits for it, and
// Slurm's backfill scheduler computes when the gang can start (the blocker's end). A small pod
// with the timelimit annotation of 1 minute fits before that on a free node: backfill starts it
// ahead of the gang (scontrol says Scheduler=Backfill), and the gang's expected start is not
// later than before. Every job here has a time limit: one without would end at the partition's
// MaxTime (INFINITE) as far as backfill can tell, and nothing could be backfilled around it.
TEST_F(PolicyE2e, BackfillRunsASmallShortPodAheadOfAWaitingGang) {
  AddConfig(fmt::format("identityPolicy:\n- namespaces: [{}]\n  maxPriority: 1000000\n", ns_));
  scheduler_ = StartBridge("all");
  CreateBusyPod(ns_, "blocker", "sleep 600", R"({"slurmjob.slinky.slurm.net/timelimit":"5"})");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> blocker = WaitForPodIn(ns_, "blocker", IsBound, 90s);
  ASSERT_TRUE(blocker) << "blocker not bound";

  CreateSleepingJob("gang",
                    R"({"slurmjob.slinky.slurm.net/gang":"true",
                    "slurmjob.slinky.slurm.net/timelimit":"10",
                    "slurmjob.slinky.slurm.net/priority":"1000000"})",
                    R"("parallelism":3,"completions":3,"backoffLimit":0)");
  if (HasFatalFailure()) return;
  std::int64_t gang_job = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::vector<kube::Pod> pods = Pods();
        for (const kube::Pod& p : pods) {
          if (p.metadata.name != "blocker" && HasJob(p)) gang_job = JobId(p);
        }
        return gang_job > 0;
      },
      60s))
      << "the gang got no Slurm job";
  std::optional<std::int64_t> before;
  ASSERT_TRUE(WaitFor(
      [&] {
        before = ExpectedStart(gang_job);
        return before.has_value();
      },
      60s))
      << "Slurm gives the gang no expected start: " << Squeue(gang_job, "%T:%S:%r");
  std::optional<slurm::JobInfo> blocker_job = SlurmJob(JobId(*blocker));
  ASSERT_TRUE(blocker_job && blocker_job->end_time.Value());
  // The gang can start when the blocker's time is up, not earlier (its node is taken until then).
  EXPECT_GE(*before, *blocker_job->end_time.Value() - 1);
  std::cerr << "gang " << gang_job << " expected at " << *before << ", blocker ends at "
            << *blocker_job->end_time.Value() << "\n";

  CreateBusyPod(ns_, "small", "echo small; sleep 5",
                R"({"slurmjob.slinky.slurm.net/timelimit":"1"})");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> small = WaitForPodIn(ns_, "small", IsBound, 60s);
  ASSERT_TRUE(small) << "the small pod was not backfilled";
  const std::int64_t small_job = JobId(*small);
  std::optional<slurm::JobInfo> small_info = SlurmJob(small_job);
  ASSERT_TRUE(small_info);
  EXPECT_EQ(small_info->time_limit.Value(), 1);
  std::optional<slurm::JobInfo> gang_info = SlurmJob(gang_job);
  ASSERT_TRUE(gang_info);
  EXPECT_EQ(gang_info->BaseState(), "PENDING") << "the gang started: nothing to backfill around";
  EXPECT_GT(*gang_info->priority.Value(), *small_info->priority.Value())
      << "the small job did not have to jump the queue";
  const std::string show = Slurm(fmt::format("scontrol show job -o {}", small_job));
  EXPECT_NE(show.find("Scheduler=Backfill"), std::string::npos) << show;
  std::optional<std::int64_t> after = ExpectedStart(gang_job);
  ASSERT_TRUE(after) << Squeue(gang_job, "%T:%S:%r");
  EXPECT_LE(*after, *before) << "backfilling the small pod delayed the gang";
  // The small pod runs to its end and its job is ended before its limit.
  EXPECT_TRUE(WaitForPodIn(ns_, "small", Succeeded, 60s)) << "the small pod did not finish";
  EXPECT_TRUE(WaitFor([&] { return JobState(small_job) == "CANCELLED"; }, 30s))
      << JobState(small_job);
}

// Time limits. A pod with the timelimit annotation 1 (minute) whose container would sleep 10
// minutes: Slurm ends its job TIMEOUT after a minute (it checks limits about every 30 s), and the
// controllers delete the pod with a SlurmJobEnded event that says so. A batch Job's
// activeDeadlineSeconds (30) becomes its job's time limit rounded up to minutes (1); Kubernetes'
// own deadline comes first (it counts from the Job's start, before the Slurm job's, and
// ceil(s/60) minutes is never shorter than s), so the Job controller ends that pod
// (DeadlineExceeded) and the controllers then cancel its job, well inside Slurm's limit.
TEST_F(PolicyE2e, TimeLimitsEndJobsAndTheirPods) {
  scheduler_ = StartBridge("all");
  CreateBusyPod(ns_, "limited", "sleep 600", R"({"slurmjob.slinky.slurm.net/timelimit":"1"})");
  if (HasFatalFailure()) return;
  CreateSleepingJob("deadline", "{}", R"("activeDeadlineSeconds":30,"backoffLimit":0)");
  if (HasFatalFailure()) return;

  std::optional<kube::Pod> limited = WaitForPodIn(ns_, "limited", IsRunning, 120s);
  ASSERT_TRUE(limited) << "limited not running";
  const std::int64_t limited_job = JobId(*limited);
  std::optional<slurm::JobInfo> info = SlurmJob(limited_job);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->time_limit.Value(), 1);

  std::optional<kube::Pod> deadline_pod;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const kube::Pod& p : Pods()) {
          if (p.metadata.name.starts_with("deadline-") && IsBound(p)) deadline_pod = p;
        }
        return deadline_pod.has_value();
      },
      60s))
      << "the deadline Job's pod was not bound";
  const std::int64_t deadline_slurm_job = JobId(*deadline_pod);
  std::optional<slurm::JobInfo> deadline_info = SlurmJob(deadline_slurm_job);
  ASSERT_TRUE(deadline_info);
  EXPECT_EQ(deadline_info->time_limit.Value(), 1) << "activeDeadlineSeconds 30 -> 1 minute";

  // The Job's deadline: the Job controller fails the Job and deletes its pod, whose job the
  // controllers then cancel.
  const kube::ResourceRef deadline_ref = kube::JobsRef(ns_).WithName("deadline");
  std::string conditions;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto j = RunSync(io_, kube::GetAs<kube::Job>(*kube_, deadline_ref));
        if (!j) return false;
        conditions.clear();
        for (const kube::Condition& c : j->conditions) {
          conditions += c.type + "=" + c.status + "(" + c.reason + ") ";
        }
        const kube::Condition* failed = kube::FindCondition(j->conditions, "Failed");
        return failed != nullptr && failed->status == "True" &&
               failed->reason == "DeadlineExceeded";
      },
      90s))
      << conditions;
  EXPECT_TRUE(WaitFor([&] { return PodGone(deadline_pod->metadata.name); }, 60s));
  EXPECT_TRUE(WaitFor([&] { return JobState(deadline_slurm_job) == "CANCELLED"; }, 30s))
      << "Slurm job " << deadline_slurm_job << " is " << JobState(deadline_slurm_job);

  // Slurm's limit: TIMEOUT within a minute plus its check interval, then the pod goes.
  ASSERT_TRUE(WaitFor([&] { return JobState(limited_job) == "TIMEOUT"; }, 150s))
      << "Slurm job " << limited_job << " is " << JobState(limited_job);
  info = SlurmJob(limited_job);
  ASSERT_TRUE(info && info->start_time.Value() && info->end_time.Value());
  EXPECT_GE(*info->end_time.Value() - *info->start_time.Value(), 60);
  EXPECT_TRUE(WaitFor([&] { return PodGone("limited"); }, 60s)) << "limited was not deleted";
  EXPECT_TRUE(HasEventWith(ns_, "limited", "SlurmJobEnded", "TIMEOUT"));
  // The words of the pod controller's event (issue #29: "Slurm job N reached its time limit
  // (TIMEOUT)").
  EXPECT_TRUE(HasEventWith(ns_, "limited", "SlurmJobEnded", "time limit"));
}

// Review R-1: a tenant's edit of a pending pod never takes its job past Slurm's limits. The
// bridge's token is SlurmUser's, and Slurm takes an operator's update of a pending job's time
// limit or CPUs as an admin's, past the partition's MaxTime and the QOS's MaxTRESPerJob; so the
// bridge cancels the job and submits a new one, which Slurm checks as any user's submit.
// Partition polr (MaxTime 10 minutes, down: the job waits while it is edited) and QOS polcap
// (MaxTRESPerJob cpu=4); the test Slurm has EnforcePartLimits=ALL, so a submit past MaxTime is
// refused and one past the QOS waits with QOSMaxCpuPerJobLimit.
TEST_F(PolicyE2e, EditsOfAPendingPodStayInsideThePartitionAndQosLimits) {
  Slurm("scontrol delete PartitionName=polr");  // one of an earlier run
  SlurmOk("scontrol create PartitionName=polr Nodes=ALL MaxTime=10 State=DOWN");
  cleanup_.push_back("scontrol delete PartitionName=polr");
  AddQos("polcap", "MaxTRESPerJob=cpu=4");
  AddAccount("polra");
  AddK8sTo("polra", "QOS=normal,polcap");
  if (HasFailure()) return;
  AddConfig(fmt::format(
      "identityPolicy:\n- namespaces: [{}]\n  user: k8s\n  accounts: [polra]\n  qos: [polcap]\n"
      "  partitions: [polr]\n",
      ns_));
  scheduler_ = StartBridge("all");
  CreateBusyPod(ns_, "r0", kUntilReleased, R"({"slurmjob.slinky.slurm.net/partition":"polr",
      "slurmjob.slinky.slurm.net/account":"polra","slurmjob.slinky.slurm.net/qos":"polcap",
      "slurmjob.slinky.slurm.net/timelimit":"5","slurmjob.slinky.slurm.net/cpu-per-task":"1",
      "slurmjob.slinky.slurm.net/exclusive":"false"})");
  if (HasFatalFailure()) return;
  std::optional<kube::Pod> r0 = WaitForPodIn(ns_, "r0", HasJob, 60s);
  ASSERT_TRUE(r0) << "r0 got no Slurm job";
  const std::int64_t first = JobId(*r0);
  EXPECT_EQ(JobState(first), "PENDING");
  const std::string kubectl = "KUBECONFIG=" + env_.Get("KUBECONFIG") + " kubectl -n " + ns_ + " ";
  // Every job of r0's that Slurm has not ended: id -> "TimeLimit CPUs state".
  auto live = [&] {
    std::map<std::int64_t, std::string> out;
    const std::map<std::string, std::vector<std::int64_t>> jobs = JobsByUid();
    auto mine = jobs.find(r0->metadata.uid);
    if (mine == jobs.end()) return out;
    for (std::int64_t id : mine->second) {
      std::optional<slurm::JobInfo> j = SlurmJob(id);
      if (!j || bridge::JobEnded(j->BaseState())) continue;
      out[id] =
          fmt::format("{} {} {}", j->time_limit.Value().value_or(-1), j->cpus, j->BaseState());
    }
    return out;
  };

  // A year: past the partition's MaxTime. The pending job is cancelled, and Slurm refuses the
  // new one; no job of r0's has the year.
  Shell(kubectl + "annotate pod r0 --overwrite slurmjob.slinky.slurm.net/timelimit=525600");
  EXPECT_TRUE(WaitFor([&] { return JobState(first) == "CANCELLED"; }, 60s))
      << "Slurm job " << first << " is " << JobState(first) << ": updated in place?";
  EXPECT_TRUE(
      HasEventWith(ns_, "r0", "SlurmJobResubmitted",
                   fmt::format("time_limit changed: pending Slurm job {} cancelled", first)));
  // The pod's PodScheduled message once it is `want` (within 90 s); else the last one seen.
  auto told = [&](const std::function<bool(const std::string&)>& want) {
    std::string message;
    WaitFor(
        [&] {
          std::optional<kube::Pod> p = GetPodIn(ns_, "r0");
          message = p ? std::string(scheduler::WithoutExpectedStart(WaitingCondition(*p))) : "";
          return want(message);
        },
        90s);
    return message;
  };
  const std::string refused =
      told([](const std::string& m) { return m.starts_with("Slurm refused the job"); });
  EXPECT_TRUE(refused.starts_with("Slurm refused the job")) << refused;
  EXPECT_EQ(live(), (std::map<std::int64_t, std::string>{}));

  // Back within MaxTime, 6 CPUs: past the QOS's 4. The new job waits for the QOS, and keeps
  // waiting once the partition is up.
  Shell(kubectl +
        "annotate pod r0 --overwrite slurmjob.slinky.slurm.net/timelimit=5 "
        "slurmjob.slinky.slurm.net/cpu-per-task=6");
  std::int64_t capped = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        std::optional<kube::Pod> p = GetPodIn(ns_, "r0");
        if (p && HasJob(*p) && JobId(*p) != first) capped = JobId(*p);
        return capped != 0;
      },
      90s))
      << "r0 got no new job";
  SlurmOk("scontrol update PartitionName=polr State=UP");
  const std::string waiting =
      fmt::format("waiting for Slurm job {} in partition polr: QOSMaxCpuPerJobLimit", capped);
  EXPECT_EQ(told([&](const std::string& m) { return m == waiting; }), waiting);
  EXPECT_EQ(live(), (std::map<std::int64_t, std::string>{{capped, "5 6 PENDING"}}));

  // 2 CPUs: within the QOS. A new job, which runs the pod.
  Shell(kubectl + "annotate pod r0 --overwrite slurmjob.slinky.slurm.net/cpu-per-task=2");
  std::optional<kube::Pod> running = WaitForPodIn(ns_, "r0", IsRunning, 120s);
  ASSERT_TRUE(running) << "r0 does not run within the limits";
  const std::int64_t last = JobId(*running);
  EXPECT_NE(last, capped);
  EXPECT_EQ(JobState(capped), "CANCELLED");
  EXPECT_EQ(live(), (std::map<std::int64_t, std::string>{{last, "5 2 RUNNING"}}));
  Release(ns_, "r0");
}

}  // namespace
}  // namespace sb::scheduler
