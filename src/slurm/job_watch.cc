// SPDX-License-Identifier: Apache-2.0
#include "slurm/job_watch.h"

#include <algorithm>
#include <set>
#include <utility>

#include <spdlog/spdlog.h>

namespace sb::slurm {

using boost::asio::awaitable;

JobWatch::JobWatch(boost::asio::any_io_executor executor, Client& slurm, async::Clock& clock,
                   JobWatchOptions options)
    : slurm_(slurm),
      clock_(clock),
      options_(options),
      tasks_(std::move(executor), clock, "Slurm job watch") {}

void JobWatch::Subscribe(JobWatchSubscriber* subscriber) {
  if (std::ranges::find(subscribers_, subscriber) == subscribers_.end()) {
    subscribers_.push_back(subscriber);
  }
}

void JobWatch::Unsubscribe(JobWatchSubscriber* subscriber) { std::erase(subscribers_, subscriber); }

awaitable<void> JobWatch::Run() {
  using Duration = async::Clock::Duration;
  const Duration poll = options_.poll_interval;
  const Duration fresh_every = std::min<Duration>(poll, options_.fresh_interval);
  async::Clock::TimePoint last_full = clock_.Now();
  async::Clock::TimePoint last_poll = clock_.Now();
  // Wakes every fresh_every from the last wake-up (a poll's own time is not added to the wait);
  // the wake-ups that have nothing due cost no request.
  async::Clock::TimePoint woke = clock_.Now();
  while (co_await tasks_.Sleep(
      std::max<Duration>(std::chrono::milliseconds(1), fresh_every - (clock_.Now() - woke)))) {
    woke = clock_.Now();
    const bool full = woke - last_full >= poll;
    const bool fresh = last_fresh_ && woke - *last_fresh_ < options_.fresh_window;
    if (!full && (!fresh || woke - last_poll < FreshSpacing())) continue;
    if (full) last_full = woke;
    if (co_await Poll(full)) last_poll = woke;
  }
}

async::Clock::Duration JobWatch::FreshSpacing() const {
  using Duration = async::Clock::Duration;
  Duration spacing =
      std::max<Duration>(options_.fresh_interval, options_.fresh_spacing * last_poll_took_);
  if (options_.fresh_ids_per_interval > 0) {
    const auto per = static_cast<std::size_t>(options_.fresh_ids_per_interval);
    const auto intervals = static_cast<Duration::rep>((last_poll_ids_ + per - 1) / per);
    spacing = std::max<Duration>(spacing, options_.fresh_interval * intervals);
  }
  return spacing;
}

awaitable<bool> JobWatch::Poll(bool full) {
  const JobPollTick tick{.now = clock_.Now(), .full = full, .previous_full = previous_full_};
  if (full) previous_full_ = tick.now;
  // Each subscriber's ids, asked together.
  std::vector<std::pair<JobWatchSubscriber*, JobPollAnswer>> asks;
  std::set<std::int64_t> ids;
  for (JobWatchSubscriber* s : subscribers_) {
    std::vector<std::int64_t> wanted = s->JobsToPoll(tick);
    if (wanted.empty()) continue;
    ids.insert(wanted.begin(), wanted.end());
    asks.emplace_back(s, JobPollAnswer{.ids = std::move(wanted)});
  }
  if (ids.empty()) co_return false;
  const async::Clock::TimePoint asked = clock_.Now();
  Result<std::vector<JobStateEntry>> states =
      co_await slurm_.JobStates(std::vector<std::int64_t>(ids.begin(), ids.end()));
  last_poll_took_ = clock_.Now() - asked;
  last_poll_ids_ = ids.size();
  // A subscriber that left meanwhile gets nothing.
  std::erase_if(asks, [&](const auto& a) {
    return std::ranges::find(subscribers_, a.first) == subscribers_.end();
  });
  if (!states) {
    ++stats_.poll_errors;
    spdlog::warn("reading Slurm job states failed: {}", states.error().ToString());
    if (full) previous_full_.reset();  // the slow ids are due again at the next one
    for (auto& [s, answer] : asks) s->OnJobPollFailed(states.error());
    co_return true;
  }
  ++stats_.polls;
  if (!full) ++stats_.fresh_polls;
  stats_.ids_asked += ids.size();
  std::unordered_map<std::int64_t, const std::string*> by_id;
  for (const JobStateEntry& e : *states) {
    if (!e.state.empty()) by_id[e.job_id] = &e.state.front();
  }
  for (auto& [s, answer] : asks) {
    answer.asked = asked;
    for (std::int64_t id : answer.ids) {
      if (auto it = by_id.find(id); it != by_id.end()) answer.states.emplace(id, *it->second);
    }
    s->OnJobStates(answer);
  }
  co_return true;
}

}  // namespace sb::slurm
