// SPDX-License-Identifier: Apache-2.0
//
// net/http_server.h
//
// A small HTTP/1.1 server for the bridge's own endpoints: the admission webhook (TLS), health
// probes and metrics (plain). Requests are routed by exact path (the query is ignored for
// routing); a handler is a coroutine that turns one request into one response.
//
// What it does for every connection: keep-alive (until the client or Stop() ends it), a short
// deadline for the TLS handshake and for each request's headers (counted from its first byte;
// slow clients, "slowloris", are dropped), a deadline for the body and for writing each response,
// an idle limit between requests, at most `max_connections_per_ip` connections from one client
// address (more are closed at once) and `max_connections` in all (more wait in the listen
// backlog until one closes), a body
// limit (over it: 413, then the connection is closed), 400 for requests that do not parse, 431
// for oversized headers, 404 for an unknown path, 500 when a handler throws, and
// `Expect: 100-continue`. With TLS, the certificate and key files are re-read when either file
// changed (size, mtime or inode, looked at on a new connection at most once per
// `tls_reload_interval`); a pair that fails to load is logged and the previous pair stays in use.
//
// Thread model: loop-confined. Create, start, stop and destroy it on the thread that runs its
// executor; handlers run there too. Handlers must not capture state that dies before the
// server's connections are gone: call Stop() and let the loop drain first.
//
// Example:
//   HttpServer server(io.get_executor(), {.bind_address = "127.0.0.1:0"});
//   server.RouteSync("/healthz", [](const ServerRequest&) { return TextResponse(200, "ok"); });
//   if (Result<void> r = server.Start(); !r) { ... }   // server.port() is the bound port now
//   ...
//   server.Stop();   // closes the listener and idle connections; busy ones finish their reply
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/error.h"
#include "net/http_client.h"

namespace sb::net {

// One request as the server received it.
struct ServerRequest {
  std::string method;  // as sent: "GET", "POST", "OPTIONS", ...
  std::string target;  // path and query, as sent
  std::string path;    // the target without its query
  std::vector<Header> headers;
  std::string body;
  std::string remote;  // the peer, "127.0.0.1:41234"

  // The first value of header `name` (case-insensitive), or "" when absent.
  [[nodiscard]] std::string_view HeaderValue(std::string_view name) const;
};

// A response with Content-Type `content_type` and `body`.
[[nodiscard]] HttpResponse TextResponse(int status, std::string body,
                                        std::string content_type = "text/plain; charset=utf-8");

struct ServerOptions {
  // "host:port", "[v6]:port" or ":port" (all interfaces). Port 0 picks a free port (port()).
  std::string bind_address = "127.0.0.1:0";
  // Both set: TLS with this PEM certificate chain and key. Both empty: plain HTTP.
  std::string cert_file;
  std::string key_file;
  // The certificate files are looked at (stat) on a new connection at most this often; 0: on
  // every new connection.
  std::chrono::milliseconds tls_reload_interval{5000};
  std::size_t body_limit = std::size_t{4} << 20;     // larger bodies are answered 413
  std::size_t header_limit = std::size_t{16} << 10;  // larger headers are answered 431
  std::chrono::milliseconds header_timeout{5000};    // TLS handshake; one request's headers
  std::chrono::milliseconds read_timeout{30000};     // to read one request's body
  std::chrono::milliseconds write_timeout{30000};    // to write one response
  std::chrono::milliseconds idle_timeout{90000};     // between two requests on a connection
  std::size_t max_connections = 1024;                // more wait to be accepted
  std::size_t max_connections_per_ip = 64;           // more from one address are closed at once
  std::string name = "http";                         // for log lines: "webhook", "health"
};

// Counters, for tests and metrics.
struct ServerStats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t requests = 0;
  std::uint64_t tls_reloads = 0;  // successful reloads after the first load
  std::uint64_t tls_reload_failures = 0;
  std::uint64_t refused_per_ip = 0;  // closed at once: too many from one client address
};

class HttpServer {
 public:
  using Handler = std::function<boost::asio::awaitable<HttpResponse>(ServerRequest)>;
  using SyncHandler = std::function<HttpResponse(const ServerRequest&)>;

  HttpServer(boost::asio::any_io_executor executor, ServerOptions options);
  // Stops the server (see Stop()).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Routes requests for `path` (exact match, any method) to `handler`. Call before Start().
  void Route(std::string path, Handler handler);
  void RouteSync(std::string path, SyncHandler handler);

  // Loads the TLS pair (when configured), binds and listens, and starts accepting. Startup
  // errors: kInvalidArgument (bad address, unreadable or bad certificate/key), kUnavailable
  // (the address is in use or cannot be bound).
  [[nodiscard]] Result<void> Start();
  // Closes the listener and every idle connection; a connection in the middle of a request
  // answers it (with Connection: close) and then closes. Idempotent.
  void Stop();

  // The bound port (after Start()).
  [[nodiscard]] std::uint16_t port() const;
  // True between a successful Start() and Stop().
  [[nodiscard]] bool listening() const;
  // Connections open now.
  [[nodiscard]] std::size_t open_connections() const;
  [[nodiscard]] const ServerStats& stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Splits "host:port", "[v6]:port" or ":port" into host ("" for all interfaces) and port.
// kInvalidArgument when it has no port or the port is not 0-65535.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};
[[nodiscard]] Result<HostPort> ParseHostPort(std::string_view address);

}  // namespace sb::net
