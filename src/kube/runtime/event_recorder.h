// SPDX-License-Identifier: Apache-2.0
//
// kube/runtime/event_recorder.h
//
// Records core/v1 Events about API objects with client-go's semantics (tools/record):
//   - An Event names its involved object (kind, namespace, name, uid, apiVersion,
//     resourceVersion, fieldPath), a type (Normal or Warning), a reason, a message and the source
//     component (and host). It is created in the object's namespace ("default" for cluster-scoped
//     objects) and named "<object name>.<unix nanoseconds in hex>".
//   - De-duplication (client-go's eventLogger): an Event identical to a recent one (same source,
//     object, type, reason and message) is not created again; the existing Event is PATCHed
//     instead with count+1, a new lastTimestamp and the message. Recent Events are kept in an LRU
//     of bounded size (client-go: 4096). If the Event was deleted meanwhile (404), it is created
//     again. Unlike client-go, an entry older than `dedup_window` (default 10 min, the
//     aggregation interval of client-go's EventAggregator) starts a new Event; 0 disables that.
//   - Aggregation (client-go's EventAggregator): once 10 Events with the same source, object,
//     type and reason but different messages arrive within 10 minutes, the rest are folded into
//     one Event whose message starts with "(combined from similar events): ".
//   - Spam filter (client-go's EventSourceObjectSpamFilter): a token bucket per source+object+type
//     (burst 25, one token back every 5 minutes); Events beyond it are dropped.
//   - Emit() is fire-and-forget, as in client-go: it queues (bounded, 5,000; drops when full),
//     and Run() writes the queue through the sink, retrying transport failures (kUnavailable,
//     kDeadlineExceeded) up to 12 times, 10 s apart (not after ShutDown()). Other errors drop
//     the Event.
//   - Run() writes up to `writers` (8) Events at once, as client-go's events.k8s.io broadcaster
//     (kube-scheduler's since 1.19) writes each Event in a goroutine of its own. Measured with
//     2,000 pods bound in 12-14 s (scripts/bench.sh): one write at a time and a queue of 1,000
//     lost 1,097 of their Scheduled Events to the full queue, 8 writers still 385; the queue
//     of 5,000 (a few MB at most) loses none. Events about one object are still
//     written one at a time, in order, so the de-duplication, aggregation and spam state of
//     every key (each names the object) sees them as a single writer would; a write waiting to
//     retry holds its object and one writer, not the whole queue.
//
// The recorder writes through EventSink (Create, Patch), so it is tested with a fake;
// kube_adapters.h has the sink over the real apiserver.
//
// Thread model: loop-confined. Call everything on the thread of the io_context that runs Run().
// The clock and the sink must outlive the recorder; the recorder must outlive Run().
//
// Example:
//   EventRecorder recorder(clock, sink, {.source = {.component = "slurm-bridge-scheduler"}});
//   co_spawn(io, recorder.Run(), detached);
//   recorder.Emit(MakeObjectReference("v1", "Pod", pod.metadata), EventType::kWarning,
//   "FailedScheduling", "no Slurm nodes fit");
//   ...
//   recorder.ShutDown();  // Run() returns once the queue is written
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/awaitable.hpp>

#include "async/clock.h"
#include "async/task_group.h"
#include "common/error.h"
#include "kube/types.h"

namespace sb::kube {

enum class EventType { kNormal, kWarning };

// "Normal", "Warning".
[[nodiscard]] std::string_view EventTypeName(EventType type);

struct EventSource {
  std::string component;  // "slurm-bridge-scheduler"
  std::string host;       // optional: node or pod name
};

// The fields a de-duplicated repeat changes on an existing Event. The sink sends them as a
// strategic-merge (or merge) patch of events/{name}.
struct EventPatch {
  std::string namespace_;
  std::string name;
  std::int32_t count = 0;
  std::string last_timestamp;  // metav1.Time
  std::string message;
  bool operator==(const EventPatch&) const = default;
};

// Where Events go. Implementations: the apiserver (kube_adapters.h), fakes in tests.
class EventSink {
 public:
  virtual ~EventSink() = default;
  // Creates `event`; returns the stored Event (with its resourceVersion).
  [[nodiscard]] virtual boost::asio::awaitable<Result<Event>> Create(Event event) = 0;
  // Patches the Event `patch.namespace_/patch.name`; kNotFound when it no longer exists.
  [[nodiscard]] virtual boost::asio::awaitable<Result<Event>> Patch(EventPatch patch) = 0;
};

struct EventRecorderOptions {
  EventSource source;
  std::size_t lru_size = 4096;                                     // client-go maxLruCacheEntries
  async::Clock::Duration dedup_window = std::chrono::minutes(10);  // 0: no time bound (client-go)
  std::size_t aggregate_max_events = 10;                           // 0 disables aggregation
  async::Clock::Duration aggregate_window = std::chrono::minutes(10);
  bool spam_filter = true;
  double spam_burst = 25;
  async::Clock::Duration spam_refill_every = std::chrono::minutes(5);  // one token per this
  std::size_t queue_size = 5000;
  std::size_t writers = 8;  // Events written at once (0 counts as 1)
  int max_tries = 12;
  async::Clock::Duration retry_interval = std::chrono::seconds(10);
};

// What Record() did with one Event.
struct RecordOutcome {
  enum class Action { kCreated, kPatched, kFiltered };
  Action action = Action::kCreated;
  Event event;  // as stored (kCreated, kPatched) or as it would have been written (kFiltered)
};

class EventRecorder {
 public:
  EventRecorder(async::Clock& clock, EventSink& sink, EventRecorderOptions options);
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;
  ~EventRecorder();

  // Queues an Event about `object`, stamped with the clock's time now (client-go's
  // recorder.Event). Returns false when it was dropped (queue full, or after ShutDown()).
  bool Emit(ObjectReference object, EventType type, std::string reason, std::string message);

  // Writes queued Events until ShutDown() was called and the queue is empty.
  [[nodiscard]] boost::asio::awaitable<void> Run();
  // Stops accepting Events; Run() returns after writing what is queued. Idempotent.
  void ShutDown();

  // Correlates and writes one Event now, bypassing the queue and without retries. Errors are the
  // sink's. For Run() and for tests.
  [[nodiscard]] boost::asio::awaitable<Result<RecordOutcome>> Record(ObjectReference object,
                                                                     EventType type,
                                                                     std::string reason,
                                                                     std::string message);

  // Events waiting in the queue (not those being written).
  [[nodiscard]] std::size_t Pending() const { return queued_; }
  // Events dropped: queue full, filtered as spam, or failed for good.
  [[nodiscard]] std::uint64_t Dropped() const { return dropped_; }

 private:
  // What the correlator decided for one Event.
  struct Correlated {
    Event event;
    std::string key;      // de-duplication key
    bool update = false;  // patch the existing Event (count > 1)
    bool skip = false;    // spam-filtered
  };
  struct DedupEntry {
    std::int32_t count = 0;
    std::string first_timestamp;
    std::string name;
    std::string resource_version;
    async::Clock::TimePoint seen{};
  };
  struct AggregateEntry {
    std::unordered_set<std::string> messages;
    async::Clock::TimePoint last{};
  };
  struct Bucket {
    double tokens = 0;
    async::Clock::TimePoint last{};
  };
  template <typename V>
  class Lru;

  [[nodiscard]] Event MakeEvent(ObjectReference object, EventType type, std::string reason,
                                std::string message);
  // Unix nanoseconds of `t` for an Event name, strictly increasing across calls.
  [[nodiscard]] std::int64_t NameStamp(async::Clock::WallTime t);
  [[nodiscard]] Correlated Correlate(Event event);
  void UpdateState(const std::string& key, const Event& stored);
  [[nodiscard]] boost::asio::awaitable<Result<RecordOutcome>> Write(Correlated c);
  [[nodiscard]] boost::asio::awaitable<void> WriteWithRetries(Event event);
  // WriteWithRetries, then frees `object` for the next Event about it and wakes Run().
  [[nodiscard]] boost::asio::awaitable<void> WriteQueued(Event event, std::string object);

  async::Clock& clock_;
  EventSink& sink_;
  EventRecorderOptions options_;
  std::unique_ptr<Lru<DedupEntry>> dedup_;
  std::unique_ptr<Lru<AggregateEntry>> aggregate_;
  std::unique_ptr<Lru<Bucket>> spam_;
  // Queued Events per object (oldest first), and the objects that have some and no write in
  // flight, in the order they became so: each wake-up takes from the front, never walks the whole
  // queue (a burst at a few objects was quadratic, N-21).
  std::unordered_map<std::string, std::deque<Event>> waiting_;
  std::deque<std::string> ready_;
  std::size_t queued_ = 0;
  std::unordered_set<std::string> writing_;   // objects with an Event being written
  std::unique_ptr<async::Timer> wake_;        // Run()'s timer; Emit()/ShutDown()/writes wake it
  std::unique_ptr<async::TaskGroup> writes_;  // Run()'s writes in flight
  std::uint64_t dropped_ = 0;
  std::int64_t last_name_stamp_ = 0;
  bool shutting_down_ = false;
};

// A reference to an object for Emit(): kind, apiVersion and the object's metadata.
[[nodiscard]] ObjectReference MakeObjectReference(std::string api_version, std::string kind,
                                                  const ObjectMeta& metadata);

}  // namespace sb::kube
