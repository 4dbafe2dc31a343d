// SPDX-License-Identifier: Apache-2.0
//
// The test DRA driver (sb-test-dra-driver) behind real kubelets, without the bridge: the ctest
// fixture testenv-kubelets (testenv/up.sh --kubelets with SB_DRA_DRIVER_BINARY) runs one driver
// per node. A test plays the scheduler by hand: it creates a ResourceClaim and a pod that uses it,
// writes the claim's allocation and reservation for the pod, binds the pod, and reads from
// inside the container what the kubelet, the driver (NodePrepareResources -> CDI spec) and
// containerd 1.7 (CDI) gave it: exactly the allocated GPU, exactly the allocated CPUs.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "testing/e2e_env.h"
#include "testing/run.h"

namespace sb::dra_driver {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::Shell;
namespace json = boost::json;

class DraDriverE2e : public ::testing::Test, public sb::testing::E2eEnv {
 protected:
  // `s` as a JSON string literal.
  static std::string Q(const std::string& s) { return json::serialize(json::string(s)); }

  void SetUp() override {
    Connect();
    if (HasFatalFailure()) return;
    ASSERT_EQ(env_.Get("SB_KUBELETS"), "1") << "needs testenv/up.sh --kubelets";
    ASSERT_FALSE(env_.Get("SB_DRA_DRIVER").empty())
        << "the environment runs no DRA driver (SB_DRA_DRIVER_BINARY unset at up.sh)";
    std::stringstream nodes(env_.Get("KUBE_NODES"));
    for (std::string n; std::getline(nodes, n, ',');) nodes_.push_back(n);
    ASSERT_GE(nodes_.size(), 2u);
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ns_ = "dra-";
    for (char c : name)
      ns_ += std::isalnum(static_cast<unsigned char>(c))
                 ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                 : '-';
    if (ns_.size() > 50) ns_.resize(50);
    auto made = RunSync(io_, kube_->Create(kube::NamespacesRef(),
                                           fmt::format(R"({{"apiVersion":"v1","kind":"Namespace",
                                           "metadata":{{"name":{}}}}})",
                                                       Q(ns_))));
    ASSERT_TRUE(made || made.error().code == ErrorCode::kAlreadyExists) << made.error().message;
    // What an earlier run left in the namespace.
    (void)RunSync(io_, kube_->Delete(kube::PodsRef(ns_), {.grace_period_seconds = 0}));
    (void)RunSync(io_, kube_->Delete(kube::DraRef("resourceclaims", ns_), {}));
    EXPECT_TRUE(WaitFor(
        [&] {
          auto l = RunSync(io_, kube_->List(kube::PodsRef(ns_), {}));
          return l && json::parse(*l).at("items").as_array().empty();
        },
        60s));
  }

  // The path of the node's CDI spec directory (testenv/kube/node.sh).
  std::string CdiDir(const std::string& node) { return env_.dir() + "/nodes/" + node + "/cdi"; }

  // A claim `name` with one request `request` of `count` devices of class `klass`.
  void CreateClaim(const std::string& name, const std::string& request, const std::string& klass,
                   int count) {
    std::string claim = fmt::format(
        R"({{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
        "metadata":{{"name":{},"namespace":{}}},
        "spec":{{"devices":{{"requests":[{{"name":{},"exactly":{{"deviceClassName":{},
        "allocationMode":"ExactCount","count":{}}}}}]}}}}}})",
        Q(name), Q(ns_), Q(request), Q(klass), count);
    auto r = RunSync(io_, kube_->Create(kube::DraRef("resourceclaims", ns_), claim));
    ASSERT_TRUE(r) << r.error().message;
  }

  // A busybox pod that uses claim `claim` (as pod claim "dev") and prints what it got, then
  // sleeps; no scheduler takes it (its schedulerName is nobody's). It tolerates every taint: the
  // kubelet admits a bound pod only if it tolerates the node's, and earlier tests (drains, the
  // bridge's node controller) may leave some. Its uid.
  std::string CreatePod(const std::string& name, const std::string& claim) {
    const std::string script =
        "env | grep -E '^(GPU_DEVICE|DRA_CPUS)' | sort; grep Cpus_allowed_list /proc/self/status; "
        "echo done; sleep 600";
    std::string pod = fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":{},"namespace":{}}},
        "spec":{{"schedulerName":"sb-dra-driver-e2e","restartPolicy":"Never",
        "terminationGracePeriodSeconds":1,"tolerations":[{{"operator":"Exists"}}],
        "resourceClaims":[{{"name":"dev","resourceClaimName":{}}}],
        "containers":[{{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never",
        "command":["sh","-c",{}],"resources":{{"claims":[{{"name":"dev"}}]}}}}]}}}})",
        Q(name), Q(ns_), Q(claim), Q(script));
    auto r = RunSync(io_, kube_->Create(kube::PodsRef(ns_), pod));
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return "";
    return std::string(json::parse(*r).at_pointer("/metadata/uid").as_string());
  }

  // What a scheduler does: the claim's allocation (`devices` of `driver` on `node`) and its
  // reservation for the pod, then the binding. The claim's uid.
  std::string AllocateAndBind(const std::string& claim, const std::string& request,
                              const std::string& driver, const std::vector<std::string>& devices,
                              const std::string& node, const std::string& pod,
                              const std::string& pod_uid) {
    std::string results;
    for (const std::string& d : devices) {
      if (!results.empty()) results += ",";
      results += fmt::format(R"({{"request":{},"driver":{},"pool":{},"device":{}}})", Q(request),
                             Q(driver), Q(node), Q(d));
    }
    std::string status = fmt::format(
        R"({{"status":{{"allocation":{{"devices":{{"results":[{}]}},
        "nodeSelector":{{"nodeSelectorTerms":[{{"matchFields":[{{"key":"metadata.name",
        "operator":"In","values":[{}]}}]}}]}}}},
        "reservedFor":[{{"resource":"pods","name":{},"uid":{}}}]}}}})",
        results, Q(node), Q(pod), Q(pod_uid));
    auto r = RunSync(
        io_, kube_->Patch(kube::DraRef("resourceclaims", ns_, claim).WithSubresource("status"),
                          kube::PatchType::kJsonMerge, status));
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return "";
    auto bound = RunSync(io_, kube::BindPod(*kube_, ns_, pod, pod_uid, node));
    EXPECT_TRUE(bound) << bound.error().message;
    return std::string(json::parse(*r).at_pointer("/metadata/uid").as_string());
  }

  // The container's log once it printed "done" (at most 90 s); "" when it did not.
  std::string LogWhenDone(const std::string& pod) {
    std::string log;
    WaitFor(
        [&] {
          log.clear();
          sb::testing::RunCommand(fmt::format("KUBECONFIG={} kubectl logs -n {} {} 2>/dev/null",
                                              env_.Get("KUBECONFIG"), ns_, pod),
                                  &log);
          return log.find("done\n") != std::string::npos;
        },
        90s);
    if (log.find("done\n") == std::string::npos) {
      std::string describe;
      sb::testing::RunCommand(fmt::format("KUBECONFIG={} kubectl describe pod -n {} {} 2>&1",
                                          env_.Get("KUBECONFIG"), ns_, pod),
                              &describe);
      ADD_FAILURE() << "pod " << pod << " printed no 'done' in 90 s:\n" << log << "\n" << describe;
      return "";
    }
    return log;
  }

  // Deletes the pod, waits until it is gone, then until the driver removed `cdi_file`.
  void DeleteAndExpectUnprepared(const std::string& pod, const std::string& cdi_file) {
    auto d = RunSync(io_, kube::DeletePod(*kube_, ns_, pod, {}));
    ASSERT_TRUE(d) << d.error().message;
    EXPECT_TRUE(WaitFor(
        [&] {
          auto p = RunSync(io_, kube::GetPod(*kube_, ns_, pod));
          return !p && p.error().code == ErrorCode::kNotFound;
        },
        60s))
        << "pod " << pod << " not gone in 60 s";
    EXPECT_TRUE(WaitFor([&] { return !std::filesystem::exists(cdi_file); }, 30s))
        << cdi_file << " still there 30 s after the pod was deleted";
  }

  // The host's CPUs (as a container without a cpuset claim sees them).
  static std::string HostCpus() {
    std::string out;
    sb::testing::RunCommand("grep Cpus_allowed_list /proc/1/status | cut -f2", &out);
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  std::vector<std::string> nodes_;
  std::string ns_;
};

// Every node publishes its fake GPUs and its CPUs as the bridge's device profiles expect.
TEST_F(DraDriverE2e, EveryNodePublishesItsGpusAndCpus) {
  for (const std::string& node : nodes_) {
    // kube-x1 (no slurmd) has no GPUs: only its CPUs.
    const bool external = env_.Get("KUBE_EXTERNAL_NODES").find(node) != std::string::npos;
    std::optional<json::value> gpu;
    std::optional<json::value> cpu;
    WaitFor(
        [&] {
          auto g = RunSync(
              io_, kube_->Get(kube::DraRef("resourceslices", "", node + "-gpu.example.com")));
          auto c = RunSync(io_, kube_->Get(kube::DraRef("resourceslices", "", node + "-dra.cpu")));
          if (g) gpu = json::parse(*g);
          if (c) cpu = json::parse(*c);
          return (gpu || external) && cpu;
        },
        30s);
    ASSERT_TRUE(cpu) << node << ": no ResourceSlice " << node << "-dra.cpu";
    if (external) {
      EXPECT_FALSE(gpu) << node << " has no GPUs but a gpu.example.com slice";
    } else {
      ASSERT_TRUE(gpu) << node << ": no ResourceSlice " << node << "-gpu.example.com";
      EXPECT_EQ(gpu->at_pointer("/spec/nodeName"), node.c_str());
      EXPECT_EQ(gpu->at_pointer("/spec/pool/name"), node.c_str());
      const json::array& devices = gpu->at_pointer("/spec/devices").as_array();
      ASSERT_EQ(devices.size(), 4u) << node;
      for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(devices[i].at("name"), ("gpu-" + std::to_string(i)).c_str());
        EXPECT_EQ(devices[i].at_pointer("/attributes/index/int"), static_cast<std::int64_t>(i));
      }
    }
    EXPECT_EQ(cpu->at_pointer("/spec/nodeName"), node.c_str());
    const json::array& cpus = cpu->at_pointer("/spec/devices").as_array();
    ASSERT_EQ(cpus.size(), 8u) << node;
    for (std::size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(cpus[i].at_pointer("/attributes/dra.cpu~1cpuID/int"), static_cast<std::int64_t>(i));
    }
  }
}

// A claim allocated gpu-2 on n1: the container sees exactly GPU_DEVICE_2=gpu-2; the driver's CDI
// spec exists while the pod runs and is gone once it is deleted.
TEST_F(DraDriverE2e, PodSeesExactlyItsAllocatedGpu) {
  const std::string node = nodes_[0];
  CreateClaim("gpu", "gpu", "gpu.example.com", 1);
  const std::string pod_uid = CreatePod("gpu-pod", "gpu");
  ASSERT_FALSE(pod_uid.empty());
  const std::string claim_uid =
      AllocateAndBind("gpu", "gpu", "gpu.example.com", {"gpu-2"}, node, "gpu-pod", pod_uid);
  ASSERT_FALSE(claim_uid.empty());
  const std::string log = LogWhenDone("gpu-pod");
  EXPECT_NE(log.find("GPU_DEVICE_2=gpu-2\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("GPU_DEVICE_0"), std::string::npos) << log;
  EXPECT_EQ(log.find("GPU_DEVICE_1"), std::string::npos) << log;
  EXPECT_EQ(log.find("GPU_DEVICE_3"), std::string::npos) << log;
  EXPECT_EQ(log.find("DRA_CPUS"), std::string::npos) << log;
  // No cpuset claim: the host's CPUs.
  EXPECT_NE(log.find("Cpus_allowed_list:\t" + HostCpus() + "\n"), std::string::npos) << log;
  const std::string cdi = CdiDir(node) + "/gpu.example.com-" + claim_uid + ".json";
  EXPECT_TRUE(std::filesystem::exists(cdi)) << cdi;
  DeleteAndExpectUnprepared("gpu-pod", cdi);
  (void)RunSync(io_, kube_->Delete(kube::DraRef("resourceclaims", ns_, "gpu"), {}));
}

// A dra.cpu claim of CPUs 0-1 (of CPU 1 alone on a 2-CPU host, where 0-1 is every CPU and would
// prove nothing): the container's cpuset is exactly that, set by the driver's createRuntime hook.
TEST_F(DraDriverE2e, PodCpusetIsExactlyItsAllocatedCpus) {
  const std::string node = nodes_[1];
  const bool small = sysconf(_SC_NPROCESSORS_ONLN) <= 2;
  const std::vector<std::string> devices = small
                                               ? std::vector<std::string>{"cpudev001"}
                                               : std::vector<std::string>{"cpudev000", "cpudev001"};
  const std::string want = small ? "1" : "0-1";
  CreateClaim("cpus", "cpu", "dra.cpu", static_cast<int>(devices.size()));
  const std::string pod_uid = CreatePod("cpu-pod", "cpus");
  ASSERT_FALSE(pod_uid.empty());
  const std::string claim_uid =
      AllocateAndBind("cpus", "cpu", "dra.cpu", devices, node, "cpu-pod", pod_uid);
  ASSERT_FALSE(claim_uid.empty());
  const std::string log = LogWhenDone("cpu-pod");
  EXPECT_NE(log.find("Cpus_allowed_list:\t" + want + "\n"), std::string::npos) << log;
  EXPECT_NE(log.find("DRA_CPUS=" + want + "\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("GPU_DEVICE"), std::string::npos) << log;
  const std::string cdi = CdiDir(node) + "/dra.cpu-" + claim_uid + ".json";
  EXPECT_TRUE(std::filesystem::exists(cdi)) << cdi;
  DeleteAndExpectUnprepared("cpu-pod", cdi);
  (void)RunSync(io_, kube_->Delete(kube::DraRef("resourceclaims", ns_, "cpus"), {}));
}

}  // namespace
}  // namespace sb::dra_driver
