// SPDX-License-Identifier: Apache-2.0
//
// bridge/dra/profiles.h
//
// The device profiles as a list (config deviceProfiles; one profile: bridge/dra/profile.h):
// checked as upstream's registry checks them, looked up by name, and matched to the DeviceClass
// a pod's request names; and what a Slurm job asks for a profile's devices.
//
// Thread model: pure functions over plain values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bridge/dra/profile.h"
#include "common/error.h"
#include "kube/types.h"

namespace sb::bridge {

// Checks a profile list as upstream's registry does: unique names (letters, digits, '.', '_',
// '-'; alphanumeric at both ends), drivers that are DNS subdomains of at most 63 characters,
// non-empty selectors of at most 10 KiB, understood (ParseDeviceSelector), unique, and not
// constraining device.driver to another driver; indexed-gres with a gresName that is a DNS label
// of at most 60 characters (it is also a claim request name), a valid indexFrom; at most one
// core-bitmap profile. The message names the profile: `profile "gpu-x": ...`.
[[nodiscard]] Result<void> ValidateDeviceProfiles(const std::vector<DeviceProfile>& profiles);

// The profile named `name`; nullptr when none.
[[nodiscard]] const DeviceProfile* FindProfile(const std::vector<DeviceProfile>& profiles,
                                               std::string_view name);

// The DeviceClass a request names, resolved to its profile as upstream resolves it: the class
// (resource.k8s.io/v1 DeviceClass) must have no spec.config and exactly one CEL selector whose
// expression is byte for byte a profile's selector. Without the class object (`device_class`
// nullptr: not read), the profile whose driver is the class name, when exactly one is (the
// default DeviceClasses of dra.cpu, gpu.example.com and gpu.nvidia.com are named so).
// kInvalidArgument saying why the class is not covered.
[[nodiscard]] Result<const DeviceProfile*> ProfileForClass(
    std::string_view class_name, const kube::GenericObject* device_class,
    const std::vector<DeviceProfile>& profiles);

// What a Slurm job asks for a profile's devices, per node: "gres/gpu" (or "gres/gpu:<gresType>")
// for indexed-gres, "" for core-bitmap (the job's cpus_per_task carries the CPUs).
[[nodiscard]] std::string DraTres(const DeviceProfile& profile);

}  // namespace sb::bridge
