// SPDX-License-Identifier: Apache-2.0
//
// testing/dra-driver/driver_logic.h (test tooling)
//
// The pure half of sb-test-dra-driver, the DRA kubelet plugin of the test environment's nodes
// (testenv/kube/node.sh starts one per kubelet): which devices each of its two drivers has, the
// ResourceSlice it publishes for a node, the devices a ResourceClaim's allocation gives it, the
// CDI spec that hands them to the container, and the cpuset hook's cgroup path. No I/O.
//
// The two drivers mimic the real ones closely enough for the bridge's device profiles
// (src/bridge/config.cc DefaultDeviceProfiles):
//   gpu.example.com  devices gpu-0..gpu-(N-1), int attribute `index` = i (dra-example-driver);
//                    a prepared device sets env GPU_DEVICE_<i>=gpu-<i> in the container.
//   dra.cpu          one device per CPU, cpudev000.. (dra-driver-cpu's individual mode) with int
//                    attributes dra.cpu/cpuID, coreID, socketID; a prepared claim sets env
//                    DRA_CPUS=<list> and runs the createRuntime hook `<binary> cpuset-hook <list>`,
//                    which writes the list into the container's cgroup v1 cpuset (CDI itself has
//                    no cpuset edit).
// CDI: one spec file per (driver, claim) in the node's CDI directory (containerd's
// cdi_spec_dirs), cdiVersion 0.6.0, kind `<driver>/<class>`; device names start with the claim's
// uid, so two claims never define the same CDI device.
//
// Thread model: pure functions over plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace sb::dra_driver {

inline constexpr std::string_view kGpuDriver = "gpu.example.com";
inline constexpr std::string_view kCpuDriver = "dra.cpu";
inline constexpr std::string_view kCdiVersion = "0.6.0";

// One device a driver publishes.
struct FakeDevice {
  std::string name;   // "gpu-2", "cpudev002"
  int index = 0;      // the GPU index, or the CPU id
  int core_id = 0;    // CPUs only
  int socket_id = 0;  // CPUs only
};

// A driver and its devices on one node.
struct DriverSpec {
  std::string driver;  // kGpuDriver or kCpuDriver
  std::vector<FakeDevice> devices;

  // The device named `name`; nullptr when the driver has none such.
  [[nodiscard]] const FakeDevice* Find(std::string_view name) const;
};

// `count` fake GPUs gpu-0..gpu-(count-1).
[[nodiscard]] DriverSpec GpuDriver(int count);
// `cpus` CPUs on one socket, `threads_per_core` hyperthreads per core (CPU c is core
// c % (cpus / threads_per_core), as Linux numbers siblings).
[[nodiscard]] DriverSpec CpuDriver(int cpus, int threads_per_core = 1);

// The ResourceSlice's name for `driver` on `node`: "<node>-<driver>".
[[nodiscard]] std::string SliceName(std::string_view node, std::string_view driver);

// The resource.k8s.io/v1 ResourceSlice of `spec` on `node` (pool = node, generation 1, one slice),
// as JSON. With a non-empty `node_uid` it is owned by the Node (deleted with it).
[[nodiscard]] std::string SliceJson(const DriverSpec& spec, std::string_view node,
                                    std::string_view node_uid = "");

// One result of a claim's status.allocation.devices.results.
struct AllocatedDevice {
  std::string request;
  std::string pool;
  std::string device;
  bool operator==(const AllocatedDevice&) const = default;
};

// The devices of `driver` that ResourceClaim `claim_json` (its whole JSON) is allocated. Errors
// (kInvalidArgument / kFailedPrecondition) when the JSON is malformed, its uid is not `uid`, it has
// no allocation, or a result of `driver` is in another pool than `node` (not this node's device).
[[nodiscard]] Result<std::vector<AllocatedDevice>> ClaimDevices(std::string_view claim_json,
                                                                std::string_view uid,
                                                                std::string_view driver,
                                                                std::string_view node);

// One device of a prepared claim, as the kubelet's NodePrepareResources answer wants it.
struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_ids;  // "gpu.example.com/gpu=<uid>-gpu-2"
  bool operator==(const PreparedDevice&) const = default;
};

struct PreparedClaim {
  std::string cdi_file;  // the spec's file name in the CDI directory
  std::string cdi_json;  // the CDI spec
  std::vector<PreparedDevice> devices;
};

// The CDI spec file name of `driver`'s claim `claim_uid`.
[[nodiscard]] std::string CdiFileName(std::string_view driver, std::string_view claim_uid);

// The CDI spec and the kubelet's answer for claim `claim_uid` whose allocation gave `spec`'s
// driver `allocated`. `hook_binary` is the absolute path of this program (the cpuset hook of
// dra.cpu claims). kInvalidArgument when a device is not the driver's. A claim with no device of
// this driver prepares to nothing (no file: cdi_file is empty).
[[nodiscard]] Result<PreparedClaim> PrepareClaim(const DriverSpec& spec, std::string_view claim_uid,
                                                 const std::vector<AllocatedDevice>& allocated,
                                                 std::string_view hook_binary,
                                                 std::string_view hook_log = "");

// "0-2,5" for {0, 1, 2, 5} (sorted, duplicates dropped); "" for none.
[[nodiscard]] std::string FormatCpuList(std::vector<int> cpus);
// The CPUs of a list like "0-2,5"; kInvalidArgument on anything else.
[[nodiscard]] Result<std::vector<int>> ParseCpuList(std::string_view list);

// The cpuset hook: from the OCI state (the hook's stdin: {"bundle": ...}) the bundle directory.
[[nodiscard]] Result<std::string> BundleFromState(std::string_view state_json);
// From the bundle's config.json, linux.cgroupsPath ("/kubepods/besteffort/pod<uid>/<id>" with
// the cgroupfs driver); kInvalidArgument when missing or in the systemd driver's
// "slice:prefix:name" form.
[[nodiscard]] Result<std::string> CgroupsPathFromConfig(std::string_view config_json);
// The cpuset.cpus file of that cgroup under the cgroup v1 cpuset hierarchy `cpuset_root`
// ("/sys/fs/cgroup/cpuset"): a relative cgroupsPath is taken from the hierarchy's root too.
[[nodiscard]] std::string CpusetCpusFile(std::string_view cpuset_root,
                                         std::string_view cgroups_path);

}  // namespace sb::dra_driver
