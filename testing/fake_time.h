// SPDX-License-Identifier: Apache-2.0
//
// testing/fake_time.h
//
// Test helpers for code driven by a FakeClock: run an io_context while moving fake time forward
// from one timer deadline to the next, so every periodic loop wakes exactly when it would with a
// real clock, and nothing sleeps. For tests only.
//
// Thread model: call from the thread that owns `io` (the test's thread).
#pragma once

#include <initializer_list>

#include <boost/asio/io_context.hpp>

#include "async/clock.h"

namespace sb::testing {

// Runs every ready handler of each io_context (poll), restarting it first if it had run out
// of work, until none has anything ready.
inline void Drain(std::initializer_list<boost::asio::io_context*> ios) {
  for (bool progress = true; progress;) {
    progress = false;
    for (boost::asio::io_context* io : ios) {
      io->restart();
      progress = io->poll() > 0 || progress;
    }
  }
}
inline void Drain(boost::asio::io_context& io) { Drain({&io}); }

// Advances `clock` to `until`, stopping at every timer deadline on the way and draining the
// io_contexts there, then drains at `until`. Timers of an io_context left out of `ios` fire
// into it but their handlers do not run (a "killed" process).
inline void RunUntil(std::initializer_list<boost::asio::io_context*> ios, async::FakeClock& clock,
                     async::Clock::TimePoint until) {
  Drain(ios);
  for (;;) {
    const async::Clock::TimePoint next = clock.NextDeadline();
    if (next > until) {
      break;
    }
    clock.Advance(next - clock.Now());
    Drain(ios);
  }
  clock.Advance(until - clock.Now());
  Drain(ios);
}
inline void RunUntil(boost::asio::io_context& io, async::FakeClock& clock,
                     async::Clock::TimePoint until) {
  RunUntil({&io}, clock, until);
}

// RunUntil(now + d).
inline void RunFor(std::initializer_list<boost::asio::io_context*> ios, async::FakeClock& clock,
                   async::Clock::Duration d) {
  RunUntil(ios, clock, clock.Now() + d);
}
inline void RunFor(boost::asio::io_context& io, async::FakeClock& clock, async::Clock::Duration d) {
  RunUntil({&io}, clock, clock.Now() + d);
}

}  // namespace sb::testing
