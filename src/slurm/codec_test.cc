// SPDX-License-Identifier: Apache-2.0
//
// Decoding of replies recorded from the real slurmrestd 26.05 (testing/testdata/slurm/, made by
// its record.sh), and encoding of the requests the bridge sends.
#include "slurm/codec.h"

#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "testing/testdata.h"

namespace sb::slurm {
namespace {
using sb::testing::ReadTestData;

std::string Data(const std::string& name) { return ReadTestData("slurm/" + name + ".json"); }

TEST(DecodeJobs, RunningExternalJobInEveryVersion) {
  for (const char* v : {"v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"}) {
    SCOPED_TRACE(v);
    auto r = DecodeJobs(Data(std::string("job_running_") + v));
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    ASSERT_EQ(r->value.size(), 1u);
    const JobInfo& j = r->value[0];
    EXPECT_EQ(j.job_id, 1);
    EXPECT_EQ(j.name, "rec-ext");
    EXPECT_EQ(j.job_state, std::vector<std::string>{"RUNNING"});
    EXPECT_TRUE(j.HasState("RUNNING"));
    EXPECT_EQ(j.partition, "batch");
    EXPECT_EQ(j.nodes, "n1");
    EXPECT_EQ(j.admin_comment, "{\"pods\":[\"default/rec\"]}");
    EXPECT_EQ(j.gres_detail, std::vector<std::string>{"gpu:fake:2(IDX:0-1)"});
    // v0.0.42's flag enum predates external jobs: the flag is dropped there.
    bool external = std::find(j.flags.begin(), j.flags.end(), "EXTERNAL_JOB") != j.flags.end();
    EXPECT_EQ(external, std::string(v) != "v0.0.42");
    EXPECT_EQ(j.time_limit, NoValNumber::Of(60));
    EXPECT_EQ(j.cpus, 2);
    EXPECT_EQ(j.node_count, 1);
    EXPECT_TRUE(r->errors.empty());
  }
}

TEST(DecodeJobs, PendingJobHasAReasonAndNoNodes) {
  auto r = DecodeJobs(Data("job_pending"));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->value.size(), 1u);
  EXPECT_EQ(r->value[0].BaseState(), "PENDING");
  EXPECT_FALSE(r->value[0].state_reason.empty());
  EXPECT_EQ(r->value[0].nodes, "");
}

TEST(DecodeJobs, ListHasEveryJob) {
  auto r = DecodeJobs(Data("jobs"));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->value.size(), 2u);
  EXPECT_EQ(r->value[0].job_id, 1);
  EXPECT_EQ(r->value[1].job_id, 2);
}

TEST(DecodeJobs, UnknownJobCarriesSlurmsError) {
  auto r = DecodeJobs(Data("job_unknown"));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->value.empty());
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_EQ(r->errors[0].number, 2017);
  EXPECT_EQ(r->errors[0].error, "Invalid job id specified");
}

TEST(DecodeJobStates, IdsAreStringsInThisReply) {
  auto r = DecodeJobStates(Data("jobs_state"));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->value.size(), 2u);
  EXPECT_EQ(r->value[0].job_id, 1);
  EXPECT_EQ(r->value[0].state, std::vector<std::string>{"RUNNING"});
  EXPECT_EQ(r->value[1].job_id, 2);
  EXPECT_EQ(r->value[1].state, std::vector<std::string>{"PENDING"});
  auto partial = DecodeJobStates(Data("jobs_state_with_unknown"));
  ASSERT_TRUE(partial.has_value());
  EXPECT_EQ(partial->value.size(), 1u);
}

// Issue #27: a heterogeneous job's id (recorded from 26.05's slurmrestd: record.sh) answers
// every component, in offset order, each with the het job's id and its offset; ordinary jobs
// have neither (0).
TEST(DecodeJobs, HeterogeneousJobAnswersEveryComponent) {
  auto r = DecodeJobs(Data("job_het_running"));
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_EQ(r->value.size(), 2u);
  const JobInfo& leader = r->value[0];
  const JobInfo& workers = r->value[1];
  EXPECT_EQ(leader.het_job_id, leader.job_id);
  EXPECT_EQ(leader.het_job_offset, 0);
  EXPECT_EQ(leader.nodes, "n1");
  EXPECT_EQ(workers.job_id, leader.job_id + 1);
  EXPECT_EQ(workers.het_job_id, leader.job_id);
  EXPECT_EQ(workers.het_job_offset, 1);
  EXPECT_EQ(workers.nodes, "n[2-3]");
  EXPECT_EQ(workers.BaseState(), "RUNNING");
  EXPECT_EQ(workers.gres_detail.size(), 2u);
  auto plain = DecodeJobs(Data("job_running_v0.0.44"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->value[0].het_job_id, 0);
  EXPECT_EQ(plain->value[0].het_job_offset, 0);
  // /jobs/state/ of the het job's id names each component "<id>+<offset>": read as its id.
  auto states = DecodeJobStates(Data("jobs_state_het"));
  ASSERT_TRUE(states.has_value());
  ASSERT_EQ(states->value.size(), 2u);
  EXPECT_EQ(states->value[0].job_id, leader.job_id);
  EXPECT_EQ(states->value[1].job_id, workers.job_id);
  // The submit answers the het job's id.
  auto submitted = DecodeSubmit(Data("submit_het"));
  ASSERT_TRUE(submitted.has_value());
  EXPECT_EQ(submitted->value.job_id, leader.job_id);
}

TEST(DecodeJobStates, TheCommaFormIsNotJson) {
  // slurmrestd answers the spec's CSV form with a plain-text 500; the decoder says so.
  auto r = DecodeJobStates(Data("jobs_state_csv"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInternal);
  EXPECT_NE(r.error().message.find("Unspecified error"), std::string::npos) << r.error().message;
}

TEST(DecodeResources, NodesAndGpuIndices) {
  auto r = DecodeResources(Data("resources_running"));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->value.size(), 1u);
  const NodeAllocation& a = r->value[0];
  EXPECT_EQ(a.node, "n1");
  EXPECT_EQ(a.mem_alloc, 1024);
  EXPECT_EQ(a.cores_per_socket, 8);
  ASSERT_EQ(a.gres.size(), 1u);
  EXPECT_EQ(a.gres[0].name, "gpu");
  EXPECT_EQ(a.gres[0].type, "fake");
  EXPECT_EQ(a.gres[0].count, 2);
  EXPECT_EQ(a.gres[0].index, "0-1");
  auto pending = DecodeResources(Data("resources_pending"));
  ASSERT_TRUE(pending.has_value());
  ASSERT_EQ(pending->errors.size(), 1u);
  EXPECT_EQ(pending->errors[0].number, 2085);
}

TEST(DecodeSubmit, JobIdAndErrors) {
  auto ok = DecodeSubmit(Data("submit_external"));
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->value.job_id, 1);
  EXPECT_TRUE(ok->errors.empty());

  struct Case {
    std::string file;
    int number;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"submit_bad_partition", 2000, "Invalid partition name specified"},
           {"submit_impossible", 2014, "Requested node configuration is not available"}}) {
    SCOPED_TRACE(c.file);
    auto r = DecodeSubmit(Data(c.file));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->value.job_id, 0);
    ASSERT_EQ(r->errors.size(), 1u);
    EXPECT_EQ(r->errors[0].number, c.number);
    EXPECT_EQ(r->errors[0].error, c.error);
  }

  auto wrong_type = DecodeSubmit(Data("submit_wrong_type"));
  ASSERT_TRUE(wrong_type.has_value());
  EXPECT_EQ(wrong_type->value.job_id, 0);
  EXPECT_TRUE(wrong_type->errors.empty());
  ASSERT_EQ(wrong_type->warnings.size(), 1u);
  EXPECT_NE(wrong_type->warnings[0].find("Expected OpenAPI type=integer"), std::string::npos);
}

TEST(DecodeCancel, UnknownJobIsAnErrorInsideA200) {
  auto ok = DecodeCancel(Data("cancel_pending"));
  ASSERT_TRUE(ok.has_value());
  EXPECT_TRUE(ok->errors.empty());
  auto unknown = DecodeCancel(Data("cancel_unknown"));
  ASSERT_TRUE(unknown.has_value());
  ASSERT_EQ(unknown->errors.size(), 1u);
  EXPECT_EQ(unknown->errors[0].number, 2017);
  EXPECT_EQ(unknown->errors[0].error, "Invalid job id specified");
}

TEST(DecodeNodes, StatesReasonsAndGres) {
  auto r = DecodeNodes(Data("nodes"));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->value.size(), 4u);
  const NodeInfo* n2 = nullptr;
  for (const auto& n : r->value) {
    if (n.name == "n2") {
      n2 = &n;
    }
  }
  ASSERT_NE(n2, nullptr);
  EXPECT_TRUE(n2->HasState("DRAIN"));
  EXPECT_EQ(n2->reason, "recorded by record.sh");
  EXPECT_EQ(n2->gres, "gpu:fake:4");
  EXPECT_EQ(n2->cpus, 8);
  EXPECT_EQ(n2->real_memory, 16000);
  EXPECT_EQ(n2->partitions, std::vector<std::string>{"batch"});
  auto unknown = DecodeNodes(Data("node_unknown"));
  ASSERT_TRUE(unknown.has_value());
  EXPECT_TRUE(unknown->value.empty());
  ASSERT_EQ(unknown->errors.size(), 1u);
  EXPECT_EQ(unknown->errors[0].number, 0) << "slurmrestd says 'No error' for an unknown node";
}

// A dynamic external node (POST /new/node/ with State=External, Feature=ext and a GRES count
// with a GresConf), drained by the bridge while a job ran on it, marked in its comment.
TEST(DecodeNodes, ExternalNode) {
  auto r = DecodeNodes(Data("node_external"));
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_EQ(r->value.size(), 1u);
  const NodeInfo& n = r->value[0];
  EXPECT_EQ(n.name, "ext-g3");
  EXPECT_EQ(n.state, (std::vector<std::string>{"MIXED", "EXTERNAL", "DRAIN", "DYNAMIC_NORM"}));
  EXPECT_TRUE(n.HasState("EXTERNAL"));
  EXPECT_EQ(n.reason, "slurm-bridge: test");
  EXPECT_EQ(n.comment, "slurm-bridge: external node of Kubernetes node ext-g3");
  EXPECT_EQ(n.address, "127.0.0.1");
  EXPECT_EQ(n.cpus, 4);
  EXPECT_EQ(n.real_memory, 8000);
  EXPECT_EQ(n.gres, "gpu:2");
  EXPECT_EQ(n.gres_used, "gpu:1");
  EXPECT_EQ(n.features, std::vector<std::string>{"ext"});
  EXPECT_EQ(n.partitions, std::vector<std::string>{"ext"});
  EXPECT_EQ(n.topology, "") << "the test cluster's topology is flat";
}

TEST(DecodePartitionsAndReservations, WhatTheTestClusterHas) {
  auto p = DecodePartitions(Data("partitions"));
  ASSERT_TRUE(p.has_value());
  ASSERT_EQ(p->value.size(), 2u);
  EXPECT_EQ(p->value[0].name, "batch");
  EXPECT_EQ(p->value[0].nodes, "n[1-4]");
  EXPECT_EQ(p->value[0].state, "UP");
  EXPECT_EQ(p->value[0].total_cpus, 32);
  EXPECT_EQ(p->value[0].max_time, (NoValNumber{false, true, 0}));
  EXPECT_EQ(p->value[0].oversubscribe_jobs, 1) << "OverSubscribe=NO";
  EXPECT_FALSE(p->value[0].oversubscribe_force);
  EXPECT_EQ(p->value[1].name, "ext");
  // v0.0.45 (26.05): maximums.oversubscribe always reads {jobs: 0}; the setting is a string.
  for (const auto& [text, jobs, force] :
       std::vector<std::tuple<std::string, int, bool>>{{"NO", 1, false},
                                                       {"EXCLUSIVE", 0, false},
                                                       {"YES:4", 4, false},
                                                       {"YES", 4, false},
                                                       {"FORCE:2", 2, true},
                                                       {"FORCE:x", -1, true},
                                                       {"ODD", -1, false}}) {
    auto v45 = DecodePartitions(
        R"({"partitions":[{"name":"batch","partition":{"exclusive":"NO","oversubscribe":")" + text +
        R"(","state":["UP"]},"maximums":{"oversubscribe":{"jobs":0,"flags":[]}}}],"errors":[]})");
    ASSERT_TRUE(v45.has_value()) << text;
    ASSERT_EQ(v45->value.size(), 1u);
    EXPECT_EQ(v45->value[0].oversubscribe_jobs, jobs) << text;
    EXPECT_EQ(v45->value[0].oversubscribe_force, force) << text;
    EXPECT_EQ(v45->value[0].state, "UP");
  }
  auto r = DecodeReservations(Data("reservations"));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->value.size(), 1u);
  EXPECT_EQ(r->value[0].name, "maint");
  EXPECT_EQ(r->value[0].node_list, "n4");
  EXPECT_EQ(r->value[0].users, std::vector<std::string>{"root"});
  EXPECT_TRUE(r->value[0].end_time.Value().has_value());
}

// /shares (sshare) as slurmrestd 26.05 answered it on the test environment with accounting
// (testenv/up.sh --accounting): users' associations carry their account as "parent".
TEST(DecodeShares, UsersUnderTheirAccountWithTheirFairShareFactor) {
  auto r = DecodeShares(Data("shares"));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const auto& shares = r->value;
  auto k8s = std::ranges::find_if(shares, [](const Share& s) { return s.name == "k8s"; });
  ASSERT_NE(k8s, shares.end());
  EXPECT_TRUE(k8s->user);
  EXPECT_EQ(k8s->account, "default");
  ASSERT_TRUE(k8s->fairshare.has_value());
  EXPECT_DOUBLE_EQ(*k8s->fairshare, 1.0);
  auto account =
      std::ranges::find_if(shares, [](const Share& s) { return s.name == "default" && !s.user; });
  ASSERT_NE(account, shares.end());
  EXPECT_EQ(account->account, "root");
  EXPECT_FALSE(DecodeShares(R"({"shares":{"shares":7}})").has_value()) << "not a list";
  auto none =
      DecodeShares(R"({"shares":{"shares":[{"name":"u","type":["USER"],)"
                   R"("fairshare":{"factor":{"set":false,"infinite":false,"number":0}}}]}})");
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->value[0].fairshare.has_value()) << "an unset factor is none";
}

TEST(DecodePings, PingedIsDerivedWhereV0045DroppedIt) {
  for (const char* v : {"v0.0.42", "v0.0.44", "v0.0.45"}) {
    SCOPED_TRACE(v);
    auto r = DecodePings(Data(std::string("ping_") + v));
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->value.size(), 1u);
    EXPECT_EQ(r->value[0].hostname, "slurmlab");
    EXPECT_EQ(r->value[0].pinged, "UP");
    EXPECT_TRUE(r->value[0].responding);
  }
  auto bad = DecodePings(Data("ping_bad_token"));
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->value[0].pinged, "DOWN");
}

TEST(Decode, MalformedRepliesAreErrorsNotCrashes) {
  for (const char* body :
       {"", "not json", "[]", "{\"jobs\": 7}", "{\"jobs\": [1, 2]}",
        "{\"jobs\": [{\"job_id\":", "Authentication failure", "{\"nodes\": \"n1\"}"}) {
    SCOPED_TRACE(body);
    auto jobs = DecodeJobs(body);
    auto nodes = DecodeNodes(body);
    EXPECT_TRUE(!jobs.has_value() || jobs->value.empty());
    EXPECT_TRUE(!nodes.has_value() || nodes->value.empty());
    if (!jobs) {
      EXPECT_EQ(jobs.error().code, ErrorCode::kInternal);
      EXPECT_NE(jobs.error().message.find("malformed reply"), std::string::npos);
    }
  }
  // Fields of unexpected types read as empty, never crash.
  auto odd = DecodeJobs(R"({"jobs":[{"job_id":"12","job_state":"RUNNING","nodes":5,
      "time_limit":30,"gres_detail":null,"flags":{}}]})");
  ASSERT_TRUE(odd.has_value());
  ASSERT_EQ(odd->value.size(), 1u);
  EXPECT_EQ(odd->value[0].job_id, 12);
  EXPECT_EQ(odd->value[0].job_state, std::vector<std::string>{"RUNNING"});
  EXPECT_EQ(odd->value[0].nodes, "");
  EXPECT_EQ(odd->value[0].time_limit, NoValNumber::Of(30));
}

// Found by review of what fuzz/slurm_codec_fuzz reaches (UBSan: float-cast-overflow): a number
// with a fraction or an exponent outside int64 is clamped, as a uint64 above int64 already was.
TEST(Decode, DoublesBeyondInt64AreClamped) {
  auto r = DecodeJobs(
      R"({"jobs":[{"job_id":1e300,"cpus":-1e300,"node_count":{"set":true,"number":9.3e18},)"
      R"("user_id":-9.2e18}],"errors":[],"warnings":[]})");
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_EQ(r->value.size(), 1u);
  EXPECT_EQ(r->value[0].job_id, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(r->value[0].cpus, std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(r->value[0].node_count, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(r->value[0].user_id, -9200000000000000000);
}

TEST(DecodeOpenApiVersions, ReadsEscapedPaths) {
  auto v = DecodeOpenApiVersions(
      R"({"paths":{"\/slurm\/v0.0.43\/ping\/":{},"\/slurm\/v0.0.44\/ping\/":{},)"
      R"("\/slurm\/v0.0.46\/ping\/":{},"\/util\/v0.0.44\/hostnames":{}}})");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, (std::vector<ApiVersion>{ApiVersion::kV0044, ApiVersion::kV0043}));
  EXPECT_FALSE(DecodeOpenApiVersions("{}").has_value());
  EXPECT_FALSE(DecodeOpenApiVersions("Authentication failure").has_value());
}

TEST(Encode, ExternalJobSubmitHasOnlyWhatIsSet) {
  JobDescription j;
  j.name = "pod-a";
  j.partition = "batch";
  j.flags = {"EXTERNAL_JOB"};
  j.current_working_directory = "/tmp";
  j.nodes = "2";
  j.tasks_per_node = 1;
  j.cpus_per_task = 4;
  j.memory_per_node = NoValNumber::Of(2048);
  j.tres_per_node = "gres/gpu=1";
  j.excluded_nodes = {"n3", "n4"};
  j.shared = {"none"};
  j.admin_comment = R"({"pods":["default/a"]})";
  boost::json::value v = boost::json::parse(EncodeJobSubmit(j));
  const boost::json::object& job = v.at("job").as_object();
  EXPECT_EQ(job.at("name"), "pod-a");
  EXPECT_EQ(job.at("flags"), (boost::json::array{"EXTERNAL_JOB"}));
  EXPECT_EQ(job.at("nodes"), "2");
  EXPECT_EQ(job.at("cpus_per_task"), 4);
  EXPECT_EQ(job.at("memory_per_node"),
            (boost::json::object{{"set", true}, {"infinite", false}, {"number", 2048}}));
  EXPECT_EQ(job.at("excluded_nodes"), (boost::json::array{"n3", "n4"}));
  EXPECT_EQ(job.at("admin_comment"), R"({"pods":["default/a"]})");
  for (const char* absent : {"script", "time_limit", "priority", "account", "required_nodes",
                             "minimum_nodes", "hold", "user_id"}) {
    EXPECT_FALSE(job.contains(absent)) << absent;
  }
  JobDescription update{.comment = "new", .clear = {"excluded_nodes", "licenses"}};
  boost::json::value u = boost::json::parse(EncodeJobDescription(update));
  EXPECT_EQ(u.at("comment"), "new");
  EXPECT_EQ(u.at("excluded_nodes"), boost::json::array{""});
  EXPECT_EQ(u.at("licenses"), "");
  EXPECT_EQ(u.as_object().size(), 3u) << u;
  JobDescription batch;
  batch.script = "#!/bin/sh\nexec sleep infinity\n";
  batch.time_limit = NoValNumber::Infinite();
  boost::json::value b = boost::json::parse(EncodeJobDescription(batch));
  EXPECT_EQ(b.at("script"), "#!/bin/sh\nexec sleep infinity\n");
  EXPECT_EQ(b.at("time_limit").at("infinite"), true);
}

TEST(Encode, HeterogeneousJobSubmitIsAListOfComponents) {
  JobDescription a{.name = "mpi", .nodes = "1", .cpus_per_task = 1};
  JobDescription b{.name = "mpi", .nodes = "3", .cpus_per_task = 4};
  boost::json::value v = boost::json::parse(EncodeHetJobSubmit({a, b}));
  EXPECT_FALSE(v.as_object().contains("job"));
  const boost::json::array& jobs = v.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].at("nodes"), "1");
  EXPECT_EQ(jobs[1].at("nodes"), "3");
  EXPECT_EQ(jobs[1].at("cpus_per_task"), 4);
}

TEST(Encode, NodeUpdateAndNewNode) {
  boost::json::value u =
      boost::json::parse(EncodeNodeUpdate({.state = {"DRAIN"}, .reason = "cordoned"}));
  EXPECT_EQ(u,
            (boost::json::object{{"state", boost::json::array{"DRAIN"}}, {"reason", "cordoned"}}));
  boost::json::value f =
      boost::json::parse(EncodeNodeUpdate({.features = std::vector<std::string>{}}));
  EXPECT_EQ(f, (boost::json::object{{"features", boost::json::array{}}}));
  boost::json::value t = boost::json::parse(
      EncodeNodeUpdate({.comment = "c", .topology_str = std::string("topo-switch:s1")}));
  EXPECT_EQ(t, (boost::json::object{{"comment", "c"}, {"topology_str", "topo-switch:s1"}}));
  EXPECT_EQ(boost::json::parse(EncodeNodeUpdate({.topology_str = std::string()})),
            (boost::json::object{{"topology_str", ""}}));
  EXPECT_EQ(boost::json::parse(EncodeNewNode("NodeName=k1 State=External")),
            (boost::json::object{{"node_conf", "NodeName=k1 State=External"}}));
}

}  // namespace
}  // namespace sb::slurm
