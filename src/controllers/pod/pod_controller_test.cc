// SPDX-License-Identifier: Apache-2.0
//
// The pod controller's loop against an in-memory Slurm (FakeSlurmClient) and the fake apiserver
// (pods served by FakeApiServer; nodes, events, single-pod GETs and DELETEs answered by a hook).
// Time is a FakeClock: the Slurm poll and the sweep run when the test advances it.
#include "controllers/pod/pod_controller.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "async/clock.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "common/time_format.h"
#include "net/http_client.h"
#include "testing/fake_apiserver.h"
#include "testing/fake_slurm_client.h"
#include "testing/run.h"

namespace sb::controllers {
namespace {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using sb::testing::FakeApiServer;
using sb::testing::FakeReply;
using sb::testing::FakeRequest;
using sb::testing::HttpReply;

constexpr std::string_view kEmptyNodeList =
    R"({"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]})";

class PodControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ep = net::ParseEndpoint(api_.url());
    ASSERT_TRUE(ep);
    http_ = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, {}));
    kube_ = kube::MakeClient(*http_, nullptr);
    // The fake apiserver stamps deletions (deletionTimestamp = now + grace) on the test's clock.
    api_.now = [this] { return clock_.WallNow(); };
    api_.Intercept([this](const FakeRequest& req) { return Hook(req); });
    // The controller watches spec.schedulerName=<ours>; the fake filters as the apiserver does.
    api_.pod_scheduler_name = "slurm-bridge-scheduler";
  }

  void TearDown() override {
    if (controller_) {
      controller_->Stop();
      EXPECT_TRUE(RunUntil([&] { return done_; })) << "Run() did not return after Stop()";
    }
  }

  // Nodes (none), events, GETs and DELETEs of one pod; the pod list and watch are the fake's
  // unless `pods_broken` (then 500).
  std::optional<FakeReply> Hook(const FakeRequest& req) {
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (path == "/api/v1/nodes") {
      if (req.target.find("watch=") != std::string::npos) {
        FakeReply r = FakeApiServer::WatchReply({});
        r.delay = 50ms;
        return r;
      }
      return HttpReply(200, std::string(kEmptyNodeList));
    }
    if (path.starts_with("/api/v1/namespaces/") &&
        path.find('/', std::string_view("/api/v1/namespaces/").size()) == std::string::npos) {
      const std::string ns = path.substr(std::string_view("/api/v1/namespaces/").size());
      if (ns == "ns") {
        return HttpReply(200, R"({"kind":"Namespace","apiVersion":"v1","metadata":{"name":"ns"}})");
      }
      return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
    }
    if (path.find("/events") != std::string::npos) {
      events_.push_back(req.body);
      return HttpReply(201, req.body);
    }
    if ((path == "/api/v1/pods" || path.ends_with("/pods")) && pods_broken_) {
      ++broken_answers_;
      return HttpReply(500, R"({"kind":"Status","code":500,"message":"etcd is away"})");
    }
    // ResourceClaims of namespace ns: claims_ (GET), claim_deletes_ (DELETE).
    const std::string claims = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/";
    if (path.starts_with(claims)) {
      const std::string name = path.substr(claims.size());
      auto it = claims_.find(name);
      if (req.method == "DELETE") claim_deletes_.push_back({name, req.body});
      if (it == claims_.end()) {
        return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
      }
      if (req.method == "GET") return HttpReply(200, it->second);
      if (req.method == "DELETE") {
        claims_.erase(it);
        return HttpReply(200, R"({"kind":"Status","status":"Success"})");
      }
    }
    const std::string prefix = "/api/v1/namespaces/ns/pods/";
    if (path.starts_with(prefix)) {
      const std::string name = path.substr(prefix.size());
      if (req.method == "PATCH" && before_patch_) before_patch_(name);  // then the fake answers
      if (req.method == "DELETE") {
        deleted_.push_back(name);
        delete_bodies_.push_back(req.body);
        return HttpReply(200, R"({"kind":"Status","status":"Success"})");
      }
      if (req.method == "GET") {
        if (auto it = hidden_.find(name); it != hidden_.end()) return HttpReply(200, it->second);
        std::string json = api_.PodJson("ns", name);
        if (json.empty()) {
          return HttpReply(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
        }
        return HttpReply(200, json);
      }
    }
    return std::nullopt;
  }

  void Start(PodControllerOptions options = {}) {
    // The sweep every second unless a test sets its own.
    if (options.sweep_interval == PodControllerOptions{}.sweep_interval) {
      options.sweep_interval = 1000ms;
    }
    // Every watched job at every poll unless a test sets another cadence for steady jobs
    // (SteadyJobsAreAskedEveryBoundJobPollInterval): the tests count polls of bound pods' jobs.
    if (options.bound_job_poll_interval == PodControllerOptions{}.bound_job_poll_interval) {
      options.bound_job_poll_interval = 500ms;
    }
    if (options.pending_job_poll_interval == PodControllerOptions{}.pending_job_poll_interval) {
      options.pending_job_poll_interval = 500ms;
    }
    options.orphan_min_age = 0s;
    controller_ = std::make_unique<PodController>(io_.get_executor(), *kube_, slurm_, clock_,
                                                  bridge::Config{}, options);
    asio::co_spawn(io_, controller_->Run(), [this](std::exception_ptr e) {
      EXPECT_FALSE(e);
      done_ = true;
    });
    // Run() looks for the informers' first LIST every 20 ms of the fake clock.
    ASSERT_TRUE(RunUntil([&] {
      if (controller_->Ready()) return true;
      clock_.Advance(20ms);
      return false;
    }));
  }

  // Drives the loop until `pred` holds (a guard against a hang, not a timed assertion).
  bool RunUntil(const std::function<bool()>& pred) {
    return sb::testing::RunLoopUntil(io_, pred, 10s);
  }

  // Advances the fake clock one sweep interval and waits for that sweep (run or skipped).
  bool OneSweep() {
    const std::uint64_t before = controller_->stats().sweeps + controller_->stats().sweeps_skipped;
    clock_.Advance(1000ms);
    return RunUntil(
        [&] { return controller_->stats().sweeps + controller_->stats().sweeps_skipped > before; });
  }

  // Whole job lists read from Slurm (ScanJobs, ListJobs, ListJobsSince; the fake's ScanJobs is
  // the client's default, a ListJobsSince filtered).
  int WholeLists() const {
    return slurm_.calls("ScanJobs") + slurm_.calls("ListJobs") + slurm_.calls("ListJobsSince");
  }

  // Advances the fake clock one jobPollInterval and waits for that state poll.
  bool OnePoll() {
    const std::uint64_t before = controller_->stats().state_polls;
    clock_.Advance(500ms);
    return RunUntil([&] { return controller_->stats().state_polls > before; });
  }

  // The next UID FakeApiServer gives pod `name` ("uid-ns-<name>-<rv>").
  std::string NextUid(const std::string& name) {
    return "uid-ns-" + name + "-" + std::to_string(api_.rv() + 1);
  }

  std::string TagFor(const std::string& name, const std::string& uid,
                     const std::string& cluster = "kubernetes") {
    return bridge::EncodeJobTag({.pods = {"ns/" + name},
                                 .uids = {uid},
                                 .group = "Pod/ns/" + name,
                                 .cluster = cluster,
                                 .scheduler = "slurm-bridge-scheduler"});
  }

  int EventsWith(const std::string& reason) {
    int n = 0;
    for (const std::string& e : events_) {
      n += e.find("\"reason\":\"" + reason + "\"") != std::string::npos ? 1 : 0;
    }
    return n;
  }

  asio::io_context io_;
  FakeApiServer api_{io_};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  sb::testing::FakeSlurmClient slurm_;
  async::FakeClock clock_;
  std::unique_ptr<PodController> controller_;
  bool done_ = false;
  bool pods_broken_ = false;
  int broken_answers_ = 0;
  std::vector<std::string> events_;
  std::vector<std::string> deleted_;
  std::vector<std::string> delete_bodies_;     // the DeleteOptions of each of deleted_
  std::map<std::string, std::string> hidden_;  // pods only a GET shows
  std::map<std::string, std::string> claims_;  // ResourceClaims of ns, by name
  std::vector<std::pair<std::string, std::string>> claim_deletes_;  // name, body
  std::function<void(const std::string&)> before_patch_;  // runs before the fake sees a PATCH
};

// Test audit #8 and review item 13: the state poll asks Slurm about the labelled jobs only, in
// one request per jobPollInterval whether 10 or 1,000 pods have a job; no GET /job/{id} while
// nothing changes; the sweep reads no job list (#46), only the states of the bridge's jobs.
class PodControllerCostTest : public PodControllerTest,
                              public ::testing::WithParamInterface<int> {};

TEST_P(PodControllerCostTest, OneStateRequestPerPollForTheLabelledJobsOnly) {
  const int n = GetParam();
  for (int i = 0; i < 50; ++i) slurm_.AddJob("RUNNING", "");  // others' jobs: never asked about
  std::vector<std::int64_t> labelled;
  for (int i = 0; i < n; ++i) {
    const std::string name = "p" + std::to_string(i);
    const std::string uid = NextUid(name);
    const std::int64_t id = slurm_.AddJob("RUNNING", TagFor(name, uid));
    api_.AddPod("ns", name, {{std::string(bridge::kJobIdLabel), std::to_string(id)}}, "n1");
    labelled.push_back(id);
  }
  Start();
  // Every job is read once (GET /job/{id}) when first seen.
  ASSERT_TRUE(RunUntil([&] {
    return slurm_.calls("GetJob") == n && controller_->QueueDepth() == 0 &&
           controller_->stats().reconciles >= static_cast<std::uint64_t>(n);
  })) << slurm_.calls("GetJob")
      << " reads";
  const int gets = slurm_.calls("GetJob");
  const int polls = slurm_.calls("JobStates");
  const int lists = WholeLists();
  const std::uint64_t sweep_reads = controller_->stats().sweep_state_reads;
  const std::uint64_t requests = slurm_.requests();
  const std::size_t queries = slurm_.state_queries().size();
  constexpr int kPolls = 8;
  for (int k = 1; k <= kPolls; ++k) {
    const std::uint64_t before = controller_->stats().state_polls;
    clock_.Advance(500ms);
    ASSERT_TRUE(RunUntil([&] { return controller_->stats().state_polls > before; }));
  }
  // The sweeps (every second here) each read the registered jobs' states once.
  const int sweeps = static_cast<int>(controller_->stats().sweep_state_reads - sweep_reads);
  EXPECT_GE(sweeps, 1);
  EXPECT_EQ(slurm_.calls("JobStates") - polls, kPolls + sweeps);
  EXPECT_EQ(slurm_.calls("GetJob"), gets) << "nothing changed";
  EXPECT_EQ(WholeLists(), lists) << "no job list after the start-up one";
  EXPECT_TRUE(slurm_.cancels().empty());
  // Only state polls and sweep state reads (one request each: no batching at this size).
  EXPECT_EQ(slurm_.requests() - requests, static_cast<std::uint64_t>(kPolls + sweeps));
  for (std::size_t q = queries; q < slurm_.state_queries().size(); ++q) {
    EXPECT_EQ(slurm_.state_queries()[q], labelled) << "exactly the labelled jobs";
  }
}

INSTANTIATE_TEST_SUITE_P(LabelledPods, PodControllerCostTest, ::testing::Values(10, 1000));

// #46: a running job whose pods are all bound and running is asked about every
// bound_job_poll_interval, not at every poll; a job with a pod not bound yet, or one being
// deleted, at every poll. The steady job's end still deletes its pod, at its next read.
TEST_F(PodControllerTest, SteadyJobsAreAskedEveryBoundJobPollInterval) {
  const std::int64_t steady = slurm_.AddJob("RUNNING", TagFor("steady", NextUid("steady")));
  api_.AddPod("ns", "steady", {{std::string(bridge::kJobIdLabel), std::to_string(steady)}}, "n1");
  const std::int64_t half = slurm_.AddJob("RUNNING", TagFor("half-a", NextUid("half-a")));
  api_.AddPod("ns", "half-a", {{std::string(bridge::kJobIdLabel), std::to_string(half)}}, "n1");
  api_.AddPod("ns", "half-b", {{std::string(bridge::kJobIdLabel), std::to_string(half)}});
  PodControllerOptions o;
  o.bound_job_poll_interval = 3s;
  o.sweep_interval = 60s;  // its state reads would be counted with the polls'
  Start(o);
  ASSERT_TRUE(RunUntil([&] { return controller_->QueueDepth() == 0; }));
  ASSERT_TRUE(OnePoll());
  ASSERT_TRUE(RunUntil([&] { return controller_->QueueDepth() == 0; }));
  const std::size_t from = slurm_.state_queries().size();
  constexpr int kPolls = 12;  // 6 s: two bound_job_poll_intervals
  for (int i = 0; i < kPolls; ++i) ASSERT_TRUE(OnePoll());
  int steady_asked = 0;
  int half_asked = 0;
  for (std::size_t q = from; q < slurm_.state_queries().size(); ++q) {
    const auto& ids = slurm_.state_queries()[q];
    steady_asked += std::ranges::count(ids, steady) > 0 ? 1 : 0;
    half_asked += std::ranges::count(ids, half) > 0 ? 1 : 0;
  }
  EXPECT_GE(half_asked, kPolls) << "a job with a pod not bound is asked at every poll";
  EXPECT_GE(steady_asked, 1);
  EXPECT_LE(steady_asked, 2) << "the steady job is asked every 3 s, not every 500 ms";
  EXPECT_EQ(controller_->stats().jobs_steady, 1u);
  // Its end deletes its pod, one bound_job_poll_interval later at most.
  ASSERT_TRUE(slurm_.SetJobState(steady, "CANCELLED"));
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(OnePoll());  // 3.5 s
  EXPECT_TRUE(RunUntil([&] { return std::ranges::count(deleted_, "steady") == 1; }))
      << "the ended steady job's pod goes";
  // Another steady job's pod starts to be deleted: its job is asked at the next poll.
  const std::int64_t other = slurm_.AddJob("RUNNING", TagFor("other", NextUid("other")));
  api_.AddPod("ns", "other", {{std::string(bridge::kJobIdLabel), std::to_string(other)}}, "n1");
  // Polls until the pod's watch event has come and its job is known to run: then steady.
  ASSERT_TRUE(RunUntil([&] {
    if (controller_->stats().jobs_steady == 1) return true;
    clock_.Advance(500ms);
    return false;
  }));
  const std::uint64_t passes = controller_->stats().reconciles;
  api_.PatchPod("ns", "other", R"({"metadata":{"deletionTimestamp":"2026-12-07T00:00:00Z"}})");
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles > passes; }));
  // No longer steady: asked at a poll (the deletion's own reconcile may have changed it too).
  const std::size_t asked = slurm_.state_queries().size();
  ASSERT_TRUE(RunUntil([&] {
    const auto& q = slurm_.state_queries();
    for (std::size_t i = asked; i < q.size(); ++i) {
      if (std::ranges::count(q[i], other) == 1) return true;
    }
    clock_.Advance(100ms);
    return false;
  })) << "a pod being deleted: its job is asked again";
  EXPECT_EQ(controller_->stats().jobs_steady, 0u);
}

// #46: a job pending for more than bridge::kLongPending is asked every
// pending_job_poll_interval, a younger one at every poll; its end is still seen.
// (Fails with the old cadence: the long-pending job asked 12 times.)
TEST_F(PodControllerTest, LongPendingJobsAreAskedEveryPendingJobPollInterval) {
  const std::int64_t waiting = slurm_.AddJob("PENDING", TagFor("waiting", NextUid("waiting")));
  api_.AddPod("ns", "waiting", {{std::string(bridge::kJobIdLabel), std::to_string(waiting)}});
  // Asked at every poll (running, its pod not bound yet), so that every poll sends a request.
  const std::int64_t anchor = slurm_.AddJob("RUNNING", TagFor("anchor", NextUid("anchor")));
  api_.AddPod("ns", "anchor", {{std::string(bridge::kJobIdLabel), std::to_string(anchor)}});
  PodControllerOptions o;
  o.pending_job_poll_interval = 3s;  // (the fixture turns the default, 2 s, into 500 ms)
  o.sweep_interval = 300s;           // its state reads would be counted with the polls'
  Start(o);
  // Both pods were seen (first_seen) by now: their jobs are long pending 30 s from here.
  const async::Clock::TimePoint began = clock_.Now();
  ASSERT_TRUE(RunUntil([&] { return controller_->QueueDepth() == 0; }));
  auto asked = [&](std::int64_t id, std::size_t from) {
    int n = 0;
    for (std::size_t q = from; q < slurm_.state_queries().size(); ++q) {
      n += std::ranges::count(slurm_.state_queries()[q], id) > 0 ? 1 : 0;
    }
    return n;
  };
  std::size_t from = 0;
  while (clock_.Now() - began < bridge::kLongPending + 1s) ASSERT_TRUE(OnePoll());
  const std::int64_t young = slurm_.AddJob("PENDING", TagFor("young", NextUid("young")));
  api_.AddPod("ns", "young", {{std::string(bridge::kJobIdLabel), std::to_string(young)}});
  from = slurm_.state_queries().size();
  while (asked(young, from) == 0) ASSERT_TRUE(OnePoll());  // its pod's watch event has come
  from = slurm_.state_queries().size();
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(OnePoll());  // 6 s: two periods of 3 s
  EXPECT_EQ(asked(waiting, from), 2) << "asked every 3 s, not every 500 ms";
  EXPECT_EQ(asked(young, from), 12) << "the young job: at every poll";
  EXPECT_EQ(asked(anchor, from), 12);
  // Its end (cancelled while it waited) is seen at the next period's poll; no longer pending,
  // it is asked at every poll after that (its unbound pod is the scheduler's to submit again).
  ASSERT_TRUE(slurm_.SetJobState(waiting, "CANCELLED"));
  from = slurm_.state_queries().size();
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(OnePoll());  // 3.5 s: one period and a poll
  EXPECT_GE(asked(waiting, from), 1);
  from = slurm_.state_queries().size();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(OnePoll());
  EXPECT_EQ(asked(waiting, from), 4) << "its end was seen: no longer long pending";
}

// N-17: a job that ended, whose pods all finished and were released (a Job keeps its Succeeded
// pods), is asked about until its end is known, then no more; a running pod naming the same id
// brings it back.
TEST_F(PodControllerTest, EndedJobOfFinishedPodsIsNoLongerPolled) {
  const std::int64_t running = slurm_.AddJob("RUNNING", TagFor("live", NextUid("live")));
  api_.AddPod("ns", "live", {{std::string(bridge::kJobIdLabel), std::to_string(running)}}, "n1");
  const std::int64_t ended = slurm_.AddJob("COMPLETED", TagFor("done", NextUid("done")));
  api_.AddPod("ns", "done", {{std::string(bridge::kJobIdLabel), std::to_string(ended)}}, "n1");
  api_.PatchPod("ns", "done", R"({"status":{"phase":"Succeeded"}})");
  Start();
  ASSERT_TRUE(OnePoll());
  ASSERT_TRUE(RunUntil([&] { return controller_->QueueDepth() == 0; }));
  ASSERT_TRUE(OnePoll());
  const std::size_t from = slurm_.state_queries().size();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(OnePoll());
  ASSERT_GT(slurm_.state_queries().size(), from);
  for (std::size_t q = from; q < slurm_.state_queries().size(); ++q) {
    EXPECT_EQ(slurm_.state_queries()[q], std::vector<std::int64_t>{running})
        << "the ended job of a finished pod is not asked about";
  }
  EXPECT_EQ(controller_->stats().jobs_settled, 1u);
  // A pod that is not finished names it again: asked about again.
  api_.AddPod("ns", "again", {{std::string(bridge::kJobIdLabel), std::to_string(ended)}});
  ASSERT_TRUE(RunUntil([&] {
    clock_.Advance(500ms);
    const auto& q = slurm_.state_queries();
    return !q.empty() && std::ranges::find(q.back(), ended) != q.back().end();
  }));
  EXPECT_EQ(controller_->stats().jobs_settled, 0u);
}

// No pod names a job: no state poll at all.
TEST_F(PodControllerTest, NoLabelledPodNoStatePoll) {
  for (int i = 0; i < 20; ++i) slurm_.AddJob("RUNNING", "");
  api_.AddPod("ns", "waiting");
  Start();
  int polls = 0;
  ASSERT_TRUE(sb::testing::RunLoopUntil(
      io_, [&] { return polls == 40; }, 10s,
      [&] {
        clock_.Advance(500ms);
        ++polls;
      }));
  EXPECT_EQ(slurm_.calls("JobStates"), 0);
}

// Review item 13, #46: the sweep reads no job list after the start-up one; a tagged job of that
// list whose (unlabelled) pod is deleted later is still found an orphan.
TEST_F(PodControllerTest, SweepWithoutAListStillCancelsAnOrphanOfTheStartUpList) {
  const std::string uid = NextUid("p");
  api_.AddPod("ns", "p");  // the scheduler made the job, then died before labelling the pod
  const std::int64_t job = slurm_.AddJob("RUNNING", TagFor("p", uid));
  Start();
  ASSERT_TRUE(OneSweep());
  ASSERT_TRUE(OneSweep());
  EXPECT_TRUE(slurm_.cancels().empty());
  EXPECT_EQ(controller_->stats().startup_lists, 1u);
  const int lists = WholeLists();
  // The pod watch is open (it may start after the first sweeps: the LIST made Ready()).
  ASSERT_TRUE(RunUntil([&] { return api_.open_watches() >= 1; }));
  const std::int64_t gone = api_.DeletePod("ns", "p");
  // The pod watch has delivered the deletion: after it ends, the next watch is from its
  // resourceVersion on.
  api_.CloseWatches();
  ASSERT_TRUE(sb::testing::RunLoopUntil(
      io_,
      [&] {
        for (const std::string& rv : api_.watch_rvs()) {
          if (!rv.empty() && std::stoll(rv) >= gone) return true;
        }
        return false;
      },
      10s, [&] { clock_.Advance(20ms); }));
  ASSERT_TRUE(OneSweep());
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{job}));
  EXPECT_EQ(WholeLists(), lists) << "from the register, not a list";
}

// Review item 1: a user labels a pending bridge pod with another user's job (untagged) and
// deletes it. The job used to be cancelled ("its pods are gone").
TEST_F(PodControllerTest, ForgedLabelThenDeletedPodNeverCancelsAnUntaggedJob) {
  slurm_.next_job_id = 77;
  const std::int64_t job = slurm_.AddJob("RUNNING", "");
  api_.AddPod("ns", "forger", {{std::string(bridge::kJobIdLabel), "77"}});
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 1; }));
  ASSERT_TRUE(RunUntil([&] { return EventsWith("SlurmJobNotOurs") == 1; }));
  api_.DeletePod("ns", "forger");
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 2; }));
  ASSERT_TRUE(OneSweep());
  EXPECT_TRUE(slurm_.cancels().empty());
  EXPECT_EQ(slurm_.Job(job)->BaseState(), "RUNNING");
  EXPECT_EQ(EventsWith("SlurmJobNotOurs"), 1) << "reported once";
}

// The same with a job of this bridge submitted for the pod: that one is cancelled (the rule
// above is about the tag, not a controller that never cancels).
TEST_F(PodControllerTest, DeletedPodCancelsTheJobTaggedForIt) {
  const std::string uid = NextUid("mine");
  api_.AddPod("ns", "mine", {{std::string(bridge::kJobIdLabel), "1"}});
  slurm_.AddJob("RUNNING", TagFor("mine", uid));
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 1; }));
  EXPECT_TRUE(slurm_.cancels().empty());
  api_.DeletePod("ns", "mine");
  ASSERT_TRUE(RunUntil([&] { return !slurm_.cancels().empty(); }));
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(EventsWith("SlurmJobNotOurs"), 0);
}

// The finalizer is released with a resourceVersion precondition: another writer's finalizer added
// since the cache saw the pod gets the bridge's patch a 409 from the apiserver, and the retry keeps
// it (a patch without the precondition would write the old list over it).
TEST_F(PodControllerTest, ReleasingTheFinalizerKeepsOneAddedConcurrently) {
  const std::string uid = NextUid("done");
  api_.pod_merge_patch = fmt::format(R"({{"metadata":{{"finalizers":["{}"]}},)"
                                     R"("status":{{"phase":"Succeeded"}}}})",
                                     bridge::kFinalizer);
  api_.AddPod("ns", "done", {{std::string(bridge::kJobIdLabel), "1"}}, "n1");
  slurm_.AddJob("RUNNING", TagFor("done", uid));
  int patches = 0;
  before_patch_ = [&](const std::string& name) {
    if (name == "done" && ++patches == 1) {
      api_.PatchPod("ns", "done",
                    fmt::format(R"({{"metadata":{{"finalizers":["{}","example.com/other"]}}}})",
                                bridge::kFinalizer));
    }
  };
  Start();
  ASSERT_TRUE(sb::testing::RunLoopUntil(
      io_,
      [&] {
        const std::string json = api_.PodJson("ns", "done");
        return json.find(bridge::kFinalizer) == std::string::npos;
      },
      10s, [&] { clock_.Advance(100ms); }))
      << api_.PodJson("ns", "done");
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{1}));
  EXPECT_GE(patches, 2) << "the first patch met the 409";
  EXPECT_NE(api_.PodJson("ns", "done").find(R"("finalizers":["example.com/other"])"),
            std::string::npos)
      << api_.PodJson("ns", "done");
}

// A job of another cluster (same scheduler name) named by a label: left alone as well.
TEST_F(PodControllerTest, ForgedLabelNeverCancelsAnotherClustersJob) {
  const std::string uid = NextUid("p");
  slurm_.AddJob("PENDING", TagFor("p", uid, "elsewhere"));
  api_.AddPod("ns", "p", {{std::string(bridge::kJobIdLabel), "1"}});
  Start();
  ASSERT_TRUE(RunUntil([&] { return EventsWith("SlurmJobNotOurs") == 1; }));
  api_.DeletePod("ns", "p");
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 2; }));
  ASSERT_TRUE(OneSweep());
  EXPECT_TRUE(slurm_.cancels().empty());
}

// Review item 8: while the pod watch is broken (watch and relists fail), the cache misses new
// pods; the sweep must not take their jobs for orphans.
TEST_F(PodControllerTest, SweepSkippedWhileThePodWatchIsBroken) {
  Start();
  // The pod watch is open when the server breaks (it used to race the break: under the
  // sanitizers it often was, and nothing ever ended it); it ends as a broken server's would, and
  // the requests after it (re-watch, relist) get the 500s.
  ASSERT_TRUE(RunUntil([&] { return api_.open_watches() >= 1; }));
  pods_broken_ = true;
  api_.CloseWatches();
  ASSERT_TRUE(RunUntil([&] { return broken_answers_ >= 2; }));
  // A pod created meanwhile, and the scheduler's job for it.
  const std::string uid = NextUid("new");
  api_.AddPod("ns", "new");
  slurm_.AddJob("RUNNING", TagFor("new", uid));
  ASSERT_TRUE(OneSweep());
  EXPECT_GE(controller_->stats().sweeps_skipped, 1u);
  EXPECT_TRUE(slurm_.cancels().empty());
  // Once the watch is back (a LIST succeeded) sweeps run again; the pod is seen, its job kept.
  pods_broken_ = false;
  const std::uint64_t sweeps = controller_->stats().sweeps;
  ASSERT_TRUE(RunUntil([&] {
    if (controller_->stats().sweeps > sweeps) return true;
    clock_.Advance(1000ms);
    return false;
  }));
  EXPECT_TRUE(slurm_.cancels().empty());
}

// Review item 8: an orphan candidate is confirmed with a GET of the pod: a pod the cache lacks
// but the apiserver has (same UID) keeps its job; one the apiserver lacks does not.
TEST_F(PodControllerTest, OrphanSweepConfirmsWithAGetOfThePod) {
  hidden_["hidden"] =
      R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":"hidden","namespace":"ns",)"
      R"("uid":"uid-hidden"},"spec":{"nodeName":"n1"},"status":{"phase":"Running"}})";
  const std::int64_t kept = slurm_.AddJob("RUNNING", TagFor("hidden", "uid-hidden"));
  const std::int64_t orphan = slurm_.AddJob("RUNNING", TagFor("gone", "uid-gone"));
  // Same name, another UID: the pod was re-created; the job is an orphan.
  const std::int64_t recreated = slurm_.AddJob("RUNNING", TagFor("hidden", "uid-old"));
  Start();
  ASSERT_TRUE(OneSweep());
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{orphan, recreated}));
  EXPECT_EQ(slurm_.Job(kept)->BaseState(), "RUNNING");
}

// Review item 10: a bound pod whose job was requeued (PENDING) is deleted once the confirmation
// period has passed, with a Warning event.
TEST_F(PodControllerTest, RequeuedJobDeletesTheBoundPodAfterConfirmation) {
  const std::string uid = NextUid("bound");
  api_.AddPod("ns", "bound", {{std::string(bridge::kJobIdLabel), "1"}}, "n1");
  const std::int64_t job = slurm_.AddJob("RUNNING", TagFor("bound", uid));
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 1; }));
  slurm_.SetJobState(job, "PENDING");
  clock_.Advance(500ms);  // the state poll sees it
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 2; }));
  EXPECT_TRUE(deleted_.empty()) << "not before the confirmation period";
  clock_.Advance(LifecycleOptions{}.confirm_after + 1s);
  ASSERT_TRUE(RunUntil([&] { return !deleted_.empty(); }));
  EXPECT_EQ(deleted_, (std::vector<std::string>{"bound"}));
  EXPECT_TRUE(RunUntil([&] { return EventsWith("SlurmJobNotRunning") == 1; }));
  EXPECT_TRUE(slurm_.cancels().empty());
}

// Review 888ec7d (design risks): a job Slurm no longer knows deletes its bound pod only after
// confirm_after, like a job that stopped running.
TEST_F(PodControllerTest, GoneJobDeletesTheBoundPodAfterConfirmation) {
  const std::string uid = NextUid("bound");
  api_.AddPod("ns", "bound", {{std::string(bridge::kJobIdLabel), "1"}}, "n1");
  const std::int64_t job = slurm_.AddJob("RUNNING", TagFor("bound", uid));
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 1; }));
  slurm_.Forget(job);
  clock_.Advance(500ms);  // the state poll misses it; the read says 404
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 2; }));
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(OnePoll());  // 4 s
  EXPECT_TRUE(deleted_.empty()) << "not before the confirmation period";
  EXPECT_EQ(controller_->stats().jobs_missing, 1u);
  clock_.Advance(LifecycleOptions{}.confirm_after);
  ASSERT_TRUE(RunUntil([&] { return !deleted_.empty(); }));
  EXPECT_EQ(deleted_, (std::vector<std::string>{"bound"}));
  EXPECT_TRUE(RunUntil([&] { return EventsWith("SlurmJobEnded") == 1; }));
}

// Review 888ec7d (design risks): a slurmctld that lost its state answers every job "not found".
// More missing jobs than jobGoneBrake at once keep their pods (a Warning event each, the metric
// gauge); when fewer are missing (the operator deleted some pods, or Slurm knows the jobs
// again), the rest follow the usual rule.
TEST_F(PodControllerTest, ManyJobsVanishingAtOnceKeepTheirPods) {
  constexpr int kJobs = 4;
  std::vector<std::int64_t> jobs;
  for (int i = 0; i < kJobs; ++i) {
    const std::string name = "p" + std::to_string(i);
    const std::string uid = NextUid(name);
    const std::int64_t id = slurm_.AddJob("RUNNING", TagFor(name, uid));
    api_.AddPod("ns", name, {{std::string(bridge::kJobIdLabel), std::to_string(id)}}, "n1");
    jobs.push_back(id);
  }
  // Finished pods whose jobs Slurm purged long ago (MinJobAge) are no sign of a lost state: the
  // chaos run found the brake engaged by them (Jobs keep their Succeeded pods).
  for (int i = 0; i < kJobs; ++i) {
    const std::string name = "done" + std::to_string(i);
    api_.AddPod("ns", name, {{std::string(bridge::kJobIdLabel), std::to_string(100 + i)}}, "n1");
    api_.PatchPod("ns", name, R"({"status":{"phase":"Succeeded"}})");
  }
  PodControllerOptions o;
  o.gone_brake = 2;
  Start(o);
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= kJobs; }));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(OnePoll());
  EXPECT_EQ(controller_->stats().jobs_missing, 0u) << "the finished pods' jobs count";
  EXPECT_FALSE(controller_->stats().gone_brake_engaged);
  for (std::int64_t id : jobs) slurm_.Forget(id);
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(OnePoll());  // 30 s: three times confirm_after
  EXPECT_TRUE(deleted_.empty()) << "deleted while " << kJobs << " jobs vanished at once";
  EXPECT_TRUE(controller_->stats().gone_brake_engaged);
  EXPECT_EQ(controller_->stats().jobs_missing, static_cast<std::uint64_t>(kJobs));
  EXPECT_TRUE(RunUntil([&] { return EventsWith("SlurmJobsVanished") == kJobs; }));
  // Two pods go (the operator's doing): two missing jobs are within the brake.
  api_.DeletePod("ns", "p0");
  api_.DeletePod("ns", "p1");
  for (int i = 0; i < 70 && deleted_.size() < 2; ++i) ASSERT_TRUE(OnePoll());
  EXPECT_FALSE(controller_->stats().gone_brake_engaged);
  std::ranges::sort(deleted_);
  EXPECT_EQ(deleted_, (std::vector<std::string>{"p2", "p3"}));
}

// Review item 11: a bound pod with no job label is reported, then deleted by a later sweep.
TEST_F(PodControllerTest, BoundPodWithoutAJobIsDeletedAfterConfirmation) {
  api_.AddPod("ns", "squatter", {}, "n1");
  api_.AddPod("ns", "waiting");  // unbound: the scheduler's
  Start();
  ASSERT_TRUE(OneSweep());
  EXPECT_TRUE(RunUntil([&] { return EventsWith("NoSlurmJob") == 1; }));
  EXPECT_TRUE(deleted_.empty()) << "not before the confirmation period";
  for (int i = 0; i < 11 && deleted_.empty(); ++i) ASSERT_TRUE(OneSweep());
  EXPECT_EQ(deleted_, (std::vector<std::string>{"squatter"}));
  EXPECT_EQ(controller_->stats().strays_deleted, 1u);
}

// Review item 9: live jobs tagged with this clusterName whose pods and namespaces this cluster
// lacks are counted (and warned about) at start-up; orphans of an existing namespace are not.
TEST_F(PodControllerTest, StartUpCountsJobsThatLookLikeAnotherClusters) {
  bridge::JobTag other{.pods = {"team-b/train-0"},
                       .uids = {"uid-b"},
                       .group = "Pod/team-b/train-0",
                       .cluster = "kubernetes",
                       .scheduler = "slurm-bridge-scheduler"};
  slurm_.AddJob("RUNNING", bridge::EncodeJobTag(other));
  slurm_.AddJob("PENDING", TagFor("orphan", "uid-orphan"));  // namespace ns exists here
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().cluster_name_checks == 1; }));
  EXPECT_EQ(controller_->stats().foreign_looking_jobs, 1u);
}

}  // namespace
}  // namespace sb::controllers

namespace sb::controllers {
namespace {

// A kubelet refused a pod's ResourceClaims (it saw the Binding before the node authorizer) asks
// again only at its next sync: 5 s after the Binding, the pod of a running job still without a
// sandbox gets the nudge annotation once, with an Event; a later pass leaves it alone.
TEST_F(PodControllerTest, StuckDraPodsKubeletIsNudgedOnce) {
  const std::string uid = NextUid("dra");
  api_.AddPod("ns", "dra", {{std::string(bridge::kJobIdLabel), "1"}}, "n1");
  ASSERT_EQ(slurm_.AddJob("RUNNING", TagFor("dra", uid)), 1);
  const std::string nudged = std::string(bridge::kKubeletNudgeAnnotation);
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 1; }));
  // Bound now (Start() moved the clock on), with the bridge's claim.
  const std::uint64_t passes_before = controller_->stats().reconciles;
  api_.PatchPod("ns", "dra",
                fmt::format(R"({{"metadata":{{"annotations":{{"{}":"dra-extended-resources"}}}},
                    "status":{{"conditions":[{{"type":"PodScheduled","status":"True",
                    "lastTransitionTime":"{}"}}]}}}})",
                            bridge::kResourceClaimAnnotation, FormatTime(clock_.WallNow())));
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles > passes_before; }));
  EXPECT_EQ(api_.PodJson("ns", "dra").find(nudged), std::string::npos) << "not before 5 s";
  clock_.Advance(LifecycleOptions{}.kubelet_nudge_after);
  // The clock keeps moving: on a loaded machine the pass that first sees the claim may come after
  // the advance and set its 5 s from then (a warm CI run).
  ASSERT_TRUE(RunUntil([&] {
    if (api_.PodJson("ns", "dra").find(nudged) != std::string::npos) return true;
    clock_.Advance(100ms);
    return false;
  })) << api_.PodJson("ns", "dra");
  EXPECT_TRUE(RunUntil([&] { return EventsWith("KubeletNudged") == 1; }));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(OnePoll());
  const std::uint64_t passes = controller_->stats().reconciles;
  slurm_.SetJobState(1, "COMPLETING");  // a change: the job is reconciled again
  ASSERT_TRUE(OnePoll());
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles > passes; }));
  EXPECT_EQ(controller_->stats().kubelets_nudged, 1u);
  EXPECT_EQ(EventsWith("KubeletNudged"), 1);
  EXPECT_TRUE(deleted_.empty());
  EXPECT_TRUE(slurm_.cancels().empty());
}

// A ResourceClaim as the binder makes it for pod `owner_uid` (bridge::PlanExtendedResourceClaim),
// or, unmarked, as anyone may.
std::string ClaimJson(const std::string& name, const std::string& uid, const std::string& owner_uid,
                      bool marked = true) {
  return fmt::format(
      R"({{"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{{"name":"{}",)"
      R"("namespace":"ns","uid":"{}",{}"ownerReferences":[{{"apiVersion":"v1","kind":"Pod",)"
      R"("name":"x","uid":"{}","controller":true,"blockOwnerDeletion":true}}]}},"spec":{{}}}})",
      name, uid,
      marked ? R"("annotations":{"resource.kubernetes.io/extended-resource-claim":"true"},)" : "",
      owner_uid);
}

// R-4: the claim named by a finished pod's annotation slinky.slurm.net/resource-claim was deleted
// whoever's it was (the annotation is the pod's author's to write). Only the claim the binder made
// for the pod goes (owned by the pod's UID, the extended-resource mark), with its UID as
// precondition; another's stays.
TEST_F(PodControllerTest, ReleasingAFinishedPodDeletesOnlyTheClaimMadeForIt) {
  api_.pod_merge_patch = fmt::format(R"({{"metadata":{{"finalizers":["{}"]}},)"
                                     R"("status":{{"phase":"Succeeded"}}}})",
                                     bridge::kFinalizer);
  auto annotate = [&](const std::string& pod, const std::string& claim) {
    api_.PatchPod("ns", pod,
                  fmt::format(R"({{"metadata":{{"annotations":{{"{}":"{}"}}}}}})",
                              bridge::kResourceClaimAnnotation, claim));
  };
  const std::string mine_uid = NextUid("mine");
  api_.AddPod("ns", "mine", {{std::string(bridge::kJobIdLabel), "1"}}, "n1");
  annotate("mine", "mine-extended-resources");
  ASSERT_EQ(slurm_.AddJob("RUNNING", TagFor("mine", mine_uid)), 1);
  const std::string thief_uid = NextUid("thief");
  api_.AddPod("ns", "thief", {{std::string(bridge::kJobIdLabel), "2"}}, "n1");
  annotate("thief", "shared-gpu");
  ASSERT_EQ(slurm_.AddJob("RUNNING", TagFor("thief", thief_uid)), 2);
  const std::string sly_uid = NextUid("sly");
  api_.AddPod("ns", "sly", {{std::string(bridge::kJobIdLabel), "3"}}, "n1");
  annotate("sly", "sly-own");
  ASSERT_EQ(slurm_.AddJob("RUNNING", TagFor("sly", sly_uid)), 3);
  claims_["mine-extended-resources"] = ClaimJson("mine-extended-resources", "claim-1", mine_uid);
  claims_["shared-gpu"] = ClaimJson("shared-gpu", "claim-2", "uid-someone-else");
  // Owned by the pod (a template claim of its own), but not the bridge's: not the bridge's to
  // delete either.
  claims_["sly-own"] = ClaimJson("sly-own", "claim-3", sly_uid, /*marked=*/false);
  Start();
  ASSERT_TRUE(sb::testing::RunLoopUntil(
      io_,
      [&] {
        for (const char* pod : {"mine", "thief", "sly"}) {
          if (api_.PodJson("ns", pod).find(bridge::kFinalizer) != std::string::npos) return false;
        }
        return true;
      },
      10s, [&] { clock_.Advance(100ms); }));
  EXPECT_EQ(controller_->stats().claims_released, 1u);
  EXPECT_FALSE(claims_.contains("mine-extended-resources"));
  EXPECT_TRUE(claims_.contains("shared-gpu"));
  EXPECT_TRUE(claims_.contains("sly-own"));
  EXPECT_TRUE(RunUntil([&] { return EventsWith("ResourceClaimKept") == 2; }));
  ASSERT_EQ(claim_deletes_.size(), 1u);
  EXPECT_EQ(claim_deletes_[0].first, "mine-extended-resources");
  EXPECT_NE(claim_deletes_[0].second.find(R"("preconditions":{"uid":"claim-1"})"),
            std::string::npos)
      << claim_deletes_[0].second;
}

// R-5: a pod deleted with a day's grace period while its job ran is deleted again when the job
// ends, with maxTerminationGracePeriodSeconds (batch placeholders) and its UID as precondition.
TEST_F(PodControllerTest, EndedJobsTerminatingPodIsDeletedAgainWithTheCap) {
  const std::string uid = NextUid("slow");
  api_.AddPod("ns", "slow", {{std::string(bridge::kJobIdLabel), "1"}}, "n1");
  ASSERT_EQ(slurm_.AddJob("RUNNING", TagFor("slow", uid)), 1);
  api_.PatchPod(
      "ns", "slow",
      fmt::format(R"({{"metadata":{{"deletionTimestamp":"{}",)"
                  R"("deletionGracePeriodSeconds":86400}},"status":{{"phase":"Running"}}}})",
                  FormatTime(clock_.WallNow() + 86340s)));
  PodControllerOptions o;
  o.lifecycle.max_termination_grace_seconds = 300;
  Start(o);
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 1; }));
  EXPECT_TRUE(deleted_.empty()) << "the running job holds the node itself";
  slurm_.SetJobState(1, "TIMEOUT");
  clock_.Advance(500ms);  // the state poll sees it
  ASSERT_TRUE(RunUntil([&] { return !deleted_.empty(); }));
  EXPECT_EQ(deleted_.front(), "slow");
  EXPECT_NE(delete_bodies_.front().find(R"("gracePeriodSeconds":300)"), std::string::npos)
      << delete_bodies_.front();
  EXPECT_NE(delete_bodies_.front().find(fmt::format(R"("uid":"{}")", uid)), std::string::npos)
      << delete_bodies_.front();
  EXPECT_TRUE(RunUntil([&] { return EventsWith("SlurmJobEnded") >= 1; }));
  EXPECT_TRUE(slurm_.cancels().empty());
}

// A group's job requeued after its pod was bound: the pod goes, and the job waits requeue_grace
// for the group's new pod (the scheduler adopts it). The orphan sweep, which then finds none of
// the tag's pods, waits as long (in one CI run a Job's new pod came 10 s after the old one went,
// and a sweep in between had cancelled the job); after that, the job is cancelled.
TEST_F(PodControllerTest, RequeuedGroupJobOutlivesItsPodForTheSweepToo) {
  const std::string uid = NextUid("work-a");
  api_.AddPod("ns", "work-a", {{std::string(bridge::kJobIdLabel), "1"}}, "n1");
  const std::string tag = bridge::EncodeJobTag({.pods = {"ns/work-a"},
                                                .uids = {uid},
                                                .group = "Job/ns/work",
                                                .cluster = "kubernetes",
                                                .scheduler = "slurm-bridge-scheduler"});
  ASSERT_EQ(slurm_.AddJob("RUNNING", tag), 1);
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 1; }));
  slurm_.SetJobState(1, "PENDING");  // requeued
  clock_.Advance(500ms);             // the state poll sees it
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles >= 2; }));
  clock_.Advance(LifecycleOptions{}.confirm_after + 1s);
  ASSERT_TRUE(RunUntil([&] { return !deleted_.empty(); }));
  api_.DeletePod("ns", "work-a");  // its finalizer released, the pod is gone
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(OneSweep());
  EXPECT_TRUE(slurm_.cancels().empty()) << "the requeued job waits for the group's new pods";
  EXPECT_EQ(controller_->stats().orphans_cancelled, 0u);
  // Nothing came back within requeue_grace: the job goes.
  clock_.Advance(LifecycleOptions{}.requeue_grace);
  ASSERT_TRUE(OneSweep());
  EXPECT_TRUE(RunUntil([&] { return !slurm_.cancels().empty(); }));
}

}  // namespace
}  // namespace sb::controllers

namespace sb::controllers {
namespace {

// #46: a busy Slurm holds tens of thousands of other users' jobs. After its one start-up list,
// the sweep costs one GET /jobs/state/ of this bridge's live jobs per interval: no job list, no
// GET /job/{id}, the same requests with 10,000 foreign jobs as with none.
class PodControllerSweepCostTest : public PodControllerTest,
                                   public ::testing::WithParamInterface<int> {};

TEST_P(PodControllerSweepCostTest, OneStartUpListThenOneStateReadPerSweep) {
  const int foreign = GetParam();
  for (int i = 0; i < foreign; ++i) {
    // Other users' jobs, and a few of another cluster's bridge (tagged: kept by the start-up
    // list's filter, never registered).
    const std::string name = "x" + std::to_string(i);
    slurm_.AddJob(i % 2 == 0 ? "RUNNING" : "PENDING",
                  i % 100 == 0 ? TagFor(name, "uid-" + name, "elsewhere") : "");
  }
  // This bridge's jobs, for pods the scheduler has not labelled yet: no state poll asks for them.
  std::vector<std::int64_t> own;
  for (int i = 0; i < 3; ++i) {
    const std::string name = "own" + std::to_string(i);
    const std::string uid = NextUid(name);
    api_.AddPod("ns", name);
    own.push_back(slurm_.AddJob("RUNNING", TagFor(name, uid)));
  }
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().startup_lists == 1; }));
  EXPECT_EQ(controller_->stats().own_jobs, own.size());
  const int lists = WholeLists();
  EXPECT_GE(lists, 1);
  const int states = slurm_.calls("JobStates");
  const std::uint64_t requests = slurm_.requests();
  const std::size_t queries = slurm_.state_queries().size();
  constexpr int kSweeps = 5;
  for (int i = 0; i < kSweeps; ++i) ASSERT_TRUE(OneSweep());
  EXPECT_EQ(controller_->stats().sweeps, static_cast<std::uint64_t>(kSweeps));
  EXPECT_EQ(WholeLists(), lists) << "a job list in steady state";
  EXPECT_EQ(slurm_.calls("JobStates") - states, kSweeps);
  EXPECT_EQ(slurm_.requests() - requests, static_cast<std::uint64_t>(kSweeps));
  EXPECT_EQ(slurm_.calls("GetJob"), 0);
  for (std::size_t q = queries; q < slurm_.state_queries().size(); ++q) {
    EXPECT_EQ(slurm_.state_queries()[q], own) << "exactly this bridge's jobs";
  }
  EXPECT_EQ(controller_->stats().sweep_state_reads, static_cast<std::uint64_t>(kSweeps));
  EXPECT_EQ(controller_->stats().sweep_job_reads, 0u);
  EXPECT_TRUE(slurm_.cancels().empty());
}

INSTANTIATE_TEST_SUITE_P(ForeignJobs, PodControllerSweepCostTest, ::testing::Values(0, 10000));

// #46: no job of this bridge, no state read at all.
TEST_F(PodControllerTest, SweepWithoutJobsOfThisBridgeReadsNothing) {
  for (int i = 0; i < 20; ++i) slurm_.AddJob("RUNNING", "");
  Start();
  const int lists = WholeLists();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(OneSweep());
  EXPECT_EQ(WholeLists(), lists);
  EXPECT_EQ(slurm_.calls("JobStates"), 0);
  EXPECT_EQ(controller_->stats().own_jobs, 0u);
}

// #46: an orphan of the start-up list (its pod never existed here) is cancelled by the sweep,
// after a GET of the job (its tag may have changed since the list), with no list of its own.
TEST_F(PodControllerTest, OrphanOfTheStartUpListIsCancelled) {
  const std::int64_t orphan = slurm_.AddJob("RUNNING", TagFor("gone", "uid-gone"));
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().startup_lists == 1; }));
  const int lists = WholeLists();
  ASSERT_TRUE(OneSweep());
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{orphan}));
  EXPECT_EQ(controller_->stats().orphans_cancelled, 1u);
  EXPECT_EQ(controller_->stats().sweep_job_reads, 1u) << "the orphan's GET before its cancel";
  EXPECT_EQ(controller_->stats().own_jobs, 0u) << "a cancelled job leaves the register";
  ASSERT_TRUE(OneSweep());
  EXPECT_EQ(slurm_.cancels().size(), 1u);
  EXPECT_EQ(WholeLists(), lists);
}

// #46: a job the sweep learned from a pod's label (after the start-up list), whose pod is gone
// without its reconcile hearing of it (the label was taken off first, so the pod's deletion
// names no job), is cancelled by the sweep; no job list is read for it.
TEST_F(PodControllerTest, JobLearnedFromALabelIsSweptOnceItsPodsAreGone) {
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().startup_lists == 1; }));
  const int lists = WholeLists();
  const std::string uid = NextUid("p");
  const std::int64_t job = slurm_.AddJob("RUNNING", TagFor("p", uid));
  api_.AddPod("ns", "p", {{std::string(bridge::kJobIdLabel), std::to_string(job)}});
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().own_jobs == 1; }))
      << "registered by the reconcile's GET /job/" << job;
  const std::uint64_t passes = controller_->stats().reconciles;
  ASSERT_TRUE(api_.PatchPod("ns", "p", R"({"metadata":{"labels":null}})") > 0);
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().reconciles > passes; }));
  ASSERT_TRUE(OneSweep());
  EXPECT_TRUE(slurm_.cancels().empty()) << "its pod still exists";
  api_.DeletePod("ns", "p");
  for (int i = 0; i < 5 && slurm_.cancels().empty(); ++i) ASSERT_TRUE(OneSweep());
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{job}));
  EXPECT_EQ(controller_->stats().orphans_cancelled, 1u) << "the sweep's doing";
  EXPECT_EQ(controller_->stats().jobs_cancelled, 0u) << "not the job's reconcile";
  EXPECT_EQ(WholeLists(), lists);
}

// #46: a bound pod labelled with a job the sweep does not know (submitted after the start-up
// list; its reconcile's reads fail for a while) is not reported as without a job: while the job
// cannot be read, the pod is not judged; then the job is read once (GET /job/{id}, by the
// reconcile or the sweep), registered as this bridge's, and never read again.
TEST_F(PodControllerTest, BoundPodOfAnUnknownJobIsReadOnceAndNotReported) {
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().startup_lists == 1; }));
  const int lists = WholeLists();
  const std::string uid = NextUid("b");
  const std::int64_t job = slurm_.AddJob("RUNNING", TagFor("b", uid));
  constexpr int kFailures = 6;
  slurm_.FailNext("GetJob", Error{.code = ErrorCode::kUnavailable, .message = "slurmrestd away"},
                  kFailures);
  api_.AddPod("ns", "b", {{std::string(bridge::kJobIdLabel), std::to_string(job)}}, "n1");
  // The pod's watch event has come (its job's first read, which fails): before that, sweeps
  // know of no pod and are skipped at once (CI: 60 of them in 2 ms, then no job known).
  ASSERT_TRUE(RunUntil([&] { return slurm_.calls("GetJob") >= 1; }));
  for (int i = 0; i < 60 && controller_->stats().own_jobs == 0; ++i) ASSERT_TRUE(OneSweep());
  ASSERT_EQ(controller_->stats().own_jobs, 1u);
  EXPECT_GE(controller_->stats().sweep_job_reads, 1u) << "the sweep asked too while it failed";
  // Past the confirmation period of a stray, with sweeps all along.
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(OneSweep());
  EXPECT_EQ(slurm_.calls("GetJob"), kFailures + 1) << "read once it could be";
  EXPECT_EQ(EventsWith("NoSlurmJob"), 0);
  EXPECT_TRUE(deleted_.empty());
  EXPECT_TRUE(slurm_.cancels().empty());
  EXPECT_EQ(WholeLists(), lists);
  ASSERT_FALSE(slurm_.state_queries().empty());
  EXPECT_NE(std::ranges::find(slurm_.state_queries().back(), job),
            slurm_.state_queries().back().end());
}

// #46: a start-up list that fails is tried again once per sweep interval until it succeeds;
// the sweeps meanwhile know no job (nothing cancelled), the one after it finds the orphan, and
// no list is read after that.
TEST_F(PodControllerTest, FailedStartUpListIsTriedAgain) {
  const std::int64_t orphan = slurm_.AddJob("RUNNING", TagFor("gone", "uid-gone"));
  const Error away{.code = ErrorCode::kUnavailable, .message = "slurmrestd away"};
  slurm_.FailNext("ScanJobs", away, 2);  // where the fake answers ScanJobs itself
  slurm_.FailNext("ListJobsSince", away, 2);
  Start();
  ASSERT_TRUE(RunUntil([&] { return controller_->stats().startup_list_failures >= 1; }));
  for (int i = 0; i < 10 && controller_->stats().startup_lists == 0; ++i) {
    EXPECT_TRUE(slurm_.cancels().empty()) << "no job known before the list";
    ASSERT_TRUE(OneSweep());
  }
  ASSERT_EQ(controller_->stats().startup_lists, 1u);
  EXPECT_GE(controller_->stats().startup_list_failures, 2u);
  EXPECT_EQ(controller_->stats().cluster_name_checks, 1u);
  ASSERT_TRUE(RunUntil([&] { return !slurm_.cancels().empty(); }));
  EXPECT_EQ(slurm_.cancels(), (std::vector<std::int64_t>{orphan}));
  const int lists = WholeLists();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(OneSweep());
  EXPECT_EQ(WholeLists(), lists) << "no list once one succeeded";
}

}  // namespace
}  // namespace sb::controllers
