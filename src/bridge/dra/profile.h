// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/profile.h
//
// One DRA device profile (config deviceProfiles, upstream 1.3's registry): plain data, so that
// bridge/config.h can hold the profiles without the DRA code that reads them. A profile names a
// DRA driver, a CEL selector over one device (bridge/dra/selector.h) and a backend: how Slurm
// counts the devices the selector matches.
//   indexed-gres  a device is one index of a Slurm GRES ("gpu"): its index comes from its name
//                 ("gpu-3", NVIDIA's gpu-<minor>) or an int attribute (the example driver's
//                 `index`), as the profile's indexFrom says;
//   core-bitmap   a device is one CPU (dra.cpu's individual mode: attributes cpuID, coreID,
//                 socketID, coreType): bit k of Slurm's core bitmap is the k-th core in (socket,
//                 core) order, and stands for all of its CPUs (hyperthreads).
// bridge/dra/profiles.h checks a profile list and resolves DeviceClasses to profiles.
#pragma once

#include <string>

namespace sb::bridge {

// How Slurm accounts for the devices of a DRA device profile (upstream 1.3's backends).
enum class DeviceBackend {
  kIndexedGres,  // "indexed-gres": one device is one index of a Slurm GRES (GPUs)
  kCoreBitmap,   // "core-bitmap": one device is one CPU, chosen by the job's core bitmap
};

// One entry of config deviceProfiles: the devices its selector matches among `driver`'s
// ResourceSlice devices are allocated by Slurm.
struct DeviceProfile {
  std::string name;      // "gpu-nvidia": stable, named in messages
  std::string driver;    // "gpu.nvidia.com"
  std::string selector;  // CEL, e.g. "device.driver == 'gpu.example.com'"
  DeviceBackend backend = DeviceBackend::kIndexedGres;
  std::string gres_name;   // indexed-gres: the Slurm GRES name ("gpu")
  std::string gres_type;   // ours, indexed-gres: only Slurm GRES of this type; "" any type
  std::string index_from;  // ours, indexed-gres: "name", "attribute:<name>"; "" the default
  bool operator==(const DeviceProfile&) const = default;
};

}  // namespace sb::bridge
