// SPDX-License-Identifier: Apache-2.0
//
// `jobs` and `nodes`: the bridge's Slurm jobs with their pods, and each node as Kubernetes and
// Slurm see it. Read-only, as explain. `jobs` reads the jobs its pods name (as `check`), unless
// --all-jobs asks for a scan of Slurm's whole list.
#include <algorithm>
#include <map>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

#include "bridge/explain.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "bridge/translate.h"
#include "explain/explain.h"
#include "explain/session.h"
#include "wiring/bridge_jobs.h"

namespace sb::explain {
namespace {

using boost::asio::awaitable;
namespace json = boost::json;

// Prints rows as columns separated by two spaces, widths from the widest cell.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += i + 1 == row.size() ? row[i] : fmt::format("{:<{}}  ", row[i], width[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

int Fail(const ToolOptions& o, std::string_view cmd, const std::string& what, std::ostream& err) {
  err << o.command << " " << cmd << ": " << what << "\n";
  return 1;
}

// What `jobs` reads: the pods of the bridge's scheduler, and the Slurm jobs they name (with
// --all-jobs: every job tagged for this bridge), by id.
struct JobsAndPods {
  Result<std::vector<slurm::JobInfo>> jobs = MakeError(ErrorCode::kInternal, "not read");
  Result<kube::List<kube::Pod>> pods = MakeError(ErrorCode::kInternal, "not read");
};

// Drops the fields `jobs` does not show, so that the records of many jobs take little memory.
void KeepListedFields(slurm::JobInfo& j) {
  slurm::JobInfo kept;
  kept.job_id = j.job_id;
  kept.job_state = std::move(j.job_state);
  kept.state_reason = std::move(j.state_reason);
  kept.partition = std::move(j.partition);
  kept.admin_comment = std::move(j.admin_comment);
  kept.start_time = j.start_time;
  j = std::move(kept);
}

// The live jobs the pods name: their states (one /jobs/state/ request per about 2,000 ids), then
// the records of those not ended (wiring::ReadJobRecords: 8 at a time). Never the whole list.
awaitable<Result<std::vector<slurm::JobInfo>>> ReadNamedJobs(slurm::Client& slurm,
                                                             const std::vector<kube::Pod>& pods) {
  std::vector<std::int64_t> ids;
  for (const kube::Pod& p : pods) {
    for (std::int64_t id : wiring::NamedJobIds(p)) ids.push_back(id);
  }
  auto states = co_await wiring::ReadJobStates(slurm, std::move(ids));
  if (!states) co_return tl::unexpected(states.error());
  std::vector<std::int64_t> live;
  for (const auto& [id, state] : *states) {
    if (state.empty() || !bridge::JobEnded(state.front())) live.push_back(id);
  }
  wiring::RecordReadOptions slim;
  slim.trim = KeepListedFields;
  co_return co_await wiring::ReadJobRecords(slurm, std::move(live), std::move(slim));
}

// `s` and its clients outlive the coroutine (RunOnLoop).
awaitable<JobsAndPods> ReadJobsAndPods(Session& s, bool all_namespaces, bool all_jobs) {
  JobsAndPods r;
  kube::ResourceRef ref = kube::PodsRef(all_namespaces ? "" : s.namespace_);
  kube::ListOptions by_scheduler{.field_selector = "spec.schedulerName=" + s.config.scheduler_name};
  r.pods = co_await kube::ListAllAs<kube::Pod>(*s.kube, std::move(ref), std::move(by_scheduler));
  if (!r.pods) co_return r;
  if (all_jobs) {
    // One scan of the whole list, keeping the jobs tagged for this bridge (also those whose pods
    // are all gone, which no pod names).
    slurm::JobFilter ours = [cluster = s.config.cluster_name,
                             scheduler = s.config.scheduler_name](const slurm::JobInfo& j) {
      std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
      return tag && tag->BelongsTo(cluster, scheduler);
    };
    Result<slurm::JobList> list = co_await s.slurm->ScanJobs(0, std::move(ours));
    if (!list) {
      r.jobs = tl::unexpected(list.error());
    } else {
      r.jobs = std::move(list->jobs);
    }
  } else {
    r.jobs = co_await ReadNamedJobs(*s.slurm, r.pods->items);
  }
  if (r.jobs) {
    std::ranges::stable_sort(*r.jobs, {}, &slurm::JobInfo::job_id);
    // std::unique, not std::ranges::unique: the subrange it returns does not compile with
    // clang 14 on libstdc++ 12 (the sanitized build).
    auto same = [](const slurm::JobInfo& a, const slurm::JobInfo& b) {
      return a.job_id == b.job_id;
    };
    r.jobs->erase(std::unique(r.jobs->begin(), r.jobs->end(), same), r.jobs->end());
  }
  co_return r;
}

// What `nodes` reads: the Kubernetes Nodes, and Slurm's nodes when Slurm can be reached.
struct BothNodes {
  Result<kube::List<kube::Node>> nodes = MakeError(ErrorCode::kInternal, "not read");
  Result<std::vector<slurm::NodeInfo>> slurm_nodes = MakeError(ErrorCode::kInternal, "not read");
};

// `s` and its clients outlive the coroutine (RunOnLoop).
awaitable<BothNodes> ReadBothNodes(Session& s) {
  BothNodes r;
  kube::ResourceRef ref = kube::NodesRef();
  kube::ListOptions every_node;
  r.nodes = co_await kube::ListAllAs<kube::Node>(*s.kube, std::move(ref), std::move(every_node));
  if (s.slurm) r.slurm_nodes = co_await s.slurm->ListNodes();
  co_return r;
}

}  // namespace

int RunJobs(const ToolOptions& options, std::ostream& out, std::ostream& err) {
  Result<std::unique_ptr<Session>> session = OpenSession(options);
  if (!session) return Fail(options, "jobs", session.error().message, err);
  return ShowJobs(**session, options, out, err);
}

int ShowJobs(Session& s, const ToolOptions& options, std::ostream& out, std::ostream& err) {
  if (!s.slurm) return Fail(options, "jobs", s.slurm_missing, err);
  Result<JobsAndPods> ran =
      RunOnLoop(s, ReadJobsAndPods(s, options.all_namespaces, options.all_jobs));
  if (!ran) return Fail(options, "jobs", ran.error().message, err);
  const Result<std::vector<slurm::JobInfo>>& jobs = ran->jobs;
  const Result<kube::List<kube::Pod>>& pods = ran->pods;
  if (!pods) return Fail(options, "jobs", "Kubernetes: " + pods.error().ToString(), err);
  if (!jobs) return Fail(options, "jobs", "Slurm: " + jobs.error().ToString(), err);
  std::map<std::string, const kube::Pod*> by_name;
  for (const kube::Pod& p : pods->items)
    by_name[p.metadata.namespace_ + "/" + p.metadata.name] = &p;
  const std::int64_t now = NowUnix();
  std::vector<std::vector<std::string>> rows = {
      {"JOBID", "STATE", "REASON", "PARTITION", "GROUP", "PODS", "START"}};
  json::array arr;
  for (const slurm::JobInfo& j : *jobs) {
    std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
    if (!tag || !tag->BelongsTo(s.config.cluster_name, s.config.scheduler_name)) continue;
    if (bridge::JobEnded(j.BaseState())) continue;
    if (!options.all_namespaces) {
      const bool here = std::ranges::any_of(
          tag->pods, [&](const std::string& p) { return p.starts_with(s.namespace_ + "/"); });
      if (!here) continue;
    }
    std::vector<std::string> pod_words;
    json::array pod_arr;
    for (const std::string& p : tag->pods) {
      auto it = by_name.find(p);
      std::string where = "gone";
      if (it != by_name.end()) {
        where = it->second->spec.node_name.empty() ? it->second->status.phase
                                                   : it->second->spec.node_name;
      }
      pod_words.push_back(fmt::format("{}({})", p.substr(p.find('/') + 1), where));
      pod_arr.push_back(json::object{{"pod", p}, {"where", where}});
    }
    const std::string state(j.BaseState());
    std::string start = "-";
    if (auto t = j.start_time.Value(); t && *t > 0) {
      start = bridge::FormatUnixTime(*t) + " (" + bridge::RelativeTime(*t, now) + ")";
    }
    const std::string reason = j.state_reason == "None" ? "" : j.state_reason;
    rows.push_back({std::to_string(j.job_id), state, reason.empty() ? "-" : reason,
                    j.partition.empty() ? "-" : j.partition, tag->group,
                    fmt::format("{}", fmt::join(pod_words, ",")), start});
    json::object o{
        {"id", j.job_id},
        {"state", state},
        {"reason", reason},
        {"partition", j.partition},
        {"group", tag->group},
        {"pods", std::move(pod_arr)},
        {"startTime", start == "-" ? json::value(nullptr)
                                   : json::value(bridge::FormatUnixTime(*j.start_time.Value()))}};
    arr.push_back(std::move(o));
  }
  if (options.output == "json") {
    out << json::serialize(json::object{{"jobs", std::move(arr)}}) << "\n";
  } else if (rows.size() == 1) {
    out << "no live Slurm jobs of this bridge"
        << (options.all_namespaces ? "" : " in namespace " + s.namespace_) << "\n";
  } else {
    PrintTable(out, rows);
  }
  return 0;
}

int RunNodes(const ToolOptions& options, std::ostream& out, std::ostream& err) {
  Result<std::unique_ptr<Session>> session = OpenSession(options);
  if (!session) return Fail(options, "nodes", session.error().message, err);
  Session& s = **session;
  Result<BothNodes> ran = RunOnLoop(s, ReadBothNodes(s));
  if (!ran) return Fail(options, "nodes", ran.error().message, err);
  const Result<kube::List<kube::Node>>& nodes = ran->nodes;
  const Result<std::vector<slurm::NodeInfo>>& slurm_nodes = ran->slurm_nodes;
  if (!nodes) return Fail(options, "nodes", "Kubernetes: " + nodes.error().ToString(), err);
  std::string slurm_error;
  if (!s.slurm) {
    slurm_error = s.slurm_missing;
  } else if (!slurm_nodes) {
    slurm_error = slurm_nodes.error().ToString();
  }
  std::map<std::string, const slurm::NodeInfo*> by_name;
  if (slurm_nodes) {
    for (const slurm::NodeInfo& n : *slurm_nodes) by_name[n.name] = &n;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NODE", "KUBERNETES", "SLURM-NODE", "SLURM", "CPUS(A/T)", "GRES", "REASON"}};
  json::array arr;
  std::set<std::string> seen;
  auto slurm_cells = [&](const slurm::NodeInfo* n, std::vector<std::string>& row, json::object& o) {
    if (n == nullptr) {
      row.insert(row.end(), {slurm_error.empty() ? "(none)" : "?", "-", "-", "-"});
      o["slurm"] = nullptr;
      return;
    }
    const std::string state = fmt::format("{}", fmt::join(n->state, "+"));
    row.insert(row.end(), {state, fmt::format("{}/{}", n->alloc_cpus, n->cpus),
                           n->gres.empty() ? "-" : n->gres, n->reason.empty() ? "-" : n->reason});
    o["slurm"] = json::object{{"state", state},
                              {"reason", n->reason},
                              {"cpus", n->cpus},
                              {"allocCpus", n->alloc_cpus},
                              {"gres", n->gres},
                              {"gresUsed", n->gres_used},
                              {"partitions", json::value_from(n->partitions)}};
  };
  std::vector<const kube::Node*> sorted;
  for (const kube::Node& n : nodes->items) sorted.push_back(&n);
  std::ranges::sort(sorted, {}, [](const kube::Node* n) { return n->metadata.name; });
  for (const kube::Node* n : sorted) {
    const std::string slurm_name = bridge::SlurmNodeName(*n);
    std::vector<std::string> k8s = {bridge::NodeIsReady(*n) ? "Ready" : "NotReady"};
    if (n->unschedulable) k8s.push_back("SchedulingDisabled");
    for (const kube::Taint& t : n->taints) {
      if (t.key == bridge::kManagedNodeTaint) k8s.push_back("managed");
    }
    auto it = by_name.find(slurm_name);
    const slurm::NodeInfo* sn = it == by_name.end() ? nullptr : it->second;
    if (sn != nullptr) seen.insert(slurm_name);
    std::vector<std::string> row = {n->metadata.name, fmt::format("{}", fmt::join(k8s, ",")),
                                    sn != nullptr ? slurm_name : "-"};
    json::object o{{"node", n->metadata.name},
                   {"kubernetes", json::object{{"ready", bridge::NodeIsReady(*n)},
                                               {"unschedulable", n->unschedulable}}},
                   {"slurmNode", sn != nullptr ? json::value(slurm_name) : json::value(nullptr)}};
    slurm_cells(sn, row, o);
    rows.push_back(std::move(row));
    arr.push_back(std::move(o));
  }
  // Slurm nodes without a Kubernetes node (external nodes, or nodes not joined).
  for (const auto& [name, sn] : by_name) {
    if (seen.contains(name)) continue;
    std::vector<std::string> row = {"-", "(none)", name};
    json::object o{{"node", nullptr}, {"kubernetes", nullptr}, {"slurmNode", name}};
    slurm_cells(sn, row, o);
    rows.push_back(std::move(row));
    arr.push_back(std::move(o));
  }
  if (options.output == "json") {
    out << json::serialize(json::object{{"nodes", std::move(arr)}, {"slurmError", slurm_error}})
        << "\n";
  } else {
    PrintTable(out, rows);
    if (!slurm_error.empty()) out << "Slurm not read: " << slurm_error << "\n";
  }
  return 0;
}

}  // namespace sb::explain
