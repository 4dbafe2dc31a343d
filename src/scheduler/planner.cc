// SPDX-License-Identifier: Apache-2.0
#include "scheduler/planner.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/explain.h"
#include "bridge/names.h"
#include "bridge/pods.h"

namespace sb::scheduler {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::ranges::find(v, s) != v.end();
}

std::vector<const kube::Pod*> ByName(std::vector<const kube::Pod*> pods) {
  std::ranges::sort(pods, [](const kube::Pod* a, const kube::Pod* b) {
    return a->metadata.name < b->metadata.name;
  });
  return pods;
}

// The pods a job is for first (those in its tag), then the rest; each part in name order.
std::vector<const kube::Pod*> TaggedFirst(const std::vector<const kube::Pod*>& pods,
                                          const std::vector<std::string>& uids) {
  std::vector<const kube::Pod*> out;
  for (const kube::Pod* p : pods) {
    if (Contains(uids, p->metadata.uid)) out.push_back(p);
  }
  for (const kube::Pod* p : pods) {
    if (!Contains(uids, p->metadata.uid)) out.push_back(p);
  }
  return out;
}

bool AnyActive(const std::vector<Holder>& holders) {
  return std::ranges::any_of(holders, [](const Holder& h) { return h.active; });
}

// A live tagged job the group may take over, and how.
enum class Kind {
  kRefill,     // running with pods of the group bound and active: bind into its free nodes
  kUnbound,    // pending, or running with no pod bound: a job the group may use as a whole
  kFinishing,  // running, its pods done: the controllers end it; not ours to touch
};

Kind Classify(const JobView& j) {
  if (!j.state.running()) return Kind::kUnbound;
  if (!j.holders_known) return Kind::kFinishing;  // cannot tell: leave it alone
  if (j.holders.empty()) return Kind::kUnbound;
  return AnyActive(j.holders) ? Kind::kRefill : Kind::kFinishing;
}

std::size_t Overlap(const JobView& j, const std::vector<const kube::Pod*>& pods) {
  return static_cast<std::size_t>(std::ranges::count_if(
      pods, [&](const kube::Pod* p) { return Contains(j.uids, p->metadata.uid); }));
}

}  // namespace

bool Schedulable(const kube::Pod& pod) { return pod.spec.scheduling_gates.empty(); }

std::string WaitingMessage(const JobView& job) {
  std::string msg = fmt::format("waiting for Slurm job {} in partition {}", job.id,
                                job.partition.empty() ? "(default)" : job.partition);
  if (!job.reason.empty() && job.reason != "None") {
    msg += ": " + job.reason;
  } else if (!job.state.pending()) {
    msg += ": " + job.state.name();
  }
  if (job.state.pending() && job.expected_start > 0) {
    msg += std::string(kExpectedStartWords) + bridge::FormatUnixTime(job.expected_start);
  }
  return msg;
}

std::string_view WithoutExpectedStart(std::string_view message) {
  const std::size_t at = message.find(kExpectedStartWords);
  return at == std::string_view::npos ? message : message.substr(0, at);
}

bool HasExpectedStart(std::string_view message) {
  return message.find(kExpectedStartWords) != std::string_view::npos;
}

std::string WaitingReason(std::string_view message) {
  constexpr std::string_view kSlurm = "waiting for Slurm job ";
  if (message.starts_with(kSlurm)) {
    std::string_view rest = WithoutExpectedStart(message);
    const std::size_t colon = rest.find(": ");
    if (colon == std::string_view::npos) return "slurm_pending";
    std::string_view reason = rest.substr(colon + 2);
    // Slurm's reasons are single words ("Priority", "QOSMaxJobsPerUserLimit"); anything else
    // (a state, words of the bridge) counts as pending.
    if (reason.empty() || reason.find_first_of(" ,;()") != std::string_view::npos) {
      return "slurm_pending";
    }
    return std::string(reason);
  }
  if (message.find("more pod") != std::string_view::npos) return "gang_incomplete";
  if (message.starts_with("submitting the Slurm job failed")) return "submitting";
  return "not_described";
}

GroupPlan PlanGroup(const GroupInput& in, const PlannerOptions& options) {
  GroupPlan plan;
  const std::vector<const kube::Pod*> pods = ByName(in.pods);
  std::optional<JobView> job = in.tracked;
  const bridge::GroupSpec& spec = in.spec;

  // A single pod's job is for that pod only: a pod re-created under the same name is another.
  if (job && spec.key.starts_with("Pod/") && pods.size() == 1 && !job->uids.empty() &&
      !Contains(job->uids, pods.front()->metadata.uid)) {
    plan.cancel.push_back({job->id, "its pod was re-created"});
    plan.forget = true;
    job.reset();
  }
  if (pods.empty()) {
    if (job) {
      // Pods bound to it (or maybe bound: holders not read) make it the controllers' job.
      const bool maybe_bound =
          job->refill || (job->bind_tried && (!job->holders_known || !job->holders.empty()));
      if (!maybe_bound) plan.cancel.push_back({job->id, "its pods are gone"});
      plan.forget = true;
    }
    return plan;
  }
  if (job && job->state.ended()) {
    plan.forget = true;
    plan.event_reason = "SlurmJobEnded";
    plan.event_message = fmt::format(
        "Slurm job {} ended ({}) before the pods were bound; submitting a new job", job->id,
        job->state.phase() == bridge::JobPhase::kGone ? "no longer known to Slurm"
                                                      : job->state.name());
    plan.recheck_at = in.now;
    return plan;
  }

  if (!job) {
    // A submit whose reply was lost may have made a job whose id nobody knows: only Slurm's
    // whole list can show it. Look before submitting again.
    if (in.submit_doubt_since &&
        (!in.jobs_scanned_at || *in.jobs_scanned_at <= *in.submit_doubt_since)) {
      plan.scan_jobs = true;
      return plan;
    }
    // Slurm's last list is older than these pods and shows a live job of the group (bound
    // before, then requeued by a preemption, or finishing): what it shows may have changed
    // since. Read it again before adopting or submitting (issue #29: a Job's new pod takes
    // over its requeued job, which keeps its id and its place in the queue).
    if (in.group_since && in.jobs_listed_at && *in.jobs_listed_at < *in.group_since &&
        std::ranges::any_of(in.tagged, [](const JobView& j) { return !j.state.ended(); })) {
      plan.list_jobs = true;
      return plan;
    }
    // A single pod's job is for that pod only (its UID): one for a pod of the same name before
    // is never taken over; cancelled while pending, left to the controllers once running.
    std::vector<JobView> tagged;
    for (const JobView& j : in.tagged) {
      if (j.state.ended()) continue;
      if (spec.key.starts_with("Pod/") && !j.uids.empty() &&
          !Contains(j.uids, pods.front()->metadata.uid)) {
        if (j.state.pending()) plan.cancel.push_back({j.id, "its pod was re-created"});
        continue;
      }
      tagged.push_back(j);
    }
    const JobView* keep = nullptr;
    for (const JobView& j : tagged) {
      if (Classify(j) != Kind::kRefill) continue;
      if (keep == nullptr || j.id < keep->id) keep = &j;
    }
    if (keep == nullptr) {
      // A running one (its allocation is there already), then the one for most of these pods,
      // then the oldest.
      auto better = [&](const JobView& x, const JobView& y) {
        const bool xr = x.state.running();
        const bool yr = y.state.running();
        if (xr != yr) return xr;
        if (Overlap(x, pods) != Overlap(y, pods)) return Overlap(x, pods) > Overlap(y, pods);
        return x.id < y.id;
      };
      for (const JobView& j : tagged) {
        if (Classify(j) != Kind::kUnbound) continue;
        if (keep == nullptr || better(j, *keep)) keep = &j;
      }
    }
    // A running job of the group whose pods could not be read may be the group's own (bound,
    // or bindable): never a second job beside it; look again in a second, when the holders are
    // read anew (test audit N10).
    if (keep == nullptr && std::ranges::any_of(tagged, [](const JobView& j) {
          return j.state.running() && !j.holders_known;
        })) {
      plan.recheck_at = in.now + std::chrono::seconds(1);
      return plan;
    }
    if (keep != nullptr) {
      for (const JobView& j : tagged) {
        if (j.id == keep->id || Classify(j) != Kind::kUnbound) continue;
        plan.cancel.push_back(
            {j.id, fmt::format("a second Slurm job of {} (job {} is kept)", spec.key, keep->id),
             CancelCause::kDuplicate});
      }
      plan.adopt = *keep;
      plan.adopt->refill = Classify(*keep) == Kind::kRefill;
      job = *keep;
    }
  }

  if (!job) {
    const int have = static_cast<int>(pods.size());
    if (have < spec.size) {
      plan.incomplete = true;
      const TimePoint since = in.incomplete_since.value_or(in.now);
      // A member re-created after its gang was bound finds the gang's job in a list read after
      // it came.
      if (!in.jobs_listed_at || *in.jobs_listed_at < since) {
        plan.list_jobs = true;
        return plan;
      }
      // The list shows no live job: the extras of a PodGroup whose job ended run on their own.
      if (in.ran_before && spec.kind == "PodGroup" && in.slurm_nodes_known) {
        plan.incomplete = false;
        plan.submit = pods;
        plan.submit_size = have;
        plan.event_reason = "PodGroupRemainder";
        plan.event_message = fmt::format(
            "PodGroup {} ran before and its job has ended; its {} remaining pod(s) get a Slurm job "
            "of their own",
            spec.name, have);
        return plan;
      }
      // A workload's pods arrive one by one: say nothing while the group is still filling.
      if (in.now - since < options.fill_grace) {
        plan.recheck_at = since + options.fill_grace;
        return plan;
      }
      plan.report = fmt::format(
          "waiting for {} more pod(s) of {} {}: Slurm allocates the group of {} as one job",
          spec.size - have, spec.kind, spec.name, spec.size);
      // The group's size may shrink (a Job's last wave), and its job may appear in a list.
      plan.recheck_at = in.now + options.owner_recheck;
      plan.recheck_owners = true;
      return plan;
    }
    if (!in.slurm_nodes_known) {
      plan.report = "waiting for Slurm's node list (needed to place the job on Kubernetes nodes)";
      plan.recheck_at = in.now + std::chrono::seconds(2);
      return plan;
    }
    plan.submit = pods;
    if (spec.size > 0 && plan.submit.size() > static_cast<std::size_t>(spec.size)) {
      plan.submit.resize(static_cast<std::size_t>(spec.size));
    }
    return plan;
  }

  if (job->state.running()) {
    plan.bind = true;
    return plan;
  }
  // Alive, not running: the pods it is for carry its id (adopted jobs, a failed label patch).
  plan.members = TaggedFirst(pods, job->uids);
  if (spec.size > 0 && plan.members.size() > static_cast<std::size_t>(spec.size)) {
    plan.members.resize(static_cast<std::size_t>(spec.size));
  }
  const std::string id = std::to_string(job->id);
  for (const kube::Pod* p : pods) {
    if (!Contains(job->uids, p->metadata.uid)) continue;
    auto l = p->metadata.labels.find(std::string(bridge::kJobIdLabel));
    // Riding the Binding, a missing label is fine; one naming another (an ended) job is not.
    const bool labelled = l == p->metadata.labels.end() ? in.labels_ride_binding : l->second == id;
    if (labelled && bridge::HasFinalizer(*p)) continue;
    plan.label.push_back(p);
  }
  plan.update_pending = job->state.pending();
  // Most jobs start within a Slurm scheduling cycle: a just-submitted job without a reason yet is
  // not worth a condition and an event per pod.
  if ((job->reason.empty() || job->reason == "None") &&
      in.now - job->submitted < options.quiet_start) {
    plan.recheck_at = job->submitted + options.quiet_start;
    return plan;
  }
  plan.report = WaitingMessage(*job);
  return plan;
}

BindPlan PlanBind(const BindInput& in, const PlannerOptions& options) {
  BindPlan plan;
  const JobView& job = in.job;
  // The places to fill: one per node of each component (an ordinary job: one component, 0).
  using Slot = std::pair<std::string, int>;  // Kubernetes node, component
  std::vector<Slot> targets;
  for (std::size_t i = 0; i < in.slurm_nodes.size(); ++i) {
    const std::string& s = in.slurm_nodes[i];
    auto it = in.kube_node_of.find(s);
    if (it == in.kube_node_of.end()) {
      plan.unmapped.push_back(s);
    } else {
      targets.emplace_back(it->second, i < in.node_part.size() ? in.node_part[i] : 0);
    }
  }
  auto part_of = [&](const kube::Pod* pod) {
    auto it = in.part_of.find(pod->metadata.uid);
    return it == in.part_of.end() ? 0 : it->second;
  };
  // Bound before (a re-created member, or a binding cut short): fill what is free. Never bound:
  // the group binds as a whole.
  const bool refill = !in.holders.empty();
  // A job with pods bound to it is the controllers' (review N-14): a node of it Kubernetes lacks
  // now (a Node deleted and not yet back) is reported, never a reason to cancel the running pods.
  if (!plan.unmapped.empty() && !refill) {
    const std::string names = fmt::format("{}", fmt::join(plan.unmapped, ","));
    const TimePoint since = in.unmapped_since.value_or(in.now);
    if (in.now - since >= options.unmapped_grace) {
      plan.cancel =
          Cancel{job.id, fmt::format("allocated node(s) {}, which match no Kubernetes node", names),
                 CancelCause::kNodeNotInKubernetes};
      plan.event_reason = "SlurmNodeNotInKubernetes";
      plan.event_message = fmt::format(
          "Slurm job {} was allocated node(s) {}, which match no Kubernetes node; cancelled it, "
          "the next job excludes them",
          job.id, names);
      plan.recheck_at = in.now;
      return plan;
    }
    plan.report = fmt::format(
        "Slurm job {} was allocated node {}, which matches no Kubernetes node", job.id, names);
    plan.recheck_at = std::min(since + options.unmapped_grace, in.now + std::chrono::seconds(5));
    return plan;
  }

  std::set<Slot> free(targets.begin(), targets.end());
  for (const Holder& h : in.holders) {
    if (h.active) free.erase(Slot{h.node, h.part});
  }
  auto free_names = [&] {
    std::vector<std::string> names;
    for (const auto& [node, part] : free) names.push_back(node);
    return names;
  };
  const std::vector<const kube::Pod*> pods = TaggedFirst(ByName(in.pods), job.uids);

  // A pod annotated earlier with a free node of its component keeps it; the rest in order.
  std::vector<const kube::Pod*> rest;
  for (const kube::Pod* pod : pods) {
    auto a = pod->metadata.annotations.find(std::string(bridge::kNodeAnnotation));
    if (a != pod->metadata.annotations.end() && free.contains(Slot{a->second, part_of(pod)}) &&
        (refill || Contains(job.uids, pod->metadata.uid))) {
      plan.assign.emplace_back(pod, a->second);
      free.erase(Slot{a->second, part_of(pod)});
    } else {
      rest.push_back(pod);
    }
  }
  if (!refill) {
    // Pods beyond the job's node count are neither bound nor labelled: they wait for their own.
    // Each component needs a pod of its part for each of its nodes.
    std::map<int, std::size_t> short_of;
    for (const auto& [node, part] : free) ++short_of[part];
    for (const kube::Pod* pod : rest) {
      if (auto it = short_of.find(part_of(pod)); it != short_of.end() && it->second > 0) {
        --it->second;
      }
    }
    std::size_t missing = 0;
    for (const auto& [part, n] : short_of) missing += n;
    if (missing > 0) {
      plan.assign.clear();
      plan.report = fmt::format(
          "Slurm job {} is running on {} node(s); waiting for {} more pod(s) of {} {} to bind "
          "them all at once",
          job.id, targets.size(), missing, in.kind, in.name);
      return plan;
    }
  }
  // A refill takes a pod only onto a node it may run on (review N-15: the members of a
  // PodGroup may differ in constraints; the job was placed for others), of its component.
  std::vector<std::string> misfits;
  for (const kube::Pod* pod : rest) {
    if (free.empty()) break;
    auto excluded = in.excluded_for.find(pod->metadata.uid);
    const int part = part_of(pod);
    auto node = std::ranges::find_if(free, [&](const Slot& slot) {
      return slot.second == part && (!refill || excluded == in.excluded_for.end() ||
                                     !excluded->second.contains(slot.first));
    });
    if (node == free.end()) {
      misfits.push_back(pod->metadata.name);
      continue;
    }
    plan.assign.emplace_back(pod, node->first);
    free.erase(node);
  }
  if (plan.assign.empty() && !misfits.empty()) {
    plan.report = fmt::format(
        "Slurm job {} of {} {} has free node(s) {}, which the pod cannot run on (its node "
        "selector, affinity, tolerations or requests{}); waiting for a node of the job it fits, "
        "or for a job of its own",
        job.id, in.kind, in.name, fmt::join(free_names(), ", "),
        in.part_of.empty() ? "" : ", or its part of the heterogeneous job");
    plan.recheck_at = in.now + options.full_recheck;
    return plan;
  }
  if (plan.assign.empty() && !plan.unmapped.empty()) {
    plan.report = fmt::format(
        "Slurm job {} of {} {} has a pod on each of its nodes Kubernetes knows; its node(s) {} "
        "match no Kubernetes node",
        job.id, in.kind, in.name, fmt::join(plan.unmapped, ","));
    plan.recheck_at = in.now + std::chrono::seconds(5);
    return plan;
  }
  if (plan.assign.empty()) {
    if (!free.empty()) return plan;  // nothing to bind (cannot happen with pods waiting)
    std::vector<std::string> terminating;
    for (const Holder& h : in.holders) {
      if (h.terminating) terminating.push_back(h.node);
    }
    plan.report = fmt::format(
        "Slurm job {} of {} {} has a pod on each of its {} node(s); waiting for one to be free",
        job.id, in.kind, in.name, targets.size());
    if (!terminating.empty()) {
      plan.report += fmt::format(" (a pod is terminating on {})", fmt::join(terminating, ", "));
    }
    // The scheduler does not watch bound pods: it looks again, sooner while one terminates.
    plan.recheck_at =
        in.now + (terminating.empty() ? options.full_recheck : options.terminating_recheck);
    return plan;
  }
  plan.retag = std::ranges::any_of(
      plan.assign, [&](const auto& a) { return !Contains(job.uids, a.first->metadata.uid); });
  plan.done = free.empty();
  return plan;
}

TagMembers MergeTag(const TagMembers& current, const std::vector<Holder>& holders,
                    const std::vector<const kube::Pod*>& waiting,
                    const std::vector<std::pair<const kube::Pod*, std::string>>& assign) {
  std::set<std::string> live;
  for (const Holder& h : holders) live.insert(h.uid);
  for (const kube::Pod* p : waiting) live.insert(p->metadata.uid);
  TagMembers out;
  for (std::size_t i = 0; i < current.uids.size(); ++i) {
    if (!live.contains(current.uids[i]) || Contains(out.uids, current.uids[i])) continue;
    out.uids.push_back(current.uids[i]);
    out.pods.push_back(i < current.pods.size() ? current.pods[i] : "");
  }
  for (const auto& [pod, node] : assign) {
    if (Contains(out.uids, pod->metadata.uid)) continue;
    out.uids.push_back(pod->metadata.uid);
    out.pods.push_back(pod->metadata.namespace_ + "/" + pod->metadata.name);
  }
  return out;
}

std::vector<Cancel> PlanDuplicates(const std::map<std::string, std::int64_t>& tracked,
                                   const std::map<std::string, std::vector<JobView>>& listed) {
  std::vector<Cancel> out;
  for (const auto& [group, id] : tracked) {
    auto it = listed.find(group);
    if (it == listed.end()) continue;
    for (const JobView& j : it->second) {
      if (j.id == id || j.state.ended() || Classify(j) != Kind::kUnbound) continue;
      out.push_back({j.id, fmt::format("a second Slurm job of {} (job {} is kept)", group, id),
                     CancelCause::kDuplicate});
    }
  }
  return out;
}

std::optional<std::string> FitNodeCount(slurm::JobDescription& job, int pods) {
  const std::int32_t n = std::max(1, pods);
  const std::string want = std::to_string(n);
  const bool same =
      job.nodes == want && job.minimum_nodes.value_or(n) == n && job.maximum_nodes.value_or(n) == n;
  if (same) return std::nullopt;
  std::string asked = job.nodes;
  if (job.minimum_nodes.value_or(n) != job.maximum_nodes.value_or(n) || asked == want) {
    asked = fmt::format("{}-{}", job.minimum_nodes.value_or(n), job.maximum_nodes.value_or(n));
  }
  job.nodes = want;
  job.minimum_nodes = n;
  job.maximum_nodes = n;
  return fmt::format(
      "annotations {0}min-nodes/{0}max-nodes ask for {1} node(s); the bridge binds one pod per "
      "node, so the job of {2} pod(s) asks Slurm for {2} node(s)",
      bridge::kJobAnnotationPrefix, asked, n);
}

NodeMapping MapSlurmNodes(const std::vector<const kube::Node*>& nodes) {
  NodeMapping out;
  std::map<std::string, bool> labelled;  // Slurm name -> the mapped node has the label
  for (const kube::Node* node : nodes) {
    auto l = node->metadata.labels.find(std::string(bridge::kSlurmNodeNameLabel));
    const bool has_label = l != node->metadata.labels.end() && !l->second.empty();
    const std::string name = bridge::SlurmNodeName(*node);
    auto it = out.by_slurm_name.find(name);
    if (it == out.by_slurm_name.end()) {
      out.by_slurm_name[name] = node;
      labelled[name] = has_label;
      continue;
    }
    if (!Contains(out.duplicates, name)) out.duplicates.push_back(name);
    // The label wins; between equals, the first name in order (stable whatever the cache order).
    const bool other_label = labelled[name];
    if ((has_label && !other_label) ||
        (has_label == other_label && node->metadata.name < it->second->metadata.name)) {
      it->second = node;
      labelled[name] = has_label;
    }
  }
  return out;
}

bool SubmitOutcomeUnknown(ErrorCode code) {
  return code == ErrorCode::kUnavailable || code == ErrorCode::kDeadlineExceeded ||
         code == ErrorCode::kInternal || code == ErrorCode::kCancelled;
}

}  // namespace sb::scheduler
