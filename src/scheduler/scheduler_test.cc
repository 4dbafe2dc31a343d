// SPDX-License-Identifier: Apache-2.0
//
// The scheduler's loop against an in-memory Slurm (FakeSlurmClient) and the fake apiserver (pods
// served by FakeApiServer; nodes, events, patches and bindings answered by a hook, a binding
// moving the pod onto its node as the apiserver does). Time is a FakeClock: the Slurm poll runs
// when the test advances it, so its calls can be counted exactly.
#include "scheduler/scheduler.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "async/clock.h"
#include "bridge/explain.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "kube/codec.h"
#include "net/http_client.h"
#include "testing/fake_apiserver.h"
#include "testing/fake_slurm_client.h"
#include "testing/run.h"
#include "testing/testdata.h"

namespace sb::scheduler {
namespace {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using sb::testing::FakeApiServer;
using sb::testing::FakeReply;
using sb::testing::FakeRequest;
using sb::testing::HttpReply;

// One Ready node, n1, known to Slurm under the same name.
constexpr std::string_view kNodeList =
    R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[)"
    R"({"metadata":{"name":"n1","resourceVersion":"1"},"spec":{},"status":{"conditions":[)"
    R"({"type":"Ready","status":"True"}],"allocatable":{"cpu":"64","memory":"256Gi"}}}]})";

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ep = net::ParseEndpoint(api_.url());
    ASSERT_TRUE(ep);
    http_ = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, {}));
    // Discovery answers are kept on the test's clock (ClientOptions::discovery_ttl).
    kube_ = kube::MakeClient(*http_, nullptr, {.now = [this] { return clock_.Now(); }});
    // The fake apiserver stamps deletions (deletionTimestamp = now + grace) on the test's clock.
    api_.now = [this] { return clock_.WallNow(); };
    api_.Intercept([this](const FakeRequest& req) { return Hook(req); });
    api_.pod_scheduler_name = config_.scheduler_name;
    slurm::NodeInfo n1;
    n1.name = "n1";
    slurm_.AddNode(n1);
  }

  void TearDown() override {
    if (scheduler_) {
      StopScheduler();
      EXPECT_TRUE(RunUntil([&] { return done_; })) << "Run() did not return after Stop()";
    }
  }

  // Stop() from inside the loop, as the process calls it (a signal, a lost lease). Called from
  // outside, asio posts the cancellation of an informer's pending request, which may then run
  // after that request completed and its cancellation handler was destroyed (a crash).
  void StopScheduler() {
    asio::post(io_, [s = scheduler_.get()] { s->Stop(); });
  }

  // Nodes, events, pod patches and bindings; pod lists and watches are the fake's.
  std::optional<FakeReply> Hook(const FakeRequest& req) {
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (path == "/api/v1/nodes") {
      if (req.target.find("watch=") != std::string::npos) {
        FakeReply r = FakeApiServer::WatchReply({});
        r.delay = 50ms;
        return r;
      }
      return HttpReply(200, std::string(kNodeList));
    }
    if (path.find("/events") != std::string::npos) {
      ++events_;
      return HttpReply(201, req.body);
    }
    if (req.method == "GET" && path == "/api/v1/namespaces/ns/pods" &&
        req.target.find("labelSelector=") != std::string::npos) {
      ++holder_lists_;  // ReadHolders; the fake answers
    }
    const std::string prefix = "/api/v1/namespaces/ns/pods/";
    if (!path.starts_with(prefix)) return std::nullopt;
    std::string rest = path.substr(prefix.size());
    const std::string name = rest.substr(0, rest.find('/'));
    const std::string sub = rest.size() > name.size() ? rest.substr(name.size() + 1) : "";
    const std::string json = api_.PodJson("ns", name);
    if (json.empty()) return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
    if (req.method == "GET" && sub.empty() && failing_gets_ > 0) {
      // (A 503 the HTTP client would try again.)
      --failing_gets_;
      return HttpReply(500, R"({"kind":"Status","code":500,"message":"etcd leader changed"})");
    }
    if (req.method == "POST" && sub == "binding" && lost_binding_replies_ > 0) {
      // Committed, and the reply lost (an apiserver that restarts just after): the GET that
      // checks fails too.
      --lost_binding_replies_;
      ++failing_gets_;
      const std::size_t at = req.body.find("\"name\":\"", req.body.find("\"target\""));
      const std::size_t from = at + std::string_view("\"name\":\"").size();
      api_.SetPodNode("ns", name, req.body.substr(from, req.body.find('"', from) - from));
      return HttpReply(503, R"({"kind":"Status","code":503,"message":"apiserver restarting"})");
    }
    if (req.method == "POST" && sub == "binding" && failing_bindings_ > 0) {
      --failing_bindings_;
      return HttpReply(500, R"({"kind":"Status","code":500,"message":"etcd timeout"})");
    }
    if (req.method == "POST" && sub == "binding") {
      // The fake's rules (test audit N4): 409 when the pod is bound already, being deleted, or
      // has another UID than the Binding's; else 201, spec.nodeName set, and the pod leaves the
      // unbound pods' watch. Only accepted bindings are recorded.
      if (before_binding_) before_binding_(name);
      FakeReply r = api_.Answer(req);
      if (!r.bytes.starts_with("HTTP/1.1 201")) {
        ++refused_bindings_;
        return r;
      }
      // {"target":{"kind":"Node","name":"n1"}}
      const std::string key = R"("name":")";
      const std::size_t target = req.body.find("\"target\"");
      const std::size_t at = req.body.find(key, target);
      bindings_[name] =
          req.body.substr(at + key.size(), req.body.find('"', at + key.size()) - at - key.size());
      binding_bodies_[name] = req.body;
      return r;
    }
    if (req.method == "PATCH" && sub == "status") {
      ++status_patches_;
      return HttpReply(200, json);
    }
    if (req.method == "PATCH" && sub.empty()) {
      ++patches_[name];
      if (apply_patches_) return std::nullopt;  // the fake applies it (and the watch shows it)
      return HttpReply(200, json);
    }
    if (req.method == "GET" && sub.empty()) return HttpReply(200, json);
    return std::nullopt;
  }

  void Start() {
    scheduler_ = std::make_unique<Scheduler>(io_.get_executor(), *kube_, slurm_, clock_, config_);
    scheduler_->SetWriteGate([this] { return leading_; });
    asio::co_spawn(io_, scheduler_->Run(), [this](std::exception_ptr e, Result<void> r) {
      EXPECT_FALSE(e);
      EXPECT_TRUE(r);
      done_ = true;
    });
    // Run() looks for the informers' first LIST every 20 ms of the fake clock.
    ASSERT_TRUE(RunUntil([&] {
      if (scheduler_->Ready()) return true;
      clock_.Advance(20ms);
      return false;
    }));
  }

  // Drives the loop until `pred` holds (a guard against a hang, not a timed assertion).
  bool RunUntil(const std::function<bool()>& pred, std::chrono::seconds guard = 60s) {
    return sb::testing::RunLoopUntil(io_, pred, guard);
  }

  // As RunUntil, moving the fake clock on by `step` while the loop is idle (retries, polls).
  bool AdvanceUntil(const std::function<bool()>& pred, async::Clock::Duration step = 100ms) {
    return sb::testing::RunLoopUntil(io_, pred, 60s, [&] { clock_.Advance(step); });
  }

  // Slurm jobs not ended.
  int LiveJobs() const {
    int n = 0;
    for (std::int64_t id : slurm_.JobIds()) {
      const std::string_view s = slurm_.Job(id)->BaseState();
      n += s == "PENDING" || s == "RUNNING" ? 1 : 0;
    }
    return n;
  }

  // The job submitted for pod ns/`name` (its tag names the pod); 0 when none.
  std::int64_t JobOf(const std::string& name) const {
    for (std::int64_t id : slurm_.JobIds()) {
      if (slurm_.Job(id)->admin_comment.find("ns/" + name + "\"") != std::string::npos) return id;
    }
    return 0;
  }

  // Slurm allocates n1 to job `id`.
  void Allocate(std::int64_t id) {
    slurm::JobInfo j = *slurm_.Job(id);
    j.job_state = {"RUNNING"};
    j.nodes = "n1";
    slurm_.AddJob(j);
  }

  // N pending pods, each with its job submitted and labelled.
  void StartWithPendingPods(int n) {
    for (int i = 0; i < n; ++i) api_.AddPod("ns", "p" + std::to_string(i));
    Start();
    ASSERT_TRUE(RunUntil([&] {
      return slurm_.calls("SubmitJob") == n && static_cast<int>(patches_.size()) == n &&
             scheduler_->QueueDepth() == 0;
    })) << slurm_.calls("SubmitJob")
        << " submits, " << patches_.size() << " labelled, " << scheduler_->QueueDepth()
        << " queued";
  }

  // N pending pods as the webhook makes them (finalizer and toleration set at CREATE), each
  // with its job submitted.
  void StartWithWebhookPods(int n) {
    api_.pod_merge_patch =
        fmt::format(R"({{"metadata":{{"finalizers":["{}"]}},"spec":{{"tolerations":[{}]}}}})",
                    bridge::kFinalizer, bridge::ManagedNodeTolerationJson(config_.scheduler_name));
    for (int i = 0; i < n; ++i) api_.AddPod("ns", "p" + std::to_string(i));
    Start();
    ASSERT_TRUE(
        RunUntil([&] { return slurm_.calls("SubmitJob") == n && scheduler_->QueueDepth() == 0; }));
  }

  bridge::Config config_;
  asio::io_context io_;
  FakeApiServer api_{io_};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  sb::testing::FakeSlurmClient slurm_;
  async::FakeClock clock_;
  bool leading_ = true;  // the write gate (the lease thread's view of leadership)
  std::unique_ptr<Scheduler> scheduler_;
  bool done_ = false;
  int events_ = 0;
  int status_patches_ = 0;
  int holder_lists_ = 0;      // pod lists by label selector (the holders of a job)
  int failing_bindings_ = 0;  // the next bindings answered 500
  int refused_bindings_ = 0;  // bindings the fake refused (409: bound, another UID)
  // Called with the pod's name before the fake answers a Binding: another writer's move.
  std::function<void(const std::string&)> before_binding_;
  std::map<std::string, int> patches_;                 // pod name -> label patches
  std::map<std::string, std::string> bindings_;        // pod name -> node
  std::map<std::string, std::string> binding_bodies_;  // pod name -> the Binding sent
  int failing_gets_ = 0;                               // the next GETs of a pod answer 500
  // The next bindings are committed and answer 503, and the GET after each answers 500.
  int lost_binding_replies_ = 0;
  // Pod patches reach the fake's store, as the apiserver applies them (test audit N4); false:
  // answered with the pod unchanged.
  bool apply_patches_ = true;
};

// Test audit #8 and review item 13: watching Slurm costs one request to /jobs/state/ per
// jobPollInterval, whatever the number of waiting pods, asking for the tracked jobs only (not
// every job of the cluster), and no GET /job/{id} while no job changes state.
class ConstantCostTest : public SchedulerTest, public ::testing::WithParamInterface<int> {};

TEST_P(ConstantCostTest, OneStatePollPerIntervalWhateverThePendingCount) {
  const int n = GetParam();
  // Jobs of others in the cluster: never asked about.
  for (int i = 0; i < 50; ++i) slurm_.AddJob("PENDING", "");
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(n));
  EXPECT_EQ(slurm_.calls("JobStates"), 0) << "no poll before the first interval";
  const int lists = slurm_.calls("ListJobsSince");
  const std::uint64_t requests = slurm_.requests();
  std::vector<std::int64_t> tracked;
  for (int i = 0; i < n; ++i) tracked.push_back(JobOf("p" + std::to_string(i)));
  std::ranges::sort(tracked);
  constexpr int kPolls = 8;  // 4 s: less than jobListInterval
  for (int k = 1; k <= kPolls; ++k) {
    const std::uint64_t before = scheduler_->stats().state_polls;
    clock_.Advance(config_.job_poll_interval);
    ASSERT_TRUE(RunUntil([&] { return scheduler_->stats().state_polls > before; }));
  }
  EXPECT_EQ(slurm_.calls("JobStates"), kPolls);
  EXPECT_EQ(slurm_.requests() - requests, static_cast<std::uint64_t>(kPolls))
      << "one HTTP request per poll, also with " << n << " ids";
  ASSERT_EQ(slurm_.state_queries().size(), static_cast<std::size_t>(kPolls));
  for (const std::vector<std::int64_t>& ids : slurm_.state_queries()) {
    EXPECT_EQ(ids, tracked) << "exactly the tracked jobs";
  }
  EXPECT_EQ(slurm_.calls("GetJob"), 0);
  EXPECT_EQ(slurm_.calls("ListJobsSince"), lists);
  EXPECT_EQ(slurm_.calls("SubmitJob"), n) << "one job per pod, submitted once";
  EXPECT_EQ(LiveJobs(), n + 50);
  // A job that starts costs one GET /resources/{id} (its nodes and GPUs), for that job only.
  const std::int64_t first = JobOf("p0");
  ASSERT_NE(first, 0);
  Allocate(first);
  clock_.Advance(config_.job_poll_interval);
  ASSERT_TRUE(RunUntil([&] { return bindings_.contains("p0"); }));
  EXPECT_EQ(slurm_.calls("JobStates"), kPolls + 1);
  EXPECT_EQ(slurm_.calls("JobResources"), 1);
  EXPECT_EQ(slurm_.calls("GetJob"), 0) << "the layout is enough; no 28 KB job record";
  EXPECT_EQ(bindings_.size(), 1u);
}

// Issue #13: the nodes excluded for a pod are kept per pod shape, and a new Slurm node list
// starts them afresh: a job excluding a node Slurm no longer knows would be refused.
TEST_F(SchedulerTest, ExcludedNodesOfAPodShapeFollowSlurmsNodeList) {
  slurm::NodeInfo gone;
  gone.name = "gone";  // no Kubernetes node: excluded
  slurm_.AddNode(gone);
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(2));
  ASSERT_EQ(slurm_.submitted().size(), 2u);
  EXPECT_EQ(slurm_.submitted()[0].excluded_nodes, std::vector<std::string>{"gone"});
  EXPECT_EQ(slurm_.submitted()[1].excluded_nodes, std::vector<std::string>{"gone"});
  ASSERT_TRUE(sb::testing::RunSync(io_, slurm_.DeleteNode("gone")));
  const int lists = slurm_.calls("ListNodes");
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("ListNodes") > lists; }, 1s));
  api_.AddPod("ns", "p2");
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.submitted().size() == 3; }));
  EXPECT_TRUE(slurm_.submitted()[2].excluded_nodes.empty());
}

// A slurmrestd without /resources/ (404 without a Slurm error: "Unable to find requested URL
// endpoint"): the job record gives the nodes, and the layout is not asked for again.
TEST_F(SchedulerTest, WithoutTheResourceLayoutTheJobRecordGivesTheNodes) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(2));
  slurm_.FailNext("JobResources",
                  Error{ErrorCode::kNotFound, "resources of job: HTTP 404: Unable to find", 404});
  for (const char* name : {"p0", "p1"}) {
    Allocate(JobOf(name));
    clock_.Advance(config_.job_poll_interval);
    ASSERT_TRUE(RunUntil([&] { return bindings_.contains(name); })) << name;
  }
  EXPECT_EQ(slurm_.calls("JobResources"), 1);
  EXPECT_EQ(slurm_.calls("GetJob"), 2);
}

// The poll saw the job RUNNING, but Slurm refuses its layout (422, Slurm's 2085 "Job is not
// running": it changed in between): the job record decides, here RUNNING on n1 again, and the
// layout is still asked for next time.
TEST_F(SchedulerTest, LayoutRefusedThenTheJobRecordDecides) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(2));
  Error not_running{ErrorCode::kFailedPrecondition, "resources of job: Job is not running", 422};
  not_running.details.push_back({.number = 2085, .error = "Job is not running"});
  slurm_.FailNext("JobResources", not_running);
  Allocate(JobOf("p0"));
  clock_.Advance(config_.job_poll_interval);
  ASSERT_TRUE(RunUntil([&] { return bindings_.contains("p0"); }));
  EXPECT_EQ(bindings_.at("p0"), "n1");
  EXPECT_EQ(slurm_.calls("GetJob"), 1);
  Allocate(JobOf("p1"));
  clock_.Advance(config_.job_poll_interval);
  ASSERT_TRUE(RunUntil([&] { return bindings_.contains("p1"); }));
  EXPECT_EQ(slurm_.calls("JobResources"), 2);
  EXPECT_EQ(slurm_.calls("GetJob"), 1);
}

INSTANTIATE_TEST_SUITE_P(PendingPods, ConstantCostTest, ::testing::Values(10, 1000));

// Issue #13, latency: right after a submit the tracked jobs are polled every 10 ms (Slurm usually
// starts a job that fits within its first scheduling pass), for 3 s; then every jobPollInterval
// again (the idle cost stays one request per interval).
TEST_F(SchedulerTest, FreshJobsArePolledFastThenAtTheInterval) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  for (int k = 1; k <= 5; ++k) {
    const std::uint64_t before = scheduler_->stats().state_polls;
    clock_.Advance(50ms);
    ASSERT_TRUE(RunUntil([&] { return scheduler_->stats().state_polls > before; })) << k;
  }
  std::uint64_t before = scheduler_->stats().state_polls;
  clock_.Advance(3s);  // the fresh window is over
  ASSERT_TRUE(RunUntil([&] { return scheduler_->stats().state_polls > before; }));
  const std::uint64_t quiet = scheduler_->stats().state_polls;
  int steps = 0;  // 9 x 50 ms, each run until the loop is idle: no poll
  ASSERT_TRUE(sb::testing::RunLoopUntil(
      io_, [&] { return steps == 9; }, 60s,
      [&] {
        clock_.Advance(50ms);
        ++steps;
      }));
  EXPECT_EQ(scheduler_->stats().state_polls, quiet) << "polled before jobPollInterval";
  clock_.Advance(50ms);  // 500 ms since the last poll
  ASSERT_TRUE(RunUntil([&] { return scheduler_->stats().state_polls > quiet; }));
}

// Issue #13, the idle cost: with 1,000 pods waiting and nothing changing, at most one request to
// slurmrestd per jobPollInterval over minutes: the periodic job list and node list stand in for
// that interval's state poll instead of adding to it. Issue #46: jobs pending for more than
// bridge::kLongPending are asked every pendingJobPollInterval (2 s), so the state polls come
// once per 2 s, not twice per second.
TEST_F(SchedulerTest, IdleCostIsOneRequestPerPendingPollIntervalWithListsIncluded) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1000));
  // Past the start-up watch (Slurm's whole list is read for a while after start-up).
  const async::Clock::TimePoint settled = clock_.Now() + 2min;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= settled; }, config_.job_poll_interval));
  const std::uint64_t before = scheduler_->stats().state_polls;
  ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->stats().state_polls > before; },
                           config_.job_poll_interval));
  const std::uint64_t requests = slurm_.requests();
  const int lists = slurm_.calls("ListJobsSince");
  const int node_lists = slurm_.calls("ListNodes");
  const int reads = slurm_.calls("GetJob");
  const int state_polls = slurm_.calls("JobStates");
  constexpr int kIntervals = 240;  // 2 minutes at 500 ms: 4 reason reads and 4 node lists due
  int steps = 0;
  ASSERT_TRUE(sb::testing::RunLoopUntil(
      io_, [&] { return steps == kIntervals; }, 60s,
      [&] {
        clock_.Advance(config_.job_poll_interval);
        ++steps;
      }));
  // Issue #46: in steady state Slurm's whole job list is never read; the pending jobs' reasons
  // are read a few at a time (8 per jobListInterval), whatever their number.
  EXPECT_EQ(slurm_.calls("ListJobsSince"), lists) << "Slurm's whole job list read when idle";
  const int reason_reads = slurm_.calls("GetJob") - reads;
  EXPECT_GE(reason_reads, 3 * 8) << "the pending jobs' reasons are still read";
  EXPECT_LE(reason_reads, 5 * 8);
  EXPECT_GE(slurm_.calls("ListNodes") - node_lists, 3) << "the periodic node list still runs";
  const int states = slurm_.calls("JobStates") - state_polls;
  const int per_pending_interval =
      static_cast<int>(kIntervals * config_.job_poll_interval / config_.pending_job_poll_interval);
  EXPECT_LE(states, per_pending_interval + 1)
      << "long-pending jobs asked more often than pendingJobPollInterval";
  // (A node list stands in for a poll: the jobs due then wait for the next period.)
  EXPECT_GE(states, per_pending_interval - 6) << "the waiting jobs are still watched";
  EXPECT_LE(
      slurm_.requests() - requests,
      static_cast<std::uint64_t>(states + reason_reads + slurm_.calls("ListNodes") - node_lists))
      << "requests besides the state polls, reason reads and node lists while idle: " << states
      << " state polls, " << slurm_.calls("ListNodes") - node_lists << " node lists, "
      << reason_reads << " job reads";
  // A long-pending job that starts is seen, and its pod bound, within one pendingJobPollInterval
  // (and the poll's step).
  const std::int64_t first = JobOf("p0");
  ASSERT_NE(first, 0);
  Allocate(first);
  const async::Clock::TimePoint allocated = clock_.Now();
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p0"); }, 50ms));
  EXPECT_LE(clock_.Now() - allocated,
            config_.pending_job_poll_interval + config_.job_poll_interval);
}

// Test audit N4: another writer (a second replica, another scheduler) binds the pod between the
// scheduler's read and its Binding: the apiserver answers 409. The pod stays where the other
// writer put it, no second Binding follows, and the job placed for it is not left running.
TEST_F(SchedulerTest, AnotherWriterBindsFirstThePodStaysAndTheJobEnds) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t job = JobOf("p0");
  before_binding_ = [&](const std::string& name) {
    api_.SetPodNode("ns", name, "n2");
    before_binding_ = nullptr;
  };
  Allocate(job);
  ASSERT_TRUE(AdvanceUntil([&] { return refused_bindings_ == 1; }));
  ASSERT_TRUE(AdvanceUntil([&] { return LiveJobs() == 0; }))
      << "the job placed for the pod is cancelled once no pod holds it";
  const auto until = clock_.Now() + 60s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }));
  EXPECT_EQ(refused_bindings_, 1) << "no second Binding";
  EXPECT_TRUE(bindings_.empty());
  EXPECT_EQ(scheduler_->stats().bound_elsewhere, 1u);
  EXPECT_GE(events_, 1) << "BoundElsewhere on the pod";
  const std::string pod = api_.PodJson("ns", "p0");
  EXPECT_NE(pod.find(R"("nodeName":"n2")"), std::string::npos) << pod;
  EXPECT_EQ(pod.find(bridge::kJobIdLabel), std::string::npos)
      << "the job's end must not delete a pod it never held: " << pod;
}

// Test audit N4: the pod is deleted and created again under its name (a new UID) between the
// scheduler's read and its Binding: the Binding's UID precondition fails (409), the old pod's
// job is cancelled, and the new pod is scheduled as itself, once, with a job of its own.
TEST_F(SchedulerTest, PodRecreatedBeforeTheBindingIsScheduledAsItself) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t job = JobOf("p0");
  before_binding_ = [&](const std::string& name) {
    api_.DeletePod("ns", name);
    api_.AddPod("ns", name);
    before_binding_ = nullptr;
  };
  Allocate(job);
  ASSERT_TRUE(AdvanceUntil([&] { return refused_bindings_ == 1; }));
  ASSERT_TRUE(AdvanceUntil([&] {
    for (std::int64_t id : slurm_.JobIds()) {
      if (id != job && slurm_.Job(id)->BaseState() == "PENDING") Allocate(id);
    }
    return bindings_.contains("p0");
  }));
  const std::string pod = api_.PodJson("ns", "p0");
  EXPECT_NE(pod.find(R"("nodeName":"n1")"), std::string::npos) << pod;
  EXPECT_EQ(slurm_.Job(job)->BaseState(), "CANCELLED") << "the old pod's job";
  EXPECT_EQ(LiveJobs(), 1);
  EXPECT_EQ(slurm_.JobIds().size(), 2u);
  EXPECT_NE(binding_bodies_["p0"].find(R"("uid":"uid-ns-p0-)"), std::string::npos)
      << "the Binding carries the UID precondition: " << binding_bodies_["p0"];
  EXPECT_EQ(refused_bindings_, 1);
}

// Issue #13: a job this process submitted and never bound for has no holders, so binding its
// pods costs no pod LIST (a scan of the namespace's pods in the apiserver, per job). After a
// failed Binding the pods may carry the job's label: the retry reads the holders.
TEST_F(SchedulerTest, FreshJobIsBoundWithoutListingHoldersAndARetryListsThem) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(2));
  Allocate(JobOf("p0"));
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p0"); }));
  EXPECT_EQ(holder_lists_, 0);
  failing_bindings_ = 1;
  Allocate(JobOf("p1"));
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p1"); }));
  EXPECT_EQ(holder_lists_, 1) << "the retry after the failed Binding reads the holders";
  EXPECT_EQ(failing_bindings_, 0);
}

// Issue #13, latency: between the full polls (every jobPollInterval), the fast polls after a
// submit ask only for the jobs submitted within the last 3 s, so that they stay small when many
// jobs wait.
TEST_F(SchedulerTest, FastPollsAskForTheFreshJobsOnlyAndFullPollsForAll) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(3));
  const std::int64_t old_job = JobOf("p0");
  const std::uint64_t polls = scheduler_->stats().state_polls;
  clock_.Advance(3s);  // p0..p2's jobs are no longer fresh
  ASSERT_TRUE(RunUntil([&] { return scheduler_->stats().state_polls > polls; }));
  api_.AddPod("ns", "late");
  ASSERT_TRUE(AdvanceUntil([&] { return JobOf("late") != 0; }, 5ms));
  const std::int64_t fresh_job = JobOf("late");
  const std::size_t before = slurm_.state_queries().size();
  int steps = 0;  // 600 ms in 20 ms steps: fast polls, and one full poll
  ASSERT_TRUE(sb::testing::RunLoopUntil(
      io_, [&] { return steps == 30; }, 60s,
      [&] {
        clock_.Advance(20ms);
        ++steps;
      }));
  const std::vector<std::vector<std::int64_t>>& queries = slurm_.state_queries();
  ASSERT_GT(queries.size(), before + 10) << "polled every 20 ms after the submit";
  int full = 0;
  for (std::size_t i = before; i < queries.size(); ++i) {
    if (queries[i].size() == 1) {
      EXPECT_EQ(queries[i].front(), fresh_job);
    } else {
      EXPECT_EQ(queries[i].size(), 4u);
      EXPECT_NE(std::ranges::find(queries[i], old_job), queries[i].end());
      ++full;
    }
  }
  EXPECT_GE(full, 1) << "every tracked job at least every jobPollInterval";
  EXPECT_LE(full, 2);
}

// Issue #13: a pod labelled after its submit (label, finalizer, toleration) is bound with one
// write, a Binding that carries the node's annotations (the apiserver adds them to the pod); a
// pod whose label the cache does not show is patched first.
TEST_F(SchedulerTest, LabelledPodIsBoundWithOneWriteThatCarriesTheAnnotations) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  ASSERT_EQ(patches_["p0"], 1) << "labelled after the submit";
  ASSERT_TRUE(RunUntil([&] {
    std::shared_ptr<const kube::Pod> cached = scheduler_->CachedPod("ns/p0");
    return cached && cached->metadata.labels.contains(std::string(bridge::kJobIdLabel));
  }));
  Allocate(JobOf("p0"));
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p0"); }));
  EXPECT_EQ(patches_["p0"], 1) << "no second patch at bind time";
  EXPECT_NE(binding_bodies_["p0"].find(R"("slinky.slurm.net/slurm-node":"n1")"), std::string::npos)
      << binding_bodies_["p0"];
  EXPECT_EQ(scheduler_->stats().bind_patches, 0u);
}

// Issue #31: the webhook set the finalizer and the toleration at CREATE, and the apiserver
// copies a Binding's labels (1.35+): no patch at all; the Binding carries the job-id label, and
// the first bound pod is read back once to see that the label landed.
TEST_F(SchedulerTest, PodFromTheWebhookIsBoundByItsBindingAloneWhichCarriesTheJobIdLabel) {
  ASSERT_NO_FATAL_FAILURE(StartWithWebhookPods(2));
  EXPECT_TRUE(patches_.empty()) << "nothing to patch after the submit";
  const auto label_of = [&](const std::string& name) {
    return fmt::format(R"("{}":"{}")", bridge::kJobIdLabel, JobOf(name));
  };
  for (const std::string name : {"p0", "p1"}) {
    Allocate(JobOf(name));
    ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains(name); })) << name;
    EXPECT_NE(binding_bodies_[name].find(R"("labels":{)" + label_of(name) + "}"), std::string::npos)
        << binding_bodies_[name];
    EXPECT_NE(api_.PodJson("ns", name).find(label_of(name)), std::string::npos)
        << api_.PodJson("ns", name);
  }
  EXPECT_TRUE(patches_.empty());
  EXPECT_EQ(scheduler_->stats().bind_patches, 0u);
}

// An apiserver that drops a Binding's labels (before 1.35): the first pod bound so is labelled
// right after, and from then on pods carry the label before their Binding, as before.
TEST_F(SchedulerTest, ApiserverThatDropsBindingLabelsGetsThemPatchedAndLabelledBeforeBinding) {
  api_.binding_drops_labels = true;
  ASSERT_NO_FATAL_FAILURE(StartWithWebhookPods(2));
  const auto labelled = [&](const std::string& name) {
    return api_.PodJson("ns", name)
               .find(fmt::format(R"("{}":"{}")", bridge::kJobIdLabel, JobOf(name))) !=
           std::string::npos;
  };
  Allocate(JobOf("p0"));
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p0") && labelled("p0"); }));
  EXPECT_EQ(patches_["p0"], 1) << "the label, after the Binding that lost it";
  Allocate(JobOf("p1"));
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p1"); }));
  EXPECT_TRUE(labelled("p1"));
  EXPECT_GE(patches_["p1"], 1) << "labelled before its Binding";
  EXPECT_EQ(binding_bodies_["p1"].find("\"labels\""), std::string::npos) << binding_bodies_["p1"];
}

// A pod deleted before it joined a group (here: gated) loses the finalizer the webhook gave it
// at CREATE, and goes.
TEST_F(SchedulerTest, GatedPodDeletedWithTheWebhooksFinalizerIsReleased) {
  api_.pod_merge_patch = fmt::format(
      R"({{"metadata":{{"finalizers":["{}"]}},"spec":{{"schedulingGates":[{{"name":"g"}}]}}}})",
      bridge::kFinalizer);
  api_.AddPod("ns", "gated");
  Start();
  ASSERT_TRUE(RunUntil([&] { return scheduler_->QueueDepth() == 0; }));
  api_.PatchPod("ns", "gated", R"({"metadata":{"deletionTimestamp":"2026-12-04T00:00:00Z"}})");
  ASSERT_TRUE(AdvanceUntil([&] { return api_.PodJson("ns", "gated").empty(); }))
      << api_.PodJson("ns", "gated");
  EXPECT_EQ(slurm_.calls("SubmitJob"), 0);
}

// Issue #46: a bound job stays known (a member re-created later finds it) and is not polled;
// once it ended it is forgotten within kListedRefresh (5 minutes), without a whole list.
TEST_F(SchedulerTest, BoundJobThatEndedIsForgottenWithoutAWholeList) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t id = JobOf("p0");
  Allocate(id);
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p0"); }));
  ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->TrackedJobs() == 0; }));
  EXPECT_EQ(scheduler_->ListedJobs(), 1u) << "the bound job is still known";
  const async::Clock::TimePoint settled = clock_.Now() + 2min;  // past the start-up watch
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= settled; }, 500ms));
  const int lists = slurm_.calls("ListJobsSince");
  slurm_.SetJobState(id, "COMPLETED");
  const async::Clock::TimePoint until = clock_.Now() + 6min;
  ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->ListedJobs() == 0; }, 1s))
      << "an ended bound job is kept";
  EXPECT_LE(clock_.Now(), until);
  EXPECT_EQ(slurm_.calls("ListJobsSince"), lists) << "forgotten by a whole list";
}

// Nothing tracked, nothing asked: no /jobs/state/ and no /jobs/ while no pod waits.
TEST_F(SchedulerTest, NoTrackedJobNoSlurmJobRequests) {
  for (int i = 0; i < 20; ++i) slurm_.AddJob("RUNNING", "");
  Start();
  const int lists = slurm_.calls("ListJobsSince");
  int polls = 0;  // 100 poll intervals, each run until the loop is idle
  ASSERT_TRUE(sb::testing::RunLoopUntil(
      io_, [&] { return polls == 100; }, 60s,
      [&] {
        clock_.Advance(config_.job_poll_interval);
        ++polls;
      }));
  EXPECT_EQ(slurm_.calls("JobStates"), 0);
  EXPECT_EQ(slurm_.calls("ListJobsSince"), lists);
}

// Review item 13: the periodic job list asks Slurm for changes since the last one
// (update_time); "no change" keeps the last list, and a second job tagged for a tracked group
// (review item 2: an old leader's late submit) is still cancelled by the next list. Issue #46:
// that list is read only in the start-up watch; after it, never while idle.
TEST_F(SchedulerTest, PeriodicListAsksForChangesAndStillCancelsASecondJob) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t first = JobOf("p0");
  auto next_list = [&] {
    const std::uint64_t before = scheduler_->stats().job_lists;
    return AdvanceUntil([&] { return scheduler_->stats().job_lists > before; }, 500ms);
  };
  ASSERT_TRUE(next_list());  // the submit was a change: a whole list
  EXPECT_TRUE(slurm_.cancels().empty());
  // Another writer submits a second job for the same pod.
  slurm::JobInfo dup = *slurm_.Job(first);
  dup.job_id = slurm_.next_job_id;
  const std::int64_t second = slurm_.AddJob(dup);
  ASSERT_TRUE(next_list());
  ASSERT_TRUE(RunUntil([&] { return !slurm_.cancels().empty(); }));
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{second}));
  EXPECT_EQ(slurm_.Job(first)->BaseState(), "PENDING");
  // The watch ends: the pending job's reason is still read, Slurm's whole list no more.
  const async::Clock::TimePoint settled = clock_.Now() + 2min;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= settled; }, 500ms));
  const int lists = slurm_.calls("ListJobsSince");
  const int reads = slurm_.calls("GetJob");
  const async::Clock::TimePoint until = clock_.Now() + 10min;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }, 500ms));
  EXPECT_EQ(slurm_.calls("ListJobsSince"), lists);
  EXPECT_GE(slurm_.calls("GetJob") - reads, 10) << "the pending job's reason, every 30 s";
  EXPECT_GT(scheduler_->stats().job_detail_reads, 0u);
}

// A submit whose reply is lost (Slurm made the job, the caller got a timeout) leaves one job for
// the pod, which is adopted and bound once it runs.
TEST_F(SchedulerTest, LostSubmitReplyLeavesOneJobThatIsBound) {
  for (ErrorCode code : {ErrorCode::kDeadlineExceeded, ErrorCode::kUnavailable}) {
    SCOPED_TRACE(static_cast<int>(code));
    const std::string name = code == ErrorCode::kDeadlineExceeded ? "late" : "cut";
    slurm_.FailNext("SubmitJob", Error{.code = code, .message = "reply lost"}, 1, /*apply=*/true);
    const std::uint64_t adopted = scheduler_ ? scheduler_->stats().jobs_adopted : 0;
    api_.AddPod("ns", name);
    if (!scheduler_) Start();
    ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->stats().jobs_adopted > adopted; }));
    const std::int64_t id = JobOf(name);
    // Several passes, polls and a job list later, still the one job.
    const int lists = slurm_.calls("ListJobsSince");
    ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("ListJobsSince") >= lists + 1; }, 500ms));
    EXPECT_EQ(LiveJobs(), 1);
    Allocate(id);
    ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains(name); }));
    EXPECT_EQ(bindings_[name], "n1");
    EXPECT_EQ(LiveJobs(), 1);
    EXPECT_TRUE(slurm_.cancels().empty());
    slurm_.SetJobState(id, "COMPLETED");  // the next pod's job is the only live one
  }
  EXPECT_EQ(slurm_.calls("SubmitJob"), 2);
  EXPECT_EQ(scheduler_->stats().jobs_adopted, 2u);
}

// Test audit #1: with one submit at a time, the pods with the higher spec.priority get their
// jobs first (then the older; here all are equally old).
TEST_F(SchedulerTest, HigherPriorityPodsAreSubmittedFirst) {
  config_.max_concurrent_submits = 1;
  const std::vector<std::pair<std::string, std::int32_t>> pods = {
      {"low", 1}, {"top", 1000}, {"none", 0}, {"mid", 50}, {"high", 200}};
  for (const auto& [name, prio] : pods) {
    api_.pod_priority = prio;
    api_.AddPod("ns", name);
  }
  Start();
  ASSERT_TRUE(RunUntil([&] { return slurm_.calls("SubmitJob") == 5; }));
  std::vector<std::string> order;
  for (const slurm::JobDescription& d : slurm_.submitted()) {
    for (const auto& [name, prio] : pods) {
      if (d.admin_comment.find("ns/" + name + "\"") != std::string::npos) order.push_back(name);
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"top", "high", "mid", "low", "none"}));
}

// The scheduler's flows in full (test audit, untested behaviours #2, #4, #5): gangs of a batch Job
// (its GET answered here), more nodes, and the events, condition messages and pod patches the
// scheduler writes, recorded.
class SchedulerFlowTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    api_.Intercept([this](const FakeRequest& req) { return Record(req); });
  }

  std::optional<FakeReply> Record(const FakeRequest& req) {
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (path.find("/events") != std::string::npos) events_seen_.push_back(req.body);
    if (path == "/api/v1/nodes" && req.target.find("watch=") == std::string::npos) {
      std::vector<std::string> items;
      for (const std::string& n : kube_nodes_) {
        items.push_back(fmt::format(
            R"({{"metadata":{{"name":"{}","resourceVersion":"1"}},"spec":{{}},"status":{{)"
            R"("conditions":[{{"type":"Ready","status":"True"}}],)"
            R"("allocatable":{{"cpu":"64","memory":"256Gi"}}}}}})",
            n));
      }
      return HttpReply(200, fmt::format(R"({{"kind":"NodeList","apiVersion":"v1","metadata":)"
                                        R"({{"resourceVersion":"1"}},"items":[{}]}})",
                                        fmt::join(items, ",")));
    }
    const std::string pod_groups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/";
    if (path.starts_with(pod_groups)) {
      const std::string name = path.substr(pod_groups.size());
      if (!pod_group_min_.contains(name)) {
        return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
      }
      const auto timeout = pod_group_timeout_.find(name);
      return HttpReply(
          200, fmt::format(R"({{"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup",)"
                           R"("metadata":{{"name":"{}","namespace":"ns","uid":"pg-{}"}},)"
                           R"("spec":{{"minMember":{}{}}}}})",
                           name, name, pod_group_min_.at(name),
                           timeout == pod_group_timeout_.end()
                               ? ""
                               : fmt::format(R"(,"scheduleTimeoutSeconds":{})", timeout->second)));
    }
    // The Workload API (scheduling.k8s.io): discovery (the versions of workload_versions_), the
    // PodGroup in each version served (a gang of workload_min_ pods, metadata.generation
    // workload_generation_, status workload_status_), and its status subresource.
    if (path == "/apis/scheduling.k8s.io") {
      ++workload_discoveries_;
      if (workload_versions_.empty()) return HttpReply(404, "404 page not found");
      std::vector<std::string> versions = {
          R"({"groupVersion":"scheduling.k8s.io/v1","version":"v1"})"};
      for (const std::string& v : workload_versions_) {
        versions.push_back(
            fmt::format(R"({{"groupVersion":"scheduling.k8s.io/{0}","version":"{0}"}})", v));
      }
      return HttpReply(200, fmt::format(R"({{"kind":"APIGroup","name":"scheduling.k8s.io",)"
                                        R"("versions":[{}]}})",
                                        fmt::join(versions, ",")));
    }
    for (const std::string version : {"v1alpha2", "v1beta1"}) {
      const std::string workload_groups =
          "/apis/scheduling.k8s.io/" + version + "/namespaces/ns/podgroups/";
      if (!path.starts_with(workload_groups)) continue;
      if (std::ranges::find(workload_versions_, version) == workload_versions_.end()) {
        return HttpReply(404, "404 page not found");
      }
      std::string name = path.substr(workload_groups.size());
      const bool status = name.ends_with("/status");
      if (status) name.resize(name.size() - std::string("/status").size());
      if (!workload_min_.contains(name)) {
        return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
      }
      if (status && req.method == "PATCH") {
        workload_status_patches_.push_back(req.body);
        workload_status_paths_.push_back(path);
      }
      return HttpReply(
          200, fmt::format(R"({{"apiVersion":"scheduling.k8s.io/{}","kind":"PodGroup",)"
                           R"("metadata":{{"name":"{}","namespace":"ns","uid":"wpg-{}",)"
                           R"("generation":{}}},)"
                           R"("spec":{{"schedulingPolicy":{{"gang":{{"minCount":{}}}}}}},)"
                           R"("status":{}}})",
                           version, name, name, workload_generation_, workload_min_.at(name),
                           workload_status_));
    }
    const std::string jobs = "/apis/batch/v1/namespaces/ns/jobs/";
    if (path.starts_with(jobs)) {
      auto it = owner_jobs_.find(path.substr(jobs.size()));
      if (it == owner_jobs_.end()) {
        return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
      }
      return HttpReply(200, it->second);
    }
    const std::string pods = "/api/v1/namespaces/ns/pods/";
    if (req.method == "PATCH" && path.starts_with(pods)) {
      pod_patches_.emplace_back(path.substr(pods.size()), req.body);
    }
    return Hook(req);
  }

  // A batch Job `name` asking for a gang of `parallelism`; the pods AddPod makes from now on are
  // its.
  void AddGangJob(const std::string& name, int parallelism) {
    owner_jobs_[name] = fmt::format(
        R"({{"apiVersion":"batch/v1","kind":"Job","metadata":{{"name":"{0}","namespace":"ns",)"
        R"("uid":"job-{0}","annotations":{{"{1}":"true"}}}},"spec":{{"parallelism":{2},)"
        R"("completions":{2}}},"status":{{}}}})",
        name, bridge::kGangAnnotation, parallelism);
    api_.pod_merge_patch =
        fmt::format(R"({{"metadata":{{"ownerReferences":[{{"apiVersion":"batch/v1","kind":"Job",)"
                    R"("name":"{0}","uid":"job-{0}","controller":true}}]}}}})",
                    name);
  }

  // The uid FakeApiServer gives pod `name` when it is the next change.
  std::string NextUid(const std::string& name) const {
    return "uid-ns-" + name + "-" + std::to_string(api_.rv() + 1);
  }

  // A PodScheduled=False condition with `message` was written on pod `name`.
  bool StatusSays(const std::string& name, const std::string& message) const {
    return std::ranges::any_of(pod_patches_, [&](const auto& p) {
      return p.first == name + "/status" && p.second.find(message) != std::string::npos;
    });
  }

  // The patches of pod `name` (not its subresources), for failure messages.
  std::string PatchesOf(const std::string& name) const {
    std::string out;
    for (const auto& [target, body] : pod_patches_) {
      if (target == name) out += body + "\n";
    }
    return out;
  }

  // An event with `reason` whose message holds `message` was written.
  bool HasEvent(const std::string& reason, const std::string& message) const {
    return std::ranges::any_of(events_seen_, [&](const std::string& body) {
      return body.find("\"reason\":\"" + reason + "\"") != std::string::npos &&
             body.find(message) != std::string::npos;
    });
  }

  // A gang Job `train` of 2 whose pods w0 (on n1) and w1 (on n2) are bound to a RUNNING job,
  // as the scheduler leaves them (labelled, tagged); returns the job id. Pod patches apply.
  std::int64_t RunningGangOnTwoNodes() {
    kube_nodes_ = {"n1", "n2"};
    slurm::NodeInfo n2;
    n2.name = "n2";
    slurm_.AddNode(n2);
    AddGangJob("train", 2);
    const std::string uid0 = NextUid("w0");
    api_.AddPod("ns", "w0", {}, "n1");
    const std::string uid1 = NextUid("w1");
    api_.AddPod("ns", "w1", {}, "n2");
    bridge::JobTag tag{.pods = {"ns/w0", "ns/w1"},
                       .uids = {uid0, uid1},
                       .group = "Job/ns/train",
                       .cluster = config_.cluster_name,
                       .scheduler = config_.scheduler_name};
    const std::int64_t id = slurm_.AddJob("RUNNING", bridge::EncodeJobTag(tag), "n[1-2]");
    const std::string label =
        fmt::format(R"({{"metadata":{{"labels":{{"{}":"{}"}}}}}})", bridge::kJobIdLabel, id);
    api_.PatchPod("ns", "w0", label);
    api_.PatchPod("ns", "w1", label);
    return id;
  }

  // The scheduler restarts (a new process): a new Scheduler on the same servers.
  void Restart() {
    StopScheduler();
    ASSERT_TRUE(RunUntil([&] { return done_; }));
    done_ = false;
    Start();
  }

  std::vector<std::string> kube_nodes_ = {"n1"};
  std::map<std::string, std::string> owner_jobs_;              // Job name -> JSON
  std::map<std::string, int> pod_group_min_;                   // PodGroup -> minMember
  std::map<std::string, int> pod_group_timeout_;               // -> scheduleTimeoutSeconds
  std::vector<std::string> workload_versions_ = {"v1alpha2"};  // of scheduling.k8s.io served
  int workload_discoveries_ = 0;                               // GET /apis/scheduling.k8s.io
  std::map<std::string, int> workload_min_;                    // its PodGroup -> minCount
  std::int64_t workload_generation_ = 0;              // its metadata.generation (1.36 sets none: 0)
  std::string workload_status_ = "{}";                // its status
  std::vector<std::string> workload_status_patches_;  // podgroups/status bodies
  std::vector<std::string> workload_status_paths_;    // ... and their paths
  std::vector<std::string> events_seen_;              // event bodies
  std::vector<std::pair<std::string, std::string>> pod_patches_;  // "name[/sub]", body
};

// Test audit #2: a gang still filling up waits, and says so only after the fill delay (pods of a
// workload arrive one by one); the last member brings one job for all.
TEST_F(SchedulerFlowTest, GangStillFillingWaitsAndSaysSoAfterTheFillDelay) {
  AddGangJob("train", 3);
  api_.AddPod("ns", "w0");
  api_.AddPod("ns", "w1");
  Start();
  // The clock stands still until the test moves it: the group is first seen short now.
  const async::Clock::TimePoint since = clock_.Now();
  const std::string waiting =
      "waiting for 1 more pod(s) of Job train: Slurm allocates the group of 3 as one job";
  ASSERT_TRUE(
      AdvanceUntil([&] { return StatusSays("w0", waiting) && StatusSays("w1", waiting); }, 250ms));
  EXPECT_GE(clock_.Now() - since, 2s) << "said before the fill delay (docs/scheduling.md: 2 s)";
  ASSERT_TRUE(AdvanceUntil([&] { return HasEvent("FailedScheduling", waiting); }));
  EXPECT_EQ(slurm_.calls("SubmitJob"), 0);

  const std::string uid2 = NextUid("w2");
  api_.AddPod("ns", "w2");
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 1; }));
  const std::string& tag = slurm_.submitted().front().admin_comment;
  for (const std::string pod : {"ns/w0", "ns/w1", "ns/w2"}) {
    EXPECT_NE(tag.find(pod), std::string::npos) << pod << " not in the job's tag " << tag;
  }
  EXPECT_NE(tag.find(uid2), std::string::npos);
  EXPECT_EQ(LiveJobs(), 1);
}

// Test audit #2: a RUNNING job whose group is incomplete (here adopted at start-up, a member not
// yet re-created) binds nothing and says why; when every node has its pod, the group binds, one
// pod per node.
TEST_F(SchedulerFlowTest, RunningJobOfAnIncompleteGroupWaitsThenBindsAllAtOnce) {
  kube_nodes_ = {"n1", "n2"};
  slurm::NodeInfo n2;
  n2.name = "n2";
  slurm_.AddNode(n2);
  AddGangJob("train", 2);
  const std::string uid0 = NextUid("w0");
  api_.AddPod("ns", "w0");
  const std::int64_t w1_rv = api_.rv() + 1;  // w1 comes later, as the next change
  const std::string uid1 = NextUid("w1");
  bridge::JobTag tag{.pods = {"ns/w0", "ns/w1"},
                     .uids = {uid0, uid1},
                     .group = "Job/ns/train",
                     .cluster = config_.cluster_name,
                     .scheduler = config_.scheduler_name};
  const std::int64_t id = slurm_.AddJob("RUNNING", bridge::EncodeJobTag(tag), "n[1-2]");
  Start();
  const std::string waiting = fmt::format(
      "Slurm job {} is running on 2 node(s); waiting for 1 more pod(s) of Job train to bind them "
      "all at once",
      id);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("w0", waiting); }));
  EXPECT_EQ(scheduler_->stats().jobs_adopted, 1u);
  EXPECT_TRUE(bindings_.empty()) << "bound before every node had its pod";

  ASSERT_EQ(api_.AddPod("ns", "w1"), w1_rv);
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.size() == 2; }));
  EXPECT_EQ((std::set<std::string>{bindings_["w0"], bindings_["w1"]}),
            (std::set<std::string>{"n1", "n2"}));
  EXPECT_EQ(slurm_.calls("SubmitJob"), 0);
  EXPECT_TRUE(slurm_.cancels().empty());
  EXPECT_TRUE(AdvanceUntil([&] {
    return HasEvent("Scheduled", fmt::format("to n1 (Slurm job {})", id)) &&
           HasEvent("Scheduled", fmt::format("to n2 (Slurm job {})", id));
  }));
}

// Test audit #4: Slurm refusing to update a pending job is said once, as a SlurmJobUpdateFailed
// event, and not asked again until the description changes again; an accepted update counts.
TEST_F(SchedulerFlowTest, RefusedUpdateOfAPendingJobIsReportedAndNotRetried) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t id = JobOf("p0");
  ASSERT_NE(id, 0);
  ASSERT_EQ(slurm_.calls("UpdateJob"), 0) << "an unchanged job is sent nothing";
  slurm_.FailNext("UpdateJob", Error{.code = ErrorCode::kInvalidArgument,
                                     .message = "Slurm said no",
                                     .details = {{.number = 2017, .error = "Invalid comment"}}});
  const std::string comment = std::string(bridge::kJobAnnotationPrefix) + "comment";
  api_.PatchPod("ns", "p0",
                fmt::format(R"({{"metadata":{{"annotations":{{"{}":"one"}}}}}})", comment));
  const std::string refused = fmt::format(
      "Slurm refused to update pending job {} (comment): Slurm said no; Invalid comment", id);
  ASSERT_TRUE(AdvanceUntil([&] { return HasEvent("SlurmJobUpdateFailed", refused); }));
  EXPECT_EQ(slurm_.calls("UpdateJob"), 1);
  EXPECT_EQ(slurm_.Job(id)->comment, "");
  EXPECT_EQ(scheduler_->stats().jobs_updated, 0u);

  // The group is looked at again (Slurm gives a reason, seen by the next job list): nothing is
  // sent.
  slurm::JobInfo j = *slurm_.Job(id);
  j.state_reason = "Priority";
  slurm_.AddJob(j);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("p0", "Priority"); }, 500ms));
  EXPECT_EQ(slurm_.calls("UpdateJob"), 1) << "a refused update was sent again unchanged";

  // Changed again: sent, and counted (slurm_bridge_jobs_updated_total).
  api_.PatchPod("ns", "p0",
                fmt::format(R"({{"metadata":{{"annotations":{{"{}":"two"}}}}}})", comment));
  ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->stats().jobs_updated == 1; }));
  EXPECT_EQ(slurm_.calls("UpdateJob"), 2);
  EXPECT_EQ(slurm_.Job(id)->comment, "two");
  EXPECT_EQ(std::ranges::count_if(events_seen_,
                                  [](const std::string& b) {
                                    return b.find("SlurmJobUpdateFailed") != std::string::npos;
                                  }),
            1)
      << "the refusal was reported more than once";
}

// Issue #46: the reason a pending job waits for comes from its own read (GET /job/{id}), not
// from Slurm's whole list; a change reaches the scheduler within a jobListInterval.
TEST_F(SchedulerFlowTest, PendingReasonIsReadPerJob) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t id = JobOf("p0");
  const async::Clock::TimePoint settled = clock_.Now() + 2min;  // past the start-up watch
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= settled; }, 500ms));
  const int lists = slurm_.calls("ListJobsSince");
  slurm::JobInfo changed = *slurm_.Job(id);
  changed.state_reason = "QOSMaxJobsPerUserLimit";
  slurm_.AddJob(changed);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("p0", "QOSMaxJobsPerUserLimit"); }, 500ms));
  EXPECT_EQ(slurm_.calls("ListJobsSince"), lists) << "the reason came from Slurm's whole list";
}

// Issue #46: a job submitted before a restart whose pods were deleted while the scheduler was
// down is cancelled once after start-up (the controllers learn jobs only from bound pods'
// labels, and read Slurm's whole list only at their own start-up). A job whose pod exists, and
// a job of another scheduler, are left alone.
TEST_F(SchedulerFlowTest, JobOfPodsDeletedWhileDownIsCancelledAfterStartUp) {
  bridge::JobTag gone{.pods = {"ns/gone"},
                      .uids = {"uid-gone"},
                      .group = "Pod/ns/gone",
                      .cluster = config_.cluster_name,
                      .scheduler = config_.scheduler_name};
  const std::int64_t orphan = slurm_.AddJob("PENDING", bridge::EncodeJobTag(gone));
  bridge::JobTag other = gone;
  other.scheduler = "another-scheduler";
  const std::int64_t foreign = slurm_.AddJob("PENDING", bridge::EncodeJobTag(other));
  const std::string uid = NextUid("bound");
  api_.AddPod("ns", "bound", {}, "n1");
  bridge::JobTag held{.pods = {"ns/bound"},
                      .uids = {uid},
                      .group = "Pod/ns/bound",
                      .cluster = config_.cluster_name,
                      .scheduler = config_.scheduler_name};
  const std::int64_t running = slurm_.AddJob("RUNNING", bridge::EncodeJobTag(held), "n1");
  Start();
  ASSERT_TRUE(AdvanceUntil([&] { return !slurm_.cancels().empty(); }, 500ms));
  const async::Clock::TimePoint later = clock_.Now() + 5min;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= later; }, 1s));
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{orphan}));
  EXPECT_EQ(slurm_.Job(foreign)->BaseState(), "PENDING");
  EXPECT_EQ(slurm_.Job(running)->BaseState(), "RUNNING");
  EXPECT_EQ(scheduler_->stats().jobs_cancelled, 1u);
}

// A pending job's pods carry Slurm's reason and the start its planner expects; a start that
// only moves is written at most once a minute (Slurm re-plans every backfill cycle), a new
// reason at once. The pods_waiting gauge counts them under Slurm's reason.
TEST_F(SchedulerFlowTest, ExpectedStartReachesThePodAtABoundedRate) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t id = JobOf("p0");
  ASSERT_NE(id, 0);
  const std::int64_t wall =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.WallNow().time_since_epoch()).count();
  slurm::JobInfo j = *slurm_.Job(id);
  j.state_reason = "Priority";
  j.start_time = slurm::NoValNumber::Of(wall + 600);
  slurm_.AddJob(j);
  const std::string first = "Priority; expected to start " + bridge::FormatUnixTime(wall + 600);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("p0", first); }));
  EXPECT_EQ(scheduler_->WaitingByReason(), (std::map<std::string, std::size_t>{{"Priority", 1}}));
  auto writes = [&] {
    return std::ranges::count_if(pod_patches_,
                                 [](const auto& p) { return p.first == "p0/status"; });
  };
  const auto after_first = writes();
  // The estimate moves: not written before a minute has passed since the last write.
  j.start_time = slurm::NoValNumber::Of(wall + 660);
  slurm_.AddJob(j);
  const std::string moved = "expected to start " + bridge::FormatUnixTime(wall + 660);
  const async::Clock::TimePoint soon = clock_.Now() + 20s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= soon; }, 500ms));
  EXPECT_FALSE(StatusSays("p0", moved)) << "rewritten within a minute for a moved start";
  EXPECT_EQ(writes(), after_first);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("p0", moved); }, 500ms));
  // A new reason is written as soon as a job list shows it (every jobListInterval, 30 s), not a
  // minute after the last write.
  const async::Clock::TimePoint moved_at = clock_.Now();
  j.state_reason = "Resources";
  slurm_.AddJob(j);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("p0", "Resources; expected to start"); }));
  EXPECT_LT(clock_.Now() - moved_at, 45s);
}

// The first start Slurm's planner gives a job is written as soon as a job list shows it, even
// when the pod was told the same reason without a start a moment before: only a start that moves
// waits for the minute (fresh-machine CI: the pod's condition lacked the start for a minute).
TEST_F(SchedulerFlowTest, FirstExpectedStartIsWrittenAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t id = JobOf("p0");
  ASSERT_NE(id, 0);
  slurm::JobInfo j = *slurm_.Job(id);
  j.state_reason = "Priority";
  slurm_.AddJob(j);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("p0", ": Priority"); }));
  EXPECT_FALSE(StatusSays("p0", "expected to start"));
  const std::int64_t wall =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.WallNow().time_since_epoch()).count();
  j.start_time = slurm::NoValNumber::Of(wall + 600);
  slurm_.AddJob(j);
  const async::Clock::TimePoint planned_at = clock_.Now();
  const std::string start = "Priority; expected to start " + bridge::FormatUnixTime(wall + 600);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("p0", start); }));
  EXPECT_LT(clock_.Now() - planned_at, 45s) << "the first start waited for the minute";
}

// A submit that does not get through (slurmrestd down: connection refused, or a reply lost) is
// reported as a failed submit that is tried again, not as Slurm refusing the job; an answer of
// Slurm's is a refusal (chaos run, issue #14).
TEST_F(SchedulerFlowTest, SubmitThatDidNotGetThroughIsNotReportedAsARefusal) {
  slurm_.FailNext("SubmitJob",
                  Error{.code = ErrorCode::kUnavailable, .message = "connect refused"});
  api_.AddPod("ns", "down");
  Start();
  ASSERT_TRUE(AdvanceUntil([&] {
    return StatusSays("down", "submitting the Slurm job failed: connect refused; trying again");
  }));
  EXPECT_FALSE(StatusSays("down", "Slurm refused")) << PatchesOf("down/status");
  ASSERT_TRUE(AdvanceUntil([&] { return JobOf("down") != 0; })) << "tried again";

  slurm_.FailNext("SubmitJob", Error{.code = ErrorCode::kInvalidArgument, .message = "bad"});
  api_.AddPod("ns", "refused");
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("refused", "Slurm refused the job: bad"); }));
}

// Test audit #4: a job adopted after a restart is sent the fields updated in place once (what it
// was submitted with is unknown to the new process), then nothing while nothing changes. The
// fields Slurm's limits look at are taken to be as submitted: never sent (review R-1), and the
// job is not submitted anew for them.
TEST_F(SchedulerFlowTest, AdoptedJobIsSentItsInPlaceFieldsOnce) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t id = JobOf("p0");
  ASSERT_EQ(slurm_.submitted().size(), 1u);
  const slurm::JobDescription submitted = slurm_.submitted().front();
  EXPECT_EQ(slurm_.calls("UpdateJob"), 0);

  ASSERT_NO_FATAL_FAILURE(Restart());
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("UpdateJob") >= 1; }));
  EXPECT_EQ(scheduler_->stats().jobs_adopted, 1u);
  EXPECT_EQ(slurm_.calls("SubmitJob"), 1) << "adopted, not submitted again";
  EXPECT_TRUE(slurm_.cancels().empty());
  ASSERT_EQ(slurm_.updates().size(), 1u);
  const auto& [updated, changes] = slurm_.updates().front();
  EXPECT_EQ(updated, id);
  EXPECT_EQ(changes.name, submitted.name);
  EXPECT_EQ(changes.admin_comment, submitted.admin_comment);
  EXPECT_EQ(changes.partition, "");
  EXPECT_FALSE(changes.minimum_nodes.has_value());
  EXPECT_FALSE(changes.cpus_per_task.has_value());
  EXPECT_FALSE(changes.memory_per_node.set);
  EXPECT_FALSE(changes.time_limit.set);
  EXPECT_TRUE(changes.shared.empty());

  // Looked at again (Slurm gives a reason, seen by the next job list): nothing more is sent.
  slurm::JobInfo j = *slurm_.Job(id);
  j.state_reason = "Priority";
  slurm_.AddJob(j);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("p0", "Priority"); }, 500ms));
  EXPECT_EQ(slurm_.calls("UpdateJob"), 1);
  EXPECT_EQ(scheduler_->stats().jobs_updated, 1u);
  EXPECT_EQ(scheduler_->stats().jobs_resubmitted, 0u);
}

// Review R-1: a tenant's edit of a pending pod's time limit or CPUs is never sent to Slurm as an
// update (the bridge's operator token would set it past the partition's MaxTime and the QOS's
// MaxTRESPerJob): the job is cancelled and a new one submitted with the new description, which
// Slurm checks at submit. The pod is told, and follows the new job; a comment still goes in place.
TEST_F(SchedulerFlowTest, RaisedTimeLimitOfAPendingPodIsSubmittedAnewNotUpdated) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t first = JobOf("p0");
  ASSERT_NE(first, 0);
  const std::string prefix(bridge::kJobAnnotationPrefix);
  api_.PatchPod("ns", "p0",
                fmt::format(R"({{"metadata":{{"annotations":{{"{0}timelimit":"525600",)"
                            R"("{0}cpu-per-task":"64"}}}}}})",
                            prefix));
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 2; }));
  EXPECT_EQ(slurm_.calls("UpdateJob"), 0) << "a limit was raised with the operator's token";
  EXPECT_EQ(slurm_.Job(first)->BaseState(), "CANCELLED");
  const slurm::JobDescription& again = slurm_.submitted().back();
  EXPECT_EQ(again.time_limit, slurm::NoValNumber::Of(525600));
  EXPECT_EQ(again.cpus_per_task, 64);
  const std::int64_t second = slurm_.JobIds().back();
  ASSERT_NE(second, first);
  EXPECT_NE(slurm_.Job(second)->admin_comment.find("ns/p0\""), std::string::npos);
  // The pod follows its new job (Slurm's reason reaches it with the new id).
  slurm::JobInfo j = *slurm_.Job(second);
  j.state_reason = "Priority";
  slurm_.AddJob(j);
  ASSERT_TRUE(AdvanceUntil(
      [&] { return StatusSays("p0", fmt::format("waiting for Slurm job {} in", second)); }));
  EXPECT_TRUE(HasEvent(
      "SlurmJobResubmitted",
      fmt::format("cpus_per_task, time_limit changed: pending Slurm job {} cancelled", first)));
  EXPECT_EQ(scheduler_->stats().jobs_resubmitted, 1u);
  EXPECT_EQ(scheduler_->stats().jobs_replaced, 0u) << "told twice: resubmitted and replaced";

  // A comment is no limit's business: sent in place to the new job, nothing resubmitted.
  api_.PatchPod("ns", "p0",
                fmt::format(R"({{"metadata":{{"annotations":{{"{}comment":"hello"}}}}}})", prefix));
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("UpdateJob") == 1; }));
  EXPECT_EQ(slurm_.updates().back().first, second);
  EXPECT_EQ(slurm_.Job(second)->comment, "hello");
  EXPECT_EQ(slurm_.calls("SubmitJob"), 2);
  EXPECT_EQ(scheduler_->stats().jobs_resubmitted, 1u);
}

// Review R-10: the lease thread sees leadership lost before the main loop runs Stop(); from
// then on the scheduler submits and binds nothing (the next leader does), though it still runs.
TEST_F(SchedulerFlowTest, LostLeadershipStopsSubmitsAndBindsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t id = JobOf("p0");
  ASSERT_NE(id, 0);
  leading_ = false;
  api_.AddPod("ns", "late");
  Allocate(id);
  const async::Clock::TimePoint until = clock_.Now() + 60s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }, 500ms));
  EXPECT_EQ(slurm_.calls("SubmitJob"), 1) << "submitted after leadership was lost";
  EXPECT_TRUE(bindings_.empty()) << "bound after leadership was lost";
  leading_ = true;  // a replica that leads again (a test shortcut: a real one restarts)
}

// A cancel that does not get through leaves the job as it is (tracked, not submitted twice) and
// is tried again.
TEST_F(SchedulerFlowTest, ResubmitWaitsForItsCancelToGetThrough) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t first = JobOf("p0");
  ASSERT_NE(first, 0);
  slurm_.FailNext("CancelJob", Error{.code = ErrorCode::kUnavailable, .message = "down"});
  api_.PatchPod("ns", "p0",
                fmt::format(R"({{"metadata":{{"annotations":{{"{}timelimit":"30"}}}}}})",
                            bridge::kJobAnnotationPrefix));
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 2; }));
  EXPECT_GE(slurm_.calls("CancelJob"), 2);
  EXPECT_EQ(slurm_.Job(first)->BaseState(), "CANCELLED");
  EXPECT_EQ(slurm_.submitted().back().time_limit, slurm::NoValNumber::Of(30));
  EXPECT_EQ(slurm_.calls("UpdateJob"), 0);
}

// Test audit #5: a gang whose pods all go before binding has its job cancelled (the scheduler's
// jobs_cancelled, exported as reason="pods_gone_before_binding"); while one member is left the
// job waits for it; a pod being deleted loses the finalizer.
TEST_F(SchedulerFlowTest, GangWhosePodsAreAllGoneHasItsJobCancelledAndFinalizersReleased) {
  AddGangJob("train", 2);
  api_.AddPod("ns", "w0");
  api_.AddPod("ns", "w1");
  Start();
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 1; }));
  const std::int64_t id = JobOf("w0");
  ASSERT_NE(id, 0);

  api_.DeletePod("ns", "w1");
  // The job's tag follows the member left (a pending job's description is updated).
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("UpdateJob") >= 1; }));
  EXPECT_EQ(slurm_.Job(id)->admin_comment.find("ns/w1\""), std::string::npos);
  EXPECT_TRUE(slurm_.cancels().empty()) << "a member is left: the job waits for the other";

  // The last one is being deleted (it holds the finalizer).
  api_.PatchPod("ns", "w0",
                fmt::format(R"({{"metadata":{{"deletionTimestamp":"2026-01-01T00:00:00Z",)"
                            R"("finalizers":["{}","example.com/other"]}}}})",
                            bridge::kFinalizer));
  auto released = [&] {
    return std::ranges::any_of(pod_patches_, [](const auto& p) {
      return p.first == "w0" &&
             p.second.find("\"finalizers\":[\"example.com/other\"]") != std::string::npos;
    });
  };
  ASSERT_TRUE(AdvanceUntil([&] {
    return slurm_.Job(id)->BaseState() == "CANCELLED" && released();
  })) << slurm_.Job(id)->BaseState()
      << "; patches of w0: " << PatchesOf("w0");
  EXPECT_EQ(slurm_.cancels(), std::vector<std::int64_t>{id});
  EXPECT_EQ(scheduler_->stats().jobs_cancelled, 1u);
  EXPECT_EQ(scheduler_->stats().duplicates_cancelled, 0u);
  EXPECT_EQ(scheduler_->TrackedJobs(), 0u);
  EXPECT_EQ(LiveJobs(), 0);
}

// Test audit #5: a pod deleted and re-created under the same name (a new UID; here seen through a
// relist, as one update) has its old job cancelled and gets a job of its own.
TEST_F(SchedulerFlowTest, PodRecreatedUnderTheSameNameHasItsOldJobCancelled) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t old_job = JobOf("p0");
  ASSERT_NE(old_job, 0);
  const int watches = api_.watches();
  api_.CloseWatches();  // at RV of p0's job label; the changes below are not seen on a watch
  api_.DeletePod("ns", "p0");
  const std::string uid = NextUid("p0");
  api_.AddPod("ns", "p0");
  api_.Compact();  // the next watch gets 410: the informer relists and sees another UID
  ASSERT_TRUE(AdvanceUntil([&] {
    return slurm_.Job(old_job)->BaseState() == "CANCELLED" && slurm_.calls("SubmitJob") == 2;
  }));
  EXPECT_GT(api_.watches(), watches);
  EXPECT_EQ(slurm_.cancels(), std::vector<std::int64_t>{old_job});
  EXPECT_NE(slurm_.submitted().back().admin_comment.find(uid), std::string::npos);
  EXPECT_EQ(LiveJobs(), 1);
}

// Before binding, the pod is annotated with the GPU indices Slurm gave its job on the pod's node
// (the job's gres_detail), which its containers read as SLURM_JOB_GPUS through the downward API.
TEST_F(SchedulerFlowTest, PodIsAnnotatedWithItsJobsGpusBeforeBinding) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(2));
  const std::string annotation = fmt::format(R"("{}":)", bridge::kJobGpusAnnotation);
  for (const std::string name : {"p0", "p1"}) {
    slurm::JobInfo j = *slurm_.Job(JobOf(name));
    j.job_state = {"RUNNING"};
    j.nodes = "n1";
    if (name == "p0") j.gres_detail = {"gpu:fake:2(IDX:1-2)"};  // p1's job holds no GPU
    slurm_.AddJob(j);
  }
  clock_.Advance(config_.job_poll_interval);
  ASSERT_TRUE(RunUntil([&] { return bindings_.size() == 2; }));
  EXPECT_NE(PatchesOf("p0").find(annotation + R"("1,2")"), std::string::npos) << PatchesOf("p0");
  EXPECT_EQ(PatchesOf("p1").find(annotation), std::string::npos) << PatchesOf("p1");
}

// slurm_bridge_jobs_cancelled_total{reason="pods_gone_before_binding"} counts the jobs whose pods
// went: a second job of a group (a lost submit reply, an old leader's submit) cancelled by the
// periodic job list is a duplicate, not that.
TEST_F(SchedulerFlowTest, DuplicateJobCancelIsNotCountedAsPodsGone) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t kept = JobOf("p0");
  ASSERT_NE(kept, 0);
  const std::int64_t second = slurm_.AddJob("PENDING", slurm_.Job(kept)->admin_comment);
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.Job(second)->BaseState() == "CANCELLED"; }, 500ms));
  EXPECT_EQ(slurm_.Job(kept)->BaseState(), "PENDING");
  EXPECT_EQ(scheduler_->stats().jobs_cancelled, 0u) << "counted as pods gone before binding";
  EXPECT_EQ(scheduler_->stats().duplicates_cancelled, 1u);
}

// Review N-2: a toleration written without `operator` (the common form in users' manifests;
// the API does not default it) is sent back as it is stored when the bridge adds its own: the
// apiserver refuses a pod update that changes an existing toleration, and the pod would never be
// labelled nor bound while its job held the node.
TEST_F(SchedulerTest, TolerationWithoutOperatorIsKeptAsStoredAndThePodBinds) {
  api_.pod_merge_patch =
      R"({"spec":{"tolerations":[{"key":"dedicated","value":"gpu","effect":"NoSchedule"},)"
      R"({"key":"x","operator":"Exists","tolerationSeconds":30}]}})";
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  ASSERT_TRUE(RunUntil([&] {
    std::shared_ptr<const kube::Pod> cached = scheduler_->CachedPod("ns/p0");
    return cached && cached->metadata.labels.contains(std::string(bridge::kJobIdLabel));
  })) << api_.PodJson("ns", "p0");
  Allocate(JobOf("p0"));
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p0"); }));
  const std::string json = api_.PodJson("ns", "p0");
  EXPECT_NE(json.find(R"({"key":"dedicated","value":"gpu","effect":"NoSchedule"})"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"({"key":"x","operator":"Exists","tolerationSeconds":30})"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(bridge::kManagedNodeTaint), std::string::npos) << json;
}

// Review N-1: two refills of one running gang job, with no job list between them (the scheduler
// is otherwise idle): the second retag starts from the job's tag as Slurm has it now, not from
// the list read before the first, so the first refilled pod stays the job's (else the
// controllers take it for a stray and delete it).
TEST_F(SchedulerFlowTest, SecondRefillKeepsTheFirstRefilledPodInTheTag) {
  const std::int64_t id = RunningGangOnTwoNodes();
  Start();

  api_.PatchPod("ns", "w0", R"({"status":{"phase":"Succeeded"}})");
  const std::string uid2 = NextUid("w2");
  api_.AddPod("ns", "w2");
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("w2"); }));
  EXPECT_EQ(bindings_["w2"], "n1");
  ASSERT_NE(slurm_.Job(id)->admin_comment.find(uid2), std::string::npos);

  api_.PatchPod("ns", "w1", R"({"status":{"phase":"Succeeded"}})");
  const std::string uid3 = NextUid("w3");
  api_.AddPod("ns", "w3");
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("w3"); }));
  EXPECT_EQ(bindings_["w3"], "n2");
  const std::string& now = slurm_.Job(id)->admin_comment;
  EXPECT_NE(now.find(uid2), std::string::npos) << "the first refilled pod left the tag: " << now;
  EXPECT_NE(now.find(uid3), std::string::npos) << now;
  EXPECT_TRUE(slurm_.cancels().empty());
  EXPECT_EQ(slurm_.calls("SubmitJob"), 0);
}

// Review N-8: a member being deleted still holds its node until it is gone: its replacement is
// not bound there meanwhile (the kubelet would refuse it, or two pods would share the
// allocation), and binds once the predecessor is gone.
TEST_F(SchedulerFlowTest, ReplacementWaitsForItsPredecessorToTerminate) {
  const std::int64_t id = RunningGangOnTwoNodes();
  Start();
  api_.PatchPod("ns", "w1", R"({"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"}})");
  api_.AddPod("ns", "w2");
  const std::string waiting = fmt::format(
      "Slurm job {} of Job train has a pod on each of its 2 node(s); waiting for one to be free "
      "(a pod is terminating on n2)",
      id);
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("w2", waiting); })) << PatchesOf("w2/status");
  // Several rechecks later, still waiting.
  const async::Clock::TimePoint until = clock_.Now() + 10s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }));
  EXPECT_FALSE(bindings_.contains("w2")) << "bound beside a terminating pod";
  api_.DeletePod("ns", "w1");
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("w2"); }));
  EXPECT_EQ(bindings_["w2"], "n2");
  EXPECT_TRUE(slurm_.cancels().empty());
}

// Review N-10: the Binding is committed but its reply is lost, and the check that follows fails
// too. The pod then leaves the unbound pods' watch; the scheduler must not take its job for one
// whose pods are gone: a bound pod labelled with it is found, and the job is left running.
TEST_F(SchedulerTest, LostBindingReplyThenAFailedCheckNeverCancelsTheJob) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  ASSERT_TRUE(RunUntil([&] {
    std::shared_ptr<const kube::Pod> cached = scheduler_->CachedPod("ns/p0");
    return cached && cached->metadata.labels.contains(std::string(bridge::kJobIdLabel));
  }));
  lost_binding_replies_ = 1;
  const std::int64_t id = JobOf("p0");
  Allocate(id);
  ASSERT_TRUE(AdvanceUntil([&] { return lost_binding_replies_ == 0 && failing_gets_ == 0; }));
  EXPECT_EQ(scheduler_->stats().bind_errors, 1u);
  ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->TrackedJobs() == 0; }));
  EXPECT_TRUE(slurm_.cancels().empty()) << "the job of a bound pod was cancelled";
  EXPECT_EQ(slurm_.Job(id)->BaseState(), "RUNNING");
}

// Review N-12: a submit slurmrestd gave up on reaches slurmctld late, after the group's second
// job was bound: that job holds an allocation for as long as the pods exist unless someone
// looks. After a submit whose reply was lost, the scheduler reads Slurm's whole list for a while
// (kDuplicateWatch); then, idle, no more (issue #46).
TEST_F(SchedulerTest, DuplicateThatAppearsAfterTheBindIsCancelled) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(0));
  const async::Clock::TimePoint settled = clock_.Now() + 2min;  // past the start-up watch
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= settled; }, 500ms));
  // The first submit's reply is lost but Slurm made the job: it is adopted, then a second
  // submit's job (the same tag) reaches slurmctld late.
  slurm_.FailNext("SubmitJob", Error{.code = ErrorCode::kDeadlineExceeded, .message = "lost"}, 1,
                  /*apply=*/true);
  api_.AddPod("ns", "p0");
  ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->stats().jobs_adopted == 1; }));
  const std::int64_t bound = JobOf("p0");
  Allocate(bound);
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p0"); }));
  ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->TrackedJobs() == 0; }));
  const std::int64_t late = slurm_.AddJob("PENDING", slurm_.Job(bound)->admin_comment);
  ASSERT_TRUE(AdvanceUntil(
      [&] { return std::ranges::find(slurm_.cancels(), late) != slurm_.cancels().end(); }, 1s))
      << slurm_.calls("ListJobsSince") << " job lists";
  EXPECT_EQ(slurm_.Job(bound)->BaseState(), "RUNNING");
  EXPECT_EQ(scheduler_->stats().duplicates_cancelled, 1u);
  // Later still, nothing is watched any more: no Slurm request while idle.
  const async::Clock::TimePoint until = clock_.Now() + 30min;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }, 10s));
  const std::int64_t later = slurm_.calls("ListJobsSince");
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until + 10min; }, 10s));
  EXPECT_EQ(slurm_.calls("ListJobsSince"), later) << "still listing jobs when idle";
}

// Review N-9: a PodGroup of minMember 2 with a third pod, which waits for a node of the group's
// job. The two members end together and the job ends: the third pod is not left waiting for
// minMember again, it gets a job of its own size.
TEST_F(SchedulerFlowTest, PodGroupRemainderGetsAJobOfItsOwnWhenTheGroupsJobEnds) {
  kube_nodes_ = {"n1", "n2"};
  slurm::NodeInfo n2;
  n2.name = "n2";
  slurm_.AddNode(n2);
  pod_group_min_["pg"] = 2;
  const std::map<std::string, std::string> member = {{"scheduling.x-k8s.io/pod-group", "pg"}};
  api_.AddPod("ns", "pg-0", member);
  api_.AddPod("ns", "pg-1", member);
  api_.AddPod("ns", "pg-2", member);
  Start();
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 1; }));
  const std::int64_t id = JobOf("pg-0");
  ASSERT_GT(id, 0);
  slurm::JobInfo j = *slurm_.Job(id);
  j.job_state = {"RUNNING"};
  j.nodes = "n[1-2]";
  slurm_.AddJob(j);
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.size() == 2; }));
  EXPECT_FALSE(bindings_.contains("pg-2"));
  ASSERT_TRUE(AdvanceUntil([&] {
    return StatusSays("pg-2", "has a pod on each of its 2 node(s); waiting for one to be free");
  }));
  // The members end at once; the controllers end the job.
  api_.PatchPod("ns", "pg-0", R"({"status":{"phase":"Succeeded"}})");
  api_.PatchPod("ns", "pg-1", R"({"status":{"phase":"Succeeded"}})");
  slurm_.SetJobState(id, "COMPLETED");
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 2; }))
      << "pg-2 still waits: " << PatchesOf("pg-2/status");
  const slurm::JobDescription& own = slurm_.submitted().back();
  EXPECT_NE(own.admin_comment.find("ns/pg-2"), std::string::npos) << own.admin_comment;
  EXPECT_EQ(own.nodes, "1");
  EXPECT_TRUE(AdvanceUntil(
      [&] { return HasEvent("PodGroupRemainder", "its 1 remaining pod(s) get a Slurm job"); }));
  ASSERT_NE(JobOf("pg-2"), id);
  Allocate(JobOf("pg-2"));
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("pg-2"); }));
}

// Review N-20: slurmctld is slow on submits. Groups waiting to submit must not hold every
// worker: a job that already runs (here adopted at start-up, its pod the newest, so last in the
// queue's order) is bound while the submits are still going, not after them.
TEST_F(SchedulerTest, SlowSubmitsDoNotHoldUpTheBindOfARunningJob) {
  config_.max_concurrent_submits = 1;  // 16 workers
  slurm_.submit_delay = 200ms;
  constexpr int kPods = 30;
  for (int i = 0; i < kPods; ++i) api_.AddPod("ns", fmt::format("p{:02}", i));
  const std::string uid = "uid-ns-z-" + std::to_string(api_.rv() + 1);
  api_.AddPod("ns", "z");
  bridge::JobTag tag{.pods = {"ns/z"},
                     .uids = {uid},
                     .group = "Pod/ns/z",
                     .cluster = config_.cluster_name,
                     .scheduler = config_.scheduler_name};
  slurm_.AddJob("RUNNING", bridge::EncodeJobTag(tag), "n1");
  Start();
  ASSERT_TRUE(RunUntil([&] { return bindings_.contains("z"); }));
  // Before the fix: after 15 submits (16 workers parked on the semaphore, z last in the queue).
  EXPECT_LT(slurm_.calls("SubmitJob"), 8) << "the bind waited for the submits";
  ASSERT_TRUE(RunUntil([&] { return slurm_.calls("SubmitJob") == kPods; }, 120s))
      << "every group is still submitted: " << slurm_.calls("SubmitJob");
}

// Review N-9 after a restart: the scheduler no longer remembers that the PodGroup ran; the
// apiserver shows it (members the bridge bound, here done), and the remainder gets its job.
TEST_F(SchedulerFlowTest, PodGroupRemainderIsRecognisedAfterARestart) {
  kube_nodes_ = {"n1", "n2"};
  pod_group_min_["pg"] = 2;
  const std::int64_t ended = slurm_.AddJob("COMPLETED", "", "n[1-2]");
  const std::map<std::string, std::string> member = {
      {"scheduling.x-k8s.io/pod-group", "pg"},
      {std::string(bridge::kJobIdLabel), std::to_string(ended)}};
  api_.AddPod("ns", "pg-0", member, "n1");
  api_.AddPod("ns", "pg-1", member, "n2");
  api_.PatchPod("ns", "pg-0", R"({"status":{"phase":"Succeeded"}})");
  api_.PatchPod("ns", "pg-1", R"({"status":{"phase":"Succeeded"}})");
  api_.AddPod("ns", "pg-2", {{"scheduling.x-k8s.io/pod-group", "pg"}});
  Start();
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 1; }))
      << "pg-2 still waits: " << PatchesOf("pg-2/status");
  EXPECT_EQ(slurm_.submitted().back().nodes, "1");
  EXPECT_NE(slurm_.submitted().back().admin_comment.find("ns/pg-2"), std::string::npos);
}

// ... and a PodGroup that never ran waits for minMember as before.
// Issue #27: a coscheduling PodGroup whose pods come in two shapes is one heterogeneous job (one
// submit of two components, each of one node and its own CPUs). After a restart the job is
// adopted, its parts read from its tag, and each pod binds to its own component's node (the
// small pod's component runs on n2, the big one's on n1: not the order of their names), labelled
// with the het job's id and its offset.
TEST_F(SchedulerFlowTest, PodGroupOfTwoShapesIsOneHeterogeneousJobAdoptedAfterARestart) {
  kube_nodes_ = {"n1", "n2"};
  slurm::NodeInfo n2;
  n2.name = "n2";
  slurm_.AddNode(n2);
  pod_group_min_["pg"] = 2;
  const std::map<std::string, std::string> member = {{"scheduling.x-k8s.io/pod-group", "pg"}};
  for (const auto& [name, cpu] : {std::pair{"big", "4"}, std::pair{"small", "1"}}) {
    api_.AddPod("ns", name, member);
    api_.PatchPod("ns", name,
                  fmt::format(R"({{"spec":{{"containers":[{{"name":"c","image":"i",)"
                              R"("resources":{{"requests":{{"cpu":"{}"}}}}}}]}}}})",
                              cpu));
  }
  Start();
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.het_submitted().size() == 1; }));
  const std::vector<slurm::JobDescription> components = slurm_.het_submitted().front();
  ASSERT_EQ(components.size(), 2u);
  EXPECT_TRUE(slurm_.submitted().empty()) << "an ordinary job was submitted too";
  const int small = components[0].cpus_per_task == 1 ? 0 : 1;
  EXPECT_EQ(components[static_cast<std::size_t>(small)].cpus_per_task, 1);
  EXPECT_EQ(components[static_cast<std::size_t>(1 - small)].cpus_per_task, 4);
  for (const slurm::JobDescription& c : components) EXPECT_EQ(c.nodes, "1");
  const std::int64_t id = slurm_.JobIds().front();
  ASSERT_EQ(slurm_.Job(id + 1)->het_job_id, id);

  Restart();
  ASSERT_TRUE(AdvanceUntil([&] { return scheduler_->stats().jobs_adopted == 1; }));
  for (const auto& [k, node] : {std::pair{small, "n2"}, std::pair{1 - small, "n1"}}) {
    slurm::JobInfo j = *slurm_.Job(id + k);
    j.job_state = {"RUNNING"};
    j.nodes = node;
    slurm_.AddJob(j);
  }
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.size() == 2; }));
  EXPECT_EQ(bindings_["small"], "n2");
  EXPECT_EQ(bindings_["big"], "n1");
  for (const auto& [name, k] : {std::pair{"small", small}, std::pair{"big", 1 - small}}) {
    const std::string json = api_.PodJson("ns", name);
    EXPECT_NE(json.find(fmt::format(R"("{}":"{}")", bridge::kHetJobIdLabel, id)), std::string::npos)
        << json;
    EXPECT_NE(json.find(fmt::format(R"("{}":"{}")", bridge::kHetJobOffsetLabel, k)),
              std::string::npos)
        << json;
  }
  EXPECT_EQ(slurm_.calls("SubmitJob"), 1);
  EXPECT_TRUE(slurm_.cancels().empty());
}

TEST_F(SchedulerFlowTest, PodGroupThatNeverRanWaitsForMinMember) {
  pod_group_min_["pg"] = 2;
  api_.AddPod("ns", "pg-0", {{"scheduling.x-k8s.io/pod-group", "pg"}});
  Start();
  ASSERT_TRUE(
      AdvanceUntil([&] { return StatusSays("pg-0", "waiting for 1 more pod(s) of PodGroup pg"); }));
  const async::Clock::TimePoint until = clock_.Now() + 30s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }, 500ms));
  EXPECT_EQ(slurm_.calls("SubmitJob"), 0);
  EXPECT_FALSE(HasEvent("PodGroupTimedOut", "")) << "no spec.scheduleTimeoutSeconds: no timeout";
}

// A coscheduling PodGroup short of minMember for longer than its spec.scheduleTimeoutSeconds:
// its pods get one PodGroupTimedOut Warning event (at the timeout, not at the next look), and
// keep waiting; nothing is submitted until the group is complete, and then it runs as one job.
TEST_F(SchedulerFlowTest, CoschedulingPodGroupPastItsScheduleTimeoutSaysSoOnceAndWaits) {
  pod_group_min_["pg"] = 2;
  pod_group_timeout_["pg"] = 30;
  api_.AddPod("ns", "pg-0", {{"scheduling.x-k8s.io/pod-group", "pg"}});
  Start();
  const async::Clock::TimePoint since = clock_.Now();
  const std::string timed_out =
      "PodGroup pg timed out waiting for members: 1 of 2 pod(s) (minMember) after 30 s "
      "(spec.scheduleTimeoutSeconds); no Slurm job is submitted until the group is complete";
  ASSERT_TRUE(AdvanceUntil([&] { return HasEvent("PodGroupTimedOut", timed_out); }));
  EXPECT_GE(clock_.Now() - since, 30s);
  EXPECT_LE(clock_.Now() - since, 31s) << "said late: the group was not looked at at its timeout";
  const async::Clock::TimePoint until = clock_.Now() + 60s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }, 500ms));
  EXPECT_EQ(std::ranges::count_if(events_seen_,
                                  [](const std::string& b) {
                                    return b.find("PodGroupTimedOut") != std::string::npos;
                                  }),
            1);
  EXPECT_EQ(slurm_.calls("SubmitJob"), 0);
  api_.AddPod("ns", "pg-1", {{"scheduling.x-k8s.io/pod-group", "pg"}});
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 1; }));
  EXPECT_EQ(slurm_.submitted().back().nodes, "2");
}

// The Workload API (Kubernetes 1.36): pods naming a scheduling.k8s.io/v1alpha2 PodGroup of gang
// minCount 2 are one Slurm job; the PodGroup's PodGroupScheduled is False with Slurm's reason
// while the job waits (written once, not at every look), then True once the pods are bound.
TEST_F(SchedulerFlowTest, WorkloadPodGroupIsOneJobAndItsStatusFollowsSlurm) {
  kube_nodes_ = {"n1", "n2"};
  slurm::NodeInfo n2;
  n2.name = "n2";
  slurm_.AddNode(n2);
  workload_min_["train"] = 2;
  api_.pod_merge_patch = R"({"spec":{"schedulingGroup":{"podGroupName":"train"}}})";
  api_.AddPod("ns", "w0");
  Start();
  ASSERT_TRUE(AdvanceUntil(
      [&] { return StatusSays("w0", "waiting for 1 more pod(s) of PodGroup train"); }));
  EXPECT_EQ(slurm_.calls("SubmitJob"), 0);
  api_.AddPod("ns", "w1");
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 1; }));
  EXPECT_EQ(slurm_.submitted().back().nodes, "2");
  EXPECT_NE(slurm_.submitted().back().admin_comment.find("WorkloadPodGroup/ns/train"),
            std::string::npos)
      << slurm_.submitted().back().admin_comment;
  const std::int64_t id = JobOf("w0");
  ASSERT_GT(id, 0);
  slurm::JobInfo j = *slurm_.Job(id);
  j.state_reason = "Resources";
  slurm_.AddJob(j);
  const std::string pending = fmt::format("Slurm job {} is PENDING (Resources)", id);
  auto says = [&](const std::string& what) {
    return static_cast<int>(std::ranges::count_if(
        workload_status_patches_,
        [&](const std::string& b) { return b.find(what) != std::string::npos; }));
  };
  ASSERT_TRUE(AdvanceUntil([&] { return says(pending) == 1; }));
  // Each False said what changed (the group filling, then the job's state and reason), under
  // one lastTransitionTime.
  const int written = says("PodGroupScheduled");
  EXPECT_EQ(says(R"("status":"False")"), written)
      << fmt::format("{}", fmt::join(workload_status_patches_, "\n"));
  EXPECT_EQ(says(R"("reason":"Unschedulable")"), written);
  EXPECT_EQ(says("observedGeneration"), 0) << "the PodGroup has no metadata.generation";
  EXPECT_EQ(says("waiting for 1 more pod(s) of PodGroup train"), 1);
  const std::size_t at = workload_status_patches_.front().find("lastTransitionTime");
  ASSERT_NE(at, std::string::npos);
  const std::string since = workload_status_patches_.front().substr(at, 45);
  EXPECT_EQ(says(since), written) << since;
  // Looked at again (time passes, the job still waits): not written again.
  const async::Clock::TimePoint until = clock_.Now() + 10s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }, 500ms));
  EXPECT_EQ(says("PodGroupScheduled"), written);
  j.job_state = {"RUNNING"};
  j.nodes = "n[1-2]";
  slurm_.AddJob(j);
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.size() == 2; }));
  ASSERT_TRUE(AdvanceUntil([&] { return says(R"("status":"True")") == 1; }));
  EXPECT_EQ(says(fmt::format("Slurm job {} is RUNNING", id)), 1);
  EXPECT_EQ(says(R"("reason":"Scheduled")"), 1);
}

// A pod naming a Workload API PodGroup that cannot be read waits (never a job of its own) with a
// condition and an event that say why: the apiserver serves neither version of the API, or the
// PodGroup is not there.
TEST_F(SchedulerFlowTest, WorkloadPodGroupThatCannotBeReadMakesThePodWait) {
  workload_versions_.clear();
  api_.pod_merge_patch = R"({"spec":{"schedulingGroup":{"podGroupName":"train"}}})";
  api_.AddPod("ns", "w0");
  Start();
  ASSERT_TRUE(AdvanceUntil([&] {
    return StatusSays("w0",
                      "PodGroup train (scheduling.k8s.io) named by spec.schedulingGroup cannot be "
                      "read (the apiserver serves neither scheduling.k8s.io/v1beta1 nor "
                      "scheduling.k8s.io/v1alpha2)");
  })) << PatchesOf("w0/status");
  EXPECT_TRUE(AdvanceUntil([&] { return HasEvent("FailedScheduling", "never scheduled alone"); }));
  workload_versions_ = {"v1alpha2"};
  api_.pod_merge_patch = R"({"spec":{"schedulingGroup":{"podGroupName":"nowhere"}}})";
  api_.AddPod("ns", "w1");
  // (Once discovery is asked again: within a minute.)
  ASSERT_TRUE(AdvanceUntil([&] {
    return StatusSays("w1",
                      "PodGroup nowhere (scheduling.k8s.io/v1alpha2) named by "
                      "spec.schedulingGroup cannot be read");
  }));
  const async::Clock::TimePoint until = clock_.Now() + 15s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }, 500ms));
  EXPECT_EQ(slurm_.calls("SubmitJob"), 0);
}

// Discovery is not kept for ever: the Workload API turned on while the scheduler runs is seen
// within a minute (the client keeps an answer, "not served" too, for discovery_ttl), and the
// pods waiting for their PodGroup then run; discovery is asked at most once a minute meanwhile,
// however often the pods are looked at.
TEST_F(SchedulerFlowTest, WorkloadApiTurnedOnWhileRunningIsSeenWithinAMinute) {
  workload_versions_.clear();
  workload_min_["train"] = 1;
  api_.pod_merge_patch = R"({"spec":{"schedulingGroup":{"podGroupName":"train"}}})";
  api_.AddPod("ns", "w0");
  Start();
  ASSERT_TRUE(AdvanceUntil([&] { return StatusSays("w0", "serves neither"); }));
  const async::Clock::TimePoint on = clock_.Now();
  workload_versions_ = {"v1alpha2"};
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 1; }, 500ms));
  EXPECT_LE(clock_.Now() - on, 71s) << "discovery's answer was kept longer than a minute";
  EXPECT_LE(workload_discoveries_, 2) << "discovery asked more than once a minute";
  EXPECT_NE(slurm_.submitted().back().admin_comment.find("WorkloadPodGroup/ns/train"),
            std::string::npos);
}

// Kubernetes 1.37 serves scheduling.k8s.io/v1beta1 beside v1alpha2: the PodGroup is read in
// v1beta1 (as upstream picks), grouped as before (same key, one job of minCount pods), and its
// status gets PodGroupInitiallyScheduled (v1beta1's condition, not PodGroupScheduled) with
// observedGeneration = the PodGroup's metadata.generation. The fake serves the PodGroup in the
// shape of the 1.37 OpenAPI document (the test cluster, 1.36.2, does not serve v1beta1).
TEST_F(SchedulerFlowTest, WorkloadPodGroupV1beta1IsPreferredAndGetsPodGroupInitiallyScheduled) {
  kube_nodes_ = {"n1", "n2"};
  slurm::NodeInfo n2;
  n2.name = "n2";
  slurm_.AddNode(n2);
  workload_versions_ = {"v1alpha2", "v1beta1"};
  workload_min_["train"] = 2;
  workload_generation_ = 4;
  api_.pod_merge_patch = R"({"spec":{"schedulingGroup":{"podGroupName":"train"}}})";
  api_.AddPod("ns", "w0");
  api_.AddPod("ns", "w1");
  Start();
  ASSERT_TRUE(AdvanceUntil([&] { return slurm_.calls("SubmitJob") == 1; }));
  EXPECT_EQ(slurm_.submitted().back().nodes, "2");
  EXPECT_NE(slurm_.submitted().back().admin_comment.find("WorkloadPodGroup/ns/train"),
            std::string::npos);
  const std::int64_t id = JobOf("w0");
  ASSERT_GT(id, 0);
  slurm::JobInfo j = *slurm_.Job(id);
  j.job_state = {"RUNNING"};
  j.nodes = "n[1-2]";
  slurm_.AddJob(j);
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.size() == 2; }));
  auto says = [&](const std::string& what) {
    return static_cast<int>(std::ranges::count_if(
        workload_status_patches_,
        [&](const std::string& b) { return b.find(what) != std::string::npos; }));
  };
  ASSERT_TRUE(AdvanceUntil([&] { return says(R"("status":"True")") == 1; }));
  const int written = static_cast<int>(workload_status_patches_.size());
  EXPECT_EQ(says(R"("type":"PodGroupInitiallyScheduled")"), written);
  EXPECT_EQ(says("PodGroupScheduled"), 0);
  EXPECT_EQ(says(R"("observedGeneration":4)"), written);
  EXPECT_EQ(says(fmt::format("Slurm job {} is RUNNING", id)), 1);
  for (const std::string& path : workload_status_paths_) {
    EXPECT_EQ(path, "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/train/status");
  }
}

// v1beta1's PodGroupInitiallyScheduled, once True, is never turned False (the API: a terminal
// state): a PodGroup that says True (another replica's word, or an earlier run's) gets no write
// while its pods wait again.
TEST_F(SchedulerFlowTest, WorkloadPodGroupV1beta1InitiallyScheduledStaysTrue) {
  workload_versions_ = {"v1beta1"};
  workload_min_["train"] = 2;
  workload_status_ =
      R"({"conditions":[{"type":"PodGroupInitiallyScheduled","status":"True",)"
      R"("reason":"Scheduled","message":"Slurm job 7 is RUNNING; 2 pod(s) of the group bound",)"
      R"("lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":1}]})";
  api_.pod_merge_patch = R"({"spec":{"schedulingGroup":{"podGroupName":"train"}}})";
  api_.AddPod("ns", "w0");
  Start();
  ASSERT_TRUE(AdvanceUntil(
      [&] { return StatusSays("w0", "waiting for 1 more pod(s) of PodGroup train"); }));
  const async::Clock::TimePoint until = clock_.Now() + 15s;
  ASSERT_TRUE(AdvanceUntil([&] { return clock_.Now() >= until; }, 500ms));
  EXPECT_TRUE(workload_status_patches_.empty())
      << fmt::format("{}", fmt::join(workload_status_patches_, "\n"));
}

}  // namespace
// Issue #28: a pod asking for devices through DRA gets, before its Binding, the ResourceClaim that
// names exactly the GPUs Slurm gave its job on its node (the node's ResourceSlices read by
// index), reserved for it; the pod's status names the claim, and the Binding carries its name
// for the pod controller. The apiserver's resource.k8s.io/v1 is played by the hook below.
class SchedulerDraTest : public SchedulerTest {
 protected:
  void SetUp() override {
    SchedulerTest::SetUp();
    api_.pod_merge_patch =
        R"({"spec":{"containers":[{"name":"train","image":"x","resources":{"limits":)"
        R"({"deviceclass.resource.kubernetes.io/gpu.example.com":"2"}}}]}})";
    api_.Intercept([this](const FakeRequest& req) -> std::optional<FakeReply> {
      const std::string path = req.target.substr(0, req.target.find('?'));
      if (!path.starts_with("/apis/resource.k8s.io/")) return Hook(req);
      requests_.push_back(req.method + " " + path);
      if (path == "/apis/resource.k8s.io/v1/deviceclasses") {
        return HttpReply(200, R"({"kind":"DeviceClassList","metadata":{},"items":[]})");
      }
      if (path == "/apis/resource.k8s.io/v1/resourceslices") {
        slice_queries_.push_back(req.target.substr(path.size()));
        if (!publish_slices_) return HttpReply(200, R"({"kind":"ResourceSliceList","items":[]})");
        return HttpReply(
            200, R"({"kind":"ResourceSliceList","metadata":{},"items":[)" +
                     sb::testing::ReadTestData("kube/resourceslice_gpu_example_n1.json") + "]}");
      }
      const std::string claims = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims";
      if (req.method == "POST" && path == claims) {
        created_.push_back(req.body);
        return HttpReply(201, req.body);
      }
      if (req.method == "PATCH" && path.ends_with("/status")) {
        if (fail_claim_status_) {
          return HttpReply(422, R"({"kind":"Status","code":422,"message":"invalid allocation"})");
        }
        claim_status_.push_back(req.body);
        return HttpReply(200, req.body);
      }
      if (req.method == "DELETE") {
        deleted_.push_back(path.substr(claims.size() + 1));
        return HttpReply(200, "{}");
      }
      return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
    });
  }

  // Pod p0 pending with its job, then Slurm runs the job on n1 with GPUs 1 and 2.
  void RunWithGpus12() {
    ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
    ASSERT_EQ(slurm_.submitted().size(), 1u);
    EXPECT_EQ(slurm_.submitted()[0].tres_per_node, "gres/gpu=2");
    slurm::JobInfo j = *slurm_.Job(JobOf("p0"));
    j.job_state = {"RUNNING"};
    j.nodes = "n1";
    j.gres_detail = {"gpu:fake:2(IDX:1-2)"};
    slurm_.AddJob(j);
    clock_.Advance(config_.job_poll_interval);
  }

  std::string Uid(const std::string& name) const {
    return kube::JsonStringAt(api_.PodJson("ns", name), "/metadata/uid").value_or("");
  }

  std::vector<std::string> requests_;
  std::vector<std::string> slice_queries_;
  std::vector<std::string> created_;
  std::vector<std::string> claim_status_;
  std::vector<std::string> deleted_;
  bool publish_slices_ = true;
  bool fail_claim_status_ = false;
};

TEST_F(SchedulerDraTest, TheClaimNamesTheGpusSlurmGaveTheJobBeforeTheBinding) {
  ASSERT_NO_FATAL_FAILURE(RunWithGpus12());
  ASSERT_TRUE(RunUntil([&] { return bindings_.contains("p0"); }));
  ASSERT_EQ(created_.size(), 1u);
  const std::string uid = Uid("p0");
  const std::string name = "p0-extended-resources-" + uid.substr(0, 8);
  EXPECT_NE(created_[0].find(R"("name":")" + name + "\""), std::string::npos) << created_[0];
  EXPECT_NE(created_[0].find(R"("deviceClassName":"gpu.example.com")"), std::string::npos);
  ASSERT_EQ(claim_status_.size(), 1u);
  const std::string& status = claim_status_[0];
  EXPECT_NE(status.find(R"("device":"gpu-1")"), std::string::npos) << status;
  EXPECT_NE(status.find(R"("device":"gpu-2")"), std::string::npos) << status;
  EXPECT_EQ(status.find(R"("device":"gpu-0")"), std::string::npos) << status;
  EXPECT_EQ(status.find(R"("device":"gpu-3")"), std::string::npos) << status;
  EXPECT_NE(status.find(R"("uid":")" + uid + "\""), std::string::npos) << "reservedFor the pod";
  EXPECT_EQ(slice_queries_, std::vector<std::string>{"?fieldSelector=spec.nodeName%3Dn1"});
  EXPECT_GE(status_patches_, 1) << "the pod's extendedResourceClaimStatus";
  EXPECT_NE(binding_bodies_["p0"].find(std::string(bridge::kResourceClaimAnnotation)),
            std::string::npos)
      << binding_bodies_["p0"];
  EXPECT_NE(binding_bodies_["p0"].find(name), std::string::npos);
  EXPECT_EQ(scheduler_->stats().claims_written, 1u);
  EXPECT_TRUE(deleted_.empty());
}

// Step 1 read the job's layout (a job this process submitted, seen RUNNING): the claims are
// written from it, not from a second GET /resources/{id}.
TEST_F(SchedulerDraTest, OneLayoutReadServesTheNodesAndTheClaims) {
  ASSERT_NO_FATAL_FAILURE(RunWithGpus12());
  ASSERT_TRUE(RunUntil([&] { return bindings_.contains("p0"); }));
  ASSERT_EQ(claim_status_.size(), 1u);
  EXPECT_NE(claim_status_[0].find(R"("device":"gpu-1")"), std::string::npos) << claim_status_[0];
  EXPECT_EQ(slurm_.calls("JobResources"), 1);
  EXPECT_EQ(slurm_.calls("GetJob"), 0);
}

TEST_F(SchedulerDraTest, NoDevicesPublishedIsSaidOnThePodAndNothingIsBound) {
  publish_slices_ = false;
  ASSERT_NO_FATAL_FAILURE(RunWithGpus12());
  ASSERT_TRUE(AdvanceUntil([&] { return slice_queries_.size() >= 2; }, 500ms))
      << "tried again with the queue's backoff";
  EXPECT_TRUE(created_.empty());
  EXPECT_TRUE(bindings_.empty());
  EXPECT_GE(events_, 1);
  // Published later: bound then.
  publish_slices_ = true;
  ASSERT_TRUE(AdvanceUntil([&] { return bindings_.contains("p0"); }, 500ms));
  EXPECT_EQ(created_.size(), 1u);
}

TEST_F(SchedulerDraTest, AClaimWhoseAllocationIsRefusedIsDeletedAndThePodNotBound) {
  fail_claim_status_ = true;
  ASSERT_NO_FATAL_FAILURE(RunWithGpus12());
  ASSERT_TRUE(AdvanceUntil([&] { return !deleted_.empty(); }, 500ms));
  EXPECT_EQ(deleted_[0], "p0-extended-resources-" + Uid("p0").substr(0, 8));
  EXPECT_TRUE(bindings_.empty());
}

}  // namespace sb::scheduler
