// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/admission.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "bridge/annotations.h"
#include "bridge/dra/internal.h"
#include "bridge/dra/profiles.h"
#include "bridge/names.h"

namespace sb::bridge {
namespace {

using dra_internal::Quote;

}  // namespace

std::vector<std::string> DraAdmissionProblems(const kube::Pod& pod,
                                              const std::vector<DeviceProfile>& profiles,
                                              const ObjectsByName& device_classes,
                                              const std::vector<PodResourceClaim>& claims,
                                              const ObjectsByName& claim_templates) {
  std::vector<std::string> problems;
  std::vector<DraRequest> requests =
      CollectDraRequests(pod, profiles, device_classes, claims, claim_templates, problems);
  bool core_bitmap = false;
  bool indexed = false;
  std::string core_resource;
  for (const DraRequest& r : requests) {
    const DeviceProfile* p = FindProfile(profiles, r.profile);
    if (p == nullptr) continue;
    if (p->backend == DeviceBackend::kCoreBitmap) {
      core_bitmap = true;
      if (core_resource.empty()) {
        core_resource = r.resource_name.empty() ? fmt::format("pod claim {}", Quote(r.pod_claim))
                                                : Quote(r.resource_name);
      }
    } else {
      indexed = true;
    }
  }
  if (core_bitmap) {
    auto asks_cpu = [](const kube::Container& c) {
      return c.resources.requests.contains("cpu") || c.resources.limits.contains("cpu");
    };
    if (std::ranges::any_of(pod.spec.containers, asks_cpu) ||
        std::ranges::any_of(pod.spec.init_containers, asks_cpu) ||
        pod.spec.resources.requests.contains("cpu") || pod.spec.resources.limits.contains("cpu")) {
      problems.push_back(fmt::format(
          "resource \"cpu\" and {} cannot both be requested: Slurm's cores are the pod's CPUs",
          core_resource));
    }
  }
  const std::map<std::string, std::string> job = JobAnnotations(pod.metadata.annotations);
  if (core_bitmap && job.contains("cpu-per-task")) {
    problems.push_back(fmt::format(
        "annotation {}cpu-per-task cannot be used with {}: the CPUs come from the request",
        kJobAnnotationPrefix, core_resource));
  }
  if (indexed && job.contains("gres")) {
    problems.push_back(fmt::format(
        "annotation {}gres cannot be used with a GPU device class request: the GRES come from "
        "the request",
        kJobAnnotationPrefix));
  }
  return problems;
}

}  // namespace sb::bridge
