// SPDX-License-Identifier: Apache-2.0
#include "net/http_server.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "common/files.h"
#include "common/strings.h"

namespace sb::net {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// A server TLS context for the PEM pair; kInvalidArgument naming the file that is wrong.
Result<std::shared_ptr<asio::ssl::context>> LoadTlsContext(const std::string& cert_file,
                                                           const std::string& key_file) {
  std::optional<std::string> cert = ReadWholeFile(cert_file);
  if (!cert) {
    return MakeError(ErrorCode::kInvalidArgument, "TLS certificate: cannot read " + cert_file);
  }
  std::optional<std::string> key = ReadWholeFile(key_file);
  if (!key) {
    return MakeError(ErrorCode::kInvalidArgument, "TLS key: cannot read " + key_file);
  }
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  beast::error_code ec;
  ctx->use_certificate_chain(asio::buffer(*cert), ec);
  if (ec) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "TLS certificate " + cert_file + ": " + ec.message());
  }
  ctx->use_private_key(asio::buffer(*key), asio::ssl::context::pem, ec);
  if (ec) {
    return MakeError(ErrorCode::kInvalidArgument, "TLS key " + key_file + ": " + ec.message());
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "TLS key " + key_file + " does not match certificate " + cert_file);
  }
  return ctx;
}

std::string PeerName(const tcp::socket& sock) {
  beast::error_code ec;
  tcp::endpoint ep = sock.remote_endpoint(ec);
  if (ec) {
    return "?";
  }
  std::string host = ep.address().to_string();
  if (ep.address().is_v6()) {
    host = "[" + host + "]";
  }
  return host + ":" + std::to_string(ep.port());
}

bool IsParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

std::string_view ServerRequest::HeaderValue(std::string_view name) const {
  for (const Header& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

HttpResponse TextResponse(int status, std::string body, std::string content_type) {
  HttpResponse r;
  r.status = status;
  r.headers.push_back({"Content-Type", std::move(content_type)});
  r.body = std::move(body);
  return r;
}

Result<HostPort> ParseHostPort(std::string_view address) {
  auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "invalid bind address \"" + std::string(address) + "\": " + std::string(why));
  };
  HostPort hp;
  std::string_view port_text;
  if (address.starts_with("[")) {
    std::size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return bad("want [address]:port");
    }
    hp.host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else {
    std::size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) {
      return bad("no port (want host:port or :port)");
    }
    hp.host = std::string(address.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) {
      return bad("IPv6 addresses go in brackets");
    }
    port_text = address.substr(colon + 1);
  }
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
  if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
      value > 65535) {
    return bad("port must be 0-65535");
  }
  hp.port = static_cast<std::uint16_t>(value);
  return hp;
}

// One open connection, as Stop() sees it.
struct ServerConn {
  beast::tcp_stream* tcp = nullptr;  // the lowest layer, while the session runs
  bool busy = false;                 // between the start of a request and the end of its reply
};

// The server's state, shared by the accept loop and the connections.
struct ServerState {
  using Handler = HttpServer::Handler;
  asio::any_io_executor executor;
  ServerOptions options;
  std::map<std::string, Handler, std::less<>> routes;
  std::optional<tcp::acceptor> acceptor;
  std::set<std::shared_ptr<ServerConn>> conns;
  std::map<asio::ip::address, std::size_t> per_ip;  // open connections by client address
  std::optional<asio::steady_timer> slot_freed;     // woken when a connection ends
  ServerStats stats;
  std::uint16_t port = 0;
  bool listening = false;
  bool stopping = false;

  // TLS: the pair in use, the file versions it came from, the versions that last failed.
  bool tls_enabled = false;
  std::shared_ptr<asio::ssl::context> tls;
  std::pair<FileStamp, FileStamp> tls_loaded;
  std::pair<FileStamp, FileStamp> tls_failed;
  std::chrono::steady_clock::time_point tls_checked_at{};

  // The TLS context for a new connection, reloading the pair first when the files changed.
  std::shared_ptr<asio::ssl::context> TlsForNewConnection() {
    auto now = std::chrono::steady_clock::now();
    if (tls_checked_at != std::chrono::steady_clock::time_point{} &&
        now - tls_checked_at < options.tls_reload_interval) {
      return tls;
    }
    tls_checked_at = now;
    std::pair<FileStamp, FileStamp> sig{StatFile(options.cert_file), StatFile(options.key_file)};
    if (sig == tls_loaded || sig == tls_failed) {
      return tls;
    }
    Result<std::shared_ptr<asio::ssl::context>> ctx =
        LoadTlsContext(options.cert_file, options.key_file);
    if (!ctx) {
      // Files caught half-replaced fail here too; the next change is tried again.
      tls_failed = sig;
      ++stats.tls_reload_failures;
      spdlog::warn("{}: reloading TLS certificate failed, keeping the previous one: {}",
                   options.name, ctx.error().message);
      return tls;
    }
    tls = std::move(*ctx);
    tls_loaded = sig;
    tls_failed = {};
    ++stats.tls_reloads;
    spdlog::info("{}: reloaded TLS certificate {}", options.name, options.cert_file);
    return tls;
  }
};

struct HttpServer::Impl : ServerState {};

namespace {

using ImplPtr = std::shared_ptr<ServerState>;

// Reads and discards what the client still sends after an early reply (a body over the limit),
// so that closing the socket does not reset the connection before the client read the reply
// (the "lingering close" of HTTP servers).
asio::awaitable<void> LingeringClose(beast::tcp_stream& tcp, std::chrono::milliseconds timeout,
                                     std::size_t max_bytes) {
  beast::error_code ec;
  tcp.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::vector<char> scratch(64 * 1024);
  std::size_t total = 0;
  while (total < max_bytes) {
    tcp.expires_after(timeout);
    auto [rec, n] = co_await tcp.async_read_some(asio::buffer(scratch), kTuple);
    if (rec) {
      break;
    }
    total += n;
  }
}

template <typename Stream>
asio::awaitable<beast::error_code> WriteResponse(Stream& stream,
                                                 http::response<http::string_body>& res,
                                                 std::chrono::milliseconds timeout) {
  beast::get_lowest_layer(stream).expires_after(timeout);
  auto [ec, n] = co_await http::async_write(stream, res, kTuple);
  co_return ec;
}

http::response<http::string_body> ErrorReply(unsigned status, std::string text, unsigned version) {
  http::response<http::string_body> res{static_cast<http::status>(status), version};
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.set(http::field::server, "slurm-bridge");
  res.body() = std::move(text);
  res.keep_alive(false);
  res.prepare_payload();
  return res;
}

// Answers a request that cannot be served (parse error, limits) and ends the connection.
template <typename Stream>
asio::awaitable<void> Reject(const ImplPtr& d, Stream& stream, const beast::error_code& ec,
                             const std::string& remote) {
  unsigned status = 400;
  std::string text = "bad request: " + ec.message() + "\n";
  if (ec == http::error::body_limit) {
    status = 413;
    text = "request body over " + std::to_string(d->options.body_limit) + " bytes\n";
  } else if (ec == http::error::header_limit) {
    status = 431;
    text = "request headers too large\n";
  }
  spdlog::debug("{}: {} from {}: {}", d->options.name, status, remote, ec.message());
  http::response<http::string_body> res = ErrorReply(status, std::move(text), 11);
  beast::error_code wec = co_await WriteResponse(stream, res, d->options.write_timeout);
  if (!wec) {
    co_await LingeringClose(beast::get_lowest_layer(stream), d->options.read_timeout,
                            2 * d->options.body_limit + (std::size_t{1} << 20));
  }
}

// Serves requests on one connection until it ends.
template <typename Stream>
asio::awaitable<void> Serve(ImplPtr d, std::shared_ptr<ServerConn> c, Stream& stream,
                            std::string remote) {
  beast::flat_buffer buffer;
  bool first = true;
  for (;;) {
    if (d->stopping) {
      co_return;
    }
    http::request_parser<http::string_body> parser;
    parser.body_limit(d->options.body_limit);
    parser.header_limit(static_cast<std::uint32_t>(d->options.header_limit));
    if (!first && buffer.size() == 0) {
      // Keep-alive: wait (idle_timeout) for the next request's first byte; its headers then get
      // header_timeout like the first request's.
      beast::get_lowest_layer(stream).expires_after(d->options.idle_timeout);
      auto [ec, n] = co_await stream.async_read_some(buffer.prepare(4096), kTuple);
      if (ec) {
        co_return;
      }
      buffer.commit(n);
    }
    beast::get_lowest_layer(stream).expires_after(d->options.header_timeout);
    auto [ec, n] = co_await http::async_read_header(stream, buffer, parser, kTuple);
    if (ec) {
      if (IsParseError(ec)) {
        c->busy = true;
        co_await Reject(d, stream, ec, remote);
      }
      co_return;
    }
    c->busy = true;
    first = false;
    beast::get_lowest_layer(stream).expires_after(d->options.read_timeout);
    if (!parser.is_done()) {
      auto expect = parser.get()[http::field::expect];
      if (EqualsIgnoreCase(expect, "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, parser.get().version()};
        auto [cec, cn] = co_await http::async_write(stream, cont, kTuple);
        if (cec) {
          co_return;
        }
      }
      std::tie(ec, n) = co_await http::async_read(stream, buffer, parser, kTuple);
      if (ec) {
        if (IsParseError(ec)) {
          co_await Reject(d, stream, ec, remote);
        }
        co_return;
      }
    }
    http::request<http::string_body> req = parser.release();
    ++d->stats.requests;

    ServerRequest sreq;
    sreq.method = std::string(req.method_string());
    sreq.target = std::string(req.target());
    sreq.path = sreq.target.substr(0, sreq.target.find('?'));
    for (const auto& field : req) {
      sreq.headers.push_back({std::string(field.name_string()), std::string(field.value())});
    }
    sreq.body = std::move(req.body());
    sreq.remote = remote;

    HttpResponse res;
    auto it = d->routes.find(sreq.path);
    if (it == d->routes.end()) {
      res = TextResponse(404, "not found\n");
    } else {
      try {
        res = co_await it->second(std::move(sreq));
      } catch (const std::exception& e) {
        spdlog::error("{}: handler for {} failed: {}", d->options.name, it->first, e.what());
        res = TextResponse(500, "internal error\n");
      }
    }
    if (res.status < 100 || res.status > 999) {
      res.status = 500;
    }

    http::response<http::string_body> out;
    out.version(req.version());
    out.result(static_cast<unsigned>(res.status));
    out.set(http::field::server, "slurm-bridge");
    for (const Header& h : res.headers) {
      out.set(h.name, h.value);
    }
    out.body() = std::move(res.body);
    const bool keep = req.keep_alive() && !d->stopping;
    out.keep_alive(keep);
    out.prepare_payload();
    beast::error_code wec = co_await WriteResponse(stream, out, d->options.write_timeout);
    c->busy = false;
    if (wec || !keep) {
      co_return;
    }
  }
}

// Forgets one connection from `addr`, and wakes an accept loop that waits for a free slot.
void ConnectionEnded(const ImplPtr& d, const std::shared_ptr<ServerConn>& c,
                     const asio::ip::address& addr) {
  d->conns.erase(c);
  if (auto it = d->per_ip.find(addr); it != d->per_ip.end() && --it->second == 0) {
    d->per_ip.erase(it);
  }
  if (d->slot_freed) {
    d->slot_freed->cancel();
  }
}

asio::awaitable<void> Session(ImplPtr d, std::shared_ptr<ServerConn> c, tcp::socket socket,
                              std::shared_ptr<asio::ssl::context> tls, asio::ip::address addr) {
  std::string remote = PeerName(socket);
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  try {
    if (!tls) {
      beast::tcp_stream stream(std::move(socket));
      c->tcp = &stream;
      co_await Serve(d, c, stream, remote);
      stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
      c->tcp = nullptr;
    } else {
      beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), *tls);
      c->tcp = &beast::get_lowest_layer(stream);
      beast::get_lowest_layer(stream).expires_after(d->options.header_timeout);
      auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, kTuple);
      if (ec) {
        spdlog::debug("{}: TLS handshake with {} failed: {}", d->options.name, remote,
                      ec.message());
      } else if (!d->stopping) {
        co_await Serve(d, c, stream, remote);
      }
      beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
      c->tcp = nullptr;
    }
  } catch (const std::exception& e) {
    c->tcp = nullptr;
    spdlog::error("{}: connection from {} failed: {}", d->options.name, remote, e.what());
  }
  ConnectionEnded(d, c, addr);
}

asio::awaitable<void> AcceptLoop(ImplPtr d) {
  d->slot_freed.emplace(d->executor);
  while (!d->stopping) {
    if (d->conns.size() >= d->options.max_connections) {
      // Back-pressure: leave further clients in the listen backlog until a connection ends.
      d->slot_freed->expires_after(std::chrono::seconds(1));
      co_await d->slot_freed->async_wait(kTuple);
      continue;
    }
    auto [ec, socket] = co_await d->acceptor->async_accept(kTuple);
    if (d->stopping) {
      break;
    }
    if (ec) {
      if (ec == asio::error::operation_aborted) {
        break;
      }
      // Out of file descriptors and the like: wait a little instead of spinning.
      spdlog::warn("{}: accept failed: {}", d->options.name, ec.message());
      asio::steady_timer t(d->executor, std::chrono::milliseconds(100));
      co_await t.async_wait(kTuple);
      continue;
    }
    ++d->stats.connections_accepted;
    beast::error_code aec;
    asio::ip::address addr = socket.remote_endpoint(aec).address();
    if (aec) {
      continue;  // the client is gone already
    }
    if (addr.is_v6() && addr.to_v6().is_v4_mapped()) {
      addr = asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6());
    }
    std::size_t& from_addr = d->per_ip[addr];
    if (d->options.max_connections_per_ip > 0 && from_addr >= d->options.max_connections_per_ip) {
      ++d->stats.refused_per_ip;
      spdlog::warn("{}: {} connections open from {}, refusing one more", d->options.name, from_addr,
                   addr.to_string());
      beast::error_code ignored;
      socket.close(ignored);
      continue;
    }
    ++from_addr;
    std::shared_ptr<asio::ssl::context> tls;
    if (d->tls_enabled) {
      tls = d->TlsForNewConnection();
    }
    auto conn = std::make_shared<ServerConn>();
    d->conns.insert(conn);
    asio::co_spawn(d->executor, Session(d, conn, std::move(socket), std::move(tls), addr),
                   asio::detached);
  }
}

}  // namespace

HttpServer::HttpServer(asio::any_io_executor executor, ServerOptions options)
    : impl_(std::make_shared<Impl>()) {
  impl_->executor = std::move(executor);
  impl_->options = std::move(options);
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Route(std::string path, Handler handler) {
  impl_->routes[std::move(path)] = std::move(handler);
}

namespace {
asio::awaitable<HttpResponse> CallSync(std::shared_ptr<HttpServer::SyncHandler> handler,
                                       ServerRequest request) {
  co_return (*handler)(request);
}
}  // namespace

void HttpServer::RouteSync(std::string path, SyncHandler handler) {
  auto shared = std::make_shared<SyncHandler>(std::move(handler));
  Route(std::move(path),
        [shared](ServerRequest request) { return CallSync(shared, std::move(request)); });
}

Result<void> HttpServer::Start() {
  Impl& d = *impl_;
  if (d.listening || d.stopping) {
    return MakeError(ErrorCode::kFailedPrecondition, d.options.name + ": already started");
  }
  Result<HostPort> hp = ParseHostPort(d.options.bind_address);
  if (!hp) {
    return tl::unexpected(hp.error());
  }
  if (d.options.cert_file.empty() != d.options.key_file.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     d.options.name + ": TLS needs both a certificate and a key file");
  }
  if (!d.options.cert_file.empty()) {
    std::pair<FileStamp, FileStamp> sig{StatFile(d.options.cert_file),
                                        StatFile(d.options.key_file)};
    Result<std::shared_ptr<asio::ssl::context>> ctx =
        LoadTlsContext(d.options.cert_file, d.options.key_file);
    if (!ctx) {
      return tl::unexpected(ctx.error());
    }
    d.tls_enabled = true;
    d.tls = std::move(*ctx);
    d.tls_loaded = sig;
    d.tls_checked_at = std::chrono::steady_clock::now();
  }

  beast::error_code ec;
  std::vector<tcp::endpoint> candidates;
  if (hp->host.empty()) {
    // ":port": every interface, IPv6 and IPv4 on one socket where the host has IPv6.
    candidates.emplace_back(tcp::v6(), hp->port);
    candidates.emplace_back(tcp::v4(), hp->port);
  } else {
    asio::ip::address addr = asio::ip::make_address(hp->host, ec);
    if (!ec) {
      candidates.emplace_back(addr, hp->port);
    } else {
      tcp::resolver resolver(d.executor);
      auto results = resolver.resolve(hp->host, std::to_string(hp->port), ec);
      if (ec) {
        return MakeError(ErrorCode::kInvalidArgument,
                         d.options.name + ": cannot resolve " + hp->host + ": " + ec.message());
      }
      for (const auto& r : results) {
        candidates.push_back(r.endpoint());
      }
    }
  }
  std::string last_error = "no address";
  for (const tcp::endpoint& ep : candidates) {
    tcp::acceptor acc(d.executor);
    acc.open(ep.protocol(), ec);
    if (ec) {
      last_error = ec.message();
      continue;
    }
    acc.set_option(asio::socket_base::reuse_address(true), ec);
    if (hp->host.empty() && ep.protocol() == tcp::v6()) {
      acc.set_option(asio::ip::v6_only(false), ec);
    }
    acc.bind(ep, ec);
    if (!ec) {
      acc.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      last_error = ec.message();
      // A v6 socket on a host without IPv6 fails to open or bind; the v4 one is next.
      if (hp->host.empty() && ep.protocol() == tcp::v6() && ec != asio::error::address_in_use) {
        continue;
      }
      return MakeError(ErrorCode::kUnavailable, d.options.name + ": cannot listen on " +
                                                    d.options.bind_address + ": " + last_error);
    }
    d.port = acc.local_endpoint(ec).port();
    d.acceptor.emplace(std::move(acc));
    break;
  }
  if (!d.acceptor) {
    return MakeError(ErrorCode::kUnavailable, d.options.name + ": cannot listen on " +
                                                  d.options.bind_address + ": " + last_error);
  }
  d.listening = true;
  spdlog::info("{}: listening on {} (port {}{})", d.options.name, d.options.bind_address, d.port,
               d.tls_enabled ? ", TLS" : "");
  asio::co_spawn(d.executor, AcceptLoop(impl_), asio::detached);
  return {};
}

void HttpServer::Stop() {
  Impl& d = *impl_;
  if (d.stopping) {
    return;
  }
  d.stopping = true;
  d.listening = false;
  beast::error_code ignored;
  if (d.acceptor) {
    d.acceptor->cancel(ignored);
    d.acceptor->close(ignored);
  }
  if (d.slot_freed) {
    d.slot_freed->cancel();
  }
  for (const auto& c : d.conns) {
    if (!c->busy && c->tcp != nullptr) {
      c->tcp->cancel();
    }
  }
}

std::uint16_t HttpServer::port() const { return impl_->port; }
bool HttpServer::listening() const { return impl_->listening; }
std::size_t HttpServer::open_connections() const { return impl_->conns.size(); }
const ServerStats& HttpServer::stats() const { return impl_->stats; }

}  // namespace sb::net
