// SPDX-License-Identifier: Apache-2.0
//
// slurm/codec.h
//
// JSON to and from the types in slurm/types.h, for data_parser v0.0.42 to v0.0.45 (the fields
// used here have the same names and shapes in all four). Pure functions, no I/O.
//
// Every slurmrestd reply carries `errors[]` and `warnings[]` beside its payload; decoders return
// both in a Reply so the caller can decide (slurmrestd answers 200 with errors inside in several
// places, see slurm/client.h). A reply that is not JSON, or whose payload has the wrong shape,
// is an Error with code kInternal that quotes the start of the body.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "slurm/types.h"

namespace sb::slurm {

template <typename T>
struct Reply {
  T value{};
  std::vector<ErrorDetail> errors;
  std::vector<std::string> warnings;  // "description (source)"
};

// Only errors[] and warnings[] (any reply, e.g. a job update or a node update).
[[nodiscard]] Result<Reply<bool>> DecodeStatusOnly(std::string_view json);
[[nodiscard]] Result<Reply<JobSubmitResult>> DecodeSubmit(std::string_view json);
[[nodiscard]] Result<Reply<std::vector<JobInfo>>> DecodeJobs(std::string_view json);
// GET /jobs/?update_time=T: the jobs, or `unchanged` (see JobList).
[[nodiscard]] Result<Reply<JobList>> DecodeJobList(std::string_view json);
// DecodeJobList in pieces, for a reply decoded as it arrives (slurm/job_list_scanner.h), with
// the same field decoding and the same rules:
// - one entry of the "jobs" array, alone (an entry that is not an object is malformed);
[[nodiscard]] Result<JobInfo> DecodeJobListEntry(std::string_view json);
// - the reply without its "jobs" array (`json`: the other members, errors[], warnings[],
//   last_update, ...), given the `jobs` kept of the array and how many `entries` it had (the
//   "unchanged" rule looks at the entries, not at the jobs kept). A "jobs" left in `json` is
//   decoded as DecodeJobList does and comes before `jobs`.
[[nodiscard]] Result<Reply<JobList>> DecodeJobListRest(std::string_view json,
                                                       std::vector<JobInfo> jobs,
                                                       std::size_t entries);
[[nodiscard]] Result<Reply<std::vector<JobStateEntry>>> DecodeJobStates(std::string_view json);
[[nodiscard]] Result<Reply<std::vector<NodeAllocation>>> DecodeResources(std::string_view json);
[[nodiscard]] Result<Reply<std::vector<NodeInfo>>> DecodeNodes(std::string_view json);
[[nodiscard]] Result<Reply<std::vector<PartitionInfo>>> DecodePartitions(std::string_view json);
[[nodiscard]] Result<Reply<std::vector<ReservationInfo>>> DecodeReservations(std::string_view json);
[[nodiscard]] Result<Reply<std::vector<Share>>> DecodeShares(std::string_view json);
[[nodiscard]] Result<Reply<std::vector<PingResult>>> DecodePings(std::string_view json);
// DELETE /job/{id}: per-job results inside `status[]`; a failed one (unknown job: 200 with
// error code 2017 inside) is returned as an entry of `errors`.
[[nodiscard]] Result<Reply<bool>> DecodeCancel(std::string_view json);

// The data_parser versions an OpenAPI document (GET /openapi/v3) offers, newest first: those
// with a /slurm/<version>/ping/ path. (slurmrestd escapes '/' in its JSON, so a text search
// for the path would miss it.)
[[nodiscard]] Result<std::vector<ApiVersion>> DecodeOpenApiVersions(std::string_view json);

// {"job": {...}} for POST /job/submit.
[[nodiscard]] std::string EncodeJobSubmit(const JobDescription& job);
// {"jobs": [{...}, ...]} for POST /job/submit: a heterogeneous job, one entry per component.
[[nodiscard]] std::string EncodeHetJobSubmit(const std::vector<JobDescription>& components);
// The bare job_desc_msg, for POST /job/{id} (update).
[[nodiscard]] std::string EncodeJobDescription(const JobDescription& job);
[[nodiscard]] std::string EncodeNodeUpdate(const NodeUpdate& update);
// {"node_conf": "..."} for POST /new/node/.
[[nodiscard]] std::string EncodeNewNode(std::string_view node_conf);

}  // namespace sb::slurm
