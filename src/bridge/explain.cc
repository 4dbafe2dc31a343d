// SPDX-License-Identifier: Apache-2.0
#include "bridge/explain.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

#include "bridge/names.h"
#include "bridge/pods.h"
#include "common/time_format.h"

namespace sb::bridge {
namespace {

std::string PodName(const kube::Pod& pod) {
  return pod.metadata.namespace_ + "/" + pod.metadata.name;
}

// A limit of a QOS or an association: "QOSMaxJobsPerUserLimit", "AssocGrpCpuLimit".
std::string LimitWords(std::string_view reason) {
  std::string_view owner;
  std::string_view rest;
  if (reason.starts_with("QOS")) {
    owner = "its QOS";
    rest = reason.substr(3);
  } else if (reason.starts_with("Assoc")) {
    owner = "its account (association)";
    rest = reason.substr(5);
  } else {
    return "";
  }
  if (!rest.ends_with("Limit") && !rest.ends_with("RunMinutes") &&
      !rest.ends_with("MinutesLimit")) {
    return "";
  }
  std::string_view scope =
      rest.starts_with("Grp") ? "a group limit" : "a per-job or per-user limit";
  return fmt::format("{} of {} is reached ({}); it starts when jobs under that limit end", scope,
                     owner, reason);
}

}  // namespace

std::string SlurmReasonWords(std::string_view reason) {
  static const std::map<std::string, std::string, std::less<>> kWords = {
      {"None", "not looked at by Slurm's scheduler yet"},
      {"Priority", "jobs of higher priority are ahead of it for these nodes or this partition"},
      {"Resources", "it is next, and waits for nodes, CPUs, memory or GPUs to become free"},
      {"Dependency", "it waits for a job it depends on"},
      {"DependencyNeverSatisfied", "a job it depends on can never satisfy the dependency"},
      {"BeginTime", "its begin time has not come yet"},
      {"JobHeldAdmin", "an administrator holds it (scontrol release)"},
      {"JobHeldUser", "its user holds it (scontrol release)"},
      {"ReqNodeNotAvail", "a node it needs is down, drained or reserved"},
      {"NodeDown", "a node it needs is down"},
      {"PartitionDown", "its partition is down"},
      {"PartitionInactive", "its partition is inactive"},
      {"PartitionNodeLimit", "it asks for more nodes than its partition allows"},
      {"PartitionTimeLimit", "its time limit exceeds its partition's"},
      {"PartitionConfig", "it asks for more than its partition allows"},
      {"Reservation", "it waits for its reservation to start"},
      {"Licenses", "it waits for licenses"},
      {"BadConstraints", "no node can satisfy its constraints"},
      {"InvalidAccount", "its account is not valid"},
      {"InvalidQOS", "its QOS is not valid"},
      {"Cleaning", "it was requeued and its last run is still being cleaned up"},
      {"Prolog", "its prolog is running"},
      {"BurstBufferResources", "it waits for burst buffer space"},
      {"FrontEndDown", "no front end node is available"},
      {"JobLaunchFailure", "its launch failed"},
      {"launch failed requeued held", "its launch failed; it was requeued and held"},
  };
  if (auto it = kWords.find(reason); it != kWords.end()) return it->second;
  if (std::string limit = LimitWords(reason); !limit.empty()) return limit;
  return std::string(reason);
}

std::string FormatUnixTime(std::int64_t unix_seconds) {
  return FormatTime(std::chrono::system_clock::time_point(std::chrono::seconds(unix_seconds)));
}

std::string RelativeTime(std::int64_t when, std::int64_t now) {
  const std::int64_t d = when - now;
  const std::int64_t a = std::llabs(d);
  if (a < 30) return "now";
  std::string span;
  const std::int64_t minutes = (a + 30) / 60;
  if (minutes < 60) {
    span = fmt::format("{}m", minutes);
  } else if (minutes < 48 * 60) {
    span = minutes % 60 == 0 ? fmt::format("{}h", minutes / 60)
                             : fmt::format("{}h{}m", minutes / 60, minutes % 60);
  } else {
    span = fmt::format("{}d", minutes / (24 * 60));
  }
  return d > 0 ? "in " + span : span + " ago";
}

Explanation Explain(const ExplainInput& in) {
  Explanation e;
  const kube::Pod& pod = *in.pod;
  e.pod = PodName(pod);
  e.phase = pod.status.phase;
  e.node = pod.spec.node_name;
  e.gates = pod.spec.scheduling_gates;
  if (const kube::Condition* c = kube::FindCondition(pod.status.conditions, "PodScheduled")) {
    e.scheduled_status = c->status;
    e.scheduled_message = c->message;
  }
  e.owner_unreadable = in.owner_unreadable;
  e.group_error = in.group_error;
  std::vector<const kube::Pod*> live;
  for (const kube::Pod* m : in.members) {
    e.members.push_back({.name = PodName(*m),
                         .phase = m->status.phase,
                         .node = m->spec.node_name,
                         .gated = !m->spec.scheduling_gates.empty()});
    if (!PodFinished(*m) && m->metadata.deletion_timestamp.empty()) live.push_back(m);
  }
  std::ranges::sort(e.members, {}, &Explanation::Member::name);
  if (in.group) {
    e.group_key = in.group->key;
    e.group_kind = in.group->kind;
    e.group_size = in.group->size;
  }
  e.job_error = in.job_error;
  if (in.job) {
    const slurm::JobInfo& j = *in.job;
    Explanation::Job job{.id = j.job_id,
                         .source = in.job_source,
                         .state = std::string(j.BaseState()),
                         .reason = j.state_reason == "None" ? std::string() : j.state_reason,
                         .partition = j.partition,
                         .account = j.account,
                         .qos = j.qos,
                         .user = j.user_name,
                         .nodes = j.nodes,
                         .priority = j.priority.Value(),
                         .fairshare = in.fairshare};
    if (!job.reason.empty()) job.reason_words = SlurmReasonWords(job.reason);
    if (auto t = j.submit_time.Value(); t && *t > 0) job.submit_time = t;
    if (auto t = j.start_time.Value(); t && *t > 0) {
      if (job.state == "PENDING") {
        job.expected_start = t;
      } else {
        job.start_time = t;
      }
    }
    if (auto t = j.time_limit.Value()) job.time_limit_minutes = t;
    e.job = std::move(job);
  }
  // The Kubernetes-side exclusions of the group's pods (those of the job's description).
  if (!in.slurm_nodes.empty()) {
    e.slurm_nodes = in.slurm_nodes.size();
    std::vector<const kube::Pod*> pods = live.empty() ? std::vector<const kube::Pod*>{&pod} : live;
    e.excluded = ExcludedNodes(pods, in.slurm_nodes, in.k8s_nodes_by_slurm_name, &in.used_by_others,
                               &in.ports_in_use);
  }

  // What it waits for.
  std::vector<std::string>& w = e.waiting_for;
  if (PodFinished(pod)) {
    w.push_back(fmt::format("nothing: the pod has ended ({})", pod.status.phase));
    return e;
  }
  if (!pod.spec.node_name.empty()) {
    w.push_back(e.job ? fmt::format("nothing: bound to node {} by Slurm job {}", pod.spec.node_name,
                                    e.job->id)
                      : fmt::format("nothing: bound to node {}", pod.spec.node_name));
    return e;
  }
  if (!pod.metadata.deletion_timestamp.empty()) {
    w.push_back("nothing: the pod is being deleted");
    return e;
  }
  if (!e.gates.empty()) {
    w.push_back(
        fmt::format("its scheduling gates to be removed ({}): no scheduler looks at a gated pod",
                    fmt::join(e.gates, ", ")));
  }
  if (!in.group) {
    w.push_back(
        fmt::format("a group it can be scheduled in: {}",
                    e.group_error.empty() ? "the group could not be resolved" : e.group_error));
  } else if (static_cast<int>(live.size()) < in.group->size) {
    const int missing = in.group->size - static_cast<int>(live.size());
    w.push_back(fmt::format(
        "the rest of its gang: {} of {} pods of {} {} exist, {} more before a Slurm job is "
        "submitted",
        live.size(), in.group->size, in.group->kind, in.group->name, missing));
  }
  if (e.job) {
    const Explanation::Job& j = *e.job;
    if (j.state == "PENDING") {
      std::string line = fmt::format("Slurm to start job {}", j.id);
      if (!j.reason.empty()) line += fmt::format(" ({}: {})", j.reason, j.reason_words);
      if (j.expected_start) {
        line +=
            fmt::format("; Slurm expects it to start at {} ({})", FormatUnixTime(*j.expected_start),
                        RelativeTime(*j.expected_start, in.now));
      }
      w.push_back(std::move(line));
    } else if (j.state == "RUNNING" || j.state == "CONFIGURING") {
      w.push_back(fmt::format("the scheduler to bind it: Slurm job {} runs on {}", j.id,
                              j.nodes.empty() ? "(nodes not reported)" : j.nodes));
    } else {
      w.push_back(fmt::format("a new Slurm job: job {} is {}{}", j.id, j.state,
                              j.reason.empty() ? "" : " (" + j.reason + ")"));
    }
  }
  // The scheduler's own words, unless they only repeat Slurm's state of the job shown.
  const bool told = e.scheduled_status == "False" && !e.scheduled_message.empty() &&
                    !(e.job && e.scheduled_message.starts_with("waiting for Slurm job"));
  if (!e.job && in.group && static_cast<int>(live.size()) >= in.group->size && e.gates.empty() &&
      !told) {
    w.push_back(e.job_error.empty()
                    ? std::string("the scheduler to submit a Slurm job (none is tagged for the "
                                  "group yet)")
                    : "Slurm, which could not be read: " + e.job_error);
  }
  if (told) w.push_back("what the scheduler last said: " + e.scheduled_message);
  if (e.slurm_nodes > 0 && e.excluded.size() == e.slurm_nodes) {
    w.push_back(
        "a node it can run on: the bridge keeps the job off every Slurm node (see Excluded)");
  }
  return e;
}

std::string RenderText(const Explanation& e, std::int64_t now) {
  std::string out;
  auto line = [&](std::string_view label, const std::string& text) {
    out += fmt::format("{:<10} {}\n", label, text);
  };
  std::string pod = e.pod + "  " + (e.phase.empty() ? "Pending" : e.phase);
  if (!e.node.empty()) pod += " on " + e.node;
  line("Pod", pod);
  if (!e.scheduled_status.empty()) {
    line("", fmt::format("PodScheduled={}{}", e.scheduled_status,
                         e.scheduled_message.empty() ? "" : ": " + e.scheduled_message));
  }
  if (!e.gates.empty()) {
    line("", fmt::format("scheduling gates: {}", fmt::join(e.gates, ", ")));
  }
  if (!e.group_key.empty()) {
    std::size_t live = 0;
    for (const Explanation::Member& m : e.members) {
      if (m.phase != "Succeeded" && m.phase != "Failed") ++live;
    }
    line("Group", fmt::format("{} ({}), {} of {} pod{}", e.group_key, e.group_kind, live,
                              e.group_size, e.group_size == 1 ? "" : "s"));
    for (const Explanation::Member& m : e.members) {
      out += fmt::format("{:<10}   {:<40} {}{}{}\n", "", m.name, m.phase.empty() ? "-" : m.phase,
                         m.node.empty() ? "" : " on " + m.node, m.gated ? " (gated)" : "");
    }
  } else {
    line("Group", "unknown: " + e.group_error);
  }
  if (!e.owner_unreadable.empty()) line("", "owner not readable: " + e.owner_unreadable);
  if (e.job) {
    const Explanation::Job& j = *e.job;
    line("Slurm job",
         fmt::format("{}  {}{}  (found by its {})", j.id, j.state,
                     j.reason.empty() ? "" : " (" + j.reason + ")",
                     j.source == "label" ? "pod's job-id label" : "tag for the group"));
    if (!j.reason.empty()) line("", "reason: " + j.reason_words);
    line("",
         fmt::format("partition {}  account {}  QOS {}  user {}",
                     j.partition.empty() ? "-" : j.partition, j.account.empty() ? "-" : j.account,
                     j.qos.empty() ? "-" : j.qos, j.user.empty() ? "-" : j.user));
    std::string prio = j.priority ? fmt::format("priority {}", *j.priority) : "priority -";
    if (j.fairshare) prio += fmt::format("  fair-share factor {:.3f}", *j.fairshare);
    line("", prio);
    if (j.expected_start) {
      line("",
           fmt::format("expected start {} ({}; Slurm's planner, as scontrol show job)",
                       FormatUnixTime(*j.expected_start), RelativeTime(*j.expected_start, now)));
    } else if (j.start_time) {
      line("", fmt::format("started {} ({})", FormatUnixTime(*j.start_time),
                           RelativeTime(*j.start_time, now)));
    } else if (j.state == "PENDING") {
      line("", "expected start: not known yet (Slurm's planner gives none)");
    }
    std::string times;
    if (j.submit_time) {
      times = fmt::format("submitted {} ({})", FormatUnixTime(*j.submit_time),
                          RelativeTime(*j.submit_time, now));
    }
    if (j.time_limit_minutes) {
      times += fmt::format("{}time limit {}m", times.empty() ? "" : "  ", *j.time_limit_minutes);
    }
    if (!times.empty()) line("", times);
    if (!j.nodes.empty()) line("", "nodes " + j.nodes);
  } else {
    line("Slurm job", e.job_error.empty() ? "none" : "unknown: " + e.job_error);
  }
  if (e.slurm_nodes > 0) {
    line("Excluded", e.excluded.empty()
                         ? fmt::format("none of {} Slurm nodes", e.slurm_nodes)
                         : fmt::format("{} of {} Slurm nodes, by the bridge (Kubernetes' view):",
                                       e.excluded.size(), e.slurm_nodes));
    for (const Exclusion& x : e.excluded) {
      out += fmt::format("{:<10}   {:<24} {}\n", "", x.slurm_node, x.reason);
    }
  }
  bool first = true;
  for (const std::string& w : e.waiting_for) {
    line(first ? "Waiting" : "", w);
    first = false;
  }
  return out;
}

std::string RenderJson(const Explanation& e) {
  namespace json = boost::json;
  auto opt_time = [](const std::optional<std::int64_t>& t) -> json::value {
    return t ? json::value(FormatUnixTime(*t)) : json::value(nullptr);
  };
  json::object o;
  o["pod"] = e.pod;
  o["phase"] = e.phase;
  o["node"] = e.node;
  json::array gates;
  for (const std::string& g : e.gates) gates.emplace_back(g);
  o["schedulingGates"] = std::move(gates);
  o["podScheduled"] =
      json::object{{"status", e.scheduled_status}, {"message", e.scheduled_message}};
  json::object group;
  group["key"] = e.group_key;
  group["kind"] = e.group_kind;
  group["size"] = e.group_size;
  group["error"] = e.group_error;
  group["ownerUnreadable"] = e.owner_unreadable;
  json::array members;
  for (const Explanation::Member& m : e.members) {
    members.push_back(
        json::object{{"pod", m.name}, {"phase", m.phase}, {"node", m.node}, {"gated", m.gated}});
  }
  group["members"] = std::move(members);
  o["group"] = std::move(group);
  if (e.job) {
    const Explanation::Job& j = *e.job;
    json::object job;
    job["id"] = j.id;
    job["foundBy"] = j.source;
    job["state"] = j.state;
    job["reason"] = j.reason;
    job["reasonWords"] = j.reason_words;
    job["partition"] = j.partition;
    job["account"] = j.account;
    job["qos"] = j.qos;
    job["user"] = j.user;
    job["nodes"] = j.nodes;
    job["priority"] = j.priority ? json::value(*j.priority) : json::value(nullptr);
    job["fairshare"] = j.fairshare ? json::value(*j.fairshare) : json::value(nullptr);
    job["submitTime"] = opt_time(j.submit_time);
    job["expectedStart"] = opt_time(j.expected_start);
    job["startTime"] = opt_time(j.start_time);
    job["timeLimitMinutes"] =
        j.time_limit_minutes ? json::value(*j.time_limit_minutes) : json::value(nullptr);
    o["slurmJob"] = std::move(job);
  } else {
    o["slurmJob"] = nullptr;
  }
  o["slurmError"] = e.job_error;
  json::array excluded;
  for (const Exclusion& x : e.excluded) {
    excluded.push_back(json::object{{"slurmNode", x.slurm_node}, {"reason", x.reason}});
  }
  o["slurmNodes"] = e.slurm_nodes;
  o["excludedNodes"] = std::move(excluded);
  json::array waiting;
  for (const std::string& w : e.waiting_for) waiting.emplace_back(w);
  o["waitingFor"] = std::move(waiting);
  return json::serialize(o) + "\n";
}

}  // namespace sb::bridge
