// SPDX-License-Identifier: Apache-2.0
//
// app/lease_thread.h
//
// Leader election on a thread of its own, with its own apiserver connection: the Lease is
// renewed on time even while the main loop is busy (a large Slurm job list decoded, a burst of
// binds), which on one shared loop could delay a renewal past the Lease's duration and make the
// leader exit (review 888ec7d, design risks).
//
// The elector (kube/runtime/leader_election.h) runs unchanged on the lease thread's loop. The
// callbacks are posted to the main loop; IsLeader() and Healthy() read a snapshot the lease
// thread refreshes every 250 ms and after each change, so they may be called from the main loop.
// A lease thread that stalls stops refreshing the snapshot, and Healthy() turns false as the
// elector's own would.
//
// Thread model: construct, Start(), Stop() and destroy on the main thread; the destructor joins
// the lease thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "async/clock.h"
#include "common/error.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/runtime/kube_adapters.h"
#include "kube/runtime/leader_election.h"
#include "net/http_client.h"

namespace sb::app {

class LeaseThread {
 public:
  // `main` runs the callbacks. `kube_config`: the apiserver to use (a connection of its own).
  static Result<std::unique_ptr<LeaseThread>> Create(boost::asio::io_context& main,
                                                     const kube::Config& kube_config,
                                                     kube::LeaderElectionConfig config,
                                                     kube::LeaderCallbacks callbacks);
  ~LeaseThread();
  LeaseThread(const LeaseThread&) = delete;
  LeaseThread& operator=(const LeaseThread&) = delete;

  void Start();
  // Asks the elector to stop (it releases the Lease when leading); the thread ends after that.
  void Stop();
  [[nodiscard]] bool IsLeader() const { return leader_.load(); }
  [[nodiscard]] bool Healthy(async::Clock::Duration tolerance) const;

 private:
  LeaseThread() = default;
  void Snapshot();
  // Snapshot() every 250 ms on the thread's loop until Stop().
  boost::asio::awaitable<void> SnapshotLoop();

  async::SystemClock clock_;
  boost::asio::io_context io_{1};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  std::unique_ptr<kube::ClientLeaseStore> store_;
  std::unique_ptr<kube::LeaderElector> elector_;
  async::Clock::Duration lease_duration_{};
  std::atomic<bool> leader_{false};
  std::atomic<async::Clock::Duration::rep> observed_{0};  // steady time of the last renewal
  std::atomic<bool> stopping_{false};
  std::function<void()> lost_;  // posts on_stopped_leading to the main loop
  std::thread thread_;
};

}  // namespace sb::app
