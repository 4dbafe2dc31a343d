// SPDX-License-Identifier: Apache-2.0
//
// DRA on the real daemons (issue #28), without kubelets: `slurm-bridge all` against the real
// slurmctld/slurmrestd and the test environment's 1.36.2 kube-apiserver, which validates every
// ResourceClaim the bridge writes. The test publishes the ResourceSlices a node's DRA drivers
// would (gpu.example.com: the node's 4 fake GPUs by `index`; dra.cpu: its 8 CPUs, individual
// mode), pods ask for deviceclass.resource.kubernetes.io/<class>, and each pod's claim must name
// exactly the GPU indices and CPU ids that `scontrol show job -d` shows for its own job; when the
// pod ends, its claim and its job are both released. (The kubelet side — the driver preparing
// the claim, the container seeing the devices — is testing/dra-driver's, on real kubelets.)
#include <cstdint>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <boost/json.hpp>

#include "bridge/hostlist.h"
#include "bridge/names.h"
#include "kube/codec.h"
#include "testing/bridge_e2e.h"

namespace sb::scheduler {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;
namespace json = boost::json;

class DraE2e : public sb::testing::BridgeE2e {
 protected:
  static kube::ResourceRef SlicesRef() { return kube::DraRef("resourceslices"); }
  kube::ResourceRef ClaimsRef() const { return kube::DraRef("resourceclaims", ns_); }

  void SetUp() override {
    BridgeE2e::SetUp();
    if (HasFailure()) return;
    // What the nodes' drivers would publish, for every Kubernetes node of a Slurm node.
    Result<std::vector<std::string>> nodes = bridge::ExpandHostlist(env_.Get("SLURM_NODES"));
    ASSERT_TRUE(nodes) << nodes.error().message;
    for (const std::string& n : *nodes) {
      json::array gpus;
      for (int i = 0; i < 4; ++i) {
        gpus.push_back(
            json::object{{"name", "gpu-" + std::to_string(i)},
                         {"attributes", json::object{{"index", json::object{{"int", i}}}}}});
      }
      json::array cpus;
      for (int i = 0; i < 8; ++i) {
        cpus.push_back(
            json::object{{"name", "cpudev" + std::to_string(i)},
                         {"attributes", json::object{{"cpuID", json::object{{"int", i}}},
                                                     {"coreID", json::object{{"int", i}}},
                                                     {"socketID", json::object{{"int", 0}}}}}});
      }
      for (const auto& [driver, devices] :
           {std::pair{"gpu.example.com", gpus}, std::pair{"dra.cpu", cpus}}) {
        json::object slice{
            {"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", json::object{{"name", n + "-" + driver + "-" + ns_},
                                      {"labels", json::object{{"sb-e2e", ns_}}}}},
            {"spec",
             json::object{
                 {"driver", driver},
                 {"nodeName", n},
                 {"pool", json::object{{"name", n}, {"generation", 1}, {"resourceSliceCount", 1}}},
                 {"devices", devices}}}};
        auto r = RunSync(io_, kube_->Create(SlicesRef(), json::serialize(slice)));
        ASSERT_TRUE(r) << r.error().message;
        slices_.push_back(n + "-" + driver + "-" + ns_);
      }
    }
  }

  void TearDown() override {
    for (const std::string& s : slices_) {
      (void)RunSync(io_, kube_->Delete(SlicesRef().WithName(s), kube::DeleteOptions{}));
    }
    BridgeE2e::TearDown();
  }

  // The devices of the pod's claim (the bridge's annotation names it), as "<pool>/<device>".
  std::vector<std::string> ClaimDevices(const kube::Pod& pod, std::string* reserved_uid) {
    auto name = pod.metadata.annotations.find(std::string(bridge::kResourceClaimAnnotation));
    if (name == pod.metadata.annotations.end()) return {};
    auto claim =
        RunSync(io_, kube::GetAs<kube::GenericObject>(*kube_, ClaimsRef().WithName(name->second)));
    EXPECT_TRUE(claim) << claim.error().message;
    if (!claim) return {};
    json::value status = json::parse(claim->status_json);
    std::vector<std::string> out;
    for (const json::value& r : status.at_pointer("/allocation/devices/results").as_array()) {
      out.push_back(std::string(r.at("pool").as_string()) + "/" +
                    std::string(r.at("device").as_string()));
    }
    if (reserved_uid != nullptr) {
      *reserved_uid = std::string(status.at_pointer("/reservedFor/0/uid").as_string());
    }
    return out;
  }

  // `scontrol show job -d`'s per-node detail of job `id`: "GRES=gpu:fake:1(IDX:2)" and
  // "CPU_IDs=0-1".
  std::string JobDetail(std::int64_t id, const std::string& key) {
    const std::string out = Slurm("scontrol show job -d " + std::to_string(id));
    std::smatch m;
    if (!std::regex_search(out, m, std::regex("[ \t]" + key + "=([^ \n]+)"))) return "";
    return m[1];
  }

  std::vector<std::string> slices_;
};

// Two one-GPU pods on one node (shared: exclusive "false") each get a claim naming the GPU index
// Slurm gave its own job there; a dra.cpu pod's claim names the CPUs of its job's cores. When a
// pod ends, the pod controller cancels its job and deletes its claim.
TEST_F(DraE2e, ClaimsNameExactlyWhatSlurmAllocatedAndGoWithTheirPods) {
  scheduler_ = StartBridge("all");
  const std::string on_n1 = R"(,"nodeSelector":{"kubernetes.io/hostname":"n1"})";
  const std::string shared = R"({"slurmjob.slinky.slurm.net/exclusive":"false"})";
  for (const std::string name : {"gpu-a", "gpu-b"}) {
    CreatePod(
        name,
        R"({"limits":{"memory":"100Mi","deviceclass.resource.kubernetes.io/gpu.example.com":"1"}})",
        shared, on_n1);
  }
  CreatePod("cpus",
            R"({"limits":{"memory":"100Mi","deviceclass.resource.kubernetes.io/dra.cpu":"2"}})",
            shared, on_n1);
  std::set<std::string> gpus_seen;
  for (const std::string name : {"gpu-a", "gpu-b"}) {
    std::optional<kube::Pod> pod = WaitForPod(name, IsBound, 90s);
    ASSERT_TRUE(pod) << name << " not bound";
    EXPECT_EQ(pod->spec.node_name, "n1");
    const std::int64_t id = JobId(*pod);
    ASSERT_GT(id, 0);
    // Slurm's view: one GPU, its index.
    const std::string gres = JobDetail(id, "GRES");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(gres, m, std::regex(R"(IDX:(\d+)\))")))
        << gres << "\n"
        << Slurm("scontrol show job -d " + std::to_string(id));
    std::string reserved;
    const std::vector<std::string> devices = ClaimDevices(*pod, &reserved);
    EXPECT_EQ(devices, std::vector<std::string>{"n1/gpu-" + std::string(m[1])})
        << name << ": Slurm says " << gres;
    EXPECT_EQ(reserved, pod->metadata.uid);
    EXPECT_EQ(pod->metadata.annotations[std::string(bridge::kJobGpusAnnotation)], m[1]);
    gpus_seen.insert(devices.empty() ? "" : devices[0]);
  }
  EXPECT_EQ(gpus_seen.size(), 2u) << "two pods on one node share no GPU";
  std::optional<kube::Pod> cpus = WaitForPod("cpus", IsBound, 90s);
  ASSERT_TRUE(cpus) << "cpus not bound";
  const std::int64_t cpu_job = JobId(*cpus);
  Result<std::vector<std::string>> ids =
      bridge::ExpandHostlist("x[" + JobDetail(cpu_job, "CPU_IDs") + "]");  // "0-1" -> x0, x1
  ASSERT_TRUE(ids) << ids.error().message;
  std::vector<std::string> want;
  for (const std::string& x : *ids) want.push_back("n1/cpudev" + x.substr(1));
  std::vector<std::string> got = ClaimDevices(*cpus, nullptr);
  std::ranges::sort(got);
  std::ranges::sort(want);
  EXPECT_EQ(got, want) << "Slurm's CPU_IDs " << JobDetail(cpu_job, "CPU_IDs");
  EXPECT_EQ(want.size(), 2u);

  // The pod ends: its job is cancelled and its claim deleted.
  const std::string claim =
      cpus->metadata.annotations[std::string(bridge::kResourceClaimAnnotation)];
  ASSERT_FALSE(claim.empty());
  FinishPod("cpus");
  WaitFor(
      [&] {
        auto c =
            RunSync(io_, kube::GetAs<kube::GenericObject>(*kube_, ClaimsRef().WithName(claim)));
        return !c && c.error().code == ErrorCode::kNotFound;
      },
      60s);
  auto gone = RunSync(io_, kube::GetAs<kube::GenericObject>(*kube_, ClaimsRef().WithName(claim)));
  EXPECT_FALSE(gone) << "claim " << claim << " still there after its pod ended";
  WaitFor([&] { return JobState(cpu_job) != "RUNNING"; }, 60s);
  EXPECT_NE(JobState(cpu_job), "RUNNING");
}

// A class no device profile covers: the pod is not given a job, and says why.
TEST_F(DraE2e, AClassNoProfileCoversIsReportedOnThePod) {
  StartScheduler();
  CreatePod("fpga", R"({"limits":{"deviceclass.resource.kubernetes.io/fpga.example.com":"1"}})");
  const std::string message = WaitForEvent("fpga");
  EXPECT_NE(message.find("fpga.example.com"), std::string::npos) << "the event: " << message;
  auto pod = RunSync(io_, kube::GetPod(*kube_, ns_, "fpga"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_TRUE(pod->spec.node_name.empty());
  EXPECT_TRUE(JobsByUid()[pod->metadata.uid].empty());
}

}  // namespace
}  // namespace sb::scheduler
