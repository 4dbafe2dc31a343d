// SPDX-License-Identifier: Apache-2.0
//
// bridge/job_update.h
//
// What to send to Slurm when a pending job's description changes (annotations edited, nodes
// cordoned or tainted, the tag's pods): the changed fields only, so that an unchanged job costs
// no call and the fields Slurm does not let one change (flags, user, working directory, script)
// are never sent. Pure code.
//
// The bridge's token is SlurmUser's, an operator's, and Slurm checks a job's partition, QOS and
// association limits against its description at submit only: an operator's update of a pending
// job's time limit, TRES, node count, partition, account or QOS is taken as set by an admin and
// skips those checks (review R-1). Such a change is therefore never sent: the job is to be
// cancelled and submitted anew (`resubmit`), where Slurm checks the new description as it would
// any user's. Only fields that no limit looks at are updated in place.
#pragma once

#include <optional>
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
  // Changed (or removed) fields that Slurm checks against limits only at submit: when not
  // empty, nothing is to be sent and the job is to be submitted anew.
  std::vector<std::string> resubmit;
};

// `sent`: the description Slurm has (as submitted or last updated), nullopt when it is unknown
// (a job adopted after a restart: every field updated in place is sent once, and the others are
// taken to be as submitted); `wanted`: the description the group asks for now.
[[nodiscard]] JobUpdate PendingJobUpdate(const std::optional<slurm::JobDescription>& sent,
                                         const slurm::JobDescription& wanted);

}  // namespace sb::bridge
