// SPDX-License-Identifier: Apache-2.0
//
// Decode cost of slurmrestd's largest replies: GET /jobs/ and GET /jobs/state/ with 10,000 jobs,
// built from a job recorded from the real slurmrestd 26.05 (testing/testdata/slurm/). Reports
// the time per job (counter per_job, in seconds: "3.1u" is 3.1 microseconds) and the reply size.
#include <cstdint>
#include <string>

#include <benchmark/benchmark.h>
#include <boost/json.hpp>

#include "slurm/codec.h"
#include "testing/testdata.h"

namespace {

// {"jobs":[<the recorded job with ids 1..n>], "errors":[], "warnings":[]}
std::string JobsReply(int n) {
  boost::json::value recorded =
      boost::json::parse(sb::testing::ReadTestData("slurm/job_running_v0.0.44.json"));
  boost::json::object job = recorded.at("jobs").at(0).as_object();
  std::string out = "{\"jobs\":[";
  for (int i = 1; i <= n; ++i) {
    job["job_id"] = i;
    job["name"] = "pod-" + std::to_string(i);
    job["admin_comment"] = "{\"pods\":[\"default/pod-" + std::to_string(i) + "\"]}";
    out += (i > 1 ? "," : "") + boost::json::serialize(job);
  }
  return out + "],\"errors\":[],\"warnings\":[]}";
}

std::string StatesReply(int n) {
  std::string out = "{\"jobs\":[";
  for (int i = 1; i <= n; ++i) {
    out += (i > 1 ? "," : "") + std::string("{\"job_id\":\"") + std::to_string(i) +
           "\",\"state\":[\"" + (i % 3 == 0 ? "PENDING" : "RUNNING") + "\"]}";
  }
  return out + "],\"errors\":[],\"warnings\":[]}";
}

void BM_DecodeJobs(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string body = JobsReply(n);
  for (auto _ : state) {
    auto r = sb::slurm::DecodeJobs(body);
    if (!r || r->value.size() != static_cast<std::size_t>(n)) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(r->value.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
  state.counters["per_job"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["reply_MB"] = static_cast<double>(body.size()) / 1e6;
}
BENCHMARK(BM_DecodeJobs)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_DecodeJobStates(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string body = StatesReply(n);
  for (auto _ : state) {
    auto r = sb::slurm::DecodeJobStates(body);
    if (!r || r->value.size() != static_cast<std::size_t>(n)) {
      state.SkipWithError("decode failed");
      break;
    }
    benchmark::DoNotOptimize(r->value.data());
  }
  state.counters["per_job"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["reply_MB"] = static_cast<double>(body.size()) / 1e6;
}
BENCHMARK(BM_DecodeJobStates)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
