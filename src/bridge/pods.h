// SPDX-License-Identifier: Apache-2.0
//
// bridge/pods.h
//
// Small pure facts about the bridge's pods and jobs that the scheduler and the controllers
// share: a Slurm job's phase (JobState), when it holds nothing any more, whether a pod carries
// the bridge's finalizer, and the patch that takes it off.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kube/types.h"

namespace sb::bridge {

// True for Slurm base states after which the job holds nothing (COMPLETED, CANCELLED, FAILED,
// TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY), and for "GONE": Slurm no
// longer knows the job.
[[nodiscard]] bool JobEnded(std::string_view base_state);

// What the bridge does with a Slurm job depends on its phase; the base state's name is kept for
// the pods' events and conditions ("Slurm job 7 is SUSPENDED").
enum class JobPhase {
  kUnknown,  // no state read yet
  kPending,  // PENDING: queued, nothing held
  kRunning,  // RUNNING: allocated, its nodes known
  kEnding,   // COMPLETING: ended, its nodes still being cleaned up
  kEnded,    // JobEnded(): holds nothing (COMPLETED, CANCELLED, FAILED, ...)
  kGone,     // Slurm no longer knows the job (not in its lists, 404 on a read)
  kOther,    // the rest (SUSPENDED, REQUEUED, RESIZING, ...): allocated or not, not to bind to
};

[[nodiscard]] JobPhase PhaseOf(std::string_view base_state);

// A Slurm job's base state: its name as Slurm spells it ("GONE" for kGone) and its phase. Made
// from the name (implicitly, as the names come from Slurm's replies and tests' tables).
class JobState {
 public:
  JobState() = default;
  JobState(std::string base_state)  // NOLINT(google-explicit-constructor)
      : name_(std::move(base_state)), phase_(PhaseOf(name_)) {}
  JobState(const char* base_state)  // NOLINT(google-explicit-constructor)
      : JobState(std::string(base_state)) {}
  static JobState Gone() { return JobState("GONE"); }

  [[nodiscard]] JobPhase phase() const { return phase_; }
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] bool known() const { return phase_ != JobPhase::kUnknown; }
  [[nodiscard]] bool pending() const { return phase_ == JobPhase::kPending; }
  [[nodiscard]] bool running() const { return phase_ == JobPhase::kRunning; }
  // JobEnded(name()): kEnded or kGone.
  [[nodiscard]] bool ended() const {
    return phase_ == JobPhase::kEnded || phase_ == JobPhase::kGone;
  }
  bool operator==(const JobState& other) const { return name_ == other.name_; }

 private:
  std::string name_;
  JobPhase phase_ = JobPhase::kUnknown;
};

// A job of the bridge known for this long and still pending is "long pending": Slurm did not
// start it at submit or in its next passes, so it waits on resources, limits or priority, and the
// scheduler and the controllers read its state every pendingJobPollInterval, not every
// jobPollInterval (the delay a start then sees is small beside its wait).
inline constexpr std::chrono::seconds kLongPending{30};

// Whether the pod's phase is terminal (Succeeded or Failed): its containers ran to the end.
[[nodiscard]] bool PodFinished(const kube::Pod& pod);

// Whether `pod` carries scheduler.slinky.slurm.net/finalizer.
[[nodiscard]] bool HasFinalizer(const kube::Pod& pod);

// Whether a toleration (key, operator, value, effect, as the API has them) tolerates the
// bridge's managed-node taint (slinky.slurm.net/managed-node=<scheduler>:NoExecute), as the
// kubelet and the taint manager match them: an empty effect matches every effect, operator
// Exists with an empty key every taint.
[[nodiscard]] bool ToleratesManagedNode(std::string_view key, std::string_view op,
                                        std::string_view value, std::string_view effect,
                                        std::string_view scheduler);
// Whether one of the pod's tolerations does.
[[nodiscard]] bool ToleratesManagedNode(const kube::Pod& pod, std::string_view scheduler);

// The toleration the bridge gives its pods, as a JSON object.
[[nodiscard]] std::string ManagedNodeTolerationJson(std::string_view scheduler);

// A JSON merge patch that removes the bridge's finalizer and keeps the others, conditional on
// the pod's resourceVersion (a concurrent change answers 409). nullopt when the pod has none.
[[nodiscard]] std::optional<std::string> FinalizerRemovalPatch(const kube::Pod& pod);

}  // namespace sb::bridge
