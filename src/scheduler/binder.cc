// SPDX-License-Identifier: Apache-2.0
#include "scheduler/binder.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "bridge/dra/claims.h"
#include "bridge/dra/slices.h"
#include "bridge/gres.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "kube/codec.h"
#include "scheduler/stats.h"

namespace sb::scheduler {
namespace asio = boost::asio;
using asio::awaitable;
using kube::Pod;

namespace {

// /resources/{job_id} not to be had from this slurmrestd: a data_parser older than v0.0.44, a
// 404 that is not Slurm's answer about a job (no Slurm error in it: slurmrestd's "Unable to find
// requested URL endpoint"), or access denied to this user.
bool ResourcesUnavailable(const Error& e) {
  return e.code == ErrorCode::kUnimplemented || e.code == ErrorCode::kPermissionDenied ||
         (e.code == ErrorCode::kNotFound && e.details.empty());
}

// {"metadata":{"labels":{...},"finalizers":[...]},"spec":{"tolerations":[...]}} as a strategic
// merge patch: labels merge by key, finalizers merge as a set, tolerations are replaced whole
// (they have no merge key), so the list sent is the pod's plus ours.
std::string LabelPatch(const Pod& pod, std::int64_t job_id, const std::string& scheduler_name,
                       const std::map<std::string, std::string>& annotations, int het_offset) {
  std::vector<std::string> labels;
  for (const auto& [k, v] : JobLabels(job_id, het_offset)) {
    labels.push_back(fmt::format("{}:{}", kube::JsonQuote(k), kube::JsonQuote(v)));
  }
  std::string meta = fmt::format("\"labels\":{{{}}},\"finalizers\":[{}]", fmt::join(labels, ","),
                                 kube::JsonQuote(bridge::kFinalizer));
  if (!annotations.empty()) {
    std::vector<std::string> pairs;
    for (const auto& [k, v] : annotations) {
      pairs.push_back(fmt::format("{}:{}", kube::JsonQuote(k), kube::JsonQuote(v)));
    }
    meta += fmt::format(",\"annotations\":{{{}}}", fmt::join(pairs, ","));
  }
  const bool tolerated = bridge::ToleratesManagedNode(pod, scheduler_name);
  // Each toleration exactly as stored: a field left out stays out (the API does not default
  // `operator`), since the apiserver refuses an update that changes an existing one (review N-2).
  std::vector<std::string> tols;
  for (const kube::Toleration& t : pod.spec.tolerations) {
    std::vector<std::string> fields;
    const auto field = [&](std::string_view name, const std::string& value) {
      if (!value.empty()) fields.push_back(fmt::format("\"{}\":{}", name, kube::JsonQuote(value)));
    };
    field("key", t.key);
    field("operator", t.operator_);
    field("value", t.value);
    field("effect", t.effect);
    if (t.toleration_seconds) {
      fields.push_back(fmt::format("\"tolerationSeconds\":{}", *t.toleration_seconds));
    }
    tols.push_back(fmt::format("{{{}}}", fmt::join(fields, ",")));
  }
  std::string spec;
  if (!tolerated) {
    tols.push_back(bridge::ManagedNodeTolerationJson(scheduler_name));
    spec = fmt::format(",\"spec\":{{\"tolerations\":[{}]}}", fmt::join(tols, ","));
  }
  return fmt::format("{{\"metadata\":{{{}}}{}}}", meta, spec);
}

// Whether `labels` has every label of `want`, with its value.
bool CarriesLabels(const std::map<std::string, std::string>& labels,
                   const std::map<std::string, std::string>& want) {
  return std::ranges::all_of(want, [&](const auto& kv) {
    auto l = labels.find(kv.first);
    return l != labels.end() && l->second == kv.second;
  });
}

}  // namespace

std::map<std::string, std::string> JobLabels(std::int64_t job_id, int het_offset) {
  std::map<std::string, std::string> out{
      {std::string(bridge::kJobIdLabel), std::to_string(job_id)}};
  if (het_offset >= 0) {
    out.emplace(bridge::kHetJobIdLabel, std::to_string(job_id));
    out.emplace(bridge::kHetJobOffsetLabel, std::to_string(het_offset));
  }
  return out;
}

bool Labelled(const Pod& pod, std::int64_t job_id, const std::string& scheduler_name,
              int het_offset, bool labels_ride_binding) {
  if (!labels_ride_binding && !CarriesLabels(pod.metadata.labels, JobLabels(job_id, het_offset))) {
    return false;
  }
  return bridge::HasFinalizer(pod) && bridge::ToleratesManagedNode(pod, scheduler_name);
}

std::vector<Assignment> Annotate(const std::vector<std::pair<const Pod*, std::string>>& assign,
                                 const std::map<std::string, std::string>& kube_node_of,
                                 const std::vector<std::string>& slurm_nodes,
                                 const std::vector<std::string>& gres_detail) {
  std::map<std::string, std::string> slurm_name_of;  // Kubernetes node -> Slurm node
  for (const auto& [slurm_name, kube_name] : kube_node_of) slurm_name_of[kube_name] = slurm_name;
  std::vector<Assignment> out;
  for (const auto& [pod, node] : assign) {
    Assignment& a = out.emplace_back(Assignment{.pod = pod, .node = node});
    a.annotations.emplace(bridge::kNodeAnnotation, node);
    const auto slurm_name = slurm_name_of.find(node);
    if (slurm_name == slurm_name_of.end()) continue;
    const std::string gpus = bridge::GpuIndicesOn(gres_detail, slurm_nodes, slurm_name->second);
    if (!gpus.empty()) a.annotations.emplace(bridge::kJobGpusAnnotation, gpus);
  }
  return out;
}

Binder::Binder(kube::Client& kube, slurm::Client& slurm, kube::EventRecorder& recorder,
               const bridge::Config& config, Stats& stats)
    : kube_(kube), slurm_(slurm), recorder_(recorder), config_(config), stats_(stats) {}

awaitable<Result<Allocation>> Binder::ReadAllocation(std::int64_t id, bool layout_first) {
  // A job this process submitted and saw RUNNING at its last poll: its nodes and GPUs from its
  // resource layout, a reply of about 1 KB instead of the 28 KB job record (measured: 3.3
  // instead of 4.5-5.7 ms of slurmctld and slurmrestd CPU). Anything else, or a layout Slurm
  // cannot give, reads the job.
  if (layout_first && resources_endpoint_) {
    Result<std::vector<slurm::NodeAllocation>> layout = co_await slurm_.JobResources(id);
    if (layout && !layout->empty()) {
      std::vector<std::string> names;
      Allocation a;
      for (const slurm::NodeAllocation& n : *layout) {
        names.push_back(n.node);
        a.gres_detail.push_back(bridge::GresDetail(n.gres));
      }
      a.nodes = fmt::format("{}", fmt::join(names, ","));
      a.layout = std::move(*layout);  // for WriteClaims
      co_return a;
    }
    if (!layout && ResourcesUnavailable(layout.error())) {
      // An older slurmrestd without /resources/, or a user Slurm does not show layouts to: the
      // job record from now on.
      spdlog::info("Slurm gives no job resource layout ({}); reading whole jobs instead",
                   layout.error().ToString());
      resources_endpoint_ = false;
    } else if (!layout && layout.error().code != ErrorCode::kFailedPrecondition &&
               layout.error().code != ErrorCode::kNotFound) {
      co_return tl::unexpected(layout.error());  // transient: with the queue's backoff
    }
    // Not running after all (422), gone (404), or an empty layout: the job record says which.
  }
  // A heterogeneous job's id answers every component (all allocated at once, or none).
  Result<std::vector<slurm::JobInfo>> records = co_await slurm_.GetJobRecords(id);
  if (!records) {
    if (records.error().code == ErrorCode::kNotFound) {
      co_return Allocation{.state = Allocation::State::kGone, .base_state = "GONE"};
    }
    co_return tl::unexpected(records.error());
  }
  const slurm::JobInfo& info = records->front();
  Allocation a{.base_state = std::string(info.BaseState()),
               .nodes = info.nodes,
               .gres_detail = info.gres_detail,
               .partition = info.partition};
  if (a.base_state != "RUNNING" || a.nodes.empty()) a.state = Allocation::State::kNotRunning;
  if (info.het_job_id == id) {
    for (const slurm::JobInfo& c : *records) {
      if (c.het_job_id != id) continue;
      // A component's offset is below the record count; one that is not (a broken reply) is
      // no component of this job, not a size to allocate (review R-11).
      if (c.het_job_offset < 0 || static_cast<std::size_t>(c.het_job_offset) >= records->size()) {
        continue;
      }
      const auto k = static_cast<std::size_t>(c.het_job_offset);
      if (a.components.size() <= k) a.components.resize(k + 1);
      a.components[k] = {.nodes = c.nodes, .gres_detail = c.gres_detail};
      if (c.BaseState() != "RUNNING" || c.nodes.empty()) a.state = Allocation::State::kNotRunning;
    }
  }
  co_return a;
}

awaitable<Result<std::vector<Holder>>> Binder::ReadHolders(const std::string& ns, std::int64_t id) {
  kube::ListOptions opts;
  opts.label_selector = fmt::format("{}={}", bridge::kJobIdLabel, id);
  Result<kube::List<Pod>> labelled = co_await kube::ListAs<Pod>(kube_, kube::PodsRef(ns), opts);
  if (!labelled) co_return tl::unexpected(labelled.error());
  std::vector<Holder> out;
  for (const Pod& p : labelled->items) {
    if (p.spec.node_name.empty()) continue;
    const bool done = bridge::PodFinished(p);
    int part = 0;
    if (auto o = p.metadata.labels.find(std::string(bridge::kHetJobOffsetLabel));
        o != p.metadata.labels.end()) {
      std::from_chars(o->second.data(), o->second.data() + o->second.size(), part);
    }
    out.push_back({.uid = p.metadata.uid,
                   .node = p.spec.node_name,
                   .active = !done,
                   .terminating = !done && !p.metadata.deletion_timestamp.empty(),
                   .part = part});
  }
  co_return out;
}

awaitable<Result<TagMembers>> Binder::Retag(
    const bridge::GroupSpec& spec, std::int64_t id, const std::vector<Holder>& holders,
    const std::vector<const Pod*>& waiting,
    const std::vector<std::pair<const Pod*, std::string>>& assign) {
  // Read-modify-write: the tag as Slurm has it now (an earlier refill may have changed it since
  // any job list the scheduler holds).
  Result<slurm::JobInfo> info = co_await slurm_.GetJob(id);
  if (!info) co_return tl::unexpected(info.error());
  TagMembers current;
  std::vector<std::string> parts;  // a heterogeneous job's, kept
  if (std::optional<bridge::JobTag> tag = bridge::ParseJobTag(info->admin_comment);
      tag && tag->BelongsTo(config_.cluster_name, config_.scheduler_name)) {
    current = {.uids = tag->uids, .pods = tag->pods};
    parts = std::move(tag->parts);
  }
  TagMembers merged = MergeTag(current, holders, waiting, assign);
  bridge::JobTag tag{.pods = merged.pods,
                     .uids = merged.uids,
                     .group = spec.key,
                     .parts = std::move(parts),
                     .cluster = config_.cluster_name,
                     .scheduler = config_.scheduler_name};
  slurm::JobDescription change;
  change.admin_comment = bridge::EncodeJobTag(tag);
  Result<bool> r = co_await slurm_.UpdateJob(id, std::move(change));
  if (!r) {
    spdlog::warn("{}: adding pods to the tag of Slurm job {} failed: {}", spec.key, id,
                 r.error().ToString());
    co_return tl::unexpected(r.error());
  }
  co_return merged;
}

awaitable<Result<void>> Binder::LabelPod(const Pod& pod, std::int64_t job_id,
                                         std::map<std::string, std::string> annotations,
                                         int het_offset) {
  std::string patch = LabelPatch(pod, job_id, config_.scheduler_name, annotations, het_offset);
  Result<Pod> r = co_await kube::PatchAs<Pod>(
      kube_, kube::PodsRef(pod.metadata.namespace_).WithName(pod.metadata.name),
      kube::PatchType::kStrategicMerge, std::move(patch));
  if (r || r.error().code == ErrorCode::kNotFound) co_return Result<void>{};
  if (r.error().code == ErrorCode::kInvalidArgument) {
    // Refused (a validation rule, an admission policy): said on the pod, not only in the log,
    // and tried again with the queue's backoff (a stale cache is the usual cause).
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod.metadata), kube::EventType::kWarning,
                   "SlurmJobLabelRefused",
                   fmt::format("the apiserver refused the label of Slurm job {}: {}", job_id,
                               ErrorWords(r.error())));
  }
  co_return tl::unexpected(r.error());
}

Error Binder::ClaimFailed(std::int64_t job_id, const Pod& pod, std::string message) {
  const std::string msg = fmt::format("Slurm job {}: {}", job_id, message);
  recorder_.Emit(kube::MakeObjectReference("v1", "Pod", pod.metadata), kube::EventType::kWarning,
                 "DeviceAllocationFailed", msg);
  spdlog::warn("{}/{}: {}", pod.metadata.namespace_, pod.metadata.name, msg);
  return Error{ErrorCode::kFailedPrecondition, msg};
}

awaitable<Result<void>> Binder::WriteClaims(std::int64_t job_id, std::vector<Assignment>& assign,
                                            const std::map<std::string, std::string>& slurm_name_of,
                                            const DraInput& dra, const Allocation* allocation) {
  std::vector<Assignment*> asking;
  for (Assignment& a : assign) {
    if (bridge::HasDraResources(*a.pod, dra.resource_names)) asking.push_back(&a);
  }
  if (asking.empty() || dra.profiles == nullptr) co_return Result<void>{};
  // A failure is said on the pod and returned: the group is tried again with the queue's backoff
  // (a ResourceSlice published late, a driver restarted, an apiserver hiccup).
  // What each pod asks, before any co_await: the templates' objects belong to the scheduler's
  // cache, which a deleted pod leaves meanwhile.
  std::vector<bridge::ClaimPlanPod> pods;
  for (Assignment* a : asking) {
    const Pod& pod = *a->pod;
    const bridge::ObjectsByName* templates = nullptr;
    if (dra.claim_templates != nullptr) {
      auto it = dra.claim_templates->find(pod.metadata.namespace_ + "/" + pod.metadata.name);
      if (it != dra.claim_templates->end()) templates = &it->second;
    }
    Result<std::vector<bridge::DraRequest>> requests = bridge::PodDraRequests(
        pod, *dra.profiles, dra.device_classes, bridge::PodResourceClaimsOf(pod),
        templates != nullptr ? *templates : bridge::ObjectsByName{});
    if (!requests) co_return tl::unexpected(ClaimFailed(job_id, pod, requests.error().message));
    auto slurm_name = slurm_name_of.find(a->node);
    pods.push_back({.pod = &pod,
                    .node = a->node,
                    .slurm_node = slurm_name == slurm_name_of.end() ? "" : slurm_name->second,
                    .requests = std::move(*requests)});
  }
  Result<bridge::ClaimPlanInput> in = co_await ReadDraInputs(job_id, std::move(pods), allocation);
  if (!in) co_return tl::unexpected(in.error());
  const bridge::ClaimsPlan plan = bridge::PlanClaims(*in, *dra.profiles);
  if (plan.failed_pod) {
    co_return tl::unexpected(ClaimFailed(job_id, *asking[*plan.failed_pod]->pod, plan.problem));
  }
  co_return co_await WriteClaimObjects(job_id, plan, asking);
}

awaitable<Result<bridge::ClaimPlanInput>> Binder::ReadDraInputs(
    std::int64_t job_id, std::vector<bridge::ClaimPlanPod> pods, const Allocation* known) {
  bridge::ClaimPlanInput in{.pods = std::move(pods)};
  if (known != nullptr && !known->layout.empty()) {
    in.layout = known->layout;  // read by ReadAllocation in this bind
  } else {
    Result<std::vector<slurm::NodeAllocation>> layout = co_await slurm_.JobResources(job_id);
    if (!layout) {
      co_return tl::unexpected(ClaimFailed(job_id, *in.pods.front().pod,
                                           "reading the job's resource layout (the GPU indices "
                                           "and cores Slurm gave it) failed: " +
                                               ErrorWords(layout.error())));
    }
    in.layout = std::move(*layout);
  }
  for (const bridge::ClaimPlanPod& p : in.pods) {
    if (in.slices.contains(p.node)) continue;
    kube::ListOptions opts;
    opts.field_selector = "spec.nodeName=" + p.node;
    // (Named, not temporaries: gcc 12 destroys a temporary argument of a co_await twice.)
    kube::ResourceRef slices_ref = kube::DraRef("resourceslices");
    Result<kube::List<kube::GenericObject>> listed =
        co_await kube::ListAllAs<kube::GenericObject>(kube_, slices_ref, opts);
    if (!listed) {
      co_return tl::unexpected(
          ClaimFailed(job_id, *p.pod,
                      fmt::format("listing the ResourceSlices of node {} failed: {}", p.node,
                                  ErrorWords(listed.error()))));
    }
    std::vector<bridge::ResourceSliceInfo>& slices = in.slices[p.node];
    for (const kube::GenericObject& o : listed->items) {
      Result<bridge::ResourceSliceInfo> slice = bridge::ParseResourceSlice(o);
      if (!slice) {
        spdlog::warn("ResourceSlice {} left out: {}", o.metadata.name, slice.error().message);
        continue;
      }
      slices.push_back(std::move(*slice));
    }
  }
  co_return in;
}

awaitable<Result<void>> Binder::WriteClaimObjects(std::int64_t job_id,
                                                  const bridge::ClaimsPlan& plan,
                                                  const std::vector<Assignment*>& pods) {
  for (std::size_t i = 0; i < plan.pods.size(); ++i) {
    const bridge::PodClaimWrites& claims = plan.pods[i];
    Assignment* a = pods[i];
    const Pod& pod = *a->pod;
    const kube::ObjectMeta& m = pod.metadata;
    const auto allocated = [&](const std::string& claim) {
      ++stats_.claims_written;
      recorder_.Emit(kube::MakeObjectReference("v1", "Pod", m), kube::EventType::kNormal,
                     "DevicesAllocated",
                     fmt::format("ResourceClaim {} holds what Slurm job {} was given on {}: {}",
                                 claim, job_id, a->node, fmt::join(claims.devices, ", ")));
    };
    for (const bridge::PodClaimWrites::StatusWrite& w : claims.template_claims) {
      kube::ResourceRef status_ref =
          kube::DraRef("resourceclaims", m.namespace_).WithName(w.claim).WithSubresource("status");
      std::string body = w.body;
      Result<std::string> status =
          co_await kube_.Patch(status_ref, kube::PatchType::kJsonMerge, std::move(body));
      if (!status) {
        co_return tl::unexpected(
            ClaimFailed(job_id, pod,
                        fmt::format("writing the allocation of ResourceClaim {} failed: {}",
                                    w.claim, ErrorWords(status.error()))));
      }
      allocated(w.claim);
    }
    if (!claims.extended) continue;
    const std::string& name = claims.extended_name;
    const kube::ResourceRef claim = kube::DraRef("resourceclaims", m.namespace_).WithName(name);
    const kube::ResourceRef claim_status = claim.WithSubresource("status");
    const kube::ResourceRef collection = kube::DraRef("resourceclaims", m.namespace_);
    Result<std::string> created = co_await kube_.Create(collection, claims.extended->object_json);
    if (!created && created.error().code == ErrorCode::kAlreadyExists) {
      // A retry: the claim made before, when it is this pod's.
      Result<kube::GenericObject> found = co_await kube::GetAs<kube::GenericObject>(kube_, claim);
      const bool mine = found && std::ranges::any_of(
                                     found->metadata.owner_references,
                                     [&](const kube::OwnerReference& o) { return o.uid == m.uid; });
      if (mine) created = std::string();
    }
    if (!created) {
      co_return tl::unexpected(ClaimFailed(
          job_id, pod,
          fmt::format("creating ResourceClaim {} failed: {}", name, ErrorWords(created.error()))));
    }
    Result<std::string> status = co_await kube_.Patch(claim_status, kube::PatchType::kJsonMerge,
                                                      claims.extended->status_json);
    Result<Pod> told = Result<Pod>(tl::unexpected(Error{ErrorCode::kInternal, "not written"}));
    if (status) {
      std::string patch = bridge::ExtendedResourceClaimStatusPatch(name, claims.extended->mappings);
      told = co_await kube::PatchPodStatus(kube_, m.namespace_, m.name, kube::PatchType::kJsonMerge,
                                           std::move(patch));
    }
    if (!status || !told) {
      // Never a claim allocated for a pod that does not know of it (upstream #36): gone again.
      const Error& why = !status ? status.error() : told.error();
      const kube::DeleteOptions options;
      Result<std::string> deleted = co_await kube_.Delete(claim, options);
      if (!deleted && deleted.error().code != ErrorCode::kNotFound) {
        spdlog::warn("{}/{}: deleting ResourceClaim {} failed: {}", m.namespace_, m.name, name,
                     deleted.error().ToString());
      }
      if (why.code == ErrorCode::kNotFound && told.error().code == ErrorCode::kNotFound) {
        continue;  // the pod is gone
      }
      co_return tl::unexpected(
          ClaimFailed(job_id, pod,
                      fmt::format("writing the allocation of ResourceClaim {} failed: {}", name,
                                  ErrorWords(why))));
    }
    a->annotations[std::string(bridge::kResourceClaimAnnotation)] = name;
    allocated(name);
  }
  co_return Result<void>{};
}

awaitable<Binder::Bound> Binder::BindPods(std::int64_t job_id,
                                          const std::vector<Assignment>& assign) {
  Bound out;
  for (const Assignment& a : assign) {
    const kube::ObjectMeta& m = a.pod->metadata;
    Result<void> b =
        co_await kube::BindPod(kube_, m.namespace_, m.name, m.uid, a.node, a.annotations, a.labels);
    if (!b) {
      ++stats_.bind_errors;
      if (b.error().code == ErrorCode::kNotFound) continue;  // deleted meanwhile
      Result<Pod> now = co_await kube::GetPod(kube_, m.namespace_, m.name);
      if (now && now->spec.node_name == a.node) continue;  // bound already (a retry)
      if (now && now->metadata.uid == m.uid && !now->spec.node_name.empty()) {
        // Another writer bound it first (the apiserver's 409: a second scheduler, a hand-made
        // Binding; test audit N4), outside the job's allocation. The pod is left where it is;
        // its job-id label goes, so that the job ends once none of its pods holds it (the
        // group's next pass) and the job's end never deletes this pod.
        ++stats_.bound_elsewhere;
        // (Built before the co_await: gcc 12 cannot keep the map temporary across it.)
        std::string unlabel =
            kube::EncodeMetadataMergePatch({{std::string(bridge::kJobIdLabel), std::nullopt}}, {});
        Result<Pod> unlabelled =
            co_await kube::PatchAs<Pod>(kube_, kube::PodsRef(m.namespace_).WithName(m.name),
                                        kube::PatchType::kJsonMerge, std::move(unlabel));
        if (!unlabelled) {
          spdlog::warn("{}/{}: removing the job-id label failed: {}", m.namespace_, m.name,
                       unlabelled.error().ToString());
        }
        const std::string msg = fmt::format(
            "bound to {} by another writer before this scheduler bound it to {} for Slurm job "
            "{}: left there, and no longer a pod of that job",
            now->spec.node_name, a.node, job_id);
        recorder_.Emit(kube::MakeObjectReference("v1", "Pod", m), kube::EventType::kWarning,
                       "BoundElsewhere", msg);
        spdlog::warn("{}/{}: {}", m.namespace_, m.name, msg);
        out.error = MakeError(ErrorCode::kConflict, msg).value();
        co_return out;
      }
      const std::string msg = fmt::format("binding to {} for Slurm job {} failed: {}", a.node,
                                          job_id, b.error().message);
      recorder_.Emit(kube::MakeObjectReference("v1", "Pod", m), kube::EventType::kWarning,
                     "FailedBinding", msg);
      out.error = b.error();
      co_return out;
    }
    ++stats_.pods_bound;
    recorder_.Emit(kube::MakeObjectReference("v1", "Pod", m), kube::EventType::kNormal, "Scheduled",
                   fmt::format("Successfully assigned {}/{} to {} (Slurm job {})", m.namespace_,
                               m.name, a.node, job_id));
    spdlog::info("{}/{}: bound to {} (Slurm job {})", m.namespace_, m.name, a.node, job_id);
    out.bound.push_back(a);
    if (!a.labels.empty()) {
      // (Named, not a temporary: gcc 12 destroys a temporary argument of a co_await twice.)
      Unverified pod{.ns = m.namespace_, .name = m.name, .labels = a.labels};
      co_await AfterLabelledBinding(std::move(pod));
    }
  }
  co_return out;
}

awaitable<void> Binder::AfterLabelledBinding(Unverified pod) {
  if (binding_labels_ == BindingLabels::kCarried) co_return;
  if (binding_labels_ == BindingLabels::kDropped) {
    co_await PatchLabels(pod);  // bound by a worker that began before the verdict
    co_return;
  }
  unverified_.push_back(std::move(pod));
  if (verifying_) co_return;  // another worker reads one back
  verifying_ = true;
  const Unverified first = unverified_.front();
  Result<Pod> read = co_await kube::GetPod(kube_, first.ns, first.name);
  verifying_ = false;
  if (!read) {
    if (read.error().code != ErrorCode::kNotFound) {
      spdlog::warn("{}/{}: reading the pod back after its Binding failed: {}", first.ns, first.name,
                   read.error().ToString());
    } else {
      std::erase_if(unverified_,
                    [&](const Unverified& u) { return u.ns == first.ns && u.name == first.name; });
    }
    co_return;  // the next labelled Binding reads one back
  }
  if (CarriesLabels(read->metadata.labels, first.labels)) {
    binding_labels_ = BindingLabels::kCarried;
    unverified_.clear();
    spdlog::info(
        "the apiserver copies a Binding's labels onto the pod: the job-id label rides "
        "the Binding");
    co_return;
  }
  binding_labels_ = BindingLabels::kDropped;
  spdlog::info(
      "the apiserver drops a Binding's labels (Kubernetes before 1.35, or feature "
      "PodTopologyLabelsAdmission off): pods carry the job-id label before their "
      "Binding from now on");
  std::vector<Unverified> bound = std::exchange(unverified_, {});
  for (const Unverified& u : bound) co_await PatchLabels(u);
}

awaitable<void> Binder::PatchLabels(const Unverified& pod) {
  std::map<std::string, std::optional<std::string>> labels;
  for (const auto& [k, v] : pod.labels) labels.emplace(k, v);
  std::string patch = kube::EncodeMetadataMergePatch(labels, {});
  Result<Pod> r = co_await kube::PatchAs<Pod>(kube_, kube::PodsRef(pod.ns).WithName(pod.name),
                                              kube::PatchType::kJsonMerge, std::move(patch));
  ++stats_.bind_patches;
  if (!r && r.error().code != ErrorCode::kNotFound) {
    spdlog::warn("{}/{}: labelling the bound pod with its job id failed: {}", pod.ns, pod.name,
                 r.error().ToString());
  }
}

}  // namespace sb::scheduler
