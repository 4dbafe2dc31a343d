// SPDX-License-Identifier: Apache-2.0
// The webhook's DRA check (bridge/dra/admission.h).
#include "bridge/dra/admission.h"

#include <gtest/gtest.h>

#include "testing/dra_fixtures.h"

namespace sb::bridge {
namespace {

using namespace dra_test;  // NOLINT(google-build-using-namespace): the shared fixtures

TEST(DraAdmissionTest, AcceptsWhatTheProfilesCoverAndSaysWhyNot) {
  const kube::GenericObject tmpl = ObjectFile("resourceclaimtemplate_one_gpu.json");
  kube::Pod with_cpu =
      PodAsking({{"deviceclass.resource.kubernetes.io/dra.cpu", "2"}, {"cpu", "1"}});
  kube::Pod cpu_per_task = PodAsking({{"deviceclass.resource.kubernetes.io/dra.cpu", "2"}});
  cpu_per_task.metadata.annotations["slurmjob.slinky.slurm.net/cpu-per-task"] = "2";
  kube::Pod gres = PodAsking({{"deviceclass.resource.kubernetes.io/gpu.nvidia.com", "1"}});
  gres.metadata.annotations["slinky.slurm.net/gres"] = "gpu:1";
  kube::Pod pod_level_cpu = PodAsking({{"deviceclass.resource.kubernetes.io/dra.cpu", "2"}});
  pod_level_cpu.spec.resources.requests["cpu"] = "2";
  struct Case {
    std::string name;
    kube::Pod pod;
    std::vector<DeviceProfile> profiles;
    std::vector<PodResourceClaim> claims;
    std::vector<std::string> want;  // parts of the messages, one per problem
  };
  const std::vector<Case> cases = {
      {"no DRA", PodAsking({{"cpu", "1"}, {"nvidia.com/gpu", "1"}}), kDefaults, {}, {}},
      {"covered classes",
       PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"},
                  {"deviceclass.resource.kubernetes.io/dra.cpu", "2"}}),
       kDefaults,
       {},
       {}},
      {"a covered template claim",
       PodAsking({}),
       kDefaults,
       {{.name = "gpu", .resource_claim_template_name = "one-gpu"}},
       {}},
      {"an uncovered class",
       PodAsking({{"deviceclass.resource.kubernetes.io/fpga.io", "1"}}),
       kDefaults,
       {},
       {"device class \"fpga.io\" is covered by no device profile (covered: dra.cpu, "
        "gpu.example.com, gpu.nvidia.com): Slurm could not choose its devices"}},
      {"DRA off",
       PodAsking({{"deviceclass.resource.kubernetes.io/gpu.example.com", "1"}}),
       {},
       {},
       {"DRA is off: config deviceProfiles is empty"}},
      {"dra.cpu and cpu",
       with_cpu,
       kDefaults,
       {},
       {"resource \"cpu\" and \"deviceclass.resource.kubernetes.io/dra.cpu\" cannot both be "
        "requested"}},
      {"dra.cpu and pod-level cpu", pod_level_cpu, kDefaults, {}, {"cannot both be requested"}},
      {"cpu-per-task",
       cpu_per_task,
       kDefaults,
       {},
       {"annotation slurmjob.slinky.slurm.net/cpu-per-task cannot be used with"}},
      {"gres", gres, kDefaults, {}, {"annotation slurmjob.slinky.slurm.net/gres cannot be used"}},
      {"a shared claim",
       PodAsking({}),
       kDefaults,
       {{.name = "gpu", .resource_claim_name = "c"}},
       {"a claim shared by pods"}},
      {"two problems",
       PodAsking({{"deviceclass.resource.kubernetes.io/fpga.io", "1"}}),
       kDefaults,
       {{.name = "gpu", .resource_claim_template_name = "unknown"}},
       {"covered by no device profile", "ResourceClaimTemplate \"unknown\" could not be read"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> got =
        DraAdmissionProblems(c.pod, c.profiles, {}, c.claims, {{"one-gpu", &tmpl}});
    std::string all;
    for (const std::string& g : got) all += g + " | ";
    ASSERT_EQ(got.size(), c.want.size()) << all;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NE(got[i].find(c.want[i]), std::string::npos) << got[i];
    }
  }
}

}  // namespace
}  // namespace sb::bridge
