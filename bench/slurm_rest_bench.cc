// SPDX-License-Identifier: Apache-2.0
//
// Requests per second against the real slurmrestd of a running test environment, with this
// client and with curl doing the same requests in the same run (the baseline), sequential and
// concurrent. The request is GET /slurm/v0.0.44/job/{id} of one held job.
//
// Usage: SB_TESTENV=<env file> slurm_rest_bench [requests] [concurrency]
// (scripts/bench-slurm.sh starts an environment and runs it.)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "slurm/client.h"
#include "testing/run.h"
#include "testing/testenv.h"

namespace {
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// n requests by `workers` coroutines sharing a counter; returns failures.
boost::asio::awaitable<int> Worker(sb::slurm::Client* client, std::int64_t job_id, int* left,
                                   int* failures) {
  while (*left > 0) {
    --*left;
    auto r = co_await client->GetJob(job_id);
    if (!r) {
      ++*failures;
    }
  }
  co_return 0;
}

double RunOurs(boost::asio::io_context& io, sb::slurm::Client& client, std::int64_t job_id,
               int requests, int workers, int* failures) {
  int left = requests;
  auto t0 = Clock::now();
  for (int w = 0; w < workers; ++w) {
    boost::asio::co_spawn(io, Worker(&client, job_id, &left, failures), boost::asio::detached);
  }
  io.restart();
  io.run();
  return Seconds(t0, Clock::now());
}

double RunCurl(const std::string& config, int workers) {
  std::string cmd = "curl -s --no-progress-meter -K " + config;
  if (workers > 1) {
    cmd += " --parallel --parallel-max " + std::to_string(workers);
  }
  auto t0 = Clock::now();
  int rc = std::system(cmd.c_str());
  double s = Seconds(t0, Clock::now());
  if (rc != 0) {
    std::fprintf(stderr, "curl exited %d\n", rc);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int requests = argc > 1 ? std::atoi(argv[1]) : 2000;
  int concurrency = argc > 2 ? std::atoi(argv[2]) : 8;
  std::string why;
  auto env = sb::testing::TestEnv::Load(&why);
  if (!env) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 2;
  }
  boost::asio::io_context io;
  auto client = sb::slurm::MakeClient(
      io.get_executor(),
      {.url = env->Get("SLURM_REST_URL"), .version = sb::slurm::ApiVersion::kV0044},
      sb::slurm::MakeFileTokenSource(env->Get("SLURM_JWT_FILE")));
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().ToString().c_str());
    return 1;
  }
  sb::slurm::JobDescription job;
  job.name = "bench";
  job.partition = env->Get("SLURM_PARTITION");
  job.flags = {"EXTERNAL_JOB"};
  job.current_working_directory = "/tmp";
  job.nodes = "1";
  job.hold = true;
  auto submitted = sb::testing::RunSync(io, (*client)->SubmitJob(job));
  if (!submitted) {
    std::fprintf(stderr, "%s\n", submitted.error().ToString().c_str());
    return 1;
  }
  const std::int64_t id = submitted->job_id;

  // curl's config: the token in a header line (not on the command line), one URL per request.
  std::string config = "/tmp/sb-slurm-rest-bench-" + std::to_string(id) + ".curl";
  {
    std::ofstream out(config);
    out << "header = \"X-SLURM-USER-TOKEN: " << env->ReadFile("SLURM_JWT_FILE") << "\"\n";
    std::string url = env->Get("SLURM_REST_URL") + "/slurm/v0.0.44/job/" + std::to_string(id);
    for (int i = 0; i < requests; ++i) {
      out << "url = \"" << url << "\"\noutput = \"/dev/null\"\n";
    }
  }
  int failures = 0;
  RunOurs(io, **client, id, 50, 1, &failures);  // warm-up: connection, version
  double ours_seq = RunOurs(io, **client, id, requests, 1, &failures);
  double curl_seq = RunCurl(config, 1);
  double ours_par = RunOurs(io, **client, id, requests, concurrency, &failures);
  double curl_par = RunCurl(config, concurrency);
  std::remove(config.c_str());
  (void)sb::testing::RunSync(io, (*client)->CancelJob(id, {}));

  std::printf("GET /slurm/v0.0.44/job/{id}, %d requests, real slurmrestd on loopback\n", requests);
  std::printf("%-28s %10s %10s %12s\n", "", "req/s", "curl req/s", "ours/curl");
  std::printf("%-28s %10.0f %10.0f %12.2f\n", "sequential", requests / ours_seq,
              requests / curl_seq, curl_seq / ours_seq);
  std::printf("%-28s %10.0f %10.0f %12.2f\n",
              ("concurrent (" + std::to_string(concurrency) + ")").c_str(), requests / ours_par,
              requests / curl_par, curl_par / ours_par);
  std::printf("connections opened by the client: %llu, failures: %d\n",
              static_cast<unsigned long long>((*client)->http_stats().connections_opened),
              failures);
  return failures == 0 ? 0 : 1;
}
