// SPDX-License-Identifier: Apache-2.0
//
// admission/review.h
//
// The admission webhook's logic, without I/O: an AdmissionReview v1 request (JSON) is decoded,
// judged by the bridge's policy and answered with an AdmissionReview v1 response (JSON), as
// upstream slurm-bridge's webhook does (internal/admission):
//
//   mutate   (/mutate--v1-pod)   for a *managed* pod on CREATE: remove spec.nodeName; set
//            spec.schedulerName to the bridge's when it is empty or "default-scheduler" (another
//            custom scheduler name is left alone); for a pod that is then the bridge's, add the
//            bridge's finalizer and the toleration of the managed-node taint when it lacks them
//            (the scheduler would patch them in after the submit: set here, the pod's first
//            write carries them). A pod is managed when its namespace is one of
//            `managed_namespaces` (or, when a namespace selector is set, its namespace's labels
//            match the selector instead) or its schedulerName already is the bridge's.
//   validate (/validate--v1-pod)
//            for every pod: the bridge's keys are reserved for privileged users (below):
//            CREATE rejects them, UPDATE (any subresource, every phase) rejects adding,
//            changing or removing one. On every pod, the labels and annotations under
//            scheduler.slinky.slurm.net/ (the job-id and het-job labels) and the annotations
//            bridge::kBridgePodAnnotations (node, GPUs, ResourceClaim, kubelet nudge); on a
//            bridge pod, every other key under slinky.slurm.net/ too, but for the annotations
//            that spell a job option the pre-1.0 way (slinky.slurm.net/timelimit, ...:
//            bridge::kJobOptionKeys), which are the tenant's (slurmjob.slinky.slurm.net/ is
//            the tenant's throughout). The rest of slinky.slurm.net/ on other pods is left
//            alone: SchedMD's slurm-operator writes slinky.slurm.net/pod-cordon and others on
//            its NodeSet pods. (Reviews; the list is in docs/security.md.)
//            For a pod whose schedulerName is the bridge's ("bridge pod"):
//            CREATE rejects spec.nodeName, topologySpreadConstraints, required pod
//            (anti-)affinity; UPDATE rejects the resize subresource.
//            DRA (resource.k8s.io/v1): CREATE rejects what
//            bridge::DraAdmissionProblems refuses with the policy's device profiles (an extended
//            resource deviceclass.resource.kubernetes.io/<class> of a class no profile covers,
//            cpu together with the core-bitmap class, the cpu-per-task / gres annotations
//            together with DRA requests, a shared ResourceClaim, a ResourceClaimTemplate that
//            asks for what Slurm cannot choose or that could not be read) and a template that
//            does not exist; UPDATE rejects only the problems it adds (a job annotation added).
//            The DeviceClasses and templates come in DraObjects (read by server.cc; absent
//            ones were not read). Privileged users (the bridge's own
//            service accounts, see Policy) may set and change the bridge's keys.
//            For any other pod: a toleration of the managed-node taint
//            (slinky.slurm.net/managed-node=<schedulerName>:NoExecute, also matched by an
//            Exists toleration with an empty key) is rejected on CREATE, and when an UPDATE adds
//            one, except for DaemonSet pods (written by the DaemonSet controller), mirror pods
//            (written by a kubelet), pods of `system_namespaces` and privileged users: only
//            Slurm allocates Slurm nodes.
//            (DaemonSet pods are no exception outside system_namespaces: anyone may own a
//            DaemonSet.)
//            With nvidia_visible_devices, every container of a bridge pod (ephemeral ones too)
//            must take NVIDIA_VISIBLE_DEVICES from the GPU annotation, as Mutate sets it: a value
//            of its own would reach other jobs' GPUs.
//            Every kind (pods, and the owners the bridge reads job annotations from: Job,
//            CronJob, JobSet, LeaderWorkerSet, PodGroup, Deployment, ReplicaSet, StatefulSet,
//            DaemonSet): CREATE, and UPDATE that changes them, reject job annotations the
//            namespace's identity policy does not allow (bridge/identity.h).
//            DaemonSet: CREATE, and UPDATE that adds it, reject a pod template that tolerates the
//            managed-node taint (as for its pods, which the DaemonSet controller could not
//            create) outside system_namespaces.
//            DELETE of a bridge pod: a DeleteOptions.gracePeriodSeconds above
//            max_termination_grace_seconds is refused (R-5: the pod would outlive the node's
//            hold), except for privileged users; other DELETEs and CONNECT are allowed.
//
// The pod is read from the raw JSON of the review, so fields the kube::Pod struct does not hold
// (topologySpreadConstraints, resourceClaims, pod-level resources) count too; a pod with DRA
// requests is also decoded as kube::Pod for bridge/dra/admission.h.
//
// Thread model: pure functions over values.
//
// Example:
//   Result<Request> req = DecodeReview(http_body);
//   if (!req) return Http400(req.error().message);
//   Decision d = Mutate(*req, policy, namespace_labels);   // nullptr: namespace labels unknown
//   return Http200(EncodeReview(req->uid, d));
//   DraNeeds needs = DraObjectsToRead(*req, policy);   // GET them (404: missing_templates)
//   Decision v = Validate(*req, policy, dra_objects);
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/config.h"
#include "bridge/dra/admission.h"
#include "common/error.h"
#include "kube/types.h"

namespace sb::admission {

// The webhook paths, as upstream's controller-runtime registration names them.
inline constexpr std::string_view kMutatePodPath = "/mutate--v1-pod";
inline constexpr std::string_view kValidatePodPath = "/validate--v1-pod";

using Labels = std::map<std::string, std::string>;

// Whose pods the webhook handles and who may write the bridge's own labels and annotations.
struct Policy {
  std::string scheduler_name{"slurm-bridge-scheduler"};
  std::vector<std::string> managed_namespaces;
  // When set, a namespace is managed when its labels match; managed_namespaces is then ignored.
  std::optional<bridge::LabelSelector> namespace_selector;
  // Usernames (as the apiserver reports them, "system:serviceaccount:<ns>:<name>") allowed to
  // set the bridge's labels and annotations (Validate). An entry ending in '*' matches every
  // username that starts with the part before it ("system:serviceaccount:slinky:slurm-bridge-*").
  std::vector<std::string> privileged_users;
  // The same for the user's groups (request.userInfo.groups), exact names.
  std::vector<std::string> privileged_groups;
  // Namespaces whose pods (DaemonSet pods included) may tolerate the managed-node taint without
  // being bridge pods.
  std::vector<std::string> system_namespaces{"kube-system"};
  // Who each namespace's jobs run as and which identity and priority annotations it may use.
  bridge::IdentityPolicy identity;
  // At CREATE, the containers of a bridge pod get SLURM_JOB_ID and SLURM_JOB_GPUS (and, with
  // nvidia_visible_devices, NVIDIA_VISIBLE_DEVICES) read through the downward API from the
  // job-id label and the GPU annotation the scheduler writes before binding. A variable the
  // container sets itself is left alone.
  bool slurm_env = true;
  bool nvidia_visible_devices = false;
  // At CREATE, a bridge pod's terminationGracePeriodSeconds above this is lowered to it (config
  // maxTerminationGracePeriodSeconds, with placeholder batch as upstream 1.3): a terminating pod
  // holds its Slurm job, GPUs included, through its grace period. 0: no cap.
  std::int64_t max_termination_grace_seconds = 0;
  // The DRA device profiles (config deviceProfiles): what Slurm can choose devices for. Empty:
  // every DRA request is refused.
  std::vector<bridge::DeviceProfile> device_profiles = bridge::DefaultDeviceProfiles();
};

// The environment variables the webhook adds (name -> downward API field path).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> SlurmEnv(const Policy& policy);

// The privileged users when none are configured: the ServiceAccounts of the Helm chart in
// namespace `ns` ("system:serviceaccount:<ns>:slurm-bridge-*"). Empty when `ns` is empty.
[[nodiscard]] std::vector<std::string> DefaultPrivilegedUsers(std::string_view ns);

// The policy of a bridge config file.
[[nodiscard]] Policy PolicyFromConfig(const bridge::Config& config,
                                      std::vector<std::string> privileged_users);

// What the webhook looks at in a pod.
struct PodFacts {
  std::string namespace_;
  std::string name;
  Labels labels;
  Labels annotations;
  bool has_metadata = false;
  bool has_finalizers = false;  // metadata.finalizers is a list (maybe empty)
  std::vector<std::string> finalizers;
  bool has_spec = false;
  // The containers and init containers: which list, whether it has an env list, the names set.
  struct Container {
    std::string list;  // "containers", "initContainers" or "ephemeralContainers"
    std::string name;
    bool has_env = false;
    std::vector<std::string> env;
    // Per entry of env: valueFrom.fieldRef.fieldPath ("" when the value comes from elsewhere).
    std::vector<std::string> env_field_paths;
  };
  std::vector<Container> containers;
  std::optional<std::string> scheduler_name;  // nullopt: absent
  std::optional<std::string> node_name;       // nullopt: absent
  // spec.resourceClaims (bridge::PodResourceClaimsOf; kind Pod only).
  std::vector<bridge::PodResourceClaim> resource_claims;
  // Kind Pod with DRA requests (HasDraRequests): the object as kube::Pod, for
  // bridge::DraAdmissionProblems; nullopt with `pod_error` when it could not be read so.
  std::optional<kube::Pod> pod;
  std::string pod_error;
  std::size_t topology_spread_constraints = 0;
  // spec.affinity.podAffinity / podAntiAffinity requiredDuringSchedulingIgnoredDuringExecution
  // terms (Slurm places the pods; it cannot honour them).
  std::size_t required_pod_affinity = 0;
  std::size_t required_pod_anti_affinity = 0;
  std::string phase;  // status.phase
  // Resource names in requests or limits: of any container or init container, and pod-level.
  std::set<std::string> container_resources;
  std::set<std::string> pod_resources;
  // spec.tolerations.
  struct Toleration {
    std::string key;
    std::string operator_;  // "Exists", "Equal" or "" (Equal)
    std::string value;
    std::string effect;  // "" matches every effect
  };
  std::vector<Toleration> tolerations;
  bool has_tolerations = false;  // spec.tolerations is a list (maybe empty)
  bool mirror_pod = false;       // annotation kubernetes.io/config.mirror (a kubelet static pod)
  // spec.terminationGracePeriodSeconds (nullopt: absent or not an integer).
  std::optional<std::int64_t> termination_grace_seconds;
};

// One AdmissionReview v1 request.
struct Request {
  std::string uid;
  std::string kind;         // request.kind.kind: "Pod"
  std::string operation;    // CREATE, UPDATE, DELETE, CONNECT
  std::string subresource;  // "", "status", "resize", ...
  std::string namespace_;
  std::string name;
  std::string username;             // request.userInfo.username
  std::vector<std::string> groups;  // request.userInfo.groups
  bool dry_run = false;
  // request.options.gracePeriodSeconds: a DELETE's DeleteOptions (nullopt: not given).
  std::optional<std::int64_t> grace_period_seconds;
  // The object (a pod, or any kind: its metadata is read the same way).
  std::optional<PodFacts> object;      // absent on DELETE
  std::optional<PodFacts> old_object;  // UPDATE and DELETE
  // A DaemonSet's spec.template (kind DaemonSet only).
  std::optional<PodFacts> object_template;
  std::optional<PodFacts> old_object_template;
};

// Decodes the body of a webhook call. kInvalidArgument, with the reason, when it is not JSON,
// not an AdmissionReview of admission.k8s.io/v1, has no request or no request.uid, or a pod
// object that is not a JSON object.
[[nodiscard]] Result<Request> DecodeReview(std::string_view body);

// The answer to one request.
struct Decision {
  bool allowed = true;
  int code = 200;                     // status.code: 200, or 403 for a denial
  std::string reason;                 // status.reason: "Forbidden" for a denial
  std::string message;                // why (names the label, annotation or field)
  std::string patch;                  // JSON Patch (RFC 6902) text; empty: none
  std::vector<std::string> warnings;  // response.warnings: shown to the client (kubectl)

  [[nodiscard]] static Decision Allow() { return {}; }
  [[nodiscard]] static Decision Deny(std::string message);
};

// Whether the pod asks for anything through DRA: an extended resource
// deviceclass.resource.kubernetes.io/<class>, or an entry of spec.resourceClaims.
[[nodiscard]] bool HasDraRequests(const PodFacts& pod);

// The DeviceClasses and ResourceClaimTemplates (of the pod's namespace) a DRA check needs.
struct DraNeeds {
  std::set<std::string> device_classes;
  std::set<std::string> claim_templates;
  [[nodiscard]] bool empty() const { return device_classes.empty() && claim_templates.empty(); }
};
// What Validate's DRA check of `request` reads: nothing unless it is a CREATE of a bridge pod
// with DRA requests, or an UPDATE of one that changes its job annotations (claims and resources
// do not change after CREATE). The classes named by templates come on top, once the templates
// are read (TemplateDeviceClasses).
[[nodiscard]] DraNeeds DraObjectsToRead(const Request& request, const Policy& policy);
// The DeviceClasses a ResourceClaimTemplate's requests name (exactly.deviceClassName and
// firstAvailable[].deviceClassName), in order, without repeats.
[[nodiscard]] std::vector<std::string> TemplateDeviceClasses(const kube::GenericObject& tmpl);

// What the webhook read for a pod's DRA check.
struct DraObjects {
  std::map<std::string, kube::GenericObject, std::less<>> device_classes;   // by name
  std::map<std::string, kube::GenericObject, std::less<>> claim_templates;  // by name
  std::set<std::string, std::less<>> missing_templates;  // templates the apiserver has not (404)
};

// True when the bridge schedules `pod` in namespace `ns`. `ns_labels` are the namespace's labels
// (only used when the policy has a selector); nullptr when they are not known.
[[nodiscard]] bool IsManaged(const PodFacts& pod, std::string_view ns, const Policy& policy,
                             const Labels* ns_labels);

// Whether the request's user is privileged by `policy` (privileged_users, privileged_groups).
[[nodiscard]] bool IsPrivileged(const Request& request, const Policy& policy);

// The mutating webhook. Never denies. Pods at CREATE (above); with nvidia_visible_devices, an
// UPDATE of pods/ephemeralcontainers gives each new ephemeral container of a bridge pod the same
// variable.
[[nodiscard]] Decision Mutate(const Request& request, const Policy& policy,
                              const Labels* ns_labels);
// The validating webhook. `dra`: the DeviceClasses and templates read for DraObjectsToRead.
[[nodiscard]] Decision Validate(const Request& request, const Policy& policy,
                                const DraObjects& dra = {});

// The AdmissionReview v1 response: uid echoed, allowed, status, the patch (base64, patchType
// JSONPatch) when there is one, and the warnings when there are any.
[[nodiscard]] std::string EncodeReview(std::string_view uid, const Decision& decision);

}  // namespace sb::admission
