// SPDX-License-Identifier: Apache-2.0
//
// testing/run.h
//
// RunSync(io, awaitable): runs one coroutine to completion on `io` (driving anything else
// spawned there, such as a FakeHttpServer) and returns its result. For tests only.
#pragma once

#include <exception>
#include <optional>
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
  return std::move(*result);
}

}  // namespace sb::testing
