// SPDX-License-Identifier: Apache-2.0
#include "async/semaphore.h"

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "async/clock.h"
#include "testing/fake_time.h"

namespace sb::async {
namespace {

namespace asio = boost::asio;
using sb::testing::Drain;

// A coroutine that takes a slot, records its name, and holds the slot until `release` is set
// and the loop runs again.
struct Holder {
  std::string name;
  bool got = false;
  bool refused = false;
  std::optional<Semaphore::Permit> permit;
};

void SpawnAcquire(asio::io_context& io, Semaphore& s, Holder& h, std::vector<std::string>& order,
                  asio::cancellation_slot slot = {}) {
  asio::co_spawn(
      io,
      [&s, &h, &order]() -> asio::awaitable<void> {
        std::optional<Semaphore::Permit> p = co_await s.Acquire();
        if (!p) {
          h.refused = true;
          co_return;
        }
        h.got = true;
        order.push_back(h.name);
        h.permit = std::move(p);
      },
      asio::bind_cancellation_slot(slot, [](std::exception_ptr e) { ASSERT_FALSE(e); }));
}

class SemaphoreTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  asio::io_context io_;
  std::vector<std::string> order_;
};

TEST_F(SemaphoreTest, AtMostNHoldersAndFreedSlotsGoToTheOldestWaiter) {
  Semaphore s(clock_, 2);
  Holder a{.name = "a"}, b{.name = "b"}, c{.name = "c"}, d{.name = "d"};
  for (Holder* h : {&a, &b, &c, &d}) SpawnAcquire(io_, s, *h, order_);
  Drain(io_);
  EXPECT_TRUE(a.got && b.got);
  EXPECT_FALSE(c.got || d.got);
  EXPECT_EQ(s.waiting(), 2u);
  a.permit.reset();
  // A newcomer after the release waits behind c and d.
  Holder e{.name = "e"};
  SpawnAcquire(io_, s, e, order_);
  Drain(io_);
  EXPECT_TRUE(c.got);
  EXPECT_FALSE(d.got || e.got);
  b.permit.reset();
  c.permit.reset();
  Drain(io_);
  EXPECT_EQ(order_, (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  d.permit.reset();
  e.permit.reset();
  EXPECT_EQ(s.available(), 2);
  EXPECT_EQ(s.waiting(), 0u);
}

TEST_F(SemaphoreTest, CloseEndsWaitersAndRefusesNewcomersWhilePermitsStayValid) {
  Semaphore s(clock_, 1);
  Holder a{.name = "a"}, b{.name = "b"};
  SpawnAcquire(io_, s, a, order_);
  SpawnAcquire(io_, s, b, order_);
  Drain(io_);
  ASSERT_TRUE(a.got);
  s.Close();
  Drain(io_);
  EXPECT_TRUE(b.refused);
  Holder c{.name = "c"};
  SpawnAcquire(io_, s, c, order_);
  Drain(io_);
  EXPECT_TRUE(c.refused);
  a.permit.reset();
  EXPECT_EQ(s.available(), 1);
}

TEST_F(SemaphoreTest, ACancelledWaiterLeavesTheLineAndAGrantedOneGivesItsSlotOn) {
  Semaphore s(clock_, 1);
  Holder a{.name = "a"}, b{.name = "b"}, c{.name = "c"};
  asio::cancellation_signal cancel_b;
  SpawnAcquire(io_, s, a, order_);
  SpawnAcquire(io_, s, b, order_, cancel_b.slot());
  SpawnAcquire(io_, s, c, order_);
  Drain(io_);
  ASSERT_EQ(s.waiting(), 2u);
  cancel_b.emit(asio::cancellation_type::terminal);
  Drain(io_);
  EXPECT_TRUE(b.refused);
  EXPECT_EQ(s.waiting(), 1u);
  a.permit.reset();
  Drain(io_);
  EXPECT_TRUE(c.got);
  EXPECT_EQ(order_, (std::vector<std::string>{"a", "c"}));
}

}  // namespace
}  // namespace sb::async
