// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/event_recorder.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "async/clock.h"
#include "testing/fake_time.h"
#include "testing/run.h"

namespace sb::kube {
namespace {

namespace asio = boost::asio;
using std::chrono::minutes;
using std::chrono::seconds;
using Action = RecordOutcome::Action;

// Stores Events like the apiserver (resourceVersion bumped on every write) and logs each call.
class FakeEventSink final : public EventSink {
 public:
  asio::awaitable<Result<Event>> Create(Event event) override {
    calls.push_back("create " + event.metadata.name);
    co_await Delay(event.involved_object.name);
    if (!errors.empty()) {
      Error e = errors.front();
      errors.pop_front();
      co_return tl::unexpected(e);
    }
    const std::string key = event.metadata.namespace_ + "/" + event.metadata.name;
    if (events.contains(key)) {
      co_return MakeError(ErrorCode::kAlreadyExists, "exists", 409);
    }
    event.metadata.resource_version = std::to_string(++rv_);
    events[key] = event;
    co_return event;
  }

  asio::awaitable<Result<Event>> Patch(EventPatch patch) override {
    calls.push_back("patch " + patch.name);
    patches.push_back(patch);
    co_await Delay(patch.name.substr(0, patch.name.rfind('.')));
    if (!errors.empty()) {
      Error e = errors.front();
      errors.pop_front();
      co_return tl::unexpected(e);
    }
    auto it = events.find(patch.namespace_ + "/" + patch.name);
    if (it == events.end()) {
      co_return MakeError(ErrorCode::kNotFound, "events not found", 404);
    }
    it->second.count = patch.count;
    it->second.last_timestamp = patch.last_timestamp;
    it->second.message = patch.message;
    it->second.metadata.resource_version = std::to_string(++rv_);
    co_return it->second;
  }

  std::map<std::string, Event> events;  // "ns/name"
  std::vector<std::string> calls;
  std::vector<EventPatch> patches;
  std::deque<Error> errors;  // answered, in order, before any real handling
  // With a clock: every call takes `delay` of it; the most calls in flight at once, overall and
  // about one object.
  async::Clock* clock = nullptr;
  async::Clock::Duration delay{};
  std::map<std::string, int> in_flight;  // object name -> calls
  int most_in_flight = 0;
  int most_about_one_object = 0;

 private:
  asio::awaitable<void> Delay(const std::string& object) {
    if (clock == nullptr) co_return;
    const int now = ++in_flight[object];
    most_about_one_object = std::max(most_about_one_object, now);
    int all = 0;
    for (const auto& [_, n] : in_flight) all += n;
    most_in_flight = std::max(most_in_flight, all);
    std::unique_ptr<async::Timer> t = clock->MakeTimer(co_await asio::this_coro::executor);
    (void)co_await t->WaitUntil(clock->Now() + delay);
    --in_flight[object];
  }

  int rv_ = 0;
};

ObjectReference PodRef(std::string name, std::string uid = "uid-1") {
  ObjectMeta meta;
  meta.namespace_ = "ns";
  meta.name = std::move(name);
  meta.uid = std::move(uid);
  meta.resource_version = "42";
  return MakeObjectReference("v1", "Pod", meta);
}

class EventRecorderTest : public ::testing::Test {
 protected:
  explicit EventRecorderTest(EventRecorderOptions options = {.source = {.component = "sched"}})
      : recorder_(clock_, sink_, std::move(options)) {}

  Result<RecordOutcome> Record(const ObjectReference& ref, EventType type,
                               const std::string& reason, const std::string& message) {
    return sb::testing::RunSync(io_, recorder_.Record(ref, type, reason, message));
  }

  // Runs the recorder's queue until ShutDown(); run_returned_ says when Run() has returned.
  void StartRun() {
    asio::co_spawn(io_, recorder_.Run(), [this](std::exception_ptr e) {
      EXPECT_FALSE(e);
      run_returned_ = true;
    });
    sb::testing::Drain(io_);
  }

  // Every sink call takes 1 s of the fake clock.
  void SlowSink() {
    sink_.clock = &clock_;
    sink_.delay = seconds(1);
  }

  async::FakeClock clock_;
  FakeEventSink sink_;
  EventRecorder recorder_;
  asio::io_context io_;
  bool run_returned_ = false;
};

TEST_F(EventRecorderTest, RepeatedEventIsCreatedOnceThenPatchedWithRisingCount) {
  const ObjectReference pod = PodRef("web-0");
  std::string name;
  for (int i = 1; i <= 4; ++i) {
    SCOPED_TRACE(i);
    Result<RecordOutcome> r = Record(pod, EventType::kWarning, "FailedScheduling", "no fit");
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->action, i == 1 ? Action::kCreated : Action::kPatched);
    EXPECT_EQ(r->event.count, i);
    if (i == 1) {
      name = r->event.metadata.name;
    }
    EXPECT_EQ(r->event.metadata.name, name);
    clock_.Advance(seconds(30));
  }
  ASSERT_EQ(sink_.events.size(), 1u);
  const Event& stored = sink_.events.begin()->second;
  EXPECT_EQ(stored.count, 4);
  EXPECT_EQ(stored.first_timestamp, "2026-01-01T00:00:00Z");
  EXPECT_EQ(stored.last_timestamp, "2026-01-01T00:01:30Z");
  EXPECT_EQ(stored.metadata.namespace_, "ns");
  EXPECT_EQ(stored.type, "Warning");
  EXPECT_EQ(stored.reason, "FailedScheduling");
  EXPECT_EQ(stored.source_component, "sched");
  EXPECT_EQ(stored.involved_object.kind, "Pod");
  EXPECT_EQ(stored.involved_object.uid, "uid-1");
  EXPECT_EQ(stored.involved_object.resource_version, "42");
  EXPECT_EQ(stored.metadata.name.rfind("web-0.", 0), 0u) << stored.metadata.name;
  EXPECT_EQ(sink_.calls.size(), 4u);
  ASSERT_EQ(sink_.patches.size(), 3u);
  EXPECT_EQ(sink_.patches.back(), (EventPatch{"ns", name, 4, "2026-01-01T00:01:30Z", "no fit"}));
}

TEST_F(EventRecorderTest, OnlyIdenticalEventsAreDeduplicated) {
  struct Case {
    std::string name;
    ObjectReference ref;
    EventType type;
    std::string reason;
    std::string message;
    Action want;
  };
  const std::vector<Case> cases = {
      {"first", PodRef("p"), EventType::kNormal, "Scheduled", "to n1", Action::kCreated},
      {"identical", PodRef("p"), EventType::kNormal, "Scheduled", "to n1", Action::kPatched},
      {"other message", PodRef("p"), EventType::kNormal, "Scheduled", "to n2", Action::kCreated},
      {"other reason", PodRef("p"), EventType::kNormal, "Bound", "to n1", Action::kCreated},
      {"other type", PodRef("p"), EventType::kWarning, "Scheduled", "to n1", Action::kCreated},
      {"other uid", PodRef("p", "uid-2"), EventType::kNormal, "Scheduled", "to n1",
       Action::kCreated},
      {"other object", PodRef("q"), EventType::kNormal, "Scheduled", "to n1", Action::kCreated},
      {"first again", PodRef("p"), EventType::kNormal, "Scheduled", "to n1", Action::kPatched},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<RecordOutcome> r = Record(c.ref, c.type, c.reason, c.message);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->action, c.want);
    clock_.Advance(seconds(1));
  }
}

TEST_F(EventRecorderTest, RepeatAfterTheWindowStartsANewEvent) {
  const ObjectReference pod = PodRef("p");
  ASSERT_EQ(Record(pod, EventType::kNormal, "R", "m")->action, Action::kCreated);
  clock_.Advance(minutes(10));
  ASSERT_EQ(Record(pod, EventType::kNormal, "R", "m")->action, Action::kPatched);
  clock_.Advance(minutes(10) + seconds(1));
  Result<RecordOutcome> r = Record(pod, EventType::kNormal, "R", "m");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->action, Action::kCreated);
  EXPECT_EQ(r->event.count, 1);
  EXPECT_EQ(sink_.events.size(), 2u);
}

TEST_F(EventRecorderTest, DeletedEventIsCreatedAgainWithItsCount) {
  const ObjectReference pod = PodRef("p");
  ASSERT_EQ(Record(pod, EventType::kNormal, "R", "m")->action, Action::kCreated);
  sink_.events.clear();  // the apiserver's event TTL removed it
  Result<RecordOutcome> r = Record(pod, EventType::kNormal, "R", "m");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->action, Action::kCreated);
  EXPECT_EQ(r->event.count, 2);
  EXPECT_EQ(sink_.calls.size(), 3u) << "create, patch (404), create";
}

TEST_F(EventRecorderTest, SinkErrorIsReturned) {
  sink_.errors.push_back(Error{ErrorCode::kPermissionDenied, "forbidden", 403});
  Result<RecordOutcome> r = Record(PodRef("p"), EventType::kNormal, "R", "m");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
}

TEST_F(EventRecorderTest, SimilarEventsAreAggregatedAfterTen) {
  const ObjectReference pod = PodRef("p");
  for (int i = 1; i <= 12; ++i) {
    SCOPED_TRACE(i);
    const std::string msg = "attempt " + std::to_string(i);
    Result<RecordOutcome> r = Record(pod, EventType::kWarning, "FailedScheduling", msg);
    ASSERT_TRUE(r.has_value());
    if (i < 10) {
      EXPECT_EQ(r->action, Action::kCreated);
      EXPECT_EQ(r->event.message, msg);
    } else {
      EXPECT_EQ(r->action, i == 10 ? Action::kCreated : Action::kPatched);
      EXPECT_EQ(r->event.message, "(combined from similar events): " + msg);
      EXPECT_EQ(r->event.count, i - 9);
    }
  }
  EXPECT_EQ(sink_.events.size(), 10u);
}

class SmallLruTest : public EventRecorderTest {
 protected:
  SmallLruTest() : EventRecorderTest({.source = {.component = "sched"}, .lru_size = 2}) {}
};

TEST_F(SmallLruTest, LeastRecentlyUsedEventIsForgotten) {
  struct Step {
    std::string object;
    Action want;
  };
  const std::vector<Step> steps = {
      {"a", Action::kCreated}, {"b", Action::kCreated},
      {"a", Action::kPatched}, {"c", Action::kCreated},  // evicts b, the least recently used
      {"a", Action::kPatched}, {"b", Action::kCreated},
  };
  for (const Step& s : steps) {
    SCOPED_TRACE(s.object);
    Result<RecordOutcome> r = Record(PodRef(s.object), EventType::kNormal, "R", "m");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->action, s.want);
  }
}

TEST_F(EventRecorderTest, SpamFilterAllowsABurstOf25PerObjectThenOnePerFiveMinutes) {
  const ObjectReference pod = PodRef("p");
  int written = 0;
  int filtered = 0;
  for (int i = 0; i < 30; ++i) {
    Result<RecordOutcome> r = Record(pod, EventType::kNormal, "R", "m");
    ASSERT_TRUE(r.has_value());
    (r->action == Action::kFiltered ? filtered : written)++;
  }
  EXPECT_EQ(written, 25);
  EXPECT_EQ(filtered, 5);
  EXPECT_EQ(recorder_.Dropped(), 5u);
  // Another object has its own bucket.
  EXPECT_EQ(Record(PodRef("other"), EventType::kNormal, "R", "m")->action, Action::kCreated);

  clock_.Advance(minutes(5) - seconds(1));
  EXPECT_EQ(Record(pod, EventType::kNormal, "R", "m")->action, Action::kFiltered);
  clock_.Advance(seconds(1));
  Result<RecordOutcome> r = Record(pod, EventType::kNormal, "R", "m");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->action, Action::kPatched);
  // As in client-go, filtered repeats were still counted.
  EXPECT_EQ(r->event.count, 32);
}

TEST_F(EventRecorderTest, RunWritesQueuedEventsRetriesTransportErrorsAndDrainsOnShutDown) {
  StartRun();

  EXPECT_TRUE(recorder_.Emit(PodRef("p"), EventType::kNormal, "R", "m"));
  sb::testing::Drain(io_);
  EXPECT_EQ(sink_.events.size(), 1u);

  // A transport error is retried 10 s later; a 403 drops the Event.
  sink_.errors.push_back(Error{ErrorCode::kUnavailable, "connection refused"});
  EXPECT_TRUE(recorder_.Emit(PodRef("q"), EventType::kNormal, "R", "m"));
  sb::testing::RunFor(io_, clock_, seconds(9));
  EXPECT_EQ(sink_.events.size(), 1u);
  sb::testing::RunFor(io_, clock_, seconds(1));
  EXPECT_EQ(sink_.events.size(), 2u);

  sink_.errors.push_back(Error{ErrorCode::kPermissionDenied, "forbidden", 403});
  EXPECT_TRUE(recorder_.Emit(PodRef("r"), EventType::kNormal, "R", "m"));
  sb::testing::RunFor(io_, clock_, seconds(30));
  EXPECT_EQ(sink_.events.size(), 2u);
  EXPECT_EQ(recorder_.Dropped(), 1u);

  EXPECT_TRUE(recorder_.Emit(PodRef("p"), EventType::kNormal, "R", "m"));
  recorder_.ShutDown();
  EXPECT_FALSE(recorder_.Emit(PodRef("s"), EventType::kNormal, "R", "m"));
  sb::testing::Drain(io_);
  EXPECT_TRUE(run_returned_);
  EXPECT_EQ(sink_.events.begin()->second.count, 2) << "queued before ShutDown: still written";
}

class ConcurrentWritesTest : public EventRecorderTest {
 protected:
  ConcurrentWritesTest() : EventRecorderTest({.source = {.component = "sched"}, .writers = 3}) {
    SlowSink();
  }
};

TEST_F(ConcurrentWritesTest, EventsOfDifferentObjectsAreWrittenAtOnceOfOneObjectInOrder) {
  StartRun();
  // Two identical Events about "a" first: one write at a time makes the second a patch of the
  // first (count 2); written side by side both would be created.
  for (const char* pod : {"a", "a", "b", "c", "d", "e"}) {
    EXPECT_TRUE(recorder_.Emit(PodRef(pod, std::string("uid-") + pod), EventType::kNormal,
                               "Scheduled", std::string("assigned ") + pod));
  }
  sb::testing::Drain(io_);
  EXPECT_EQ(sink_.most_in_flight, 3) << "writers: 3";
  EXPECT_EQ(recorder_.Pending(), 3u) << "the second a, d and e wait";
  sb::testing::RunFor(io_, clock_, seconds(1));
  sb::testing::RunFor(io_, clock_, seconds(1));
  sb::testing::RunFor(io_, clock_, seconds(1));
  EXPECT_EQ(recorder_.Pending(), 0u);
  EXPECT_EQ(sink_.most_about_one_object, 1);
  ASSERT_EQ(sink_.events.size(), 5u);
  for (const auto& [key, e] : sink_.events) {
    EXPECT_EQ(e.count, e.involved_object.name == "a" ? 2 : 1) << key;
  }
  EXPECT_EQ(sink_.patches.size(), 1u);
  recorder_.ShutDown();
  sb::testing::Drain(io_);
  EXPECT_TRUE(run_returned_);
}

TEST_F(ConcurrentWritesTest, ShutDownEndsAWaitToRetryAtOnce) {
  StartRun();
  sink_.errors.push_back(Error{ErrorCode::kUnavailable, "connection refused"});
  EXPECT_TRUE(recorder_.Emit(PodRef("p"), EventType::kNormal, "R", "m"));
  sb::testing::RunFor(io_, clock_, seconds(1));  // the failed write; its retry waits 10 s
  EXPECT_EQ(sink_.calls.size(), 1u);
  EXPECT_FALSE(run_returned_);
  recorder_.ShutDown();
  sb::testing::Drain(io_);
  EXPECT_TRUE(run_returned_) << "no 10 s wait after ShutDown()";
  EXPECT_EQ(recorder_.Dropped(), 1u);
  EXPECT_EQ(sink_.calls.size(), 1u);
}

class SmallQueueTest : public EventRecorderTest {
 protected:
  SmallQueueTest()
      : EventRecorderTest({.source = {.component = "sched"}, .queue_size = 2, .writers = 1}) {
    SlowSink();
  }
};

TEST_F(SmallQueueTest, AFullQueueDropsAndCountsWhatDoesNotFit) {
  StartRun();
  EXPECT_TRUE(recorder_.Emit(PodRef("a", "ua"), EventType::kNormal, "R", "m"));
  sb::testing::Drain(io_);  // a is being written: the queue is empty again
  EXPECT_TRUE(recorder_.Emit(PodRef("b", "ub"), EventType::kNormal, "R", "m"));
  EXPECT_TRUE(recorder_.Emit(PodRef("c", "uc"), EventType::kNormal, "R", "m"));
  EXPECT_FALSE(recorder_.Emit(PodRef("d", "ud"), EventType::kNormal, "R", "m"));
  EXPECT_EQ(recorder_.Dropped(), 1u);
  sb::testing::RunFor(io_, clock_, seconds(1));
  sb::testing::RunFor(io_, clock_, seconds(1));
  sb::testing::RunFor(io_, clock_, seconds(1));
  EXPECT_EQ(sink_.events.size(), 3u);
  EXPECT_EQ(sink_.most_in_flight, 1);
  recorder_.ShutDown();
  sb::testing::Drain(io_);
}

TEST_F(EventRecorderTest, ClusterScopedObjectsGetEventsInDefault) {
  ObjectMeta node;
  node.name = "n1";
  Result<RecordOutcome> r =
      Record(MakeObjectReference("v1", "Node", node), EventType::kNormal, "R", "m");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->event.metadata.namespace_, "default");
  EXPECT_EQ(r->event.involved_object.namespace_, "");
}

}  // namespace
}  // namespace sb::kube
