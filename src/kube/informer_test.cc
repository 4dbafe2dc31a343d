// SPDX-License-Identifier: Apache-2.0
#include "kube/informer.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "kube/cache.h"
#include "testing/fake_apiserver.h"
#include "testing/run.h"

namespace sb::kube {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sb::testing::FakeApiServer;
using sb::testing::FakeReply;
using sb::testing::FakeRequest;
using sb::testing::RunSync;

Pod MakePod(const std::string& ns, const std::string& name, const std::string& rv,
            const std::string& node = "", StringMap labels = {}) {
  Pod p;
  p.metadata.namespace_ = ns;
  p.metadata.name = name;
  p.metadata.resource_version = rv;
  p.metadata.labels = std::move(labels);
  p.spec.node_name = node;
  return p;
}

// Records what handlers saw, as "ns/name" keys.
struct Recorder {
  std::vector<std::string> adds, updates, deletes;
  int same_object_updates = 0;
  Cache<Pod>::Handlers Handlers() {
    return {.on_add = [this](const Cache<Pod>::Ptr& p) { adds.push_back(ObjectKey(p->metadata)); },
            .on_update =
                [this](const Cache<Pod>::Ptr& o, const Cache<Pod>::Ptr& n) {
                  updates.push_back(ObjectKey(n->metadata));
                  if (o == n) ++same_object_updates;
                },
            .on_delete =
                [this](const Cache<Pod>::Ptr& p) { deletes.push_back(ObjectKey(p->metadata)); }};
  }
};

TEST(Cache, IndexesAndHandlers) {
  Cache<Pod> c;
  c.AddIndex(std::string(kIndexNodeName), PodNodeNameIndex());
  c.AddIndex(LabelIndexName("app"), LabelIndex<Pod>("app"));
  c.Upsert(MakePod("a", "p1", "1", "n1", {{"app", "web"}}));
  c.Upsert(MakePod("a", "p2", "2", "", {{"app", "db"}}));
  Recorder r;
  c.AddHandlers(r.Handlers());
  EXPECT_EQ(r.adds.size(), 2u);  // replayed
  c.Upsert(MakePod("b", "p1", "3", "n1", {{"app", "web"}}));
  EXPECT_EQ(c.ByIndex(kIndexNodeName, "n1").size(), 2u);
  EXPECT_EQ(c.ByIndex(kIndexNamespace, "a").size(), 2u);
  EXPECT_EQ(c.ByIndex(LabelIndexName("app"), "web").size(), 2u);
  EXPECT_TRUE(c.ByIndex("nope", "x").empty());
  // Moving a pod to another node re-indexes it.
  Cache<Pod>::Ptr before = c.Get("a/p1");
  c.Upsert(MakePod("a", "p1", "4", "n2", {{"app", "web"}}));
  EXPECT_EQ(c.ByIndex(kIndexNodeName, "n1").size(), 1u);
  EXPECT_EQ(c.ByIndex(kIndexNodeName, "n2").size(), 1u);
  EXPECT_EQ(before->spec.node_name, "n1");  // old snapshot untouched
  EXPECT_EQ(r.updates, std::vector<std::string>{"a/p1"});
  c.Remove(MakePod("a", "p1", "5", "n2"));
  EXPECT_TRUE(c.ByIndex(kIndexNodeName, "n2").empty());
  EXPECT_EQ(r.deletes, std::vector<std::string>{"a/p1"});
  c.Remove(MakePod("a", "never", "6"));  // unknown: no handler call
  EXPECT_EQ(r.deletes.size(), 1u);
}

TEST(Cache, ReplaceDeliversTheDifference) {
  Cache<Pod> c;
  c.Upsert(MakePod("ns", "keep", "1"));
  c.Upsert(MakePod("ns", "change", "2"));
  c.Upsert(MakePod("ns", "vanish", "3"));
  Recorder r;
  c.AddHandlers({});
  int id = c.AddHandlers(r.Handlers());
  r.adds.clear();
  c.Replace({MakePod("ns", "keep", "1"), MakePod("ns", "change", "9"), MakePod("ns", "new", "10")});
  EXPECT_EQ(r.adds, std::vector<std::string>{"ns/new"});
  EXPECT_EQ(r.updates, std::vector<std::string>{"ns/change"});
  EXPECT_EQ(r.deletes, std::vector<std::string>{"ns/vanish"});
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.Get("ns/vanish"), nullptr);
  c.RemoveHandlers(id);
  c.Replace({});
  EXPECT_EQ(r.deletes.size(), 1u);
  EXPECT_EQ(c.size(), 0u);
}

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ep = net::ParseEndpoint(api_.url());
    http_ = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, {}));
    client_ = MakeClient(*http_, nullptr);
  }
  void TearDown() override {
    if (informer_) {
      informer_->Stop();
      EXPECT_TRUE(RunUntil([&] { return done_; }, 5s)) << "Run() did not return after Stop()";
    }
  }

  void StartInformer(InformerOptions o = {}) {
    o.reflector.page_size = 2;
    if (o.reflector.backoff_initial == ReflectorOptions{}.backoff_initial) {
      o.reflector.backoff_initial = 5ms;
      o.reflector.backoff_max = 50ms;
    }
    informer_ = std::make_unique<Informer<Pod>>(*client_, PodsRef(), o);
    informer_->cache().AddIndex(std::string(kIndexNodeName), PodNodeNameIndex());
    informer_->cache().AddHandlers(rec_.Handlers());
    asio::co_spawn(io_, informer_->Run(), [this](std::exception_ptr e) {
      EXPECT_FALSE(e);
      done_ = true;
    });
    ASSERT_TRUE(RunUntil([&] { return informer_->HasSynced(); }, 5s));
  }

  bool RunUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(5ms);
    }
    return true;
  }

  // The cache's keys, sorted.
  std::vector<std::string> Keys() {
    std::vector<std::string> k = informer_->cache().Keys();
    std::sort(k.begin(), k.end());
    return k;
  }

  asio::io_context io_;
  FakeApiServer api_{io_};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Informer<Pod>> informer_;
  Recorder rec_;
  bool done_ = false;
};

TEST_F(InformerTest, ListsInPagesThenWatches) {
  for (int i = 0; i < 5; ++i) api_.AddPod("ns", "p" + std::to_string(i));
  StartInformer();
  EXPECT_EQ(informer_->cache().size(), 5u);
  EXPECT_EQ(api_.lists(), 3);  // pages of 2
  EXPECT_EQ(rec_.adds.size(), 5u);

  api_.AddPod("ns", "new");
  api_.SetPodNode("ns", "p1", "n1");
  api_.DeletePod("ns", "p0");
  ASSERT_TRUE(RunUntil([&] { return rec_.deletes.size() == 1; }, 5s));
  EXPECT_EQ(Keys(), (std::vector<std::string>{"ns/new", "ns/p1", "ns/p2", "ns/p3", "ns/p4"}));
  EXPECT_EQ(rec_.adds.size(), 6u);
  EXPECT_EQ(rec_.updates, std::vector<std::string>{"ns/p1"});
  EXPECT_EQ(informer_->cache().ByIndex(kIndexNodeName, "n1").size(), 1u);
  EXPECT_EQ(informer_->reflector().LastResourceVersion(), std::to_string(api_.rv()));
  EXPECT_EQ(api_.lists(), 3);  // no relist
  EXPECT_EQ(api_.watches(), 1) << "the changes came on the one watch, held open";
  EXPECT_EQ(api_.open_watches(), 1);
}

// The scheduler's watch (spec.nodeName=): a pod that is bound leaves the selection, and the
// server says so with DELETED; the cache must drop it.
TEST_F(InformerTest, PodLeavingTheFieldSelectorIsDeleted) {
  api_.AddPod("ns", "a");
  api_.AddPod("ns", "bound", {}, "n2");
  InformerOptions o;
  o.reflector.list_options.field_selector = "spec.schedulerName=s,spec.nodeName=";
  StartInformer(o);
  EXPECT_EQ(Keys(), std::vector<std::string>{"ns/a"});
  api_.AddPod("ns", "b");
  api_.SetPodNode("ns", "a", "n1");
  ASSERT_TRUE(RunUntil([&] { return rec_.deletes.size() == 1 && rec_.adds.size() == 2; }, 5s));
  EXPECT_EQ(rec_.deletes, std::vector<std::string>{"ns/a"});
  EXPECT_EQ(Keys(), std::vector<std::string>{"ns/b"});
  EXPECT_TRUE(rec_.updates.empty());
}

TEST_F(InformerTest, LabelSelectorSelectsOnListAndWatch) {
  api_.AddPod("ns", "a", {{"app", "x"}});
  api_.AddPod("ns", "b", {{"app", "y"}});
  api_.AddPod("ns", "c");
  InformerOptions o;
  o.reflector.list_options.label_selector = "app in (x,z)";
  StartInformer(o);
  EXPECT_EQ(Keys(), std::vector<std::string>{"ns/a"});
  api_.AddPod("ns", "d", {{"app", "z"}});
  api_.AddPod("ns", "e", {{"app", "y"}});
  ASSERT_TRUE(RunUntil([&] { return rec_.adds.size() == 2; }, 5s));
  EXPECT_EQ(Keys(), (std::vector<std::string>{"ns/a", "ns/d"}));
}

TEST_F(InformerTest, UnsupportedFieldSelectorIsRefused) {
  // What the apiserver answers for a field it does not index; the informer never syncs.
  auto r = RunSync(io_, client_->List(PodsRef(), {.field_selector = "spec.hostname=x"}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().http_status, 400);
}

// Pods added and deleted between two pages of the LIST: the pages still serve one state (the
// first page's), and the watch from its RV brings the changes; nothing skipped or doubled.
TEST_F(InformerTest, PagesOfOneListServeOneState) {
  for (int i = 0; i < 5; ++i) api_.AddPod("ns", "p" + std::to_string(i));
  bool changed = false;
  api_.Intercept([&](const FakeRequest& r) -> std::optional<FakeReply> {
    if (!changed && r.target.find("continue=") != std::string::npos) {
      changed = true;
      api_.DeletePod("ns", "p0");
      api_.AddPod("ns", "zz");
    }
    return std::nullopt;
  });
  StartInformer();
  ASSERT_TRUE(changed);
  ASSERT_TRUE(RunUntil([&] { return rec_.deletes.size() == 1 && rec_.adds.size() == 6; }, 5s));
  EXPECT_EQ(Keys(), (std::vector<std::string>{"ns/p1", "ns/p2", "ns/p3", "ns/p4", "ns/zz"}));
  std::multiset<std::string> adds(rec_.adds.begin(), rec_.adds.end());
  EXPECT_EQ(adds,
            (std::multiset<std::string>{"ns/p0", "ns/p1", "ns/p2", "ns/p3", "ns/p4", "ns/zz"}));
  EXPECT_EQ(rec_.deletes, std::vector<std::string>{"ns/p0"});
}

TEST_F(InformerTest, WatchFromResourceVersionZeroStartsWithTheState) {
  api_.AddPod("ns", "a");
  api_.AddPod("ns", "b");
  api_.DeletePod("ns", "b");
  api_.Compact();
  std::vector<std::string> lines;
  auto r = RunSync(
      io_, client_->Watch(PodsRef("ns"), {.resource_version = "0"}, [&](std::string_view l) {
        lines.emplace_back(l);
        api_.CloseWatches();  // the state came in one write: nothing more after the first line
        return true;
      }));
  ASSERT_TRUE(r) << r.error().ToString();  // never 410
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(R"("type":"ADDED")"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(R"("name":"a")"), std::string::npos) << lines[0];
}

TEST_F(InformerTest, BookmarkAdvancesResourceVersion) {
  api_.AddPod("ns", "a");
  bool sent = false;
  api_.Intercept([&](const FakeRequest& r) -> std::optional<FakeReply> {
    if (sent || r.target.find("watch=1") == std::string::npos) return std::nullopt;
    sent = true;
    // The server sends bookmarks only to a watch that asks for them.
    EXPECT_NE(r.target.find("allowWatchBookmarks=true"), std::string::npos) << r.target;
    return FakeApiServer::WatchReply(
        {R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"777"}}})"});
  });
  StartInformer();
  ASSERT_TRUE(RunUntil([&] { return api_.watch_rvs().size() >= 2; }, 5s));
  EXPECT_EQ(api_.watch_rvs()[0], "2");
  EXPECT_EQ(api_.watch_rvs()[1], "777");
  EXPECT_GE(informer_->reflector().stats().bookmarks, 1u);
  EXPECT_EQ(informer_->cache().size(), 1u);
  EXPECT_EQ(api_.lists(), 1);
}

// The state after the relist must equal the server's: nothing lost, nothing phantom, and the
// handlers told exactly the difference.
TEST_F(InformerTest, ErrorEvent410MidWatchRelistsAndDeliversTheDifference) {
  api_.AddPod("ns", "a");
  api_.AddPod("ns", "b");
  api_.AddPod("ns", "c");
  StartInformer();
  ASSERT_EQ(rec_.adds.size(), 3u);

  // While the informer is not looking (its watch ended): d and e appear, b goes, c moves; etcd
  // compacts.
  bool fired = false;
  api_.Intercept([&](const FakeRequest& r) -> std::optional<FakeReply> {
    if (fired || r.target.find("watch=1") == std::string::npos) return std::nullopt;
    fired = true;
    // The stream delivers d, then dies with 410 in the middle.
    return FakeApiServer::WatchReply(
        {api_.EventLine("ADDED", "ns", "d"),
         R"({"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version","reason":"Expired","code":410}})",
         api_.EventLine("ADDED", "ns", "e")});
  });
  api_.CloseWatches();
  api_.AddPod("ns", "d");
  api_.AddPod("ns", "e");
  api_.DeletePod("ns", "b");
  api_.SetPodNode("ns", "c", "n7");
  api_.Compact();
  ASSERT_TRUE(RunUntil([&] { return informer_->reflector().stats().lists >= 2; }, 5s));
  EXPECT_EQ(informer_->reflector().stats().gone, 1u);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"ns/a", "ns/c", "ns/d", "ns/e"}));
  std::multiset<std::string> adds(rec_.adds.begin(), rec_.adds.end());
  EXPECT_EQ(adds, (std::multiset<std::string>{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e"}));
  EXPECT_EQ(rec_.deletes, std::vector<std::string>{"ns/b"});
  // d came by the watch and again by the relist: an update only if its RV changed (it did not).
  EXPECT_EQ(rec_.updates, std::vector<std::string>{"ns/c"});
  EXPECT_EQ(informer_->cache().Get("ns/c")->spec.node_name, "n7");
}

TEST_F(InformerTest, Http410RelistsWithoutBackoff) {
  api_.AddPod("ns", "a");
  // A backoff would be 10 s (longer than the wait below) and is recorded.
  InformerOptions o;
  o.reflector.backoff_initial = 10s;
  o.reflector.backoff_max = 10s;
  std::vector<std::chrono::milliseconds> waits;
  o.reflector.on_backoff = [&](std::chrono::milliseconds d) { waits.push_back(d); };
  StartInformer(o);
  api_.gone_as_event = false;
  // The watch ends (a bookmark at RV 2 first); the store moves on and compacts before the next
  // watch, which gets 410 as the HTTP status.
  api_.CloseWatches();
  api_.DeletePod("ns", "a");
  api_.AddPod("ns", "z");
  api_.Compact();
  ASSERT_TRUE(RunUntil(
      [&] {
        return informer_->reflector().stats().gone >= 1 &&
               informer_->cache().Get("ns/z") != nullptr;
      },
      5s));
  EXPECT_EQ(Keys(), std::vector<std::string>{"ns/z"});
  EXPECT_EQ(rec_.deletes, std::vector<std::string>{"ns/a"});
  EXPECT_EQ(informer_->reflector().stats().errors, 0u);
  EXPECT_TRUE(waits.empty()) << "backed off " << waits.size() << " time(s) on a 410";
}

TEST_F(InformerTest, Http410AsErrorEventFromTheServer) {
  api_.AddPod("ns", "a");
  api_.gone_as_event = true;
  StartInformer();
  api_.CloseWatches();  // the next watch is from RV 2, compacted by then
  api_.AddPod("ns", "b");
  api_.Compact();
  ASSERT_TRUE(RunUntil([&] { return informer_->cache().size() == 2; }, 5s));
  EXPECT_EQ(Keys(), (std::vector<std::string>{"ns/a", "ns/b"}));
}

TEST_F(InformerTest, StreamCutMidChunkRelists) {
  api_.AddPod("ns", "a");
  StartInformer();
  bool fired = false;
  api_.Intercept([&](const FakeRequest& r) -> std::optional<FakeReply> {
    if (fired || r.target.find("watch=1") == std::string::npos) return std::nullopt;
    fired = true;
    return FakeApiServer::WatchReply(
        {api_.EventLine("ADDED", "ns", "x"), api_.EventLine("ADDED", "ns", "y")}, /*cut=*/true);
  });
  api_.CloseWatches();
  api_.AddPod("ns", "x");
  api_.AddPod("ns", "y");
  ASSERT_TRUE(
      RunUntil([&] { return fired && api_.lists() >= 2 && informer_->cache().size() == 3; }, 5s));
  EXPECT_EQ(Keys(), (std::vector<std::string>{"ns/a", "ns/x", "ns/y"}));
  EXPECT_GE(informer_->reflector().stats().errors, 1u);
  std::multiset<std::string> adds(rec_.adds.begin(), rec_.adds.end());
  EXPECT_EQ(adds, (std::multiset<std::string>{"ns/a", "ns/x", "ns/y"}));
}

// Each wait is the step's backoff (initial, doubled each time, capped) with jitter: in
// [step/2, step].
void ExpectGrowingBackoff(const std::vector<std::chrono::milliseconds>& waits,
                          std::chrono::milliseconds initial, std::chrono::milliseconds max) {
  std::chrono::milliseconds step = initial;
  for (std::size_t i = 0; i < waits.size(); ++i) {
    EXPECT_GE(waits[i], step / 2) << "wait " << i;
    EXPECT_LE(waits[i], step) << "wait " << i;
    step = std::min(step * 2, max);
  }
}

TEST_F(InformerTest, FailedListBacksOffAndRetries) {
  api_.AddPod("ns", "a");
  int failures = 0;
  api_.Intercept([&](const FakeRequest& r) -> std::optional<FakeReply> {
    if (r.target.find("watch=1") != std::string::npos || failures >= 4) return std::nullopt;
    ++failures;
    return sb::testing::HttpReply(500, R"({"kind":"Status","code":500,"message":"etcd down"})");
  });
  InformerOptions o;
  o.reflector.backoff_initial = 4ms;
  o.reflector.backoff_max = 16ms;
  std::vector<std::chrono::milliseconds> waits;
  o.reflector.on_backoff = [&](std::chrono::milliseconds d) { waits.push_back(d); };
  StartInformer(o);
  EXPECT_EQ(failures, 4);
  EXPECT_EQ(informer_->cache().size(), 1u);
  EXPECT_EQ(informer_->reflector().stats().errors, 4u);
  // One wait per failure, growing 4, 8, 16, 16 ms (jittered): no tight loop.
  ASSERT_EQ(waits.size(), 4u);
  ExpectGrowingBackoff(waits, 4ms, 16ms);
  EXPECT_GT(waits[2], waits[0]);
}

TEST_F(InformerTest, ResyncDeliversUpdatesWithTheSameObject) {
  api_.AddPod("ns", "a");
  api_.AddPod("ns", "b");
  InformerOptions o;
  o.resync_period = 30ms;
  StartInformer(o);
  ASSERT_TRUE(RunUntil([&] { return rec_.same_object_updates >= 4; }, 5s));
}

TEST_F(InformerTest, EmptyWatchesThatEndAtOnceDoNotSpin) {
  api_.AddPod("ns", "a");
  api_.send_bookmarks = false;
  api_.end_watches_at_once = true;
  InformerOptions o;
  o.reflector.backoff_initial = 2ms;
  o.reflector.backoff_max = 8ms;
  std::vector<std::chrono::milliseconds> waits;
  o.reflector.on_backoff = [&](std::chrono::milliseconds d) { waits.push_back(d); };
  StartInformer(o);
  ASSERT_TRUE(RunUntil([&] { return api_.watches() >= 6; }, 5s));
  // Every watch that ended at once with nothing in it was followed by a growing wait.
  EXPECT_GE(waits.size() + 1, static_cast<std::size_t>(api_.watches()));
  ExpectGrowingBackoff(waits, 2ms, 8ms);
  EXPECT_EQ(api_.lists(), 1);  // a short watch re-watches, it does not relist
}

TEST_F(InformerTest, StopEndsALongWatchPromptly) {
  api_.AddPod("ns", "a");
  StartInformer();
  ASSERT_TRUE(RunUntil([&] { return api_.watches() >= 1; }, 5s));
  informer_->Stop();
  // The fake holds the watch open until CloseWatches(): Run() returning at all shows that Stop()
  // cut it.
  ASSERT_TRUE(RunUntil([&] { return done_; }, 60s));
}

}  // namespace
}  // namespace sb::kube
