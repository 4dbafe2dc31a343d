// SPDX-License-Identifier: Apache-2.0
//
// scheduler/planner.h
//
// Pure decisions of the scheduler: what to do with one group (its waiting pods, the Slurm job it
// tracks, the live jobs Slurm's last job list shows tagged for it) and with a running job's nodes.
// No I/O: the scheduler gathers the input, calls these, and acts on the plan.
//
//   - A group without a tracked job first looks for a live job tagged for it (a restart, a submit
//     whose outcome was unknown, a leader hand-over, a member re-created after its gang was bound):
//     it keeps one and cancels the other unbound ones (never a job with bound pods: those are the
//     controllers'). After a submit whose outcome is unknown, Slurm's jobs are read before anything
//     else, so a group never gets a second job because a reply was lost.
//   - A running job whose pods were bound before is refilled: a re-created member binds to the node
//     its predecessor left (its UID is added to the job's tag first). A job never bound binds only
//     as a whole (all-or-nothing).
//   - Only the pods a job was submitted for (its tag's UIDs) are labelled with it or bound to it;
//     pods beyond the group size wait for a job of their own.
//   - A job allocated a Slurm node that no Kubernetes node maps to is cancelled after
//     `unmapped_grace`, and the group's next job excludes that node.
//   - A PodGroup that ran before and has no live job any more (its members ended together while
//     pods beyond minMember waited for a node of it) gives its remaining pods a job of their own
//     size, instead of waiting for minMember again (review N-9).
//   - Nothing is submitted before a Slurm node list succeeded.
//   - A job's node count is the number of its pods (one pod per node): min-nodes/max-nodes
//     annotations asking for another count are overridden, with a warning (FitNodeCount).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "async/clock.h"
#include "bridge/pods.h"
#include "bridge/translate.h"
#include "common/error.h"
#include "kube/types.h"
#include "slurm/types.h"

namespace sb::scheduler {

using TimePoint = async::Clock::TimePoint;

// A pod bound to a node of a job (labelled with its id).
struct Holder {
  std::string uid;
  std::string node;  // Kubernetes node name
  // false: Succeeded or Failed (its node is free again). A pod being deleted holds its node
  // until it is gone or its phase is terminal: the kubelet still counts it (review N-8).
  bool active = true;
  bool terminating = false;  // being deleted (deletionTimestamp set), still active
  int part = 0;              // a heterogeneous job's component (its het-job-offset label)
};

// A Slurm job of a group, as the scheduler knows it.
struct JobView {
  std::int64_t id = 0;
  bridge::JobState state;  // PENDING, RUNNING, ...; "GONE" when Slurm no longer knows it
  std::string reason;      // Slurm's state_reason
  // A pending job's start as Slurm's planner expects it (Unix seconds; 0: none given).
  std::int64_t expected_start = 0;
  std::string partition;
  std::string nodes;              // hostlist, once allocated
  std::vector<std::string> uids;  // the pods it holds places for (its tag)
  std::vector<std::string> pods;  // their "ns/name", same order
  TimePoint submitted{};          // by this process (the epoch for adopted jobs)
  // Bound pods labelled with the job; read for RUNNING jobs the scheduler does not track.
  std::vector<Holder> holders;
  bool holders_known = false;
  // Pods of the group were bound to it before (a refill): the controllers own it, so the
  // scheduler never cancels it, even when no pod of the group waits any more.
  bool refill = false;
  // This process tried to bind pods to it: one may be bound though its Binding's reply was lost
  // (review N-10), so it is never cancelled as "pods gone" without holders read and none found.
  bool bind_tried = false;
  // A heterogeneous job's part names by component offset (its tag); empty: an ordinary job.
  std::vector<std::string> parts;
};

struct PlannerOptions {
  std::chrono::seconds fill_grace{2};       // a group filling up says nothing this long
  std::chrono::seconds quiet_start{2};      // a new job without a reason says nothing this long
  std::chrono::seconds unmapped_grace{30};  // then a job on a node Kubernetes lacks is cancelled
  std::chrono::seconds owner_recheck{10};   // an incomplete group reads its owners again
  std::chrono::seconds full_recheck{10};    // a refilled job with no free node looks again
  std::chrono::seconds terminating_recheck{2};  // ... sooner while a pod of it terminates
};

// Whether the pod may be scheduled at all (no spec.schedulingGates left).
[[nodiscard]] bool Schedulable(const kube::Pod& pod);

struct GroupInput {
  bridge::GroupSpec spec;
  // The group's unbound pods that are not being deleted and not gated.
  std::vector<const kube::Pod*> pods;
  std::optional<JobView> tracked;
  // Other live jobs tagged for the group in Slurm's last job list (RUNNING ones with holders).
  std::vector<JobView> tagged;
  // When the tagged jobs were last made current (a refresh of the jobs this scheduler knows, or
  // a read of Slurm's whole list); nullopt: never.
  std::optional<TimePoint> jobs_listed_at;
  // When Slurm's whole job list was last read (start-up, a lost submit reply): only that finds a
  // job this process never knew of; nullopt: never.
  std::optional<TimePoint> jobs_scanned_at;
  // Set while the outcome of the group's last submit is unknown (timeout, connection lost).
  std::optional<TimePoint> submit_doubt_since;
  bool slurm_nodes_known = true;
  std::optional<TimePoint> incomplete_since;  // the group has been short of pods since
  // When this process first saw the group's current pods (its group state was made).
  std::optional<TimePoint> group_since;
  // A job of the group was bound by this process (the group reached its size once).
  bool ran_before = false;
  // The apiserver copies a Binding's labels onto the pod (Kubernetes 1.35+): the job-id label
  // rides the Binding, and a pending pod is patched only when it lacks the finalizer (which the
  // webhook sets at CREATE). False: every pod of a pending job carries its id before it binds.
  bool labels_ride_binding = false;
  TimePoint now;
};

// Why a job is cancelled, as counted (slurm_bridge_jobs_cancelled_total's reason label).
enum class CancelCause {
  kPodsGone,            // its pods went before binding (or were re-created)
  kDuplicate,           // a second job of a group
  kNodeNotInKubernetes  // allocated a node Kubernetes lacks
};

struct Cancel {
  std::int64_t id = 0;
  std::string reason;
  CancelCause cause = CancelCause::kPodsGone;
  bool operator==(const Cancel&) const = default;
};

struct GroupPlan {
  std::vector<Cancel> cancel;             // first
  bool forget = false;                    // stop tracking the tracked job
  std::optional<JobView> adopt;           // track this job from now on
  bool list_jobs = false;                 // make the known jobs current, then plan again
  bool scan_jobs = false;                 // read Slurm's whole job list, then plan again
  std::vector<const kube::Pod*> label;    // label with the tracked job (its UIDs only)
  std::vector<const kube::Pod*> submit;   // one job for these (cut to the group size)
  int submit_size = 0;                    // the group size that job is for; 0: the spec's
  std::vector<const kube::Pod*> members;  // the pods the tracked job is for (pending update)
  bool bind = false;                      // the tracked job runs: PlanBind
  bool update_pending = false;            // send the pending job what changed
  bool incomplete = false;                // short of pods (keep incomplete_since)
  std::string event_reason;               // a Warning event to every pod of the group
  std::string event_message;
  std::string report;                   // FailedScheduling to every pod of the group
  std::optional<TimePoint> recheck_at;  // look at the group again
  bool recheck_owners = false;          // ... reading the pod's owners again
};

[[nodiscard]] GroupPlan PlanGroup(const GroupInput& in, const PlannerOptions& options);

struct BindInput {
  JobView job;  // RUNNING, nodes known
  // The job's nodes, expanded (a heterogeneous job: every component's, in offset order).
  std::vector<std::string> slurm_nodes;
  // A heterogeneous job: the component of each entry of slurm_nodes, and of each waiting pod
  // (UID; its part's offset, -1 for a part the job has not). Empty: everything is component 0.
  std::vector<int> node_part;
  std::map<std::string, int> part_of;
  std::map<std::string, std::string> kube_node_of;  // Slurm node name -> Kubernetes node name
  std::vector<const kube::Pod*> pods;               // the group's waiting pods
  std::vector<Holder> holders;                      // bound pods labelled with the job
  // Per waiting pod (UID): the Kubernetes nodes it cannot run on (bridge::ExcludedNodes); a
  // refill leaves those out for it.
  std::map<std::string, std::set<std::string>> excluded_for;
  std::string kind;  // for messages: the group's kind and name
  std::string name;
  std::optional<TimePoint> unmapped_since;  // first seen on a node Kubernetes lacks
  TimePoint now;
};

struct BindPlan {
  std::vector<std::pair<const kube::Pod*, std::string>> assign;  // pod -> Kubernetes node
  // An assigned pod is not in the job's tag: the tag must list it before binding (MergeTag).
  bool retag = false;
  bool done = false;                  // every node of the job has its pod after `assign`
  std::vector<std::string> unmapped;  // Slurm nodes no Kubernetes node maps to
  std::optional<Cancel> cancel;       // the job, after `unmapped_grace`
  std::string event_reason;
  std::string event_message;
  std::string report;
  std::optional<TimePoint> recheck_at;
};

[[nodiscard]] BindPlan PlanBind(const BindInput& in, const PlannerOptions& options);

// The pods a job's tag lists (bridge/tag.h), UIDs and "ns/name" in the same order.
struct TagMembers {
  std::vector<std::string> uids;
  std::vector<std::string> pods;
  bool operator==(const TagMembers&) const = default;
};

// The tag of a refilled job (review N-1, N-16): the tag Slurm has now (`current`, read just
// before: never a copy from an older job list, which would drop a pod an earlier refill added),
// plus the pods being bound (`assign`), less the pods that are gone. A listed pod stays while it
// is bound to the job (a holder, running or done) or waits in the group; so the tag follows the
// group's live pods instead of growing with every completion of a long Job.
[[nodiscard]] TagMembers MergeTag(
    const TagMembers& current, const std::vector<Holder>& holders,
    const std::vector<const kube::Pod*>& waiting,
    const std::vector<std::pair<const kube::Pod*, std::string>>& assign);

// The periodic check for a second job of a group (a lost submit reply, an old leader's submit):
// live jobs tagged for a tracked group, with another id and no bound pod, are cancelled.
// `tracked`: group key -> tracked job id; `listed`: group key -> live tagged jobs (RUNNING ones
// with holders known; without, they are left alone).
[[nodiscard]] std::vector<Cancel> PlanDuplicates(
    const std::map<std::string, std::int64_t>& tracked,
    const std::map<std::string, std::vector<JobView>>& listed);

// One pod per node: the job gets exactly `pods` nodes. A description asking for another count
// (min-nodes / max-nodes annotations) is set to it; the message says what was overridden.
[[nodiscard]] std::optional<std::string> FitNodeCount(slurm::JobDescription& job, int pods);

// Kubernetes nodes by Slurm node name: a node labelled slinky.slurm.net/slurm-nodename wins over
// one merely named so; `duplicates` lists the Slurm names claimed twice (for a log line).
struct NodeMapping {
  std::map<std::string, const kube::Node*> by_slurm_name;
  std::vector<std::string> duplicates;
};
[[nodiscard]] NodeMapping MapSlurmNodes(const std::vector<const kube::Node*>& nodes);

// Whether a submit error leaves the job's existence unknown (the request may have reached
// slurmctld): timeouts, lost connections, server errors.
[[nodiscard]] bool SubmitOutcomeUnknown(ErrorCode code);

// What a pod waiting on `job` is told: "waiting for Slurm job 12 in partition gpu: Priority;
// expected to start 2026-12-04T20:31:05Z" (the start only when Slurm's planner gave one).
[[nodiscard]] std::string WaitingMessage(const JobView& job);
// The words WaitingMessage puts before the expected start.
inline constexpr std::string_view kExpectedStartWords = "; expected to start ";
// The message without its expected start (two messages that differ only there are the same news
// but for the time).
[[nodiscard]] std::string_view WithoutExpectedStart(std::string_view message);
// Whether `message` (a WaitingMessage) carries an expected start.
[[nodiscard]] bool HasExpectedStart(std::string_view message);
// Why a pod told `message` waits, for the pods_waiting metric: Slurm's reason ("Priority",
// "Resources", ...; "slurm_pending" when Slurm gave none), "gang_incomplete" (the group lacks
// pods), "submitting" (a submit failed and is tried again), or "not_described" (the bridge cannot
// make a job of it yet: a volume, a claim, a PodGroup, an annotation, a refusal).
[[nodiscard]] std::string WaitingReason(std::string_view message);

}  // namespace sb::scheduler
