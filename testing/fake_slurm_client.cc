// SPDX-License-Identifier: Apache-2.0
#include "testing/fake_slurm_client.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <string_view>
#include <utility>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bridge/hostlist.h"
#include "slurm/codec.h"

namespace sb::testing {
namespace {

// Slurm's base states after which a job holds nothing.
bool Ended(std::string_view state) {
  static const std::set<std::string_view> kEnded = {"COMPLETED", "CANCELLED", "FAILED",
                                                    "TIMEOUT",   "NODE_FAIL", "PREEMPTED",
                                                    "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY"};
  return kEnded.contains(state);
}

Error NotFound(std::string what) {
  Error e{ErrorCode::kNotFound, std::move(what), 200};
  e.details.push_back({.number = 2017, .error = "Invalid job id specified"});
  return e;
}

}  // namespace

std::int64_t FakeSlurmClient::AddJob(slurm::JobInfo job) {
  const std::int64_t id = job.job_id;
  next_job_id = std::max(next_job_id, id + 1);
  jobs_[id] = std::move(job);
  ++changed_;
  return id;
}

std::int64_t FakeSlurmClient::AddJob(const std::string& state, const std::string& admin_comment,
                                     const std::string& nodes) {
  slurm::JobInfo j;
  j.job_id = next_job_id;
  j.name = "fake";
  j.job_state = {state};
  j.admin_comment = admin_comment;
  j.nodes = nodes;
  return AddJob(std::move(j));
}

bool FakeSlurmClient::SetJobState(std::int64_t id, std::vector<std::string> state) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return false;
  it->second.job_state = std::move(state);
  ++changed_;
  return true;
}

bool FakeSlurmClient::SetJobTag(std::int64_t id, std::string admin_comment) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return false;
  it->second.admin_comment = std::move(admin_comment);
  ++changed_;
  return true;
}

void FakeSlurmClient::Forget(std::int64_t id) {
  jobs_.erase(id);
  ++changed_;
}

const slurm::JobInfo* FakeSlurmClient::Job(std::int64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<std::int64_t> FakeSlurmClient::JobIds() const {
  std::vector<std::int64_t> ids;
  for (const auto& [id, j] : jobs_) ids.push_back(id);
  return ids;
}

void FakeSlurmClient::AddNode(slurm::NodeInfo node) {
  std::string name = node.name;
  nodes_[name] = std::move(node);
}

void FakeSlurmClient::AddPartition(slurm::PartitionInfo partition) {
  std::string name = partition.name;
  partitions_[name] = std::move(partition);
}

const slurm::NodeInfo* FakeSlurmClient::Node(const std::string& name) const {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

bool FakeSlurmClient::SetNodeState(const std::string& name, std::vector<std::string> state) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return false;
  it->second.state = std::move(state);
  return true;
}

void FakeSlurmClient::FailNext(const std::string& call, Error error, int times, bool apply) {
  for (int i = 0; i < times; ++i) failures_[call].push_back({error, apply});
}

int FakeSlurmClient::calls(const std::string& name) const {
  auto it = calls_.find(name);
  return it == calls_.end() ? 0 : it->second;
}

std::optional<FakeSlurmClient::Failure> FakeSlurmClient::Enter(const std::string& call) {
  ++calls_[call];
  ++stats_.requests;
  auto it = failures_.find(call);
  if (it == failures_.end() || it->second.empty()) return std::nullopt;
  Failure f = std::move(it->second.front());
  it->second.pop_front();
  return f;
}

slurm::Task<slurm::ApiVersion> FakeSlurmClient::Version() {
  if (auto f = Enter("Version")) co_return tl::unexpected(f->error);
  co_return slurm::kNewestApiVersion;
}

slurm::Task<std::vector<slurm::PingResult>> FakeSlurmClient::Ping() {
  if (auto f = Enter("Ping")) co_return tl::unexpected(f->error);
  co_return std::vector<slurm::PingResult>{
      {.hostname = "fake", .pinged = "UP", .responding = true, .mode = "primary"}};
}

namespace {

// The PENDING job slurmctld makes of `job`, with the described fields it keeps.
slurm::JobInfo Submitted(const slurm::JobDescription& job, std::int64_t id) {
  slurm::JobInfo info;
  info.job_id = id;
  info.name = job.name;
  info.job_state = {"PENDING"};
  info.state_reason = "None";
  info.partition = job.partition;
  info.account = job.account;
  info.qos = job.qos;
  info.admin_comment = job.admin_comment;
  info.comment = job.comment;
  info.flags = job.flags;
  info.tres_per_node = job.tres_per_node;
  return info;
}

}  // namespace

slurm::Task<slurm::JobSubmitResult> FakeSlurmClient::SubmitJob(slurm::JobDescription job) {
  if (submit_delay.count() > 0) {
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, submit_delay);
    co_await timer.async_wait(boost::asio::use_awaitable);
  }
  std::optional<Failure> f = Enter("SubmitJob");
  if (f && !f->apply) co_return tl::unexpected(f->error);
  submitted_.push_back(job);
  const std::int64_t id = AddJob(Submitted(job, next_job_id));
  if (f) co_return tl::unexpected(f->error);
  co_return slurm::JobSubmitResult{.job_id = id};
}

slurm::Task<slurm::JobSubmitResult> FakeSlurmClient::SubmitHetJob(
    std::vector<slurm::JobDescription> components) {
  std::optional<Failure> f = Enter("SubmitJob");
  if (f && !f->apply) co_return tl::unexpected(f->error);
  het_submitted_.push_back(components);
  const std::int64_t first = next_job_id;
  for (std::size_t k = 0; k < components.size(); ++k) {
    slurm::JobInfo info = Submitted(components[k], next_job_id);
    info.het_job_id = first;
    info.het_job_offset = static_cast<std::int64_t>(k);
    AddJob(std::move(info));
  }
  if (f) co_return tl::unexpected(f->error);
  co_return slurm::JobSubmitResult{.job_id = first};
}

slurm::Task<std::vector<slurm::JobInfo>> FakeSlurmClient::GetJobRecords(std::int64_t job_id) {
  if (auto f = Enter("GetJob")) co_return tl::unexpected(f->error);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) co_return tl::unexpected(NotFound("job " + std::to_string(job_id)));
  std::vector<slurm::JobInfo> out{it->second};
  if (it->second.het_job_id == job_id) {
    for (auto c = std::next(it); c != jobs_.end() && c->second.het_job_id == job_id; ++c) {
      out.push_back(c->second);
    }
  }
  co_return out;
}

slurm::Task<slurm::JobInfo> FakeSlurmClient::GetJob(std::int64_t job_id) {
  if (auto f = Enter("GetJob")) co_return tl::unexpected(f->error);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) co_return tl::unexpected(NotFound("job " + std::to_string(job_id)));
  co_return it->second;
}

slurm::Task<std::vector<slurm::JobInfo>> FakeSlurmClient::ListJobs() {
  if (auto f = Enter("ListJobs")) co_return tl::unexpected(f->error);
  std::vector<slurm::JobInfo> out;
  for (const auto& [id, j] : jobs_) out.push_back(j);
  co_return out;
}

slurm::Task<slurm::JobList> FakeSlurmClient::ListJobsSince(std::int64_t update_time) {
  if (auto f = Enter("ListJobsSince")) co_return tl::unexpected(f->error);
  slurm::JobList out;
  if (update_time > 0 && update_time >= changed_) {
    out.unchanged = true;
    co_return out;
  }
  for (const auto& [id, j] : jobs_) out.jobs.push_back(j);
  out.last_update = changed_;
  co_return out;
}

slurm::Task<std::vector<slurm::JobStateEntry>> FakeSlurmClient::JobStates(
    std::vector<std::int64_t> job_ids) {
  state_queries_.push_back(job_ids);
  if (auto f = Enter("JobStates")) co_return tl::unexpected(f->error);
  stats_.requests += slurm::JobStatePaths(job_ids).size() - 1;  // the real client's batching
  std::vector<slurm::JobStateEntry> out;
  for (const auto& [id, j] : jobs_) {
    if (job_ids.empty() || std::ranges::find(job_ids, id) != job_ids.end()) {
      out.push_back({.job_id = id, .state = j.job_state});
    }
  }
  co_return out;
}

slurm::Task<bool> FakeSlurmClient::UpdateJob(std::int64_t job_id, slurm::JobDescription changes) {
  updates_.emplace_back(job_id, changes);
  if (auto f = Enter("UpdateJob")) co_return tl::unexpected(f->error);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) co_return tl::unexpected(NotFound("job " + std::to_string(job_id)));
  slurm::JobInfo& j = it->second;
  // As slurmctld for the SlurmUser: a job that has started takes a new admin_comment (the
  // scheduler's retag of a refilled job), nothing else.
  slurm::JobDescription tag_only;
  tag_only.admin_comment = changes.admin_comment;
  const bool only_tag = !changes.admin_comment.empty() && slurm::EncodeJobDescription(changes) ==
                                                              slurm::EncodeJobDescription(tag_only);
  if (j.BaseState() == "RUNNING" && only_tag) {
    j.admin_comment = changes.admin_comment;
    ++changed_;
    co_return true;
  }
  if (j.BaseState() != "PENDING") {
    Error e{ErrorCode::kFailedPrecondition, "job is no longer pending", 200};
    e.details.push_back({.number = 2073, .error = "Job is no longer pending execution"});
    co_return tl::unexpected(std::move(e));
  }
  if (!changes.name.empty()) j.name = changes.name;
  if (!changes.partition.empty()) j.partition = changes.partition;
  if (!changes.admin_comment.empty()) j.admin_comment = changes.admin_comment;
  if (!changes.comment.empty()) j.comment = changes.comment;
  if (!changes.nodes.empty()) j.nodes = changes.nodes;
  // As an operator's update does (test audit T-4): the job shows what was sent.
  if (changes.time_limit.set) j.time_limit = changes.time_limit;
  if (changes.priority.set) j.priority = changes.priority;
  ++changed_;
  co_return true;
}

slurm::Task<bool> FakeSlurmClient::CancelJob(std::int64_t job_id, slurm::CancelOptions options) {
  (void)options;
  std::optional<Failure> f = Enter("CancelJob");
  cancels_.push_back(job_id);
  if (f && !f->apply) co_return tl::unexpected(f->error);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) co_return tl::unexpected(NotFound("job " + std::to_string(job_id)));
  if (!Ended(it->second.BaseState())) it->second.job_state = {"CANCELLED"};
  if (it->second.het_job_id == job_id) {  // a heterogeneous job: every component
    for (auto c = std::next(it); c != jobs_.end() && c->second.het_job_id == job_id; ++c) {
      if (!Ended(c->second.BaseState())) c->second.job_state = {"CANCELLED"};
    }
  }
  ++changed_;
  if (f) co_return tl::unexpected(f->error);
  co_return true;
}

slurm::Task<std::vector<slurm::NodeAllocation>> FakeSlurmClient::JobResources(std::int64_t job_id) {
  if (auto f = Enter("JobResources")) co_return tl::unexpected(f->error);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) co_return tl::unexpected(NotFound("job " + std::to_string(job_id)));
  // As slurmctld: only an allocated job has a layout (422, Slurm's 2085, otherwise).
  const slurm::JobInfo& job = it->second;
  const std::string state(job.BaseState());
  if (job.nodes.empty() || (state != "RUNNING" && state != "SUSPENDED" && state != "COMPLETING")) {
    Error e{ErrorCode::kFailedPrecondition,
            "resources of job " + std::to_string(job_id) + ": Job is not running", 422};
    e.details.push_back({.number = 2085, .error = "Job is not running"});
    co_return tl::unexpected(std::move(e));
  }
  Result<std::vector<std::string>> names = bridge::ExpandHostlist(job.nodes);
  if (!names) co_return tl::unexpected(names.error());
  std::vector<slurm::NodeAllocation> out;
  for (std::size_t i = 0; i < names->size(); ++i) {
    slurm::NodeAllocation& a = out.emplace_back();
    a.node = (*names)[i];
    // gres_detail's "gpu:h100:2(IDX:0-1)" entries, as the layout lists them.
    if (i >= job.gres_detail.size()) continue;
    std::string_view d = job.gres_detail[i];
    while (!d.empty()) {
      std::size_t end = d.find("),");
      std::string_view one = d.substr(0, end == std::string_view::npos ? d.size() : end + 1);
      d.remove_prefix(end == std::string_view::npos ? d.size() : end + 2);
      const std::size_t at = one.find("(IDX:");
      if (at == std::string_view::npos) continue;
      std::string_view head = one.substr(0, at);
      slurm::GresAllocation g;
      g.index = std::string(one.substr(at + 5, one.size() - at - 6));
      const std::size_t c1 = head.find(':');
      const std::size_t c2 = head.rfind(':');
      g.name = std::string(head.substr(0, c1));
      if (c2 != c1) g.type = std::string(head.substr(c1 + 1, c2 - c1 - 1));
      const std::string_view count = head.substr(c2 + 1);
      std::from_chars(count.data(), count.data() + count.size(), g.count);
      a.gres.push_back(std::move(g));
    }
  }
  co_return out;
}

slurm::Task<std::vector<slurm::NodeInfo>> FakeSlurmClient::ListNodes() {
  if (auto f = Enter("ListNodes")) co_return tl::unexpected(f->error);
  std::vector<slurm::NodeInfo> out;
  for (const auto& [name, n] : nodes_) out.push_back(n);
  co_return out;
}

slurm::Task<slurm::NodeInfo> FakeSlurmClient::GetNode(std::string name) {
  if (auto f = Enter("GetNode")) co_return tl::unexpected(f->error);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    co_return tl::unexpected(Error{ErrorCode::kNotFound, "node " + name + " not found", 200});
  }
  co_return it->second;
}

slurm::Task<bool> FakeSlurmClient::UpdateNode(std::string name, slurm::NodeUpdate update) {
  node_updates_.emplace_back(name, update);
  if (auto f = Enter("UpdateNode")) co_return tl::unexpected(f->error);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    co_return tl::unexpected(Error{ErrorCode::kNotFound, "node " + name + " not found", 200});
  }
  std::vector<std::string>& state = it->second.state;
  if (update.state == std::vector<std::string>{"DRAIN"}) {
    if (std::find(state.begin(), state.end(), "DRAIN") == state.end()) state.push_back("DRAIN");
  } else if (update.state == std::vector<std::string>{"UNDRAIN"}) {
    std::erase(state, std::string("DRAIN"));
    it->second.reason.clear();
  } else if (!update.state.empty()) {
    state = update.state;
  }
  if (!update.reason.empty()) it->second.reason = update.reason;
  if (update.features) it->second.features = *update.features;
  if (update.features_act) it->second.active_features = *update.features_act;
  if (!update.comment.empty()) it->second.comment = update.comment;
  if (update.topology_str) it->second.topology = *update.topology_str;
  co_return true;
}

slurm::Task<bool> FakeSlurmClient::CreateNode(std::string node_conf) {
  created_.push_back(node_conf);
  if (auto f = Enter("CreateNode")) co_return tl::unexpected(f->error);
  // "NodeName=k1 Key=Value ...": the keys the bridge writes; GresConf="..." is skipped.
  slurm::NodeInfo n;
  n.state = {"IDLE"};
  std::string_view rest = node_conf;
  while (!rest.empty()) {
    const std::size_t space = rest.find(' ');
    std::string_view word = rest.substr(0, space);
    rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    const std::size_t eq = word.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = word.substr(0, eq);
    const std::string value(word.substr(eq + 1));
    if (key == "NodeName") n.name = value;
    if (key == "NodeAddr") n.address = value;
    if (key == "CPUs") n.cpus = std::stoll(value);
    if (key == "RealMemory") n.real_memory = std::stoll(value);
    if (key == "Gres") n.gres = value;
    if (key == "Topology") n.topology = value;
    if (key == "State" && value == "External") n.state = {"IDLE", "EXTERNAL"};
    if (key == "Feature") {
      for (std::size_t from = 0; from <= value.size();) {
        const std::size_t comma = std::min(value.find(',', from), value.size());
        n.features.push_back(value.substr(from, comma - from));
        from = comma + 1;
      }
      n.active_features = n.features;
    }
  }
  if (nodes_.contains(n.name)) {
    co_return tl::unexpected(Error{ErrorCode::kInvalidArgument,
                                   "create node: Node already exists in the node table", 422});
  }
  AddNode(std::move(n));
  co_return true;
}

slurm::Task<bool> FakeSlurmClient::DeleteNode(std::string name) {
  if (auto f = Enter("DeleteNode")) co_return tl::unexpected(f->error);
  if (nodes_.erase(name) == 0) {
    co_return tl::unexpected(Error{ErrorCode::kNotFound, "node " + name + " not found", 200});
  }
  co_return true;
}

slurm::Task<std::vector<slurm::PartitionInfo>> FakeSlurmClient::ListPartitions() {
  if (auto f = Enter("ListPartitions")) co_return tl::unexpected(f->error);
  std::vector<slurm::PartitionInfo> out;
  for (const auto& [name, p] : partitions_) out.push_back(p);
  co_return out;
}

slurm::Task<slurm::PartitionInfo> FakeSlurmClient::GetPartition(std::string name) {
  if (auto f = Enter("GetPartition")) co_return tl::unexpected(f->error);
  if (auto it = partitions_.find(name); it != partitions_.end()) co_return it->second;
  co_return tl::unexpected(Error{ErrorCode::kNotFound, "partition " + name + " not found", 200});
}

slurm::Task<std::vector<slurm::ReservationInfo>> FakeSlurmClient::ListReservations() {
  if (auto f = Enter("ListReservations")) co_return tl::unexpected(f->error);
  co_return std::vector<slurm::ReservationInfo>{};
}

}  // namespace sb::testing
