// SPDX-License-Identifier: Apache-2.0
//
// testing/run.h
//
// RunSync(io, awaitable): runs one coroutine to completion on `io` (driving anything else
// spawned there, such as a FakeHttpServer) and returns its result. For tests only. Throws
// std::runtime_error when the loop runs out of work before the coroutine finishes (a lost
// handler or a hang in the code under test), so the test fails with a message, not a crash.
//
// RunLoopUntil(io, pred, guard, on_idle): drives `io` until `pred` holds; false when `guard`
// (real time: a bound on a hang, never a timing claim) passes first. `on_idle` runs whenever the
// loop had nothing to do for 5 ms (e.g. to move a FakeClock on).
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

namespace sb::testing {

template <typename T>
T RunSync(boost::asio::io_context& io, boost::asio::awaitable<T> task) {
  std::optional<T> result;
  std::exception_ptr error;
  boost::asio::co_spawn(io, std::move(task), [&](std::exception_ptr e, T value) {
    error = e;
    if (!e) {
      result.emplace(std::move(value));
    }
  });
  io.restart();
  while (!result && !error) {
    if (io.run_one() == 0) {
      break;
    }
  }
  if (error) {
    std::rethrow_exception(error);
  }
  if (!result) {
    throw std::runtime_error(
        "RunSync: the io_context ran out of work before the coroutine finished");
  }
  return std::move(*result);
}

inline bool RunLoopUntil(boost::asio::io_context& io, const std::function<bool()>& pred,
                         std::chrono::steady_clock::duration guard,
                         const std::function<void()>& on_idle = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + guard;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (io.stopped()) io.restart();
    if (io.run_one_for(std::chrono::milliseconds(5)) == 0 && on_idle) on_idle();
  }
  return true;
}

}  // namespace sb::testing
