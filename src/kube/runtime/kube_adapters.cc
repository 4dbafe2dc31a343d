// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/kube_adapters.h"

#include <utility>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace sb::kube {

namespace asio = boost::asio;

// Arguments to the coroutines below are named locals, never braced temporaries (GCC 12 destroys
// a braced temporary passed by value to a coroutine twice).

asio::awaitable<Result<Lease>> ClientLeaseStore::Get(std::string ns, std::string name) {
  ResourceRef ref = LeasesRef(std::move(ns)).WithName(std::move(name));
  co_return co_await GetAs<Lease>(client_, std::move(ref));
}

asio::awaitable<Result<Lease>> ClientLeaseStore::Create(Lease lease) {
  ResourceRef ref = LeasesRef(lease.metadata.namespace_);
  co_return co_await CreateAs<Lease>(client_, std::move(ref), std::move(lease));
}

asio::awaitable<Result<Lease>> ClientLeaseStore::Update(Lease lease) {
  ResourceRef ref = LeasesRef(lease.metadata.namespace_).WithName(lease.metadata.name);
  co_return co_await UpdateAs<Lease>(client_, std::move(ref), std::move(lease));
}

asio::awaitable<Result<Event>> ClientEventSink::Create(Event event) {
  ResourceRef ref = EventsRef(event.metadata.namespace_);
  co_return co_await CreateAs<Event>(client_, std::move(ref), std::move(event));
}

asio::awaitable<Result<Event>> ClientEventSink::Patch(EventPatch patch) {
  ResourceRef ref = EventsRef(patch.namespace_).WithName(patch.name);
  std::string body = EncodeEventPatch(patch);
  co_return co_await PatchAs<Event>(client_, std::move(ref), patch_type_, std::move(body));
}

std::string EncodeEventPatch(const EventPatch& patch) {
  boost::json::object o;
  o["count"] = patch.count;
  o["lastTimestamp"] = patch.last_timestamp;
  o["message"] = patch.message;
  return boost::json::serialize(o);
}

}  // namespace sb::kube
