// SPDX-License-Identifier: Apache-2.0
//
// slurm/client.h
//
// The one interface to slurmrestd. It knows Slurm's REST API and nothing of Kubernetes or the
// bridge. The production implementation (MakeClient) speaks HTTP/1.1 through net::HttpClient
// (TCP, TLS or a Unix socket), sends the JWT as X-SLURM-USER-TOKEN, and uses data_parser
// v0.0.42 to v0.0.45: the newest the server offers (read from its OpenAPI document, else by
// probing), or the one pinned in ClientConfig.
//
// Errors (sb::Error) keep the HTTP status and Slurm's errors[] in `details`, and are classified:
//   kNotFound            unknown job (2017) or node
//   kUnauthenticated     no token, or slurmrestd refused it (401, or 511 with error 1007); the
//                        token is re-read and the call retried once before this is returned
//   kPermissionDenied    Access/permission denied (2002): e.g. an external job without a
//                        SlurmUser token
//   kInvalidArgument     Slurm refused the request: bad partition (2000), impossible
//                        configuration (2014), too many CPUs (2005), a body slurmrestd could not
//                        read (it answers 200 with only warnings and does nothing)
//   kFailedPrecondition  the job is in the wrong state (2073: no longer pending; 2085: not running)
//   kUnavailable         unreachable, reset, closed mid-reply, 5xx, or nodes busy (2016)
//   kDeadlineExceeded    timed out
//   kUnimplemented       the negotiated API version lacks the endpoint (new/node, resources
//                        before v0.0.44)
// Unknown outcome: when the connection broke or timed out after a request was written (a submit
// whose reply never came), the error carries reason net::kReasonMayHaveBeenProcessed
// (net::MayHaveBeenProcessed(error) is true; code kDeadlineExceeded or kUnavailable): Slurm may
// have created the job all the same. A caller must not submit again blindly; it should look for
// the job (its tag in admin_comment) first. An error without that reason was never received.
// SubmitJob: a 2xx reply with a job_id > 0 is a success even when it lists errors[]; they are
// logged and returned as warnings (the job exists, and a retry would make a second one).
//
// Memory and time: replies are read up to net::ClientOptions::body_limit (64 MiB by default) and
// within its timeout; job lists (ListJobs, ListJobsSince, ScanJobs, JobStates) up to
// ClientConfig::jobs_body_limit and within jobs_timeout. A longer reply is kInternal. ScanJobs
// alone decodes its reply one job at a time (slurm/job_list_scanner.h): its memory follows the
// jobs it keeps; the others hold the whole reply and its decoded jobs.
//
// Traps of the real slurmrestd handled here: DELETE of an unknown job answers 200 with the error
// inside status[]; GET of an unknown node answers 200 with an error of number 0 and the
// description "Failure to query node <name>" (only that is kNotFound; other errors inside a
// 2xx of GetNode are kUnavailable); a wrong JSON
// type answers 200 with a warning and submits nothing; /jobs/state/ answers 500 to the
// comma-separated job_id list its spec describes (422 when the commas are escaped, in every
// data_parser version), so ids are sent as repeated parameters (see JobStatePaths).
// Ping with a bad token answers 200 with pinged "DOWN": Ping() is not an auth check.
//
// Thread model: loop-confined (one io_context thread). Calls may overlap.
//
// Example:
//   auto client = slurm::MakeClient(io.get_executor(), {.url = "http://127.0.0.1:6820"},
//                                   slurm::MakeFileTokenSource("/var/run/secrets/slurm/token"));
//   Result<JobSubmitResult> r = co_await (*client)->SubmitJob(desc);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/error.h"
#include "net/http_client.h"
#include "slurm/token_source.h"
#include "slurm/types.h"

namespace sb::slurm {

template <typename T>
using Task = boost::asio::awaitable<Result<T>>;

struct ClientConfig {
  std::string url;                    // "http://host:6820", "https://...", "unix:///path"
  std::optional<ApiVersion> version;  // pinned data_parser version; unset: negotiate
  std::string user_name;              // sent as X-SLURM-USER-NAME when set
  net::ClientOptions http;            // timeouts, retries, TLS (CA file, insecure)
  // Largest reply of ListJobs and JobStates (every job slurmctld knows); other calls use
  // http.body_limit.
  std::size_t jobs_body_limit = std::size_t{1} << 30;
  // Deadline of those replies (http.timeout for the rest): a full /jobs/ took 1.7 s for 2,005
  // jobs on slurmrestd 26.05 (8 KB per job), so a cluster of 50,000 jobs needs about 45 s, more
  // than the default 30 s, and start-up (which reads it once) would never finish.
  std::chrono::milliseconds jobs_timeout{std::chrono::minutes(5)};
};

// Which jobs of a list are kept (ScanJobs).
using JobFilter = std::function<bool(const JobInfo&)>;

class Client {
 public:
  virtual ~Client() = default;

  // The data_parser version in use, negotiated on first use when not pinned.
  [[nodiscard]] virtual Task<ApiVersion> Version() = 0;
  [[nodiscard]] virtual Task<std::vector<PingResult>> Ping() = 0;

  // Submits `job`: an external job (no script, flags EXTERNAL_JOB; needs a SlurmUser token) or a
  // batch job (script set). Warnings slurmrestd attached are returned in the result.
  [[nodiscard]] virtual Task<JobSubmitResult> SubmitJob(JobDescription job) = 0;
  // Submits a heterogeneous job, one component per entry (POST /job/submit with "jobs"): Slurm
  // allocates all components at once or none (only its backfill scheduler starts them). The
  // result's job_id is the het job's id (its first component's); component k has id + k. A
  // cancel of that id cancels every component. Default: kUnimplemented.
  [[nodiscard]] virtual Task<JobSubmitResult> SubmitHetJob(std::vector<JobDescription> components);
  [[nodiscard]] virtual Task<JobInfo> GetJob(std::int64_t job_id) = 0;
  // Every record GET /job/{id} answers: one for an ordinary job; for a heterogeneous job's id,
  // every component (het_job_offset order). Default: GetJob's one record.
  [[nodiscard]] virtual Task<std::vector<JobInfo>> GetJobRecords(std::int64_t job_id);
  // Every job slurmctld still knows.
  [[nodiscard]] virtual Task<std::vector<JobInfo>> ListJobs() = 0;
  // The same, unless no job in the cluster changed since `update_time` (Slurm's clock: the
  // last_update of an earlier JobList; 0 always reads the full list). Then the reply is a few
  // hundred bytes (`unchanged`) instead of every job (measured: 1.4 ms and 837 bytes instead of
  // 1.7 s and 16 MB with 2,000 jobs).
  [[nodiscard]] virtual Task<JobList> ListJobsSince(std::int64_t update_time) = 0;
  // The jobs of ListJobsSince(update_time) for which `keep` is true (an unchanged list stays
  // `unchanged`). Meant for the reads of the whole list that cannot be avoided (start-up, a
  // submit whose reply was lost): the real client decodes the reply one job at a time as it
  // arrives, so its memory follows the kept jobs, not the list. Default: ListJobsSince, then
  // filtered.
  [[nodiscard]] virtual Task<JobList> ScanJobs(std::int64_t update_time, JobFilter keep);
  // States of the given jobs; jobs Slurm has forgotten are left out. An empty `job_ids` means
  // every job. One request for up to a few thousand ids (JobStatePaths).
  [[nodiscard]] virtual Task<std::vector<JobStateEntry>> JobStates(
      std::vector<std::int64_t> job_ids) = 0;
  // Changes a pending job. Only the fields set in `changes` are sent.
  [[nodiscard]] virtual Task<bool> UpdateJob(std::int64_t job_id, JobDescription changes) = 0;
  // Cancels (or signals) a job. An unknown job is kNotFound.
  [[nodiscard]] virtual Task<bool> CancelJob(std::int64_t job_id, CancelOptions options) = 0;
  // Per-node allocation of a running job: nodes, GRES names, types and device indices.
  [[nodiscard]] virtual Task<std::vector<NodeAllocation>> JobResources(std::int64_t job_id) = 0;

  [[nodiscard]] virtual Task<std::vector<NodeInfo>> ListNodes() = 0;
  [[nodiscard]] virtual Task<NodeInfo> GetNode(std::string name) = 0;
  // DRAIN (with reason), UNDRAIN / RESUME, features.
  [[nodiscard]] virtual Task<bool> UpdateNode(std::string name, NodeUpdate update) = 0;
  // Registers a dynamic node from a slurm.conf-style line ("NodeName=k1 ... State=External").
  [[nodiscard]] virtual Task<bool> CreateNode(std::string node_conf) = 0;
  [[nodiscard]] virtual Task<bool> DeleteNode(std::string name) = 0;

  [[nodiscard]] virtual Task<std::vector<PartitionInfo>> ListPartitions() = 0;
  [[nodiscard]] virtual Task<PartitionInfo> GetPartition(std::string name) = 0;
  [[nodiscard]] virtual Task<std::vector<ReservationInfo>> ListReservations() = 0;
  // GET /shares?accounts=..&users=.. (sshare; v0.0.44+): the associations' fair share. Either
  // filter may be empty. kUnimplemented where the client does not offer it.
  [[nodiscard]] virtual Task<std::vector<Share>> Shares(std::string accounts, std::string users);

  // HTTP-level counters of the underlying connection pool.
  [[nodiscard]] virtual const net::ClientStats& http_stats() const = 0;
};

using ClientPtr = std::unique_ptr<Client>;

// kInvalidArgument for a bad URL or TLS options.
[[nodiscard]] Result<ClientPtr> MakeClient(boost::asio::any_io_executor executor,
                                           ClientConfig config, TokenSourcePtr tokens);

// The paths (after /slurm/<version>) of the /jobs/state/ requests for `job_ids`, in order: ids
// as repeated job_id parameters, as many per request as fit in kJobStateQueryBytes. One path
// ("/jobs/state/", every job) for an empty list. Exposed for tests and fakes.
//
// Measured on slurmrestd 26.05 (v0.0.44): a request of more than about 81,900 bytes (request
// line and headers) is refused with 500 "Insane message length", and one with more than 6,316
// distinct ids with 422 "Failure parsing query"; 5,000 ids of 8 digits (80,000 bytes) pass. A
// query of 32 KiB holds 2,048 8-digit ids (2,730 of 4 digits; never near 6,316), so 1,000
// tracked jobs are read with one request, and a proxy or another version has room to spare.
inline constexpr std::size_t kJobStateQueryBytes = 32 * 1024;
[[nodiscard]] std::vector<std::string> JobStatePaths(const std::vector<std::int64_t>& job_ids);

// The classification described above, for a reply with `http_status` and Slurm's `errors`.
// `operation` names what was attempted, for the message ("submit job"). Exposed for tests.
[[nodiscard]] Error ClassifySlurmError(std::string_view operation, int http_status,
                                       std::vector<ErrorDetail> errors, std::string_view body);

}  // namespace sb::slurm
