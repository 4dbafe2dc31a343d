// SPDX-License-Identifier: Apache-2.0
//
// kube/config.h
//
// How to reach a kube-apiserver: the server URL, TLS settings and credentials, loaded from a
// kubeconfig file (the current context or a named one) or from a Pod's in-cluster service
// account. Precedence of LoadConfig: an explicit path, then $KUBECONFIG, then in-cluster.
//
// Bearer tokens may come from a file that rotates (bound service-account tokens, kubeconfig
// `tokenFile`). TokenSource re-reads such a file at most once a minute, and at once after the
// apiserver answered 401 (Invalidate()). The token is never logged nor put into an Error.
//
// Thread model: Config is a plain value; TokenSource is loop-confined.
//
// Example:
//   Result<Config> cfg = LoadConfig({.kubeconfig_path = flags.kubeconfig});
//   if (!cfg) { std::cerr << cfg.error().message; return 1; }
//   auto http = MakeHttpClient(io.get_executor(), *cfg);
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>

#include "common/error.h"
#include "net/http_client.h"

namespace sb::kube {

// The bearer token, static or read from a file.
class TokenSource {
 public:
  using NowFn = std::function<std::chrono::steady_clock::time_point()>;
  TokenSource() = default;
  // A fixed token.
  static TokenSource Static(std::string token);
  // A token read from `path` (whitespace trimmed); re-read when older than `max_age`.
  static TokenSource File(std::string path, std::chrono::seconds max_age = std::chrono::seconds(60),
                          NowFn now = nullptr);

  // The current token ("" when there is none). Re-reads a file token when due. kUnauthenticated
  // (naming the file, never the token) when the file cannot be read and no earlier token exists.
  [[nodiscard]] Result<std::string> Token();
  // Forces a re-read on the next Token() (call after a 401).
  void Invalidate();

  [[nodiscard]] bool empty() const { return token_.empty() && path_.empty(); }
  [[nodiscard]] const std::string& path() const { return path_; }
  // How many times the file was read (tests).
  [[nodiscard]] int reads() const { return reads_; }

 private:
  std::string token_;
  std::string path_;
  std::chrono::seconds max_age_{60};
  NowFn now_;
  std::chrono::steady_clock::time_point read_at_{};
  bool stale_ = true;
  int reads_ = 0;
};

struct Config {
  std::string server;                  // "https://10.0.0.1:6443"
  net::TlsOptions tls;                 // CA (file or PEM), skip-verify, client cert/key (PEM text)
  std::shared_ptr<TokenSource> token;  // never null after loading; may be empty()
  std::string default_namespace = "default";
  std::string
      source;  // where it came from, for messages: "kubeconfig /x (context a)", "in-cluster"
};

// Reads a kubeconfig file. `context` empty means its current-context. Errors (kInvalidArgument)
// name the file and the key: "/h/.kube/config: users[alice].client-key-data: bad base64".
// Relative file paths inside (certificate-authority, tokenFile, ...) are relative to the file.
[[nodiscard]] Result<Config> LoadKubeconfig(const std::string& path,
                                            const std::string& context = "");

// Where in-cluster config lives; tests point these elsewhere.
struct InClusterSource {
  std::string host;  // KUBERNETES_SERVICE_HOST; empty: read the environment
  std::string port;  // KUBERNETES_SERVICE_PORT; empty: read the environment
  std::string dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

// In-cluster service-account config: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
// CA dir/ca.crt, token dir/token (rotating), namespace dir/namespace. kNotFound when not in a
// cluster (no KUBERNETES_SERVICE_HOST), kInvalidArgument when the files are missing.
[[nodiscard]] Result<Config> LoadInClusterConfig(const InClusterSource& source = {});

struct LoadOptions {
  std::string kubeconfig_path;  // --kubeconfig; wins when set
  std::string context;          // --context; empty: current-context
  InClusterSource in_cluster;
};

// The explicit path, else the first existing file of $KUBECONFIG (colon-separated; files are
// not merged), else in-cluster. kNotFound when none applies.
[[nodiscard]] Result<Config> LoadConfig(const LoadOptions& options);

// An HttpClient for `config.server` with its TLS options. `options.tls` is replaced.
[[nodiscard]] Result<std::unique_ptr<net::HttpClient>> MakeHttpClient(
    boost::asio::any_io_executor executor, const Config& config, net::ClientOptions options = {});

// Standard base64 (RFC 4648, padding optional, whitespace ignored). nullopt-like error on junk.
[[nodiscard]] Result<std::string> Base64Decode(std::string_view in);

}  // namespace sb::kube
