// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/admission.h
//
// The webhook's DRA check (admission/review.cc): whether a pod's DRA requests are ones Slurm can
// choose devices for, said at CREATE instead of after the pod waited for a job.
//
// Thread model: pure functions over plain values.
#pragma once

#include <string>
#include <vector>

#include "bridge/dra/profile.h"
#include "bridge/dra/requests.h"
#include "kube/types.h"

namespace sb::bridge {

// Why the webhook refuses the pod on the DRA path: one message per problem, empty when it is
// accepted. Refused: an extended resource of a class no profile covers (the message lists the
// covered classes, or says DRA is off when there are no profiles), a class asked for by two
// containers, the core-bitmap class together with native cpu, the annotations cpu-per-task with
// the core-bitmap class or gres with an indexed-gres class (upstream's checks), a shared
// ResourceClaim, and a template claim whose template is absent from `claim_templates` (not
// readable) or asks for something Slurm cannot choose (ClaimRequests).
[[nodiscard]] std::vector<std::string> DraAdmissionProblems(
    const kube::Pod& pod, const std::vector<DeviceProfile>& profiles,
    const ObjectsByName& device_classes, const std::vector<PodResourceClaim>& claims = {},
    const ObjectsByName& claim_templates = {});

}  // namespace sb::bridge
