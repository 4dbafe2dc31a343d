// SPDX-License-Identifier: Apache-2.0
//
// `explain` and `jobs` (explain/session.h: ExplainPod, ShowJobs) against the fake apiserver (on
// a thread of its own, as a real one) and an in-memory Slurm (FakeSlurmClient): what they read
// from Slurm (the jobs the pods name, never the whole list), that 10,000 jobs of other users
// change neither that nor their output, and their output.
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "bridge/names.h"
#include "bridge/tag.h"
#include "explain/session.h"
#include "net/http_client.h"
#include "testing/fake_apiserver.h"
#include "testing/fake_slurm_client.h"

namespace sb::explain {
namespace {

using sb::testing::FakeApiServer;
using sb::testing::FakeReply;
using sb::testing::FakeRequest;
using sb::testing::FakeSlurmClient;
using sb::testing::HttpReply;

const std::string kJobLabel(bridge::kJobIdLabel);

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.pod_scheduler_name = std::string(bridge::kDefaultSchedulerName);
    api_.PutNode("n1", R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})");
    slurm_ = std::make_unique<FakeSlurmClient>();
    slurm_->AddNode(slurm::NodeInfo{.name = "n1"});
  }
  void TearDown() override {
    guard_.reset();
    if (thread_.joinable()) {
      server_io_.stop();
      thread_.join();
    }
  }

  // Pod ns/name of the bridge (bound to `node` unless empty, labelled with `job` unless 0).
  void AddPod(const std::string& name, const std::string& node = "", std::int64_t job = 0) {
    std::map<std::string, std::string> labels;
    if (job > 0) labels[kJobLabel] = std::to_string(job);
    api_.AddPod("ns", name, labels, node);
  }
  // The scheduler's message to a pod that waits on `job`.
  void TellWaiting(const std::string& name, std::int64_t job) {
    api_.PatchPod("ns", name,
                  fmt::format(R"({{"status":{{"conditions":[{{"type":"PodScheduled",)"
                              R"("status":"False","reason":"Unschedulable","message":)"
                              R"("waiting for Slurm job {} in partition batch: Priority"}}]}}}})",
                              job));
  }
  // A job of this bridge for `pods` (names in ns, or ns/name), group `group` (default: the
  // first pod's).
  std::int64_t AddOurJob(const std::string& state, const std::vector<std::string>& pods,
                         const std::string& reason = "None", std::string group = "",
                         const std::string& nodes = "") {
    auto key = [](const std::string& p) { return p.find('/') == p.npos ? "ns/" + p : p; };
    bridge::JobTag tag{.group = group.empty() ? "Pod/" + key(pods.front()) : std::move(group),
                       .cluster = "kubernetes",
                       .scheduler = std::string(bridge::kDefaultSchedulerName)};
    for (const std::string& p : pods) {
      tag.pods.push_back(key(p));
      tag.uids.push_back("uid-" + p);
    }
    slurm::JobInfo j;
    j.job_id = slurm_->next_job_id;
    j.job_state = {state};
    j.state_reason = reason;
    j.partition = "batch";
    j.account = "default";
    j.qos = "normal";
    j.user_name = "k8s";
    j.nodes = nodes;
    j.admin_comment = bridge::EncodeJobTag(tag);
    return slurm_->AddJob(std::move(j));
  }
  void AddForeignJobs(int n) {
    for (int i = 0; i < n; ++i) slurm_->AddJob(i % 2 == 0 ? "RUNNING" : "PENDING", "", "n1");
  }

  // Runs one command on a session of its own (as the binary does), with the fake Slurm lent to
  // it; its output, and its status in `status`.
  std::string Run(const std::function<int(Session&, std::ostream&, std::ostream&)>& command,
                  int* status = nullptr) {
    if (!thread_.joinable()) thread_ = std::thread([this] { server_io_.run(); });
    Session s;
    s.namespace_ = "ns";
    auto ep = net::ParseEndpoint(api_.url());
    EXPECT_TRUE(ep);
    s.kube_http = std::move(*net::HttpClient::Create(s.io.get_executor(), *ep, {}));
    s.kube = kube::MakeClient(*s.kube_http, nullptr);
    s.slurm = std::move(slurm_);
    std::ostringstream out;
    std::ostringstream err;
    const int rc = command(s, out, err);
    slurm_.reset(static_cast<FakeSlurmClient*>(s.slurm.release()));
    if (status != nullptr) {
      *status = rc;
    } else {
      EXPECT_EQ(rc, 0) << err.str();
    }
    return out.str() + err.str();
  }
  std::string Explain(const std::string& pod, const std::string& output = "text") {
    ToolOptions o;
    o.output = output;
    return Run([&](Session& s, std::ostream& out, std::ostream& err) {
      return ExplainPod(s, o, pod, out, err);
    });
  }
  std::string Jobs(const std::string& output = "text", bool all_namespaces = false) {
    ToolOptions o;
    o.output = output;
    o.all_namespaces = all_namespaces;
    return Run(
        [&](Session& s, std::ostream& out, std::ostream& err) { return ShowJobs(s, o, out, err); });
  }
  int WholeListReads() const {
    return slurm_->calls("ListJobs") + slurm_->calls("ListJobsSince") + slurm_->calls("ScanJobs");
  }
  bool AskedEveryState() const {
    return std::ranges::any_of(slurm_->state_queries(),
                               [](const std::vector<std::int64_t>& ids) { return ids.empty(); });
  }

  boost::asio::io_context server_io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_{
      server_io_.get_executor()};
  FakeApiServer api_{server_io_};
  std::thread thread_;
  std::unique_ptr<FakeSlurmClient> slurm_;
};

// A waiting pod not labelled yet: its job is the one the scheduler's message names, read alone
// and shown as before (found by its tag for the group).
TEST_F(CommandsTest, ExplainFindsAWaitingPodsJobWithoutTheList) {
  AddPod("p");
  const std::int64_t job = AddOurJob("PENDING", {"p"}, "Priority");
  TellWaiting("p", job);
  AddForeignJobs(10);
  const std::string text = Explain("p");
  EXPECT_EQ(text,
            fmt::format("Pod        ns/p  Pending\n"
                        "           PodScheduled=False: waiting for Slurm job {0} in partition "
                        "batch: Priority\n"
                        "Group      Pod/ns/p (Pod), 1 of 1 pod\n"
                        "             ns/p                                     Pending\n"
                        "Slurm job  {0}  PENDING (Priority)  (found by its tag for the group)\n"
                        "           reason: jobs of higher priority are ahead of it for these "
                        "nodes or this partition\n"
                        "           partition batch  account default  QOS normal  user k8s\n"
                        "           priority -\n"
                        "           expected start: not known yet (Slurm's planner gives none)\n"
                        "Excluded   none of 1 Slurm nodes\n"
                        "Waiting    Slurm to start job {0} (Priority: jobs of higher priority are "
                        "ahead of it for these nodes or this partition)\n",
                        job));
  EXPECT_EQ(WholeListReads(), 0);
  EXPECT_EQ(slurm_->calls("GetJob"), 1);
}

// 10,000 jobs of other users: the same requests, the same screen.
TEST_F(CommandsTest, ExplainCostsTheSameWithForeignJobs) {
  AddPod("p");
  TellWaiting("p", AddOurJob("PENDING", {"p"}, "Priority"));
  AddPod("q", "n1", AddOurJob("RUNNING", {"q"}, "None", "", "n1"));
  const std::string p = Explain("p");
  const std::string q = Explain("q", "json");
  const std::uint64_t requests = slurm_->requests();
  AddForeignJobs(10'000);
  EXPECT_EQ(Explain("p"), p);
  EXPECT_EQ(Explain("q", "json"), q);
  EXPECT_EQ(slurm_->requests() - requests, requests);
  EXPECT_EQ(WholeListReads(), 0);
  EXPECT_FALSE(AskedEveryState());
  boost::json::value v = boost::json::parse(q);
  EXPECT_EQ(v.at("slurmJob").at("foundBy").as_string(), "label");
}

// A message naming a job that is not the group's (another's, ended, or gone): no job, as when
// the list held none tagged for the group.
TEST_F(CommandsTest, ExplainTakesANamedJobOnlyWhenItIsTheGroups) {
  AddPod("p");
  AddPod("r");
  AddPod("e");
  const std::int64_t others = AddOurJob("PENDING", {"x"});  // another group's
  TellWaiting("p", others);
  TellWaiting("r", 4242);  // Slurm forgot it
  TellWaiting("e", AddOurJob("CANCELLED", {"e"}));
  for (const char* pod : {"p", "r", "e"}) {
    const std::string json = Explain(pod, "json");
    boost::json::value v = boost::json::parse(json);
    EXPECT_TRUE(v.at("slurmJob").is_null()) << pod << ": " << json;
    EXPECT_EQ(v.at("slurmError").as_string(), "") << json;
  }
  EXPECT_EQ(WholeListReads(), 0);
}

// A gang's pod without a message of its own: its members name the job (a member bound in it).
TEST_F(CommandsTest, ExplainFindsTheGroupsJobThroughItsMembers) {
  api_.Intercept([](const FakeRequest& req) -> std::optional<FakeReply> {
    if (req.target != "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/pg") {
      return std::nullopt;
    }
    return HttpReply(200, R"({"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup",)"
                          R"("metadata":{"name":"pg","namespace":"ns","uid":"pg-uid"},)"
                          R"("spec":{"minMember":2}})");
  });
  const std::int64_t job =
      AddOurJob("RUNNING", {"pg-0", "pg-1"}, "None", "PodGroup/ns/pg", "n[1-2]");
  for (const char* name : {"pg-0", "pg-1"}) {
    api_.AddPod("ns", name, {{std::string(bridge::kPodGroupLabel), "pg"}});
  }
  api_.PatchPod(
      "ns", "pg-1",
      fmt::format(R"({{"metadata":{{"labels":{{"{}":"{}"}}}},"spec":{{"nodeName":"n1"}}}})",
                  kJobLabel, job));
  AddForeignJobs(10);
  const std::string json = Explain("pg-0", "json");
  boost::json::value v = boost::json::parse(json);
  ASSERT_TRUE(v.at("slurmJob").is_object()) << json;
  EXPECT_EQ(v.at("slurmJob").at("id").to_number<std::int64_t>(), job);
  EXPECT_EQ(v.at("slurmJob").at("foundBy").as_string(), "tag");
  EXPECT_EQ(WholeListReads(), 0);
  EXPECT_EQ(slurm_->calls("GetJob"), 1);
}

// `jobs`: the live jobs the pods name, with their pods, as before; an ended job, another's job
// and another namespace's are left out.
TEST_F(CommandsTest, JobsListsThePodsLiveJobs) {
  AddPod("a", "n1", AddOurJob("RUNNING", {"a"}, "None", "", "n1"));
  AddPod("b");
  TellWaiting("b", AddOurJob("PENDING", {"b"}, "Priority"));
  AddPod("c", "n1", AddOurJob("COMPLETED", {"c"}));
  api_.PatchPod("ns", "c", R"({"status":{"phase":"Succeeded"}})");
  AddPod("x", "n1", slurm_->AddJob("RUNNING", "", "n1"));  // labelled with another's job
  api_.AddPod("other", "z");
  AddOurJob("PENDING", {"other/z"});
  AddForeignJobs(10);
  const std::string text = Jobs();
  EXPECT_EQ(text,
            "JOBID  STATE    REASON    PARTITION  GROUP     PODS        START\n"
            "1      RUNNING  -         batch      Pod/ns/a  a(n1)       -\n"
            "2      PENDING  Priority  batch      Pod/ns/b  b(Pending)  -\n");
  EXPECT_EQ(WholeListReads(), 0);
  EXPECT_FALSE(AskedEveryState());
  EXPECT_EQ(slurm_->calls("JobStates"), 1);
  EXPECT_EQ(slurm_->calls("GetJob"), 3) << "the live jobs named: 1, 2 and the other's";
  boost::json::value v = boost::json::parse(Jobs("json"));
  ASSERT_EQ(v.at("jobs").as_array().size(), 2u);
  EXPECT_EQ(boost::json::serialize(v.at("jobs").at(1)),
            R"({"id":2,"state":"PENDING","reason":"Priority","partition":"batch",)"
            R"("group":"Pod/ns/b","pods":[{"pod":"ns/b","where":"Pending"}],"startTime":null})");
}

TEST_F(CommandsTest, JobsCostsTheSameWithForeignJobs) {
  AddPod("a", "n1", AddOurJob("RUNNING", {"a"}, "None", "", "n1"));
  AddPod("b");
  TellWaiting("b", AddOurJob("PENDING", {"b"}, "Priority"));
  const std::string before = Jobs();
  const std::uint64_t requests = slurm_->requests();
  AddForeignJobs(10'000);
  EXPECT_EQ(Jobs(), before);
  EXPECT_EQ(slurm_->requests() - requests, requests);
  EXPECT_EQ(WholeListReads(), 0);
}

// A job whose pods are all gone is named by none: only --all-jobs (a scan of the whole list,
// keeping the bridge's jobs) shows it, as `jobs` showed it before by default.
TEST_F(CommandsTest, JobsWithAllJobsAlsoShowsJobsNoPodNames) {
  AddPod("a", "n1", AddOurJob("RUNNING", {"a"}, "None", "", "n1"));
  AddOurJob("PENDING", {"gone"});
  AddForeignJobs(10);
  EXPECT_EQ(Jobs(),
            "JOBID  STATE    REASON  PARTITION  GROUP     PODS   START\n"
            "1      RUNNING  -       batch      Pod/ns/a  a(n1)  -\n");
  EXPECT_EQ(WholeListReads(), 0);
  ToolOptions o;
  o.all_jobs = true;
  const std::string all = Run(
      [&](Session& s, std::ostream& out, std::ostream& err) { return ShowJobs(s, o, out, err); });
  EXPECT_EQ(all,
            "JOBID  STATE    REASON  PARTITION  GROUP        PODS        START\n"
            "1      RUNNING  -       batch      Pod/ns/a     a(n1)       -\n"
            "2      PENDING  -       batch      Pod/ns/gone  gone(gone)  -\n");
  EXPECT_EQ(slurm_->calls("ListJobs"), 0);
  EXPECT_GT(WholeListReads(), 0) << "the scan";
}

TEST_F(CommandsTest, JobsWithoutPodsAsksSlurmNothing) {
  AddForeignJobs(10);
  EXPECT_EQ(Jobs(), "no live Slurm jobs of this bridge in namespace ns\n");
  EXPECT_EQ(slurm_->requests(), 0u);
}

}  // namespace
}  // namespace sb::explain
