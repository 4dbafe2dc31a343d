// SPDX-License-Identifier: Apache-2.0
#include "bridge/invariants.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/hostlist.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "common/time_format.h"

namespace sb::bridge {
namespace {

using WallTime = std::chrono::system_clock::time_point;

// Kept apart from the bridge's own JobEnded on purpose: the checker judges the bridge.
bool Over(std::string_view base_state) {
  static const std::set<std::string_view> kOver = {
      "COMPLETED", "CANCELLED", "FAILED",   "TIMEOUT",       "NODE_FAIL",
      "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT"};
  return kOver.contains(base_state);
}

bool NodeReady(const kube::Node& n) {
  return std::ranges::any_of(n.conditions, [](const kube::Condition& c) {
    return c.type == "Ready" && c.status == "True";
  });
}

std::string PodKey(const kube::Pod& p) { return p.metadata.namespace_ + "/" + p.metadata.name; }

// The job id the pod's label names; 0 when none or not a number.
std::int64_t LabelledJobId(const kube::Pod& p) {
  auto label = p.metadata.labels.find(std::string(kJobIdLabel));
  if (label == p.metadata.labels.end()) return 0;
  try {
    return std::stoll(label->second);
  } catch (const std::exception&) {
    return 0;
  }
}

// The component of a heterogeneous job a pod is labelled with (0: none, or the first).
int HetOffset(const kube::Pod& p) {
  auto label = p.metadata.labels.find(std::string(kHetJobOffsetLabel));
  if (label == p.metadata.labels.end()) return 0;
  int k = 0;
  auto [end, ec] =
      std::from_chars(label->second.data(), label->second.data() + label->second.size(), k);
  return ec == std::errc() && end == label->second.data() + label->second.size() && k > 0 ? k : 0;
}

// Why `p` no longer holds its job; "" while it is alive.
std::string NotAlive(const kube::Pod& p, const std::map<std::string, const kube::Node*>& nodes,
                     WallTime now, const InvariantOptions& o) {
  if (PodFinished(p)) return p.status.phase;
  if (p.metadata.deletion_timestamp.empty()) return "";
  if (p.spec.node_name.empty()) return "deleted before binding";
  if (std::ranges::find(p.metadata.finalizers, kFinalizer) == p.metadata.finalizers.end()) {
    return "being deleted, released by the bridge";
  }
  std::optional<WallTime> end = ParseTime(p.metadata.deletion_timestamp);
  if (!end || now < *end) return "";
  auto n = nodes.find(p.spec.node_name);
  if (n == nodes.end()) return "grace period over, node " + p.spec.node_name + " gone";
  if (!NodeReady(*n->second)) return "grace period over, node " + p.spec.node_name + " not Ready";
  if (now >= *end + o.stuck_after) return "stuck past its grace period";
  return "";
}

}  // namespace

std::string_view InvariantName(Invariant i) {
  switch (i) {
    case Invariant::kUnboundJob:
      return "bound-without-running-job";
    case Invariant::kTwoLiveJobs:
      return "two-live-jobs";
    case Invariant::kOrphanJob:
      return "orphan-job";
    case Invariant::kNoAllocation:
      return "bound-without-allocation";
    case Invariant::kWaitingOnRunningJob:
      return "waiting-on-running-job";
    case Invariant::kTwoPodsOnANode:
      return "two-pods-on-a-node";
    case Invariant::kNoJobState:
      return "job-without-state";
    case Invariant::kWaitingWithoutJob:
      return "waiting-without-job";
  }
  return "?";
}

std::vector<Violation> CheckInvariants(const Snapshot& s, WallTime now, const InvariantOptions& o) {
  std::vector<Violation> out;
  auto add = [&](Invariant i, std::string subject, std::string text) {
    out.push_back({i, std::move(subject), fmt::format("{}: {}", InvariantName(i), text)});
  };

  std::map<std::string, const kube::Node*> nodes;
  for (const kube::Node& n : s.nodes) nodes[n.metadata.name] = &n;
  auto slurm_name = [&](const std::string& node) {
    auto n = nodes.find(node);
    if (n == nodes.end()) return node;
    auto l = n->second->metadata.labels.find(std::string(kSlurmNodeNameLabel));
    return l == n->second->metadata.labels.end() || l->second.empty() ? node : l->second;
  };

  // The jobs: all by id; ours (tag of this bridge) in scope with their tags.
  struct OurJob {
    const slurm::JobInfo* job;
    JobTag tag;
  };
  std::map<std::int64_t, const slurm::JobInfo*> by_id;
  std::map<std::int64_t, OurJob> ours;
  for (const slurm::JobInfo& j : s.jobs) {
    by_id[j.job_id] = &j;
    std::optional<JobTag> tag = ParseJobTag(j.admin_comment);
    if (!tag || !tag->BelongsTo(o.cluster_name, o.scheduler_name)) continue;
    if (!o.namespace_.empty() && std::ranges::none_of(tag->pods, [&](const std::string& k) {
          return k.starts_with(o.namespace_ + "/");
        })) {
      continue;
    }
    ours.emplace(j.job_id, OurJob{&j, std::move(*tag)});
  }

  // Invariant 7: a job of ours has a readable state.
  for (const auto& [id, our] : ours) {
    if (!our.job->BaseState().empty()) continue;
    const std::string subject = fmt::format("Slurm job {}", id);
    add(Invariant::kNoJobState, subject,
        fmt::format("{} (group {}) has no state Slurm's answer could be read from", subject,
                    our.tag.group));
  }

  // The pods: ours, in scope.
  std::vector<const kube::Pod*> pods;
  std::map<std::string, const kube::Pod*> pod_by_uid;
  for (const kube::Pod& p : s.pods) {
    if (p.spec.scheduler_name != o.scheduler_name) continue;
    if (!o.namespace_.empty() && p.metadata.namespace_ != o.namespace_) continue;
    pods.push_back(&p);
    pod_by_uid[p.metadata.uid] = &p;
  }

  for (const kube::Pod* p : pods) {
    if (PodFinished(*p) || !p->metadata.deletion_timestamp.empty()) continue;
    const std::string subject = "pod " + PodKey(*p);
    const std::int64_t id = LabelledJobId(*p);
    const std::string& node = p->spec.node_name;
    if (!node.empty()) {
      // Invariants 1 and 4: a bound pod sits on its RUNNING job's allocation.
      if (id <= 0) {
        add(Invariant::kNoAllocation, subject,
            fmt::format("{} is bound to node {} but carries no Slurm job id", subject, node));
        continue;
      }
      auto j = by_id.find(id);
      if (j == by_id.end()) {
        add(Invariant::kNoAllocation, subject,
            fmt::format("{} is bound to node {} but Slurm has no job {}", subject, node, id));
        continue;
      }
      const slurm::JobInfo& job = *j->second;
      if (job.BaseState() != "RUNNING") {
        add(Invariant::kUnboundJob, subject,
            fmt::format("{} is bound to node {} but its Slurm job {} is {}", subject, node, id,
                        job.BaseState().empty() ? "without a state" : job.BaseState()));
        continue;
      }
      auto our = ours.find(id);
      if (our == ours.end()) {
        add(Invariant::kUnboundJob, subject,
            fmt::format("{} is bound to node {} but Slurm job {} is not this bridge's (tag {})",
                        subject, node, id, job.admin_comment));
        continue;
      }
      if (std::ranges::find(our->second.tag.uids, p->metadata.uid) == our->second.tag.uids.end()) {
        add(Invariant::kUnboundJob, subject,
            fmt::format("{} is bound to node {} but the tag of Slurm job {} does not list its "
                        "UID {}",
                        subject, node, id, p->metadata.uid));
        continue;
      }
      // A heterogeneous job's pod: the nodes of its component (its het-job-offset label).
      const slurm::JobInfo* component = &job;
      if (const int k = HetOffset(*p); k > 0) {
        auto c = by_id.find(id + k);
        component =
            c != by_id.end() && c->second->het_job_id == id && c->second->het_job_offset == k
                ? c->second
                : nullptr;
      }
      if (component == nullptr) {
        add(Invariant::kNoAllocation, subject,
            fmt::format("{} is bound to node {} for component +{} of Slurm job {}, which it has "
                        "not",
                        subject, node, HetOffset(*p), id));
        continue;
      }
      Result<std::vector<std::string>> hosts = ExpandHostlist(component->nodes);
      const std::string want = slurm_name(node);
      if (!hosts || std::ranges::find(*hosts, want) == hosts->end()) {
        add(Invariant::kNoAllocation, subject,
            fmt::format("{} is bound to node {} (Slurm node {}) but Slurm job {} runs on '{}'",
                        subject, node, want, component->job_id, component->nodes));
      }
      continue;
    }
    // Invariant 5: an unbound pod whose job (by label or by tag) is RUNNING.
    std::set<std::int64_t> running;
    if (auto j = by_id.find(id);
        id > 0 && j != by_id.end() && ours.contains(id) && j->second->BaseState() == "RUNNING") {
      running.insert(id);
    }
    for (const auto& [jid, our] : ours) {
      if (our.job->BaseState() == "RUNNING" &&
          std::ranges::find(our.tag.uids, p->metadata.uid) != our.tag.uids.end()) {
        running.insert(jid);
      }
    }
    for (std::int64_t jid : running) {
      add(Invariant::kWaitingOnRunningJob, subject,
          fmt::format("{} waits unbound while its Slurm job {} is RUNNING on {}", subject, jid,
                      by_id[jid]->nodes));
    }
  }

  // Invariant 6: one alive pod per node of a job (a pod being deleted holds its node until it is
  // no longer alive: the kubelet still counts it).
  // (Per component of a heterogeneous job: two components may share a node.)
  std::map<std::tuple<std::int64_t, int, std::string>, std::vector<std::string>> on_node;
  for (const kube::Pod* p : pods) {
    if (p->spec.node_name.empty() || !NotAlive(*p, nodes, now, o).empty()) continue;
    const std::int64_t id = LabelledJobId(*p);
    if (!ours.contains(id)) continue;
    on_node[{id, HetOffset(*p), p->spec.node_name}].push_back(PodKey(*p));
  }
  for (const auto& [where, keys] : on_node) {
    if (keys.size() < 2) continue;
    const std::string subject = fmt::format("Slurm job {}", std::get<0>(where));
    add(Invariant::kTwoPodsOnANode, subject,
        fmt::format("{} has {} alive pods on node {}: {}", subject, keys.size(), std::get<2>(where),
                    fmt::join(keys, ", ")));
  }

  // Invariant 8 (liveness): no pod waits for ever without a job.
  if (o.max_wait.count() > 0) {
    for (const kube::Pod* p : pods) {
      if (!p->spec.node_name.empty() || PodFinished(*p) ||
          !p->metadata.deletion_timestamp.empty() || !p->spec.scheduling_gates.empty() ||
          p->metadata.labels.contains(std::string(kJobIdLabel))) {
        continue;
      }
      const bool tagged = std::ranges::any_of(ours, [&](const auto& o2) {
        return !Over(o2.second.job->BaseState()) &&
               std::ranges::find(o2.second.tag.uids, p->metadata.uid) != o2.second.tag.uids.end();
      });
      std::optional<WallTime> created = ParseTime(p->metadata.creation_timestamp);
      if (tagged || !created || now - *created < o.max_wait) continue;
      add(Invariant::kWaitingWithoutJob, "pod " + PodKey(*p),
          fmt::format("pod {} has waited {} s (more than {} s) with no Slurm job", PodKey(*p),
                      std::chrono::duration_cast<std::chrono::seconds>(now - *created).count(),
                      o.max_wait.count()));
    }
  }

  // Invariant 2: one live job per group and per pod.
  std::map<std::string, std::vector<std::int64_t>> by_group;
  std::map<std::string, std::vector<std::int64_t>> by_uid;
  for (const auto& [id, our] : ours) {
    if (Over(our.job->BaseState())) continue;
    by_group[our.tag.group].push_back(id);
    for (const std::string& uid : our.tag.uids) by_uid[uid].push_back(id);
  }
  for (const auto& [group, ids] : by_group) {
    if (ids.size() > 1) {
      add(Invariant::kTwoLiveJobs, "group " + group,
          fmt::format("group {} has {} live Slurm jobs: {}", group, ids.size(),
                      fmt::join(ids, ", ")));
    }
  }
  for (const auto& [uid, ids] : by_uid) {
    std::set<std::string> groups;
    for (std::int64_t id : ids) groups.insert(ours.at(id).tag.group);
    if (ids.size() > 1 && groups.size() > 1) {
      add(Invariant::kTwoLiveJobs, "UID " + uid,
          fmt::format("pod UID {} is listed by {} live Slurm jobs: {}", uid, ids.size(),
                      fmt::join(ids, ", ")));
    }
  }

  // Invariant 3: a live job needs a live pod.
  for (const auto& [id, our] : ours) {
    if (Over(our.job->BaseState())) continue;
    std::vector<std::string> why;
    bool alive = false;
    for (std::size_t i = 0; i < our.tag.uids.size(); ++i) {
      const std::string key = i < our.tag.pods.size() ? our.tag.pods[i] : our.tag.uids[i];
      auto p = pod_by_uid.find(our.tag.uids[i]);
      if (p == pod_by_uid.end()) {
        why.push_back(key + " gone");
        continue;
      }
      std::string reason = NotAlive(*p->second, nodes, now, o);
      if (reason.empty()) {
        alive = true;
        break;
      }
      why.push_back(key + " " + reason);
    }
    if (!alive) {
      const std::string subject = fmt::format("Slurm job {}", id);
      add(Invariant::kOrphanJob, subject,
          fmt::format("{} (group {}) is {} but none of its pods is alive ({})", subject,
                      our.tag.group, our.job->BaseState(), fmt::join(why, "; ")));
    }
  }

  std::ranges::sort(out, [](const Violation& a, const Violation& b) {
    return std::tie(a.invariant, a.subject, a.text) < std::tie(b.invariant, b.subject, b.text);
  });
  return out;
}

}  // namespace sb::bridge
