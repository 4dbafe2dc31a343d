// SPDX-License-Identifier: Apache-2.0
//
// The Kubernetes client against the real kube-apiserver (1.36.2) of the test environment
// ($SB_TESTENV): kubeconfig + TLS + token, a watch over 1,000 pod changes, paging through 5,000
// pods, and an etcd compaction that forces a 410 and a relist.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/informer.h"
#include "testing/apiserver_contract.h"
#include "testing/run.h"
#include "testing/testenv.h"

namespace sb::kube {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::TestEnv;

// Forwards to a real Client; can hold new watches back and end the current one (on its next
// line), so a test can let the store move on while the reflector is not watching.
class PausableClient final : public Client {
 public:
  explicit PausableClient(Client& inner) : inner_(inner) {}
  asio::awaitable<Result<std::string>> Get(ResourceRef ref) override {
    co_return co_await inner_.Get(std::move(ref));
  }
  asio::awaitable<Result<std::string>> List(ResourceRef ref, ListOptions o) override {
    ++lists;
    co_return co_await inner_.List(std::move(ref), std::move(o));
  }
  asio::awaitable<Result<std::string>> Create(ResourceRef ref, std::string body) override {
    co_return co_await inner_.Create(std::move(ref), std::move(body));
  }
  asio::awaitable<Result<std::string>> Update(ResourceRef ref, std::string body) override {
    co_return co_await inner_.Update(std::move(ref), std::move(body));
  }
  asio::awaitable<Result<std::string>> Patch(ResourceRef ref, PatchType t,
                                             std::string body) override {
    co_return co_await inner_.Patch(std::move(ref), t, std::move(body));
  }
  asio::awaitable<Result<std::string>> Delete(ResourceRef ref, DeleteOptions o) override {
    co_return co_await inner_.Delete(std::move(ref), std::move(o));
  }
  asio::awaitable<Result<void>> Watch(ResourceRef ref, ListOptions o,
                                      std::function<bool(std::string_view)> on_line) override {
    while (paused) {
      asio::steady_timer t(co_await asio::this_coro::executor, 20ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    watch_rvs.push_back(o.resource_version);
    in_watch = true;
    // A named std::function: GCC 12 destroys a lambda temporary that captures a std::function
    // twice when it is converted inside a co_await expression (seen with valgrind).
    std::function<bool(std::string_view)> forward = [this, &on_line](std::string_view l) {
      return paused ? false : on_line(l);
    };
    Result<void> r = co_await inner_.Watch(std::move(ref), std::move(o), forward);
    in_watch = false;
    co_return r;
  }

  bool paused = false;
  bool in_watch = false;
  int lists = 0;
  std::vector<std::string> watch_rvs;

 private:
  Client& inner_;
};

class KubeE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto env = TestEnv::Load(&why);
    ASSERT_TRUE(env.has_value()) << why;
    env_ = *env;
    ::setenv("KUBECONFIG", env_.Get("KUBECONFIG").c_str(), 1);
    Result<Config> cfg = LoadConfig({});
    ASSERT_TRUE(cfg) << cfg.error().message;
    config_ = *cfg;
    net::ClientOptions o;
    o.max_idle_connections = 64;
    o.timeout = std::chrono::seconds(120);  // deleting 5,000 pods in one request takes a while
    auto http = MakeHttpClient(io_.get_executor(), config_, o);
    ASSERT_TRUE(http) << http.error().message;
    http_ = std::move(*http);
    client_ = MakeClient(*http_, config_.token);
    ns_ = "kube-e2e-" + std::to_string(::getpid()) + "-" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::transform(ns_.begin(), ns_.end(), ns_.begin(), [](char c) {
      return static_cast<char>(std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '-');
    });
    if (ns_.size() > 60) ns_.resize(60);
    Namespace n;
    n.metadata.name = ns_;
    auto created = RunSync(io_, CreateAs<Namespace>(*client_, NamespacesRef(), n));
    ASSERT_TRUE(created) << created.error().message;
  }

  void TearDown() override {
    if (!client_) return;
    // No namespace controller runs in the environment: delete the pods ourselves.
    for (int i = 0; i < 5; ++i) {
      (void)RunSync(io_, client_->Delete(PodsRef(ns_), {.grace_period_seconds = 0}));
      Result<List<Pod>> left = RunSync(io_, ListAs<Pod>(*client_, PodsRef(ns_), {.limit = 1}));
      if (left && left->items.empty()) break;
    }
    (void)RunSync(io_, client_->Delete(EventsRef(ns_), {}));
    (void)RunSync(io_, client_->Delete(NamespacesRef().WithName(ns_), {}));
  }

  bool RunUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(10ms);
    }
    return true;
  }

  // Runs `count` operations, `parallel` at a time; op(i) is a coroutine. Returns the failures.
  std::vector<Error> RunParallel(int count, int parallel,
                                 std::function<asio::awaitable<Result<void>>(int)> op) {
    int next = 0;
    int running = 0;
    std::vector<Error> errors;
    std::function<void()> start_one = [&] {
      int i = next++;
      ++running;
      asio::co_spawn(io_, op(i), [&](std::exception_ptr e, Result<void> r) {
        --running;
        if (e) {
          errors.push_back(Error{ErrorCode::kInternal, "exception", 0});
        } else if (!r) {
          errors.push_back(r.error());
        }
        if (next < count) start_one();
      });
    };
    for (int i = 0; i < std::min(parallel, count); ++i) start_one();
    EXPECT_TRUE(RunUntil([&] { return running == 0 && next >= count; }, 300s));
    return errors;
  }

  static Pod MakePod(const std::string& ns, const std::string& name) {
    Pod p;
    p.metadata.namespace_ = ns;
    p.metadata.name = name;
    p.metadata.labels = {{"app", "e2e"}};
    p.spec.scheduler_name = "slurm-bridge-scheduler";
    Container c;
    c.name = "c";
    c.image = "busybox";
    c.resources.requests = {{"cpu", "100m"}};
    p.spec.containers.push_back(c);
    return p;
  }

  asio::awaitable<Result<void>> CreateNamedPod(std::string name) {
    Result<Pod> r = co_await CreatePod(*client_, MakePod(ns_, std::move(name)));
    if (!r) co_return tl::unexpected(r.error());
    co_return Result<void>{};
  }

  asio::awaitable<Result<void>> LabelPod(std::string name) {
    // (Built outside the co_await: GCC 12 rejects braced string-literal maps in coroutines.)
    std::map<std::string, std::optional<std::string>> labels;
    labels["updated"] = "yes";
    std::string patch = EncodeMetadataMergePatch(labels, {});
    Result<std::string> r = co_await client_->Patch(PodsRef(ns_).WithName(std::move(name)),
                                                    PatchType::kJsonMerge, std::move(patch));
    if (!r) co_return tl::unexpected(r.error());
    co_return Result<void>{};
  }

  TestEnv env_;
  Config config_;
  asio::io_context io_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<Client> client_;
  std::string ns_;
};

TEST_F(KubeE2e, KubeconfigFromEnvironmentWithTlsCaAndToken) {
  EXPECT_EQ(config_.server, env_.Get("KUBE_APISERVER_URL"));
  EXPECT_EQ(config_.tls.ca_file, env_.Get("KUBE_CA_FILE"));
  EXPECT_EQ(config_.token->path(), env_.Get("KUBE_TOKEN_FILE"));
  Result<Namespace> ns = RunSync(io_, GetAs<Namespace>(*client_, NamespacesRef().WithName(ns_)));
  ASSERT_TRUE(ns) << ns.error().message;
  EXPECT_EQ(ns->metadata.name, ns_);
  EXPECT_EQ(ns->phase, "Active");

  // A wrong token: 401 with the apiserver's message, and never the token in the error.
  auto bad = MakeClient(*http_, std::make_shared<TokenSource>(TokenSource::Static("wrong-tok")));
  Result<std::string> denied = RunSync(io_, bad->Get(NamespacesRef().WithName(ns_)));
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kUnauthenticated);
  EXPECT_EQ(denied.error().http_status, 401);
  EXPECT_EQ(denied.error().message.find("wrong-tok"), std::string::npos);

  // Without the CA the server's certificate is not trusted.
  Config no_ca = config_;
  no_ca.tls.ca_file.clear();
  auto http = MakeHttpClient(io_.get_executor(), no_ca);
  ASSERT_TRUE(http);
  auto untrusting = MakeClient(**http, config_.token);
  Result<std::string> tls = RunSync(io_, untrusting->Get(NamespacesRef().WithName(ns_)));
  ASSERT_FALSE(tls);
  EXPECT_EQ(tls.error().http_status, 0);

  // Errors from the apiserver keep its Status.
  Result<Pod> missing = RunSync(io_, GetPod(*client_, ns_, "no-such-pod"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("pods \"no-such-pod\" not found"), std::string::npos)
      << missing.error().message;
}

TEST_F(KubeE2e, WritesBindingConflictAndPreconditions) {
  Result<Pod> pod = RunSync(io_, CreatePod(*client_, MakePod(ns_, "w")));
  ASSERT_TRUE(pod) << pod.error().message;
  Result<Pod> again = RunSync(io_, CreatePod(*client_, MakePod(ns_, "w")));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);

  // Update with a stale resourceVersion: 409.
  Pod stale = *pod;
  stale.metadata.labels["x"] = "1";
  ASSERT_TRUE(RunSync(io_, UpdateAs<Pod>(*client_, PodsRef(ns_).WithName("w"), stale)));
  stale.metadata.labels["x"] = "2";
  Result<Pod> conflict = RunSync(io_, UpdateAs<Pod>(*client_, PodsRef(ns_).WithName("w"), stale));
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error().code, ErrorCode::kConflict);

  // Three patch types.
  ASSERT_TRUE(RunSync(io_, client_->Patch(PodsRef(ns_).WithName("w"), PatchType::kJsonMerge,
                                          EncodeMetadataMergePatch({{"m", "1"}}, {}))));
  ASSERT_TRUE(RunSync(io_, client_->Patch(PodsRef(ns_).WithName("w"), PatchType::kStrategicMerge,
                                          R"({"metadata":{"labels":{"s":"1"}}})")));
  ASSERT_TRUE(
      RunSync(io_, client_->Patch(PodsRef(ns_).WithName("w"), PatchType::kJson,
                                  R"([{"op":"add","path":"/metadata/labels/j","value":"1"}])")));
  Result<Pod> patched = RunSync(io_, GetPod(*client_, ns_, "w"));
  ASSERT_TRUE(patched);
  EXPECT_EQ(patched->metadata.labels.at("m"), "1");
  EXPECT_EQ(patched->metadata.labels.at("s"), "1");
  EXPECT_EQ(patched->metadata.labels.at("j"), "1");

  // Status subresource, then binding (once; the second is a conflict).
  ASSERT_TRUE(RunSync(io_, PatchPodStatus(*client_, ns_, "w", PatchType::kStrategicMerge,
                                          R"({"status":{"phase":"Pending","message":"e2e"}})")));
  std::string node = "kube-e2e-node-" + std::to_string(::getpid());
  Result<void> bound = RunSync(io_, BindPod(*client_, ns_, "w", pod->metadata.uid, node));
  ASSERT_TRUE(bound) << bound.error().message;
  Result<void> rebound = RunSync(io_, BindPod(*client_, ns_, "w", pod->metadata.uid, node));
  ASSERT_FALSE(rebound);
  EXPECT_EQ(rebound.error().code, ErrorCode::kConflict);
  EXPECT_EQ(RunSync(io_, GetPod(*client_, ns_, "w"))->spec.node_name, node);

  // Delete with a wrong UID precondition: 409; with the right one: gone.
  Result<void> wrong = RunSync(
      io_, DeletePod(*client_, ns_, "w", {.grace_period_seconds = 0, .uid = "not-the-uid"}));
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::kConflict);
  ASSERT_TRUE(RunSync(
      io_, DeletePod(*client_, ns_, "w", {.grace_period_seconds = 0, .uid = pod->metadata.uid})));
  EXPECT_EQ(RunSync(io_, GetPod(*client_, ns_, "w")).error().code, ErrorCode::kNotFound);
}

// What the fake apiserver of the unit tests models, on the real 1.36 apiserver: the same
// scenario (testing/apiserver_contract.h) runs against both (test audit N3).
TEST_F(KubeE2e, PassesTheApiserverContractAsTheFakeDoes) {
  sb::testing::RunPatchAndDeleteContract(io_, *client_, ns_, [&](const std::string& name) {
    Result<Pod> pod = RunSync(io_, CreatePod(*client_, MakePod(ns_, name)));
    ASSERT_TRUE(pod) << pod.error().message;
  });
}

// A current apiserver (1.25 on) serves policy/v1 only: discovery says so, and the eviction (sent
// as v1) goes through. (The policy/v1beta1 fallback for servers before 1.22 is tested against a
// fake with a 1.20 server's discovery document in client_test.cc.)
TEST_F(KubeE2e, EvictionFollowsDiscovery) {
  Result<std::vector<std::string>> versions = RunSync(io_, client_->GroupVersions("policy"));
  ASSERT_TRUE(versions) << versions.error().message;
  EXPECT_EQ(*versions, std::vector<std::string>{"v1"});
  ASSERT_TRUE(RunSync(io_, CreatePod(*client_, MakePod(ns_, "evicted"))));
  Result<void> evicted =
      RunSync(io_, EvictPod(*client_, ns_, "evicted", {.grace_period_seconds = 0}));
  ASSERT_TRUE(evicted) << evicted.error().message;
  Result<Pod> after = RunSync(io_, GetPod(*client_, ns_, "evicted"));
  // Gone, or (no kubelet runs in the environment) marked for deletion.
  if (after) {
    EXPECT_FALSE(after->metadata.deletion_timestamp.empty()) << "the eviction deleted nothing";
  } else {
    EXPECT_EQ(after.error().code, ErrorCode::kNotFound);
  }
}

// 400 creates, 300 updates and 300 deletes while an informer watches: it must see every one.
TEST_F(KubeE2e, WatchOver1000PodChangesMissesNone) {
  Informer<Pod> informer(*client_, PodsRef(ns_),
                         {.reflector = {.page_size = 500, .backoff_initial = 50ms}});
  // A delete of a pod first sets its deletionTimestamp (a MODIFIED), then removes it (DELETED);
  // updates count only the others, which are ours.
  std::map<std::string, int> adds, updates, deletes;
  informer.cache().AddHandlers(
      {.on_add = [&](const Cache<Pod>::Ptr& p) { ++adds[p->metadata.name]; },
       .on_update =
           [&](const Cache<Pod>::Ptr& o, const Cache<Pod>::Ptr& n) {
             if (o->metadata.resource_version != n->metadata.resource_version &&
                 n->metadata.deletion_timestamp.empty()) {
               EXPECT_EQ(n->metadata.labels.count("updated"), 1u) << n->metadata.name;
               ++updates[n->metadata.name];
             }
           },
       .on_delete = [&](const Cache<Pod>::Ptr& p) { ++deletes[p->metadata.name]; }});
  bool done = false;
  asio::co_spawn(io_, informer.Run(), [&](std::exception_ptr) { done = true; });
  ASSERT_TRUE(RunUntil([&] { return informer.HasSynced(); }, 30s));

  auto name = [](int i) { return "p" + std::to_string(i); };
  std::vector<Error> errs = RunParallel(400, 16, [&](int i) { return CreateNamedPod(name(i)); });
  ASSERT_TRUE(errs.empty()) << errs.front().message;
  errs = RunParallel(300, 16, [&](int i) { return LabelPod(name(i)); });
  ASSERT_TRUE(errs.empty()) << errs.front().message;
  errs = RunParallel(300, 16, [&](int i) {
    return DeletePod(*client_, ns_, name(100 + i), {.grace_period_seconds = 0});
  });
  ASSERT_TRUE(errs.empty()) << errs.front().message;

  // p0..p99 remain (p0..p99 updated), p100..p399 deleted (p100..p299 after an update).
  EXPECT_TRUE(RunUntil(
      [&] {
        int d = 0;
        for (const auto& [k, v] : deletes) d += v;
        return d >= 300;
      },
      60s))
      << "adds=" << adds.size() << " updates=" << updates.size() << " deletes=" << deletes.size()
      << " lists=" << informer.reflector().stats().lists
      << " watches=" << informer.reflector().stats().watches
      << " events=" << informer.reflector().stats().events
      << " errors=" << informer.reflector().stats().errors
      << " gone=" << informer.reflector().stats().gone;
  RunUntil([] { return false; }, 300ms);  // anything late or duplicated would show now
  for (int i = 100; i < 400; ++i) {
    if (deletes[name(i)] == 0) {
      Result<Pod> p = RunSync(io_, GetPod(*client_, ns_, name(i)));
      ADD_FAILURE() << name(i) << " not seen deleted; server: "
                    << (p ? "exists, deletionTimestamp=" + p->metadata.deletion_timestamp +
                                " rv=" + p->metadata.resource_version
                          : p.error().message)
                    << " cache rv="
                    << (informer.cache().Get(ns_ + "/" + name(i))
                            ? informer.cache().Get(ns_ + "/" + name(i))->metadata.resource_version
                            : "none")
                    << " last rv=" << informer.reflector().LastResourceVersion();
    }
  }
  int total_adds = 0, total_updates = 0, total_deletes = 0;
  for (int i = 0; i < 400; ++i) {
    SCOPED_TRACE(name(i));
    EXPECT_EQ(adds[name(i)], 1);
    EXPECT_EQ(updates[name(i)], i < 300 ? 1 : 0);
    EXPECT_EQ(deletes[name(i)], i >= 100 ? 1 : 0);
    total_adds += adds[name(i)];
    total_updates += updates[name(i)];
    total_deletes += deletes[name(i)];
  }
  EXPECT_EQ(total_adds + total_updates + total_deletes, 1000);
  EXPECT_EQ(informer.cache().size(), 100u);
  EXPECT_EQ(informer.reflector().stats().lists, 1u) << "the watch itself must carry every change";
  EXPECT_GE(informer.reflector().stats().events, 1000u);

  Result<List<Pod>> server = RunSync(io_, ListAllAs<Pod>(*client_, PodsRef(ns_), {}));
  ASSERT_TRUE(server);
  for (const Pod& p : server->items) {
    auto cached = informer.cache().Get(ObjectKey(p.metadata));
    ASSERT_TRUE(cached) << p.metadata.name;
    EXPECT_EQ(cached->metadata.resource_version, p.metadata.resource_version);
  }
  informer.Stop();
  ASSERT_TRUE(RunUntil([&] { return done; }, 10s));
}

TEST_F(KubeE2e, PagingThrough5000Pods) {
  auto start = std::chrono::steady_clock::now();
  std::vector<Error> errs =
      RunParallel(5000, 32, [&](int i) { return CreateNamedPod("pod-" + std::to_string(i)); });
  ASSERT_TRUE(errs.empty()) << errs.size() << " failed, first: " << errs.front().message;
  auto created = std::chrono::steady_clock::now();
  std::cout << "created 5000 pods in "
            << std::chrono::duration_cast<std::chrono::milliseconds>(created - start).count()
            << " ms\n";

  ListOptions o;
  o.limit = 500;
  int pages = 0;
  std::set<std::string> names;
  std::string rv;
  for (;;) {
    Result<List<Pod>> page = RunSync(io_, ListAs<Pod>(*client_, PodsRef(ns_), o));
    ASSERT_TRUE(page) << page.error().message;
    ++pages;
    if (pages == 1) rv = page->resource_version;
    EXPECT_EQ(page->resource_version, rv);  // one consistent snapshot
    EXPECT_LE(page->items.size(), 500u);
    for (const Pod& p : page->items) {
      EXPECT_TRUE(names.insert(p.metadata.name).second) << "duplicate " << p.metadata.name;
    }
    if (page->continue_token.empty()) break;
    o.continue_token = page->continue_token;
  }
  EXPECT_EQ(pages, 10);
  EXPECT_EQ(names.size(), 5000u);

  auto t0 = std::chrono::steady_clock::now();
  Result<List<Pod>> all = RunSync(io_, ListAllAs<Pod>(*client_, PodsRef(ns_), {.limit = 500}));
  auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(all);
  EXPECT_EQ(all->items.size(), 5000u);
  std::cout << "paged LIST of 5000 pods (500 per page) incl. decode: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(t1 - t0).count() << " ms\n";

  // An informer syncs the same 5,000 through its paged LIST.
  Informer<Pod> informer(*client_, PodsRef(ns_), {.reflector = {.page_size = 500}});
  bool done = false;
  asio::co_spawn(io_, informer.Run(), [&](std::exception_ptr) { done = true; });
  ASSERT_TRUE(RunUntil([&] { return informer.HasSynced(); }, 60s));
  EXPECT_EQ(informer.cache().size(), 5000u);
  informer.Stop();
  ASSERT_TRUE(RunUntil([&] { return done; }, 10s));
}

// Events are not in the apiserver's watch cache (DefaultWatchCacheSizes: events 0), so their
// watches read etcd directly: after an etcd compaction, a watch from an older RV gets 410.
TEST_F(KubeE2e, EtcdCompactionForces410AndRelistLosesNothing) {
  auto make_event = [&](const std::string& name, const std::string& msg) {
    Event e;
    e.metadata.name = name;
    e.metadata.namespace_ = ns_;
    e.involved_object = {.api_version = "v1", .kind = "Pod", .namespace_ = ns_, .name = "x"};
    e.reason = "Test";
    e.message = msg;
    e.type = "Normal";
    e.count = 1;
    e.source_component = "kube-e2e";
    return e;
  };
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(RunSync(
        io_, CreateAs<Event>(*client_, EventsRef(ns_), make_event("e" + std::to_string(i), "v1"))));
  }
  PausableClient pausable(*client_);
  Informer<Event> informer(
      pausable, EventsRef(ns_),
      {.reflector = {.min_watch_timeout = 1s, .backoff_initial = 50ms, .backoff_max = 500ms}});
  std::map<std::string, int> adds, updates, deletes;
  informer.cache().AddHandlers(
      {.on_add = [&](const Cache<Event>::Ptr& p) { ++adds[p->metadata.name]; },
       .on_update = [&](const Cache<Event>::Ptr&,
                        const Cache<Event>::Ptr& n) { ++updates[n->metadata.name]; },
       .on_delete = [&](const Cache<Event>::Ptr& p) { ++deletes[p->metadata.name]; }});
  bool done = false;
  asio::co_spawn(io_, informer.Run(), [&](std::exception_ptr) { done = true; });
  ASSERT_TRUE(RunUntil([&] { return informer.HasSynced(); }, 30s));
  ASSERT_TRUE(RunUntil([&] { return pausable.in_watch; }, 10s));
  const std::string watched_rv = informer.reflector().LastResourceVersion();

  // Hold the informer off; the watch ends within its 1-2 s timeout.
  pausable.paused = true;
  ASSERT_TRUE(RunUntil([&] { return !pausable.in_watch; }, 10s));
  ASSERT_EQ(informer.reflector().LastResourceVersion(), watched_rv);

  // Meanwhile: 5 new events, 3 deleted, 2 changed.
  for (int i = 10; i < 15; ++i) {
    ASSERT_TRUE(RunSync(
        io_, CreateAs<Event>(*client_, EventsRef(ns_), make_event("e" + std::to_string(i), "v1"))));
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        RunSync(io_, client_->Delete(EventsRef(ns_).WithName("e" + std::to_string(i)), {})));
  }
  for (int i = 3; i < 5; ++i) {
    ASSERT_TRUE(RunSync(io_, client_->Patch(EventsRef(ns_).WithName("e" + std::to_string(i)),
                                            PatchType::kJsonMerge, R"({"message":"v2"})")));
  }

  // Compact etcd through its gRPC gateway up to its current revision.
  std::string out;
  const std::string etcd = env_.Get("ETCD_URL");
  ASSERT_EQ(sb::testing::RunCommand(
                "curl -sf -X POST " + etcd + "/v3/kv/range -d '{\"key\":\"AA==\"}'", &out),
            0);
  std::string revision(
      boost::json::parse(out).at("header").at("revision").as_string());  // int64 as string
  ASSERT_EQ(sb::testing::RunCommand("curl -sf -X POST " + etcd +
                                        "/v3/kv/compaction -d '{\"revision\":\"" + revision +
                                        "\",\"physical\":true}'",
                                    &out),
            0)
      << out;

  const int lists_before = pausable.lists;
  pausable.paused = false;
  ASSERT_TRUE(RunUntil(
      [&] {
        return informer.reflector().stats().gone >= 1 && informer.reflector().stats().lists >= 2;
      },
      30s))
      << "gone=" << informer.reflector().stats().gone
      << " errors=" << informer.reflector().stats().errors;
  EXPECT_GT(pausable.lists, lists_before);
  EXPECT_EQ(pausable.watch_rvs.back(), informer.reflector().LastResourceVersion());

  // The cache equals the server; the handlers saw exactly the difference.
  Result<List<Event>> server = RunSync(io_, ListAllAs<Event>(*client_, EventsRef(ns_), {}));
  ASSERT_TRUE(server);
  std::set<std::string> server_keys, cache_keys;
  for (const Event& e : server->items) {
    server_keys.insert(ObjectKey(e.metadata));
    auto c = informer.cache().Get(ObjectKey(e.metadata));
    ASSERT_TRUE(c) << e.metadata.name;
    EXPECT_EQ(c->metadata.resource_version, e.metadata.resource_version);
    EXPECT_EQ(c->message, e.message);
  }
  for (const std::string& k : informer.cache().Keys()) cache_keys.insert(k);
  EXPECT_EQ(cache_keys, server_keys);
  EXPECT_EQ(server_keys.size(), 12u);
  for (int i = 0; i < 15; ++i) {
    std::string n = "e" + std::to_string(i);
    SCOPED_TRACE(n);
    EXPECT_EQ(adds[n], 1);
    EXPECT_EQ(deletes[n], i < 3 ? 1 : 0);
    EXPECT_EQ(updates[n], (i == 3 || i == 4) ? 1 : 0);
  }
  informer.Stop();
  ASSERT_TRUE(RunUntil([&] { return done; }, 10s));
}

}  // namespace
}  // namespace sb::kube
