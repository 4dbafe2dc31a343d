// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/event_recorder.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <boost/asio/this_coro.hpp>

#include "async/task_group.h"
#include "common/time_format.h"

namespace sb::kube {

namespace asio = boost::asio;

// A string-keyed LRU map of bounded size (client-go's golang-lru use).
template <typename V>
class EventRecorder::Lru {
 public:
  explicit Lru(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

  // The value for `key` (now the most recent), or null.
  V* Get(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      return nullptr;
    }
    items_.splice(items_.begin(), items_, it->second);
    return &it->second->second;
  }

  void Put(const std::string& key, V value) {
    if (V* existing = Get(key)) {
      *existing = std::move(value);
      return;
    }
    items_.emplace_front(key, std::move(value));
    index_[key] = items_.begin();
    if (items_.size() > capacity_) {
      index_.erase(items_.back().first);
      items_.pop_back();
    }
  }

 private:
  std::size_t capacity_;
  std::list<std::pair<std::string, V>> items_;  // most recent first
  std::unordered_map<std::string, typename std::list<std::pair<std::string, V>>::iterator> index_;
};

namespace {

std::string Join(std::initializer_list<std::string_view> parts) {
  std::string key;
  for (std::string_view p : parts) {
    key.append(p);
    key.push_back('\n');
  }
  return key;
}

// client-go's getEventKey.
std::string EventKey(const Event& e) {
  const ObjectReference& o = e.involved_object;
  return Join({e.source_component, e.source_host, o.kind, o.namespace_, o.name, o.field_path, o.uid,
               o.api_version, e.type, e.reason, e.message});
}

// client-go's EventAggregatorByReasonFunc: everything but the message.
std::string AggregateKey(const Event& e) {
  const ObjectReference& o = e.involved_object;
  return Join({e.source_component, e.source_host, o.kind, o.namespace_, o.name, o.field_path, o.uid,
               o.api_version, e.type, e.reason});
}

// The involved object alone: its Events are written one at a time.
std::string ObjectKey(const ObjectReference& o) {
  return Join({o.kind, o.namespace_, o.name, o.uid, o.api_version});
}

// client-go's getSpamKey.
std::string SpamKey(const Event& e) {
  const ObjectReference& o = e.involved_object;
  return Join({e.source_component, e.source_host, o.kind, o.namespace_, o.name, o.uid,
               o.api_version, e.type});
}

std::string EventName(const std::string& object_name, std::int64_t ns) {
  char hex[32];
  const int n = std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(ns));
  return object_name + "." + std::string(hex, n > 0 ? static_cast<std::size_t>(n) : 0);
}

bool Retryable(const Error& e) {
  return e.code == ErrorCode::kUnavailable || e.code == ErrorCode::kDeadlineExceeded;
}

constexpr char kCombinedPrefix[] = "(combined from similar events): ";

}  // namespace

std::string_view EventTypeName(EventType type) {
  return type == EventType::kWarning ? "Warning" : "Normal";
}

ObjectReference MakeObjectReference(std::string api_version, std::string kind,
                                    const ObjectMeta& metadata) {
  ObjectReference ref;
  ref.api_version = std::move(api_version);
  ref.kind = std::move(kind);
  ref.namespace_ = metadata.namespace_;
  ref.name = metadata.name;
  ref.uid = metadata.uid;
  ref.resource_version = metadata.resource_version;
  return ref;
}

EventRecorder::EventRecorder(async::Clock& clock, EventSink& sink, EventRecorderOptions options)
    : clock_(clock),
      sink_(sink),
      options_(std::move(options)),
      dedup_(std::make_unique<Lru<DedupEntry>>(options_.lru_size)),
      aggregate_(std::make_unique<Lru<AggregateEntry>>(options_.lru_size)),
      spam_(std::make_unique<Lru<Bucket>>(options_.lru_size)) {}

EventRecorder::~EventRecorder() = default;

std::int64_t EventRecorder::NameStamp(async::Clock::WallTime t) {
  // client-go names Events "<object>.<unix nanoseconds in hex>"; a clock that did not move (a
  // coarse or fake one) must not give two Events one name.
  const std::int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  last_name_stamp_ = std::max(ns, last_name_stamp_ + 1);
  return last_name_stamp_;
}

Event EventRecorder::MakeEvent(ObjectReference object, EventType type, std::string reason,
                               std::string message) {
  const async::Clock::WallTime now = clock_.WallNow();
  Event e;
  e.metadata.name = EventName(object.name, NameStamp(now));
  e.metadata.namespace_ = object.namespace_.empty() ? "default" : object.namespace_;
  e.involved_object = std::move(object);
  e.reason = std::move(reason);
  e.message = std::move(message);
  e.type = std::string(EventTypeName(type));
  e.count = 1;
  e.first_timestamp = FormatTime(now);
  e.last_timestamp = e.first_timestamp;
  e.source_component = options_.source.component;
  e.source_host = options_.source.host;
  return e;
}

bool EventRecorder::Emit(ObjectReference object, EventType type, std::string reason,
                         std::string message) {
  if (shutting_down_ || queued_ >= options_.queue_size) {
    ++dropped_;
    return false;
  }
  std::string key = ObjectKey(object);
  std::deque<Event>& q = waiting_[key];
  q.push_back(MakeEvent(std::move(object), type, std::move(reason), std::move(message)));
  ++queued_;
  if (q.size() == 1 && !writing_.contains(key)) ready_.push_back(std::move(key));
  if (wake_) {
    wake_->Wake();
  }
  return true;
}

void EventRecorder::ShutDown() {
  shutting_down_ = true;
  if (writes_) {
    writes_->Stop();  // a write waiting to retry gives up now
  }
  if (wake_) {
    wake_->Wake();
  }
}

EventRecorder::Correlated EventRecorder::Correlate(Event event) {
  const async::Clock::TimePoint now = clock_.Now();
  Correlated c;
  c.key = EventKey(event);

  // 1. Aggregation of similar Events (client-go's EventAggregate).
  if (options_.aggregate_max_events > 0) {
    const std::string agg_key = AggregateKey(event);
    AggregateEntry record;
    if (AggregateEntry* found = aggregate_->Get(agg_key)) {
      record = *found;
    }
    if (now - record.last > options_.aggregate_window) {
      record = AggregateEntry{};
    }
    record.messages.insert(event.message);
    record.last = now;
    const bool combine = record.messages.size() >= options_.aggregate_max_events;
    if (combine) {
      // Do not grow the set beyond the threshold (client-go pops any one key).
      record.messages.erase(record.messages.begin());
    }
    aggregate_->Put(agg_key, std::move(record));
    if (combine) {
      const async::Clock::WallTime wall = clock_.WallNow();
      Event combined;
      combined.metadata.name = EventName(event.involved_object.name, NameStamp(wall));
      combined.metadata.namespace_ = event.metadata.namespace_;
      combined.involved_object = event.involved_object;
      combined.reason = event.reason;
      combined.message = kCombinedPrefix + event.message;
      combined.type = event.type;
      combined.count = 1;
      combined.first_timestamp = FormatTime(wall);
      combined.last_timestamp = combined.first_timestamp;
      combined.source_component = event.source_component;
      combined.source_host = event.source_host;
      event = std::move(combined);
      c.key = agg_key;
    }
  }

  // 2. De-duplication of identical Events (client-go's eventObserve).
  if (DedupEntry* last = dedup_->Get(c.key);
      last != nullptr && last->count > 0 &&
      (options_.dedup_window <= async::Clock::Duration::zero() ||
       now - last->seen <= options_.dedup_window)) {
    event.count = last->count + 1;
    event.first_timestamp = last->first_timestamp;
    event.metadata.name = last->name;
    event.metadata.resource_version = last->resource_version;
    c.update = true;
  }
  dedup_->Put(c.key, DedupEntry{event.count, event.first_timestamp, event.metadata.name,
                                event.metadata.resource_version, now});

  // 3. Spam filter: a token bucket per source + object + type.
  if (options_.spam_filter) {
    const std::string spam_key = SpamKey(event);
    Bucket bucket{options_.spam_burst, now};
    if (Bucket* found = spam_->Get(spam_key)) {
      bucket = *found;
      if (options_.spam_refill_every > async::Clock::Duration::zero()) {
        const double refill = std::chrono::duration<double>(now - bucket.last).count() /
                              std::chrono::duration<double>(options_.spam_refill_every).count();
        bucket.tokens = std::min(options_.spam_burst, bucket.tokens + refill);
      }
      bucket.last = now;
    }
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
    } else {
      c.skip = true;
    }
    spam_->Put(spam_key, bucket);
  }

  c.event = std::move(event);
  return c;
}

void EventRecorder::UpdateState(const std::string& key, const Event& stored) {
  dedup_->Put(key, DedupEntry{stored.count, stored.first_timestamp, stored.metadata.name,
                              stored.metadata.resource_version, clock_.Now()});
}

asio::awaitable<Result<RecordOutcome>> EventRecorder::Record(ObjectReference object, EventType type,
                                                             std::string reason,
                                                             std::string message) {
  Correlated c =
      Correlate(MakeEvent(std::move(object), type, std::move(reason), std::move(message)));
  co_return co_await Write(std::move(c));
}

asio::awaitable<Result<RecordOutcome>> EventRecorder::Write(Correlated c) {
  if (c.skip) {
    ++dropped_;
    co_return RecordOutcome{RecordOutcome::Action::kFiltered, std::move(c.event)};
  }
  if (c.update) {
    // A named argument, not a braced temporary: GCC 12 destroys a braced temporary passed by
    // value to a coroutine twice.
    EventPatch patch{c.event.metadata.namespace_, c.event.metadata.name, c.event.count,
                     c.event.last_timestamp, c.event.message};
    Result<Event> patched = co_await sink_.Patch(std::move(patch));
    if (patched) {
      UpdateState(c.key, *patched);
      co_return RecordOutcome{RecordOutcome::Action::kPatched, std::move(*patched)};
    }
    if (patched.error().code != ErrorCode::kNotFound) {
      co_return tl::unexpected(patched.error());
    }
    // The Event was deleted (or expired) meanwhile: create it again, as client-go does.
  }
  Event to_create = c.event;
  to_create.metadata.resource_version.clear();
  Result<Event> created = co_await sink_.Create(std::move(to_create));
  if (!created) {
    co_return tl::unexpected(created.error());
  }
  UpdateState(c.key, *created);
  co_return RecordOutcome{RecordOutcome::Action::kCreated, std::move(*created)};
}

asio::awaitable<void> EventRecorder::WriteWithRetries(Event event) {
  const Correlated c = Correlate(std::move(event));
  for (int attempt = 1;; ++attempt) {
    Result<RecordOutcome> r = co_await Write(c);
    if (r) {
      co_return;
    }
    // After ShutDown() no retry: the wait ends at once and the Event is dropped.
    if (!Retryable(r.error()) || attempt >= options_.max_tries || shutting_down_ || !writes_ ||
        !co_await writes_->Sleep(options_.retry_interval)) {
      ++dropped_;
      co_return;
    }
  }
}

asio::awaitable<void> EventRecorder::WriteQueued(Event event, std::string object) {
  co_await WriteWithRetries(std::move(event));
  writing_.erase(object);
  if (auto it = waiting_.find(object); it != waiting_.end() && !it->second.empty()) {
    ready_.push_back(std::move(object));
  }
  if (wake_) {
    wake_->Wake();
  }
}

asio::awaitable<void> EventRecorder::Run() {
  const asio::any_io_executor executor = co_await asio::this_coro::executor;
  wake_ = clock_.MakeTimer(executor);
  writes_ = std::make_unique<async::TaskGroup>(executor, clock_, "event recorder");
  const std::size_t most = std::max<std::size_t>(options_.writers, 1);
  for (;;) {
    // The objects with queued Events and no write in flight, in turn, up to `most` writes. A write
    // that ends at once (inside Spawn) frees its slot before the next check.
    while (!ready_.empty() && writing_.size() < most) {
      std::string object = std::move(ready_.front());
      ready_.pop_front();
      auto it = waiting_.find(object);
      if (it == waiting_.end() || it->second.empty() || writing_.contains(object)) continue;
      Event next = std::move(it->second.front());
      it->second.pop_front();
      --queued_;
      if (it->second.empty()) waiting_.erase(it);
      writing_.insert(object);
      writes_->Spawn(WriteQueued(std::move(next), std::move(object)));
    }
    if (shutting_down_ && queued_ == 0 && writing_.empty()) {
      break;
    }
    if (co_await wake_->WaitUntil(async::Clock::TimePoint::max()) == async::WaitResult::kAborted) {
      ShutDown();
      break;
    }
  }
  co_await writes_->Join();
  writes_.reset();
  wake_.reset();
}

}  // namespace sb::kube
