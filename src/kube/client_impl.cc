// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <charconv>
#include <map>
#include <utility>
#include <vector>

#include <boost/json.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "kube/client.h"
#include "kube/rate_limit.h"

namespace sb::kube {
namespace asio = boost::asio;

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string ResourceRef::Path() const {
  std::string p = group.empty() ? "/api/" + version : "/apis/" + group;
  if (!group.empty() && !version.empty()) {
    p += "/" + version;
  }
  if (resource.empty()) {
    return p;  // a discovery document
  }
  if (!namespace_.empty()) {
    p += "/namespaces/" + PercentEncode(namespace_);
  }
  p += "/" + resource;
  if (!name.empty()) {
    p += "/" + PercentEncode(name);
    if (!subresource.empty()) {
      p += "/" + subresource;
    }
  }
  return p;
}

ResourceRef ResourceRef::WithName(std::string n) const {
  ResourceRef r = *this;
  r.name = std::move(n);
  return r;
}
ResourceRef ResourceRef::WithNamespace(std::string ns) const {
  ResourceRef r = *this;
  r.namespace_ = std::move(ns);
  return r;
}
ResourceRef ResourceRef::WithSubresource(std::string sub) const {
  ResourceRef r = *this;
  r.subresource = std::move(sub);
  return r;
}

ResourceRef PodsRef(std::string ns) { return {"", "v1", "pods", std::move(ns), "", ""}; }
ResourceRef NodesRef() { return {"", "v1", "nodes", "", "", ""}; }
ResourceRef NamespacesRef() { return {"", "v1", "namespaces", "", "", ""}; }
ResourceRef EventsRef(std::string ns) { return {"", "v1", "events", std::move(ns), "", ""}; }
ResourceRef LeasesRef(std::string ns) {
  return {"coordination.k8s.io", "v1", "leases", std::move(ns), "", ""};
}
ResourceRef JobsRef(std::string ns) { return {"batch", "v1", "jobs", std::move(ns), "", ""}; }
ResourceRef DraRef(std::string resource, std::string ns, std::string name) {
  return {"resource.k8s.io", "v1", std::move(resource), std::move(ns), std::move(name), ""};
}

std::string ListOptions::Query(bool watch) const {
  std::string q;
  auto add = [&](std::string_view k, std::string_view v) {
    if (!q.empty()) q += '&';
    q += k;
    q += '=';
    q += PercentEncode(v);
  };
  if (watch) add("watch", "1");
  if (!label_selector.empty()) add("labelSelector", label_selector);
  if (!field_selector.empty()) add("fieldSelector", field_selector);
  if (!resource_version.empty()) add("resourceVersion", resource_version);
  if (!resource_version_match.empty()) add("resourceVersionMatch", resource_version_match);
  if (!watch && limit > 0) add("limit", std::to_string(limit));
  if (!watch && !continue_token.empty()) add("continue", continue_token);
  if (watch && allow_watch_bookmarks) add("allowWatchBookmarks", "true");
  if (timeout_seconds > 0) add("timeoutSeconds", std::to_string(timeout_seconds));
  return q;
}

std::string_view PatchContentType(PatchType type) {
  switch (type) {
    case PatchType::kJsonMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
  }
  return "application/merge-patch+json";
}

Error ErrorFromResponse(int status, std::string_view body, std::string_view what) {
  Error e{ErrorCodeFromHttpStatus(status), "", status};
  Status st;
  if (!body.empty() && body.front() == '{') {
    if (auto decoded = Decode<Status>(body)) {
      st = std::move(*decoded);
    }
  }
  if (st.reason == "AlreadyExists") {
    e.code = ErrorCode::kAlreadyExists;
  }
  e.message = std::string(what) + ": ";
  if (!st.message.empty()) {
    e.message += st.message;
  } else {
    e.message += "HTTP " + std::to_string(status);
  }
  if (!st.reason.empty()) {
    e.message += " (reason " + st.reason + ")";
  }
  return e;
}

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// Retry-After in seconds (RFC 9110 10.2.3; the apiserver sends delta-seconds only).
std::chrono::milliseconds RetryAfter(const net::HttpResponse& r, const ClientOptions& o) {
  std::string_view v = r.HeaderValue("Retry-After");
  unsigned secs = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), secs);
  if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) {
    return o.default_retry_after;
  }
  return std::min<std::chrono::milliseconds>(std::chrono::seconds(secs), o.max_retry_after);
}

class ClientImpl final : public Client {
 public:
  ClientImpl(net::HttpClient& http, std::shared_ptr<TokenSource> token, ClientOptions options)
      : http_(http),
        token_(std::move(token)),
        options_(options),
        bucket_(options_.qps, options_.burst) {}

  asio::awaitable<Result<std::string>> Get(ResourceRef ref) override {
    std::string what = "get " + ref.Path();
    co_return co_await Do(net::Method::kGet, ref.Path(), "", "", std::move(what));
  }

  asio::awaitable<Result<std::string>> List(ResourceRef ref, ListOptions options) override {
    std::string target = ref.Path();
    std::string q = options.Query(false);
    if (!q.empty()) target += "?" + q;
    std::string what = "list " + ref.Path();
    co_return co_await Do(net::Method::kGet, std::move(target), "", "", std::move(what),
                          options_.max_list_body);
  }

  asio::awaitable<Result<std::string>> Create(ResourceRef ref, std::string body) override {
    std::string what = "create in " + ref.Path();
    co_return co_await Do(net::Method::kPost, ref.Path(), std::move(body), "application/json",
                          std::move(what));
  }

  asio::awaitable<Result<std::string>> Update(ResourceRef ref, std::string body) override {
    std::string what = "update " + ref.Path();
    co_return co_await Do(net::Method::kPut, ref.Path(), std::move(body), "application/json",
                          std::move(what));
  }

  asio::awaitable<Result<std::string>> Patch(ResourceRef ref, PatchType type,
                                             std::string body) override {
    std::string what = "patch " + ref.Path();
    co_return co_await Do(net::Method::kPatch, ref.Path(), std::move(body),
                          std::string(PatchContentType(type)), std::move(what));
  }

  asio::awaitable<Result<std::string>> Delete(ResourceRef ref, DeleteOptions options) override {
    std::string what = "delete " + ref.Path();
    std::string body;
    std::string content_type;
    if (!(options == DeleteOptions{})) {
      body = EncodeDeleteOptions(options);
      content_type = "application/json";
    }
    co_return co_await Do(net::Method::kDelete, ref.Path(), std::move(body),
                          std::move(content_type), std::move(what));
  }

  asio::awaitable<Result<void>> Watch(ResourceRef ref, ListOptions options,
                                      std::function<bool(std::string_view)> on_line) override {
    std::string target = ref.Path() + "?" + options.Query(true);
    const std::string what = "watch " + ref.Path();
    std::chrono::milliseconds idle = options_.watch_idle_timeout;
    if (idle.count() == 0) {
      idle = options.timeout_seconds > 0 ? std::chrono::seconds(options.timeout_seconds + 60)
                                         : std::chrono::seconds(600);
    }
    for (int attempt = 0;; ++attempt) {
      net::HttpRequest req;
      req.method = net::Method::kGet;
      req.target = target;
      req.timeout = idle;
      if (auto auth = AuthHeaders(req); !auth) {
        co_return tl::unexpected(auth.error());
      }
      int status = 0;
      bool stopped = false;
      bool overlong = false;
      std::string error_body;
      std::string pending;  // a line not yet complete
      auto on_headers = [&](const net::HttpResponse& head) {
        status = head.status;
        return true;
      };
      auto on_data = [&](std::string_view piece) {
        if (status != 200) {
          if (error_body.size() < 64 * 1024) error_body.append(piece);
          return true;
        }
        std::size_t start = 0;
        for (;;) {
          std::size_t nl = piece.find('\n', start);
          const std::size_t part = (nl == std::string_view::npos ? piece.size() : nl) - start;
          if (pending.size() + part > options_.max_watch_line) {
            overlong = true;  // a line that never ends, or an event no apiserver sends
            return false;
          }
          if (nl == std::string_view::npos) {
            pending.append(piece.substr(start));
            return true;
          }
          std::string_view line = piece.substr(start, nl - start);
          start = nl + 1;
          if (!pending.empty()) {
            pending.append(line);
            std::string full = std::move(pending);
            pending.clear();
            if (!DeliverLine(full, on_line)) {
              stopped = true;
              return false;
            }
          } else if (!DeliverLine(line, on_line)) {
            stopped = true;
            return false;
          }
        }
      };
      co_await Pace();
      Result<int> r = co_await http_.Stream(std::move(req), on_headers, on_data);
      if (stopped) {
        co_return Result<void>{};
      }
      if (overlong) {
        co_return MakeError(ErrorCode::kInternal, what + ": an event line is over the limit of " +
                                                      std::to_string(options_.max_watch_line) +
                                                      " bytes; the watch was dropped");
      }
      if (!r) {
        co_return tl::unexpected(r.error());
      }
      if (status == 401 && attempt == 0 && token_ && !token_->path().empty()) {
        token_->Invalidate();
        continue;
      }
      if (status != 200) {
        co_return tl::unexpected(ErrorFromResponse(status, error_body, what));
      }
      if (!pending.empty()) {
        // The stream ended on an unterminated line: deliver it if it is a whole object.
        if (!DeliverLine(pending, on_line)) {
          co_return Result<void>{};
        }
      }
      co_return Result<void>{};
    }
  }

  asio::awaitable<Result<std::vector<std::string>>> GroupVersions(std::string group) override {
    const auto now = Now();
    if (auto it = group_versions_.find(group);
        it != group_versions_.end() && now - it->second.asked < options_.discovery_ttl) {
      co_return it->second.answer;
    }
    Result<std::vector<std::string>> versions = co_await Client::GroupVersions(group);
    // The versions, or that the group is not served (404), are kept for discovery_ttl; a
    // transient failure is not (the next call asks again).
    if (versions || versions.error().code == ErrorCode::kNotFound) {
      group_versions_.insert_or_assign(group, Discovered{.answer = versions, .asked = now});
    } else {
      group_versions_.erase(group);
    }
    co_return versions;
  }

 private:
  std::chrono::steady_clock::time_point Now() const {
    return options_.now ? options_.now() : std::chrono::steady_clock::now();
  }

  // Waits for the request's token when clientQPS is set.
  asio::awaitable<void> Pace() {
    if (!bucket_.limited()) co_return;
    const auto now = Now();
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(bucket_.Reserve(now));
    if (wait.count() <= 0) co_return;
    co_await Wait(wait);
  }

  asio::awaitable<void> Wait(std::chrono::milliseconds d) {
    if (options_.throttle_wait) {
      co_await options_.throttle_wait(d);
    } else {
      asio::steady_timer timer(co_await asio::this_coro::executor, d);
      co_await timer.async_wait(kTuple);
    }
  }

  static bool DeliverLine(std::string_view line, const std::function<bool(std::string_view)>& f) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) return true;
    return f(line);
  }

  Result<void> AuthHeaders(net::HttpRequest& req) {
    req.headers.push_back({"Accept", "application/json"});
    if (!token_) return {};
    Result<std::string> t = token_->Token();
    if (!t) return tl::unexpected(t.error());
    if (!t->empty()) req.headers.push_back({"Authorization", "Bearer " + *t});
    return {};
  }

  asio::awaitable<Result<std::string>> Do(net::Method method, std::string target, std::string body,
                                          std::string content_type, std::string what,
                                          std::size_t body_limit = 0) {
    int throttled = 0;
    bool reauthed = false;
    for (;;) {
      net::HttpRequest req;
      req.method = method;
      req.target = target;
      req.body = body;
      req.body_limit = body_limit;
      if (!content_type.empty()) req.headers.push_back({"Content-Type", content_type});
      if (auto auth = AuthHeaders(req); !auth) {
        co_return tl::unexpected(auth.error());
      }
      co_await Pace();
      Result<net::HttpResponse> r = co_await http_.Send(std::move(req));
      if (!r) {
        Error e = r.error();
        e.message = what + ": " + e.message;
        co_return tl::unexpected(std::move(e));
      }
      if (r->status >= 200 && r->status < 300) {
        co_return std::move(r->body);
      }
      if (r->status == 401 && !reauthed && token_ && !token_->path().empty()) {
        // A rotated service-account token: re-read the file and try once more.
        reauthed = true;
        token_->Invalidate();
        continue;
      }
      if (r->status == 429 && throttled < options_.max_throttle_retries) {
        ++throttled;
        co_await Wait(RetryAfter(*r, options_));
        continue;
      }
      Error e = ErrorFromResponse(r->status, r->body, what);
      if (r->status == 429) {
        e.message += "; retry after " + std::to_string(RetryAfter(*r, options_).count()) + " ms";
      }
      co_return tl::unexpected(std::move(e));
    }
  }

  net::HttpClient& http_;
  std::shared_ptr<TokenSource> token_;
  ClientOptions options_;
  TokenBucket bucket_;  // clientQPS / clientBurst
  // Discovery answers by group (GroupVersions), kept for options_.discovery_ttl.
  struct Discovered {
    Result<std::vector<std::string>> answer;
    std::chrono::steady_clock::time_point asked;
  };
  std::map<std::string, Discovered> group_versions_;
};

asio::awaitable<Result<void>> Discard(asio::awaitable<Result<std::string>> op) {
  Result<std::string> r = co_await std::move(op);
  if (!r) co_return tl::unexpected(r.error());
  co_return Result<void>{};
}

}  // namespace

std::unique_ptr<Client> MakeClient(net::HttpClient& http, std::shared_ptr<TokenSource> token,
                                   ClientOptions options) {
  return std::make_unique<ClientImpl>(http, std::move(token), options);
}

asio::awaitable<Result<Pod>> GetPod(Client& client, std::string ns, std::string name) {
  co_return co_await GetAs<Pod>(client, PodsRef(std::move(ns)).WithName(std::move(name)));
}

asio::awaitable<Result<Node>> GetNode(Client& client, std::string name) {
  co_return co_await GetAs<Node>(client, NodesRef().WithName(std::move(name)));
}

asio::awaitable<Result<Pod>> CreatePod(Client& client, Pod pod) {
  ResourceRef ref = PodsRef(pod.metadata.namespace_);
  co_return co_await CreateAs<Pod>(client, std::move(ref), std::move(pod));
}

asio::awaitable<Result<void>> BindPod(Client& client, std::string ns, std::string name,
                                      std::string uid, std::string node,
                                      std::map<std::string, std::string> annotations,
                                      std::map<std::string, std::string> labels) {
  std::string body = EncodeBinding(ns, name, uid, node, annotations, labels);
  ResourceRef ref = PodsRef(std::move(ns)).WithName(std::move(name)).WithSubresource("binding");
  co_return co_await Discard(client.Create(std::move(ref), std::move(body)));
}

asio::awaitable<Result<std::vector<std::string>>> Client::GroupVersions(std::string group) {
  ResourceRef ref;
  ref.group = group;
  ref.version.clear();
  Result<std::string> body = co_await Get(std::move(ref));
  if (!body) {
    co_return tl::unexpected(body.error());
  }
  // An APIGroup: {"kind":"APIGroup","name":"policy","versions":[{"groupVersion":"policy/v1",
  // "version":"v1"},...],"preferredVersion":{...}}.
  boost::system::error_code ec;
  boost::json::value doc = boost::json::parse(*body, ec);
  const boost::json::object* obj = ec ? nullptr : doc.if_object();
  if (obj == nullptr) {
    co_return MakeError(ErrorCode::kInternal, "discovery of API group " + group + ": not JSON");
  }
  std::vector<std::string> out;
  if (const boost::json::value* versions = obj->if_contains("versions");
      versions != nullptr && versions->is_array()) {
    for (const boost::json::value& v : versions->get_array()) {
      const boost::json::object* o = v.if_object();
      const boost::json::value* name = o ? o->if_contains("version") : nullptr;
      if (name != nullptr && name->is_string()) {
        out.emplace_back(name->get_string());
      }
    }
  }
  co_return out;
}

asio::awaitable<Result<void>> EvictPod(Client& client, std::string ns, std::string name,
                                       DeleteOptions options) {
  Result<std::vector<std::string>> versions = co_await client.GroupVersions("policy");
  if (!versions && versions.error().code != ErrorCode::kNotFound) {
    co_return tl::unexpected(versions.error());
  }
  const bool v1 =
      versions && std::find(versions->begin(), versions->end(), "v1") != versions->end();
  std::string body = EncodeEviction(ns, name, options, v1 ? "policy/v1" : "policy/v1beta1");
  ResourceRef ref = PodsRef(std::move(ns)).WithName(std::move(name)).WithSubresource("eviction");
  co_return co_await Discard(client.Create(std::move(ref), std::move(body)));
}

asio::awaitable<Result<void>> DeletePod(Client& client, std::string ns, std::string name,
                                        DeleteOptions options) {
  co_return co_await Discard(
      client.Delete(PodsRef(std::move(ns)).WithName(std::move(name)), std::move(options)));
}

asio::awaitable<Result<Pod>> PatchPodStatus(Client& client, std::string ns, std::string name,
                                            PatchType type, std::string patch) {
  co_return co_await PatchAs<Pod>(
      client, PodsRef(std::move(ns)).WithName(std::move(name)).WithSubresource("status"), type,
      std::move(patch));
}

asio::awaitable<Result<Node>> PatchNode(Client& client, std::string name, PatchType type,
                                        std::string patch) {
  co_return co_await PatchAs<Node>(client, NodesRef().WithName(std::move(name)), type,
                                   std::move(patch));
}

asio::awaitable<Result<Node>> PatchNodeStatus(Client& client, std::string name, PatchType type,
                                              std::string patch) {
  co_return co_await PatchAs<Node>(client,
                                   NodesRef().WithName(std::move(name)).WithSubresource("status"),
                                   type, std::move(patch));
}

}  // namespace sb::kube
