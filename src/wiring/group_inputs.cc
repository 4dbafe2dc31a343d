// SPDX-License-Identifier: Apache-2.0
#include "wiring/group_inputs.h"

#include <utility>

#include <fmt/format.h>

#include "bridge/names.h"

namespace sb::wiring {

using boost::asio::awaitable;

Result<bridge::GroupSpec> GroupInputs::Resolve(const kube::Pod& pod) const {
  return bridge::ResolveGroup(pod, owners, pod_group ? &*pod_group : nullptr,
                              workload_pod_group ? &*workload_pod_group : nullptr);
}

awaitable<Result<std::string>> WorkloadApiVersion(kube::Client& kube) {
  Result<std::vector<std::string>> served =
      co_await kube.GroupVersions(std::string(bridge::kWorkloadApiGroup));
  if (!served) {
    if (served.error().code == ErrorCode::kNotFound) co_return std::string();
    co_return tl::unexpected(served.error());
  }
  co_return bridge::WorkloadPodGroupApiVersion(*served);
}

awaitable<Result<GroupInputs>> ReadGroupInputs(const kube::Pod& pod, kube::Client& kube,
                                               kube::OwnerSource& objects) {
  GroupInputs in;
  const std::string& ns = pod.metadata.namespace_;
  // The controller chain, as far as it can be read (at most 32 levels, as upstream).
  Result<kube::ControllerChain> chain = co_await kube::ReadControllerChain(pod.metadata, objects);
  if (!chain) co_return tl::unexpected(chain.error());
  in.owners = std::move(chain->owners);
  in.owner_unreadable = std::move(chain->unreadable);

  // The Workload API PodGroup (spec.schedulingGroup) wins over the coscheduling label: only it
  // is read then.
  if (const std::string wpg = pod.spec.scheduling_group; !wpg.empty()) {
    Result<std::string> api_version = co_await WorkloadApiVersion(kube);
    if (!api_version) co_return tl::unexpected(api_version.error());
    std::string why;
    if (api_version->empty()) {
      why = "the apiserver serves neither scheduling.k8s.io/v1beta1 nor scheduling.k8s.io/v1alpha2";
    } else {
      Result<kube::GenericObject> pg = co_await objects.Get(*api_version, "PodGroup", ns, wpg);
      if (pg) {
        in.workload_pod_group = std::move(*pg);
        co_return in;
      }
      if (bridge::OnPodGroupError(pg.error().code) == bridge::PodGroupMiss::kRetry) {
        co_return tl::unexpected(pg.error());
      }
      why = pg.error().Words();
    }
    in.pod_group_problem = fmt::format(
        "PodGroup {} ({}) named by spec.schedulingGroup cannot be read ({}); "
        "the pod waits for it and is never scheduled alone",
        wpg, api_version->empty() ? bridge::kWorkloadApiGroup : *api_version, why);
    co_return in;
  }
  auto label = pod.metadata.labels.find(std::string(bridge::kPodGroupLabel));
  if (label == pod.metadata.labels.end()) co_return in;
  Result<kube::GenericObject> pg = co_await objects.Get(
      std::string(bridge::kCoschedulingApiVersion), "PodGroup", ns, label->second);
  if (pg) {
    in.pod_group = std::move(*pg);
    co_return in;
  }
  if (bridge::OnPodGroupError(pg.error().code) == bridge::PodGroupMiss::kRetry) {
    co_return tl::unexpected(pg.error());
  }
  in.pod_group_problem = fmt::format(
      "PodGroup {} cannot be read ({}); the pod waits for it and is never scheduled "
      "alone",
      label->second, pg.error().Words());
  co_return in;
}

}  // namespace sb::wiring
