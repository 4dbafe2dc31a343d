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
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "kube/runtime/clock.h"
#include "net/http_client.h"
#include "testing/fake_apiserver.h"
#include "testing/fake_slurm_client.h"
#include "testing/run.h"

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
    kube_ = kube::MakeClient(*http_, nullptr);
    api_.Intercept([this](const FakeRequest& req) { return Hook(req); });
    api_.pod_scheduler_name = config_.scheduler_name;
    slurm::NodeInfo n1;
    n1.name = "n1";
    slurm_.AddNode(n1);
  }

  void TearDown() override {
    if (scheduler_) {
      scheduler_->Stop();
      EXPECT_TRUE(RunUntil([&] { return done_; })) << "Run() did not return after Stop()";
    }
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
    const std::string prefix = "/api/v1/namespaces/ns/pods/";
    if (!path.starts_with(prefix)) return std::nullopt;
    std::string rest = path.substr(prefix.size());
    const std::string name = rest.substr(0, rest.find('/'));
    const std::string sub = rest.size() > name.size() ? rest.substr(name.size() + 1) : "";
    const std::string json = api_.PodJson("ns", name);
    if (json.empty()) return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
    if (req.method == "POST" && sub == "binding") {
      // {"target":{"kind":"Node","name":"n1"}}: the pod leaves the unbound pods' watch.
      const std::string key = R"("name":")";
      const std::size_t target = req.body.find("\"target\"");
      const std::size_t at = req.body.find(key, target);
      const std::string node =
          req.body.substr(at + key.size(), req.body.find('"', at + key.size()) - at - key.size());
      bindings_[name] = node;
      api_.SetPodNode("ns", name, node);
      return HttpReply(201, R"({"kind":"Status","status":"Success"})");
    }
    if (req.method == "PATCH" && sub == "status") {
      ++status_patches_;
      return HttpReply(200, json);
    }
    if (req.method == "PATCH" && sub.empty()) {
      ++patches_[name];
      return HttpReply(200, json);
    }
    if (req.method == "GET" && sub.empty()) return HttpReply(200, json);
    return std::nullopt;
  }

  void Start() {
    scheduler_ = std::make_unique<Scheduler>(io_.get_executor(), *kube_, slurm_, clock_, config_);
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
  bool AdvanceUntil(const std::function<bool()>& pred, kube::Clock::Duration step = 100ms) {
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

  bridge::Config config_;
  asio::io_context io_;
  FakeApiServer api_{io_};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  sb::testing::FakeSlurmClient slurm_;
  kube::FakeClock clock_;
  std::unique_ptr<Scheduler> scheduler_;
  bool done_ = false;
  int events_ = 0;
  int status_patches_ = 0;
  std::map<std::string, int> patches_;           // pod name -> label patches
  std::map<std::string, std::string> bindings_;  // pod name -> node
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
  // A state change costs one GET /job/{id}, for that job only.
  const std::int64_t first = JobOf("p0");
  ASSERT_NE(first, 0);
  Allocate(first);
  clock_.Advance(config_.job_poll_interval);
  ASSERT_TRUE(RunUntil([&] { return bindings_.contains("p0"); }));
  EXPECT_EQ(slurm_.calls("JobStates"), kPolls + 1);
  EXPECT_EQ(slurm_.calls("GetJob"), 1);
  EXPECT_EQ(bindings_.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(PendingPods, ConstantCostTest, ::testing::Values(10, 1000));

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
// (review item 2: an old leader's late submit) is still cancelled by the next list.
TEST_F(SchedulerTest, PeriodicListAsksForChangesAndStillCancelsASecondJob) {
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(1));
  const std::int64_t first = JobOf("p0");
  auto next_list = [&] {
    const std::uint64_t before = scheduler_->stats().job_lists;
    return AdvanceUntil([&] { return scheduler_->stats().job_lists > before; }, 500ms);
  };
  ASSERT_TRUE(next_list());  // the submit was a change: a full list
  const std::uint64_t unchanged = scheduler_->stats().job_lists_unchanged;
  ASSERT_TRUE(next_list());
  ASSERT_TRUE(next_list());
  EXPECT_EQ(scheduler_->stats().job_lists_unchanged, unchanged + 2) << "nothing changed";
  EXPECT_TRUE(slurm_.cancels().empty());
  // Another writer submits a second job for the same pod.
  slurm::JobInfo dup = *slurm_.Job(first);
  dup.job_id = slurm_.next_job_id;
  const std::int64_t second = slurm_.AddJob(dup);
  ASSERT_TRUE(next_list());
  ASSERT_TRUE(RunUntil([&] { return !slurm_.cancels().empty(); }));
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{second}));
  EXPECT_EQ(slurm_.Job(first)->BaseState(), "PENDING");
}

// Review item 15: the per-pod bookkeeping (queue ranks, reported messages, bound UIDs) goes when
// the pods are bound or deleted; it does not grow with every pod ever scheduled.
TEST_F(SchedulerTest, PerPodStateGoesWhenPodsAreBoundOrDeleted) {
  constexpr int kPods = 200;
  ASSERT_NO_FATAL_FAILURE(StartWithPendingPods(kPods));
  EXPECT_GT(scheduler_->TrackedKeys(), 0u) << "the waiting pods' groups are ranked";
  // Half run and are bound; the other half are deleted while they wait.
  for (int i = 0; i < kPods; i += 2) Allocate(JobOf("p" + std::to_string(i)));
  clock_.Advance(config_.job_poll_interval);
  ASSERT_TRUE(RunUntil([&] { return static_cast<int>(bindings_.size()) == kPods / 2; }));
  // Some come and go at once (whether their jobs are submitted before the deletion is seen
  // depends on when the watch delivers it; either way nothing of them may stay).
  for (int i = 0; i < 50; ++i) {
    api_.AddPod("ns", "brief" + std::to_string(i));
    api_.DeletePod("ns", "brief" + std::to_string(i));
  }
  for (int i = 1; i < kPods; i += 2) api_.DeletePod("ns", "p" + std::to_string(i));
  ASSERT_TRUE(AdvanceUntil([&] {
    return LiveJobs() == kPods / 2 && scheduler_->TrackedKeys() == 0;
  })) << scheduler_->TrackedKeys()
      << " keys left, " << slurm_.cancels().size() << " cancels, " << slurm_.calls("SubmitJob")
      << " submits";
  // Deleted pods' jobs are cancelled (the bound pods' jobs live on: the controllers' now).
  EXPECT_EQ(scheduler_->TrackedJobs(), 0u);
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

}  // namespace
}  // namespace sb::scheduler
