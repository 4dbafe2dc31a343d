// SPDX-License-Identifier: Apache-2.0
//
// kube/client.h
//
// The one seam to kube-apiserver: a REST client generic over resource paths
// (group/version/resource/namespace/name/subresource), plus typed helpers for the objects in
// types.h. The interface moves raw JSON text; the typed helpers decode with codec.h, so a fake
// Client only has to produce JSON.
//
// Errors: every non-2xx answer becomes one sb::Error with `http_status` set and the code from
// ErrorCodeFromHttpStatus (404 kNotFound, 409 kConflict, 410 kGone, 429 kTooManyRequests,
// ...); 409 with reason AlreadyExists becomes kAlreadyExists. The message is the apiserver's
// metav1.Status message when the body carries one. Transport failures keep HttpClient's codes.
// 429 with Retry-After is retried by ClientImpl (a bounded number of times) before it is
// returned. A 401 makes ClientImpl re-read a file token and retry once.
//
// Thread model: loop-confined, like the HttpClient below it. Every awaitable takes its
// arguments by value, so callers may pass temporaries.
//
// Example:
//   auto client = MakeClient(http, config.token);
//   Result<Pod> pod = co_await GetPod(*client, "default", "web-0");
//   Result<void> bound = co_await BindPod(*client, *pod, "node-3");
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/error.h"
#include "kube/codec.h"
#include "kube/config.h"
#include "kube/types.h"
#include "net/http_client.h"

namespace sb::kube {

// Where a resource lives. An empty group is the core group ("/api/v1/..."); others are under
// "/apis/<group>/<version>". An empty `namespace_` means cluster-scoped or all namespaces; an
// empty `name` means the collection.
struct ResourceRef {
  std::string group;
  std::string version = "v1";
  std::string resource;  // plural, lower case: "pods"
  std::string namespace_;
  std::string name;
  std::string subresource;  // "status", "binding", "eviction"

  // "/api/v1/namespaces/ns/pods/name/status" (names are percent-encoded). With an empty
  // resource, the group version ("/apis/policy/v1"); with an empty version too, the group
  // ("/apis/policy"): discovery documents.
  [[nodiscard]] std::string Path() const;
  [[nodiscard]] ResourceRef WithName(std::string n) const;
  [[nodiscard]] ResourceRef WithNamespace(std::string ns) const;
  [[nodiscard]] ResourceRef WithSubresource(std::string sub) const;
};

// Common refs.
[[nodiscard]] ResourceRef PodsRef(std::string ns = "");
[[nodiscard]] ResourceRef NodesRef();
[[nodiscard]] ResourceRef NamespacesRef();
[[nodiscard]] ResourceRef EventsRef(std::string ns = "");
[[nodiscard]] ResourceRef LeasesRef(std::string ns = "");
[[nodiscard]] ResourceRef JobsRef(std::string ns = "");
// Dynamic Resource Allocation (resource.k8s.io/v1): "resourceslices", "resourceclaims", ...
[[nodiscard]] ResourceRef DraRef(std::string resource, std::string ns = "", std::string name = "");

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;        // "" (quorum read), "0" (watch cache), or an RV
  std::string resource_version_match;  // NotOlderThan, Exact
  std::int64_t limit = 0;              // 0: no paging
  std::string continue_token;
  // watch only
  bool allow_watch_bookmarks = false;
  std::int64_t timeout_seconds = 0;  // 0: server default

  // "labelSelector=a%3Db&limit=500" (no leading '?'; percent-encoded values).
  [[nodiscard]] std::string Query(bool watch) const;
};

enum class PatchType { kJsonMerge, kStrategicMerge, kJson };
// The Content-Type of each patch type.
[[nodiscard]] std::string_view PatchContentType(PatchType type);

// Decodes an error reply: the code from the status (AlreadyExists refined), the message from a
// metav1.Status body when it has one.
[[nodiscard]] Error ErrorFromResponse(int status, std::string_view body, std::string_view what);

// Percent-encodes `s` for a query value or a path segment (RFC 3986 unreserved kept).
[[nodiscard]] std::string PercentEncode(std::string_view s);

class Client {
 public:
  virtual ~Client() = default;

  // Each returns the response body (JSON) on 2xx.
  [[nodiscard]] virtual boost::asio::awaitable<Result<std::string>> Get(ResourceRef ref) = 0;
  // One page; page on with the returned metadata.continue.
  [[nodiscard]] virtual boost::asio::awaitable<Result<std::string>> List(ResourceRef ref,
                                                                         ListOptions options) = 0;
  [[nodiscard]] virtual boost::asio::awaitable<Result<std::string>> Create(ResourceRef ref,
                                                                           std::string body) = 0;
  // PUT; the body's metadata.resourceVersion makes it conditional (409 -> kConflict).
  [[nodiscard]] virtual boost::asio::awaitable<Result<std::string>> Update(ResourceRef ref,
                                                                           std::string body) = 0;
  [[nodiscard]] virtual boost::asio::awaitable<Result<std::string>> Patch(ResourceRef ref,
                                                                          PatchType type,
                                                                          std::string body) = 0;
  [[nodiscard]] virtual boost::asio::awaitable<Result<std::string>> Delete(
      ResourceRef ref, DeleteOptions options) = 0;

  // Watches `ref` (a collection) and calls `on_line` with every event line (one JSON object,
  // without the newline) until the server ends the stream (returns success: re-watch), the
  // request fails (410 -> kGone, ...) or `on_line` returns false (returns success).
  [[nodiscard]] virtual boost::asio::awaitable<Result<void>> Watch(
      ResourceRef ref, ListOptions options, std::function<bool(std::string_view)> on_line) = 0;

  // Discovery: the versions the server serves of API group `group` (GET /apis/<group>, an
  // APIGroup), in the server's order (preferred first). kNotFound when the group is not served.
  // The production client keeps an answer (the versions, or kNotFound) for
  // ClientOptions::discovery_ttl and asks again when next called after that, so an API turned
  // on or off while the process runs is seen within it; other errors are not kept. This default
  // asks each time.
  [[nodiscard]] virtual boost::asio::awaitable<Result<std::vector<std::string>>> GroupVersions(
      std::string group);
};

struct ClientOptions {
  int max_throttle_retries = 3;              // 429s retried before returning kTooManyRequests
  std::chrono::seconds max_retry_after{30};  // longest Retry-After honoured
  std::chrono::milliseconds default_retry_after{1000};  // 429 without Retry-After
  std::chrono::seconds watch_idle_timeout{0};           // 0: timeoutSeconds + 60 s, or 10 min
  // Largest LIST reply (a LIST with resourceVersion "0" is served unpaged from the watch cache);
  // other replies are bounded by the HttpClient's body_limit (64 MiB by default).
  std::size_t max_list_body = std::size_t{1} << 30;
  // Longest watch event line; a longer one (or a line that never ends) fails the watch with
  // kInternal ("over the limit") so that the caller relists, instead of growing a buffer.
  std::size_t max_watch_line = std::size_t{16} << 20;
  // How long a discovery answer (GroupVersions) is kept: at most one GET /apis/<group> per group
  // this often, however many callers ask.
  std::chrono::seconds discovery_ttl{60};
  // Waits before a throttled (429) retry or a paced request; empty: a steady_timer. Tests record
  // the waits with it.
  std::function<boost::asio::awaitable<void>(std::chrono::milliseconds)> throttle_wait;
  // The client's own request rate (config clientQPS / clientBurst, kube/rate_limit.h): each
  // request, retries and watches included, takes a token first. qps 0: no limit.
  double qps = 0;
  int burst = 0;
  // The time the rate and discovery_ttl are measured on; empty: steady_clock. Tests give a fake
  // one.
  std::function<std::chrono::steady_clock::time_point()> now;
};

// The production Client over `http` (which it does not own and which must outlive it).
// `token` may be null (no Authorization header).
[[nodiscard]] std::unique_ptr<Client> MakeClient(net::HttpClient& http,
                                                 std::shared_ptr<TokenSource> token,
                                                 ClientOptions options = {});

// Typed helpers ------------------------------------------------------------------------------

template <typename T>
[[nodiscard]] boost::asio::awaitable<Result<T>> GetAs(Client& client, ResourceRef ref) {
  Result<std::string> body = co_await client.Get(std::move(ref));
  if (!body) co_return tl::unexpected(body.error());
  co_return Decode<T>(*body);
}

template <typename T>
[[nodiscard]] boost::asio::awaitable<Result<List<T>>> ListAs(Client& client, ResourceRef ref,
                                                             ListOptions options) {
  Result<std::string> body = co_await client.List(std::move(ref), std::move(options));
  if (!body) co_return tl::unexpected(body.error());
  co_return DecodeList<T>(*body);
}

// Every page of a LIST (paged by options.limit); the RV is the first page's. A 410 on a
// continue token (expired) restarts the list once from the beginning.
template <typename T>
[[nodiscard]] boost::asio::awaitable<Result<List<T>>> ListAllAs(Client& client, ResourceRef ref,
                                                                ListOptions options) {
  List<T> all;
  bool restarted = false;
  options.continue_token.clear();
  for (;;) {
    Result<List<T>> page = co_await ListAs<T>(client, ref, options);
    if (!page) {
      if (page.error().code == ErrorCode::kGone && !options.continue_token.empty() && !restarted) {
        // apiserver answers 410 on an expired continue token; restart the LIST (api-concepts).
        restarted = true;
        all = {};
        options.continue_token.clear();
        continue;
      }
      co_return tl::unexpected(page.error());
    }
    if (options.continue_token.empty()) all.resource_version = page->resource_version;
    for (T& item : page->items) all.items.push_back(std::move(item));
    if (page->continue_token.empty()) break;
    options.continue_token = std::move(page->continue_token);
  }
  co_return all;
}

template <typename T>
[[nodiscard]] boost::asio::awaitable<Result<T>> CreateAs(Client& client, ResourceRef ref,
                                                         T object) {
  Result<std::string> body = co_await client.Create(std::move(ref), Encode(object));
  if (!body) co_return tl::unexpected(body.error());
  co_return Decode<T>(*body);
}

// PUT of `object` as Encode(T) writes it: only the fields types.h holds. Use it for types that
// hold every field that matters (Lease, Namespace, Event); for Pods and Nodes, Patch instead, or
// the fields types.h leaves out would be reset.
template <typename T>
[[nodiscard]] boost::asio::awaitable<Result<T>> UpdateAs(Client& client, ResourceRef ref,
                                                         T object) {
  Result<std::string> body = co_await client.Update(std::move(ref), Encode(object));
  if (!body) co_return tl::unexpected(body.error());
  co_return Decode<T>(*body);
}

template <typename T>
[[nodiscard]] boost::asio::awaitable<Result<T>> PatchAs(Client& client, ResourceRef ref,
                                                        PatchType type, std::string patch) {
  Result<std::string> body = co_await client.Patch(std::move(ref), type, std::move(patch));
  if (!body) co_return tl::unexpected(body.error());
  co_return Decode<T>(*body);
}

// Pods and nodes.
[[nodiscard]] boost::asio::awaitable<Result<Pod>> GetPod(Client& client, std::string ns,
                                                         std::string name);
[[nodiscard]] boost::asio::awaitable<Result<Node>> GetNode(Client& client, std::string name);
[[nodiscard]] boost::asio::awaitable<Result<Pod>> CreatePod(Client& client, Pod pod);
// POST pods/{name}/binding, with the pod's UID as precondition when `uid` is non-empty; the
// apiserver adds `annotations` (and, since 1.35, `labels`) to the pod's as it binds it
// (EncodeBinding).
[[nodiscard]] boost::asio::awaitable<Result<void>> BindPod(
    Client& client, std::string ns, std::string name, std::string uid, std::string node,
    std::map<std::string, std::string> annotations = {},
    std::map<std::string, std::string> labels = {});
// POST pods/{name}/eviction: policy/v1 when the server's discovery (GroupVersions("policy"))
// offers it, else policy/v1beta1 (servers before 1.22).
[[nodiscard]] boost::asio::awaitable<Result<void>> EvictPod(Client& client, std::string ns,
                                                            std::string name,
                                                            DeleteOptions options);
[[nodiscard]] boost::asio::awaitable<Result<void>> DeletePod(Client& client, std::string ns,
                                                             std::string name,
                                                             DeleteOptions options);
// PATCH pods/{name}/status with a merge or strategic patch.
[[nodiscard]] boost::asio::awaitable<Result<Pod>> PatchPodStatus(Client& client, std::string ns,
                                                                 std::string name, PatchType type,
                                                                 std::string patch);
[[nodiscard]] boost::asio::awaitable<Result<Node>> PatchNode(Client& client, std::string name,
                                                             PatchType type, std::string patch);
[[nodiscard]] boost::asio::awaitable<Result<Node>> PatchNodeStatus(Client& client, std::string name,
                                                                   PatchType type,
                                                                   std::string patch);

}  // namespace sb::kube
