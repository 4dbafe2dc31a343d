// SPDX-License-Identifier: Apache-2.0
//
// The job list decoded as it arrives (JobListScanner) against the whole-body decoder
// (DecodeJobList) on replies recorded from the real slurmrestd 26.05 (testing/testdata/slurm/),
// fed whole, byte by byte and in random pieces; and on bodies cut short or broken.
#include "slurm/job_list_scanner.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "slurm/codec.h"
#include "testing/testdata.h"

namespace sb::slurm {
namespace {
using sb::testing::ReadTestData;
using JobFilter = std::function<bool(const JobInfo&)>;

std::string Data(const std::string& name) { return ReadTestData("slurm/" + name + ".json"); }

std::string Show(const NoValNumber& n) {
  return fmt::format("{}/{}/{}", n.set, n.infinite, n.number);
}

// Every field, so that two decodes can be compared whole.
std::string Show(const JobInfo& j) {
  return fmt::format(
      "{} {} [{}] {} {} {} {} {} {} {} {} {} {} {} [{}] {} {} {} [{}] {} {} {} {} {} {} {} {} {} "
      "{}",
      j.job_id, j.name, fmt::join(j.job_state, ","), j.state_reason, j.state_description,
      j.partition, j.nodes, j.batch_host, j.user_name, j.user_id, j.account, j.qos, j.admin_comment,
      j.comment, fmt::join(j.flags, ","), j.tres_per_node, j.tres_req_str, j.tres_alloc_str,
      fmt::join(j.gres_detail, ","), j.node_count, j.cpus, Show(j.time_limit), Show(j.submit_time),
      Show(j.start_time), Show(j.end_time), Show(j.priority), Show(j.preempt_time), j.het_job_id,
      j.het_job_offset);
}

std::string Show(const Result<Reply<JobList>>& r) {
  if (!r) return "error: " + r.error().ToString();
  std::string out = fmt::format("unchanged={} last_update={} jobs={}\n", r->value.unchanged,
                                r->value.last_update, r->value.jobs.size());
  for (const JobInfo& j : r->value.jobs) out += Show(j) + "\n";
  for (const ErrorDetail& e : r->errors) {
    out += fmt::format("error {} {} {} {}\n", e.number, e.error, e.description, e.source);
  }
  for (const std::string& w : r->warnings) out += "warning " + w + "\n";
  return out;
}

// Feeds `body` in pieces of the given sizes (the last one repeated), then finishes.
Result<Reply<JobList>> Scan(std::string_view body, const std::vector<std::size_t>& sizes,
                            JobFilter keep = nullptr) {
  JobListScanner scan(std::move(keep));
  for (std::size_t k = 0; !body.empty(); ++k) {
    const std::size_t n = std::min(body.size(), sizes[std::min(k, sizes.size() - 1)]);
    if (!scan.Feed(body.substr(0, n))) break;
    body.remove_prefix(n);
  }
  return scan.Finish();
}

std::vector<std::size_t> RandomSizes(std::size_t total, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> size(1, 300);
  std::vector<std::size_t> out;
  for (std::size_t sum = 0; sum < total; sum += out.back()) out.push_back(size(rng));
  return out;
}

// The DOM decode, less the jobs `keep` refuses.
Result<Reply<JobList>> Filtered(std::string_view body, const JobFilter& keep) {
  Result<Reply<JobList>> r = DecodeJobList(body);
  if (r && keep) std::erase_if(r->value.jobs, [&](const JobInfo& j) { return !keep(j); });
  return r;
}

const std::vector<std::string> kRecorded = {
    "jobs",        "jobs_unchanged",      "jobs_bad_token",      "job_het_running",
    "job_pending", "job_running_v0.0.42", "job_running_v0.0.45", "job_unknown"};

TEST(JobListScanner, RecordedRepliesInAnyPiecesDecodeAsTheWholeBody) {
  for (const std::string& name : kRecorded) {
    SCOPED_TRACE(name);
    const std::string body = Data(name);
    const std::string want = Show(DecodeJobList(body));
    ASSERT_EQ(want.rfind("error", 0), std::string::npos) << want;
    EXPECT_EQ(Show(Scan(body, {body.size()})), want) << "whole";
    EXPECT_EQ(Show(Scan(body, {1})), want) << "byte by byte";
    for (unsigned seed = 1; seed <= 20; ++seed) {
      EXPECT_EQ(Show(Scan(body, RandomSizes(body.size(), seed))), want) << "seed " << seed;
    }
  }
  // The recorded list has jobs; the unchanged reply none, and says so.
  auto jobs = Scan(Data("jobs"), {7});
  ASSERT_TRUE(jobs.has_value());
  EXPECT_EQ(jobs->value.jobs.size(), 2u);
  EXPECT_FALSE(jobs->value.unchanged);
  EXPECT_GT(jobs->value.last_update, 0);
  auto same = Scan(Data("jobs_unchanged"), {7});
  ASSERT_TRUE(same.has_value());
  EXPECT_TRUE(same->value.unchanged);
  EXPECT_EQ(same->value.last_update, 0);
  EXPECT_TRUE(same->warnings.empty()) << "the 'No job changes since' warning is consumed";
  // errors[] beside the (empty) list come back as in DecodeJobList: the caller classifies them.
  auto refused = Scan(Data("jobs_bad_token"), {5});
  ASSERT_TRUE(refused.has_value());
  ASSERT_EQ(refused->errors.size(), 1u);
  EXPECT_EQ(refused->errors[0].number, 1007);
}

TEST(JobListScanner, KeepsOnlyWhatTheFilterKeeps) {
  const JobFilter leaders = [](const JobInfo& j) { return j.het_job_offset == 0; };
  const JobFilter none = [](const JobInfo&) { return false; };
  for (const std::string& name : {std::string("jobs"), std::string("job_het_running")}) {
    SCOPED_TRACE(name);
    const std::string body = Data(name);
    for (const JobFilter& keep : {leaders, none}) {
      const std::string want = Show(Filtered(body, keep));
      EXPECT_EQ(Show(Scan(body, {body.size()}, keep)), want);
      EXPECT_EQ(Show(Scan(body, {1}, keep)), want);
      EXPECT_EQ(Show(Scan(body, RandomSizes(body.size(), 3), keep)), want);
    }
  }
  auto het = Scan(Data("job_het_running"), {64}, leaders);
  ASSERT_TRUE(het.has_value());
  ASSERT_EQ(het->value.jobs.size(), 1u);
  EXPECT_EQ(het->value.jobs[0].het_job_offset, 0);
  // A list whose every job was filtered out did change: not "unchanged", its time kept.
  auto filtered_out = Scan(Data("jobs"), {64}, none);
  ASSERT_TRUE(filtered_out.has_value());
  EXPECT_TRUE(filtered_out->value.jobs.empty());
  EXPECT_FALSE(filtered_out->value.unchanged);
  EXPECT_GT(filtered_out->value.last_update, 0);
}

// Strings holding quotes, backslashes and brackets, and members in another order, cut at every
// place: the element boundaries are found by JSON's rules, not by looking for brackets.
TEST(JobListScanner, StringsEscapesAndNestingCutAnywhere) {
  const std::string body =
      R"( { "meta" : {"a":[1,{"b":"]}"}]}, "errors":[], "jobs" : [ )"
      R"({"job_id":1,"name":"a\"]},{\\","admin_comment":"{\"pods\":[\"d/p]\"]}"} , )"
      R"({"job_id":2,"name":"\\","flags":["X","Y"],"x":{"y":[[],{}]}},)"
      R"({"job_id":3,"name":"\u005d\"","last":[true,false,null,-1.5e3]}] ,)"
      R"( "warnings":[{"description":"w","source":"s"}],"last_update":{"set":true,"number":9}} )"
      "\n";
  const std::string want = Show(DecodeJobList(body));
  ASSERT_EQ(want.rfind("error", 0), std::string::npos) << want;
  ASSERT_NE(want.find("jobs=3"), std::string::npos) << want;
  for (std::size_t cut = 0; cut <= body.size(); ++cut) {
    JobListScanner scan(nullptr);
    ASSERT_TRUE(scan.Feed(std::string_view(body).substr(0, cut))) << cut;
    ASSERT_TRUE(scan.Feed(std::string_view(body).substr(cut))) << cut;
    EXPECT_EQ(Show(scan.Finish()), want) << "cut at " << cut;
  }
}

TEST(JobListScanner, BrokenBodiesAreErrorsNeverCrashes) {
  struct Case {
    std::string name;
    std::string body;
    std::string why;  // in the message
  };
  const std::vector<Case> cases = {
      {"empty", "", "empty reply"},
      {"white space", "  \n", "ends before"},
      {"not an object", "[]", "not a JSON object"},
      {"cut in an element", R"({"jobs":[{"job_id":1,)", "ends before"},
      {"cut after the array", R"({"jobs":[{"job_id":1}])", "ends before"},
      {"cut in a string", R"({"jobs":[{"name":"a\")", "ends before"},
      {"bad JSON in an element", R"({"jobs":[{"job_id":1,}]})", "malformed reply"},
      {"element not an object", R"({"jobs":[1]})", "an entry of \"jobs\" is not an object"},
      {"mismatched brackets", R"({"jobs":[{"a":[}]}]})", "malformed reply"},
      {"jobs an object", R"({"jobs":{"job_id":1}})", "\"jobs\" is not an array"},
      {"jobs a string", R"({"jobs":"x"})", "\"jobs\" is not an array"},
      {"trailing comma in jobs", R"({"jobs":[{},]})", "not an object"},
      {"no comma between elements", R"({"jobs":[{} {}]})", "expected ','"},
      {"trailing comma in the object", R"({"jobs":[],})", "expected a key"},
      {"no colon", R"({"jobs" []})", "expected ':'"},
      {"text after the object", R"({"jobs":[]} x)", "text after the JSON object"},
      {"bad other member", R"({"jobs":[],"meta":{"a":}})", "malformed reply"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (std::size_t piece : {c.body.size() + 1, std::size_t{1}}) {
      auto r = Scan(c.body, {piece});
      ASSERT_FALSE(r.has_value()) << Show(r);
      EXPECT_EQ(r.error().code, ErrorCode::kInternal);
      EXPECT_NE(r.error().message.find("malformed reply from slurmrestd"), std::string::npos)
          << r.error().message;
      EXPECT_NE(r.error().message.find(c.why), std::string::npos) << r.error().message;
    }
  }
  // "jobs": null is no jobs, as in DecodeJobList.
  auto null_jobs = Scan(R"({"jobs":null,"last_update":{"set":true,"number":5}})", {3});
  ASSERT_TRUE(null_jobs.has_value()) << null_jobs.error().ToString();
  EXPECT_TRUE(null_jobs->value.jobs.empty());
  EXPECT_EQ(null_jobs->value.last_update, 5);
  // The recorded list cut anywhere before its end is an error.
  const std::string jobs = Data("jobs");
  const std::size_t end = jobs.find_last_of('}');
  for (std::size_t cut = 0; cut <= end; cut += 7) {
    EXPECT_FALSE(Scan(std::string_view(jobs).substr(0, cut), {4096}).has_value()) << cut;
  }
}

// One byte removed or changed anywhere in the recorded list: the scanner accepts exactly what
// DecodeJobList accepts, and decodes it the same.
TEST(JobListScanner, DamagedRecordedListMatchesTheWholeBodyDecoder) {
  const std::string jobs = Data("jobs");
  for (std::size_t at = 0; at < jobs.size(); at += 3) {  // every third byte: about a second
    for (int edit = 0; edit < 2; ++edit) {
      std::string body = jobs;
      if (edit == 0) {
        body.erase(at, 1);
      } else {
        body[at] = body[at] == '"' ? '}' : '"';
      }
      auto want = DecodeJobList(body);
      auto got = Scan(body, {997});
      ASSERT_EQ(got.has_value(), want.has_value())
          << "edit " << edit << " at " << at << ": " << Show(got) << " vs " << Show(want);
      if (want) {
        EXPECT_EQ(Show(got), Show(want)) << "edit " << edit << " at " << at;
      }
    }
  }
}

TEST(JobListScanner, LimitsAreErrors) {
  const std::string body = Data("jobs");
  JobListScanner small(nullptr, /*body_limit=*/body.size() - 1);
  bool fed = true;
  for (std::size_t at = 0; fed && at < body.size(); at += 1000) {
    fed = small.Feed(std::string_view(body).substr(at, 1000));
  }
  EXPECT_FALSE(fed);
  auto over = small.Finish();
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, ErrorCode::kInternal);
  EXPECT_NE(over.error().message.find("over the size limit"), std::string::npos);

  JobListScanner exact(nullptr, body.size());
  EXPECT_TRUE(exact.Feed(body));
  EXPECT_TRUE(exact.Finish().has_value());

  JobListScanner rest(nullptr, std::size_t{1} << 30, /*rest_limit=*/100);
  EXPECT_FALSE(rest.Feed(body)) << "meta alone is over 100 bytes";
  auto big = rest.Finish();
  ASSERT_FALSE(big.has_value());
  EXPECT_NE(big.error().message.find("beside \"jobs\""), std::string::npos);
}

// The scanner holds the unfinished element and the small members, never the list: fed a list of
// 400 jobs (about 4 MB) in 64 KiB pieces, it never holds more than one job and the rest.
TEST(JobListScanner, HoldsOneElementNotTheList) {
  boost::json::object one = boost::json::parse(Data("job_running_v0.0.44")).as_object();
  const std::string job = boost::json::serialize(one.at("jobs").at(0));
  one["jobs"] = boost::json::array();
  std::string body = boost::json::serialize(one);
  const std::size_t rest_bytes = body.size();
  std::string jobs;
  for (int i = 0; i < 400; ++i) jobs += (i > 0 ? "," : "") + job;
  body.insert(body.find("\"jobs\":[") + 8, jobs);

  int kept = 0;
  JobListScanner scan([&](const JobInfo&) { return ++kept % 100 == 0; });
  std::size_t most = 0;
  for (std::size_t at = 0; at < body.size(); at += 64 * 1024) {
    ASSERT_TRUE(scan.Feed(std::string_view(body).substr(at, 64 * 1024)));
    most = std::max(most, scan.buffered());
  }
  EXPECT_LE(most, job.size() + rest_bytes);
  EXPECT_GT(body.size(), 40 * most);
  auto r = scan.Finish();
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->value.jobs.size(), 4u);
  EXPECT_EQ(kept, 400);
}

TEST(JobListScanner, RestartReadsTheBodyAgain) {
  const std::string body = Data("jobs");
  JobListScanner scan(nullptr);
  ASSERT_TRUE(scan.Feed(std::string_view(body).substr(0, body.size() / 2)));
  scan.Restart();
  EXPECT_EQ(scan.entries(), 0u);
  ASSERT_TRUE(scan.Feed(body));
  EXPECT_EQ(scan.entries(), 2u);
  EXPECT_EQ(Show(scan.Finish()), Show(DecodeJobList(body)));
  // A failed body too.
  EXPECT_FALSE(scan.Feed("]"));
  scan.Restart();
  ASSERT_TRUE(scan.Feed(body));
  EXPECT_EQ(Show(scan.Finish()), Show(DecodeJobList(body)));
}

}  // namespace
}  // namespace sb::slurm
