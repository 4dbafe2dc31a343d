// SPDX-License-Identifier: Apache-2.0
#include "async/task_group.h"

#include <exception>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>

namespace sb::async {
namespace asio = boost::asio;

namespace {

// Removes `timer` from `set` when the waiting coroutine ends, also when its frame is destroyed.
struct Registration {
  std::set<Timer*>& set;
  Timer* timer;
  Registration(std::set<Timer*>& s, Timer* t) : set(s), timer(t) { set.insert(timer); }
  ~Registration() { set.erase(timer); }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
};

}  // namespace

TaskGroup::TaskGroup(asio::any_io_executor executor, Clock& clock, std::string name)
    : executor_(std::move(executor)), clock_(clock), name_(std::move(name)) {}

TaskGroup::~TaskGroup() = default;

void TaskGroup::Spawn(asio::awaitable<void> task) {
  ++running_;
  asio::co_spawn(executor_, std::move(task), [this](const std::exception_ptr& e) {
    --running_;
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        spdlog::error("{}: a task failed: {}", name_, ex.what());
      } catch (...) {
        spdlog::error("{}: a task failed", name_);
      }
    }
    Wake(joiners_);
  });
}

asio::awaitable<bool> TaskGroup::Sleep(Clock::Duration d) {
  if (stopping_) co_return false;
  std::unique_ptr<Timer> timer = clock_.MakeTimer(executor_);
  Registration reg(sleepers_, timer.get());
  const WaitResult r = co_await timer->WaitUntil(clock_.Now() + d);
  co_return r == WaitResult::kFired && !stopping_;
}

void TaskGroup::Stop() {
  stopping_ = true;
  Wake(sleepers_);
}

asio::awaitable<void> TaskGroup::Join() {
  std::unique_ptr<Timer> timer = clock_.MakeTimer(executor_);
  Registration reg(joiners_, timer.get());
  while (running_ > 0) {
    if (co_await timer->WaitUntil(Clock::TimePoint::max()) == WaitResult::kAborted) co_return;
  }
}

void TaskGroup::Wake(std::set<Timer*>& timers) {
  for (Timer* t : timers) t->Wake();
}

}  // namespace sb::async
