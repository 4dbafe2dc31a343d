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
//   DELETE the same, with DeleteOptions preconditions (uid, resourceVersion: 409), as the
//          apiserver's graceful deletion (rest.BeforeDelete, podStrategy.CheckGracefulDelete):
//          a pod's grace is gracePeriodSeconds, else spec.terminationGracePeriodSeconds, else 30;
//          0 when the pod is unbound or Succeeded/Failed; a negative one counts as 1. The pod gets
//          deletionTimestamp = now() + grace (RFC 3339, whole seconds) and
//          deletionGracePeriodSeconds = grace; with finalizers or grace > 0 it stays (MODIFIED) for
//          the finalizers or the kubelet, otherwise it goes (DELETED). A node with finalizers gets
//          deletionTimestamp now() and grace 0 and stays; without, it goes. A DELETE of an object
//          being deleted only shortens: a smaller grace moves deletionTimestamp to the first
//          DELETE's time + the new grace, and at grace 0 without finalizers removes it (the
//          kubelet's or a force delete); anything else answers the object unchanged.
//          A PATCH or PUT that leaves an object being deleted without finalizers removes it
//          (DELETED) when its deletionGracePeriodSeconds is 0 (or unset) or, for a pod, it is
//          unbound (registry.ShouldDeleteDuringUpdate); a bound pod with grace > 0 waits for the
//          kubelet's DELETE with grace 0. PATCH and PUT keep deletionTimestamp and
//          deletionGracePeriodSeconds as they were (rest.BeforeUpdate).
//   POST   .../pods/{name}/binding: 409 when the pod is bound already, being deleted, or its UID
//          is not the binding's; 201 and spec.nodeName set otherwise, the Binding's annotations
//          and labels added to the pod's (binding_drops_labels: not its labels)
//   POST   .../pods/{name}/eviction: a DELETE with the eviction's deleteOptions, 201
//   POST   /api/v1/namespaces/{ns}/events, /apis/events.k8s.io/v1/namespaces/{ns}/events:
//          stored by metadata.name (metadata.generateName + a suffix when the name is empty; 409
//          AlreadyExists when taken), 201 with the stored Event (name, namespace, uid,
//          resourceVersion set); GET and PATCH (merge or strategic merge, applied as a merge
//          patch) of .../events/{name} in either group serve the one stored Event (404 when
//          unknown). Events take resourceVersions from the same counter but are not watchable.
// LIST and WATCH honour fieldSelector (=, ==, != on metadata.name, metadata.namespace and, for
// pods, spec.nodeName, spec.schedulerName; another field answers 400 as the apiserver does) and
// labelSelector (=, ==, !=, in, notin, exists, !exists); a watch sees an object that starts to
// match as ADDED and one that stops matching as DELETED, as the apiserver's watch cache sends.
// A watch from an RV older than the compaction point gets 410 (as the HTTP status, or as an
// ERROR event when gone_as_event). Faults are injected with Intercept(): the hook sees every
// request first and may answer it with raw bytes (WatchReply/Cut helpers below); with
// conflict_writes the next writes answer 409 whatever their preconditions.
// Time: deletionTimestamps are read from `now` (the system clock unless a test points it at its
// FakeClock's WallNow()).
// Not modelled: timeoutSeconds (watches end at CloseWatches()), creation by POST (but Events),
// subresources other than those above, JSON patch (415), admission, propagationPolicy and the
// garbage collector's finalizers, the DELETED-after-MODIFIED pair the apiserver writes for a
// graceful delete that completes at once (the fake logs DELETED only), LIST/WATCH/DELETE of
// Events, and validation beyond the tolerations rule (new finalizers on an object being deleted
// are accepted).
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
  // The bodies of the Events POSTed, in order (as sent: PATCHes do not change them).
  [[nodiscard]] const std::vector<std::string>& events() const;
  // The stored Event's current JSON (after its PATCHes); "" when absent.
  [[nodiscard]] std::string EventJson(const std::string& ns, const std::string& name) const;
  // Forgets the event log up to and including the current RV: older watches get 410.
  void Compact();
  [[nodiscard]] std::int64_t rv() const;
  // The pod's current JSON; "" when absent.
  [[nodiscard]] std::string PodJson(const std::string& ns, const std::string& name) const;

  // The fake's wall-clock time, for deletionTimestamps. A test on a FakeClock points it there:
  //   api_.now = [this] { return clock_.WallNow(); };
  std::function<std::chrono::system_clock::time_point()> now = std::chrono::system_clock::now;
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
  // A Binding's labels are ignored, as by apiservers before 1.35 (or with feature
  // PodTopologyLabelsAdmission off); off: they join the pod's, as its annotations do.
  bool binding_drops_labels = false;

  // The hook sees each request first; a reply it returns is sent instead.
  using Hook = std::function<std::optional<FakeReply>(const FakeRequest&)>;
  void Intercept(Hook hook);
  // What the fake answers to `req` without the hook (and with its effects on the store): a hook
  // calls it to see the fake's answer, e.g. whether a Binding was accepted.
  FakeReply Answer(const FakeRequest& req);

  // Counters.
  [[nodiscard]] int lists() const;
  // PATCH, PUT, DELETE and POST of pods and nodes answered by the fake (Events not counted).
  [[nodiscard]] int writes() const;
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
