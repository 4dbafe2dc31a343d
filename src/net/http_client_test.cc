// SPDX-License-Identifier: Apache-2.0
#include "net/http_client.h"

#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "testing/fake_http_server.h"
#include "testing/run.h"

namespace sb::net {
namespace {
using sb::testing::FakeHttpServer;
using sb::testing::FakeReply;
using sb::testing::FakeRequest;
using sb::testing::HttpReply;
using sb::testing::RunSync;

TEST(ParseEndpoint, AcceptsWhatSitesWrite) {
  struct Case {
    std::string url;
    Endpoint::Scheme scheme;
    std::string host;
    int port;
    std::string base;
    std::string unix_path;
  };
  const std::vector<Case> cases = {
      {"http://slurm-restapi.slurm:6820", Endpoint::Scheme::kHttp, "slurm-restapi.slurm", 6820, "",
       ""},
      {"http://127.0.0.1:6820/", Endpoint::Scheme::kHttp, "127.0.0.1", 6820, "", ""},
      {"http://h", Endpoint::Scheme::kHttp, "h", 80, "", ""},
      {"https://h/api/", Endpoint::Scheme::kHttps, "h", 443, "/api", ""},
      {"https://[::1]:8443", Endpoint::Scheme::kHttps, "::1", 8443, "", ""},
      {"unix:///run/slurmrestd/slurmrestd.socket", Endpoint::Scheme::kUnix, "", 0, "",
       "/run/slurmrestd/slurmrestd.socket"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.url);
    Result<Endpoint> ep = ParseEndpoint(c.url);
    ASSERT_TRUE(ep.has_value()) << ep.error().ToString();
    EXPECT_EQ(ep->scheme, c.scheme);
    EXPECT_EQ(ep->host, c.host);
    EXPECT_EQ(ep->port, c.port);
    EXPECT_EQ(ep->base_path, c.base);
    EXPECT_EQ(ep->unix_path, c.unix_path);
  }
}

TEST(ParseEndpoint, RejectsWithAReason) {
  for (const char* url :
       {"", "ftp://h", "http://", "http://h:0", "http://h:70000", "http://h:x",
        "http://h:", "unix://relative.sock", "http://u:p@h", "http://h/?q=1", "https://[::1"}) {
    SCOPED_TRACE(url);
    Result<Endpoint> ep = ParseEndpoint(url);
    ASSERT_FALSE(ep.has_value());
    EXPECT_EQ(ep.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(ep.error().message.find("invalid URL"), std::string::npos);
  }
}

class HttpClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<HttpClient> Client(const std::string& url, ClientOptions opts = {}) {
    opts.backoff_base = std::chrono::milliseconds(1);
    auto ep = ParseEndpoint(url);
    EXPECT_TRUE(ep.has_value());
    auto c = HttpClient::Create(io_.get_executor(), *ep, opts);
    EXPECT_TRUE(c.has_value());
    return std::move(*c);
  }
  Result<HttpResponse> Send(HttpClient& c, HttpRequest r) { return RunSync(io_, c.Send(r)); }

  boost::asio::io_context io_;
};

TEST_F(HttpClientTest, ReusesOneConnectionForSequentialRequests) {
  FakeHttpServer server(
      io_, [](const FakeRequest& r) { return HttpReply(200, "{\"path\":\"" + r.target + "\"}"); });
  auto client = Client(server.url() + "/base/");
  for (int i = 0; i < 5; ++i) {
    Result<HttpResponse> r = Send(*client, {.target = "/x/" + std::to_string(i)});
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{\"path\":\"/base/x/" + std::to_string(i) + "\"}");
    EXPECT_EQ(r->HeaderValue("content-type"), "application/json");
  }
  EXPECT_EQ(server.connections_accepted(), 1);
  EXPECT_EQ(client->stats().connections_opened, 1u);
  EXPECT_EQ(server.requests()[0].Header("Host"), "127.0.0.1:" + std::to_string(server.port()));
}

TEST_F(HttpClientTest, SendsMethodHeadersAndBody) {
  FakeHttpServer server(io_, [](const FakeRequest&) { return HttpReply(201, "{}"); });
  auto client = Client(server.url());
  Result<HttpResponse> r =
      Send(*client, {.method = Method::kPost,
                     .target = "/job/submit",
                     .headers = {{"X-SLURM-USER-TOKEN", "t"}, {"Content-Type", "application/json"}},
                     .body = "{\"job\":{}}"});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 201);
  ASSERT_EQ(server.requests().size(), 1u);
  const FakeRequest& got = server.requests()[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/job/submit");
  EXPECT_EQ(got.Header("x-slurm-user-token"), "t");
  EXPECT_EQ(got.body, "{\"job\":{}}");
}

TEST_F(HttpClientTest, ServerClosingIdleConnectionsIsInvisible) {
  // The server closes every connection after its reply without saying so (no
  // "Connection: close"): the pooled connection is dead when the next request comes.
  FakeHttpServer server(io_, [](const FakeRequest&) {
    FakeReply r = HttpReply(200, "ok", "text/plain");
    r.close_after = true;
    return r;
  });
  auto client = Client(server.url());
  for (Method m : {Method::kGet, Method::kPost, Method::kGet, Method::kPost}) {
    Result<HttpResponse> r = Send(*client, {.method = m, .target = "/"});
    ASSERT_TRUE(r.has_value()) << MethodName(m) << ": " << r.error().ToString();
    EXPECT_EQ(r->body, "ok");
  }
  EXPECT_EQ(server.requests().size(), 4u) << "each request must reach the server exactly once";
}

TEST_F(HttpClientTest, ReplyCutMidBodyIsUnavailableAndOnlyIdempotentRequestsRetry) {
  FakeHttpServer server(io_, [](const FakeRequest&) {
    return FakeReply{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"jobs\":[", true, {}};
  });
  auto client = Client(server.url(), {.max_attempts = 3});
  Result<HttpResponse> get = Send(*client, {.method = Method::kGet, .target = "/jobs"});
  ASSERT_FALSE(get.has_value());
  EXPECT_EQ(get.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(get.error().message.find("closed before a complete reply"), std::string::npos)
      << get.error().message;
  EXPECT_EQ(server.requests().size(), 3u);

  Result<HttpResponse> post = Send(*client, {.method = Method::kPost, .target = "/job/submit"});
  ASSERT_FALSE(post.has_value());
  EXPECT_EQ(post.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(server.requests().size(), 4u) << "a POST that reached the server is never resent";
}

TEST_F(HttpClientTest, AnOutcomeThatMayHaveHappenedIsMarked) {
  // The reply is cut after the request was sent: the server may have acted on it.
  FakeHttpServer cut(io_, [](const FakeRequest&) {
    return FakeReply{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"job_id\":", true, {}};
  });
  auto client = Client(cut.url(), {.max_attempts = 1});
  Result<HttpResponse> post = Send(*client, {.method = Method::kPost, .target = "/job/submit"});
  ASSERT_FALSE(post.has_value());
  EXPECT_TRUE(MayHaveBeenProcessed(post.error())) << post.error().ToString();
  EXPECT_EQ(post.error().reason, kReasonMayHaveBeenProcessed);
  EXPECT_NE(post.error().message.find("may have processed"), std::string::npos);

  // No reply in time: the same.
  FakeHttpServer slow(io_, [](const FakeRequest&) {
    FakeReply r = HttpReply(200, "late");
    r.delay = std::chrono::milliseconds(2000);
    return r;
  });
  auto slow_client = Client(slow.url());
  Result<HttpResponse> timed_out = Send(
      *slow_client,
      {.method = Method::kPost, .target = "/job/submit", .timeout = std::chrono::milliseconds(50)});
  ASSERT_FALSE(timed_out.has_value());
  EXPECT_EQ(timed_out.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_TRUE(MayHaveBeenProcessed(timed_out.error()));

  // Nothing reached a server that was not there.
  std::uint16_t port = 0;
  {
    FakeHttpServer closed(io_, [](const FakeRequest&) { return HttpReply(200, ""); });
    port = closed.port();
  }
  auto gone = Client("http://127.0.0.1:" + std::to_string(port), {.max_attempts = 1});
  Result<HttpResponse> refused = Send(*gone, {.method = Method::kPost, .target = "/job/submit"});
  ASSERT_FALSE(refused.has_value());
  EXPECT_FALSE(MayHaveBeenProcessed(refused.error())) << refused.error().ToString();
}

TEST_F(HttpClientTest, ResponseBodiesAreBounded) {
  EXPECT_EQ(ClientOptions{}.body_limit, std::size_t{64} << 20);
  const std::string big(2 << 20, 'x');
  FakeHttpServer server(io_, [&](const FakeRequest&) { return HttpReply(200, big, "text/plain"); });
  auto client = Client(server.url(), {.max_attempts = 3, .body_limit = std::size_t{1} << 20});
  Result<HttpResponse> r = Send(*client, {.target = "/jobs/"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInternal);
  EXPECT_NE(r.error().message.find("over the size limit"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(std::to_string(std::size_t{1} << 20)), std::string::npos)
      << r.error().message;
  EXPECT_EQ(server.requests().size(), 1u) << "an over-long reply is not fetched again";
  // A request may allow more.
  Result<HttpResponse> ok = Send(*client, {.target = "/jobs/", .body_limit = std::size_t{4} << 20});
  ASSERT_TRUE(ok.has_value()) << ok.error().ToString();
  EXPECT_EQ(ok->body.size(), big.size());
}

TEST_F(HttpClientTest, AStreamStopsAtItsBodyLimit) {
  // A chunked body that never ends: 1 KiB chunks for ever (as far as the client can tell).
  std::string bytes = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk = "400\r\n" + std::string(1024, 'y') + "\r\n";
  for (int i = 0; i < 300; ++i) {
    bytes += chunk;
  }
  FakeHttpServer server(io_, [&](const FakeRequest&) { return FakeReply{bytes, false, {}}; });
  auto client = Client(server.url());
  std::size_t got = 0;
  Result<int> r = RunSync(io_, client->Stream(
                                   {.target = "/watch", .body_limit = 64 * 1024},
                                   [](const HttpResponse&) { return true; },
                                   [&](std::string_view data) {
                                     got += data.size();
                                     return true;
                                   }));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("over the size limit"), std::string::npos) << r.error().message;
  EXPECT_LE(got, std::size_t{64} * 1024);
}

TEST_F(HttpClientTest, AStatusBelow100IsAMalformedReply) {
  // Beast reads any three digits as the status; http_client_fuzz found "HTTP/1.1 050" returned
  // as a response with status 50.
  FakeHttpServer server(io_, [](const FakeRequest&) {
    return FakeReply{"HTTP/1.1 050 Odd\r\nContent-Length: 2\r\n\r\nok", false, {}};
  });
  auto client = Client(server.url(), {.max_attempts = 1});
  Result<HttpResponse> r = Send(*client, {.target = "/x"});
  ASSERT_FALSE(r.has_value()) << "status " << r->status;
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("malformed HTTP reply"), std::string::npos) << r.error().message;
  Result<int> s = RunSync(io_, client->Stream(
                                   {.target = "/watch"}, [](const HttpResponse&) { return true; },
                                   [](std::string_view) { return true; }));
  ASSERT_FALSE(s.has_value()) << "status " << *s;
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
}

TEST_F(HttpClientTest, RetriesIdempotentRequestsOn503ButNotPosts) {
  int calls = 0;
  FakeHttpServer server(io_, [&](const FakeRequest&) {
    return ++calls % 2 == 1 ? HttpReply(503, "busy", "text/plain") : HttpReply(200, "ok");
  });
  auto client = Client(server.url());
  Result<HttpResponse> get = Send(*client, {.target = "/"});
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(calls, 2);
  Result<HttpResponse> post = Send(*client, {.method = Method::kPost, .target = "/"});
  ASSERT_TRUE(post.has_value());
  EXPECT_EQ(post->status, 503);
  EXPECT_EQ(calls, 3);
}

TEST_F(HttpClientTest, TimeoutIsDeadlineExceeded) {
  FakeHttpServer server(io_, [](const FakeRequest&) {
    FakeReply r = HttpReply(200, "late");
    r.delay = std::chrono::milliseconds(2000);
    return r;
  });
  auto client = Client(server.url());
  Result<HttpResponse> r = Send(*client, {.target = "/", .timeout = std::chrono::milliseconds(50)});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(server.requests().size(), 1u) << "a timed-out request is not resent";
}

// The timeout bounds the request with its retries: a server answering 503 after 300 ms each
// time is asked at most until the 1 s deadline, not max_attempts (20) times, and the last 503
// is the answer.
TEST_F(HttpClientTest, TimeoutBoundsTheRetriesToo) {
  FakeHttpServer server(io_, [](const FakeRequest&) {
    FakeReply r = HttpReply(503, "busy", "text/plain");
    r.delay = std::chrono::milliseconds(300);
    return r;
  });
  auto client =
      Client(server.url(), {.timeout = std::chrono::milliseconds(1000), .max_attempts = 20});
  Result<HttpResponse> r = Send(*client, {.target = "/"});
  const std::size_t asked = server.requests().size();
  EXPECT_GE(asked, 2u) << "a 503 is retried while time is left";
  EXPECT_LE(asked, 4u) << "retried past the request's deadline";
  if (r) {
    EXPECT_EQ(r->status, 503);
  } else {
    EXPECT_EQ(r.error().code, ErrorCode::kDeadlineExceeded) << r.error().ToString();
  }
}

TEST_F(HttpClientTest, UnreachableServerIsUnavailableAfterBoundedRetries) {
  std::uint16_t port = 0;
  {
    FakeHttpServer closed(io_, [](const FakeRequest&) { return HttpReply(200, ""); });
    port = closed.port();
  }
  auto client = Client("http://127.0.0.1:" + std::to_string(port), {.max_attempts = 4});
  Result<HttpResponse> r = Send(*client, {.method = Method::kPost, .target = "/"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("connect to http://127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(client->stats().attempts, 4u) << "connect failures are safe to retry, also for POST";
}

TEST_F(HttpClientTest, TalksOverAUnixSocket) {
  std::string path = "/tmp/sb-http-test-" + std::to_string(getpid()) + ".sock";
  FakeHttpServer server(io_, path, [](const FakeRequest& r) { return HttpReply(200, r.target); });
  auto client = Client("unix://" + path);
  for (int i = 0; i < 2; ++i) {
    Result<HttpResponse> r = Send(*client, {.target = "/slurm/v0.0.44/ping/"});
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->body, "/slurm/v0.0.44/ping/");
  }
  EXPECT_EQ(server.connections_accepted(), 1);
  EXPECT_EQ(server.requests()[0].Header("Host"), "localhost");
}

TEST_F(HttpClientTest, StreamDeliversChunksAsTheyArriveAndCanStop) {
  FakeHttpServer server(io_, [](const FakeRequest&) {
    std::string bytes =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n";
    for (const std::string piece : {"{\"type\":\"ADDED\"}\n", "{\"type\":", "\"MODIFIED\"}\n"}) {
      char len[16];
      std::snprintf(len, sizeof len, "%zx\r\n", piece.size());
      bytes += len + piece + "\r\n";
    }
    bytes += "0\r\n\r\n";
    return FakeReply{bytes, false, {}};
  });
  auto client = Client(server.url());
  std::string got;
  int status_seen = 0;
  Result<int> r = RunSync(io_, client->Stream(
                                   {.target = "/api/v1/pods?watch=1"},
                                   [&](const HttpResponse& h) {
                                     status_seen = h.status;
                                     return true;
                                   },
                                   [&](std::string_view data) {
                                     got.append(data);
                                     return true;
                                   }));
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(*r, 200);
  EXPECT_EQ(status_seen, 200);
  EXPECT_EQ(got, "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n");

  int pieces = 0;
  Result<int> stopped = RunSync(io_, client->Stream(
                                         {.target = "/"}, [](const HttpResponse&) { return true; },
                                         [&](std::string_view) { return ++pieces < 1; }));
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(pieces, 1);
}

TEST_F(HttpClientTest, StreamHandsOnEachPieceWithoutWaitingForMore) {
  // One chunk, then the server keeps the stream open (as a watch does): the piece must arrive
  // at once, not when a buffer fills or the deadline passes.
  FakeHttpServer server(io_, [](const FakeRequest&) {
    return FakeReply{
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "11\r\n{\"type\":\"ADDED\"}\n\r\n",
        false,
        {}};
  });
  auto client = Client(server.url());
  std::string got;
  // The stream's deadline is an hour away: a client that waited for more data (or the deadline)
  // would not finish before the guard, which only bounds the test, and is no timing claim.
  std::optional<Result<int>> r;
  boost::asio::co_spawn(io_,
                        client->Stream(
                            {.target = "/watch", .timeout = std::chrono::hours(1)},
                            [](const HttpResponse&) { return true; },
                            [&](std::string_view data) {
                              got.append(data);
                              return false;
                            }),
                        [&](std::exception_ptr, Result<int> result) { r = std::move(result); });
  bool gave_up = false;
  boost::asio::steady_timer guard(io_, std::chrono::seconds(60));
  guard.async_wait([&](const boost::system::error_code& ec) { gave_up = !ec; });
  while (!r && !gave_up && io_.run_one() > 0) {
  }
  guard.cancel();
  ASSERT_TRUE(r.has_value()) << "the piece was held back";
  ASSERT_TRUE(r->has_value()) << r->error().ToString();
  EXPECT_EQ(got, "{\"type\":\"ADDED\"}\n");
}

TEST_F(HttpClientTest, StreamDeliversWhatArrivedBeforeABreak) {
  FakeHttpServer server(io_, [](const FakeRequest&) {
    return FakeReply{
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "11\r\n{\"type\":\"ADDED\"}\n\r\n"
        "40\r\n{\"type\":\"MOD",
        true,
        {}};
  });
  auto client = Client(server.url());
  std::string got;
  Result<int> r = RunSync(io_, client->Stream(
                                   {.target = "/watch"}, [](const HttpResponse&) { return true; },
                                   [&](std::string_view data) {
                                     got.append(data);
                                     return true;
                                   }));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(got.substr(0, 17), "{\"type\":\"ADDED\"}\n");
}

}  // namespace
}  // namespace sb::net
