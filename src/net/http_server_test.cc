// SPDX-License-Identifier: Apache-2.0
#include "net/http_server.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "net/http_client.h"
#include "net/test_certs.h"
#include "testing/run.h"

namespace sb::net {
namespace {
namespace asio = boost::asio;
using asio::ip::tcp;
using sb::testing::RunSync;
using testing::TestCerts;

asio::awaitable<HttpResponse> Echo(ServerRequest r) {
  co_return TextResponse(200, r.method + " " + r.path + " " + r.body);
}

asio::awaitable<HttpResponse> Throws(ServerRequest) {
  throw std::runtime_error("boom");
  co_return HttpResponse{};
}

// Writes `bytes` on a new connection and reads until the server closes it.
asio::awaitable<std::string> RawExchange(std::uint16_t port, std::string bytes) {
  tcp::socket s(co_await asio::this_coro::executor);
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  co_await s.async_connect(ep, asio::use_awaitable);
  co_await asio::async_write(s, asio::buffer(bytes), asio::use_awaitable);
  std::string out;
  char buf[4096];
  for (;;) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    out.append(buf, n);
    if (ec) {
      break;
    }
  }
  co_return out;
}

asio::awaitable<bool> ConnectAndClose(std::uint16_t port) {
  tcp::socket s(co_await asio::this_coro::executor);
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  co_await s.async_connect(ep, asio::use_awaitable);
  s.close();
  co_return true;
}

// Sends headers with `Expect: 100-continue`, waits for the interim 100, then sends the body.
asio::awaitable<std::string> ExpectContinue(std::uint16_t port) {
  tcp::socket s(co_await asio::this_coro::executor);
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  co_await s.async_connect(ep, asio::use_awaitable);
  std::string head =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
      "Connection: close\r\n\r\n";
  co_await asio::async_write(s, asio::buffer(head), asio::use_awaitable);
  std::string out;
  char buf[4096];
  while (out.find("\r\n\r\n") == std::string::npos) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    out.append(buf, n);
    if (ec) {
      co_return "closed before 100: " + out;
    }
  }
  std::string body = "hello";
  co_await asio::async_write(s, asio::buffer(body), asio::use_awaitable);
  for (;;) {
    auto [ec, n] =
        co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    out.append(buf, n);
    if (ec) {
      break;
    }
  }
  co_return out;
}

// A client that never finishes its headers: connects from `source` (a loopback address), sends
// a request line, then one header byte at a time, `*gap` apart, until the server closes the
// connection (true) or `*stop` is set (false).
asio::awaitable<bool> Slowloris(std::uint16_t port, std::string source,
                                std::chrono::milliseconds gap, const bool* stop) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket s(ex);
  s.open(tcp::v4());
  s.bind(tcp::endpoint(asio::ip::make_address(source), 0));
  co_await s.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                           asio::use_awaitable);
  std::string head = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  auto [wec, wn] =
      co_await asio::async_write(s, asio::buffer(head), asio::as_tuple(asio::use_awaitable));
  if (wec) {
    co_return true;
  }
  asio::steady_timer t(ex);
  while (!*stop) {
    t.expires_after(gap);
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    // The server closing shows as an error on a write (reset) or on a peek of the socket.
    auto [ec, n] =
        co_await asio::async_write(s, asio::buffer("a", 1), asio::as_tuple(asio::use_awaitable));
    if (ec) {
      co_return true;
    }
    s.non_blocking(true);
    char byte = 0;
    boost::system::error_code rec;
    std::size_t got = s.receive(asio::buffer(&byte, 1), asio::socket_base::message_peek, rec);
    s.non_blocking(false);
    if ((!rec && got == 0) || (rec && rec != asio::error::would_block)) {
      co_return true;  // EOF or reset: the server closed the connection
    }
    if (!rec && got > 0) {
      co_return true;  // the server answered (408/400) and will close
    }
  }
  co_return false;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sb-http-server-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<HttpClient> Client(const std::string& url, TlsOptions tls = {}) {
    ClientOptions opts;
    opts.max_attempts = 1;
    opts.tls = std::move(tls);
    auto ep = ParseEndpoint(url);
    EXPECT_TRUE(ep.has_value());
    auto c = HttpClient::Create(io_.get_executor(), *ep, opts);
    EXPECT_TRUE(c.has_value()) << c.error().ToString();
    return std::move(*c);
  }
  Result<HttpResponse> Send(HttpClient& c, HttpRequest r) { return RunSync(io_, c.Send(r)); }
  // Runs the loop until the server has no open connection.
  void Drain(const HttpServer& server) {
    while (server.open_connections() > 0 && io_.run_one() > 0) {
    }
  }
  TestCerts Certs(const std::string& prefix) {
    std::string why;
    std::optional<TestCerts> c = testing::MakeTestCerts(dir_, prefix, &why);
    EXPECT_TRUE(c.has_value()) << why;
    return c.value_or(TestCerts{});
  }
  // Replaces `to` by `from` the way a secret volume does: a new file renamed over the old.
  static void Replace(const std::string& from, const std::string& to) {
    std::filesystem::copy_file(from, to + ".new");
    std::filesystem::rename(to + ".new", to);
  }

  asio::io_context io_;
  std::string dir_;
};

TEST(ParseHostPort, Forms) {
  auto a = ParseHostPort(":9443");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->host, "");
  EXPECT_EQ(a->port, 9443);
  auto b = ParseHostPort("127.0.0.1:0");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->host, "127.0.0.1");
  EXPECT_EQ(b->port, 0);
  auto c = ParseHostPort("[::1]:8081");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 8081);
  for (const char* bad : {"", "9443", "h:", "h:x", "h:70000", "::1:80", "[::1]80"}) {
    SCOPED_TRACE(bad);
    auto r = ParseHostPort(bad);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST_F(HttpServerTest, RoutesByPathAndKeepsConnectionsAlive) {
  HttpServer server(io_.get_executor(), {.bind_address = "127.0.0.1:0"});
  server.Route("/echo", Echo);
  server.RouteSync("/healthz", [](const ServerRequest&) { return TextResponse(200, "ok"); });
  ASSERT_TRUE(server.Start().has_value());
  ASSERT_NE(server.port(), 0);
  EXPECT_TRUE(server.listening());

  auto client = Client("http://127.0.0.1:" + std::to_string(server.port()));
  for (int i = 0; i < 3; ++i) {
    HttpRequest req{.method = Method::kPost, .target = "/echo?timeout=10s", .body = "b"};
    Result<HttpResponse> r = Send(*client, req);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "POST /echo b");
    EXPECT_EQ(r->HeaderValue("content-type"), "text/plain; charset=utf-8");
  }
  HttpRequest health{.target = "/healthz"};
  Result<HttpResponse> h = Send(*client, health);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->body, "ok");
  HttpRequest missing{.target = "/nope"};
  Result<HttpResponse> m = Send(*client, missing);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->status, 404);
  EXPECT_EQ(server.stats().connections_accepted, 1u);
  EXPECT_EQ(server.stats().requests, 5u);
  EXPECT_EQ(client->stats().connections_opened, 1u);
}

TEST_F(HttpServerTest, OversizedBodyIs413AndTheServerGoesOn) {
  HttpServer server(io_.get_executor(), {.bind_address = "127.0.0.1:0", .body_limit = 1024});
  server.Route("/echo", Echo);
  ASSERT_TRUE(server.Start().has_value());
  auto client = Client("http://127.0.0.1:" + std::to_string(server.port()));
  HttpRequest big{.method = Method::kPost, .target = "/echo", .body = std::string(256 * 1024, 'x')};
  Result<HttpResponse> r = Send(*client, big);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->status, 413);
  HttpRequest small{.method = Method::kPost, .target = "/echo", .body = std::string(1024, 'y')};
  Result<HttpResponse> ok = Send(*client, small);
  ASSERT_TRUE(ok.has_value()) << ok.error().ToString();
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, MalformedRequestsAre400And431) {
  HttpServer server(io_.get_executor(), {.bind_address = "127.0.0.1:0", .header_limit = 2048});
  server.Route("/echo", Echo);
  ASSERT_TRUE(server.Start().has_value());
  std::string bad = RunSync(io_, RawExchange(server.port(), "NOT HTTP AT ALL\r\n\r\n"));
  EXPECT_TRUE(bad.starts_with("HTTP/1.1 400")) << bad;
  std::string bad_length =
      RunSync(io_, RawExchange(server.port(), "POST /echo HTTP/1.1\r\nContent-Length: x\r\n\r\n"));
  EXPECT_TRUE(bad_length.starts_with("HTTP/1.1 400")) << bad_length;
  std::string huge = RunSync(
      io_, RawExchange(server.port(),
                       "GET /echo HTTP/1.1\r\nX-Big: " + std::string(4096, 'a') + "\r\n\r\n"));
  EXPECT_TRUE(huge.starts_with("HTTP/1.1 431")) << huge;
  // A client that connects and goes away breaks nothing.
  RunSync(io_, ConnectAndClose(server.port()));
  std::string ok =
      RunSync(io_, RawExchange(server.port(), "GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(ok.starts_with("HTTP/1.1 200")) << ok;
}

TEST_F(HttpServerTest, AnswersExpectContinue) {
  HttpServer server(io_.get_executor(), {.bind_address = "127.0.0.1:0"});
  server.Route("/echo", Echo);
  ASSERT_TRUE(server.Start().has_value());
  std::string out = RunSync(io_, ExpectContinue(server.port()));
  EXPECT_TRUE(out.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200")) << out;
  EXPECT_NE(out.find("POST /echo hello"), std::string::npos) << out;
}

TEST_F(HttpServerTest, AThrowingHandlerIs500) {
  HttpServer server(io_.get_executor(), {.bind_address = "127.0.0.1:0"});
  server.Route("/throw", Throws);
  ASSERT_TRUE(server.Start().has_value());
  auto client = Client("http://127.0.0.1:" + std::to_string(server.port()));
  HttpRequest req{.target = "/throw"};
  Result<HttpResponse> r = Send(*client, req);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->status, 500);
}

TEST_F(HttpServerTest, StopClosesIdleConnectionsAndTheListener) {
  HttpServer server(io_.get_executor(), {.bind_address = "127.0.0.1:0"});
  server.Route("/echo", Echo);
  ASSERT_TRUE(server.Start().has_value());
  auto client = Client("http://127.0.0.1:" + std::to_string(server.port()));
  HttpRequest req{.target = "/echo"};
  ASSERT_TRUE(Send(*client, req).has_value());
  EXPECT_EQ(server.open_connections(), 1u);
  server.Stop();
  EXPECT_FALSE(server.listening());
  Drain(server);
  EXPECT_EQ(server.open_connections(), 0u);
  Result<HttpResponse> after = Send(*client, req);
  ASSERT_FALSE(after.has_value());
  EXPECT_EQ(after.error().code, ErrorCode::kUnavailable);
}

TEST_F(HttpServerTest, ASlowClientIsDroppedByTheHeaderDeadline) {
  ServerOptions opts{.bind_address = "127.0.0.1:0"};
  opts.header_timeout = std::chrono::milliseconds(100);
  opts.read_timeout = std::chrono::hours(1);  // only the header deadline can end it
  opts.idle_timeout = std::chrono::hours(1);
  HttpServer server(io_.get_executor(), opts);
  server.Route("/echo", Echo);
  ASSERT_TRUE(server.Start().has_value());
  bool stop = false;
  // Bounded by the test's own guard, not a timing assertion: one byte every 10 ms would keep a
  // per-read timeout alive for ever.
  asio::steady_timer guard(io_, std::chrono::seconds(60));
  guard.async_wait([&](const boost::system::error_code& ec) {
    if (!ec) {
      stop = true;
    }
  });
  bool dropped =
      RunSync(io_, Slowloris(server.port(), "127.0.0.1", std::chrono::milliseconds(10), &stop));
  guard.cancel();
  EXPECT_TRUE(dropped) << "the slow client was never disconnected";
  server.Stop();
  Drain(server);
}

TEST_F(HttpServerTest, SlowClientsFromOneAddressCannotTakeEverySlot) {
  constexpr int kSlow = 4;
  ServerOptions opts{.bind_address = "127.0.0.1:0"};
  opts.max_connections = kSlow + 1;
  opts.max_connections_per_ip = kSlow;
  opts.header_timeout = std::chrono::hours(1);  // the cap alone must protect here
  HttpServer server(io_.get_executor(), opts);
  server.Route("/echo", Echo);
  ASSERT_TRUE(server.Start().has_value());
  bool stop = false;
  int ended = 0;
  for (int i = 0; i < kSlow + 1; ++i) {
    asio::co_spawn(io_, Slowloris(server.port(), "127.0.0.2", std::chrono::milliseconds(20), &stop),
                   [&](std::exception_ptr, bool) { ++ended; });
  }
  // The server holds kSlow of them; the one over the cap is closed at once. (The guard only
  // bounds a broken server's hang; nothing is timed.)
  bool gave_up = false;
  asio::steady_timer guard(io_, std::chrono::seconds(60));
  guard.async_wait([&](const boost::system::error_code& ec) {
    if (!ec) {
      gave_up = true;
    }
  });
  while (!gave_up &&
         (server.open_connections() < static_cast<std::size_t>(kSlow) ||
          server.stats().refused_per_ip < 1) &&
         io_.run_one() > 0) {
  }
  guard.cancel();
  ASSERT_FALSE(gave_up) << "the connection over the per-address cap was never refused";
  EXPECT_EQ(server.open_connections(), static_cast<std::size_t>(kSlow));
  EXPECT_EQ(server.stats().refused_per_ip, 1u);
  // A client from another address is still served while they trickle.
  auto client = Client("http://127.0.0.1:" + std::to_string(server.port()));
  HttpRequest req{.target = "/echo"};
  Result<HttpResponse> r = Send(*client, req);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(server.open_connections(), static_cast<std::size_t>(kSlow));
  stop = true;
  server.Stop();
  while (ended < kSlow + 1 && io_.run_one() > 0) {
  }
  client->CloseIdle();
  Drain(server);
}

TEST_F(HttpServerTest, StartErrors) {
  HttpServer a(io_.get_executor(), {.bind_address = "127.0.0.1:0"});
  ASSERT_TRUE(a.Start().has_value());
  HttpServer b(io_.get_executor(), {.bind_address = "127.0.0.1:" + std::to_string(a.port())});
  Result<void> in_use = b.Start();
  ASSERT_FALSE(in_use.has_value());
  EXPECT_EQ(in_use.error().code, ErrorCode::kUnavailable);

  HttpServer c(io_.get_executor(), {.bind_address = "127.0.0.1:0",
                                    .cert_file = dir_ + "/missing.crt",
                                    .key_file = dir_ + "/missing.key"});
  Result<void> no_cert = c.Start();
  ASSERT_FALSE(no_cert.has_value());
  EXPECT_EQ(no_cert.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(no_cert.error().message.find("missing.crt"), std::string::npos);

  TestCerts one = Certs("one");
  TestCerts two = Certs("two");
  HttpServer d(
      io_.get_executor(),
      {.bind_address = "127.0.0.1:0", .cert_file = one.cert_file, .key_file = two.key_file});
  Result<void> mismatch = d.Start();
  ASSERT_FALSE(mismatch.has_value());
  EXPECT_NE(mismatch.error().message.find("mismatch"), std::string::npos)
      << mismatch.error().message;

  HttpServer e(io_.get_executor(), {.bind_address = "nonsense"});
  EXPECT_FALSE(e.Start().has_value());
}

TEST_F(HttpServerTest, ServesTlsAndReloadsTheCertificate) {
  TestCerts a = Certs("a");
  TestCerts b = Certs("b");
  const std::string cert = dir_ + "/tls.crt";
  const std::string key = dir_ + "/tls.key";
  std::filesystem::copy_file(a.cert_file, cert);
  std::filesystem::copy_file(a.key_file, key);

  HttpServer server(io_.get_executor(), {.bind_address = "127.0.0.1:0",
                                         .cert_file = cert,
                                         .key_file = key,
                                         .tls_reload_interval = std::chrono::milliseconds(0)});
  server.Route("/echo", Echo);
  ASSERT_TRUE(server.Start().has_value());
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  HttpRequest req{.method = Method::kPost, .target = "/echo", .body = "tls"};

  auto trusts_a = Client(url, {.ca_file = a.ca_file});
  for (int i = 0; i < 2; ++i) {
    Result<HttpResponse> r = Send(*trusts_a, req);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->body, "POST /echo tls");
  }
  EXPECT_EQ(server.stats().connections_accepted, 1u);
  // Plain HTTP to a TLS port gets no answer and does not disturb the server.
  std::string plain =
      RunSync(io_, RawExchange(server.port(), "GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_FALSE(plain.starts_with("HTTP/1.1 200"));

  // The certificate files are replaced: new connections get the new pair.
  Replace(b.cert_file, cert);
  Replace(b.key_file, key);
  auto trusts_b = Client(url, {.ca_file = b.ca_file});
  Result<HttpResponse> rb = Send(*trusts_b, req);
  ASSERT_TRUE(rb.has_value()) << rb.error().ToString();
  EXPECT_EQ(rb->status, 200);
  EXPECT_EQ(server.stats().tls_reloads, 1u);
  auto trusts_a_again = Client(url, {.ca_file = a.ca_file});
  Result<HttpResponse> ra = Send(*trusts_a_again, req);
  EXPECT_FALSE(ra.has_value());

  // A broken replacement is refused; the pair in use stays.
  {
    std::ofstream junk(dir_ + "/junk.crt");
    junk << "not a certificate\n";
  }
  Replace(dir_ + "/junk.crt", cert);
  auto still_b = Client(url, {.ca_file = b.ca_file});
  Result<HttpResponse> rs = Send(*still_b, req);
  ASSERT_TRUE(rs.has_value()) << rs.error().ToString();
  EXPECT_EQ(rs->status, 200);
  EXPECT_EQ(server.stats().tls_reload_failures, 1u);
  // The same broken files are not tried (nor logged) again on every connection.
  auto once_more = Client(url, {.ca_file = b.ca_file});
  ASSERT_TRUE(Send(*once_more, req).has_value());
  EXPECT_EQ(server.stats().tls_reload_failures, 1u);
}

}  // namespace
}  // namespace sb::net
