// SPDX-License-Identifier: Apache-2.0
//
// bridge/config.h
//
// The bridge's config file (`--config`, default /etc/slurm-bridge/config.yaml), shared by the
// scheduler, the controllers and the admission webhook. Upstream's keys are read as upstream
// reads them (YAML, key names matched case-insensitively, unknown keys ignored with a warning):
//
//   schedulerName            spec.schedulerName the bridge serves (default slurm-bridge-scheduler)
//   slurmRestApi             slurmrestd URL: http://, https:// or unix:// (scheduler/controllers)
//   partition                default Slurm partition ("" = Slurm's default)
//   mcsLabel                 mcs_label sent with every job ("" = none)
//   managedNamespaces        namespaces whose pods the webhook hands to the bridge
//   managedNamespaceSelector a LabelSelector on namespaces; when set, managedNamespaces is ignored
//
// Ours (all optional):
//   clusterName              this Kubernetes cluster's name in job tags (default "kubernetes")
//   slurmApiVersion          pin the data_parser version ("v0.0.44"); default: negotiate
//   slurmUserName            X-SLURM-USER-NAME header (default: none; the token names the user)
//   slurmCaFile, slurmInsecureSkipVerify   TLS to slurmrestd
//   slurmRequestTimeout      how long one Slurm request may take, retries included (default
//                            30s; job lists get at least 5m, upstream 1.3's client timeout)
//   jobMode                  "external" (default: EXTERNAL_JOB placeholders) or "batch"
//   placeholder              upstream 1.3's name for jobMode (same values); the later key wins
//   nodeSharing              "exclusive" (default: a pod's job holds its whole node) or
//                            "coResident" (upstream 1.3: jobs are non-exclusive and share nodes
//                            core by core with native Slurm jobs and other pods)
//   mcsSharing               with nodeSharing exclusive, a job the exclusive annotation makes
//                            non-exclusive asks for shared=mcs and the MCS label (mcsLabel, else
//                            "kubernetes"): with MCSPlugin=mcs/label it shares nodes with the
//                            bridge's jobs only, never with native ones (default true)
//   maxTerminationGracePeriodSeconds  with placeholder batch, the webhook lowers a pod's
//                            terminationGracePeriodSeconds to this (default 300, as upstream;
//                            0: no cap)
//   jobPollInterval          how often job states are read (default 500ms)
//   boundJobPollInterval     how often the controllers read the state of a running job whose
//                            pods are all bound and running (its end deletes them): 5s by
//                            default; at most as often as jobPollInterval
//   pendingJobPollInterval   how often the scheduler and the controllers read the state of a job
//                            pending for more than 30 s (how soon its start is seen): 2s by
//                            default; a job's first 30 s, every jobPollInterval
//   jobListInterval          how often the scheduler reads its pending jobs' reasons (8 per
//                            interval), and Slurm's whole job list while it watches for
//                            duplicates (after start-up, a lost submit reply) (default 30s)
//   nodeListInterval         how often Slurm's node list is read (default 30s)
//   jobSweepInterval         how often the controllers look for orphan jobs (default 30s)
//   maxConcurrentSubmits     groups handled at once (default 16)
//   resourceTres             extended resource -> Slurm TRES per node, e.g.
//                            {nvidia.com/gpu: gres/gpu, example.com/fpga: gres/fpga}
//                            (nvidia.com/gpu and amd.com/gpu map to gres/gpu unless overridden)
//   identityPolicy           per namespace: the Slurm user/group its jobs run as and the
//                            accounts, QOS, partitions, reservations, wckeys and priority its pods
//                            may ask for (bridge/identity.h); default: nothing beyond `partition`
//   deviceProfiles           upstream 1.3's DRA device profiles (bridge/dra/): which
//                            ResourceSlice devices Slurm allocates, and how Slurm counts them.
//                            Absent or null: the defaults (DefaultDeviceProfiles); a list replaces
//                            them; []: none (no pod is placed through DRA). Each entry:
//                              name      stable profile name ("gpu-nvidia")
//                              driver    the DRA driver of its devices ("gpu.nvidia.com")
//                              selector  a CEL expression over one device, byte for byte the
//                                        selector of the DeviceClass it stands for
//                              backend   {type: indexed-gres, gresName: gpu} (a GPU-like device
//                                        is one Slurm GRES index) or {type: core-bitmap} (a CPU,
//                                        placed by the job's core bitmap; one profile at most);
//                                        ours, optional, indexed-gres only: gresType (only Slurm
//                                        GRES of that type; "" any) and indexFrom ("name": the
//                                        number ending the device name, "gpu-3" -> 3;
//                                        "attribute:<name>": an int attribute; default "name"
//                                        for driver gpu.nvidia.com, "attribute:index" otherwise)
// Durations are Go-style strings ("500ms", "5s", "1m") or integer milliseconds.
//
// The JWT is not in the file: it is read from the file named by SLURM_JWT_FILE.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bridge/dra/profile.h"
#include "bridge/identity.h"
#include "common/error.h"

namespace sb::bridge {

// metav1.LabelSelector.
struct LabelSelectorRequirement {
  std::string key;
  std::string operator_;  // In, NotIn, Exists, DoesNotExist
  std::vector<std::string> values;
  bool operator==(const LabelSelectorRequirement&) const = default;
};

struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;
  bool operator==(const LabelSelector&) const = default;

  // An empty selector matches everything, as metav1.LabelSelectorAsSelector.
  [[nodiscard]] bool Empty() const { return match_labels.empty() && match_expressions.empty(); }
  [[nodiscard]] bool Matches(const std::map<std::string, std::string>& labels) const;
};

enum class JobMode { kExternal, kBatch };
enum class NodeSharing { kExclusive, kCoResident };

// Upstream 1.3's defaults: "cpu" (driver dra.cpu, core-bitmap), "gpu-example" (gpu.example.com,
// indexed-gres gpu, index from the attribute `index`) and "gpu-nvidia" (gpu.nvidia.com devices
// of type gpu, indexed-gres gpu, index from the name gpu-<minor>).
[[nodiscard]] std::vector<DeviceProfile> DefaultDeviceProfiles();

struct Config {
  std::string scheduler_name{"slurm-bridge-scheduler"};
  std::string slurm_rest_api;
  std::string partition;
  std::string mcs_label;
  std::vector<std::string> managed_namespaces;
  bool has_managed_namespace_selector = false;
  LabelSelector managed_namespace_selector;

  std::string cluster_name{"kubernetes"};
  std::string slurm_api_version;
  std::string slurm_user_name;
  std::string slurm_ca_file;
  bool slurm_insecure_skip_verify = false;
  std::chrono::milliseconds slurm_request_timeout{30000};
  JobMode job_mode = JobMode::kExternal;
  NodeSharing node_sharing = NodeSharing::kExclusive;
  // With kExclusive: a non-exclusive job (annotation exclusive "false") asks for MCS sharing
  // (shared=mcs and the MCS label), so it shares nodes with the bridge's jobs only (issue #44).
  bool mcs_sharing = true;
  // With JobMode::kBatch, the webhook caps pods' terminationGracePeriodSeconds at this; 0: none.
  // The webhook and the controllers read it through GraceCapSeconds, which applies the mode.
  std::int64_t max_termination_grace_seconds = 300;
  std::chrono::milliseconds job_poll_interval{500};
  std::chrono::milliseconds bound_job_poll_interval{5000};
  std::chrono::milliseconds pending_job_poll_interval{2000};
  std::chrono::milliseconds job_list_interval{30000};
  std::chrono::milliseconds node_list_interval{30000};
  std::chrono::milliseconds job_sweep_interval{30000};
  int max_concurrent_submits = 16;
  // The Kubernetes client's own request rate (upstream 1.3's clientQPS / clientBurst;
  // kube/rate_limit.h); 0: no limit (upstream's defaults are 50 / 100).
  double client_qps = 0;
  int client_burst = 0;
  // A time limit for placeholder jobs that get none from their pods (annotation, a Job's
  // activeDeadlineSeconds); 0: none (Slurm's partition default applies).
  std::chrono::minutes default_time_limit{0};
  // Bound pods whose jobs Slurm no longer knows are not deleted while more than this many of the
  // watched jobs vanished in one poll (a slurmctld that lost its state); 0: no brake.
  int job_gone_brake = 10;
  std::map<std::string, std::string> resource_tres{{"amd.com/gpu", "gres/gpu"},
                                                   {"nvidia.com/gpu", "gres/gpu"}};
  // The webhook gives the containers of bridge pods SLURM_JOB_ID and SLURM_JOB_GPUS (downward
  // API: the job-id label and the GPU annotation the scheduler writes before binding).
  bool pod_slurm_env = true;
  // ... and NVIDIA_VISIBLE_DEVICES from the same annotation, for nodes where Slurm, not a device
  // plugin, hands out the GPUs.
  bool pod_nvidia_visible_devices = false;
  // Who each namespace's jobs run as and which identity and priority annotations its pods may use
  // (bridge/identity.h); default_partition is `partition`.
  IdentityPolicy identity_policy;
  // DRA device profiles (config deviceProfiles; bridge/dra/profile.h); empty: DRA is off.
  std::vector<DeviceProfile> device_profiles = DefaultDeviceProfiles();

  // Non-fatal remarks from parsing (unknown keys).
  std::vector<std::string> warnings;
};

// The grace-period cap in force (config maxTerminationGracePeriodSeconds): with batch
// placeholders only, as upstream 1.3 (an external job's node is not held by the epilog); 0: none.
// The webhook caps pods and DELETEs with it, the controllers cut terminating members to it.
[[nodiscard]] inline std::int64_t GraceCapSeconds(const Config& c) {
  return c.job_mode == JobMode::kBatch ? c.max_termination_grace_seconds : 0;
}

// Parses the YAML text of a config file. Errors (kInvalidArgument) name the key and the value:
// "config key jobPollInterval: \"fast\" is not a duration". (wiring/clients.h reads the file.)
[[nodiscard]] Result<Config> ParseConfig(std::string_view yaml);

// "500ms", "1.5s", "2m", "1h30m" or a bare integer (milliseconds).
[[nodiscard]] Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

}  // namespace sb::bridge
