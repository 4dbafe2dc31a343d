// SPDX-License-Identifier: Apache-2.0
#include "kube/config.h"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "common/files.h"
#include "common/strings.h"

namespace sb::kube {
namespace {

namespace fs = std::filesystem;

// A whole file; kInvalidArgument naming the file.
Result<std::string> ReadFile(const std::string& path) {
  std::optional<std::string> text = ReadWholeFile(path);
  if (!text) return MakeError(ErrorCode::kInvalidArgument, path + ": cannot read file");
  return std::move(*text);
}

std::string Resolve(const fs::path& base_dir, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute()) {
    return p;
  }
  return (base_dir / p).lexically_normal().string();
}

// Finds the entry named `name` in a kubeconfig list (clusters, users, contexts) and returns its
// inner map (`cluster:`, `user:`, `context:`).
Result<YAML::Node> FindNamed(const YAML::Node& root, const std::string& file, const char* list,
                             const char* inner, const std::string& name) {
  YAML::Node items = root[list];
  if (items && items.IsSequence()) {
    for (const YAML::Node& item : items) {
      if (item.IsMap() && item["name"] && item["name"].IsScalar() &&
          item["name"].as<std::string>() == name) {
        YAML::Node in = item[inner];
        if (!in) {
          return YAML::Node(YAML::NodeType::Map);
        }
        if (!in.IsMap()) {
          return MakeError(ErrorCode::kInvalidArgument,
                           file + ": " + list + "[" + name + "]." + inner + ": not a map");
        }
        return in;
      }
    }
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   file + ": " + list + ": no entry named \"" + name + "\"");
}

// The scalar at `node[key]` as a string; "" when absent.
Result<std::string> Scalar(const YAML::Node& node, const char* key, const std::string& where) {
  YAML::Node v = node[key];
  if (!v || v.IsNull()) {
    return std::string();
  }
  if (!v.IsScalar()) {
    return MakeError(ErrorCode::kInvalidArgument, where + "." + key + ": not a scalar");
  }
  return v.as<std::string>();
}

Result<Config> ParseKubeconfig(const YAML::Node& root, const std::string& path,
                               const std::string& wanted_context) {
  const fs::path dir = fs::path(path).parent_path();
  if (!root.IsMap()) {
    return MakeError(ErrorCode::kInvalidArgument, path + ": not a kubeconfig (no top-level map)");
  }
  std::string context_name = wanted_context;
  if (context_name.empty()) {
    auto cur = Scalar(root, "current-context", path + ":");
    if (!cur) {
      return tl::unexpected(cur.error());
    }
    context_name = *cur;
    if (context_name.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       path + ": current-context: not set and no context given");
    }
  }
  auto ctx = FindNamed(root, path, "contexts", "context", context_name);
  if (!ctx) {
    return tl::unexpected(ctx.error());
  }
  const std::string ctx_where = path + ": contexts[" + context_name + "].context";
  auto cluster_name = Scalar(*ctx, "cluster", ctx_where);
  auto user_name = Scalar(*ctx, "user", ctx_where);
  auto ns = Scalar(*ctx, "namespace", ctx_where);
  if (!cluster_name || !user_name || !ns) {
    return tl::unexpected(!cluster_name ? cluster_name.error()
                                        : (!user_name ? user_name.error() : ns.error()));
  }
  if (cluster_name->empty()) {
    return MakeError(ErrorCode::kInvalidArgument, ctx_where + ".cluster: missing");
  }
  Config cfg;
  cfg.source = "kubeconfig " + path + " (context " + context_name + ")";
  if (!ns->empty()) {
    cfg.default_namespace = *ns;
  }

  auto cluster = FindNamed(root, path, "clusters", "cluster", *cluster_name);
  if (!cluster) {
    return tl::unexpected(cluster.error());
  }
  const std::string cw = path + ": clusters[" + *cluster_name + "].cluster";
  auto server = Scalar(*cluster, "server", cw);
  if (!server) {
    return tl::unexpected(server.error());
  }
  if (server->empty()) {
    return MakeError(ErrorCode::kInvalidArgument, cw + ".server: missing");
  }
  cfg.server = *server;
  auto ca_file = Scalar(*cluster, "certificate-authority", cw);
  auto ca_data = Scalar(*cluster, "certificate-authority-data", cw);
  auto insecure = Scalar(*cluster, "insecure-skip-tls-verify", cw);
  auto tls_name = Scalar(*cluster, "tls-server-name", cw);
  if (!ca_file || !ca_data || !insecure || !tls_name) {
    return tl::unexpected(
        !ca_file
            ? ca_file.error()
            : (!ca_data ? ca_data.error() : (!insecure ? insecure.error() : tls_name.error())));
  }
  cfg.tls.ca_file = Resolve(dir, *ca_file);
  if (!cfg.tls.ca_file.empty() && !fs::exists(cfg.tls.ca_file)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     cw + ".certificate-authority: no such file " + cfg.tls.ca_file);
  }
  if (!ca_data->empty()) {
    auto pem = Base64Decode(*ca_data);
    if (!pem) {
      return MakeError(ErrorCode::kInvalidArgument, cw + ".certificate-authority-data: bad base64");
    }
    cfg.tls.ca_pem = std::move(*pem);
  }
  if (!insecure->empty()) {
    if (*insecure == "true") {
      cfg.tls.insecure_skip_verify = true;
    } else if (*insecure != "false") {
      return MakeError(
          ErrorCode::kInvalidArgument,
          cw + ".insecure-skip-tls-verify: want true or false, got \"" + *insecure + "\"");
    }
  }
  cfg.tls.server_name = *tls_name;

  cfg.token = std::make_shared<TokenSource>();
  if (!user_name->empty()) {
    auto user = FindNamed(root, path, "users", "user", *user_name);
    if (!user) {
      return tl::unexpected(user.error());
    }
    const std::string uw = path + ": users[" + *user_name + "].user";
    if ((*user)["exec"] || (*user)["auth-provider"]) {
      // TODO(#4): exec credential plugins and auth providers.
      return MakeError(ErrorCode::kInvalidArgument,
                       uw + ": exec / auth-provider credentials are not supported");
    }
    std::array<const char*, 6> keys = {
        "token",      "tokenFile",      "client-certificate", "client-certificate-data",
        "client-key", "client-key-data"};
    std::array<std::string, 6> vals;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      auto v = Scalar(*user, keys[i], uw);
      if (!v) {
        return tl::unexpected(v.error());
      }
      vals[i] = std::move(*v);
    }
    if (!vals[0].empty()) {
      *cfg.token = TokenSource::Static(TrimWhitespace(vals[0]));
    } else if (!vals[1].empty()) {
      std::string tf = Resolve(dir, vals[1]);
      if (!fs::exists(tf)) {
        return MakeError(ErrorCode::kInvalidArgument, uw + ".tokenFile: no such file " + tf);
      }
      *cfg.token = TokenSource::File(tf);
    }
    // Client certificate and key: file or data, data wins (as in client-go).
    for (int which = 0; which < 2; ++which) {
      const std::string& file = vals[static_cast<std::size_t>(2 + 2 * which)];
      const std::string& data = vals[static_cast<std::size_t>(3 + 2 * which)];
      std::string& out = which == 0 ? cfg.tls.cert_pem : cfg.tls.key_pem;
      const char* data_key = which == 0 ? "client-certificate-data" : "client-key-data";
      const char* file_key = which == 0 ? "client-certificate" : "client-key";
      if (!data.empty()) {
        auto pem = Base64Decode(data);
        if (!pem) {
          return MakeError(ErrorCode::kInvalidArgument, uw + "." + data_key + ": bad base64");
        }
        out = std::move(*pem);
      } else if (!file.empty()) {
        auto pem = ReadFile(Resolve(dir, file));
        if (!pem) {
          return MakeError(ErrorCode::kInvalidArgument,
                           uw + "." + file_key + ": cannot read " + Resolve(dir, file));
        }
        out = std::move(*pem);
      }
    }
    if (cfg.tls.cert_pem.empty() != cfg.tls.key_pem.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       uw + ": client certificate and client key must be given together");
    }
  }
  return cfg;
}

}  // namespace

TokenSource TokenSource::Static(std::string token) {
  TokenSource t;
  t.token_ = std::move(token);
  t.stale_ = false;
  return t;
}

TokenSource TokenSource::File(std::string path, std::chrono::seconds max_age, NowFn now) {
  TokenSource t;
  t.path_ = std::move(path);
  t.max_age_ = max_age;
  t.now_ = std::move(now);
  return t;
}

Result<std::string> TokenSource::Token() {
  if (path_.empty()) {
    return token_;
  }
  auto now = now_ ? now_() : std::chrono::steady_clock::now();
  if (stale_ || now - read_at_ >= max_age_) {
    ++reads_;
    auto text = ReadFile(path_);
    if (text) {
      token_ = TrimWhitespace(*text);
      read_at_ = now;
      stale_ = false;
    } else if (token_.empty()) {
      return MakeError(ErrorCode::kUnauthenticated, "cannot read token file " + path_);
    } else {
      // Keep the old token; try the file again on the next call.
      stale_ = true;
    }
  }
  return token_;
}

void TokenSource::Invalidate() {
  if (!path_.empty()) {
    stale_ = true;
  }
}

Result<std::string> Base64Decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  out.reserve(in.size() * 3 / 4);
  unsigned acc = 0;
  int bits = 0;
  int pad = 0;
  int count = 0;
  for (char c : in) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      continue;
    }
    if (c == '=') {
      ++pad;
      ++count;
      continue;
    }
    int v = value(c);
    if (v < 0 || pad > 0) {
      return MakeError(ErrorCode::kInvalidArgument, "bad base64");
    }
    ++count;
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFFu));
    }
  }
  if (pad > 2 || (pad > 0 && count % 4 != 0) || (count - pad) % 4 == 1) {
    return MakeError(ErrorCode::kInvalidArgument, "bad base64");
  }
  return out;
}

Result<Config> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadFile(path);
  if (!text) {
    return tl::unexpected(text.error());
  }
  try {
    YAML::Node root = YAML::Load(*text);
    return ParseKubeconfig(root, path, context);
  } catch (const YAML::Exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument, path + ": " + e.what());
  }
}

Result<Config> LoadInClusterConfig(const InClusterSource& source) {
  std::string host = source.host;
  std::string port = source.port;
  if (host.empty()) {
    const char* h = std::getenv("KUBERNETES_SERVICE_HOST");
    host = h ? h : "";
  }
  if (port.empty()) {
    const char* p = std::getenv("KUBERNETES_SERVICE_PORT");
    port = p ? p : "";
  }
  if (host.empty() || port.empty()) {
    return MakeError(ErrorCode::kNotFound,
                     "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
  }
  const fs::path dir = source.dir;
  Config cfg;
  cfg.source = "in-cluster";
  cfg.server =
      "https://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port;
  const std::string token_path = (dir / "token").string();
  const std::string ca_path = (dir / "ca.crt").string();
  if (!fs::exists(token_path)) {
    return MakeError(ErrorCode::kInvalidArgument, "in-cluster: no token file " + token_path);
  }
  if (!fs::exists(ca_path)) {
    return MakeError(ErrorCode::kInvalidArgument, "in-cluster: no CA file " + ca_path);
  }
  cfg.tls.ca_file = ca_path;
  cfg.token = std::make_shared<TokenSource>(TokenSource::File(token_path));
  if (auto t = cfg.token->Token(); !t) {
    return tl::unexpected(t.error());
  }
  if (auto ns = ReadFile((dir / "namespace").string()); ns && !TrimWhitespace(*ns).empty()) {
    cfg.default_namespace = TrimWhitespace(*ns);
  }
  return cfg;
}

Result<Config> LoadConfig(const LoadOptions& options) {
  if (!options.kubeconfig_path.empty()) {
    return LoadKubeconfig(options.kubeconfig_path, options.context);
  }
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    std::string list = env;
    std::size_t start = 0;
    while (start <= list.size()) {
      std::size_t end = list.find(':', start);
      std::string one = list.substr(start, end == std::string::npos ? end : end - start);
      if (!one.empty() && fs::exists(one)) {
        return LoadKubeconfig(one, options.context);
      }
      if (end == std::string::npos) {
        break;
      }
      start = end + 1;
    }
    return MakeError(ErrorCode::kNotFound, "KUBECONFIG names no existing file: " + list);
  }
  return LoadInClusterConfig(options.in_cluster);
}

Result<std::unique_ptr<net::HttpClient>> MakeHttpClient(boost::asio::any_io_executor executor,
                                                        const Config& config,
                                                        net::ClientOptions options) {
  auto endpoint = net::ParseEndpoint(config.server);
  if (!endpoint) {
    return tl::unexpected(endpoint.error());
  }
  options.tls = config.tls;
  return net::HttpClient::Create(std::move(executor), std::move(*endpoint), std::move(options));
}

}  // namespace sb::kube
