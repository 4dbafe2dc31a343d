// SPDX-License-Identifier: Apache-2.0
//
// Decode cost of slurmrestd's largest replies: GET /jobs/ and GET /jobs/state/ with 10,000 jobs,
// built from a job recorded from the real slurmrestd 26.05 (testing/testdata/slurm/). Reports
// the time per job (counter per_job, in seconds: "3.1u" is 3.1 microseconds) and the reply size.
//
// Then, after the benchmarks, a table: GET /jobs/ of 2,000, 10,000 and 50,000 jobs decoded whole
// (DecodeJobList, the DOM) against JobListScanner keeping 1 % of the jobs, fed in 64 KiB pieces
// as net::HttpClient::Stream hands them on: the CPU time per list (median of runs taken in turns)
// and the peak of bytes held during the decode. The peak is counted by this binary's operator
// new/delete (malloc_usable_size of each block: every allocation of the decoders, simdjson's parser
// included, goes through them), over what was held before; each decode runs on a thread of its
// own, so that the thread-local simdjson parser starts empty and its buffers are counted. The
// body itself is left out of both; the whole-body path also holds it (net::HttpClient::Send
// reads it into one string), shown as "+ body". Numbers to compare, not to assert.
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/json.hpp>

#include "slurm/codec.h"
#include "slurm/job_list_scanner.h"
#include "testing/testdata.h"

// ---- counting allocator ---------------------------------------------------------------------

namespace {
std::atomic<std::int64_t> g_live{0};  // bytes held through operator new
std::atomic<std::int64_t> g_peak{0};  // the most of g_live since ResetPeak()

void* Counted(void* p) {
  if (p == nullptr) return nullptr;
  const auto n = static_cast<std::int64_t>(malloc_usable_size(p));
  const std::int64_t live = g_live.fetch_add(n, std::memory_order_relaxed) + n;
  std::int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return p;
}

void Uncounted(void* p) {
  if (p == nullptr) return;
  g_live.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}

void* Allocate(std::size_t n, std::size_t align = 0) {
  void* p =
      align <= alignof(std::max_align_t)
          ? std::malloc(n == 0 ? 1 : n)
          : std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align);
  return Counted(p);
}
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = Allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return Allocate(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return Allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = Allocate(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return Allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return Allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { Uncounted(p); }
void operator delete[](void* p) noexcept { Uncounted(p); }
void operator delete(void* p, std::size_t) noexcept { Uncounted(p); }
void operator delete[](void* p, std::size_t) noexcept { Uncounted(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { Uncounted(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { Uncounted(p); }
void operator delete(void* p, std::align_val_t) noexcept { Uncounted(p); }
void operator delete[](void* p, std::align_val_t) noexcept { Uncounted(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { Uncounted(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { Uncounted(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { Uncounted(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { Uncounted(p); }

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

// ---- whole body against the scanner -----------------------------------------------------------

bool KeepOnePercent(const sb::slurm::JobInfo& j) { return j.job_id % 100 == 0; }

// The list decoded by JobListScanner from 64 KiB pieces, copied into a buffer of that size first
// as HttpClient::Stream does; the number of jobs kept, or -1.
std::int64_t Scan(const std::string& body) {
  sb::slurm::JobListScanner scan(KeepOnePercent);
  std::vector<char> chunk(64 * 1024);
  for (std::size_t at = 0; at < body.size(); at += chunk.size()) {
    const std::size_t n = std::min(chunk.size(), body.size() - at);
    std::copy_n(body.data() + at, n, chunk.data());
    if (!scan.Feed(std::string_view(chunk.data(), n))) break;
  }
  auto r = scan.Finish();
  return r ? static_cast<std::int64_t>(r->value.jobs.size()) : -1;
}

// The list decoded whole, then filtered as the client's ScanJobs did before it streamed.
std::int64_t Dom(const std::string& body) {
  auto r = sb::slurm::DecodeJobList(body);
  if (!r) return -1;
  std::erase_if(r->value.jobs, [](const sb::slurm::JobInfo& j) { return !KeepOnePercent(j); });
  return static_cast<std::int64_t>(r->value.jobs.size());
}

// CPU time of this thread, in ms: the machines these run on are shared, and wall time there
// measures the neighbours too.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Measured {
  std::vector<double> ms;  // CPU time per list, one per run
  std::int64_t peak = 0;   // bytes held at the most, over what was held before
  std::int64_t kept = -1;  // jobs kept

  double Median() {
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

// Peak bytes of one decode, on a fresh thread: its simdjson parser starts empty.
void MeasurePeak(std::int64_t (*decode)(const std::string&), const std::string& body, Measured& m) {
  std::thread([&] {
    const std::int64_t before = g_live.load();
    g_peak.store(before);
    m.kept = decode(body);
    m.peak = g_peak.load() - before;
  }).join();
}

void CompareWholeBodyAndScanner() {
  std::printf(
      "\nGET /jobs/ decoded whole (DecodeJobList, then filtered) vs JobListScanner keeping "
      "1%%, 64 KiB pieces; CPU ms per list (median of runs taken in turns), peak MB held\n");
  std::printf("%7s %9s | %9s %11s %13s | %9s %11s %5s | %10s %11s %11s\n", "jobs", "body_MB",
              "whole_ms", "whole_MB", "whole+body_MB", "scan_ms", "scan_MB", "kept", "time_ratio",
              "mem_ratio", "+body_ratio");
  for (int n : {2000, 10000, 50000}) {
    const std::string body = JobsReply(n);
    Measured whole;
    Measured scan;
    MeasurePeak(Dom, body, whole);
    MeasurePeak(Scan, body, scan);
    for (int run = 0; run < (n >= 50000 ? 3 : 7); ++run) {  // in turns: both see the same load
      double t0 = ThreadCpuMs();
      benchmark::DoNotOptimize(Dom(body));
      double t1 = ThreadCpuMs();
      benchmark::DoNotOptimize(Scan(body));
      whole.ms.push_back(t1 - t0);
      scan.ms.push_back(ThreadCpuMs() - t1);
    }
    const double mb = 1e6;
    const auto body_bytes = static_cast<double>(body.size());
    const double whole_ms = whole.Median();
    const double scan_ms = scan.Median();
    std::printf("%7d %9.1f | %9.1f %11.1f %13.1f | %9.1f %11.3f %5lld | %10.2f %11.4f %11.4f\n", n,
                body_bytes / mb, whole_ms, static_cast<double>(whole.peak) / mb,
                (static_cast<double>(whole.peak) + body_bytes) / mb, scan_ms,
                static_cast<double>(scan.peak) / mb, static_cast<long long>(scan.kept),
                scan_ms / whole_ms,
                static_cast<double>(scan.peak) / static_cast<double>(whole.peak),
                static_cast<double>(scan.peak) / (static_cast<double>(whole.peak) + body_bytes));
    if (scan.kept != whole.kept) {
      std::printf("  the two kept different jobs: %lld vs %lld\n",
                  static_cast<long long>(scan.kept), static_cast<long long>(whole.kept));
    }
  }
  std::printf(
      "ratio = scanner / whole body (time: CPU per list; memory: peak bytes held, without "
      "the body; +body: with the body the whole-body path also holds)\n");
}

void BM_ScanJobList(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string body = JobsReply(n);
  for (auto _ : state) {
    if (Scan(body) != n / 100) {
      state.SkipWithError("scan failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
  state.counters["per_job"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["reply_MB"] = static_cast<double>(body.size()) / 1e6;
}
BENCHMARK(BM_ScanJobList)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  CompareWholeBodyAndScanner();
  return 0;
}
