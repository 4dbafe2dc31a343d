// SPDX-License-Identifier: Apache-2.0
//
// fuzz/http_server_fuzz.cc
//
// HttpServer's request parsing and connection handling (net/http_server.h, Beast underneath):
// the admission webhook and the health and metrics endpoints read requests from whatever can
// reach their port, so their request parser reads bytes straight off the network (test audit
// N9). Each input is the whole byte stream of one client connection: it is written over loopback
// to a real server in this process (plain HTTP, 64 KiB body and 8 KiB header limits, routes "/"
// and "/async" that echo, "/throw" that throws), the client then shuts down its sending side and
// reads what the server answers until the server closes.
// Properties: the server closes the connection; what it wrote is empty or a sequence of complete
// HTTP responses ("HTTP/x.y", the request's version), each with a status the server documents
// (100, 200, 400, 404, 413, 431, 500), one response of 200/404/500 per request the server
// counted, and nothing after a 400/413/431 or a response without keep-alive; once the connection is
// gone, open_connections() is back to 0. Seeds: fuzz/seeds/http_server/.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "fuzz/fuzz_input.h"
#include "fuzz/loopback.h"
#include "net/http_server.h"

namespace {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using sb::fuzz::Finding;
using sb::fuzz::kTuple;

struct Harness {
  asio::io_context io;
  std::optional<sb::net::HttpServer> server;
};

Harness& Get() {
  // Never destroyed: the server's coroutines stay suspended on `io` until the process exits.
  static Harness* h = [] {
    spdlog::set_level(spdlog::level::off);
    auto* hs = new Harness;
    sb::net::ServerOptions o;
    o.bind_address = "127.0.0.1:0";
    o.body_limit = std::size_t{64} << 10;
    o.header_limit = std::size_t{8} << 10;
    // The client has sent everything and shut down before the server reads: no deadline should
    // fire. They are short so that one that is wrongly awaited cannot stall a run.
    o.header_timeout = o.read_timeout = o.write_timeout = o.idle_timeout =
        std::chrono::milliseconds(500);
    o.max_connections_per_ip = 0;  // no limit
    o.name = "fuzz";
    hs->server.emplace(hs->io.get_executor(), o);
    hs->server->RouteSync("/", [](const sb::net::ServerRequest& r) {
      return sb::net::TextResponse(
          200, r.method + " " + r.path + " " + std::to_string(r.body.size()) + "\n");
    });
    hs->server->Route(
        "/async", [](sb::net::ServerRequest r) -> asio::awaitable<sb::net::HttpResponse> {
          asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(0));
          co_await t.async_wait(kTuple);
          co_return sb::net::TextResponse(200, std::move(r.body));
        });
    hs->server->RouteSync("/throw", [](const sb::net::ServerRequest&) -> sb::net::HttpResponse {
      throw std::runtime_error("fuzz");
    });
    if (!hs->server->Start()) {
      Finding("http server did not start");
    }
    return hs;
  }();
  return *h;
}

// One client connection: writes `in` (concurrently with reading), shuts down its sending side,
// reads until the server closes, keeping at most kKeep bytes of the reply.
constexpr std::size_t kKeep = std::size_t{16} << 20;

struct Conn {
  explicit Conn(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  std::string in;
  std::string out;
  bool connected = false;
  bool wrote = false;
  bool read = false;
};

asio::awaitable<void> Write(std::shared_ptr<Conn> c) {
  // Errors are expected: the server may close (and reset) before it read everything.
  co_await asio::async_write(c->socket, asio::buffer(c->in), kTuple);
  boost::system::error_code ignored;
  c->socket.shutdown(tcp::socket::shutdown_send, ignored);
  c->wrote = true;
}

asio::awaitable<void> Read(std::shared_ptr<Conn> c) {
  std::vector<char> buf(64 * 1024);
  for (;;) {
    auto [ec, n] = co_await c->socket.async_read_some(asio::buffer(buf), kTuple);
    if (c->out.size() < kKeep) {
      c->out.append(buf.data(), n);
    }
    if (ec) {
      break;  // eof, or a reset when the server closed with input unread
    }
  }
  c->read = true;
}

asio::awaitable<void> Exchange(std::shared_ptr<Conn> c, tcp::endpoint ep) {
  auto [ec] = co_await c->socket.async_connect(ep, kTuple);
  if (ec) {
    Finding("connect to the server failed: " + ec.message());
  }
  c->connected = true;
  asio::co_spawn(c->socket.get_executor(), Write(c), asio::detached);
  co_await Read(c);
}

// Checks the server's output; returns the number of responses to counted requests.
std::uint64_t CheckReplies(std::string_view out) {
  std::uint64_t answered = 0;
  bool ended = false;
  while (!out.empty()) {
    if (ended) {
      Finding("bytes after a response that ends the connection");
    }
    if (!out.starts_with("HTTP/")) {
      Finding("a response that does not start with HTTP/");
    }
    http::response_parser<http::string_body> p;
    p.eager(true);
    p.header_limit(64 * 1024);
    p.body_limit(boost::none);
    while (!p.is_done()) {
      boost::beast::error_code ec;
      std::size_t used = p.put(asio::buffer(out.data(), out.size()), ec);
      out.remove_prefix(used);
      if (ec == http::error::need_more && used > 0) {
        continue;
      }
      if (ec) {
        Finding("the server wrote a truncated or malformed response: " + ec.message());
      }
    }
    switch (p.get().result_int()) {
      case 100:
        break;
      case 200:
      case 404:
      case 500:
        ++answered;
        ended = !p.get().keep_alive();  // Connection: close, or HTTP/1.0 without keep-alive
        break;
      case 400:
      case 413:
      case 431:
        ended = true;
        break;
      default:
        Finding("a status the server does not document: " + std::to_string(p.get().result_int()));
    }
  }
  return answered;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Harness& h = Get();
  const std::uint64_t requests_before = h.server->stats().requests;
  auto c = std::make_shared<Conn>(h.io);
  c->in = std::string(sb::fuzz::AsText(data, size));
  asio::co_spawn(
      h.io, Exchange(c, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), h.server->port())),
      asio::detached);
  if (!sb::fuzz::RunUntil(h.io, [&] { return c->read && c->wrote; }, std::chrono::seconds(5))) {
    Finding("the server did not close the connection within 5 s");
  }
  sb::fuzz::AbortiveClose(c->socket);
  if (!sb::fuzz::RunUntil(
          h.io, [&] { return h.server->open_connections() == 0; }, std::chrono::seconds(2))) {
    Finding("open_connections() is not back to 0 after the client closed");
  }
  if (c->out.size() >= kKeep) {
    return 0;  // not kept whole; no input of a fuzzing run gets near this
  }
  const std::uint64_t answered = CheckReplies(c->out);
  if (answered != h.server->stats().requests - requests_before) {
    Finding("not one response per request: " + std::to_string(answered) + " responses, " +
            std::to_string(h.server->stats().requests - requests_before) + " requests");
  }
  return 0;
}
