// SPDX-License-Identifier: Apache-2.0
#include "slurm/node_watch.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

namespace sb::slurm {

using boost::asio::awaitable;

NodeWatch::NodeWatch(boost::asio::any_io_executor executor, Client& slurm, async::Clock& clock,
                     NodeWatchOptions options)
    : slurm_(slurm),
      clock_(clock),
      options_(options),
      timer_(clock.MakeTimer(std::move(executor))) {}

NodeWatch::~NodeWatch() = default;

void NodeWatch::Subscribe(NodeWatchSubscriber* subscriber) {
  if (std::ranges::find(subscribers_, subscriber) != subscribers_.end()) return;
  subscribers_.push_back(subscriber);
  RequestList();
}

void NodeWatch::Unsubscribe(NodeWatchSubscriber* subscriber) {
  std::erase(subscribers_, subscriber);
}

void NodeWatch::RequestList() {
  requested_ = true;
  timer_->Wake();
}

void NodeWatch::Stop() {
  stopping_ = true;
  timer_->Wake();
}

awaitable<void> NodeWatch::Run() {
  using Duration = async::Clock::Duration;
  using TimePoint = async::Clock::TimePoint;
  const Duration interval =
      std::max<Duration>(options_.list_interval, std::chrono::milliseconds(kMinListInterval));
  TimePoint next = TimePoint::min();  // the next list due without a request
  std::optional<TimePoint> last_asked;
  int failures = 0;
  while (!stopping_) {
    // Nobody to tell: no request, and no timer but Subscribe's wake-up.
    TimePoint due = TimePoint::max();
    if (!subscribers_.empty()) {
      due = requested_ && last_asked ? std::min(next, *last_asked + kMinListInterval)
            : requested_             ? TimePoint::min()
                                     : next;
    }
    if (clock_.Now() < due) {
      if (co_await timer_->WaitUntil(due) == async::WaitResult::kAborted) break;
      continue;  // woken or due: look again
    }
    requested_ = false;
    last_asked = clock_.Now();
    const Result<void> listed = co_await List();
    if (stopping_) break;
    Duration wait = interval;
    if (listed) {
      if (failures > 0) spdlog::info("reading Slurm's nodes works again");
      failures = 0;
    } else {
      wait = std::min<Duration>(options_.retry_base * (1 << std::min(failures, 10)), interval);
      ++failures;
      spdlog::warn("reading Slurm's nodes failed (attempt {}), retrying in {} ms: {}", failures,
                   std::chrono::duration_cast<std::chrono::milliseconds>(wait).count(),
                   listed.error().ToString());
    }
    next = clock_.Now() + wait;
  }
}

awaitable<Result<void>> NodeWatch::List() {
  const async::Clock::TimePoint asked = clock_.Now();
  std::vector<NodeWatchSubscriber*> asking = subscribers_;
  Result<std::vector<NodeInfo>> nodes = co_await slurm_.ListNodes();
  // A subscriber that left meanwhile gets nothing.
  std::erase_if(asking, [&](NodeWatchSubscriber* s) {
    return std::ranges::find(subscribers_, s) == subscribers_.end();
  });
  if (!nodes) {
    ++stats_.list_errors;
    for (NodeWatchSubscriber* s : asking) s->OnNodeListFailed(nodes.error());
    co_return tl::unexpected(nodes.error());
  }
  ++stats_.lists;
  const NodeListAnswer answer{.asked = asked, .nodes = *nodes};
  for (NodeWatchSubscriber* s : asking) s->OnSlurmNodes(answer);
  co_return Result<void>{};
}

}  // namespace sb::slurm
