// SPDX-License-Identifier: Apache-2.0
//
// bridge/annotations.h
//
// The job annotations of a pod or a workload (prefix slurmjob.slinky.slurm.net/, or the pre-1.0
// slinky.slurm.net/), by suffix: what Translate (translate.h), the identity policy
// (identity.h), the webhook and the DRA admission check (dra/admission.h) read. Pure code.
#pragma once

#include <map>
#include <string>

#include "kube/types.h"

namespace sb::bridge {

// The job annotations of `annotations`, by suffix ("account", "priority", ...): the prefix
// slurmjob.slinky.slurm.net/ or the pre-1.0 slinky.slurm.net/ (the current one wins).
[[nodiscard]] std::map<std::string, std::string> JobAnnotations(const kube::StringMap& annotations);

}  // namespace sb::bridge
