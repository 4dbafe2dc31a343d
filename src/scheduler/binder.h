// SPDX-License-Identifier: Apache-2.0
//
// scheduler/binder.h
//
// Binding the pods of a RUNNING Slurm job, as named steps (kube-scheduler's binding cycle, and
// controllers/node/ here, have the same shape): each step reads or writes one thing, and the
// decision between the reads and the writes is planner.h's PlanBind (pure).
//
//   1. ReadAllocation  where the job runs: its resource layout (GET /resources/{id}, about 1 KB:
//                      nodes and GPUs) for a job this process submitted, else the job record
//                      (GET /job/{id}; every component's for a heterogeneous job); also
//                      whether it still runs.
//   2. ReadHolders     the bound pods labelled with the job (a LIST), for a job bound before.
//   3. PlanBind        (planner.h) which pod goes to which node; a retag, a report, a cancel.
//   4. pre-bind        Retag: the job's tag lists the pods about to bind, written over the tag
//                      Slurm has now (read-modify-write); LabelPod: each pod carries the
//                      finalizer and the managed-node toleration (set by the webhook at CREATE,
//                      else patched), and the job id unless the Binding carries it; WriteClaims:
//                      DRA claims, itself read (ReadDraInputs: the job's layout unless step 1
//                      read it, the nodes' ResourceSlices), plan (bridge/dra/claim_plan.h's
//                      PlanClaims, pure) and write (WriteClaimObjects).
//   5. BindPods        the Bindings, carrying the node and GPU annotations and the job-id labels
//                      (LabelsRideBinding); a lost reply is checked with a GET; a Scheduled
//                      event per pod.
//
// The Binder keeps no state of the scheduler's (tracked jobs, queue): Scheduler::Bind runs the
// steps in order and applies what they return. It remembers one fact of the server: whether
// slurmrestd serves /resources/{job_id}.
//
// Thread model: loop-confined, as the scheduler.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "bridge/config.h"
#include "bridge/dra/claim_plan.h"
#include "bridge/dra/profile.h"
#include "bridge/dra/requests.h"
#include "bridge/group.h"
#include "common/error.h"
#include "kube/client.h"
#include "kube/runtime/event_recorder.h"
#include "scheduler/planner.h"
#include "slurm/client.h"

namespace sb::scheduler {

struct Stats;  // scheduler/stats.h

// Where a job runs, as step 1 read it.
struct Allocation {
  enum class State { kRunning, kNotRunning, kGone };
  State state = State::kRunning;
  std::string base_state;  // Slurm's, when the job record was read; "" from the layout
  std::string nodes;       // hostlist
  std::vector<std::string> gres_detail;  // one entry per node of `nodes`
  std::string partition;                 // from the job record only
  // A heterogeneous job (read from its records): each component's nodes and GPUs, by offset;
  // `nodes` and `gres_detail` are the first component's.
  struct Component {
    std::string nodes;
    std::vector<std::string> gres_detail;
    bool operator==(const Component&) const = default;
  };
  std::vector<Component> components;
  // The job's resource layout when it was read (GET /resources/{id}); empty when the job record
  // was. WriteClaims maps it to devices instead of reading it again.
  std::vector<slurm::NodeAllocation> layout;
};

// A pod and the Kubernetes node it is bound to, with the Binding's annotations.
struct Assignment {
  const kube::Pod* pod = nullptr;
  std::string node;
  std::map<std::string, std::string> annotations;  // node, and GPU indices where Slurm gave some
  // The job-id labels (kJobIdLabel; a heterogeneous job's kHetJobIdLabel, kHetJobOffsetLabel)
  // when they ride the Binding (Binder::LabelsRideBinding); empty when set before it.
  std::map<std::string, std::string> labels;
};

// The job-id labels of a pod of `job_id` (`het_offset` >= 0: of that heterogeneous job's
// component).
[[nodiscard]] std::map<std::string, std::string> JobLabels(std::int64_t job_id, int het_offset);

// The annotations each assigned pod's Binding carries: the node, and the GPU indices Slurm gave
// the job on it (bridge/gres.h), which the containers read through the downward API.
[[nodiscard]] std::vector<Assignment> Annotate(
    const std::vector<std::pair<const kube::Pod*, std::string>>& assign,
    const std::map<std::string, std::string>& kube_node_of,  // Slurm name -> Kubernetes name
    const std::vector<std::string>& slurm_nodes, const std::vector<std::string>& gres_detail);

class Binder {
 public:
  Binder(kube::Client& kube, slurm::Client& slurm, kube::EventRecorder& recorder,
         const bridge::Config& config, Stats& stats);

  // Step 1. `layout_first`: the job was submitted by this process and seen RUNNING (its layout
  // answers; anything else reads the record).
  [[nodiscard]] boost::asio::awaitable<Result<Allocation>> ReadAllocation(std::int64_t id,
                                                                          bool layout_first);
  // Step 2.
  [[nodiscard]] boost::asio::awaitable<Result<std::vector<Holder>>> ReadHolders(
      const std::string& ns, std::int64_t id);
  // Step 4: the tag as MergeTag makes it from Slurm's tag now; returns what was written.
  [[nodiscard]] boost::asio::awaitable<Result<TagMembers>> Retag(
      const bridge::GroupSpec& spec, std::int64_t id, const std::vector<Holder>& holders,
      const std::vector<const kube::Pod*>& waiting,
      const std::vector<std::pair<const kube::Pod*, std::string>>& assign);
  // Step 4: the job-id label, the finalizer and the managed-node toleration, and `annotations`
  // (an Assignment's, at bind time); a refused patch is reported on the pod. A pod gone: done.
  // `het_offset` >= 0: a heterogeneous job's pod, also labelled with the het job's id and its
  // component's offset (kHetJobIdLabel, kHetJobOffsetLabel).
  [[nodiscard]] boost::asio::awaitable<Result<void>> LabelPod(
      const kube::Pod& pod, std::int64_t job_id, std::map<std::string, std::string> annotations,
      int het_offset = -1);
  // Step 4, DRA: for each assigned pod that asks for devices through DRA (extended resources or
  // template claims; bridge/dra/requests.h), the claims naming the devices of its node's
  // ResourceSlices that are the GRES indices and cores Slurm allocated to `job_id` there: a
  // template claim's status written; the claim for its extended resources created (found again
  // on a retry: its name is fixed), its status written (allocation, reservedFor the pod), and the
  // pod's status told which claim holds them. The job's layout is `allocation`'s when step 1 read
  // it (Allocation::layout), else read here (GET /resources/{job_id}, once). A pod whose devices
  // cannot be named gets a Warning event saying why, and nothing is written; a claim whose writes
  // fail is deleted, so that no device is held twice. The claim's name goes into the Binding's
  // annotations (kResourceClaimAnnotation): the pod controller releases it when the pod ends.
  // `slurm_name_of`: Kubernetes node -> Slurm node.
  struct DraInput {
    const std::vector<bridge::DeviceProfile>* profiles = nullptr;
    std::shared_ptr<const std::vector<kube::GenericObject>> classes;  // what device_classes names
    bridge::ObjectsByName device_classes;
    std::set<std::string, std::less<>> resource_names;  // the classes' extendedResourceNames
    // The pods' ResourceClaimTemplates (TranslateOptions::claim_templates); nullptr: none.
    const std::map<std::string, bridge::ObjectsByName>* claim_templates = nullptr;
  };
  [[nodiscard]] boost::asio::awaitable<Result<void>> WriteClaims(
      std::int64_t job_id, std::vector<Assignment>& assign,
      const std::map<std::string, std::string>& slurm_name_of, const DraInput& dra,
      const Allocation* allocation = nullptr);
  // Step 5, in order; stops at the first Binding that fails (and is not bound after all).
  struct Bound {
    std::vector<Assignment> bound;  // bound now (a pod deleted meanwhile is left out)
    std::optional<Error> error;     // the failure that stopped it
  };
  [[nodiscard]] boost::asio::awaitable<Bound> BindPods(std::int64_t job_id,
                                                       const std::vector<Assignment>& assign);

  // Whether the job-id labels ride the Binding: the apiserver copies a Binding's labels onto the
  // pod since Kubernetes 1.35 (feature PodTopologyLabelsAdmission, on by default), in the same
  // write as the node. Assumed until the first Binding that carried them is read back (one GET
  // per process): when its pod lacks them (an older apiserver, the feature turned off), they are
  // patched onto every pod bound so, and set before the Binding from then on.
  [[nodiscard]] bool LabelsRideBinding() const {
    return binding_labels_ != BindingLabels::kDropped;
  }

 private:
  enum class BindingLabels { kUnverified, kCarried, kDropped };
  struct Unverified {
    std::string ns, name;
    std::map<std::string, std::string> labels;
  };
  // Step 5: a pod bound with `labels` on its Binding; while unverified, the first such pod is
  // read back (see LabelsRideBinding).
  boost::asio::awaitable<void> AfterLabelledBinding(Unverified pod);
  boost::asio::awaitable<void> PatchLabels(const Unverified& pod);
  // WriteClaims' read: the job's layout (`known`'s, else GET /resources/{job_id}) and the
  // ResourceSlices of each node of `pods` (one LIST per node).
  boost::asio::awaitable<Result<bridge::ClaimPlanInput>> ReadDraInputs(
      std::int64_t job_id, std::vector<bridge::ClaimPlanPod> pods, const Allocation* known);
  // WriteClaims' write: `plan` (bridge::PlanClaims), pod by pod; `pods[i]` is the plan's pod i.
  boost::asio::awaitable<Result<void>> WriteClaimObjects(std::int64_t job_id,
                                                         const bridge::ClaimsPlan& plan,
                                                         const std::vector<Assignment*>& pods);
  // A pod's devices cannot be named or written: a Warning event DeviceAllocationFailed on the
  // pod, a log line, and the error that sends the group back to the queue (kFailedPrecondition).
  Error ClaimFailed(std::int64_t job_id, const kube::Pod& pod, std::string message);

  kube::Client& kube_;
  slurm::Client& slurm_;
  kube::EventRecorder& recorder_;
  const bridge::Config& config_;
  Stats& stats_;
  bool resources_endpoint_ = true;  // slurmrestd serves /resources/{job_id} (until it does not)
  BindingLabels binding_labels_ = BindingLabels::kUnverified;
  bool verifying_ = false;
  std::vector<Unverified> unverified_;  // bound with labels before the verdict
};

// The pod carries what Binder::LabelPod sets, apart from the node's annotations; with
// `labels_ride_binding`, apart from the job-id labels too (the Binding carries them).
[[nodiscard]] bool Labelled(const kube::Pod& pod, std::int64_t job_id,
                            const std::string& scheduler_name, int het_offset = -1,
                            bool labels_ride_binding = false);

// Slurm's error message with its details, for pods and logs (Error::Words).
[[nodiscard]] inline std::string ErrorWords(const Error& e) { return e.Words(); }

}  // namespace sb::scheduler
