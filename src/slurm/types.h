// SPDX-License-Identifier: Apache-2.0
//
// slurm/types.h
//
// Plain value types for the subset of slurmrestd's data_parser (v0.0.42 to v0.0.45) that the
// bridge reads and writes. Field names follow Slurm's JSON names. Unknown fields are ignored when
// decoding; fields left empty / unset here are left out when encoding, so Slurm's defaults apply.
//
// Thread model: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sb::slurm {

// The data_parser versions this client speaks, oldest first.
enum class ApiVersion { kV0042, kV0043, kV0044, kV0045 };
inline constexpr ApiVersion kNewestApiVersion = ApiVersion::kV0045;
// "v0.0.44"
[[nodiscard]] std::string_view ApiVersionName(ApiVersion v);
[[nodiscard]] std::optional<ApiVersion> ParseApiVersion(std::string_view name);
// All versions, newest first (the order of preference).
[[nodiscard]] const std::vector<ApiVersion>& AllApiVersions();

// Slurm's "no value" number: {"set": bool, "infinite": bool, "number": N}, used for limits that
// may be unset (Slurm's NO_VAL) or infinite (INFINITE). Modelled once for every width.
struct NoValNumber {
  bool set = false;
  bool infinite = false;
  std::int64_t number = 0;

  static NoValNumber Of(std::int64_t n) { return {true, false, n}; }
  static NoValNumber Infinite() { return {true, true, 0}; }
  static NoValNumber Unset() { return {}; }
  // The number when set and finite.
  [[nodiscard]] std::optional<std::int64_t> Value() const {
    return set && !infinite ? std::optional<std::int64_t>(number) : std::nullopt;
  }
  bool operator==(const NoValNumber&) const = default;
};

// A job to submit or update (Slurm's job_desc_msg). A placeholder is either an external job
// (flags contains "EXTERNAL_JOB", no script: nothing runs, Slurm only allocates) or a batch
// job whose script sleeps, for Slurms without external jobs.
struct JobDescription {
  std::string name;
  std::string partition;
  std::string account;
  std::string qos;
  std::string reservation;
  std::string constraints;
  std::string licenses;
  std::string wckey;
  std::string comment;
  std::string admin_comment;
  std::string mcs_label;
  std::string current_working_directory;
  std::optional<std::string> script;  // set: a batch job
  std::vector<std::string> environment;
  std::string standard_output;
  std::string standard_error;
  std::vector<std::string> flags;  // "EXTERNAL_JOB", ...
  std::string nodes;               // node count or range: "1", "2-4"; empty: Slurm's default
  std::optional<std::int32_t> minimum_nodes;
  std::optional<std::int32_t> maximum_nodes;
  std::optional<std::int32_t> tasks;
  std::optional<std::int32_t> tasks_per_node;
  std::optional<std::int32_t> cpus_per_task;
  NoValNumber memory_per_node;  // MiB
  NoValNumber time_limit;       // minutes
  NoValNumber priority;
  std::string tres_per_node;  // "gres/gpu=1", "gres/gpu:a100=2"
  std::string tres_per_job;
  std::vector<std::string> required_nodes;
  std::vector<std::string> excluded_nodes;
  std::vector<std::string> shared;  // ["none"] = exclusive; ["user"], ["oversubscribe"], ...
  std::string user_id;              // numeric uid or user name, as Slurm takes it
  std::string group_id;
  std::optional<bool> hold;
  // For an update: fields to send empty, which clears them in Slurm (for example
  // "excluded_nodes", "comment"; a list is sent as [""], as Slurm reads [] as "no change").
  // Empty fields are otherwise left out, which keeps them.
  std::vector<std::string> clear;
};

struct JobSubmitResult {
  std::int64_t job_id = 0;
  std::string step_id;
  std::string job_submit_user_msg;
  std::vector<std::string> warnings;
};

// A job as slurmctld reports it (job_info).
struct JobInfo {
  std::int64_t job_id = 0;
  std::string name;
  std::vector<std::string> job_state;  // e.g. ["RUNNING"], ["PENDING"], ["CANCELLED"]
  std::string state_reason;            // "None", "Resources", "Priority", ...
  std::string state_description;
  std::string partition;
  std::string nodes;  // hostlist expression: "n[1-3]"
  std::string batch_host;
  std::string user_name;
  std::int64_t user_id = 0;
  std::string account;
  std::string qos;
  std::string admin_comment;
  std::string comment;
  std::vector<std::string> flags;
  std::string tres_per_node;
  std::string tres_req_str;
  std::string tres_alloc_str;
  std::vector<std::string> gres_detail;  // "gpu:fake:2(IDX:0-1)"
  std::int64_t node_count = 0;
  std::int64_t cpus = 0;
  NoValNumber time_limit;
  NoValNumber submit_time;
  NoValNumber start_time;
  NoValNumber end_time;
  NoValNumber priority;
  // When Slurm preempted the job (Unix seconds; 0 or unset: never): kept while a job preempted
  // in REQUEUE or SUSPEND mode waits or runs again.
  NoValNumber preempt_time;
  // A component of a heterogeneous job: the leader's id (the het job's id) and its offset
  // (0 for the leader); both 0 for an ordinary job.
  std::int64_t het_job_id = 0;
  std::int64_t het_job_offset = 0;

  // True when job_state contains `state`.
  [[nodiscard]] bool HasState(std::string_view state) const;
  // The first state, "" when none.
  [[nodiscard]] std::string_view BaseState() const {
    return job_state.empty() ? std::string_view() : std::string_view(job_state.front());
  }
};

// One entry of /jobs/state/.
struct JobStateEntry {
  std::int64_t job_id = 0;
  std::vector<std::string> state;
};

// GET /jobs/?update_time=T. slurmctld answers the full list when any job in the cluster changed
// since T, and otherwise no jobs, last_update unset and the warning "No job changes since
// update_time[T]=..." (measured on Slurm 26.05): `unchanged` tells that apart from "no jobs".
struct JobList {
  std::vector<JobInfo> jobs;
  bool unchanged = false;  // no job changed since update_time: `jobs` is empty and says nothing
  // Slurm's time of this list (its clock): the update_time of the next call. 0 when unchanged.
  std::int64_t last_update = 0;
};

// What slurmctld allocated on one node (/resources/{job_id}, v0.0.44+).
struct GresAllocation {
  std::string name;  // "gpu"
  std::string type;  // "a100", "fake"
  std::int64_t count = 0;
  std::string index;  // "0-1": device indices on the node
};
struct NodeAllocation {
  std::string node;
  std::int64_t sockets_per_node = 0;
  std::int64_t cores_per_socket = 0;
  std::int64_t mem_alloc = 0;  // MiB
  std::string core_bitmap;
  std::vector<GresAllocation> gres;
};

struct NodeInfo {
  std::string name;
  std::vector<std::string> state;  // e.g. ["IDLE"], ["MIXED","DRAIN"], ["DOWN"]
  std::string reason;
  std::string address;
  std::string hostname;
  std::int64_t cpus = 0;
  std::int64_t alloc_cpus = 0;
  std::int64_t real_memory = 0;   // MiB
  std::int64_t alloc_memory = 0;  // MiB
  std::string gres;               // "gpu:fake:4"
  std::string gres_used;
  std::vector<std::string> features;
  std::vector<std::string> active_features;
  std::vector<std::string> partitions;
  std::string tres;
  std::string comment;
  std::string topology;  // the node's place in a topology/tree or /block ("" when flat)

  [[nodiscard]] bool HasState(std::string_view state) const;
};

// One association of sshare's table (/shares, v0.0.44+): a user's under an account, or an
// account's.
struct Share {
  std::string name;     // the user (type USER) or the account
  std::string account;  // a user's: its account (Slurm's "parent"); an account's: its parent
  bool user = false;    // type USER
  std::string partition;
  std::optional<double> fairshare;  // the fair-share factor (0..1), when Slurm computes one
  std::optional<double> effective_usage;
};

// A change to one or more nodes (update_node_msg). Empty fields are left out.
struct NodeUpdate {
  std::vector<std::string> state;  // "DRAIN", "UNDRAIN", "RESUME", "DOWN", ...
  std::string reason;
  std::optional<std::vector<std::string>> features;
  std::optional<std::vector<std::string>> features_act;
  std::string comment;
  // Its topology (topology_str, e.g. "topo-switch:s1,topo-block:b1"); set: sent, even empty.
  std::optional<std::string> topology_str;
};

struct PartitionInfo {
  std::string name;
  std::string nodes;  // hostlist expression or node set names as configured
  std::string state;  // "UP", "DOWN", ...
  std::int64_t total_nodes = 0;
  std::int64_t total_cpus = 0;
  NoValNumber max_time;
  // OverSubscribe (maximums.oversubscribe): how many jobs may share one resource (EXCLUSIVE 0,
  // NO 1, YES:N and FORCE:N N; -1 when the reply does not say) and whether FORCE is set.
  std::int64_t oversubscribe_jobs = -1;
  bool oversubscribe_force = false;
};

struct ReservationInfo {
  std::string name;
  std::string node_list;
  std::string partition;
  std::vector<std::string> users;
  std::vector<std::string> flags;
  NoValNumber start_time;
  NoValNumber end_time;
};

struct PingResult {
  std::string hostname;
  std::string pinged;  // "UP" or "DOWN"
  bool responding = false;
  std::int64_t latency_us = 0;
  std::string mode;  // "primary", "backup"
};

// Options of a cancel (DELETE /job/{id}).
struct CancelOptions {
  std::string signal;              // e.g. "SIGKILL", "SIGTERM"; empty: a plain cancel
  std::vector<std::string> flags;  // e.g. "BATCH_JOB", "FULL_JOB"
};

}  // namespace sb::slurm
