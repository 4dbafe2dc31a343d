// SPDX-License-Identifier: Apache-2.0
//
// bridge/names.h
//
// Every name the bridge writes to or reads from Kubernetes objects, spelled as upstream
// slurm-bridge spells them, so that its users can switch without touching manifests.
#pragma once

#include <array>
#include <string_view>

namespace sb::bridge {

// The default spec.schedulerName (config key schedulerName).
inline constexpr std::string_view kDefaultSchedulerName = "slurm-bridge-scheduler";

// Pod label: the Slurm job id of the pod's placeholder job (same on every pod of a group).
inline constexpr std::string_view kJobIdLabel = "scheduler.slinky.slurm.net/slurm-jobid";
// Pod labels of a heterogeneous job's pods (upstream 1.3): the het job's id (as kJobIdLabel),
// and the offset of the component the pod's node belongs to ("0", "1", ...).
inline constexpr std::string_view kHetJobIdLabel = "scheduler.slinky.slurm.net/slurm-het-jobid";
inline constexpr std::string_view kHetJobOffsetLabel =
    "scheduler.slinky.slurm.net/slurm-het-job-offset";
// Pod annotation: the Kubernetes node the pod is placed on by its Slurm job.
inline constexpr std::string_view kNodeAnnotation = "slinky.slurm.net/slurm-node";
// Pod annotation: the GPU indices Slurm gave the pod's job on the pod's node ("0,2", as Slurm's
// SLURM_JOB_GPUS); set with the node annotation, absent when the job holds no GPU there.
inline constexpr std::string_view kJobGpusAnnotation = "slinky.slurm.net/slurm-job-gpus";
// Ours, set at bind time: the DRA ResourceClaim the bridge made for the pod's extended
// resources (bridge/dra/claims.h), deleted when the pod finishes so that its devices are free
// again.
inline constexpr std::string_view kResourceClaimAnnotation = "slinky.slurm.net/resource-claim";
// Ours: when the pod controller touched a bound DRA pod whose kubelet had not started its
// sandbox 5 s (LifecycleOptions::kubelet_nudge_after) after the Binding (RFC 3339). A kubelet
// refused the pod's claims (it saw the Binding before the apiserver's node authorizer did) tries
// again only at its next sync, a minute on; a change of annotations makes it sync at once.
inline constexpr std::string_view kKubeletNudgeAnnotation = "slinky.slurm.net/kubelet-nudged";
// Pod finalizer: keeps the pod object until its Slurm job is released.
inline constexpr std::string_view kFinalizer = "scheduler.slinky.slurm.net/finalizer";
// Node taint key (value = scheduler name, effect NoExecute) and the pods' matching toleration.
inline constexpr std::string_view kManagedNodeTaint = "slinky.slurm.net/managed-node";
inline constexpr std::string_view kManagedNodeTaintEffect = "NoExecute";
// Node label: the node's Slurm name when it differs from the Kubernetes name.
inline constexpr std::string_view kSlurmNodeNameLabel = "slinky.slurm.net/slurm-nodename";

// Prefix of the user-settable job annotations (on the group's root object).
inline constexpr std::string_view kJobAnnotationPrefix = "slurmjob.slinky.slurm.net/";
// Pre-1.0 prefix, still read.
inline constexpr std::string_view kLegacyJobAnnotationPrefix = "slinky.slurm.net/";
// The job options: the suffixes of kJobAnnotationPrefix that Translate (translate.cc) and the
// identity policy (identity.h) read. Spelled with kLegacyJobAnnotationPrefix they are the only
// keys of that prefix a tenant may write on a bridge pod (admission/review.h); a new option needs
// no entry here (new ones are spelled with kJobAnnotationPrefix only).
inline constexpr std::array<std::string_view, 19> kJobOptionKeys = {
    "account",  "comment",     "constraints", "cpu-per-task", "exclusive", "gres",      "group-id",
    "job-name", "licenses",    "max-nodes",   "mem-per-node", "min-nodes", "partition", "priority",
    "qos",      "reservation", "timelimit",   "user-id",      "wckey"};
// The pods' keys only the bridge writes, whatever the pod's scheduler (admission/review.h): every
// key under kBridgeKeyPrefix (kJobIdLabel, the het-job labels), and these annotations.
inline constexpr std::string_view kBridgeKeyPrefix = "scheduler.slinky.slurm.net/";
inline constexpr std::array<std::string_view, 4> kBridgePodAnnotations = {
    kNodeAnnotation, kJobGpusAnnotation, kResourceClaimAnnotation, kKubeletNudgeAnnotation};

// Grouping labels.
inline constexpr std::string_view kPodGroupLabel = "scheduling.x-k8s.io/pod-group";
// LWS's GroupUniqueHashLabelKey (sigs.k8s.io/lws/api/leaderworkerset/v1): the same on every pod
// of one leader-worker group (sha1 of "<namespace>/<leader pod>", set by LWS's pod webhook).
inline constexpr std::string_view kLwsGroupHashLabel = "leaderworkerset.sigs.k8s.io/group-key";
inline constexpr std::string_view kLwsNameLabel = "leaderworkerset.sigs.k8s.io/name";
inline constexpr std::string_view kLwsGroupIndexLabel = "leaderworkerset.sigs.k8s.io/group-index";
inline constexpr std::string_view kJobSetNameLabel = "jobset.sigs.k8s.io/jobset-name";
// The parts of a group (bridge/parts.h): a JobSet's replicated job, an LWS pod's worker index
// ("0": the leader).
inline constexpr std::string_view kJobSetReplicatedJobLabel =
    "jobset.sigs.k8s.io/replicatedjob-name";
inline constexpr std::string_view kLwsWorkerIndexLabel = "leaderworkerset.sigs.k8s.io/worker-index";

// Ours, beyond upstream: on a batch Job or JobSet, "true" makes all its pods one gang (one
// Slurm job, all or nothing) instead of one Slurm job per pod.
inline constexpr std::string_view kGangAnnotation = "slurmjob.slinky.slurm.net/gang";

}  // namespace sb::bridge
