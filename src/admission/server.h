// SPDX-License-Identifier: Apache-2.0
//
// admission/server.h
//
// The admission webhook as a server: the review logic (review.h) behind an HTTPS server
// (net::HttpServer) on `/mutate--v1-pod` and `/validate--v1-pod`, plus a plain HTTP health server
// with `/healthz` (always ok while the process serves) and `/readyz` (ok once the webhook listens
// and, when the policy has a namespace selector, the namespace cache has synced).
//
// With a namespace selector the server keeps a Namespace informer (list + watch of namespaces)
// and reads the labels of a pod's namespace from it; a namespace the cache does not hold yet (just
// created) is read with a GET. A pod whose schedulerName already is the bridge's needs no
// labels. When the labels cannot be read at all the pod is admitted unchanged (fail open: with
// failurePolicy Fail a refusal would stop pod creation in every namespace the webhook covers),
// with a warning in the AdmissionReview response and a log line.
//
// For the DRA check of a bridge pod (review.h DraObjectsToRead) the server GETs the
// ResourceClaimTemplates the pod names (resource.k8s.io/v1, in its namespace), then the
// DeviceClasses the pod's extended resources and those templates name. A 404 is an answer (a
// class not read falls back to its driver name; a missing template is refused as such); any other
// failure, or no client, is logged and the pod is judged without the object.
//
// HTTP answers: 405 for a method other than POST, 400 (with the reason as text) for a body that
// is not an AdmissionReview v1 or a Content-Type other than JSON, else 200 with the review.
//
// Thread model: loop-confined. The kube::Client (when given) must outlive the server's run on
// the loop. Stop() before destroying; let the loop drain the connections.
//
// Example:
//   admission::Server server(io.get_executor(), policy, {.cert_file = c, .key_file = k}, client);
//   if (Result<void> r = server.Start(); !r) { ... }
//   ...   // io.run() until SIGTERM, then:
//   server.Stop();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "admission/review.h"
#include "common/error.h"
#include "kube/client.h"
#include "net/http_client.h"
#include "net/http_server.h"

namespace sb::admission {

struct ServerOptions {
  // The webhook: host:port, ":port" for all interfaces, port 0 for a free one.
  std::string bind_address = ":9443";
  // PEM serving certificate and key, re-read when they change. Both empty: plain HTTP (tests).
  std::string cert_file;
  std::string key_file;
  std::chrono::milliseconds tls_reload_interval{5000};
  // Slow clients: the TLS handshake and each request's headers must arrive within
  // header_timeout; one client address may hold max_connections_per_ip connections (0: no
  // per-address cap; 1024 connections in all still). No cap by default: the webhook's clients
  // are kube-apiservers, one address each, which speak HTTP/1.1 and open one connection per
  // concurrent call (N-7: a cap of 64 refused the 65th pod write of a busy cluster).
  std::chrono::milliseconds header_timeout{5000};
  std::size_t max_connections_per_ip = 0;
  // /healthz and /readyz; "" or "0": no health server.
  std::string health_bind_address = ":8081";
};

// Counters, for tests and logs.
struct ServerStats {
  std::uint64_t reviews = 0;       // decoded AdmissionReviews answered
  std::uint64_t bad_requests = 0;  // 400 and 405
  std::uint64_t denied = 0;
  std::uint64_t patched = 0;
  std::uint64_t namespace_gets = 0;      // namespaces read with a GET (not in the cache)
  std::uint64_t namespace_failures = 0;  // pods admitted unchanged: namespace unreadable
  std::uint64_t dra_reads = 0;           // GETs of DeviceClasses and ResourceClaimTemplates
  std::uint64_t dra_read_failures = 0;   // ... that failed otherwise than with a 404
};

enum class Hook { kMutate, kValidate };

// The options of the HTTP client that reads namespaces (with managedNamespaceSelector): one try
// of at most 3 s, well inside the webhook's timeoutSeconds (10 by default), so that an apiserver
// too slow to answer makes the webhook fail open (admitted unchanged, with a warning) instead of
// the apiserver abandoning the call, which fails closed (N-19). Watches set their own deadline.
[[nodiscard]] net::ClientOptions NamespaceClientOptions();

class Server {
 public:
  // `client` may be null when the policy has no namespace selector (then DRA objects are not
  // read).
  Server(boost::asio::any_io_executor executor, Policy policy, ServerOptions options,
         kube::Client* client);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds both servers and starts the namespace informer. Startup errors (bad address, address
  // in use, bad certificate, a selector without a client) are returned.
  [[nodiscard]] Result<void> Start();
  // Stops listening and the informer; open connections finish their current request.
  void Stop();

  [[nodiscard]] std::uint16_t port() const;
  [[nodiscard]] std::uint16_t health_port() const;  // 0 without a health server
  // What /readyz answers.
  [[nodiscard]] bool Ready() const;
  [[nodiscard]] const ServerStats& stats() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

}  // namespace sb::admission
