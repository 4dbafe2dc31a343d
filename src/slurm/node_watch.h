// SPDX-License-Identifier: Apache-2.0
//
// slurm/node_watch.h
//
// One list of Slurm's nodes per process, shared by everything that reads them (the node
// controller; the scheduler's node list can move here too), as slurm/job_watch.h is for jobs.
//
// The watch sends one GET /nodes/ per `list_interval` (at least kMinListInterval) and hands every
// subscriber the same answer. It sends nothing while nobody subscribes, and it waits for no timer
// then either. A new subscriber, or one that asks with RequestList() (it knows the list is
// behind), gets a list at once: at the next turn of the loop, and never sooner than
// kMinListInterval after the last request. After a failed list it tries again after 1 s,
// doubling with each failure in a row, never later than `list_interval`; every subscriber is
// told of each failure.
//
// It knows nothing of Kubernetes or the bridge: a list in, the same list out.
//
// Thread model: loop-confined. Subscribers are called on the loop, synchronously; a subscriber
// must outlive its subscription (Unsubscribe before it is destroyed; one that unsubscribes while
// a list is out gets no answer from it).
//
// Example:
//   NodeWatch watch(io.get_executor(), slurm, clock, {.list_interval = config.node_list_interval});
//   co_spawn(io, watch.Run(), detached);
//   watch.Subscribe(&controller);  // OnSlurmNodes(...) at once, then every interval
//   ...
//   watch.Stop();
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "async/clock.h"
#include "common/error.h"
#include "slurm/client.h"

namespace sb::slurm {

struct NodeWatchOptions {
  std::chrono::milliseconds list_interval{10000};  // config nodeListInterval
  std::chrono::milliseconds retry_base{1000};      // the first wait after a failed list
};

// The answer to one list, the same for every subscriber.
struct NodeListAnswer {
  async::Clock::TimePoint asked;       // when the request was sent
  const std::vector<NodeInfo>& nodes;  // valid during the call only: copy what is kept
};

class NodeWatchSubscriber {
 public:
  virtual ~NodeWatchSubscriber() = default;
  // Slurm's node list. Work that waits is spawned by the subscriber in its own tasks: the watch
  // never waits on a subscriber.
  virtual void OnSlurmNodes(const NodeListAnswer& answer) = 0;
  // The list failed: nothing is known this time (the watch tries again, see above).
  virtual void OnNodeListFailed(const Error& error) = 0;
};

struct NodeWatchStats {
  std::uint64_t lists = 0;  // node lists that answered
  std::uint64_t list_errors = 0;
};

class NodeWatch {
 public:
  // Lists never come closer together than this, whatever the config or RequestList() say.
  static constexpr std::chrono::milliseconds kMinListInterval{100};

  NodeWatch(boost::asio::any_io_executor executor, Client& slurm, async::Clock& clock,
            NodeWatchOptions options);
  ~NodeWatch();
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

  // A new subscriber gets a list at once (RequestList()).
  void Subscribe(NodeWatchSubscriber* subscriber);
  void Unsubscribe(NodeWatchSubscriber* subscriber);
  // The next list comes at once (kMinListInterval after the last one at the soonest), failures
  // and interval notwithstanding.
  void RequestList();

  // Lists until Stop().
  [[nodiscard]] boost::asio::awaitable<void> Run();
  // Idempotent; Run() returns soon after.
  void Stop();
  [[nodiscard]] std::size_t subscribers() const { return subscribers_.size(); }
  [[nodiscard]] const NodeWatchStats& stats() const { return stats_; }

 private:
  // One GET /nodes/, its answer handed to the subscribers.
  [[nodiscard]] boost::asio::awaitable<Result<void>> List();

  Client& slurm_;
  async::Clock& clock_;
  NodeWatchOptions options_;
  std::unique_ptr<async::Timer> timer_;
  std::vector<NodeWatchSubscriber*> subscribers_;
  bool requested_ = false;
  bool stopping_ = false;
  NodeWatchStats stats_;
};

}  // namespace sb::slurm
