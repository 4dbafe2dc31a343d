// SPDX-License-Identifier: Apache-2.0
//
// bridge/group.h
//
// Which pods Slurm allocates together (pure; the owners are fetched by the caller).
//
//   0. A pod that names a PodGroup of the Workload API (spec.schedulingGroup.podGroupName;
//      scheduling.k8s.io/v1beta1, Kubernetes 1.37, or v1alpha2, 1.36, whichever discovery
//      offers, v1beta1 first: WorkloadPodGroupApiVersion): with the PodGroup's
//      spec.schedulingPolicy.gang, all pods of the namespace that name it, size gang.minCount,
//      key "WorkloadPodGroup/<ns>/<name>", kind PodGroup (the same for both versions); with
//      schedulingPolicy.basic (no gang), the pod alone. Annotations from the PodGroup (the
//      root's win, as for 1.). It wins over every other signal; a PodGroup that could not be
//      read, or an odd policy, is an error (the pod is never scheduled alone).
//   1. A pod labelled scheduling.x-k8s.io/pod-group=<pg> whose coscheduling PodGroup
//      (scheduling.x-k8s.io/v1alpha1) could be read: all pods of the namespace with that label,
//      size spec.minMember; annotations from the PodGroup. (Its spec.scheduleTimeoutSeconds
//      only times the scheduler's warning, ScheduleTimeoutSeconds.)
//   2. A pod of a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) with the
//      leaderworkerset.sigs.k8s.io/group-key label: the pods of the namespace with the
//      same hash, size spec.leaderWorkerTemplate.size, job name <lws>-<group index>.
//   3. A pod of a batch Job or JobSet whose annotation slurmjob.slinky.slurm.net/gang is "true":
//      all its pods as one gang (size: the Job's parallelism, capped by the completions still
//      to do, completions - status.succeeded, so that a last smaller wave runs; a JobSet's
//      sum over replicatedJobs of replicas x parallelism).
//   4. Otherwise the pod alone (a Job's or JobSet's pod is one job each, as upstream).
// Annotations are read from the root: the highest supported owner (Job, JobSet,
// LeaderWorkerSet, PodGroup) in the controller chain, else the highest owner that could be
// read, else the pod itself. A Job's activeDeadlineSeconds becomes the time limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bridge/translate.h"
#include "common/error.h"
#include "kube/types.h"

namespace sb::bridge {

// The Workload API's group, and the prefix of its PodGroups' group keys (any version).
inline constexpr std::string_view kWorkloadApiGroup = "scheduling.k8s.io";
inline constexpr std::string_view kWorkloadPodGroupKeyPrefix = "WorkloadPodGroup/";
// The conditions the bridge writes on a Workload API PodGroup: v1alpha2's, and v1beta1's (which,
// once True, stays True: the API says it never reverts to False).
inline constexpr std::string_view kPodGroupScheduled = "PodGroupScheduled";
inline constexpr std::string_view kPodGroupInitiallyScheduled = "PodGroupInitiallyScheduled";

// The coscheduling PodGroup's API version (scheduler-plugins), named by kPodGroupLabel.
inline constexpr std::string_view kCoschedulingApiVersion = "scheduling.x-k8s.io/v1alpha1";

// The kinds that root a group.
[[nodiscard]] bool IsSupportedOwnerKind(std::string_view kind);

// `owners`: the pod's controller chain as far as it could be read, nearest first.
// `pod_group`: the coscheduling PodGroup named by the pod's label, when it could be read.
// `workload_pod_group`: the Workload API PodGroup named by spec.schedulingGroup, when read.
// Errors (kInvalidArgument) name the object and field that could not be read.
[[nodiscard]] Result<GroupSpec> ResolveGroup(
    const kube::Pod& pod, const std::vector<kube::GenericObject>& owners,
    const kube::GenericObject* pod_group, const kube::GenericObject* workload_pod_group = nullptr);

// What to do when a PodGroup a pod names could not be read: a transient error is retried (the
// pod is never scheduled alone meanwhile); NotFound, Forbidden and the like are reported on the
// pod, which waits.
enum class PodGroupMiss { kRetry, kReportAndWait };
[[nodiscard]] PodGroupMiss OnPodGroupError(ErrorCode code);

// The Workload API version to read PodGroups in, of the versions of scheduling.k8s.io the
// apiserver serves (discovery): "scheduling.k8s.io/v1beta1" over "scheduling.k8s.io/v1alpha2",
// as upstream slurm-bridge picks; "" when it serves neither (the Workload API is off).
[[nodiscard]] std::string WorkloadPodGroupApiVersion(const std::vector<std::string>& served);

// The condition the bridge writes on a PodGroup of `api_version`: PodGroupInitiallyScheduled on
// v1beta1, PodGroupScheduled on v1alpha2 (and any other).
[[nodiscard]] std::string_view PodGroupConditionType(std::string_view api_version);

// A condition of a Workload API PodGroup's status, with its observedGeneration (0: not set).
struct PodGroupCondition {
  kube::Condition condition;
  std::int64_t observed_generation = 0;
};

// The condition `type` of a Workload API PodGroup's status, if it has one.
[[nodiscard]] std::optional<PodGroupCondition> FindPodGroupCondition(
    const kube::GenericObject& pod_group, std::string_view type);

// The PodGroupScheduled condition of a Workload API PodGroup's status, if it has one.
[[nodiscard]] std::optional<kube::Condition> PodGroupScheduledCondition(
    const kube::GenericObject& pod_group);

// A strategic-merge (or JSON merge) patch of podgroups/status that sets condition `type` (a
// metav1.Condition): status True or False, with observedGeneration when `observed_generation` is
// positive (the PodGroup's metadata.generation the condition was written for).
[[nodiscard]] std::string PodGroupConditionPatch(std::string_view type, bool scheduled,
                                                 std::string_view reason, std::string_view message,
                                                 std::string_view last_transition_time,
                                                 std::int64_t observed_generation = 0);

// PodGroupConditionPatch of PodGroupScheduled, without observedGeneration.
[[nodiscard]] std::string PodGroupScheduledPatch(bool scheduled, std::string_view reason,
                                                 std::string_view message,
                                                 std::string_view last_transition_time);

// A coscheduling PodGroup's (scheduling.x-k8s.io/v1alpha1) spec.scheduleTimeoutSeconds, when
// set and positive: how long its pods may wait short of minMember before the scheduler warns.
[[nodiscard]] std::optional<std::int64_t> ScheduleTimeoutSeconds(
    const kube::GenericObject& pod_group);

// Whether `pod` belongs to the group `spec` (same namespace and the grouping label or owner).
[[nodiscard]] bool InGroup(const kube::Pod& pod, const GroupSpec& spec);

}  // namespace sb::bridge
