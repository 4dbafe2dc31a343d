// SPDX-License-Identifier: Apache-2.0
//
// fuzz/loopback.h
//
// Helpers shared by the fuzz targets of the network-facing parsers (http_server_fuzz,
// http_client_fuzz, kube_watch_fuzz): driving one io_context until a condition holds, a finding
// reported with a reason, and RawPeer, a bare TCP server on 127.0.0.1 that answers every
// connection with bytes the fuzz input chose. All traffic stays on the loopback interface.
//
// Thread model: one fuzzing thread per process (libFuzzer's default); everything runs on its
// io_context.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "net/http_client.h"

namespace sb::fuzz {

inline constexpr auto kTuple = boost::asio::as_tuple(boost::asio::use_awaitable);

// A violated property: says which on stderr, then aborts (libFuzzer keeps the input).
[[noreturn]] inline void Finding(std::string_view what) {
  std::fprintf(stderr, "FINDING: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

// Runs `io` until `done()` holds; false when `limit` (wall clock) passed first.
template <typename Done>
bool RunUntil(boost::asio::io_context& io, Done done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    if (io.stopped()) {
      io.restart();
    }
    io.run_one_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Closes `socket` with a reset (SO_LINGER 0) once both sides are done with it, so that the
// thousands of connections a run opens leave no TIME_WAIT sockets behind.
inline void AbortiveClose(boost::asio::ip::tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.set_option(boost::asio::socket_base::linger(true, 0), ignored);
  socket.close(ignored);
}

// A bare HTTP peer on 127.0.0.1:<port()>: for each connection it reads the request head (up to
// the blank line, at most 64 KiB, or until the client stops sending), writes `pieces` one write
// each, shuts down its sending side and waits (at most 2 s) for the client to close.
class RawPeer {
 public:
  explicit RawPeer(boost::asio::io_context& io) : io_(io), acceptor_(io) {
    namespace ip = boost::asio::ip;
    ip::tcp::endpoint ep(ip::make_address_v4("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(boost::asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    boost::asio::co_spawn(io_, AcceptLoop(), boost::asio::detached);
  }

  // What the next connections get.
  void SetReply(std::vector<std::string> pieces) { pieces_ = std::move(pieces); }
  [[nodiscard]] unsigned short port() const { return port_; }
  // Connections not yet closed on this side.
  [[nodiscard]] int active() const { return active_; }

 private:
  boost::asio::awaitable<void> AcceptLoop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(kTuple);
      if (ec) {
        Finding(std::string("RawPeer: accept failed: ") + ec.message());
      }
      ++active_;
      boost::asio::co_spawn(io_, Session(std::move(socket), pieces_), boost::asio::detached);
    }
  }

  boost::asio::awaitable<void> Session(boost::asio::ip::tcp::socket socket,
                                       std::vector<std::string> pieces) {
    boost::beast::tcp_stream stream(std::move(socket));
    std::string head;
    std::vector<char> buf(4096);
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < (std::size_t{64} << 10)) {
      stream.expires_after(std::chrono::seconds(2));
      auto [ec, n] = co_await stream.async_read_some(boost::asio::buffer(buf), kTuple);
      if (ec) {
        break;
      }
      head.append(buf.data(), n);
    }
    for (const std::string& p : pieces) {
      stream.expires_after(std::chrono::seconds(2));
      auto [ec, n] = co_await boost::asio::async_write(stream, boost::asio::buffer(p), kTuple);
      if (ec) {
        break;
      }
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ignored);
    for (;;) {
      stream.expires_after(std::chrono::seconds(2));
      auto [ec, n] = co_await stream.async_read_some(boost::asio::buffer(buf), kTuple);
      if (ec) {
        break;
      }
    }
    AbortiveClose(stream.socket());
    --active_;
  }

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::vector<std::string> pieces_;
  int active_ = 0;
};

// An HttpClient of plain HTTP to 127.0.0.1:`port`: one attempt, 2 s deadlines (the peer always
// closes, so none should fire), replies up to 1 MiB. A failure to create it is a finding.
inline std::unique_ptr<net::HttpClient> LoopbackClient(boost::asio::io_context& io,
                                                       std::uint16_t port) {
  net::Endpoint ep;
  ep.scheme = net::Endpoint::Scheme::kHttp;
  ep.host = "127.0.0.1";
  ep.port = port;
  net::ClientOptions o;
  o.timeout = std::chrono::seconds(2);
  o.connect_timeout = std::chrono::seconds(2);
  o.max_attempts = 1;
  o.body_limit = std::size_t{1} << 20;
  auto client = net::HttpClient::Create(io.get_executor(), ep, o);
  if (!client) Finding("HttpClient::Create failed: " + client.error().ToString());
  return std::move(*client);
}

// A RawPeer and a LoopbackClient to it on one io_context, for the client fuzz targets: made at
// the first call and never destroyed (the peer's accept loop stays suspended on `io` until the
// process exits). Logging is off: every input would log its failure.
struct ClientHarness {
  boost::asio::io_context io;
  std::optional<RawPeer> peer;
  std::unique_ptr<net::HttpClient> client;
};

inline ClientHarness& SharedClientHarness() {
  static ClientHarness* h = [] {
    spdlog::set_level(spdlog::level::off);
    auto* made = new ClientHarness;
    made->peer.emplace(made->io);
    made->client = LoopbackClient(made->io, made->peer->port());
    return made;
  }();
  return *h;
}

}  // namespace sb::fuzz
