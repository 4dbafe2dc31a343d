// SPDX-License-Identifier: Apache-2.0
//
// testing/fake_apiserver.h
//
// A small fake kube-apiserver for unit tests, on top of FakeHttpServer: it holds pods in memory
// with a global resourceVersion counter and an event log, and serves
//   GET /api/v1/pods, /api/v1/namespaces/{ns}/pods          paged LIST (limit/continue); the
//                                                           pages serve the first page's state;
//                                                           a token older than Compact(): 410
//   GET ...?watch=1&resourceVersion=RV                      the logged events after RV as one
//                                                           chunked reply, then a clean end;
//                                                           RV "" or "0": the current state as
//                                                           ADDED events (never 410)
// LIST and WATCH honour fieldSelector (=, ==, != on metadata.name, metadata.namespace,
// spec.nodeName, spec.schedulerName; another field answers 400 as the apiserver does) and
// labelSelector (=, ==, !=, in, notin, exists, !exists); a watch sees an object that starts to
// match as ADDED and one that stops matching as DELETED, as the apiserver's watch cache sends.
// A watch from an RV older than the compaction point gets 410 (as the HTTP status, or as an
// ERROR event when gone_as_event). Faults are injected with Intercept(): the hook sees every
// request first and may answer it with raw bytes (WatchReply/Cut helpers below).
//
// Thread model: runs on the caller's io_context; tests drive both sides on one thread.
#pragma once

#include <chrono>
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
  // How long an empty watch waits before ending cleanly.
  std::chrono::milliseconds empty_watch_delay{20};
  // Send a BOOKMARK with the current RV at the end of every watch that asks for bookmarks
  // (allowWatchBookmarks=true).
  bool send_bookmarks = true;

  // The hook sees each request first; a reply it returns is sent instead.
  using Hook = std::function<std::optional<FakeReply>(const FakeRequest&)>;
  void Intercept(Hook hook);

  // Counters.
  [[nodiscard]] int lists() const;
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
