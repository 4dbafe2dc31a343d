// SPDX-License-Identifier: Apache-2.0
//
// wiring/group_inputs.h
//
// What a pod's group is resolved from (bridge::ResolveGroup), read from the apiserver in one
// place for the scheduler and for `slurm-bridge explain`, so that explain says what the
// scheduler would: the pod's controller chain, and the PodGroup it names (the Workload API's
// spec.schedulingGroup in the version discovery offers, which wins; else the coscheduling
// label). The scheduler reads the objects through its short-lived cache, explain directly.
//
// Thread model: coroutines on the caller's executor; `pod` and `objects` must outlive the call.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "bridge/group.h"
#include "common/error.h"
#include "kube/client.h"
#include "kube/owners.h"
#include "kube/types.h"

namespace sb::wiring {

struct GroupInputs {
  std::vector<kube::GenericObject> owners;  // the controller chain as far as read, nearest first
  std::string owner_unreadable;             // the owner the chain ended at (gone, forbidden)
  std::optional<kube::GenericObject> pod_group;           // named by the coscheduling label
  std::optional<kube::GenericObject> workload_pod_group;  // named by spec.schedulingGroup
  // A PodGroup the pod names cannot be read for good (gone, forbidden, its API not served): what
  // the pod is told. It waits for the PodGroup and is never scheduled alone. Empty when none.
  std::string pod_group_problem;

  // bridge::ResolveGroup over them (call only without a pod_group_problem).
  [[nodiscard]] Result<bridge::GroupSpec> Resolve(const kube::Pod& pod) const;
};

// The Workload API version to read PodGroups in (bridge::WorkloadPodGroupApiVersion of what
// discovery says; the client keeps the answer for ClientOptions::discovery_ttl): "" when the
// apiserver serves neither v1beta1 nor v1alpha2. An error only when discovery failed otherwise
// than with a 404 (transient).
[[nodiscard]] boost::asio::awaitable<Result<std::string>> WorkloadApiVersion(kube::Client& kube);

// Reads `pod`'s group inputs: the chain and the PodGroups through `objects`, discovery through
// `kube`. An error only when a read failed in a way worth retrying (bridge::OnPodGroupError):
// the pod is then never scheduled alone either.
[[nodiscard]] boost::asio::awaitable<Result<GroupInputs>> ReadGroupInputs(
    const kube::Pod& pod, kube::Client& kube, kube::OwnerSource& objects);

}  // namespace sb::wiring
