// SPDX-License-Identifier: Apache-2.0
//
// kube/owners.h
//
// An object's controller chain (its ownerReferences with controller: true, followed up), as the
// scheduler and `slurm-bridge explain` read it. Generic Kubernetes: nothing of the bridge.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/error.h"
#include "kube/client.h"
#include "kube/types.h"

namespace sb::kube {

// The resource of a kind, as Kubernetes names it by convention: lower case plus "s" ("Job" ->
// "jobs", "LeaderWorkerSet" -> "leaderworkersets"). Right for every kind a controller chain
// of a pod holds in practice (Job, JobSet, LeaderWorkerSet, PodGroup, ReplicaSet, StatefulSet).
[[nodiscard]] std::string ResourceOfKind(std::string_view kind);

// The namespaced object `name` of `api_version` ("batch/v1", "v1") and `kind`.
[[nodiscard]] ResourceRef RefOfKind(std::string_view api_version, std::string_view kind,
                                    std::string namespace_, std::string name);

// Where ReadControllerChain reads one owner from: the scheduler's source caches the answers,
// explain's reads the apiserver. An interface with a member coroutine, not a std::function
// holding a lambda coroutine, whose captures could die before its frame (STYLE.md).
class OwnerSource {
 public:
  virtual ~OwnerSource() = default;
  // The namespaced object `name` of `api_version` ("batch/v1", "v1") and `kind`.
  [[nodiscard]] virtual boost::asio::awaitable<Result<GenericObject>> Get(std::string api_version,
                                                                          std::string kind,
                                                                          std::string namespace_,
                                                                          std::string name) = 0;
};

// GETs each owner from `client` (which must outlive it).
class DirectOwnerSource final : public OwnerSource {
 public:
  explicit DirectOwnerSource(Client& client) : client_(client) {}
  [[nodiscard]] boost::asio::awaitable<Result<GenericObject>> Get(std::string api_version,
                                                                  std::string kind,
                                                                  std::string namespace_,
                                                                  std::string name) override;

 private:
  Client& client_;
};

// An owner source over a member coroutine of `object` with Get's parameters, e.g. a cache of
// owners that is private to its class: MemberOwnerSource<Scheduler, &Scheduler::GetOwner>
// source(*this). `object` must outlive it.
template <typename T, auto kGet>
class MemberOwnerSource final : public OwnerSource {
 public:
  explicit MemberOwnerSource(T& object) : object_(object) {}
  [[nodiscard]] boost::asio::awaitable<Result<GenericObject>> Get(std::string api_version,
                                                                  std::string kind,
                                                                  std::string namespace_,
                                                                  std::string name) override {
    return (object_.*kGet)(std::move(api_version), std::move(kind), std::move(namespace_),
                           std::move(name));
  }

 private:
  T& object_;
};

// The controller chain of the object `meta` (of namespace meta.namespace_), nearest first, as
// far as it can be read: at most 32 levels (as upstream slurm-bridge), and it ends at an owner
// that is gone, forbidden or invalid (kNotFound, kPermissionDenied, kInvalidArgument: said in
// `unreadable`). Any other failure is an error (transient: the caller retries).
struct ControllerChain {
  std::vector<GenericObject> owners;
  // The owner the chain ended at and why ("Job train: not found ..."); "" when it ended at an
  // object without a controller.
  std::string unreadable;
};
[[nodiscard]] boost::asio::awaitable<Result<ControllerChain>> ReadControllerChain(
    const ObjectMeta& meta, OwnerSource& source);

}  // namespace sb::kube
