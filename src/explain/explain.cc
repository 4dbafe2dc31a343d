// SPDX-License-Identifier: Apache-2.0
#include "explain/explain.h"

#include <algorithm>
#include <chrono>
#include <ostream>

#include <fmt/format.h>

#include "bridge/explain.h"
#include "bridge/group.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "explain/session.h"
#include "kube/owners.h"
#include "wiring/bridge_jobs.h"
#include "wiring/group_inputs.h"

namespace sb::explain {
namespace {

using boost::asio::awaitable;

std::string Words(const Error& e) { return e.ToString(); }

// What explain reads, kept alive while bridge::Explain looks at it.
struct Read {
  kube::Pod pod;
  std::vector<kube::GenericObject> owners;
  std::optional<kube::GenericObject> pod_group;
  std::optional<kube::GenericObject> workload_pod_group;
  std::vector<kube::Pod> namespace_pods;
  std::vector<kube::Pod> bound_pods;
  std::vector<kube::Node> nodes;
  bridge::ExplainInput in;
};

// The most job ids an unlabelled pod's explain reads: a group's pods name one job (two while a
// duplicate is cancelled), so a few reads find it, and a group of thousands costs no more.
constexpr std::size_t kMaxCandidateJobs = 8;

// The jobs that may be an unlabelled pod's: the one the scheduler's message to the pod names,
// then those its group's members name (a member bound in the job carries its label), at most
// kMaxCandidateJobs, without duplicates.
std::vector<std::int64_t> CandidateJobIds(const kube::Pod& pod,
                                          const std::vector<const kube::Pod*>& members) {
  std::vector<std::int64_t> ids;
  auto add = [&](std::int64_t id) {
    if (ids.size() < kMaxCandidateJobs && std::ranges::find(ids, id) == ids.end()) {
      ids.push_back(id);
    }
  };
  for (std::int64_t id : wiring::NamedJobIds(pod)) add(id);
  for (const kube::Pod* m : members) {
    if (std::optional<std::int64_t> id = wiring::LabelledJobId(*m)) add(*id);
  }
  for (const kube::Pod* m : members) {
    for (std::int64_t id : wiring::NamedJobIds(*m)) add(id);
  }
  return ids;
}

// Fills `r.in` from both servers; an error only when the pod itself cannot be read.
awaitable<Result<void>> ReadAll(Session& s, const std::string& name, Read& r) {
  kube::Client& kube = *s.kube;
  kube::ResourceRef pod_ref = kube::PodsRef(s.namespace_);
  pod_ref.name = name;
  Result<kube::Pod> pod = co_await kube::GetAs<kube::Pod>(kube, pod_ref);
  if (!pod) co_return tl::unexpected(pod.error());
  r.pod = std::move(*pod);
  r.in.pod = &r.pod;
  const std::string& ns = r.pod.metadata.namespace_;

  // Its group, as the scheduler resolves it (the same reads; without its cache).
  kube::DirectOwnerSource direct(kube);
  Result<wiring::GroupInputs> inputs = co_await wiring::ReadGroupInputs(r.pod, kube, direct);
  std::string group_problem;
  if (!inputs) {
    group_problem = fmt::format(
        "the pod's owners or PodGroup cannot be read now ({}); the scheduler tries again",
        Words(inputs.error()));
  } else if (!inputs->pod_group_problem.empty()) {
    group_problem = std::move(inputs->pod_group_problem);
  } else {
    Result<bridge::GroupSpec> spec = inputs->Resolve(r.pod);
    if (spec) {
      r.in.group = std::move(*spec);
    } else {
      group_problem = spec.error().message;
    }
  }
  if (inputs) {
    r.owners = std::move(inputs->owners);
    r.pod_group = std::move(inputs->pod_group);
    r.workload_pod_group = std::move(inputs->workload_pod_group);
    r.in.owner_unreadable = std::move(inputs->owner_unreadable);
  }
  r.in.group_error = group_problem;

  // The group's members: the bridge's pods of the namespace in the same group.
  const std::string scheduler =
      r.pod.spec.scheduler_name.empty() ? s.config.scheduler_name : r.pod.spec.scheduler_name;
  kube::ResourceRef ns_pods = kube::PodsRef(ns);
  kube::ListOptions by_scheduler{.field_selector = "spec.schedulerName=" + scheduler};
  Result<kube::List<kube::Pod>> pods =
      co_await kube::ListAllAs<kube::Pod>(kube, std::move(ns_pods), std::move(by_scheduler));
  if (pods) r.namespace_pods = std::move(pods->items);
  for (const kube::Pod& p : r.namespace_pods) {
    if (p.metadata.uid == r.pod.metadata.uid) continue;
    if (r.in.group && bridge::InGroup(p, *r.in.group)) r.in.members.push_back(&p);
  }
  r.in.members.push_back(&r.pod);

  // Kubernetes' nodes and what is bound to them (the exclusions' input).
  kube::ResourceRef nodes_ref = kube::NodesRef();
  kube::ListOptions every_node;
  Result<kube::List<kube::Node>> nodes =
      co_await kube::ListAllAs<kube::Node>(kube, std::move(nodes_ref), std::move(every_node));
  if (nodes) r.nodes = std::move(nodes->items);
  for (const kube::Node& n : r.nodes) r.in.k8s_nodes_by_slurm_name[bridge::SlurmNodeName(n)] = &n;
  kube::ResourceRef all_pods = kube::PodsRef();
  kube::ListOptions bound_live{.field_selector =
                                   "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"};
  Result<kube::List<kube::Pod>> bound =
      co_await kube::ListAllAs<kube::Pod>(kube, std::move(all_pods), std::move(bound_live));
  if (bound) r.bound_pods = std::move(bound->items);
  std::vector<const kube::Pod*> others;
  std::vector<const kube::Pod*> all_bound;
  for (const kube::Pod& p : r.bound_pods) {
    all_bound.push_back(&p);
    if (p.spec.scheduler_name != scheduler) others.push_back(&p);
  }
  r.in.used_by_others = bridge::UsageOf(others);
  r.in.ports_in_use = bridge::PortsOf(all_bound);

  // Slurm: the job (by the pod's label, else by tag), its nodes, the association's fair share.
  if (!s.slurm) {
    r.in.job_error = s.slurm_missing;
    co_return Result<void>{};
  }
  slurm::Client& slurm = *s.slurm;
  std::optional<std::int64_t> labelled;
  if (auto it = r.pod.metadata.labels.find(std::string(bridge::kJobIdLabel));
      it != r.pod.metadata.labels.end()) {
    try {
      labelled = std::stoll(it->second);
    } catch (const std::exception&) {
      r.in.job_error =
          fmt::format("the pod's label {}={} is no job id", bridge::kJobIdLabel, it->second);
    }
  }
  if (labelled) {
    Result<slurm::JobInfo> job = co_await slurm.GetJob(*labelled);
    if (job) {
      r.in.job = std::move(*job);
      r.in.job_source = "label";
    } else if (job.error().code == ErrorCode::kNotFound) {
      r.in.job_error = fmt::format("Slurm no longer knows job {} (the pod's label)", *labelled);
    } else {
      r.in.job_error = Words(job.error());
    }
  }
  if (!r.in.job && r.in.group && !labelled) {
    // No label: the live job tagged for the group, among the jobs the scheduler's message and
    // the group's members name (wiring/bridge_jobs.h); never Slurm's whole list.
    const std::vector<std::int64_t> candidates = CandidateJobIds(r.pod, r.in.members);
    for (std::int64_t id : candidates) {
      Result<slurm::JobInfo> j = co_await slurm.GetJob(id);
      if (!j) {
        if (j.error().code == ErrorCode::kNotFound) continue;
        r.in.job_error = Words(j.error());
        break;
      }
      std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j->admin_comment);
      if (!tag || !tag->BelongsTo(s.config.cluster_name, scheduler)) continue;
      if (tag->group != r.in.group->key || bridge::JobEnded(j->BaseState())) continue;
      if (j->het_job_id != 0 && j->het_job_offset != 0) continue;
      r.in.job = std::move(*j);
      r.in.job_source = "tag";
      break;
    }
  }
  if (r.in.job) {
    std::string account = r.in.job->account;
    std::string user = r.in.job->user_name;
    Result<std::vector<slurm::Share>> shares =
        co_await slurm.Shares(std::move(account), std::move(user));
    if (shares) {
      for (const slurm::Share& sh : *shares) {
        if (sh.user && sh.name == r.in.job->user_name && sh.account == r.in.job->account) {
          r.in.fairshare = sh.fairshare;
        }
      }
    }
  }
  Result<std::vector<slurm::NodeInfo>> slurm_nodes = co_await slurm.ListNodes();
  if (slurm_nodes) {
    for (const slurm::NodeInfo& n : *slurm_nodes) r.in.slurm_nodes.push_back(n.name);
  }
  co_return Result<void>{};
}

}  // namespace

int RunExplain(const ToolOptions& options, const std::string& pod, std::ostream& out,
               std::ostream& err) {
  Result<std::unique_ptr<Session>> session = OpenSession(options);
  if (!session) {
    err << options.command << " explain: " << session.error().message << "\n";
    return 1;
  }
  return ExplainPod(**session, options, pod, out, err);
}

int ExplainPod(Session& s, const ToolOptions& options, const std::string& pod, std::ostream& out,
               std::ostream& err) {
  const std::string cmd = options.command + " explain";
  Read read;
  Result<Result<void>> ran = RunOnLoop(s, ReadAll(s, pod, read));
  if (!ran) {
    err << cmd << ": " << ran.error().message << "\n";
    return 1;
  }
  if (const Result<void>& result = *ran; !result) {
    err << cmd << ": pod " << s.namespace_ << "/" << pod << ": " << result.error().ToString()
        << "\n";
    return 1;
  }
  read.in.now = NowUnix();
  const bridge::Explanation e = bridge::Explain(read.in);
  out << (options.output == "json" ? bridge::RenderJson(e) : bridge::RenderText(e, read.in.now));
  return 0;
}

}  // namespace sb::explain
