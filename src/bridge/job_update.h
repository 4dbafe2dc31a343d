// SPDX-License-Identifier: Apache-2.0
//
// bridge/job_update.h
//
// What to send to Slurm when a pending job's description changes (annotations edited, nodes
// cordoned or tainted, the tag's pods): the changed fields only, so that an unchanged job costs
// no call and the fields Slurm does not let one change (flags, user, working directory, script)
// are never sent. Pure code.
#pragma once

#include <string>
#include <vector>

#include "slurm/types.h"

namespace sb::bridge {

struct JobUpdate {
  slurm::JobDescription changes;     // only the changed fields (and `clear`)
  std::vector<std::string> changed;  // their Slurm names, for logs; empty: nothing to send
  // Fields that were unset in `wanted` but set in `sent`, which Slurm cannot be told to forget
  // (a removed time-limit or priority annotation): Slurm keeps the value it has.
  std::vector<std::string> kept;
};

// `sent`: the description Slurm has (as submitted or last updated); `wanted`: the description
// the group asks for now.
[[nodiscard]] JobUpdate PendingJobUpdate(const slurm::JobDescription& sent,
                                         const slurm::JobDescription& wanted);

}  // namespace sb::bridge
