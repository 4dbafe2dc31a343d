// SPDX-License-Identifier: Apache-2.0
//
// kube/runtime/kube_adapters.h
//
// The runtime's seams over the real apiserver, through kube::Client:
//   - ClientLeaseStore: LeaseStore on coordination.k8s.io/v1 leases
//     (GET/POST/PUT /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]). The PUT body
//     carries metadata.resourceVersion, so a concurrent write answers 409 (kConflict).
//   - ClientEventSink: EventSink on core/v1 events (POST /api/v1/namespaces/{ns}/events, PATCH
//     /api/v1/namespaces/{ns}/events/{name} with application/strategic-merge-patch+json, the
//     patch client-go's recorder sends: {"count","lastTimestamp","message"}).
// Errors are the Client's (404 kNotFound, 409 kConflict / kAlreadyExists, transport codes).
//
// Thread model: loop-confined, like the Client. The Client must outlive the adapter.
//
// Example:
//   ClientLeaseStore leases(*client);
//   auto elector = LeaderElector::Create(clock, leases, config, callbacks);
#pragma once

#include <string>

#include <boost/asio/awaitable.hpp>

#include "kube/client.h"
#include "kube/runtime/event_recorder.h"
#include "kube/runtime/leader_election.h"

namespace sb::kube {

class ClientLeaseStore final : public LeaseStore {
 public:
  explicit ClientLeaseStore(Client& client) : client_(client) {}
  [[nodiscard]] boost::asio::awaitable<Result<Lease>> Get(std::string ns,
                                                          std::string name) override;
  [[nodiscard]] boost::asio::awaitable<Result<Lease>> Create(Lease lease) override;
  [[nodiscard]] boost::asio::awaitable<Result<Lease>> Update(Lease lease) override;

 private:
  Client& client_;
};

class ClientEventSink final : public EventSink {
 public:
  // `patch_type`: kStrategicMerge as client-go; kJsonMerge works as well for these fields.
  explicit ClientEventSink(Client& client, PatchType patch_type = PatchType::kStrategicMerge)
      : client_(client), patch_type_(patch_type) {}
  [[nodiscard]] boost::asio::awaitable<Result<Event>> Create(Event event) override;
  [[nodiscard]] boost::asio::awaitable<Result<Event>> Patch(EventPatch patch) override;

 private:
  Client& client_;
  PatchType patch_type_;
};

// The patch body for `patch`: {"count":N,"lastTimestamp":"...","message":"..."}.
[[nodiscard]] std::string EncodeEventPatch(const EventPatch& patch);

}  // namespace sb::kube
