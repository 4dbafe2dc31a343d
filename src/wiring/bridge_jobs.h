// SPDX-License-Identifier: Apache-2.0
//
// wiring/bridge_jobs.h
//
// The bridge's Slurm jobs as the operator's commands (`slurm-bridge check`, `explain`, `jobs`)
// find them: from Kubernetes, never from Slurm's whole job list. A pod of the bridge names its
// job by its job-id label (once bound, or labelled before its Binding) or, while it waits, in
// the scheduler's PodScheduled message ("waiting for Slurm job 12 in partition ..."). Slurm is
// then asked about those ids only: their states (/jobs/state/?job_id=..., one request per about
// 2,000 ids) and, for the jobs a command shows or checks, their records (GET /job/{id}, a few at
// a time). So a command costs what the bridge's pods cost, whatever else Slurm's queue holds
// (50,000 jobs of other users are a 400 MB, 40 s list that slurmrestd needs GBs to build).
// An id only says where to look: users can write labels and Slurm reuses ids, so callers check
// the job's tag (bridge/tag.h) before they take it for the bridge's.
//
// Thread model: coroutines on the caller's executor; the client must outlive the call.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/error.h"
#include "kube/types.h"
#include "slurm/client.h"

namespace sb::wiring {

// The job id of the scheduler's message to a waiting pod ("waiting for Slurm job 12 in
// partition batch: Priority"); nullopt for any other message.
[[nodiscard]] std::optional<std::int64_t> WaitingJobId(std::string_view message);

// The job id of the pod's job-id label (bridge::kJobIdLabel; a heterogeneous job's pods carry
// the same id there); nullopt without one, or when it is no positive number.
[[nodiscard]] std::optional<std::int64_t> LabelledJobId(const kube::Pod& pod);

// The Slurm job ids `pod` names: its job-id label, and the id of its PodScheduled message
// (WaitingJobId) while that condition is False. Ascending, without duplicates; empty when it
// names none.
[[nodiscard]] std::vector<std::int64_t> NamedJobIds(const kube::Pod& pod);

// Slurm's states of `ids` (base state first, as JobStateEntry::state), by id: one /jobs/state/
// request per slurm::JobStatePaths batch (about 2,000 ids). Jobs Slurm has forgotten are absent.
// No request at all for no id (JobStates of an empty list would answer every job).
[[nodiscard]] boost::asio::awaitable<Result<std::map<std::int64_t, std::vector<std::string>>>>
ReadJobStates(slurm::Client& slurm, std::vector<std::int64_t> ids);

struct RecordReadOptions {
  // GET /job/{id} requests in flight at once. 8 keeps slurmrestd's and slurmctld's load of one
  // operator's command small (each read is an RPC under slurmctld's job read lock) and stays
  // under the HTTP client's 16 kept connections, so that connections are reused; 1,000 jobs
  // take about 1,000 / 8 round trips.
  int concurrency = 8;
  // Applied to each record as it arrives, e.g. to drop the fields a caller does not use, so
  // that many records take little memory; empty: records are kept whole.
  std::function<void(slurm::JobInfo&)> trim;
};

// Every record of each of `ids` (GetJobRecords: a heterogeneous job's id answers each of its
// components), in the order of `ids`, each id's records in Slurm's order. A job Slurm no longer
// knows (kNotFound) is left out. An error when any other read fails: the first one, once the
// reads in flight have ended (no read is started after it).
[[nodiscard]] boost::asio::awaitable<Result<std::vector<slurm::JobInfo>>> ReadJobRecords(
    slurm::Client& slurm, std::vector<std::int64_t> ids, RecordReadOptions options);

}  // namespace sb::wiring
