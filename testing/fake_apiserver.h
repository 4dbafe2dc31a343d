// SPDX-License-Identifier: Apache-2.0
//
// testing/fake_apiserver.h
//
// A small fake kube-apiserver for unit tests, on top of FakeHttpServer: it holds pods and nodes
// in memory with a global resourceVersion counter and an event log, and serves
//   GET /api/v1/pods, /api/v1/namespaces/{ns}/pods, /api/v1/nodes
//                                      paged LIST (limit/continue); the pages serve the first
//                                      page's state; a token older than Compact(): 410
//   GET ...?watch=1&resourceVersion=RV the logged events after RV, then every change as it
//                                      happens, held open until CloseWatches() (as the apiserver
//                                      holds a watch until its timeoutSeconds); RV "" or "0": the
//                                      current state as ADDED events first (never 410)
//   GET    .../pods/{name}, /api/v1/nodes/{name}
//   PATCH  the same, and their /status: a merge patch (a strategic merge patch is applied as one,
//          except that lists named "conditions" merge by "type"); metadata.resourceVersion or
//          metadata.uid in the patch are preconditions: 409 Conflict when they differ; a pod
//          patch that changes or drops a toleration it had gets the apiserver's 422
//   PUT    the same: metadata.resourceVersion must be set (422) and current (409)
//   DELETE the same, with DeleteOptions preconditions (uid, resourceVersion: 409); an object with
//          finalizers, or a pod on a node deleted with a grace period, gets deletionTimestamp
//          (MODIFIED) and stays, as the apiserver leaves it to the finalizer or the kubelet
//   POST   .../pods/{name}/binding: 409 when the pod is bound already, being deleted, or its UID
//          is not the binding's; 201 and spec.nodeName set otherwise
//   POST   .../pods/{name}/eviction: a DELETE with the eviction's deleteOptions, 201
//   POST   .../events (any group): recorded, 201
// LIST and WATCH honour fieldSelector (=, ==, != on metadata.name, metadata.namespace and, for
// pods, spec.nodeName, spec.schedulerName; another field answers 400 as the apiserver does) and
// labelSelector (=, ==, !=, in, notin, exists, !exists); a watch sees an object that starts to
// match as ADDED and one that stops matching as DELETED, as the apiserver's watch cache sends.
// A watch from an RV older than the compaction point gets 410 (as the HTTP status, or as an
// ERROR event when gone_as_event). Faults are injected with Intercept(): the hook sees every
// request first and may answer it with raw bytes (WatchReply/Cut helpers below); with
// conflict_writes the next writes answer 409 whatever their preconditions.
// Not modelled: timeoutSeconds (watches end at CloseWatches()), creation by POST, subresources
// other than those above, JSON patch (415), admission, and validation beyond the tolerations rule.
//
// Thread model: runs on the caller's io_context; tests drive both sides on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "testing/fake_http_server.h"

namespace sb::testing {

class FakeApiServer {
 public:
  explicit FakeApiServer(boost::asio::io_context& io);
  ~FakeApiServer();

  [[nodiscard]] std::string url() const;
  [[nodiscard]] FakeHttpServer& http();

  // Store changes; each takes the next resourceVersion, logs a watch event and returns the RV.
  std::int64_t AddPod(const std::string& ns, const std::string& name,
                      const std::map<std::string, std::string>& labels = {},
                      const std::string& node = "");
  std::int64_t SetPodNode(const std::string& ns, const std::string& name, const std::string& node);
  std::int64_t DeletePod(const std::string& ns, const std::string& name);
  // Applies a JSON merge patch (RFC 7386) to the pod and logs MODIFIED; 0 when the pod is absent
  // or the patch is not a JSON object.
  std::int64_t PatchPod(const std::string& ns, const std::string& name,
                        const std::string& merge_patch);
  // Creates node `name` or replaces it (its uid kept): `fields` is a JSON object of the parts
  // besides kind, apiVersion, metadata.name/uid/resourceVersion (spec, status, metadata.labels).
  std::int64_t PutNode(const std::string& name, const std::string& fields = "{}");
  std::int64_t PatchNode(const std::string& name, const std::string& merge_patch);
  // The node's current JSON; "" when absent.
  [[nodiscard]] std::string NodeJson(const std::string& name) const;
  // Ends every open watch cleanly (a BOOKMARK with the current RV first, to those that asked for
  // bookmarks and while send_bookmarks), as the apiserver does at a watch's timeoutSeconds;
  // the client watches again from its last RV.
  void CloseWatches();
  // Sends a BOOKMARK with the current RV to every open watch that asked for bookmarks.
  void Bookmark();
  [[nodiscard]] int open_watches() const;
  // The bodies of the Events POSTed, in order.
  [[nodiscard]] const std::vector<std::string>& events() const;
  // Forgets the event log up to and including the current RV: older watches get 410.
  void Compact();
  [[nodiscard]] std::int64_t rv() const;
  // The pod's current JSON; "" when absent.
  [[nodiscard]] std::string PodJson(const std::string& ns, const std::string& name) const;

  // spec.schedulerName of the pods AddPod makes (field selectors match on it).
  std::string pod_scheduler_name = "s";
  // spec.priority of the pods AddPod makes (left out when unset).
  std::optional<std::int32_t> pod_priority;
  // A JSON merge patch applied to every pod AddPod makes (owner references, annotations); empty:
  // none.
  std::string pod_merge_patch;
  // Answer 410 for an old RV as a 200 stream with an ERROR event instead of an HTTP 410.
  bool gone_as_event = false;
  // Answer every continue token with 410 Expired.
  bool expire_continue_tokens = false;
  // Send BOOKMARKs (CloseWatches(), Bookmark()) to the watches that ask for them
  // (allowWatchBookmarks=true).
  bool send_bookmarks = true;
  // End every watch at once after the events it starts with (a server that closes watches
  // early); off: watches are held open.
  bool end_watches_at_once = false;
  // The next this many writes (PATCH, PUT, DELETE, binding, eviction) answer 409 Conflict.
  int conflict_writes = 0;

  // The hook sees each request first; a reply it returns is sent instead.
  using Hook = std::function<std::optional<FakeReply>(const FakeRequest&)>;
  void Intercept(Hook hook);
  // What the fake answers to `req` without the hook (and with its effects on the store): a hook
  // calls it to see the fake's answer, e.g. whether a Binding was accepted.
  FakeReply Answer(const FakeRequest& req);

  // Counters.
  [[nodiscard]] int lists() const;
  [[nodiscard]] int writes() const;  // PATCH, PUT, DELETE and POST answered by the fake
  [[nodiscard]] int watches() const;
  // The resourceVersion query value of every watch request, in order.
  [[nodiscard]] const std::vector<std::string>& watch_rvs() const;

  // Helpers for hooks: a chunked 200 reply whose body is `lines` (each sent as one chunk,
  // newline added); with `cut`, the last chunk is announced longer than sent and the connection
  // closes mid-chunk.
  static FakeReply WatchReply(const std::vector<std::string>& lines, bool cut = false);
  // The JSON line of a watch event of the given type for the pod's current state.
  [[nodiscard]] std::string EventLine(const std::string& type, const std::string& ns,
                                      const std::string& name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sb::testing
