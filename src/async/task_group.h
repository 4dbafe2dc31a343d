// SPDX-License-Identifier: Apache-2.0
//
// async/task_group.h
//
// TaskGroup: the coroutines of one component (informers, workers, pollers), spawned together,
// stopped together and joined. Sleep() waits on the injected clock and is cut short by Stop(),
// so a poller with a 30 s interval still stops at once.
//
// Thread model: loop-confined; the group must outlive its tasks (Join() before destroying it).
//
// Example:
//   TaskGroup tasks(executor, clock, "pod controller");
//   tasks.Spawn(informer.Run());
//   tasks.Spawn(Poll());          // inside: while (co_await tasks.Sleep(interval)) { ... }
//   ...
//   tasks.Stop();                 // on SIGTERM, after stopping the informer and queues
//   co_await tasks.Join();
#pragma once

#include <memory>
#include <set>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "async/clock.h"

namespace sb::async {

class TaskGroup {
 public:
  TaskGroup(boost::asio::any_io_executor executor, Clock& clock, std::string name);
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;
  ~TaskGroup();

  // Runs `task` on the executor. A task that throws is logged under the group's name.
  void Spawn(boost::asio::awaitable<void> task);
  // Waits `d`. False when Stop() was called (before or during the wait): leave the loop.
  [[nodiscard]] boost::asio::awaitable<bool> Sleep(Clock::Duration d);
  // Wakes every Sleep(); later ones return false at once. Idempotent.
  void Stop();
  [[nodiscard]] bool stopping() const { return stopping_; }
  // Returns once every spawned task has ended.
  [[nodiscard]] boost::asio::awaitable<void> Join();
  [[nodiscard]] int running() const { return running_; }

 private:
  void Wake(std::set<Timer*>& timers);

  boost::asio::any_io_executor executor_;
  Clock& clock_;
  std::string name_;
  int running_ = 0;
  bool stopping_ = false;
  std::set<Timer*> sleepers_;  // non-owning: timers of pending Sleep()s
  std::set<Timer*> joiners_;   // non-owning: timers of pending Join()s
};

}  // namespace sb::async
