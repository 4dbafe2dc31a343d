// SPDX-License-Identifier: Apache-2.0
//
// testing/fake_slurm_client.h
//
// FakeSlurmClient: an in-memory slurm::Client for unit tests of the loops that talk to Slurm
// (scheduler, controllers). It holds jobs and nodes the test sets up and changes at will, answers
// every call from them at once (no I/O), counts the calls, and fails the calls a test asks it to.
//
//   - Jobs: SubmitJob stores a job (id from next_job_id, state PENDING, admin_comment and the
//     other described fields kept); AddJob puts any JobInfo in; SetJobState/SetJobTag/Forget
//     change or drop one. CancelJob of a live job makes it CANCELLED (kNotFound for an unknown
//     job, as slurmrestd); of an ended job it does nothing and succeeds. UpdateJob of a PENDING
//     job applies name, partition, admin_comment, comment, nodes, time_limit and priority (JobInfo
//     has no excluded_nodes: updates() shows those); of any other job kFailedPrecondition
//     (Slurm's 2073). updates() records every UpdateJob call.
//   - SubmitHetJob stores one job per component, with consecutive ids (het_job_id the first,
//     het_job_offset 0, 1, ...); GetJobRecords of the first answers every component; CancelJob
//     of it cancels every component. het_submitted() keeps each call's components.
//   - JobStates with no ids answers every job, with ids the known ones among them (forgotten
//     jobs are left out, as slurmrestd does); state_queries() keeps the id list of every call.
//   - ListJobsSince(t): every change above (and AddJob, SubmitJob, Forget) moves a logical
//     clock on; a list answers last_update = that clock, and `unchanged` (no jobs) when t > 0
//     and nothing changed since the list that gave t, as slurmctld does.
//   - Nodes: AddNode/RemoveNode/SetNodeState; GetNode of an unknown node is kNotFound.
//     UpdateNode treats DRAIN and UNDRAIN as slurmctld does, as a flag added to or taken from
//     the node's state (other states replace it), and applies features, features_act, comment
//     and topology_str. CreateNode reads NodeName, NodeAddr, CPUs, RealMemory, Feature,
//     Topology, Gres and State=External (state IDLE+EXTERNAL) from the node_conf, and refuses
//     a node that exists (kInvalidArgument, Slurm's 2168); created() lists every node_conf
//     (failed ones included), node_updates() every UpdateNode call.
//   - Partitions: AddPartition (ListPartitions answers those); GetPartition of an unknown
//     partition is kNotFound.
//   - Failure injection: FailNext(call, error, times) makes the next `times` calls of `call`
//     ("SubmitJob", "GetJob", "ListJobs", "JobStates", "UpdateJob", "CancelJob", "JobResources",
//     "ListNodes", "GetNode", "UpdateNode", "CreateNode", "DeleteNode", "ListPartitions",
//     "GetPartition", "ListReservations", "Ping", "Version") return `error` instead; with
//     `apply` (SubmitJob and CancelJob only) the call takes effect first and the error is
//     returned after: an outcome the caller cannot know (a timeout after the write).
//   - Counters: calls(name) counts every call of `name`, failed ones included; cancels() lists
//     the job ids CancelJob was called with, in order; submitted() the descriptions submitted.
//     http_stats().requests counts the HTTP requests the real client would send: one per call,
//     and for JobStates one per path of slurm::JobStatePaths (its batching).
//
// Thread model: loop-confined, like the real client; the awaitables complete without
// suspending (SubmitJob with submit_delay excepted).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "slurm/client.h"

namespace sb::testing {

class FakeSlurmClient final : public slurm::Client {
 public:
  FakeSlurmClient() = default;

  // Test set-up and inspection ---------------------------------------------------------------
  // Stores `job` as is (replacing a job with the same id); returns its id.
  std::int64_t AddJob(slurm::JobInfo job);
  // A job with `state` (e.g. "RUNNING") and `admin_comment`; returns its id (next_job_id).
  std::int64_t AddJob(const std::string& state, const std::string& admin_comment = "",
                      const std::string& nodes = "");
  // Base state (and optional flags after it); false for an unknown job.
  bool SetJobState(std::int64_t id, std::vector<std::string> state);
  bool SetJobState(std::int64_t id, const std::string& state) {
    return SetJobState(id, std::vector<std::string>{state});
  }
  bool SetJobTag(std::int64_t id, std::string admin_comment);
  // Slurm forgets the job (GetJob: kNotFound; left out of lists).
  void Forget(std::int64_t id);
  [[nodiscard]] const slurm::JobInfo* Job(std::int64_t id) const;
  [[nodiscard]] std::vector<std::int64_t> JobIds() const;

  void AddNode(slurm::NodeInfo node);
  void RemoveNode(const std::string& name) { nodes_.erase(name); }
  bool SetNodeState(const std::string& name, std::vector<std::string> state);

  void AddPartition(slurm::PartitionInfo partition);
  [[nodiscard]] const slurm::NodeInfo* Node(const std::string& name) const;

  void FailNext(const std::string& call, Error error, int times = 1, bool apply = false);

  [[nodiscard]] int calls(const std::string& name) const;
  [[nodiscard]] const std::vector<std::int64_t>& cancels() const { return cancels_; }
  [[nodiscard]] const std::vector<slurm::JobDescription>& submitted() const { return submitted_; }
  [[nodiscard]] const std::vector<std::vector<slurm::JobDescription>>& het_submitted() const {
    return het_submitted_;
  }
  [[nodiscard]] const std::vector<std::vector<std::int64_t>>& state_queries() const {
    return state_queries_;
  }
  [[nodiscard]] std::uint64_t requests() const { return stats_.requests; }
  // Every UpdateJob call's job id and changes, in order (failed ones included).
  [[nodiscard]] const std::vector<std::pair<std::int64_t, slurm::JobDescription>>& updates() const {
    return updates_;
  }
  [[nodiscard]] const std::vector<std::string>& created() const { return created_; }
  [[nodiscard]] const std::vector<std::pair<std::string, slurm::NodeUpdate>>& node_updates() const {
    return node_updates_;
  }

  std::int64_t next_job_id = 1;
  // Each SubmitJob waits this long (real time) before it acts: a slow slurmctld. The other
  // calls still complete without suspending.
  std::chrono::milliseconds submit_delay{0};

  // slurm::Client --------------------------------------------------------------------------
  [[nodiscard]] slurm::Task<slurm::ApiVersion> Version() override;
  [[nodiscard]] slurm::Task<std::vector<slurm::PingResult>> Ping() override;
  [[nodiscard]] slurm::Task<slurm::JobSubmitResult> SubmitJob(slurm::JobDescription job) override;
  [[nodiscard]] slurm::Task<slurm::JobSubmitResult> SubmitHetJob(
      std::vector<slurm::JobDescription> components) override;
  [[nodiscard]] slurm::Task<slurm::JobInfo> GetJob(std::int64_t job_id) override;
  [[nodiscard]] slurm::Task<std::vector<slurm::JobInfo>> GetJobRecords(
      std::int64_t job_id) override;
  [[nodiscard]] slurm::Task<std::vector<slurm::JobInfo>> ListJobs() override;
  [[nodiscard]] slurm::Task<slurm::JobList> ListJobsSince(std::int64_t update_time) override;
  [[nodiscard]] slurm::Task<std::vector<slurm::JobStateEntry>> JobStates(
      std::vector<std::int64_t> job_ids) override;
  [[nodiscard]] slurm::Task<bool> UpdateJob(std::int64_t job_id,
                                            slurm::JobDescription changes) override;
  [[nodiscard]] slurm::Task<bool> CancelJob(std::int64_t job_id,
                                            slurm::CancelOptions options) override;
  [[nodiscard]] slurm::Task<std::vector<slurm::NodeAllocation>> JobResources(
      std::int64_t job_id) override;
  [[nodiscard]] slurm::Task<std::vector<slurm::NodeInfo>> ListNodes() override;
  [[nodiscard]] slurm::Task<slurm::NodeInfo> GetNode(std::string name) override;
  [[nodiscard]] slurm::Task<bool> UpdateNode(std::string name, slurm::NodeUpdate update) override;
  [[nodiscard]] slurm::Task<bool> CreateNode(std::string node_conf) override;
  [[nodiscard]] slurm::Task<bool> DeleteNode(std::string name) override;
  [[nodiscard]] slurm::Task<std::vector<slurm::PartitionInfo>> ListPartitions() override;
  [[nodiscard]] slurm::Task<slurm::PartitionInfo> GetPartition(std::string name) override;
  [[nodiscard]] slurm::Task<std::vector<slurm::ReservationInfo>> ListReservations() override;
  [[nodiscard]] const net::ClientStats& http_stats() const override { return stats_; }

 private:
  struct Failure {
    Error error;
    bool apply = false;
  };
  // Counts the call; the injected failure for it, if one is due.
  std::optional<Failure> Enter(const std::string& call);

  std::map<std::int64_t, slurm::JobInfo> jobs_;
  std::map<std::string, slurm::NodeInfo> nodes_;
  std::map<std::string, std::deque<Failure>> failures_;
  std::map<std::string, int> calls_;
  std::vector<std::int64_t> cancels_;
  std::vector<slurm::JobDescription> submitted_;
  std::vector<std::vector<slurm::JobDescription>> het_submitted_;
  std::vector<std::vector<std::int64_t>> state_queries_;
  std::int64_t changed_ = 1;  // logical clock of the last change (ListJobsSince)
  std::vector<std::pair<std::int64_t, slurm::JobDescription>> updates_;
  std::map<std::string, slurm::PartitionInfo> partitions_;
  std::vector<std::string> created_;
  std::vector<std::pair<std::string, slurm::NodeUpdate>> node_updates_;
  net::ClientStats stats_;
};

}  // namespace sb::testing
