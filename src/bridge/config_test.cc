// SPDX-License-Identifier: Apache-2.0
// Config parsing, hostlists and job tags.
#include <gtest/gtest.h>

#include "bridge/config.h"
#include "bridge/hostlist.h"
#include "bridge/pods.h"
#include "bridge/tag.h"

namespace sb::bridge {
namespace {

TEST(ConfigTest, DefaultsWhenEmpty) {
  Result<Config> c = ParseConfig("");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->scheduler_name, "slurm-bridge-scheduler");
  EXPECT_EQ(c->job_poll_interval, std::chrono::milliseconds(500));
  EXPECT_EQ(c->bound_job_poll_interval, std::chrono::seconds(5));
  EXPECT_EQ(c->pending_job_poll_interval, std::chrono::seconds(2));
  EXPECT_EQ(c->job_mode, JobMode::kExternal);
  EXPECT_EQ(c->resource_tres.at("nvidia.com/gpu"), "gres/gpu");
  EXPECT_EQ(c->resource_tres.at("amd.com/gpu"), "gres/gpu");
  EXPECT_FALSE(c->has_managed_namespace_selector);
  EXPECT_EQ(c->device_profiles, DefaultDeviceProfiles());
}

TEST(ConfigTest, UpstreamKeysCaseInsensitive) {
  Result<Config> c = ParseConfig(R"(
schedulerName: my-sched
SlurmRestApi: http://slurm-restapi.slurm:6820
partition: gpu
mcslabel: kubernetes
managedNamespaces: [a, b]
managedNamespaceSelector:
  matchLabels: {team: ml}
  matchExpressions:
  - {key: tier, operator: In, values: [gold]}
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->scheduler_name, "my-sched");
  EXPECT_EQ(c->slurm_rest_api, "http://slurm-restapi.slurm:6820");
  EXPECT_EQ(c->partition, "gpu");
  EXPECT_EQ(c->mcs_label, "kubernetes");
  EXPECT_EQ(c->managed_namespaces, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(c->has_managed_namespace_selector);
  EXPECT_TRUE(c->managed_namespace_selector.Matches({{"team", "ml"}, {"tier", "gold"}}));
  EXPECT_FALSE(c->managed_namespace_selector.Matches({{"team", "ml"}, {"tier", "iron"}}));
  EXPECT_FALSE(c->managed_namespace_selector.Matches({{"tier", "gold"}}));
  EXPECT_TRUE(c->warnings.empty());
}

TEST(ConfigTest, OurKeys) {
  Result<Config> c = ParseConfig(R"(
clusterName: prod
jobPollInterval: 250ms
boundJobPollInterval: 2s
pendingJobPollInterval: 3s
jobListInterval: 2s
nodeListInterval: 1m
jobMode: batch
maxConcurrentSubmits: 4
defaultTimeLimit: 90s
jobGoneBrake: 0
slurmApiVersion: v0.0.44
resourceTres: {example.com/fpga: gres/fpga, amd.com/gpu: ""}
someFutureKey: 1
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->cluster_name, "prod");
  EXPECT_EQ(c->job_poll_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(c->bound_job_poll_interval, std::chrono::seconds(2));
  EXPECT_EQ(c->pending_job_poll_interval, std::chrono::seconds(3));
  EXPECT_EQ(c->job_list_interval, std::chrono::milliseconds(2000));
  EXPECT_EQ(c->node_list_interval, std::chrono::milliseconds(60000));
  EXPECT_EQ(c->job_mode, JobMode::kBatch);
  EXPECT_EQ(c->max_concurrent_submits, 4);
  EXPECT_EQ(c->default_time_limit, std::chrono::minutes(2)) << "rounded up to whole minutes";
  EXPECT_EQ(c->job_gone_brake, 0);
  EXPECT_EQ(c->resource_tres.at("example.com/fpga"), "gres/fpga");
  EXPECT_FALSE(c->resource_tres.contains("amd.com/gpu"));
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("someFutureKey"), std::string::npos);
}

// Issue #26: upstream 1.3 rejects unknown keys; here only with strictConfig (wherever it is in
// the file), and the error names every unknown key.
TEST(ConfigTest, StrictConfigRejectsUnknownKeys) {
  const char* yaml = R"(
someFutureKey: 1
partition: batch
strictConfig: true
nodeSharingTypo: coResident
)";
  Result<Config> c = ParseConfig(yaml);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(c.error().message.find("unknown config keys someFutureKey, nodeSharingTypo"),
            std::string::npos)
      << c.error().message;
  c = ParseConfig("strictConfig: true\npartition: batch\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->warnings.empty());
  c = ParseConfig("strictConfig: false\nsomeFutureKey: 1\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->warnings.size(), 1u);
  EXPECT_FALSE(ParseConfig("strictConfig: maybe\n"));
}

// Upstream 1.3's clientQPS / clientBurst: same meaning, but no limit unless set.
TEST(ConfigTest, ClientQpsAndBurst) {
  Result<Config> c = ParseConfig("partition: batch\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->client_qps, 0);
  EXPECT_EQ(c->client_burst, 0);
  c = ParseConfig("clientQPS: 50\nclientBurst: 100\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->client_qps, 50);
  EXPECT_EQ(c->client_burst, 100);
  c = ParseConfig("clientQPS: 2.5\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->client_qps, 2.5);
  for (const char* bad : {"clientQPS: -1\n", "clientQPS: fast\n", "clientQPS: 1e9\n",
                          "clientBurst: -2\n", "clientBurst: lots\n"}) {
    Result<Config> b = ParseConfig(bad);
    ASSERT_FALSE(b) << bad;
    EXPECT_NE(b.error().message.find("client"), std::string::npos) << b.error().message;
  }
}

// Upstream 1.3's nodeSharing, placeholder (our jobMode) and maxTerminationGracePeriodSeconds.
TEST(ConfigTest, NodeSharingPlaceholderAndGraceCap) {
  Result<Config> c = ParseConfig("partition: batch\n");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node_sharing, NodeSharing::kExclusive);
  EXPECT_EQ(c->job_mode, JobMode::kExternal);
  EXPECT_EQ(c->max_termination_grace_seconds, 300);
  EXPECT_TRUE(c->mcs_sharing);
  c = ParseConfig(
      "nodeSharing: coResident\nplaceholder: batch\n"
      "maxTerminationGracePeriodSeconds: 60\nmcsSharing: false\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->node_sharing, NodeSharing::kCoResident);
  EXPECT_EQ(c->job_mode, JobMode::kBatch);
  EXPECT_EQ(c->max_termination_grace_seconds, 60);
  EXPECT_FALSE(c->mcs_sharing);
  EXPECT_TRUE(c->warnings.empty());
  c = ParseConfig(
      "nodeSharing: exclusive\nplaceholder: external\n"
      "maxTerminationGracePeriodSeconds: 0\nstrictConfig: true\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->node_sharing, NodeSharing::kExclusive);
  EXPECT_EQ(c->job_mode, JobMode::kExternal);
  EXPECT_EQ(c->max_termination_grace_seconds, 0);
  for (const char* bad :
       {"nodeSharing: shared\n", "placeholder: script\n", "maxTerminationGracePeriodSeconds: -1\n",
        "maxTerminationGracePeriodSeconds: long\n", "mcsSharing: sometimes\n"}) {
    Result<Config> b = ParseConfig(bad);
    ASSERT_FALSE(b) << bad;
    const std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
    EXPECT_NE(b.error().message.find(key), std::string::npos) << b.error().message;
  }
}

TEST(ConfigTest, BadValuesNameTheKey) {
  struct Case {
    const char* yaml;
    const char* want;
  } cases[] = {
      {"jobPollInterval: fast", "config key jobPollInterval: \"fast\" is not a duration"},
      {"jobPollInterval: 0s", "jobPollInterval: must be greater than zero"},
      {"boundJobPollInterval: soon", "config key boundJobPollInterval: \"soon\" is not a duration"},
      {"pendingJobPollInterval: later",
       "config key pendingJobPollInterval: \"later\" is not a duration"},
      {"slurmRestApi: slurm:6820", "config key slurmRestApi: \"slurm:6820\" is not"},
      {"jobMode: magic", "config key jobMode: \"magic\""},
      {"managedNamespaces: x", "config key managedNamespaces: must be a list"},
      {"schedulerName: ''", "config key schedulerName: must not be empty"},
      {"maxConcurrentSubmits: -1", "config key maxConcurrentSubmits"},
      {"defaultTimeLimit: soon", "config key defaultTimeLimit: \"soon\" is not a duration"},
      {"jobGoneBrake: many", "config key jobGoneBrake: \"many\" is not a number"},
      {"slurmApiVersion: v0.0.40", "config key slurmApiVersion"},
      {"resourceTres: {nvidia.com/gpu: gpu}", "config key resourceTres: nvidia.com/gpu"},
      {"managedNamespaceSelector: {matchExpressions: [{key: a, operator: Near}]}",
       "operator \"Near\""},
      {"[1, 2]", "config must be a YAML map"},
      {"a: [", "config is not YAML"},
  };
  for (const Case& c : cases) {
    Result<Config> r = ParseConfig(c.yaml);
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_NE(r.error().message.find(c.want), std::string::npos)
        << c.yaml << " -> " << r.error().message;
  }
}

TEST(ConfigTest, DeviceProfiles) {
  // Upstream 1.3's defaults: cpu (dra.cpu), gpu-example, gpu-nvidia (type gpu).
  const std::vector<DeviceProfile> defaults = DefaultDeviceProfiles();
  ASSERT_EQ(defaults.size(), 3U);
  EXPECT_EQ(defaults[0].name, "cpu");
  EXPECT_EQ(defaults[0].driver, "dra.cpu");
  EXPECT_EQ(defaults[0].backend, DeviceBackend::kCoreBitmap);
  EXPECT_EQ(defaults[1].name, "gpu-example");
  EXPECT_EQ(defaults[1].selector, "device.driver == 'gpu.example.com'");
  EXPECT_EQ(defaults[1].gres_name, "gpu");
  EXPECT_EQ(defaults[2].name, "gpu-nvidia");
  EXPECT_EQ(defaults[2].selector,
            "device.driver == 'gpu.nvidia.com' && "
            "device.attributes['gpu.nvidia.com'].type == 'gpu'");

  // Upstream's shape (its own config test's profile); a list replaces the defaults.
  Result<Config> c = ParseConfig(R"(
strictConfig: true
deviceProfiles:
  - name: custom-accelerator
    driver: accelerator.example.com
    selector: device.driver == 'accelerator.example.com'
    backend:
      type: indexed-gres
      gresName: accelerator
  - Name: cpus
    driver: cpu.example.com
    selector: device.driver == 'cpu.example.com'
    backend: {type: core-bitmap}
  - name: h100
    driver: gpu.nvidia.com
    selector: device.driver == 'gpu.nvidia.com'
    backend: {type: indexed-gres, gresName: gpu, gresType: h100, indexFrom: "attribute:minor"}
)");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->warnings.empty());
  EXPECT_EQ(c->device_profiles,
            (std::vector<DeviceProfile>{{.name = "custom-accelerator",
                                         .driver = "accelerator.example.com",
                                         .selector = "device.driver == 'accelerator.example.com'",
                                         .backend = DeviceBackend::kIndexedGres,
                                         .gres_name = "accelerator"},
                                        {.name = "cpus",
                                         .driver = "cpu.example.com",
                                         .selector = "device.driver == 'cpu.example.com'",
                                         .backend = DeviceBackend::kCoreBitmap},
                                        {.name = "h100",
                                         .driver = "gpu.nvidia.com",
                                         .selector = "device.driver == 'gpu.nvidia.com'",
                                         .backend = DeviceBackend::kIndexedGres,
                                         .gres_name = "gpu",
                                         .gres_type = "h100",
                                         .index_from = "attribute:minor"}}));

  // null keeps the defaults (as upstream); [] turns DRA off.
  c = ParseConfig("deviceProfiles: null");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->device_profiles, defaults);
  c = ParseConfig("deviceProfiles: []");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->device_profiles.empty());
}

TEST(ConfigTest, BadDeviceProfilesNameTheKey) {
  struct Case {
    const char* yaml;
    const char* want;
  } cases[] = {
      {"deviceProfiles: gpu", "config key deviceProfiles: must be a list of device profiles"},
      {"deviceProfiles: [gpu]", "config key deviceProfiles[0]: entries must be maps"},
      // Upstream's own strictness test: a misspelt backend field.
      {R"(deviceProfiles:
  - name: custom-accelerator
    driver: accelerator.example.com
    selector: device.driver == 'accelerator.example.com'
    backend:
      type: indexed-gres
      gresNam: accelerator
)",
       "config key deviceProfiles[0].backend: unknown field gresNam"},
      {"deviceProfiles: [{name: a, driver: a.io, selector: \"device.driver == 'a.io'\", "
       "colour: red, backend: {type: core-bitmap}}]",
       "config key deviceProfiles[0]: unknown field colour"},
      {"deviceProfiles: [{name: a, driver: a.io, selector: \"device.driver == 'a.io'\"}]",
       "config key deviceProfiles[0]: needs a backend"},
      {"deviceProfiles: [{name: a, driver: a.io, selector: \"device.driver == 'a.io'\", "
       "backend: {type: bitmap}}]",
       "config key deviceProfiles[0].backend: type \"bitmap\" is not indexed-gres or core-bitmap"},
      {"deviceProfiles: [{name: a, driver: a.io, selector: \"device.driver == 'a.io'\", "
       "backend: {type: indexed-gres, gresName: gpu}}, {name: a, driver: b.io, "
       "selector: \"device.driver == 'b.io'\", backend: {type: indexed-gres, gresName: gpu}}]",
       "config key deviceProfiles: profile \"a\": the name is used twice"},
      {"deviceProfiles: [{name: a, driver: a.io, selector: \"device.attributes['a.io'].n > 2\", "
       "backend: {type: indexed-gres, gresName: gpu}}]",
       "config key deviceProfiles: profile \"a\": selector"},
      {"deviceProfiles: [{name: a, driver: a.io, selector: [x], backend: {type: core-bitmap}}]",
       "config key deviceProfiles[0].selector: must be a string"},
  };
  for (const Case& c : cases) {
    Result<Config> r = ParseConfig(c.yaml);
    ASSERT_FALSE(r) << c.yaml;
    EXPECT_NE(r.error().message.find(c.want), std::string::npos)
        << c.yaml << " -> " << r.error().message;
  }
}

TEST(DurationTest, GoStyle) {
  EXPECT_EQ(*ParseDuration("1h30m"), std::chrono::milliseconds(5'400'000));
  EXPECT_EQ(*ParseDuration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_EQ(*ParseDuration("750"), std::chrono::milliseconds(750));
  EXPECT_FALSE(ParseDuration("5 s"));
  EXPECT_FALSE(ParseDuration("s"));
  EXPECT_FALSE(ParseDuration("5d"));
}

// Found by fuzz/bridge_config_fuzz (UBSan: float-cast-overflow): a duration beyond int64
// milliseconds is an error, as for Go's time.ParseDuration.
TEST(DurationTest, BeyondInt64IsAnError) {
  for (const char* d : {"3h6666666666666666666666666666605s5s", "2562047788016h",
                        "9999999999999999999999999h", "99999999999999999999"}) {
    SCOPED_TRACE(d);
    Result<std::chrono::milliseconds> r = ParseDuration(d);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_TRUE(ParseDuration("2562047788015h"));  // just below
}

TEST(HostlistTest, Expands) {
  struct Case {
    const char* in;
    std::vector<std::string> want;
  } cases[] = {
      {"n1", {"n1"}},
      {"n[1-3]", {"n1", "n2", "n3"}},
      {"n[1-2,5],gpu-[08-10]x", {"n1", "n2", "n5", "gpu-08x", "gpu-09x", "gpu-10x"}},
      {"r[1-2]n[1-2]", {"r1n1", "r1n2", "r2n1", "r2n2"}},
      {"a,b c", {"a", "b", "c"}},
      {"", {}},
  };
  for (const Case& c : cases) {
    Result<std::vector<std::string>> r = ExpandHostlist(c.in);
    ASSERT_TRUE(r) << c.in << ": " << r.error().message;
    EXPECT_EQ(*r, c.want) << c.in;
  }
}

TEST(HostlistTest, RejectsMalformed) {
  for (const char* bad : {"n[1-", "n]1", "n[3-1]", "n[a-b]", "n[[1]]", "n[1,,2]"}) {
    EXPECT_FALSE(ExpandHostlist(bad)) << bad;
  }
  EXPECT_FALSE(ExpandHostlist("n[1-100]", 50));
}

// A range ending at the largest uint64 ended (the loop's counter wrapped to 0 and it ran until
// memory ran out).
TEST(HostlistTest, RangeEndingAtTheLargestNumberEnds) {
  Result<std::vector<std::string>> r =
      ExpandHostlist("n[18446744073709551614-18446744073709551615]");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::vector<std::string>{"n18446744073709551614", "n18446744073709551615"}));
  EXPECT_FALSE(ExpandHostlist("n[18446744073709551616]"));
}

TEST(JobTagTest, RoundTripAndUpstreamCompatible) {
  JobTag tag{.pods = {"ns/a", "ns/b"},
             .uids = {"u1", "u2"},
             .group = "Job/ns/train",
             .cluster = "kubernetes",
             .scheduler = "slurm-bridge-scheduler"};
  std::string text = EncodeJobTag(tag);
  EXPECT_EQ(text.rfind("{\"pods\":[\"ns/a\",\"ns/b\"]", 0), 0u) << text;
  std::optional<JobTag> back = ParseJobTag(text);
  ASSERT_TRUE(back);
  tag.ours = true;
  EXPECT_EQ(*back, tag);
  EXPECT_TRUE(back->BelongsTo("kubernetes", "slurm-bridge-scheduler"));
  EXPECT_FALSE(back->BelongsTo("other-cluster", "slurm-bridge-scheduler"));
  EXPECT_FALSE(back->BelongsTo("kubernetes", "other-scheduler"));

  std::optional<JobTag> upstream = ParseJobTag(R"({"pods":["default/x"]})");
  ASSERT_TRUE(upstream);
  EXPECT_EQ(upstream->pods, std::vector<std::string>{"default/x"});
  EXPECT_FALSE(upstream->ours);
  EXPECT_FALSE(upstream->BelongsTo("kubernetes", "slurm-bridge-scheduler"));
}

TEST(JobTagTest, ForeignCommentsAreNotTags) {
  for (const char* c : {"", "hello", "{}", R"({"pods":"x"})", R"({"pods":[1]})", "{bad json",
                        R"({"pods":[],"slurm-bridge":{"v":2,"cluster":"kubernetes"}})"}) {
    std::optional<JobTag> t = ParseJobTag(c);
    EXPECT_TRUE(!t || !t->ours) << c;
  }
}

TEST(PodsTest, EndedStatesAndFinalizerPatch) {
  for (const char* s : {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                        "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "GONE"}) {
    EXPECT_TRUE(JobEnded(s)) << s;
  }
  for (const char* s : {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", ""}) {
    EXPECT_FALSE(JobEnded(s)) << s;
  }
  EXPECT_EQ(PhaseOf(""), JobPhase::kUnknown);
  EXPECT_EQ(PhaseOf("PENDING"), JobPhase::kPending);
  EXPECT_EQ(PhaseOf("RUNNING"), JobPhase::kRunning);
  EXPECT_EQ(PhaseOf("COMPLETING"), JobPhase::kEnding);
  EXPECT_EQ(PhaseOf("TIMEOUT"), JobPhase::kEnded);
  EXPECT_EQ(PhaseOf("GONE"), JobPhase::kGone);
  EXPECT_EQ(PhaseOf("SUSPENDED"), JobPhase::kOther);
  EXPECT_EQ(JobState::Gone().name(), "GONE");
  EXPECT_TRUE(JobState::Gone().ended());
  EXPECT_FALSE(JobState("SUSPENDED").running());
  EXPECT_FALSE(JobState().known());
  kube::Pod pod;
  pod.metadata.resource_version = "42";
  pod.metadata.finalizers = {"a/keep", "scheduler.slinky.slurm.net/finalizer", "b/keep"};
  EXPECT_TRUE(HasFinalizer(pod));
  EXPECT_EQ(FinalizerRemovalPatch(pod),
            R"({"metadata":{"resourceVersion":"42","finalizers":["a/keep","b/keep"]}})");
  pod.metadata.finalizers = {"a/keep"};
  EXPECT_FALSE(HasFinalizer(pod));
  EXPECT_FALSE(FinalizerRemovalPatch(pod));
}

}  // namespace
}  // namespace sb::bridge
