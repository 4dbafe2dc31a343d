// SPDX-License-Identifier: Apache-2.0
//
// net/http_client.h
//
// An HTTP/1.1 client for one server (slurmrestd, kube-apiserver): plain TCP, TLS, or a Unix
// socket (`unix:///run/slurmrestd.sock`). It keeps idle connections for reuse (keep-alive), puts
// a deadline on every request, and retries with jittered exponential backoff only where a retry
// is safe: a connection that could not be opened (nothing was sent), and, for idempotent methods,
// a broken connection or a 502/503/504 answer.
//
// HTTP statuses are not errors here: any complete response is returned as an HttpResponse, and
// the caller (the Slurm or the Kubernetes client) decides what a status means. An Error is
// returned only when no complete response arrived: kUnavailable (connect refused, reset, closed
// mid-reply), kDeadlineExceeded (timeout), kInvalidArgument (bad URL, TLS set-up), kInternal (a
// response body over the limit). When the failure came after the request was (perhaps partly)
// written, the server may have received and acted on it: the Error's `reason` is then
// kReasonMayHaveBeenProcessed (test with MayHaveBeenProcessed()); a POST that timed out waiting
// for its reply is the typical case. Without that reason nothing reached the server.
//
// Memory: a response body is read only up to a limit (ClientOptions::body_limit, 64 MiB, or the
// request's own body_limit), else the request fails; Stream() hands the body on in pieces of at
// most 64 KiB and stops after the request's body_limit bytes when one is set.
//
// Thread model: loop-confined. Create, use and destroy it on the thread that runs its executor.
// Several requests may be in flight at once; each takes its own connection.
//
// Example:
//   auto http = HttpClient::Create(io.get_executor(), *ParseEndpoint("http://127.0.0.1:6820"), {});
//   HttpRequest req{.method = Method::kGet, .target = "/ping"};
//   Result<HttpResponse> r = co_await (*http)->Send(std::move(req));
//   // Build the request in a named variable: GCC 12 destroys a braced aggregate temporary
//   // written inside a co_await expression twice.
#pragma once

#include <array>
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

namespace sb::net {

enum class Method { kGet, kHead, kPost, kPut, kPatch, kDelete };

// "GET", "POST", ...
[[nodiscard]] std::string_view MethodName(Method method);
// GET, HEAD, PUT and DELETE (RFC 9110 9.2.2). POST and PATCH are not.
[[nodiscard]] bool IsIdempotent(Method method);

struct Header {
  std::string name;
  std::string value;
};

struct HttpRequest {
  Method method = Method::kGet;
  // Path and query, already percent-encoded; joined to the endpoint's base path.
  std::string target;
  std::vector<Header> headers;
  std::string body;
  // Deadline for the whole request: connect, write, read, and the retries and their waits (each
  // attempt gets what is left); zero means the client's default.
  std::chrono::milliseconds timeout{0};
  // Largest response body accepted (Send), or streamed in all (Stream); zero means the client's
  // default (Send) or no total limit (Stream).
  std::size_t body_limit = 0;
};

// Error::reason of a transport failure after the request was written, in whole or in part: the
// server may have processed it (created the object, submitted the job) although no reply came.
inline constexpr std::string_view kReasonMayHaveBeenProcessed = "RequestMayHaveBeenProcessed";
[[nodiscard]] bool MayHaveBeenProcessed(const Error& error);

struct HttpResponse {
  int status = 0;
  std::vector<Header> headers;
  std::string body;

  // The first value of header `name` (case-insensitive), or "" when absent.
  [[nodiscard]] std::string_view HeaderValue(std::string_view name) const;
};

// Where the server is. Built from a URL by ParseEndpoint.
struct Endpoint {
  enum class Scheme { kHttp, kHttps, kUnix };
  Scheme scheme = Scheme::kHttp;
  std::string host;  // name or address; empty for kUnix
  std::uint16_t port = 0;
  std::string unix_path;  // kUnix only
  std::string base_path;  // prefix of every target, without a trailing '/' ("" for none)

  // The URL again, for messages: "http://127.0.0.1:6820", "unix:///run/x.sock".
  [[nodiscard]] std::string ToString() const;
};

// Parses "http://host[:port][/base]", "https://host[:port][/base]" or "unix:///abs/path.sock".
// Default ports are 80 and 443. IPv6 literals go in brackets. kInvalidArgument on anything else.
[[nodiscard]] Result<Endpoint> ParseEndpoint(std::string_view url);

struct TlsOptions {
  std::string ca_file;  // PEM file of trusted CAs; with ca_pem empty too, the system's CAs
  std::string ca_pem;   // PEM text of trusted CAs (kubeconfig certificate-authority-data)
  bool insecure_skip_verify = false;
  std::string cert_pem;     // client certificate chain (PEM text), optional
  std::string key_pem;      // its private key (PEM text)
  std::string server_name;  // name to verify and send as SNI; default: the endpoint's host
};

struct ClientOptions {
  std::chrono::milliseconds timeout{30000};         // default per-request deadline, retries in
  std::chrono::milliseconds connect_timeout{5000};  // for opening one connection
  int max_attempts = 3;                             // tries of one request, the first included
  std::chrono::milliseconds backoff_base{50};       // first retry waits about this long
  std::chrono::milliseconds backoff_max{2000};      // and no retry waits longer
  std::size_t max_idle_connections = 16;            // kept for reuse
  std::chrono::milliseconds idle_timeout{20000};    // an idle connection older is closed
  std::size_t body_limit = std::size_t{64} << 20;   // largest response body accepted
  TlsOptions tls;                                   // used for https only
};

// Counters, for tests and metrics.
struct ClientStats {
  std::uint64_t requests = 0;            // Send/Stream calls
  std::uint64_t attempts = 0;            // exchanges tried, retries included
  std::uint64_t connections_opened = 0;  // new connections (the rest reused one)
  std::uint64_t retries = 0;
  // Send() outcomes and durations (retries included), for Prometheus histograms.
  std::uint64_t transport_errors = 0;  // no response at all
  std::uint64_t responses_4xx = 0;
  std::uint64_t responses_5xx = 0;
  static constexpr std::array<double, 11> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                            0.5,   1,    2.5,   5,    10};
  std::array<std::uint64_t, 11> latency_buckets{};  // count <= bound (not cumulative)
  std::uint64_t latency_count = 0;
  double latency_sum_seconds = 0;
};

class HttpClient {
 public:
  // Returns kInvalidArgument when the TLS options cannot be loaded (bad PEM, missing file).
  [[nodiscard]] static Result<std::unique_ptr<HttpClient>> Create(
      boost::asio::any_io_executor executor, Endpoint endpoint, ClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` and reads the whole response.
  [[nodiscard]] boost::asio::awaitable<Result<HttpResponse>> Send(HttpRequest request);

  // Sends `request` and hands the response body to `on_data` piece by piece as it arrives
  // (chunked transfer decoded), for long-lived streams such as watches. `on_headers` is called
  // once with the status and headers before any data. Either callback returns false to stop
  // reading; the connection is then closed. Returns the status once the body ended or reading
  // stopped. The request's timeout bounds the time between two pieces, not the whole stream.
  // Never retried.
  [[nodiscard]] boost::asio::awaitable<Result<int>> Stream(
      HttpRequest request, std::function<bool(const HttpResponse&)> on_headers,
      std::function<bool(std::string_view)> on_data);

  [[nodiscard]] const Endpoint& endpoint() const;
  [[nodiscard]] const ClientStats& stats() const;
  // Closes every idle connection.
  void CloseIdle();

 private:
  [[nodiscard]] boost::asio::awaitable<Result<HttpResponse>> SendRetrying(HttpRequest request);
  struct Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sb::net
