// SPDX-License-Identifier: Apache-2.0
#include "wiring/bridge_jobs.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <set>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bridge/names.h"

namespace sb::wiring {
namespace asio = boost::asio;
namespace {

std::optional<std::int64_t> PositiveNumber(std::string_view s) {
  std::int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end == s.data() || v <= 0) return std::nullopt;
  return v;
}

// What the readers of ReadJobRecords share; it lives in ReadJobRecords' frame, which waits for
// every reader to end.
struct Readers {
  Readers(slurm::Client& c, std::vector<std::int64_t> i, RecordReadOptions o,
          asio::any_io_executor ex)
      : slurm(c), ids(std::move(i)), options(std::move(o)), records(ids.size()), done(ex) {}
  slurm::Client& slurm;
  const std::vector<std::int64_t> ids;
  const RecordReadOptions options;
  std::vector<std::vector<slurm::JobInfo>> records;  // by index of `ids`
  std::size_t next = 0;                              // the next index to read
  std::optional<Error> error;                        // the first failure: no read starts after it
  int running = 0;
  asio::steady_timer done;  // cancelled when the last reader ends
};

// One reader: takes the next id until none is left (or a read failed).
asio::awaitable<void> ReadSome(Readers& r) {
  while (r.next < r.ids.size() && !r.error) {
    const std::size_t i = r.next++;
    Result<std::vector<slurm::JobInfo>> got = co_await r.slurm.GetJobRecords(r.ids[i]);
    if (!got) {
      if (got.error().code != ErrorCode::kNotFound && !r.error) r.error = got.error();
      continue;
    }
    if (r.options.trim) {
      for (slurm::JobInfo& j : *got) r.options.trim(j);
    }
    r.records[i] = std::move(*got);
  }
}

}  // namespace

std::optional<std::int64_t> WaitingJobId(std::string_view message) {
  // The scheduler's WaitingMessage (scheduler/planner.h): "waiting for Slurm job <id> in ...".
  constexpr std::string_view kWaiting = "waiting for Slurm job ";
  if (!message.starts_with(kWaiting)) return std::nullopt;
  message.remove_prefix(kWaiting.size());
  const std::size_t end = message.find(' ');
  if (end == std::string_view::npos || !message.substr(end).starts_with(" in partition ")) {
    return std::nullopt;
  }
  return PositiveNumber(message.substr(0, end));
}

std::optional<std::int64_t> LabelledJobId(const kube::Pod& pod) {
  auto it = pod.metadata.labels.find(std::string(bridge::kJobIdLabel));
  if (it == pod.metadata.labels.end()) return std::nullopt;
  return PositiveNumber(it->second);
}

std::vector<std::int64_t> NamedJobIds(const kube::Pod& pod) {
  std::vector<std::int64_t> ids;
  if (std::optional<std::int64_t> id = LabelledJobId(pod)) ids.push_back(*id);
  const kube::Condition* c = kube::FindCondition(pod.status.conditions, "PodScheduled");
  if (c != nullptr && c->status == "False") {
    if (std::optional<std::int64_t> id = WaitingJobId(c->message)) ids.push_back(*id);
  }
  std::ranges::sort(ids);
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

asio::awaitable<Result<std::map<std::int64_t, std::vector<std::string>>>> ReadJobStates(
    slurm::Client& slurm, std::vector<std::int64_t> ids) {
  std::map<std::int64_t, std::vector<std::string>> states;
  std::ranges::sort(ids);
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids.empty()) co_return states;
  const std::set<std::int64_t> asked(ids.begin(), ids.end());
  Result<std::vector<slurm::JobStateEntry>> got = co_await slurm.JobStates(std::move(ids));
  if (!got) co_return tl::unexpected(got.error());
  for (slurm::JobStateEntry& e : *got) {
    // Only the ids asked for (a heterogeneous job may answer its components as well).
    if (asked.contains(e.job_id)) states[e.job_id] = std::move(e.state);
  }
  co_return states;
}

asio::awaitable<Result<std::vector<slurm::JobInfo>>> ReadJobRecords(slurm::Client& slurm,
                                                                    std::vector<std::int64_t> ids,
                                                                    RecordReadOptions options) {
  std::vector<slurm::JobInfo> out;
  if (ids.empty()) co_return out;
  const auto ex = co_await asio::this_coro::executor;
  const int readers = static_cast<int>(std::min<std::size_t>(
      ids.size(), static_cast<std::size_t>(std::max(1, options.concurrency))));
  Readers r(slurm, std::move(ids), std::move(options), ex);
  r.done.expires_at(asio::steady_timer::time_point::max());
  r.running = readers;
  for (int k = 0; k < readers; ++k) {
    // The completion handler is a plain lambda (no coroutine): it only counts the reader out.
    asio::co_spawn(ex, ReadSome(r), [&r](const std::exception_ptr& e) {
      if (e && !r.error) {
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& what) {
          r.error = Error{ErrorCode::kInternal, std::string("reading Slurm jobs: ") + what.what()};
        } catch (...) {
          r.error = Error{ErrorCode::kInternal, "reading Slurm jobs failed"};
        }
      }
      if (--r.running == 0) r.done.cancel();
    });
  }
  while (r.running > 0) {
    boost::system::error_code ec;
    co_await r.done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (r.error) co_return tl::unexpected(std::move(*r.error));
  for (std::vector<slurm::JobInfo>& records : r.records) {
    std::move(records.begin(), records.end(), std::back_inserter(out));
  }
  co_return out;
}

}  // namespace sb::wiring
