// SPDX-License-Identifier: Apache-2.0
#include "testing/run.h"

#include <stdexcept>

#include <gtest/gtest.h>
#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sb::testing {
namespace {
namespace asio = boost::asio;

asio::awaitable<int> Answer() { co_return 42; }

// Suspends for ever: the operation drops its handler, so the loop runs out of work.
asio::awaitable<int> Hang() {
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>([](auto&&) {},
                                                                       asio::use_awaitable);
  co_return 1;
}

TEST(RunSyncTest, ReturnsTheResult) {
  asio::io_context io;
  EXPECT_EQ(RunSync(io, Answer()), 42);
}

TEST(RunSyncTest, ALoopThatRunsDryIsAnErrorNotACrash) {
  asio::io_context io;
  EXPECT_THROW(RunSync(io, Hang()), std::runtime_error);
}

}  // namespace
}  // namespace sb::testing
