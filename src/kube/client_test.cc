// SPDX-License-Identifier: Apache-2.0
#include "kube/client.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "testing/fake_apiserver.h"
#include "testing/fake_http_server.h"
#include "testing/run.h"

namespace sb::kube {
namespace {

using sb::testing::FakeHttpServer;
using sb::testing::FakeReply;
using sb::testing::FakeRequest;
using sb::testing::HttpReply;
using sb::testing::RunSync;
namespace asio = boost::asio;

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return boost::json::serialize(boost::json::object{{"kind", "Status"},
                                                    {"status", "Failure"},
                                                    {"code", code},
                                                    {"reason", reason},
                                                    {"message", message}});
}

class ClientTest : public ::testing::Test {
 protected:
  // Starts the fake server with `handler` and a client with a static token.
  void Start(FakeHttpServer::Handler handler,
             std::shared_ptr<TokenSource> token =
                 std::make_shared<TokenSource>(TokenSource::Static("tok-123")),
             ClientOptions options = {}) {
    server_ = std::make_unique<FakeHttpServer>(io_, std::move(handler));
    auto ep = net::ParseEndpoint(server_->url());
    net::ClientOptions http_options;
    http_options.backoff_base = std::chrono::milliseconds(1);
    http_ = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, http_options));
    client_ = MakeClient(*http_, std::move(token), options);
  }

  asio::io_context io_;
  std::unique_ptr<FakeHttpServer> server_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<Client> client_;
};

TEST(ResourceRef, Paths) {
  EXPECT_EQ(PodsRef().Path(), "/api/v1/pods");
  EXPECT_EQ((ResourceRef{.group = "policy", .version = ""}).Path(), "/apis/policy");
  EXPECT_EQ((ResourceRef{.group = "policy", .version = "v1"}).Path(), "/apis/policy/v1");
  EXPECT_EQ(PodsRef("ns").WithName("p").WithSubresource("binding").Path(),
            "/api/v1/namespaces/ns/pods/p/binding");
  EXPECT_EQ(NodesRef().WithName("n1").WithSubresource("status").Path(), "/api/v1/nodes/n1/status");
  EXPECT_EQ(LeasesRef("kube-system").WithName("x").Path(),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x");
  EXPECT_EQ(NamespacesRef().WithName("a").Path(), "/api/v1/namespaces/a");
  ResourceRef js{"jobset.x-k8s.io", "v1alpha2", "jobsets", "ns", "a b", ""};
  EXPECT_EQ(js.Path(), "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/a%20b");
}

TEST(ListOptions, QueryIsPercentEncoded) {
  ListOptions o;
  o.label_selector = "app in (a,b),tier!=fe";
  o.field_selector = "spec.nodeName=";
  o.limit = 500;
  o.continue_token = "abc/+=";
  EXPECT_EQ(o.Query(false),
            "labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dfe&fieldSelector=spec.nodeName%3D"
            "&limit=500&continue=abc%2F%2B%3D");
  o.resource_version = "77";
  o.allow_watch_bookmarks = true;
  o.timeout_seconds = 300;
  EXPECT_EQ(o.Query(true),
            "watch=1&labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dfe&fieldSelector=spec."
            "nodeName%3D&resourceVersion=77&allowWatchBookmarks=true&timeoutSeconds=300");
}

TEST_F(ClientTest, GetSendsBearerTokenAndDecodes) {
  Start([](const FakeRequest& r) {
    if (r.Header("Authorization") != "Bearer tok-123") return HttpReply(401, "{}");
    return HttpReply(200, R"({"metadata":{"name":"p","namespace":"ns","uid":"u"}})");
  });
  Result<Pod> pod = RunSync(io_, GetPod(*client_, "ns", "p"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(pod->metadata.uid, "u");
  ASSERT_EQ(server_->requests().size(), 1u);
  EXPECT_EQ(server_->requests()[0].target, "/api/v1/namespaces/ns/pods/p");
  EXPECT_EQ(server_->requests()[0].method, "GET");
}

TEST_F(ClientTest, ErrorsKeepStatusAndApiserverMessageButNoToken) {
  struct Case {
    int status;
    std::string reason;
    ErrorCode want;
  };
  const std::vector<Case> cases = {
      {404, "NotFound", ErrorCode::kNotFound},
      {409, "Conflict", ErrorCode::kConflict},
      {409, "AlreadyExists", ErrorCode::kAlreadyExists},
      {410, "Expired", ErrorCode::kGone},
      {403, "Forbidden", ErrorCode::kPermissionDenied},
      {422, "Invalid", ErrorCode::kInvalidArgument},
      {500, "InternalError", ErrorCode::kUnavailable},
  };
  std::size_t i = 0;
  Start([&](const FakeRequest&) {
    const Case& c = cases[i];
    return HttpReply(c.status, StatusBody(c.status, c.reason, "msg-" + c.reason));
  });
  for (i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.reason);
    Result<std::string> r = RunSync(io_, client_->Get(PodsRef("ns").WithName("p")));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, c.want);
    EXPECT_EQ(r.error().http_status, c.status);
    EXPECT_NE(r.error().message.find("msg-" + c.reason), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(c.reason), std::string::npos);
    EXPECT_EQ(r.error().message.find("tok-123"), std::string::npos);
  }
}

TEST_F(ClientTest, UpdateConflictIsKConflict) {
  Start([](const FakeRequest& r) {
    EXPECT_EQ(r.method, "PUT");
    EXPECT_NE(r.body.find("\"resourceVersion\":\"5\""), std::string::npos);
    return HttpReply(409, StatusBody(409, "Conflict",
                                     "Operation cannot be fulfilled on leases \"x\": the object "
                                     "has been modified"));
  });
  Lease l;
  l.metadata.name = "x";
  l.metadata.namespace_ = "kube-system";
  l.metadata.resource_version = "5";
  l.holder_identity = "me";
  Result<Lease> r =
      RunSync(io_, UpdateAs<Lease>(*client_, LeasesRef("kube-system").WithName("x"), l));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kConflict);
  EXPECT_EQ(r.error().http_status, 409);
  EXPECT_NE(r.error().message.find("has been modified"), std::string::npos);
}

// The waits the client asks for before its throttled retries (none really taken).
ClientOptions RecordThrottleWaits(std::vector<std::chrono::milliseconds>* waits) {
  ClientOptions o;
  o.throttle_wait = [waits](std::chrono::milliseconds d) -> boost::asio::awaitable<void> {
    waits->push_back(d);
    co_return;
  };
  return o;
}

TEST_F(ClientTest, RetriesAfter429WithRetryAfter) {
  int calls = 0;
  std::vector<std::chrono::milliseconds> waits;
  Start(
      [&](const FakeRequest&) {
        if (++calls == 1) {
          return HttpReply(429, StatusBody(429, "TooManyRequests", "slow down"), "application/json",
                           {{"Retry-After", "7"}});
        }
        return HttpReply(200, R"({"metadata":{"name":"n1"}})");
      },
      std::make_shared<TokenSource>(), RecordThrottleWaits(&waits));
  Result<Node> n = RunSync(io_, GetNode(*client_, "n1"));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(waits, std::vector<std::chrono::milliseconds>{std::chrono::seconds(7)});
}

// clientQPS / clientBurst (issue #26, upstream 1.3's keys): requests past the burst wait for
// their tokens, a 429's retry and a watch included; the waits are the token bucket's.
TEST_F(ClientTest, ClientQpsPacesRequestsPastTheBurst) {
  int calls = 0;
  std::vector<std::chrono::milliseconds> waits;
  ClientOptions o = RecordThrottleWaits(&waits);
  o.qps = 10;
  o.burst = 2;
  const auto t0 = std::chrono::steady_clock::time_point() + std::chrono::hours(1);
  o.now = [t0] { return t0; };  // every request at once
  Start(
      [&](const FakeRequest& req) {
        ++calls;
        if (req.target.find("watch=") != std::string::npos) return HttpReply(200, "");
        if (calls == 3) {
          return HttpReply(429, StatusBody(429, "TooManyRequests", "slow down"), "application/json",
                           {{"Retry-After", "1"}});
        }
        return HttpReply(200, R"({"metadata":{"name":"n1"}})");
      },
      std::make_shared<TokenSource>(), o);
  for (int i = 0; i < 3; ++i) {
    Result<Node> n = RunSync(io_, GetNode(*client_, "n1"));
    ASSERT_TRUE(n) << n.error().message;
  }
  ASSERT_TRUE(RunSync(io_, client_->Watch(NodesRef(), {}, [](std::string_view) { return true; })));
  using std::chrono::milliseconds;
  EXPECT_EQ(waits, (std::vector<milliseconds>{milliseconds(100), milliseconds(1000),
                                              milliseconds(200), milliseconds(300)}))
      << "GET 1, 2: the burst; GET 3: 100 ms, its 429's Retry-After 1 s, its retry 200 ms; the "
         "watch 300 ms";
  EXPECT_EQ(calls, 5);
}

TEST_F(ClientTest, RetryAfterIsBoundedAndDefaulted) {
  int calls = 0;
  std::vector<std::chrono::milliseconds> waits;
  Start(
      [&](const FakeRequest&) {
        ++calls;
        if (calls == 1) {
          return HttpReply(429, StatusBody(429, "TooManyRequests", "slow down"), "application/json",
                           {{"Retry-After", "86400"}});
        }
        if (calls == 2) {
          return HttpReply(429, StatusBody(429, "TooManyRequests", "slow down"));
        }
        if (calls == 3) {
          return HttpReply(429, StatusBody(429, "TooManyRequests", "slow down"), "application/json",
                           {{"Retry-After", "soon"}});
        }
        return HttpReply(200, R"({"metadata":{"name":"n1"}})");
      },
      std::make_shared<TokenSource>(), RecordThrottleWaits(&waits));
  Result<Node> n = RunSync(io_, GetNode(*client_, "n1"));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(calls, 4);
  // A day is cut to max_retry_after (30 s); no header or an unreadable one: 1 s.
  EXPECT_EQ(waits,
            (std::vector<std::chrono::milliseconds>{
                std::chrono::seconds(30), std::chrono::seconds(1), std::chrono::seconds(1)}));
}

TEST_F(ClientTest, Persistent429BecomesTooManyRequests) {
  int calls = 0;
  ClientOptions o;
  o.max_throttle_retries = 2;
  Start(
      [&](const FakeRequest&) {
        ++calls;
        return HttpReply(429, StatusBody(429, "TooManyRequests", "slow down"), "application/json",
                         {{"Retry-After", "0"}});
      },
      std::make_shared<TokenSource>(), o);
  Result<std::string> r = RunSync(io_, client_->Get(NodesRef().WithName("n1")));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kTooManyRequests);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(server_->requests()[0].Header("Authorization").empty());
}

TEST_F(ClientTest, RereadsTokenFileOn401) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kube_client_test_token_" + std::to_string(::getpid())))
                         .string();
  std::ofstream(path) << "old";
  auto token = std::make_shared<TokenSource>(TokenSource::File(path));
  Start(
      [&](const FakeRequest& r) {
        if (r.Header("Authorization") != "Bearer new") {
          return HttpReply(401, StatusBody(401, "Unauthorized", "Unauthorized"));
        }
        return HttpReply(200, R"({"metadata":{"name":"n1"}})");
      },
      token);
  ASSERT_TRUE(token->Token());   // reads "old"
  std::ofstream(path) << "new";  // rotated; not re-read before a minute passes...
  Result<Node> n = RunSync(io_, GetNode(*client_, "n1"));
  ASSERT_TRUE(n) << n.error().message;  // ...except after the 401
  EXPECT_EQ(server_->requests().size(), 2u);
  std::filesystem::remove(path);
}

TEST_F(ClientTest, WritesUseTheRightMethodsAndContentTypes) {
  Start([](const FakeRequest& r) {
    if (r.target == "/apis/policy") {
      return HttpReply(404, StatusBody(404, "NotFound", "not found"));
    }
    return HttpReply(r.method == "POST" ? 201 : 200,
                     R"({"metadata":{"name":"p","namespace":"ns"}})");
  });
  ASSERT_TRUE(RunSync(io_, BindPod(*client_, "ns", "p", "uid-9", "n3")));
  ASSERT_TRUE(RunSync(io_, PatchPodStatus(*client_, "ns", "p", PatchType::kStrategicMerge,
                                          R"({"status":{"phase":"Running"}})")));
  ASSERT_TRUE(
      RunSync(io_, PatchNode(*client_, "n1", PatchType::kJson,
                             R"([{"op":"add","path":"/spec/unschedulable","value":true}])")));
  ASSERT_TRUE(RunSync(io_, client_->Patch(PodsRef("ns").WithName("p"), PatchType::kJsonMerge,
                                          EncodeMetadataMergePatch({{"a", "1"}}, {}))));
  ASSERT_TRUE(
      RunSync(io_, DeletePod(*client_, "ns", "p", {.grace_period_seconds = 0, .uid = "uid-9"})));
  ASSERT_TRUE(RunSync(io_, EvictPod(*client_, "ns", "p", {})));
  Pod pod;
  pod.metadata.name = "p";
  pod.metadata.namespace_ = "ns";
  ASSERT_TRUE(RunSync(io_, CreatePod(*client_, pod)));

  const auto& reqs = server_->requests();
  ASSERT_EQ(reqs.size(), 8u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/api/v1/namespaces/ns/pods/p/binding");
  boost::json::value binding = boost::json::parse(reqs[0].body);
  EXPECT_EQ(binding.at("target").at("name"), "n3");
  EXPECT_EQ(binding.at("metadata").at("uid"), "uid-9");
  EXPECT_EQ(reqs[1].method, "PATCH");
  EXPECT_EQ(reqs[1].target, "/api/v1/namespaces/ns/pods/p/status");
  EXPECT_EQ(reqs[1].Header("Content-Type"), "application/strategic-merge-patch+json");
  EXPECT_EQ(reqs[2].Header("Content-Type"), "application/json-patch+json");
  EXPECT_EQ(reqs[2].target, "/api/v1/nodes/n1");
  EXPECT_EQ(reqs[3].Header("Content-Type"), "application/merge-patch+json");
  EXPECT_EQ(reqs[4].method, "DELETE");
  boost::json::value del = boost::json::parse(reqs[4].body);
  EXPECT_EQ(del.at("preconditions").at("uid"), "uid-9");
  EXPECT_EQ(del.at("gracePeriodSeconds"), 0);
  EXPECT_EQ(reqs[5].target, "/apis/policy");  // discovery for the eviction's version
  EXPECT_EQ(reqs[6].target, "/api/v1/namespaces/ns/pods/p/eviction");
  EXPECT_EQ(reqs[7].target, "/api/v1/namespaces/ns/pods");
  EXPECT_EQ(reqs[7].Header("Content-Type"), "application/json");
}

// The fake apiserver keeps the apiserver's preconditions on writes, so that tests of the bridge
// against it meet the 409s the real one answers (test audit #15): a binding of a pod bound already
// or under another UID, a patch or update at a stale resourceVersion, a delete with another
// UID; an update without resourceVersion is invalid (422); a pod on a node is deleted gracefully.
TEST_F(ClientTest, FakeApiServerWritesKeepTheirPreconditions) {
  sb::testing::FakeApiServer api(io_);
  api.AddPod("ns", "p");
  auto ep = net::ParseEndpoint(api.url());
  auto http = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, {}));
  auto client = MakeClient(*http, nullptr);
  const ResourceRef ref = PodsRef("ns").WithName("p");
  auto pod = [&] { return boost::json::parse(api.PodJson("ns", "p")); };
  auto meta = [&](std::string_view field) {
    return std::string(pod().at("metadata").at(field).as_string());
  };
  const std::string uid = meta("uid");

  Result<void> other = RunSync(io_, BindPod(*client, "ns", "p", "another-uid", "n1"));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kConflict);
  ASSERT_TRUE(RunSync(io_, BindPod(*client, "ns", "p", uid, "n1")));
  EXPECT_EQ(pod().at("spec").at("nodeName"), "n1");
  Result<void> again = RunSync(io_, BindPod(*client, "ns", "p", uid, "n2"));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_EQ(pod().at("spec").at("nodeName"), "n1");

  const std::string stale = R"({"metadata":{"resourceVersion":"1","labels":{"a":"b"}}})";
  Result<std::string> patched = RunSync(io_, client->Patch(ref, PatchType::kJsonMerge, stale));
  ASSERT_FALSE(patched);
  EXPECT_EQ(patched.error().code, ErrorCode::kConflict);
  const std::string current =
      R"({"metadata":{"resourceVersion":")" + meta("resourceVersion") + R"(","labels":{"a":"b"}}})";
  ASSERT_TRUE(RunSync(io_, client->Patch(ref, PatchType::kJsonMerge, current)));
  EXPECT_EQ(pod().at("metadata").at("labels").at("a"), "b");
  api.conflict_writes = 1;
  Result<std::string> injected = RunSync(
      io_, client->Patch(ref, PatchType::kJsonMerge, R"({"metadata":{"labels":{"c":"d"}}})"));
  ASSERT_FALSE(injected);
  EXPECT_EQ(injected.error().code, ErrorCode::kConflict);

  boost::json::object body = pod().as_object();
  body["metadata"].as_object().erase("resourceVersion");
  Result<std::string> unversioned = RunSync(io_, client->Update(ref, boost::json::serialize(body)));
  ASSERT_FALSE(unversioned);
  EXPECT_EQ(unversioned.error().http_status, 422);
  body["metadata"].as_object()["resourceVersion"] = "2";
  Result<std::string> old = RunSync(io_, client->Update(ref, boost::json::serialize(body)));
  ASSERT_FALSE(old);
  EXPECT_EQ(old.error().code, ErrorCode::kConflict);

  Result<void> wrong = RunSync(io_, DeletePod(*client, "ns", "p", {.uid = "another-uid"}));
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code, ErrorCode::kConflict);
  ASSERT_TRUE(RunSync(io_, DeletePod(*client, "ns", "p", {.uid = uid})));
  EXPECT_TRUE(pod().at("metadata").as_object().contains("deletionTimestamp"))
      << "a pod on a node waits for its kubelet";
  ASSERT_TRUE(RunSync(io_, DeletePod(*client, "ns", "p", {.grace_period_seconds = 0})));
  EXPECT_EQ(api.PodJson("ns", "p"), "");
  Result<Pod> gone = RunSync(io_, GetPod(*client, "ns", "p"));
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
}

TEST_F(ClientTest, ListAllFollowsContinueAndRestartsOnExpiredToken) {
  asio::io_context& io = io_;
  sb::testing::FakeApiServer api(io);
  for (int i = 0; i < 7; ++i) api.AddPod("ns", "p" + std::to_string(i));
  auto ep = net::ParseEndpoint(api.url());
  auto http = std::move(*net::HttpClient::Create(io.get_executor(), *ep, {}));
  auto client = MakeClient(*http, nullptr);
  ListOptions o;
  o.limit = 3;
  Result<List<Pod>> all = RunSync(io, ListAllAs<Pod>(*client, PodsRef(), o));
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->items.size(), 7u);
  EXPECT_EQ(all->resource_version, std::to_string(api.rv()));
  EXPECT_EQ(api.lists(), 3);

  api.expire_continue_tokens = true;
  Result<List<Pod>> expired = RunSync(io, ListAllAs<Pod>(*client, PodsRef(), o));
  ASSERT_FALSE(expired);  // restarted once, expired again
  EXPECT_EQ(expired.error().code, ErrorCode::kGone);
  EXPECT_EQ(api.lists(), 3 + 4);
}

TEST_F(ClientTest, WatchDeliversLinesAcrossChunksAndMapsHttp410) {
  int n = 0;
  Start([&](const FakeRequest& r) -> FakeReply {
    EXPECT_NE(r.target.find("watch=1"), std::string::npos);
    if (n++ == 0) {
      // One event split over three chunks, then two in one chunk.
      std::string a =
          R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}})";
      std::string b = R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"3"}}})";
      std::string body = a + "\n" + b + "\n" + b + "\n";
      std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
      auto chunk = [&](std::string_view s) {
        char size[16];
        std::snprintf(size, sizeof size, "%zx\r\n", s.size());
        out += size;
        out += s;
        out += "\r\n";
      };
      chunk(body.substr(0, 10));
      chunk(body.substr(10, 20));
      chunk(body.substr(30));
      out += "0\r\n\r\n";
      return FakeReply{out, false, {}};
    }
    return HttpReply(410, StatusBody(410, "Expired", "too old resource version"));
  });
  std::vector<std::string> lines;
  auto on_line = [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  };
  Result<void> r = RunSync(io_, client_->Watch(PodsRef(), {.resource_version = "1"}, on_line));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(DecodeWatchEvent<Pod>(lines[0]));
  Result<void> gone = RunSync(io_, client_->Watch(PodsRef(), {.resource_version = "1"}, on_line));
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kGone);
  EXPECT_EQ(gone.error().http_status, 410);
}

TEST_F(ClientTest, AWatchLineThatNeverEndsFailsTheWatch) {
  // One good event, then a line that never ends: chunk after chunk without a newline.
  std::string out = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  auto chunk = [&](std::string_view s) {
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", s.size());
    out += size;
    out += s;
    out += "\r\n";
  };
  chunk(R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}})"
        "\n");
  chunk(R"({"type":"ADDED","object":{"metadata":{"name":")");
  const std::string filler(4096, 'z');
  for (int i = 0; i < 64; ++i) {  // 256 KiB, four times the limit below
    chunk(filler);
  }
  Start([&](const FakeRequest&) { return FakeReply{out, false, {}}; },
        std::make_shared<TokenSource>(TokenSource::Static("tok-123")),
        {.watch_idle_timeout = std::chrono::seconds(30), .max_watch_line = 64 * 1024});
  std::vector<std::string> lines;
  Result<void> r = RunSync(io_, client_->Watch(PodsRef(), {}, [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  }));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInternal);
  EXPECT_NE(r.error().message.find("over the limit"), std::string::npos) << r.error().message;
  EXPECT_EQ(lines.size(), 1u);  // the good event came through
  EXPECT_EQ(ClientOptions{}.max_watch_line, std::size_t{16} << 20);
}

TEST_F(ClientTest, EvictionUsesPolicyV1WhereDiscoveryOffersIt) {
  // /apis/policy as a current apiserver answers it (APIGroup), then as 1.20 does.
  const std::string current =
      R"({"kind":"APIGroup","apiVersion":"v1","name":"policy","versions":[)"
      R"({"groupVersion":"policy/v1","version":"v1"},{"groupVersion":"policy/v1beta1","version":"v1beta1"}],)"
      R"("preferredVersion":{"groupVersion":"policy/v1","version":"v1"}})";
  const std::string old =
      R"({"kind":"APIGroup","apiVersion":"v1","name":"policy","versions":[)"
      R"({"groupVersion":"policy/v1beta1","version":"v1beta1"}],)"
      R"("preferredVersion":{"groupVersion":"policy/v1beta1","version":"v1beta1"}})";
  for (bool v1 : {true, false}) {
    SCOPED_TRACE(v1 ? "current server" : "1.20 server");
    Start([&](const FakeRequest& r) {
      if (r.method == "GET" && r.target == "/apis/policy") {
        return HttpReply(200, v1 ? current : old);
      }
      return HttpReply(201, R"({"kind":"Status","apiVersion":"v1","status":"Success"})");
    });
    ASSERT_TRUE(RunSync(io_, EvictPod(*client_, "ns", "p", {})));
    ASSERT_TRUE(RunSync(io_, EvictPod(*client_, "ns", "q", {})));
    const auto& reqs = server_->requests();
    ASSERT_EQ(reqs.size(), 3u) << "discovery is asked once";
    EXPECT_EQ(reqs[0].target, "/apis/policy");
    EXPECT_EQ(reqs[1].target, "/api/v1/namespaces/ns/pods/p/eviction");
    boost::json::value body = boost::json::parse(reqs[1].body);
    EXPECT_EQ(body.at("apiVersion"), v1 ? "policy/v1" : "policy/v1beta1");
    EXPECT_EQ(body.at("kind"), "Eviction");
    EXPECT_EQ(body.at("metadata").at("name"), "p");
  }
  // A server without the group: v1beta1 (and an error of discovery other than 404 is returned).
  Start([&](const FakeRequest& r) {
    if (r.target == "/apis/policy") {
      return HttpReply(404, StatusBody(404, "NotFound", "the server could not find it"));
    }
    return HttpReply(201, "{}");
  });
  ASSERT_TRUE(RunSync(io_, EvictPod(*client_, "ns", "p", {})));
  EXPECT_EQ(boost::json::parse(server_->requests().back().body).at("apiVersion"), "policy/v1beta1");
  Start([&](const FakeRequest&) { return HttpReply(403, StatusBody(403, "Forbidden", "no")); });
  Result<void> denied = RunSync(io_, EvictPod(*client_, "ns", "p", {}));
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(server_->requests().size(), 1u);
}

// Discovery answers are kept for discovery_ttl, then asked again: an API group turned on (or a
// version added) while the process runs is seen within a minute, not after a restart. "Not
// served" (404) is kept as long; a transient failure is not kept at all.
TEST_F(ClientTest, DiscoveryAnswersAreKeptForTheirTtlThenAskedAgain) {
  const std::string alpha =
      R"({"kind":"APIGroup","apiVersion":"v1","name":"scheduling.k8s.io","versions":[)"
      R"({"groupVersion":"scheduling.k8s.io/v1","version":"v1"},)"
      R"({"groupVersion":"scheduling.k8s.io/v1alpha2","version":"v1alpha2"}]})";
  const std::string beta =
      R"({"kind":"APIGroup","apiVersion":"v1","name":"scheduling.k8s.io","versions":[)"
      R"({"groupVersion":"scheduling.k8s.io/v1","version":"v1"},)"
      R"({"groupVersion":"scheduling.k8s.io/v1beta1","version":"v1beta1"},)"
      R"({"groupVersion":"scheduling.k8s.io/v1alpha2","version":"v1alpha2"}]})";
  int answer = 404;  // what the server says next: 404, 503, 1 (alpha), 2 (beta)
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  ClientOptions options;
  options.now = [&] { return now; };
  Start(
      [&](const FakeRequest& r) {
        if (r.target != "/apis/scheduling.k8s.io") return HttpReply(500, "{}");
        if (answer == 404) return HttpReply(404, "404 page not found");
        if (answer == 503) return HttpReply(503, StatusBody(503, "ServiceUnavailable", "busy"));
        return HttpReply(200, answer == 1 ? alpha : beta);
      },
      nullptr, options);
  auto ask = [&] { return RunSync(io_, client_->GroupVersions("scheduling.k8s.io")); };
  EXPECT_EQ(ClientOptions{}.discovery_ttl, std::chrono::seconds(60));

  // Not served: kept for the TTL, even once the server serves it.
  Result<std::vector<std::string>> v = ask();
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, ErrorCode::kNotFound);
  answer = 1;
  now += std::chrono::seconds(59);
  EXPECT_FALSE(ask());
  EXPECT_EQ(server_->requests().size(), 1u) << "asked again within the TTL";
  // A minute after it was asked: asked again, and the API is seen.
  now += std::chrono::seconds(1);
  v = ask();
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(*v, (std::vector<std::string>{"v1", "v1alpha2"}));
  EXPECT_EQ(server_->requests().size(), 2u);
  // A version added later is seen after the TTL too.
  answer = 2;
  now += std::chrono::seconds(30);
  EXPECT_EQ(*ask(), (std::vector<std::string>{"v1", "v1alpha2"}));
  now += std::chrono::seconds(30);
  EXPECT_EQ(*ask(), (std::vector<std::string>{"v1", "v1beta1", "v1alpha2"}));
  EXPECT_EQ(server_->requests().size(), 3u);
  // A transient failure is returned and not kept: the next call asks again.
  answer = 503;
  now += std::chrono::seconds(60);
  const std::size_t before = server_->requests().size();
  v = ask();
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().code, ErrorCode::kNotFound);
  answer = 2;
  v = ask();
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->size(), 3u);
  EXPECT_GT(server_->requests().size(), before + 1);
}

TEST_F(ClientTest, WatchCutMidChunkIsAnError) {
  Start([](const FakeRequest&) {
    return sb::testing::FakeApiServer::WatchReply(
        {R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}})",
         R"({"type":"ADDED","object":{"metadata":{"name":"b","resourceVersion":"3"}}})"},
        /*cut=*/true);
  });
  std::vector<std::string> lines;
  Result<void> r = RunSync(io_, client_->Watch(PodsRef(), {}, [&](std::string_view l) {
    lines.emplace_back(l);
    return true;
  }));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  // The half line is never delivered. (The whole line before it may be lost with the bytes of
  // the failed read: a broken stream means relist anyway.)
  EXPECT_LE(lines.size(), 1u);
  for (const std::string& l : lines) {
    EXPECT_TRUE(DecodeWatchEvent<Pod>(l)) << l;
  }
}

}  // namespace
}  // namespace sb::kube
