// SPDX-License-Identifier: Apache-2.0
//
// Unit tests of the test DRA driver's pure part (driver_logic.h): the ResourceSlices it
// publishes, the devices a claim gives it, the CDI specs it writes, and the cpuset hook's path.
#include "testing/dra-driver/driver_logic.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace sb::dra_driver {
namespace {

namespace json = boost::json;

json::value J(const std::string& text) { return json::parse(text); }

TEST(DraDriverSlice, GpuSliceHasIndexedDevicesInTheNodesPool) {
  json::value s = J(SliceJson(GpuDriver(4), "n1", "uid-n1"));
  EXPECT_EQ(s.at("apiVersion"), "resource.k8s.io/v1");
  EXPECT_EQ(s.at("kind"), "ResourceSlice");
  EXPECT_EQ(s.at_pointer("/metadata/name"), "n1-gpu.example.com");
  EXPECT_EQ(s.at_pointer("/metadata/ownerReferences/0/uid"), "uid-n1");
  EXPECT_EQ(s.at_pointer("/spec/driver"), "gpu.example.com");
  EXPECT_EQ(s.at_pointer("/spec/nodeName"), "n1");
  EXPECT_EQ(s.at_pointer("/spec/pool/name"), "n1");
  EXPECT_EQ(s.at_pointer("/spec/pool/generation"), 1);
  EXPECT_EQ(s.at_pointer("/spec/pool/resourceSliceCount"), 1);
  const json::array& devices = s.at_pointer("/spec/devices").as_array();
  ASSERT_EQ(devices.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const json::value& d = devices[static_cast<std::size_t>(i)];
    EXPECT_EQ(d.at("name").as_string(), "gpu-" + std::to_string(i));
    EXPECT_EQ(d.at_pointer("/attributes/index/int"), i);
  }
}

TEST(DraDriverSlice, CpuSliceIsDraCpuIndividualMode) {
  json::value s = J(SliceJson(CpuDriver(8), "kube-n5"));
  EXPECT_EQ(s.at_pointer("/metadata/name"), "kube-n5-dra.cpu");
  EXPECT_FALSE(s.at("metadata").as_object().contains("ownerReferences"));
  EXPECT_EQ(s.at_pointer("/spec/driver"), "dra.cpu");
  const json::array& devices = s.at_pointer("/spec/devices").as_array();
  ASSERT_EQ(devices.size(), 8u);
  EXPECT_EQ(devices[5].at("name"), "cpudev005");
  EXPECT_EQ(devices[5].at_pointer("/attributes/dra.cpu~1cpuID/int"), 5);
  EXPECT_EQ(devices[5].at_pointer("/attributes/dra.cpu~1coreID/int"), 5);
  EXPECT_EQ(devices[5].at_pointer("/attributes/dra.cpu~1socketID/int"), 0);
}

TEST(DraDriverSlice, HyperthreadsShareCores) {
  DriverSpec s = CpuDriver(8, 2);
  EXPECT_EQ(s.devices[1].core_id, 1);
  EXPECT_EQ(s.devices[5].core_id, 1);  // the sibling of CPU 1, as Linux numbers them
}

const char* kClaim = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
  "metadata": {"name": "c1", "namespace": "ns", "uid": "u-1"},
  "status": {"allocation": {"devices": {"results": [
    {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-2"},
    {"request": "cpu", "driver": "dra.cpu", "pool": "n1", "device": "cpudev000"},
    {"request": "cpu", "driver": "dra.cpu", "pool": "n1", "device": "cpudev001"}]}}}})";

TEST(DraDriverClaim, DevicesOfOneDriver) {
  auto gpu = ClaimDevices(kClaim, "u-1", "gpu.example.com", "n1");
  ASSERT_TRUE(gpu) << gpu.error().message;
  EXPECT_EQ(*gpu, (std::vector<AllocatedDevice>{{"gpu", "n1", "gpu-2"}}));
  auto cpu = ClaimDevices(kClaim, "u-1", "dra.cpu", "n1");
  ASSERT_TRUE(cpu);
  EXPECT_EQ(cpu->size(), 2u);
}

TEST(DraDriverClaim, RefusesAnotherUidAnUnallocatedClaimAndAnotherNodesPool) {
  EXPECT_EQ(ClaimDevices(kClaim, "u-2", "gpu.example.com", "n1").error().code,
            ErrorCode::kFailedPrecondition);
  EXPECT_EQ(ClaimDevices(kClaim, "u-1", "gpu.example.com", "n2").error().code,
            ErrorCode::kInvalidArgument);
  auto unallocated = ClaimDevices(R"({"metadata": {"name": "c", "uid": "u"}, "status": {}})", "u",
                                  "dra.cpu", "n1");
  ASSERT_FALSE(unallocated);
  EXPECT_NE(unallocated.error().message.find("not allocated"), std::string::npos);
  EXPECT_FALSE(ClaimDevices("{not json", "u", "dra.cpu", "n1"));
}

TEST(DraDriverCdi, GpuDevicesSetTheirIndexInTheEnvironment) {
  auto p = PrepareClaim(GpuDriver(4), "u-1", {{"gpu", "n1", "gpu-2"}, {"gpu", "n1", "gpu-3"}},
                        "/bin/drv");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->cdi_file, "gpu.example.com-u-1.json");
  ASSERT_EQ(p->devices.size(), 2u);
  EXPECT_EQ(p->devices[0],
            (PreparedDevice{{"gpu"}, "n1", "gpu-2", {"gpu.example.com/gpu=u-1-gpu-2"}}));
  json::value cdi = J(p->cdi_json);
  EXPECT_EQ(cdi.at("cdiVersion"), "0.6.0");
  EXPECT_EQ(cdi.at("kind"), "gpu.example.com/gpu");
  EXPECT_EQ(cdi.at_pointer("/devices/0/name"), "u-1-gpu-2");
  EXPECT_EQ(cdi.at_pointer("/devices/0/containerEdits/env/0"), "GPU_DEVICE_2=gpu-2");
  EXPECT_EQ(cdi.at_pointer("/devices/1/containerEdits/env/0"), "GPU_DEVICE_3=gpu-3");
}

TEST(DraDriverCdi, CpuClaimRunsTheCpusetHookOnce) {
  auto p = PrepareClaim(
      CpuDriver(8), "u-1",
      {{"cpu", "n1", "cpudev000"}, {"cpu", "n1", "cpudev001"}, {"cpu", "n1", "cpudev004"}},
      "/bin/drv", "/cdi/hook.log");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->devices.size(), 3u);
  EXPECT_EQ(p->devices[0].cdi_ids,
            (std::vector<std::string>{"dra.cpu/cpu=u-1-cpudev000", "dra.cpu/cpu=u-1-cpuset"}));
  EXPECT_EQ(p->devices[1].cdi_ids, (std::vector<std::string>{"dra.cpu/cpu=u-1-cpudev001"}));
  json::value cdi = J(p->cdi_json);
  EXPECT_EQ(cdi.at("kind"), "dra.cpu/cpu");
  const json::value& cpuset = cdi.at_pointer("/devices/3");
  EXPECT_EQ(cpuset.at("name"), "u-1-cpuset");
  EXPECT_EQ(cpuset.at_pointer("/containerEdits/env/0"), "DRA_CPUS=0-1,4");
  const json::value& hook = cpuset.at_pointer("/containerEdits/hooks/0");
  EXPECT_EQ(hook.at("hookName"), "createRuntime");
  EXPECT_EQ(hook.at("path"), "/bin/drv");
  EXPECT_EQ(hook.at("args"),
            (json::array{"sb-test-dra-driver", "cpuset-hook", "0-1,4", "--log", "/cdi/hook.log"}));
}

TEST(DraDriverCdi, OneDeviceForTwoRequestsAndUnknownDevices) {
  auto p = PrepareClaim(GpuDriver(2), "u", {{"a", "n1", "gpu-1"}, {"b", "n1", "gpu-1"}}, "/d");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->devices.size(), 1u);
  EXPECT_EQ(p->devices[0].requests, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(PrepareClaim(GpuDriver(2), "u", {{"a", "n1", "gpu-7"}}, "/d"));
  auto none = PrepareClaim(GpuDriver(2), "u", {}, "/d");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->cdi_file.empty());
}

TEST(DraDriverCpuList, FormatsAndParses) {
  EXPECT_EQ(FormatCpuList({5, 0, 1, 2, 2}), "0-2,5");
  EXPECT_EQ(FormatCpuList({3}), "3");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(*ParseCpuList("0-2,5"), (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(*ParseCpuList("7"), (std::vector<int>{7}));
  EXPECT_FALSE(ParseCpuList(""));
  EXPECT_FALSE(ParseCpuList("2-1"));
  EXPECT_FALSE(ParseCpuList("0,,1"));
  EXPECT_FALSE(ParseCpuList("a"));
}

TEST(DraDriverHook, FindsTheContainersCpusetFile) {
  EXPECT_EQ(*BundleFromState(R"({"ociVersion":"1.0.2","id":"c","pid":7,"bundle":"/run/b/c"})"),
            "/run/b/c");
  EXPECT_FALSE(BundleFromState(R"({"id":"c"})"));
  auto path = CgroupsPathFromConfig(
      R"({"linux": {"cgroupsPath": "/sb-1-n1/kubepods/besteffort/pod9/abc"}})");
  ASSERT_TRUE(path);
  EXPECT_EQ(CpusetCpusFile("/sys/fs/cgroup/cpuset", *path),
            "/sys/fs/cgroup/cpuset/sb-1-n1/kubepods/besteffort/pod9/abc/cpuset.cpus");
  EXPECT_EQ(CpusetCpusFile("/sys/fs/cgroup/cpuset/", "kubepods/x"),
            "/sys/fs/cgroup/cpuset/kubepods/x/cpuset.cpus");
  EXPECT_FALSE(CgroupsPathFromConfig(R"({"linux": {"cgroupsPath": "kubepods.slice:cri:abc"}})"));
  EXPECT_FALSE(CgroupsPathFromConfig(R"({"linux": {}})"));
}

}  // namespace
}  // namespace sb::dra_driver
