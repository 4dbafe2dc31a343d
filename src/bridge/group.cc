// SPDX-License-Identifier: Apache-2.0
#include "bridge/group.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>

#include <fmt/format.h>
#include <boost/json.hpp>

#include "bridge/json_path.h"
#include "bridge/names.h"
#include "kube/codec.h"

namespace sb::bridge {
namespace json = boost::json;
namespace {

// A count in a workload's spec or status (replicas, parallelism, completions, minMember, size,
// succeeded): int32 in every API, clamped to [0, INT32_MAX] here because a CRD's schema may let
// any integer through, and the group size is a product and a sum of them. An integer beyond int64
// (which bridge/json_path.h reads as absent) counts 0, as it did when this file cast it to int64.
std::optional<std::int64_t> CountAt(const json::value& v, JsonPath path) {
  const json::value* x = JsonAt(v, path);
  if (x != nullptr && x->is_uint64() && !JsonInt(x)) return 0;
  std::optional<std::int64_t> n = JsonInt(x);
  if (!n) return n;
  return std::clamp<std::int64_t>(*n, 0, std::numeric_limits<std::int32_t>::max());
}

Result<json::value> ParseSpec(const kube::GenericObject& o) {
  if (o.spec_json.empty()) return json::value(json::object());
  boost::system::error_code ec;
  json::value v = json::parse(o.spec_json, ec);
  if (ec) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        fmt::format("{} {}/{}: spec is not JSON", o.kind, o.metadata.namespace_, o.metadata.name));
  }
  return v;
}

bool GangRequested(const kube::StringMap& annotations) {
  auto it = annotations.find(std::string(kGangAnnotation));
  if (it == annotations.end()) return false;
  std::string v = it->second;
  std::ranges::transform(v, v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v == "true";
}

}  // namespace

bool IsSupportedOwnerKind(std::string_view kind) {
  return kind == "Job" || kind == "JobSet" || kind == "LeaderWorkerSet" || kind == "PodGroup";
}

Result<GroupSpec> ResolveGroup(const kube::Pod& pod, const std::vector<kube::GenericObject>& owners,
                               const kube::GenericObject* pod_group,
                               const kube::GenericObject* workload_pod_group) {
  const std::string& ns = pod.metadata.namespace_;
  // The root: the highest supported owner, else the highest readable owner, else the pod.
  const kube::GenericObject* root = nullptr;
  const kube::GenericObject* job = nullptr;
  const kube::GenericObject* jobset = nullptr;
  const kube::GenericObject* lws = nullptr;
  for (const kube::GenericObject& o : owners) {
    if (IsSupportedOwnerKind(o.kind)) root = &o;
    if (o.kind == "Job" && job == nullptr) job = &o;
    if (o.kind == "JobSet" && jobset == nullptr) jobset = &o;
    if (o.kind == "LeaderWorkerSet" && lws == nullptr) lws = &o;
  }
  if (root == nullptr && !owners.empty()) root = &owners.back();

  GroupSpec g;
  g.namespace_ = ns;
  g.kind = root != nullptr ? root->kind : "Pod";
  g.annotations = root != nullptr ? root->metadata.annotations : pod.metadata.annotations;
  g.name = pod.metadata.name;
  g.key = "Pod/" + ns + "/" + pod.metadata.name;
  g.size = 1;
  if (job != nullptr) {
    Result<json::value> spec = ParseSpec(*job);
    if (!spec) return tl::unexpected(spec.error());
    if (std::optional<std::int64_t> ads = IntAt(*spec, {"activeDeadlineSeconds"});
        ads && *ads > 0) {
      g.time_limit_minutes = *ads / 60 + (*ads % 60 != 0 ? 1 : 0);  // rounded up, no overflow
    }
  }

  auto label = [&](std::string_view key) -> std::string {
    auto it = pod.metadata.labels.find(std::string(key));
    return it == pod.metadata.labels.end() ? std::string() : it->second;
  };

  // The Workload API first: spec.schedulingGroup is the pod's own (immutable) word, and
  // kube-scheduler 1.36 reads nothing else for it.
  if (const std::string& wpg = pod.spec.scheduling_group; !wpg.empty()) {
    if (workload_pod_group == nullptr) {
      // The caller reads the PodGroup first; without it the pod could start part of a gang.
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("spec.schedulingGroup names PodGroup {} (scheduling.k8s.io/"
                                   "v1beta1 or scheduling.k8s.io/v1alpha2), which could not be "
                                   "read: the pod is never scheduled alone",
                                   wpg));
    }
    Result<json::value> spec = ParseSpec(*workload_pod_group);
    if (!spec) return tl::unexpected(spec.error());
    // spec.schedulingPolicy is a union of `basic: {}` (standard scheduling, pod by pod) and
    // `gang: {minCount: int32 >= 1}` (all or nothing once minCount pods are there), with the
    // same field names in scheduling.k8s.io/v1alpha2 (Kubernetes 1.36 types.go) and v1beta1
    // (the 1.37 OpenAPI document: PodGroupSpec.schedulingPolicy, GangSchedulingPolicy.minCount;
    // minCount is mutable there, and the group's size follows it when the PodGroup is read
    // again). v1beta1's other spec fields (disruptionMode, priority, resourceClaims,
    // schedulingConstraints, parentCompositePodGroupName, workloadRef) are not read.
    const json::value* gang = JsonAt(*spec, {"schedulingPolicy", "gang"});
    const json::value* basic = JsonAt(*spec, {"schedulingPolicy", "basic"});
    const bool has_gang = gang != nullptr && !gang->is_null();
    const bool has_basic = basic != nullptr && !basic->is_null();
    const std::string what =
        fmt::format("PodGroup {}/{} ({})", ns, wpg,
                    workload_pod_group->api_version.empty() ? std::string(kWorkloadApiGroup)
                                                            : workload_pod_group->api_version);
    if (has_gang == has_basic) {
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: spec.schedulingPolicy must set exactly one of gang and "
                                   "basic",
                                   what));
    }
    kube::StringMap merged = workload_pod_group->metadata.annotations;
    if (root != nullptr) {
      for (const auto& [k, v] : root->metadata.annotations) merged[k] = v;
    }
    if (has_basic) {
      // Basic: no gang; each pod is a Slurm job of its own (annotations from the PodGroup).
      g.annotations = std::move(merged);
      return g;
    }
    std::optional<std::int64_t> min = IntAt(*gang, {"minCount"});
    if (!min || *min < 1 || *min > std::numeric_limits<std::int32_t>::max()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       fmt::format("{}: spec.schedulingPolicy.gang.minCount is not a positive "
                                   "32-bit integer",
                                   what));
    }
    g.kind = "PodGroup";
    g.key = std::string(kWorkloadPodGroupKeyPrefix) + ns + "/" + wpg;
    g.name = wpg;
    g.size = static_cast<int>(*min);
    g.annotations = std::move(merged);
    return g;
  }
  if (const std::string pg = label(kPodGroupLabel); !pg.empty() && pod_group != nullptr) {
    Result<json::value> spec = ParseSpec(*pod_group);
    if (!spec) return tl::unexpected(spec.error());
    g.kind = "PodGroup";
    g.key = "PodGroup/" + ns + "/" + pg;
    g.name = pg;
    g.size = static_cast<int>(std::max<std::int64_t>(1, CountAt(*spec, {"minMember"}).value_or(1)));
    kube::StringMap merged = pod_group->metadata.annotations;
    if (root != nullptr && root != pod_group) {
      for (const auto& [k, v] : root->metadata.annotations) merged[k] = v;
    }
    g.annotations = std::move(merged);
    return g;
  }
  if (const std::string hash = label(kLwsGroupHashLabel); !hash.empty() && lws != nullptr) {
    Result<json::value> spec = ParseSpec(*lws);
    if (!spec) return tl::unexpected(spec.error());
    g.kind = "LeaderWorkerSet";
    g.key = "LeaderWorkerSet/" + ns + "/" + lws->metadata.name + "/" + hash;
    const std::string index = label(kLwsGroupIndexLabel);
    g.name = lws->metadata.name + (index.empty() ? "" : "-" + index);
    g.size = static_cast<int>(
        std::max<std::int64_t>(1, CountAt(*spec, {"leaderWorkerTemplate", "size"}).value_or(1)));
    g.annotations = lws->metadata.annotations;
    return g;
  }
  if (jobset != nullptr && GangRequested(jobset->metadata.annotations)) {
    Result<json::value> spec = ParseSpec(*jobset);
    if (!spec) return tl::unexpected(spec.error());
    std::int64_t size = 0;
    if (const json::array* rjs = ArrayAt(*spec, {"replicatedJobs"}); rjs != nullptr) {
      for (const json::value& rj : *rjs) {
        std::int64_t replicas = CountAt(rj, {"replicas"}).value_or(1);
        std::int64_t par = CountAt(rj, {"template", "spec", "parallelism"}).value_or(1);
        if (std::optional<std::int64_t> comp = CountAt(rj, {"template", "spec", "completions"})) {
          par = std::min(par, *comp);
        }
        size =
            std::min<std::int64_t>(size + replicas * par, std::numeric_limits<std::int32_t>::max());
      }
    }
    g.kind = "JobSet";
    g.key = "JobSet/" + ns + "/" + jobset->metadata.name;
    g.name = jobset->metadata.name;
    g.size = static_cast<int>(std::max<std::int64_t>(1, size));
    g.annotations = jobset->metadata.annotations;
    return g;
  }
  if (job != nullptr && root == job && GangRequested(job->metadata.annotations)) {
    Result<json::value> spec = ParseSpec(*job);
    if (!spec) return tl::unexpected(spec.error());
    std::int64_t par = CountAt(*spec, {"parallelism"}).value_or(1);
    if (std::optional<std::int64_t> comp = CountAt(*spec, {"completions"})) {
      // The work left: the last wave of completions 5, parallelism 4 is one pod, not four.
      std::int64_t succeeded = 0;
      if (!job->status_json.empty()) {
        boost::system::error_code ec;
        json::value status = json::parse(job->status_json, ec);
        if (!ec) succeeded = CountAt(status, {"succeeded"}).value_or(0);
      }
      par = std::min(par, *comp - succeeded);
    }
    g.kind = "Job";
    g.key = "Job/" + ns + "/" + job->metadata.name;
    g.name = job->metadata.name;
    g.size = static_cast<int>(std::max<std::int64_t>(1, par));
    return g;
  }
  return g;
}

bool InGroup(const kube::Pod& pod, const GroupSpec& spec) {
  if (pod.metadata.namespace_ != spec.namespace_) return false;
  auto label = [&](std::string_view key) -> std::string {
    auto it = pod.metadata.labels.find(std::string(key));
    return it == pod.metadata.labels.end() ? std::string() : it->second;
  };
  if (spec.key.starts_with(kWorkloadPodGroupKeyPrefix)) {
    return pod.spec.scheduling_group == spec.name;
  }
  if (spec.kind == "PodGroup" && spec.key.starts_with("PodGroup/")) {
    return label(kPodGroupLabel) == spec.name;
  }
  if (spec.key.starts_with("LeaderWorkerSet/")) {
    std::string hash = label(kLwsGroupHashLabel);
    return !hash.empty() && spec.key.ends_with("/" + hash);
  }
  if (spec.key.starts_with("JobSet/")) return label(kJobSetNameLabel) == spec.name;
  if (spec.key.starts_with("Job/")) return label("job-name") == spec.name;
  return spec.key == "Pod/" + pod.metadata.namespace_ + "/" + pod.metadata.name;
}

std::string WorkloadPodGroupApiVersion(const std::vector<std::string>& served) {
  for (std::string_view version : {"v1beta1", "v1alpha2"}) {
    if (std::ranges::find(served, version) != served.end()) {
      return fmt::format("{}/{}", kWorkloadApiGroup, version);
    }
  }
  return {};
}

std::string_view PodGroupConditionType(std::string_view api_version) {
  return api_version == "scheduling.k8s.io/v1beta1" ? kPodGroupInitiallyScheduled
                                                    : kPodGroupScheduled;
}

std::optional<PodGroupCondition> FindPodGroupCondition(const kube::GenericObject& pod_group,
                                                       std::string_view type) {
  if (pod_group.status_json.empty()) return std::nullopt;
  boost::system::error_code ec;
  json::value status = json::parse(pod_group.status_json, ec);
  if (ec) return std::nullopt;
  const json::array* conds = ArrayAt(status, {"conditions"});
  if (conds == nullptr) return std::nullopt;
  auto str = [](const json::value& o, std::string_view k) { return StringAt(o, {k}); };
  for (const json::value& c : *conds) {
    if (str(c, "type") != type) continue;
    return PodGroupCondition{
        .condition = kube::Condition{.type = std::string(type),
                                     .status = str(c, "status"),
                                     .reason = str(c, "reason"),
                                     .message = str(c, "message"),
                                     .last_transition_time = str(c, "lastTransitionTime")},
        .observed_generation =
            std::max<std::int64_t>(0, IntAt(c, {"observedGeneration"}).value_or(0))};
  }
  return std::nullopt;
}

std::optional<kube::Condition> PodGroupScheduledCondition(const kube::GenericObject& pod_group) {
  std::optional<PodGroupCondition> c = FindPodGroupCondition(pod_group, kPodGroupScheduled);
  if (!c) return std::nullopt;
  return std::move(c->condition);
}

std::string PodGroupConditionPatch(std::string_view type, bool scheduled, std::string_view reason,
                                   std::string_view message, std::string_view last_transition_time,
                                   std::int64_t observed_generation) {
  // metav1.Condition: type, status, reason, message and lastTransitionTime are required;
  // observedGeneration is optional (int64, at least 0). Conditions merge by type.
  std::string generation =
      observed_generation > 0 ? fmt::format(",\"observedGeneration\":{}", observed_generation) : "";
  return fmt::format(
      "{{\"status\":{{\"conditions\":[{{\"type\":{},\"status\":\"{}\","
      "\"reason\":{},\"message\":{},\"lastTransitionTime\":{}{}}}]}}}}",
      kube::JsonQuote(type), scheduled ? "True" : "False", kube::JsonQuote(reason),
      kube::JsonQuote(message), kube::JsonQuote(last_transition_time), generation);
}

std::string PodGroupScheduledPatch(bool scheduled, std::string_view reason,
                                   std::string_view message,
                                   std::string_view last_transition_time) {
  return PodGroupConditionPatch(kPodGroupScheduled, scheduled, reason, message,
                                last_transition_time);
}

std::optional<std::int64_t> ScheduleTimeoutSeconds(const kube::GenericObject& pod_group) {
  Result<json::value> spec = ParseSpec(pod_group);
  if (!spec) return std::nullopt;
  // *int32 in the coscheduling types; a CRD's schema may let any integer through.
  std::optional<std::int64_t> seconds = CountAt(*spec, {"scheduleTimeoutSeconds"});
  if (!seconds || *seconds <= 0) return std::nullopt;
  return seconds;
}

PodGroupMiss OnPodGroupError(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNotFound:
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kUnauthenticated:
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnimplemented:
      return PodGroupMiss::kReportAndWait;
    default:
      return PodGroupMiss::kRetry;
  }
}

}  // namespace sb::bridge
