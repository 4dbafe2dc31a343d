// SPDX-License-Identifier: Apache-2.0
#include "net/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <random>
#include <utility>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "common/strings.h"

namespace sb::net {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

using TcpStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using UnixStream = beast::basic_stream<asio::local::stream_protocol, asio::any_io_executor,
                                       beast::unlimited_rate_policy>;

http::verb ToVerb(Method m) {
  switch (m) {
    case Method::kGet:
      return http::verb::get;
    case Method::kHead:
      return http::verb::head;
    case Method::kPost:
      return http::verb::post;
    case Method::kPut:
      return http::verb::put;
    case Method::kPatch:
      return http::verb::patch;
    case Method::kDelete:
      return http::verb::delete_;
  }
  return http::verb::get;
}

// Where in an exchange a failure happened: decides whether a retry is safe.
enum class Stage { kConnect, kWrite, kRead };

struct Failure {
  Stage stage;
  beast::error_code ec;
  bool reused;  // the connection came from the idle pool
};

Error TransportErrorOf(const Endpoint& ep, const Failure& f) {
  std::string what;
  switch (f.stage) {
    case Stage::kConnect:
      what = "connect to ";
      break;
    case Stage::kWrite:
      what = "send to ";
      break;
    case Stage::kRead:
      what = "read from ";
      break;
  }
  what += ep.ToString() + ": ";
  if (f.ec == beast::error::timeout || f.ec == asio::error::timed_out) {
    return Error{ErrorCode::kDeadlineExceeded, what + "timed out", 0};
  }
  if (f.ec == http::error::end_of_stream || f.ec == asio::error::eof ||
      f.ec == http::error::partial_message) {
    return Error{ErrorCode::kUnavailable, what + "connection closed before a complete reply", 0};
  }
  if (f.ec == http::error::body_limit) {
    return Error{ErrorCode::kInternal, what + "response body over the size limit", 0};
  }
  if (f.ec.category() == http::make_error_code(http::error::bad_target).category()) {
    return Error{ErrorCode::kUnavailable, what + "malformed HTTP reply: " + f.ec.message(), 0};
  }
  return Error{ErrorCode::kUnavailable, what + f.ec.message(), 0};
}

Error TransportError(const Endpoint& ep, const Failure& f) {
  Error e = TransportErrorOf(ep, f);
  if (f.stage != Stage::kConnect) {
    e.reason = std::string(kReasonMayHaveBeenProcessed);
    e.message += " (the request was sent: the server may have processed it)";
  }
  return e;
}

}  // namespace

std::string_view MethodName(Method method) {
  switch (method) {
    case Method::kGet:
      return "GET";
    case Method::kHead:
      return "HEAD";
    case Method::kPost:
      return "POST";
    case Method::kPut:
      return "PUT";
    case Method::kPatch:
      return "PATCH";
    case Method::kDelete:
      return "DELETE";
  }
  return "GET";
}

bool MayHaveBeenProcessed(const Error& error) {
  return error.reason == kReasonMayHaveBeenProcessed;
}

bool IsIdempotent(Method method) {
  return method == Method::kGet || method == Method::kHead || method == Method::kPut ||
         method == Method::kDelete;
}

std::string_view HttpResponse::HeaderValue(std::string_view name) const {
  for (const Header& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

std::string Endpoint::ToString() const {
  switch (scheme) {
    case Scheme::kUnix:
      return "unix://" + unix_path;
    case Scheme::kHttp:
    case Scheme::kHttps: {
      std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
      return std::string(scheme == Scheme::kHttp ? "http://" : "https://") + h + ":" +
             std::to_string(port) + base_path;
    }
  }
  return {};
}

Result<Endpoint> ParseEndpoint(std::string_view url) {
  auto bad = [&](std::string_view why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "invalid URL \"" + std::string(url) + "\": " + std::string(why));
  };
  Endpoint ep;
  std::string_view rest;
  if (url.starts_with("unix://")) {
    ep.scheme = Endpoint::Scheme::kUnix;
    ep.unix_path = std::string(url.substr(7));
    if (ep.unix_path.empty() || ep.unix_path.front() != '/') {
      return bad("a unix URL needs an absolute socket path (unix:///path)");
    }
    return ep;
  }
  if (url.starts_with("http://")) {
    ep.scheme = Endpoint::Scheme::kHttp;
    ep.port = 80;
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    ep.scheme = Endpoint::Scheme::kHttps;
    ep.port = 443;
    rest = url.substr(8);
  } else {
    return bad("scheme must be http, https or unix");
  }
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = rest.substr(slash);
    if (path.find_first_of("?#") != std::string_view::npos) {
      return bad("no query or fragment allowed");
    }
    while (!path.empty() && path.back() == '/') {
      path.remove_suffix(1);
    }
    ep.base_path = std::string(path);
  }
  if (authority.find('@') != std::string_view::npos) {
    return bad("credentials in the URL are not supported");
  }
  std::string_view port_text;
  if (authority.starts_with("[")) {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return bad("unterminated IPv6 literal");
    }
    ep.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return bad("junk after IPv6 literal");
      }
      port_text = after.substr(1);
    }
  } else {
    std::size_t colon = authority.rfind(':');
    ep.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
    }
  }
  if (ep.host.empty()) {
    return bad("no host");
  }
  if (!port_text.empty() || authority.ends_with(":")) {
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      return bad("port must be 1-65535");
    }
    ep.port = static_cast<std::uint16_t>(value);
  }
  return ep;
}

// One open connection of any of the three kinds.
struct Connection {
  std::variant<TcpStream, TlsStream, UnixStream> stream;
  beast::flat_buffer buffer;
  std::chrono::steady_clock::time_point idle_since;

  template <typename S>
  explicit Connection(S&& s) : stream(std::forward<S>(s)) {}

  void ExpiresAfter(std::chrono::steady_clock::duration d) {
    std::visit([&](auto& s) { beast::get_lowest_layer(s).expires_after(d); }, stream);
  }
  // False when the server closed the connection while it sat idle (or sent bytes nobody asked
  // for). A peek that would block is the only healthy answer.
  bool LooksAlive() {
    if (buffer.size() > 0) {
      return false;
    }
    return std::visit(
        [](auto& s) {
          auto& sock = beast::get_lowest_layer(s).socket();
          beast::error_code ec;
          beast::error_code ignored;
          sock.non_blocking(true, ec);
          if (ec) {
            return false;
          }
          char byte = 0;
          sock.receive(asio::buffer(&byte, 1), asio::socket_base::message_peek, ec);
          sock.non_blocking(false, ignored);
          return ec == asio::error::would_block;
        },
        stream);
  }
  void Close() {
    std::visit(
        [](auto& s) {
          beast::error_code ignored;
          beast::get_lowest_layer(s).socket().shutdown(asio::socket_base::shutdown_both, ignored);
          beast::get_lowest_layer(s).close();
        },
        stream);
  }
};

struct HttpClient::Impl {
  asio::any_io_executor executor;
  Endpoint endpoint;
  ClientOptions options;
  std::unique_ptr<asio::ssl::context> tls;
  std::deque<std::unique_ptr<Connection>> idle;
  ClientStats stats;
  std::mt19937 rng{std::random_device{}()};

  std::string HostHeader() const {
    if (endpoint.scheme == Endpoint::Scheme::kUnix) {
      return "localhost";
    }
    std::string h =
        endpoint.host.find(':') != std::string::npos ? "[" + endpoint.host + "]" : endpoint.host;
    bool default_port = (endpoint.scheme == Endpoint::Scheme::kHttp && endpoint.port == 80) ||
                        (endpoint.scheme == Endpoint::Scheme::kHttps && endpoint.port == 443);
    return default_port ? h : h + ":" + std::to_string(endpoint.port);
  }

  std::unique_ptr<Connection> TakeIdle() {
    auto now = std::chrono::steady_clock::now();
    while (!idle.empty()) {
      std::unique_ptr<Connection> c = std::move(idle.back());
      idle.pop_back();
      if (now - c->idle_since < options.idle_timeout && c->LooksAlive()) {
        return c;
      }
      c->Close();
    }
    return nullptr;
  }

  void PutIdle(std::unique_ptr<Connection> c) {
    c->idle_since = std::chrono::steady_clock::now();
    idle.push_back(std::move(c));
    while (idle.size() > options.max_idle_connections) {
      idle.front()->Close();
      idle.pop_front();
    }
  }

  asio::awaitable<std::pair<std::unique_ptr<Connection>, beast::error_code>> Connect() {
    ++stats.connections_opened;
    beast::error_code ec;
    if (endpoint.scheme == Endpoint::Scheme::kUnix) {
      UnixStream s(executor);
      s.expires_after(options.connect_timeout);
      std::tie(ec) = co_await s.async_connect(
          asio::local::stream_protocol::endpoint(endpoint.unix_path), kTuple);
      if (ec) {
        co_return std::make_pair(nullptr, ec);
      }
      co_return std::make_pair(std::make_unique<Connection>(std::move(s)), ec);
    }
    tcp::resolver resolver(executor);
    auto [rec, results] =
        co_await resolver.async_resolve(endpoint.host, std::to_string(endpoint.port), kTuple);
    if (rec) {
      co_return std::make_pair(nullptr, rec);
    }
    TcpStream tcp_stream(executor);
    tcp_stream.expires_after(options.connect_timeout);
    tcp::endpoint connected;
    std::tie(ec, connected) = co_await tcp_stream.async_connect(results, kTuple);
    if (ec) {
      co_return std::make_pair(nullptr, ec);
    }
    tcp_stream.socket().set_option(tcp::no_delay(true), ec);
    if (endpoint.scheme == Endpoint::Scheme::kHttp) {
      co_return std::make_pair(std::make_unique<Connection>(std::move(tcp_stream)),
                               beast::error_code{});
    }
    TlsStream tls_stream(std::move(tcp_stream), *tls);
    const std::string& name =
        options.tls.server_name.empty() ? endpoint.host : options.tls.server_name;
    SSL* ssl = tls_stream.native_handle();
    beast::error_code addr_ec;
    asio::ip::make_address(name, addr_ec);
    if (addr_ec) {  // SNI only for names, never for addresses (RFC 6066 3)
      // SSL_set_tlsext_host_name() is a macro with a C cast.
      SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
               const_cast<char*>(name.c_str()));
    }
    if (!options.tls.insecure_skip_verify) {
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
      if (!addr_ec) {
        X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
      } else {
        X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
      }
    }
    beast::get_lowest_layer(tls_stream).expires_after(options.connect_timeout);
    std::tie(ec) = co_await tls_stream.async_handshake(asio::ssl::stream_base::client, kTuple);
    if (ec) {
      co_return std::make_pair(nullptr, ec);
    }
    co_return std::make_pair(std::make_unique<Connection>(std::move(tls_stream)),
                             beast::error_code{});
  }

  http::request<http::string_body> BuildRequest(const HttpRequest& r) const {
    http::request<http::string_body> req{ToVerb(r.method), endpoint.base_path + r.target, 11};
    req.set(http::field::host, HostHeader());
    req.set(http::field::user_agent, "slurm-bridge");
    for (const Header& h : r.headers) {
      req.set(h.name, h.value);
    }
    if (!r.body.empty() || r.method == Method::kPost || r.method == Method::kPut ||
        r.method == Method::kPatch) {
      req.body() = r.body;
      req.prepare_payload();
    }
    req.keep_alive(true);
    return req;
  }

  static HttpResponse ToResponse(http::response<http::string_body>&& res) {
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    for (const auto& field : res) {
      out.headers.push_back({std::string(field.name_string()), std::string(field.value())});
    }
    out.body = std::move(res.body());
    return out;
  }

  // One exchange on one connection. Returns the response or where it failed.
  asio::awaitable<std::variant<HttpResponse, Failure>> Attempt(
      const http::request<http::string_body>& req, std::chrono::milliseconds timeout,
      std::size_t body_limit) {
    ++stats.attempts;
    bool reused = true;
    std::unique_ptr<Connection> conn = TakeIdle();
    if (!conn) {
      reused = false;
      auto [c, ec] = co_await Connect();
      if (ec) {
        co_return Failure{Stage::kConnect, ec, false};
      }
      conn = std::move(c);
    }
    conn->ExpiresAfter(timeout);
    beast::error_code ec;
    std::size_t n = 0;
    std::tie(ec, n) = co_await std::visit(
        [&](auto& s) { return http::async_write(s, req, kTuple); }, conn->stream);
    if (ec) {
      co_return Failure{Stage::kWrite, ec, reused};
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(body_limit);
    if (req.method() == http::verb::head) {
      parser.skip(true);
    }
    std::tie(ec, n) = co_await std::visit(
        [&](auto& s) { return http::async_read(s, conn->buffer, parser, kTuple); }, conn->stream);
    if (!ec && parser.get().result_int() < 100) {
      ec = http::error::bad_status;  // Beast reads any 3 digits; "HTTP/1.1 050" is no reply
    }
    if (ec) {
      co_return Failure{Stage::kRead, ec, reused};
    }
    http::response<http::string_body> res = parser.release();
    bool keep = res.keep_alive();
    HttpResponse out = ToResponse(std::move(res));
    if (keep) {
      PutIdle(std::move(conn));
    } else {
      conn->Close();
    }
    co_return out;
  }

  std::chrono::milliseconds Backoff(int retry) {
    auto base = options.backoff_base.count() << std::min(retry, 16);
    auto capped = std::min<std::int64_t>(base, options.backoff_max.count());
    std::uniform_int_distribution<std::int64_t> jitter(capped / 2,
                                                       std::max<std::int64_t>(capped, 1));
    return std::chrono::milliseconds(jitter(rng));
  }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() {
  if (impl_) {
    CloseIdle();
  }
}

Result<std::unique_ptr<HttpClient>> HttpClient::Create(asio::any_io_executor executor,
                                                       Endpoint endpoint, ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->executor = std::move(executor);
  impl->endpoint = std::move(endpoint);
  impl->options = std::move(options);
  if (impl->options.max_attempts < 1) {
    impl->options.max_attempts = 1;
  }
  if (impl->endpoint.scheme == Endpoint::Scheme::kHttps) {
    const TlsOptions& t = impl->options.tls;
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    beast::error_code ec;
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1);
    auto fail = [](std::string what, const beast::error_code& e) {
      return MakeError(ErrorCode::kInvalidArgument, "TLS: " + what + ": " + e.message());
    };
    if (t.insecure_skip_verify) {
      ctx->set_verify_mode(asio::ssl::verify_none);
    } else {
      ctx->set_verify_mode(asio::ssl::verify_peer);
      if (!t.ca_pem.empty()) {
        ctx->add_certificate_authority(asio::buffer(t.ca_pem), ec);
        if (ec) {
          return fail("bad CA certificate data", ec);
        }
      }
      if (!t.ca_file.empty()) {
        ctx->load_verify_file(t.ca_file, ec);
        if (ec) {
          return fail("cannot load CA file " + t.ca_file, ec);
        }
      }
      if (t.ca_pem.empty() && t.ca_file.empty()) {
        ctx->set_default_verify_paths(ec);
        if (ec) {
          return fail("no system CAs", ec);
        }
      }
    }
    if (!t.cert_pem.empty() || !t.key_pem.empty()) {
      ctx->use_certificate_chain(asio::buffer(t.cert_pem), ec);
      if (ec) {
        return fail("bad client certificate", ec);
      }
      ctx->use_private_key(asio::buffer(t.key_pem), asio::ssl::context::pem, ec);
      if (ec) {
        return fail("bad client key", ec);
      }
    }
    impl->tls = std::move(ctx);
  }
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

asio::awaitable<Result<HttpResponse>> HttpClient::Send(HttpRequest request) {
  const auto start = std::chrono::steady_clock::now();
  Result<HttpResponse> r = co_await SendRetrying(std::move(request));
  ClientStats& st = impl_->stats;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++st.latency_count;
  st.latency_sum_seconds += seconds;
  for (std::size_t i = 0; i < ClientStats::kLatencyBounds.size(); ++i) {
    if (seconds <= ClientStats::kLatencyBounds[i]) {
      ++st.latency_buckets[i];
      break;
    }
  }
  if (!r) {
    ++st.transport_errors;
  } else if (r->status >= 500) {
    ++st.responses_5xx;
  } else if (r->status >= 400) {
    ++st.responses_4xx;
  }
  co_return r;
}

asio::awaitable<Result<HttpResponse>> HttpClient::SendRetrying(HttpRequest request) {
  Impl& d = *impl_;
  ++d.stats.requests;
  const auto timeout = request.timeout.count() > 0 ? request.timeout : d.options.timeout;
  // The timeout bounds the whole request, retries and their waits included (upstream 1.3's
  // overall client timeout): each attempt gets what is left of it.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
  };
  const http::request<http::string_body> req = d.BuildRequest(request);
  const bool idempotent = IsIdempotent(request.method);
  const std::size_t body_limit = request.body_limit > 0 ? request.body_limit : d.options.body_limit;
  Failure last{Stage::kConnect, {}, false};
  for (int attempt = 0;; ++attempt) {
    auto outcome =
        co_await d.Attempt(req, std::max(left(), std::chrono::milliseconds(1)), body_limit);
    const std::chrono::milliseconds wait = d.Backoff(attempt);  // before a retry
    if (auto* res = std::get_if<HttpResponse>(&outcome)) {
      bool retryable_status = res->status == 502 || res->status == 503 || res->status == 504;
      if (!(idempotent && retryable_status && attempt + 1 < d.options.max_attempts) ||
          left() <= wait) {
        co_return std::move(*res);
      }
    } else {
      last = std::get<Failure>(outcome);
      // A pooled connection the server closed while idle: the request never reached it when the
      // write fails, or it closed without a byte of reply. Try once more on a new connection,
      // without counting the attempt, when that is safe.
      bool stale =
          last.reused && (last.stage == Stage::kWrite || last.ec == http::error::end_of_stream ||
                          last.ec == asio::error::connection_reset);
      if (stale && (idempotent || last.stage == Stage::kWrite) &&
          left() > std::chrono::milliseconds(0)) {
        ++d.stats.retries;
        --attempt;
        continue;
      }
      bool safe = last.stage == Stage::kConnect || idempotent;
      bool timed_out = last.ec == beast::error::timeout;
      bool too_big = last.ec == http::error::body_limit;
      if (!safe || timed_out || too_big || attempt + 1 >= d.options.max_attempts ||
          left() <= wait) {
        Error e = TransportError(d.endpoint, last);
        if (too_big) {
          e.message += "; limit " + std::to_string(body_limit) + " bytes";
        }
        co_return tl::unexpected(std::move(e));
      }
    }
    ++d.stats.retries;
    asio::steady_timer timer(d.executor, wait);
    co_await timer.async_wait(kTuple);
  }
}

asio::awaitable<Result<int>> HttpClient::Stream(HttpRequest request,
                                                std::function<bool(const HttpResponse&)> on_headers,
                                                std::function<bool(std::string_view)> on_data) {
  Impl& d = *impl_;
  ++d.stats.requests;
  ++d.stats.attempts;
  const auto timeout = request.timeout.count() > 0 ? request.timeout : d.options.timeout;
  const http::request<http::string_body> req = d.BuildRequest(request);
  // A stream always gets its own new connection; it is never returned to the pool.
  // Not a structured binding: the lambdas below capture `conn`, which clang before 16 refuses
  // for a binding (the fuzz and sanitizer builds use clang 14).
  std::unique_ptr<Connection> conn;
  beast::error_code ec;
  std::tie(conn, ec) = co_await d.Connect();
  if (ec) {
    co_return tl::unexpected(TransportError(d.endpoint, {Stage::kConnect, ec, false}));
  }
  conn->ExpiresAfter(timeout);
  std::size_t n = 0;
  std::tie(ec, n) =
      co_await std::visit([&](auto& s) { return http::async_write(s, req, kTuple); }, conn->stream);
  if (ec) {
    co_return tl::unexpected(TransportError(d.endpoint, {Stage::kWrite, ec, false}));
  }
  http::response_parser<http::buffer_body> parser;
  if (request.body_limit > 0) {
    parser.body_limit(request.body_limit);
  } else {
    parser.body_limit(boost::none);  // a watch runs for minutes; each piece is bounded below
  }
  std::tie(ec, n) = co_await std::visit(
      [&](auto& s) { return http::async_read_header(s, conn->buffer, parser, kTuple); },
      conn->stream);
  if (!ec && parser.get().result_int() < 100) {
    ec = http::error::bad_status;  // as in Attempt
  }
  if (ec) {
    co_return tl::unexpected(TransportError(d.endpoint, {Stage::kRead, ec, false}));
  }
  HttpResponse head;
  head.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) {
    head.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  }
  if (!on_headers(head)) {
    conn->Close();
    co_return head.status;
  }
  std::vector<char> chunk(64 * 1024);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    conn->ExpiresAfter(timeout);
    // async_read_some, not async_read: a watch must see each event as it arrives, not when 64 KiB
    // have gathered or the stream ends.
    std::tie(ec, n) = co_await std::visit(
        [&](auto& s) { return http::async_read_some(s, conn->buffer, parser, kTuple); },
        conn->stream);
    if (ec == http::error::need_buffer) {
      ec = {};
    }
    // Hand on what arrived before looking at the error: complete events just before a break
    // are not lost.
    std::size_t got = chunk.size() - parser.get().body().size;
    if (got > 0 && !on_data(std::string_view(chunk.data(), got))) {
      conn->Close();
      co_return head.status;
    }
    if (ec) {
      conn->Close();
      co_return tl::unexpected(TransportError(d.endpoint, {Stage::kRead, ec, false}));
    }
  }
  conn->Close();
  co_return head.status;
}

const Endpoint& HttpClient::endpoint() const { return impl_->endpoint; }
const ClientStats& HttpClient::stats() const { return impl_->stats; }

void HttpClient::CloseIdle() {
  for (auto& c : impl_->idle) {
    c->Close();
  }
  impl_->idle.clear();
}

}  // namespace sb::net
