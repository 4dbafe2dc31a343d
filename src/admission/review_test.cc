// SPDX-License-Identifier: Apache-2.0
#include "admission/review.h"

#include <string>
#include <vector>

#include <map>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "bridge/names.h"
#include "bridge/pods.h"
#include "common/base64.h"
#include "kube/codec.h"

namespace sb::admission {
namespace {
namespace json = boost::json;

constexpr std::string_view kOurs = "slurm-bridge-scheduler";

// A pod's JSON with the given scheduler name (omitted when "-") and node name (omitted when "").
std::string PodJson(std::string_view ns, std::string_view scheduler, std::string_view node = "",
                    std::string_view extra_meta = "", std::string_view extra_spec = "",
                    std::string_view phase = "Pending") {
  std::string spec = R"("containers":[{"name":"c","image":"busybox"}])";
  if (scheduler != "-") {
    spec += R"(,"schedulerName":")" + std::string(scheduler) + "\"";
  }
  if (!node.empty()) {
    spec += R"(,"nodeName":")" + std::string(node) + "\"";
  }
  if (!extra_spec.empty()) {
    spec += "," + std::string(extra_spec);
  }
  std::string meta = R"("name":"p","namespace":")" + std::string(ns) + "\"";
  if (!extra_meta.empty()) {
    meta += "," + std::string(extra_meta);
  }
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{)" + meta + R"(},"spec":{)" + spec +
         R"(},"status":{"phase":")" + std::string(phase) + R"("}})";
}

std::string ReviewJson(std::string_view op, std::string_view ns, std::string_view object,
                       std::string_view old_object = "null", std::string_view user = "alice",
                       std::string_view sub = "") {
  std::string s = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{)"
                  R"("uid":"0f9a-11","kind":{"group":"","version":"v1","kind":"Pod"},)"
                  R"("resource":{"group":"","version":"v1","resource":"pods"},)";
  if (!sub.empty()) {
    s += R"("subResource":")" + std::string(sub) + "\",";
  }
  s += R"("namespace":")" + std::string(ns) + R"(","operation":")" + std::string(op) +
       R"(","userInfo":{"username":")" + std::string(user) + R"(","groups":[)" +
       (user.starts_with("system:node:") ? R"("system:nodes",)" : "") +
       R"("system:authenticated"]},)" + R"("object":)" + std::string(object) + R"(,"oldObject":)" +
       std::string(old_object) + R"(,"dryRun":false}})";
  return s;
}

Request Decoded(const std::string& review) {
  Result<Request> r = DecodeReview(review);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r.value_or(Request{});
}

// Applies an RFC 6902 patch of add/remove/replace operations on object members.
json::value ApplyPatch(json::value doc, std::string_view patch_text) {
  json::value patch = json::parse(patch_text);
  for (const json::value& op_v : patch.as_array()) {
    const json::object& op = op_v.as_object();
    std::string path(op.at("path").as_string());
    std::string kind(op.at("op").as_string());
    // Walk to the parent of the last token.
    std::vector<std::string> tokens;
    std::size_t pos = 1;
    while (pos <= path.size()) {
      std::size_t next = path.find('/', pos);
      if (next == std::string::npos) {
        next = path.size();
      }
      tokens.push_back(path.substr(pos, next - pos));
      pos = next + 1;
    }
    json::value* parent = &doc;
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
      parent = parent->is_array() ? &parent->as_array().at(std::stoul(tokens[i]))
                                  : &parent->as_object().at(tokens[i]);
    }
    if (parent->is_array()) {
      EXPECT_EQ(kind, "add") << path;
      EXPECT_EQ(tokens.back(), "-") << "only appends to arrays: " << path;
      parent->as_array().push_back(op.at("value"));
      continue;
    }
    json::object& obj = parent->as_object();
    if (kind == "remove") {
      EXPECT_TRUE(obj.contains(tokens.back())) << "remove of a missing member " << path;
      obj.erase(tokens.back());
    } else if (kind == "add") {
      obj[tokens.back()] = op.at("value");
    } else if (kind == "replace") {
      EXPECT_TRUE(obj.contains(tokens.back())) << "replace of a missing member " << path;
      obj[tokens.back()] = op.at("value");
    } else {
      ADD_FAILURE() << "unexpected op " << kind;
    }
  }
  return doc;
}

Policy ListPolicy() {
  Policy p;
  p.managed_namespaces = {"slurm-bridge", "hpc"};
  return p;
}

Policy SelectorPolicy() {
  Policy p;
  p.managed_namespaces = {"slurm-bridge"};  // ignored once a selector is set
  bridge::LabelSelector sel;
  sel.match_labels = {{"slurm-bridge/managed", "true"}};
  p.namespace_selector = sel;
  return p;
}

TEST(Mutate, NamespaceSelectorAndSchedulerNameMatrix) {
  const Labels managed_labels = {{"slurm-bridge/managed", "true"}};
  const Labels other_labels = {{"team", "a"}};
  struct Case {
    std::string name;
    Policy policy;
    std::string ns;
    const Labels* ns_labels;
    std::string scheduler;  // "-": absent
    std::string node;
    std::string want_scheduler;  // after the patch ("" = absent)
  };
  const std::vector<Case> cases = {
      {"listed namespace, default-scheduler", ListPolicy(), "hpc", nullptr, "default-scheduler", "",
       std::string(kOurs)},
      {"listed namespace, no schedulerName", ListPolicy(), "hpc", nullptr, "-", "",
       std::string(kOurs)},
      {"listed namespace, empty schedulerName", ListPolicy(), "hpc", nullptr, "", "",
       std::string(kOurs)},
      {"listed namespace, other custom scheduler kept", ListPolicy(), "hpc", nullptr, "volcano", "",
       "volcano"},
      {"listed namespace, nodeName removed", ListPolicy(), "slurm-bridge", nullptr,
       "default-scheduler", "n1", std::string(kOurs)},
      {"unlisted namespace untouched", ListPolicy(), "default", nullptr, "default-scheduler", "n1",
       "default-scheduler"},
      {"unlisted namespace, our scheduler: nodeName removed", ListPolicy(), "default", nullptr,
       std::string(kOurs), "n1", std::string(kOurs)},
      {"selector matches", SelectorPolicy(), "team-a", &managed_labels, "default-scheduler", "",
       std::string(kOurs)},
      {"selector does not match", SelectorPolicy(), "team-a", &other_labels, "default-scheduler",
       "", "default-scheduler"},
      {"selector set: the list is ignored", SelectorPolicy(), "slurm-bridge", &other_labels,
       "default-scheduler", "", "default-scheduler"},
      {"selector set, namespace unknown", SelectorPolicy(), "team-a", nullptr, "default-scheduler",
       "", "default-scheduler"},
      {"selector does not match, our scheduler", SelectorPolicy(), "team-a", &other_labels,
       std::string(kOurs), "n2", std::string(kOurs)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string pod = PodJson(c.ns, c.scheduler, c.node);
    Request req = Decoded(ReviewJson("CREATE", c.ns, pod));
    bool managed = IsManaged(*req.object, c.ns, c.policy, c.ns_labels);
    Policy policy = c.policy;
    policy.slurm_env = false;  // the containers' env: Mutate.ContainersGetSlurmsAllocation...
    Decision d = Mutate(req, policy, c.ns_labels);
    EXPECT_TRUE(d.allowed);
    json::value after = d.patch.empty() ? json::parse(pod) : ApplyPatch(json::parse(pod), d.patch);
    const json::object& spec = after.at("spec").as_object();
    std::string got_scheduler =
        spec.contains("schedulerName") ? std::string(spec.at("schedulerName").as_string()) : "";
    EXPECT_EQ(got_scheduler, c.want_scheduler);
    EXPECT_EQ(spec.contains("nodeName"), !managed && !c.node.empty());
    if (!managed) {
      EXPECT_TRUE(d.patch.empty()) << d.patch;
    }
    // The bridge's pods get its finalizer and toleration at CREATE; everything else is as it
    // was.
    json::object meta = after.at("metadata").as_object();
    const bool ours = c.want_scheduler == kOurs;
    EXPECT_EQ(meta.contains("finalizers"), ours);
    if (ours) {
      EXPECT_EQ(meta.at("finalizers"), json::array{json::string(bridge::kFinalizer)});
      EXPECT_EQ(spec.at("tolerations"),
                json::array{json::parse(bridge::ManagedNodeTolerationJson(kOurs))});
    } else {
      EXPECT_FALSE(spec.contains("tolerations"));
    }
    meta.erase("finalizers");
    EXPECT_EQ(json::value(meta), json::parse(pod).at("metadata"));
    EXPECT_EQ(spec.at("containers"), json::parse(pod).at("spec").at("containers"));
  }
}

// The finalizer and the toleration the scheduler would otherwise patch in after the submit:
// added at CREATE beside the pod's own (appended to lists that exist), never twice.
TEST(Mutate, BridgePodsGetTheFinalizerAndTolerationAtCreate) {
  Policy p = ListPolicy();
  p.slurm_env = false;
  const auto mutated = [&](const std::string& pod) {
    Decision d = Mutate(Decoded(ReviewJson("CREATE", "hpc", pod)), p, nullptr);
    EXPECT_TRUE(d.allowed);
    return d.patch.empty() ? json::parse(pod) : ApplyPatch(json::parse(pod), d.patch);
  };
  const json::value ours = json::parse(bridge::ManagedNodeTolerationJson(kOurs));
  const json::value other =
      json::parse(R"({"key":"dedicated","value":"gpu","effect":"NoSchedule"})");
  json::value after = mutated(
      PodJson("hpc", kOurs, "", R"("finalizers":["example.com/keep"])",
              R"("tolerations":[{"key":"dedicated","value":"gpu","effect":"NoSchedule"}])"));
  EXPECT_EQ(after.at("metadata").at("finalizers"),
            (json::array{"example.com/keep", json::string(bridge::kFinalizer)}));
  EXPECT_EQ(after.at("spec").at("tolerations"), (json::array{other, ours}));

  // Present already (a pod created again from a manifest read back): nothing added.
  const std::string has_both =
      PodJson("hpc", kOurs, "", R"("finalizers":[")" + std::string(bridge::kFinalizer) + R"("])",
              R"("tolerations":[{"operator":"Exists"}])");
  Decision d = Mutate(Decoded(ReviewJson("CREATE", "hpc", has_both)), p, nullptr);
  EXPECT_TRUE(d.patch.empty()) << d.patch << " (an Exists toleration tolerates every taint)";

  // Another scheduler's pod in a managed namespace: neither.
  after = mutated(PodJson("hpc", "volcano"));
  EXPECT_FALSE(after.at("metadata").as_object().contains("finalizers"));
  EXPECT_FALSE(after.at("spec").as_object().contains("tolerations"));

  // A pod without spec gets both with its new one.
  after = mutated(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}})");
  EXPECT_EQ(after.at("spec").at("tolerations"), json::array{ours});
  EXPECT_EQ(after.at("metadata").at("finalizers"), json::array{json::string(bridge::kFinalizer)});
}

// The containers (and init containers) of a bridge pod learn their Slurm job and GPUs: env
// from the job-id label and the GPU annotation the scheduler writes before binding, through the
// downward API; a variable the container sets itself is kept; NVIDIA_VISIBLE_DEVICES only when
// configured.
TEST(Mutate, ContainersGetSlurmsAllocationThroughTheDownwardApi) {
  const std::string spec = R"("initContainers":[{"name":"i0","image":"busybox"}])";
  const std::string pod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{)"
                          R"("containers":[{"name":"c0","image":"busybox"},)"
                          R"({"name":"c1","image":"busybox","env":[{"name":"SLURM_JOB_GPUS",)"
                          R"("value":"mine"}]}],)" +
                          spec + "}}";
  auto env_of = [](const json::value& after, std::string_view list, std::size_t i) {
    std::map<std::string, std::string> out;  // name -> fieldPath or value
    const json::object& c = after.at("spec").at(list).as_array().at(i).as_object();
    if (!c.contains("env")) return out;
    for (const json::value& e : c.at("env").as_array()) {
      const json::object& o = e.as_object();
      out[std::string(o.at("name").as_string())] =
          o.contains("value")
              ? std::string(o.at("value").as_string())
              : std::string(o.at("valueFrom").at("fieldRef").at("fieldPath").as_string());
    }
    return out;
  };
  const std::string job = "metadata.labels['" + std::string(bridge::kJobIdLabel) + "']";
  const std::string gpus =
      "metadata.annotations['" + std::string(bridge::kJobGpusAnnotation) + "']";
  Policy p = ListPolicy();
  Decision d = Mutate(Decoded(ReviewJson("CREATE", "hpc", pod)), p, nullptr);
  json::value after = ApplyPatch(json::parse(pod), d.patch);
  using Env = std::map<std::string, std::string>;
  EXPECT_EQ(env_of(after, "containers", 0), (Env{{"SLURM_JOB_ID", job}, {"SLURM_JOB_GPUS", gpus}}));
  EXPECT_EQ(env_of(after, "containers", 1),
            (Env{{"SLURM_JOB_ID", job}, {"SLURM_JOB_GPUS", "mine"}}));
  EXPECT_EQ(env_of(after, "initContainers", 0),
            (Env{{"SLURM_JOB_ID", job}, {"SLURM_JOB_GPUS", gpus}}));

  p.nvidia_visible_devices = true;
  d = Mutate(Decoded(ReviewJson("CREATE", "hpc", pod)), p, nullptr);
  after = ApplyPatch(json::parse(pod), d.patch);
  EXPECT_EQ(env_of(after, "containers", 0).at("NVIDIA_VISIBLE_DEVICES"), gpus);

  p.slurm_env = false;
  p.nvidia_visible_devices = false;
  d = Mutate(Decoded(ReviewJson("CREATE", "hpc", pod)), p, nullptr);
  after = ApplyPatch(json::parse(pod), d.patch);
  EXPECT_TRUE(env_of(after, "containers", 0).empty());

  // Not the bridge's pod: nothing added.
  d = Mutate(Decoded(ReviewJson("CREATE", "default", PodJson("default", "default-scheduler"))),
             ListPolicy(), nullptr);
  EXPECT_TRUE(d.patch.empty()) << d.patch;

  // Users cannot point a container at other GPUs: the annotation is the bridge's to write.
  const std::string forged =
      PodJson("hpc", kOurs, "",
              R"("annotations":{")" + std::string(bridge::kJobGpusAnnotation) + R"(":"0"})");
  Decision v = Validate(Decoded(ReviewJson("CREATE", "hpc", forged)), ListPolicy());
  EXPECT_FALSE(v.allowed);
  EXPECT_NE(v.message.find(bridge::kJobGpusAnnotation), std::string::npos) << v.message;
  const std::string plain = PodJson("hpc", kOurs);
  v = Validate(Decoded(ReviewJson("UPDATE", "hpc", forged, plain)), ListPolicy());
  EXPECT_FALSE(v.allowed) << "added by an update";
}

TEST(Mutate, OnlyOnCreate) {
  Policy p = ListPolicy();
  const std::string pod = PodJson("hpc", "default-scheduler", "n1");
  for (std::string_view op : {"UPDATE", "DELETE", "CONNECT"}) {
    SCOPED_TRACE(op);
    Request req = Decoded(ReviewJson(op, "hpc", op == "DELETE" ? "null" : pod, pod));
    Decision d = Mutate(req, p, nullptr);
    EXPECT_TRUE(d.allowed);
    EXPECT_TRUE(d.patch.empty()) << d.patch;
  }
  // A subresource CREATE (pods/binding, pods/eviction) is not the pod.
  Request binding = Decoded(ReviewJson("CREATE", "hpc", pod, "null", "alice", "binding"));
  EXPECT_TRUE(Mutate(binding, p, nullptr).patch.empty());
}

TEST(Mutate, PodWithoutSpecGetsOne) {
  Request req = Decoded(
      ReviewJson("CREATE", "hpc", R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}})"));
  Decision d = Mutate(req, ListPolicy(), nullptr);
  json::value after = ApplyPatch(
      json::parse(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}})"), d.patch);
  EXPECT_EQ(after.at("spec").at("schedulerName").as_string(), kOurs);
}

TEST(Mutate, UsesTheConfiguredSchedulerName) {
  Policy p = ListPolicy();
  p.scheduler_name = "my-slurm";
  Request req = Decoded(ReviewJson("CREATE", "hpc", PodJson("hpc", "default-scheduler")));
  Decision d = Mutate(req, p, nullptr);
  json::value after = ApplyPatch(json::parse(PodJson("hpc", "default-scheduler")), d.patch);
  EXPECT_EQ(after.at("spec").at("schedulerName").as_string(), "my-slurm");
}

// placeholder batch (upstream 1.3): a bridge pod's grace period is capped at
// maxTerminationGracePeriodSeconds; shorter ones, other schedulers' pods and a zero cap are left.
TEST(Mutate, TerminationGracePeriodIsCapped) {
  auto pod = [](std::string_view scheduler, std::string_view grace) {
    return fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","namespace":"other"}},
        "spec":{{"schedulerName":"{}"{},"containers":[{{"name":"c"}}]}}}})",
        scheduler,
        grace.empty() ? "" : fmt::format(R"(,"terminationGracePeriodSeconds":{})", grace));
  };
  Policy p = ListPolicy();
  p.max_termination_grace_seconds = 300;
  auto grace_after = [&](const std::string& manifest, const Policy& policy) -> std::string {
    Decision d = Mutate(Decoded(ReviewJson("CREATE", "other", manifest)), policy, nullptr);
    EXPECT_TRUE(d.allowed);
    json::value after =
        d.patch.empty() ? json::parse(manifest) : ApplyPatch(json::parse(manifest), d.patch);
    const json::value* g =
        after.at("spec").as_object().if_contains("terminationGracePeriodSeconds");
    return g == nullptr ? "absent" : json::serialize(*g);
  };
  EXPECT_EQ(grace_after(pod(kOurs, "3600"), p), "300");
  EXPECT_EQ(grace_after(pod(kOurs, "300"), p), "300");
  EXPECT_EQ(grace_after(pod(kOurs, "20"), p), "20");
  EXPECT_EQ(grace_after(pod(kOurs, ""), p), "absent") << "the apiserver's 30 s is below the cap";
  EXPECT_EQ(grace_after(pod("default-scheduler", "3600"), p), "3600") << "not a bridge pod";
  Policy low = p;
  low.max_termination_grace_seconds = 10;
  EXPECT_EQ(grace_after(pod(kOurs, ""), low), "10");
  Policy off = p;
  off.max_termination_grace_seconds = 0;
  EXPECT_EQ(grace_after(pod(kOurs, "3600"), off), "3600");
  // Only with placeholder batch, as upstream.
  bridge::Config c;
  c.max_termination_grace_seconds = 120;
  EXPECT_EQ(PolicyFromConfig(c, {}).max_termination_grace_seconds, 0);
  c.job_mode = bridge::JobMode::kBatch;
  EXPECT_EQ(PolicyFromConfig(c, {}).max_termination_grace_seconds, 120);
}

TEST(Validate, CreateRejections) {
  const std::string label = std::string(bridge::kJobIdLabel);
  const std::string annotation = std::string(bridge::kNodeAnnotation);
  struct Case {
    std::string name;
    std::string meta;
    std::string spec;
    std::string want;  // "" = allowed; else a part of the message
  };
  const std::vector<Case> cases = {
      {"plain pod", "", "", ""},
      {"job-id label", R"("labels":{")" + label + R"(":"12"})", "", label},
      {"node annotation", R"("annotations":{")" + annotation + R"(":"n1"})", "", annotation},
      {"resourceClaims without a claim or template", "", R"("resourceClaims":[{"name":"gpu"}])",
       "names no claim and no template"},
      {"shared resourceClaim", "",
       R"("resourceClaims":[{"name":"gpu","resourceClaimName":"one-gpu"}])", "shared"},
      {"resourceClaimTemplate not read", "",
       R"("resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"one-gpu"}])",
       "could not be read"},
      {"topologySpreadConstraints", "",
       R"("topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule"}])",
       "spec.topologySpreadConstraints"},
      {"empty topologySpreadConstraints", "", R"("topologySpreadConstraints":[])", ""},
      {"null resourceClaims", "", R"("resourceClaims":null)", ""},
      {"unsupported device class", "",
       R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/fpga.example.com":"1"}}}])",
       "fpga.example.com"},
      {"supported device class", "",
       R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/gpu.nvidia.com":"1"}}}])",
       ""},
      {"cpu with dra.cpu", "",
       R"("resources":{"requests":{"cpu":"1"}},"initContainers":[{"name":"i","resources":{"requests":{"deviceclass.resource.kubernetes.io/dra.cpu":"2"}}}])",
       "cannot both be requested"},
      {"cpu-per-task with dra.cpu",
       R"("annotations":{"slurmjob.slinky.slurm.net/cpu-per-task":"2"})",
       R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/dra.cpu":"2"}}}])",
       "cpu-per-task"},
      {"one class asked for by two containers", "",
       R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/gpu.example.com":"1"}}},)"
       R"({"name":"j","resources":{"limits":{"deviceclass.resource.kubernetes.io/gpu.example.com":"1"}}}])",
       "requested by containers"},
      {"gres with a GPU class", R"("annotations":{"slurmjob.slinky.slurm.net/gres":"gpu:1"})",
       R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/gpu.example.com":"1"}}}])",
       "slurmjob.slinky.slurm.net/gres"},
  };
  Policy p = ListPolicy();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Request req = Decoded(ReviewJson("CREATE", "hpc", PodJson("hpc", kOurs, "", c.meta, c.spec)));
    Decision d = Validate(req, p);
    if (c.want.empty()) {
      EXPECT_TRUE(d.allowed) << d.message;
    } else {
      EXPECT_FALSE(d.allowed);
      EXPECT_EQ(d.code, 403);
      EXPECT_EQ(d.reason, "Forbidden");
      EXPECT_NE(d.message.find(c.want), std::string::npos) << d.message;
    }
    // Pods of other schedulers are none of the webhook's business, but for the bridge's own
    // label and annotations (R-3: the node epilog and the binder read them).
    const bool bridge_key = c.name == "job-id label" || c.name == "node annotation";
    Request other = Decoded(
        ReviewJson("CREATE", "hpc", PodJson("hpc", "default-scheduler", "", c.meta, c.spec)));
    EXPECT_EQ(Validate(other, p).allowed, !bridge_key);
  }
}

kube::GenericObject Object(std::string_view text) {
  Result<kube::GenericObject> o = kube::Decode<kube::GenericObject>(text);
  EXPECT_TRUE(o.has_value()) << (o ? "" : o.error().message);
  return o.value_or(kube::GenericObject{});
}

// A ResourceClaimTemplate whose one request asks `count` devices of class `cls`, with `extra` in
// the request (a selector: Slurm cannot honour it).
kube::GenericObject Template(std::string_view name, std::string_view cls, int count = 1,
                             std::string_view extra = "") {
  return Object(fmt::format(
      R"({{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate",)"
      R"("metadata":{{"name":"{}","namespace":"hpc"}},"spec":{{"spec":{{"devices":{{"requests":[)"
      R"({{"name":"gpu","exactly":{{"deviceClassName":"{}","allocationMode":"ExactCount",)"
      R"("count":{}{}}}}}]}}}}}}}})",
      name, cls, count, extra));
}

kube::GenericObject DeviceClass(std::string_view name, std::string_view cel) {
  return Object(
      fmt::format(R"({{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{{)"
                  R"("name":"{}"}},"spec":{{"selectors":[{{"cel":{{"expression":"{}"}}}}]}}}})",
                  name, cel));
}

constexpr std::string_view kGpuClaim =
    R"("resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"one-gpu"}])";
constexpr std::string_view kExampleGpu =
    R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/gpu.example.com":"1"}}}])";

// The DRA path (bridge::DraAdmissionProblems): claims from templates the profiles cover are
// accepted; what Slurm cannot choose is refused with why.
TEST(Validate, DraClaimTemplatesAndClasses) {
  const Policy p = ListPolicy();
  auto validate = [&](std::string_view spec, const DraObjects& dra, const Policy& policy) {
    return Validate(Decoded(ReviewJson("CREATE", "hpc", PodJson("hpc", kOurs, "", "", spec))),
                    policy, dra);
  };
  DraObjects read;
  read.claim_templates.emplace("one-gpu", Template("one-gpu", "gpu.example.com"));
  Decision ok = validate(kGpuClaim, read, p);
  EXPECT_TRUE(ok.allowed) << ok.message;

  // A template that does not exist (404) is said so; one not read at all is refused as such.
  DraObjects missing;
  missing.missing_templates.insert("one-gpu");
  Decision absent = validate(kGpuClaim, missing, p);
  EXPECT_FALSE(absent.allowed);
  EXPECT_NE(
      absent.message.find(R"(ResourceClaimTemplate "one-gpu" does not exist in namespace "hpc")"),
      std::string::npos)
      << absent.message;
  EXPECT_EQ(absent.message.find("could not be read"), std::string::npos) << absent.message;
  Decision unread = validate(kGpuClaim, {}, p);
  EXPECT_FALSE(unread.allowed);
  EXPECT_NE(unread.message.find("could not be read"), std::string::npos) << unread.message;

  // A template asking for what Slurm cannot choose (a selector), or of a class no profile covers.
  DraObjects selector;
  selector.claim_templates.emplace(
      "one-gpu",
      Template(
          "one-gpu", "gpu.example.com", 1,
          R"(,"selectors":[{"cel":{"expression":"device.attributes['gpu.example.com'].index == 0"}}])"));
  Decision chosen = validate(kGpuClaim, selector, p);
  EXPECT_FALSE(chosen.allowed);
  EXPECT_NE(chosen.message.find(R"(pod claim "gpu")"), std::string::npos) << chosen.message;
  DraObjects fpga;
  fpga.claim_templates.emplace("one-gpu", Template("one-gpu", "fpga.example.com"));
  Decision uncovered = validate(kGpuClaim, fpga, p);
  EXPECT_FALSE(uncovered.allowed);
  EXPECT_NE(uncovered.message.find("fpga.example.com"), std::string::npos) << uncovered.message;

  // A DeviceClass read from the apiserver: one whose selector is a profile's is covered whatever
  // its name; one with another selector is not, even under a driver's name.
  const std::string custom =
      R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/big-gpus":"2"}}}])";
  DraObjects classes;
  classes.device_classes.emplace("big-gpus",
                                 DeviceClass("big-gpus", "device.driver == 'gpu.example.com'"));
  Decision by_selector = validate(custom, classes, p);
  EXPECT_TRUE(by_selector.allowed) << by_selector.message;
  EXPECT_FALSE(validate(custom, {}, p).allowed) << "an unread class is matched by driver name";
  DraObjects odd;
  odd.device_classes.emplace(
      "gpu.example.com", DeviceClass("gpu.example.com", "device.driver == 'other.example.com'"));
  EXPECT_FALSE(validate(kExampleGpu, odd, p).allowed);
  EXPECT_TRUE(validate(kExampleGpu, {}, p).allowed) << "the fallback by driver name";

  // Without profiles, DRA is off: every DRA request is refused.
  Policy off = p;
  off.device_profiles.clear();
  EXPECT_FALSE(validate(kExampleGpu, {}, off).allowed);
  EXPECT_FALSE(validate(kGpuClaim, read, off).allowed);
  // PolicyFromConfig carries the config's profiles.
  bridge::Config c;
  EXPECT_EQ(PolicyFromConfig(c, {}).device_profiles, c.device_profiles);
  c.device_profiles.clear();
  EXPECT_TRUE(PolicyFromConfig(c, {}).device_profiles.empty());
}

// UPDATE refuses only the DRA problems it adds: a job annotation that clashes with the pod's
// class; not a template gone since CREATE (nothing is read then).
TEST(Validate, DraUpdatesRefuseOnlyWhatTheyAdd) {
  const Policy p = ListPolicy();
  const std::string gres = R"("annotations":{"slurmjob.slinky.slurm.net/gres":"gpu:1"})";
  const std::string before = PodJson("hpc", kOurs, "", "", kExampleGpu);
  const std::string after = PodJson("hpc", kOurs, "", gres, kExampleGpu);
  Decision added = Validate(Decoded(ReviewJson("UPDATE", "hpc", after, before)), p);
  EXPECT_FALSE(added.allowed);
  EXPECT_NE(added.message.find("slurmjob.slinky.slurm.net/gres"), std::string::npos)
      << added.message;
  EXPECT_TRUE(Validate(Decoded(ReviewJson("UPDATE", "hpc", after, after)), p).allowed);
  const std::string claimed = PodJson("hpc", kOurs, "", "", kGpuClaim);
  Decision status = Validate(Decoded(ReviewJson("UPDATE", "hpc", claimed, claimed)), p);
  EXPECT_TRUE(status.allowed) << status.message;
}

TEST(Validate, DraObjectsToRead) {
  const Policy p = ListPolicy();
  auto needs = [&](const std::string& review) { return DraObjectsToRead(Decoded(review), p); };
  const std::string both =
      std::string(kGpuClaim) + "," +
      R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/dra.cpu":"2"}}},)"
      R"({"name":"j","resources":{"requests":{"deviceclass.resource.kubernetes.io/gpu.nvidia.com":"1"}}}])";
  DraNeeds n = needs(ReviewJson("CREATE", "hpc", PodJson("hpc", kOurs, "", "", both)));
  EXPECT_EQ(n.device_classes, (std::set<std::string>{"dra.cpu", "gpu.nvidia.com"}));
  EXPECT_EQ(n.claim_templates, (std::set<std::string>{"one-gpu"}));
  // Nothing for a pod without DRA requests, another scheduler's pod, a shared claim, or an UPDATE
  // that leaves the job annotations alone.
  EXPECT_TRUE(needs(ReviewJson("CREATE", "hpc", PodJson("hpc", kOurs))).empty());
  EXPECT_TRUE(
      needs(ReviewJson("CREATE", "hpc", PodJson("hpc", "default-scheduler", "", "", kGpuClaim)))
          .empty());
  EXPECT_TRUE(
      needs(ReviewJson("CREATE", "hpc",
                       PodJson("hpc", kOurs, "", "",
                               R"("resourceClaims":[{"name":"g","resourceClaimName":"x"}])")))
          .empty());
  const std::string claimed = PodJson("hpc", kOurs, "", "", kGpuClaim);
  EXPECT_TRUE(needs(ReviewJson("UPDATE", "hpc", claimed, claimed)).empty());
  const std::string annotated = PodJson(
      "hpc", kOurs, "", R"("annotations":{"slurmjob.slinky.slurm.net/gres":"gpu:1"})", kGpuClaim);
  EXPECT_EQ(needs(ReviewJson("UPDATE", "hpc", annotated, claimed)).claim_templates,
            (std::set<std::string>{"one-gpu"}));
}

TEST(Validate, TemplateDeviceClasses) {
  EXPECT_EQ(TemplateDeviceClasses(Template("t", "gpu.example.com")),
            (std::vector<std::string>{"gpu.example.com"}));
  kube::GenericObject alts = Object(
      R"({"kind":"ResourceClaimTemplate","metadata":{"name":"t"},"spec":{"spec":{"devices":{"requests":[)"
      R"({"name":"a","firstAvailable":[{"name":"x","deviceClassName":"b"},{"name":"y","deviceClassName":"a"}]},)"
      R"({"name":"c","exactly":{"deviceClassName":"b"}}]}}}})");
  EXPECT_EQ(TemplateDeviceClasses(alts), (std::vector<std::string>{"b", "a"}));
  EXPECT_TRUE(TemplateDeviceClasses(Object(R"({"kind":"ResourceClaimTemplate"})")).empty());
}

TEST(Validate, PrivilegedUsersMaySetTheLabelAndAnnotation) {
  Policy p = ListPolicy();
  p.privileged_users = {"system:serviceaccount:slinky:slurm-bridge-scheduler"};
  const std::string meta = R"("labels":{")" + std::string(bridge::kJobIdLabel) +
                           R"(":"7"},"annotations":{")" + std::string(bridge::kNodeAnnotation) +
                           R"(":"n1"})";
  const std::string pod = PodJson("hpc", kOurs, "", meta);
  EXPECT_TRUE(Validate(Decoded(ReviewJson("CREATE", "hpc", pod, "null",
                                          "system:serviceaccount:slinky:slurm-bridge-scheduler")),
                       p)
                  .allowed);
  Decision d = Validate(Decoded(ReviewJson("CREATE", "hpc", pod, "null", "alice")), p);
  EXPECT_FALSE(d.allowed);
  // Both problems are named.
  EXPECT_NE(d.message.find(bridge::kJobIdLabel), std::string::npos) << d.message;
  EXPECT_NE(d.message.find(bridge::kNodeAnnotation), std::string::npos) << d.message;
}

TEST(Validate, UpdatesOfTheLabelAndAnnotationAreLockedInEveryPhase) {
  Policy p = ListPolicy();
  p.privileged_users = {"bridge"};
  const std::string label_12 = R"("labels":{")" + std::string(bridge::kJobIdLabel) + R"(":"12"})";
  const std::string label_13 = R"("labels":{")" + std::string(bridge::kJobIdLabel) + R"(":"13"})";
  const std::string node_a =
      R"("annotations":{")" + std::string(bridge::kNodeAnnotation) + R"(":"n1"})";
  struct Case {
    std::string name;
    std::string old_meta, new_meta, phase, user, sub;
    bool allowed;
  };
  const std::vector<Case> cases = {
      // A user who points a pending pod at someone else's job id makes the bridge act on it.
      {"label added while pending", "", label_12, "Pending", "alice", "", false},
      {"label changed while pending", label_12, label_13, "Pending", "alice", "", false},
      {"label removed while pending", label_12, "", "Pending", "alice", "", false},
      {"label changed while running", label_12, label_13, "Running", "alice", "", false},
      {"label added while running", "", label_12, "Running", "alice", "", false},
      {"label removed while running", label_12, "", "Running", "alice", "", false},
      {"label changed after the pod ended", label_12, label_13, "Succeeded", "alice", "", false},
      {"label changed through pods/status", label_12, label_13, "Pending", "alice", "status",
       false},
      {"label unchanged while running", label_12, label_12, "Running", "alice", "", true},
      {"label unchanged while pending", label_12, label_12, "Pending", "alice", "", true},
      {"label added by the bridge while pending", "", label_12, "Pending", "bridge", "", true},
      {"label changed by the bridge while running", label_12, label_13, "Running", "bridge", "",
       true},
      {"annotation added while running", "", node_a, "Running", "alice", "", false},
      {"annotation added while pending", "", node_a, "Pending", "alice", "", false},
      {"annotation added by the bridge", "", node_a, "Pending", "bridge", "", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string old_pod = PodJson("hpc", kOurs, "n1", c.old_meta, "", c.phase);
    std::string new_pod = PodJson("hpc", kOurs, "n1", c.new_meta, "", c.phase);
    Decision d = Validate(Decoded(ReviewJson("UPDATE", "hpc", new_pod, old_pod, c.user, c.sub)), p);
    EXPECT_EQ(d.allowed, c.allowed) << d.message;
    if (!c.allowed) {
      EXPECT_NE(d.message.find("cannot be changed"), std::string::npos) << d.message;
    }
  }
}

// R-4, R-7 (and R-3 for other schedulers' pods): the bridge's keys are the bridge's to write. On
// its pods, every label and annotation under slinky.slurm.net/ and scheduler.slinky.slurm.net/
// but the legacy spelling of the job options (slinky.slurm.net/<option>, annotations); on other
// pods, the keys the bridge writes on its own (scheduler.slinky.slurm.net/*, the node, GPU, claim
// and nudge annotations), not the other keys of the slinky.slurm.net/ prefix, which
// SchedMD's slurm-operator writes on its NodeSet pods (slinky.slurm.net/pod-cordon, ...).
TEST(Validate, BridgeKeysAreReservedForTheBridge) {
  Policy p = ListPolicy();
  p.privileged_users = {"bridge"};
  const std::string offset(bridge::kHetJobOffsetLabel);
  const std::string het_id(bridge::kHetJobIdLabel);
  const std::string job_id(bridge::kJobIdLabel);
  const std::string claim(bridge::kResourceClaimAnnotation);
  const std::string nudged(bridge::kKubeletNudgeAnnotation);
  const std::string node(bridge::kNodeAnnotation);
  auto labels = [](const std::string& k, const std::string& v) {
    return fmt::format(R"("labels":{{"{}":"{}"}})", k, v);
  };
  auto annotations = [](const std::string& k, const std::string& v) {
    return fmt::format(R"("annotations":{{"{}":"{}"}})", k, v);
  };
  const std::string other = "default-scheduler";
  const std::string ours(kOurs);
  struct Case {
    std::string name;
    std::string scheduler;
    std::string old_meta;  // "-": CREATE
    std::string new_meta;
    std::string user;
    std::string want;  // "" = allowed; else a part of the message
  };
  const std::vector<Case> cases = {
      // R-4: a claim to have the controllers delete.
      {"claim annotation at create", ours, "-", annotations(claim, "shared-gpu"), "alice", claim},
      {"claim annotation added", ours, "", annotations(claim, "shared-gpu"), "alice", claim},
      {"claim annotation changed", ours, annotations(claim, "a"), annotations(claim, "b"), "alice",
       claim},
      {"claim annotation written by the bridge", ours, "", annotations(claim, "a"), "bridge", ""},
      {"nudge annotation added", ours, "", annotations(nudged, "2026-01-01T00:00:00Z"), "alice",
       nudged},
      // R-7: a refill binds two pods to one node.
      {"het offset relabelled", ours, labels(offset, "0"), labels(offset, "1"), "alice", offset},
      {"het offset added", ours, "", labels(offset, "1"), "alice", offset},
      {"het offset removed", ours, labels(offset, "0"), "", "alice", offset},
      {"het job id at create", ours, "-", labels(het_id, "5"), "alice", het_id},
      {"het offset unchanged", ours, labels(offset, "1"), labels(offset, "1"), "alice", ""},
      {"het offset set by the bridge", ours, labels(offset, "0"), labels(offset, "1"), "bridge",
       ""},
      // The whole prefixes on the bridge's pods.
      {"any scheduler.slinky.slurm.net/ label", ours, "-",
       labels("scheduler.slinky.slurm.net/new", "x"), "alice", "scheduler.slinky.slurm.net/new"},
      {"any scheduler.slinky.slurm.net/ annotation", ours, "",
       annotations("scheduler.slinky.slurm.net/new", "x"), "alice",
       "scheduler.slinky.slurm.net/new"},
      {"a slinky.slurm.net/ annotation not a job option", ours, "-",
       annotations("slinky.slurm.net/whatever", "x"), "alice", "slurmjob.slinky.slurm.net/"},
      {"a job option's legacy spelling as a label", ours, "-",
       labels("slinky.slurm.net/timelimit", "5"), "alice", "slinky.slurm.net/timelimit"},
      // Tenants' job options stay theirs, in both spellings.
      {"legacy timelimit annotation", ours, "-", annotations("slinky.slurm.net/timelimit", "5"),
       "alice", ""},
      {"legacy timelimit changed", ours, annotations("slinky.slurm.net/timelimit", "5"),
       annotations("slinky.slurm.net/timelimit", "9"), "alice", ""},
      {"legacy job-name annotation", ours, "", annotations("slinky.slurm.net/job-name", "x"),
       "alice", ""},
      {"job option annotation", ours, "-", annotations("slurmjob.slinky.slurm.net/timelimit", "5"),
       "alice", ""},
      {"unknown job option annotation", ours, "",
       annotations("slurmjob.slinky.slurm.net/unknown", "5"), "alice", ""},
      // R-3: other schedulers' pods, which the epilog and the binder's holder list read.
      {"other pod labelled with a job and annotated with a node", other, "-",
       R"("labels":{")" + job_id + R"(":"4242"},"annotations":{")" + node + R"(":"n1"})", "alice",
       job_id},
      {"other pod: job id added", other, "", labels(job_id, "4242"), "alice", job_id},
      {"other pod: het offset", other, "-", labels(offset, "1"), "alice", offset},
      {"other pod: claim annotation", other, "-", annotations(claim, "x"), "alice", claim},
      {"other pod: job id kept from before", other, labels(job_id, "4"), labels(job_id, "4"),
       "alice", ""},
      {"other pod: job id by the bridge", other, "-", labels(job_id, "4"), "bridge", ""},
      // slurm-operator's keys on its NodeSet pods, and the legacy options, stay allowed there.
      {"other pod: slurm-operator's cordon", other, "",
       annotations("slinky.slurm.net/pod-cordon", "true"), "alice", ""},
      {"other pod: slurm-operator's deletion cost", other, "-",
       annotations("slinky.slurm.net/pod-deletion-cost", "5"), "alice", ""},
      {"other pod: a slinky.slurm.net/ label", other, "-", labels("slinky.slurm.net/cluster", "s"),
       "alice", ""},
      {"other pod: legacy account", other, "-", annotations("slinky.slurm.net/account", "a"),
       "alice", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string now = PodJson("hpc", c.scheduler, "n1", c.new_meta, "", "Running");
    const bool create = c.old_meta == "-";
    const std::string before = create ? "null" : PodJson("hpc", c.scheduler, "n1", c.old_meta);
    Decision d =
        Validate(Decoded(ReviewJson(create ? "CREATE" : "UPDATE", "hpc",
                                    create ? PodJson("hpc", c.scheduler, "", c.new_meta) : now,
                                    before, c.user)),
                 p);
    if (c.want.empty()) {
      EXPECT_TRUE(d.allowed) << d.message;
    } else {
      EXPECT_FALSE(d.allowed);
      EXPECT_NE(d.message.find(c.want), std::string::npos) << d.message;
    }
  }
}

TEST(Validate, PrivilegedUsersByPatternAndGroup) {
  Policy p = ListPolicy();
  p.privileged_users = DefaultPrivilegedUsers("slinky");
  ASSERT_EQ(p.privileged_users,
            std::vector<std::string>{"system:serviceaccount:slinky:slurm-bridge-*"});
  EXPECT_TRUE(DefaultPrivilegedUsers("").empty());
  p.privileged_groups = {"slurm-bridge-admins"};
  auto request = [](std::string user, std::vector<std::string> groups) {
    Request r;
    r.username = std::move(user);
    r.groups = std::move(groups);
    return r;
  };
  EXPECT_TRUE(IsPrivileged(request("system:serviceaccount:slinky:slurm-bridge-scheduler", {}), p));
  EXPECT_TRUE(
      IsPrivileged(request("system:serviceaccount:slinky:slurm-bridge-controllers", {}), p));
  EXPECT_FALSE(IsPrivileged(request("system:serviceaccount:other:slurm-bridge-scheduler", {}), p));
  EXPECT_FALSE(IsPrivileged(request("system:serviceaccount:slinky:default", {}), p));
  EXPECT_FALSE(IsPrivileged(request("alice", {"system:authenticated"}), p));
  EXPECT_TRUE(IsPrivileged(request("bob", {"system:authenticated", "slurm-bridge-admins"}), p));
  EXPECT_FALSE(IsPrivileged(request("", {}), p));
  // The groups are read from the review.
  Request decoded = Decoded(ReviewJson("CREATE", "hpc", PodJson("hpc", kOurs)));
  EXPECT_EQ(decoded.groups, std::vector<std::string>{"system:authenticated"});
}

TEST(Validate, NodeNameOfABridgePodIsRefusedAtCreate) {
  Policy p = ListPolicy();
  Decision d = Validate(Decoded(ReviewJson("CREATE", "hpc", PodJson("hpc", kOurs, "n7"))), p);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.message.find("spec.nodeName"), std::string::npos) << d.message;
  // Once bound (UPDATE), the node name is the bridge's doing.
  const std::string bound = PodJson("hpc", kOurs, "n7");
  EXPECT_TRUE(Validate(Decoded(ReviewJson("UPDATE", "hpc", bound, bound)), p).allowed);
}

TEST(Validate, ManagedNodeTolerationIsReservedForBridgePods) {
  const std::string taint_key = std::string(bridge::kManagedNodeTaint);
  const std::string equal =
      R"("tolerations":[{"key":")" + taint_key +
      R"(","operator":"Equal","value":"slurm-bridge-scheduler","effect":"NoExecute"}])";
  const std::string exists_key =
      R"("tolerations":[{"key":")" + taint_key + R"(","operator":"Exists"}])";
  const std::string exists_all = R"("tolerations":[{"operator":"Exists"}])";
  const std::string exists_all_noexecute =
      R"("tolerations":[{"operator":"Exists","effect":"NoExecute"}])";
  const std::string exists_all_noschedule =
      R"("tolerations":[{"operator":"Exists","effect":"NoSchedule"}])";
  const std::string other_value =
      R"("tolerations":[{"key":")" + taint_key + R"(","operator":"Equal","value":"someone-else"}])";
  const std::string unrelated =
      R"("tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}])";
  const std::string daemonset =
      R"("ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"ds","uid":"u","controller":true}])";
  const std::string replicaset =
      R"("ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u","controller":true}])";
  const std::string mirror = R"("annotations":{"kubernetes.io/config.mirror":"abc"})";
  struct Case {
    std::string name;
    std::string ns, scheduler, meta, spec, user;
    bool allowed;
  };
  const std::vector<Case> cases = {
      {"Equal toleration", "team", "default-scheduler", "", equal, "alice", false},
      {"Exists on the key", "team", "default-scheduler", "", exists_key, "alice", false},
      {"Exists with an empty key", "team", "default-scheduler", "", exists_all, "alice", false},
      {"Exists, empty key, NoExecute", "team", "-", "", exists_all_noexecute, "alice", false},
      {"Exists, empty key, NoSchedule only", "team", "default-scheduler", "", exists_all_noschedule,
       "alice", true},
      {"another bridge's taint value", "team", "default-scheduler", "", other_value, "alice", true},
      {"unrelated toleration", "team", "default-scheduler", "", unrelated, "alice", true},
      {"another custom scheduler", "team", "volcano", "", equal, "alice", false},
      {"no scheduler name", "team", "-", "", equal, "alice", false},
      // N-3: anyone with `edit` may own a DaemonSet; its pods get no exception outside the
      // system namespaces.
      {"DaemonSet pod in a tenant's namespace", "team", "default-scheduler", daemonset, exists_all,
       "system:serviceaccount:kube-system:daemon-set-controller", false},
      {"DaemonSet pod in a system namespace", "kube-system", "default-scheduler", daemonset,
       exists_all, "system:serviceaccount:kube-system:daemon-set-controller", true},
      {"DaemonSet owner forged by a user", "team", "default-scheduler", daemonset, exists_all,
       "alice", false},
      {"ReplicaSet pod", "team", "default-scheduler", replicaset, exists_all, "alice", false},
      {"mirror pod from its kubelet", "team", "default-scheduler", mirror, exists_all,
       "system:node:n1", true},
      {"mirror annotation from a user", "team", "default-scheduler", mirror, exists_all, "alice",
       false},
      {"system namespace", "kube-system", "default-scheduler", "", exists_all, "alice", true},
      {"privileged user", "team", "default-scheduler", "", equal, "bridge", true},
      {"bridge pod", "team", std::string(kOurs), "", equal, "alice", true},
  };
  Policy p = ListPolicy();
  p.privileged_users = {"bridge"};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Decision d =
        Validate(Decoded(ReviewJson(
                     "CREATE", c.ns,
                     PodJson(c.ns, c.scheduler, c.scheduler == kOurs ? "" : "n1", c.meta, c.spec),
                     "null", c.user)),
                 p);
    EXPECT_EQ(d.allowed, c.allowed) << d.message;
    if (!c.allowed) {
      EXPECT_NE(d.message.find(taint_key), std::string::npos) << d.message;
    }
  }
  // Configurable system namespaces.
  p.system_namespaces = {"infra"};
  EXPECT_TRUE(Validate(Decoded(ReviewJson("CREATE", "infra",
                                          PodJson("infra", "default-scheduler", "", "", equal))),
                       p)
                  .allowed);
  EXPECT_FALSE(
      Validate(Decoded(ReviewJson("CREATE", "kube-system",
                                  PodJson("kube-system", "default-scheduler", "", "", equal))),
               p)
          .allowed);
  // UPDATE: adding the toleration is refused; a pod that had it before the webhook keeps it.
  const std::string plain = PodJson("team", "default-scheduler", "n1");
  const std::string tolerating = PodJson("team", "default-scheduler", "n1", "", exists_all);
  EXPECT_FALSE(Validate(Decoded(ReviewJson("UPDATE", "team", tolerating, plain)), p).allowed);
  EXPECT_TRUE(Validate(Decoded(ReviewJson("UPDATE", "team", tolerating, tolerating)), p).allowed);
}

TEST(Validate, ResizeIsRejectedDeleteAllowed) {
  Policy p = ListPolicy();
  const std::string pod = PodJson("hpc", kOurs, "n1", "", "", "Running");
  Decision resize = Validate(Decoded(ReviewJson("UPDATE", "hpc", pod, pod, "alice", "resize")), p);
  EXPECT_FALSE(resize.allowed);
  EXPECT_NE(resize.message.find("resize"), std::string::npos);
  EXPECT_NE(resize.message.find("Slurm job keeps the CPUs and memory"), std::string::npos)
      << resize.message;
  const std::string labelled = PodJson(
      "hpc", kOurs, "n1", R"("labels":{")" + std::string(bridge::kJobIdLabel) + R"(":"1"})");
  EXPECT_TRUE(Validate(Decoded(ReviewJson("DELETE", "hpc", "null", labelled)), p).allowed);
  // A status update of a running pod with the label keeps it: allowed.
  EXPECT_TRUE(
      Validate(Decoded(ReviewJson("UPDATE", "hpc", labelled, labelled, "kubelet", "status")), p)
          .allowed);
}

// R-5: `kubectl delete --grace-period=86400` let a pod outlive its job by a day: the cap that
// CREATE puts on terminationGracePeriodSeconds holds for a DELETE's DeleteOptions too.
TEST(Validate, DeleteGracePeriodAboveTheCapIsRefused) {
  Policy p = ListPolicy();
  p.privileged_users = {"bridge"};
  p.max_termination_grace_seconds = 300;
  // A DELETE review: no object, the pod as oldObject, DeleteOptions as options ("" for none).
  auto review = [](std::string_view scheduler, std::string_view options, std::string_view user) {
    std::string r = ReviewJson("DELETE", "hpc", "null", PodJson("hpc", scheduler, "n1"), user);
    if (!options.empty()) {
      r.insert(r.size() - 2,  // inside request ("...,"dryRun":false}}")
               fmt::format(R"(,"options":{{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1",)"
                           R"("propagationPolicy":"Background"{}}})",
                           options));
    }
    return Decoded(r);
  };
  const std::string ours(kOurs);
  struct Case {
    std::string name;
    std::string scheduler, options, user;
    std::int64_t cap;
    bool allowed;
  };
  const std::vector<Case> cases = {
      {"a day", ours, R"(,"gracePeriodSeconds":86400)", "alice", 300, false},
      {"one second above", ours, R"(,"gracePeriodSeconds":301)", "alice", 300, false},
      {"the cap", ours, R"(,"gracePeriodSeconds":300)", "alice", 300, true},
      {"force", ours, R"(,"gracePeriodSeconds":0)", "alice", 300, true},
      {"no grace period: the pod's own (capped at CREATE)", ours, "", "alice", 300, true},
      {"no options", ours, "-", "alice", 300, true},
      {"the bridge's own", ours, R"(,"gracePeriodSeconds":86400)", "bridge", 300, true},
      {"another scheduler's pod", "default-scheduler", R"(,"gracePeriodSeconds":86400)", "alice",
       300, true},
      {"no cap (external jobs)", ours, R"(,"gracePeriodSeconds":86400)", "alice", 0, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    p.max_termination_grace_seconds = c.cap;
    Request req = review(c.scheduler, c.options == "-" ? "" : c.options, c.user);
    Decision d = Validate(req, p);
    EXPECT_EQ(d.allowed, c.allowed) << d.message;
    if (!c.allowed) {
      EXPECT_NE(d.message.find("gracePeriodSeconds"), std::string::npos) << d.message;
      EXPECT_NE(d.message.find("300"), std::string::npos) << d.message;
    }
  }
  // The options are read from the review.
  EXPECT_EQ(review(ours, R"(,"gracePeriodSeconds":86400)", "alice").grace_period_seconds, 86400);
  EXPECT_FALSE(review(ours, "", "alice").grace_period_seconds);
}

TEST(DecodeReview, BadBodiesAreErrorsWithAReason) {
  const std::string pod = PodJson("hpc", kOurs);
  struct Case {
    std::string body;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"", "not JSON"},
      {"{", "not JSON"},
      {"[1,2]", "not a JSON object"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"1"}})", "kind"},
      {R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}})",
       "apiVersion"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "no request"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}})",
       "request.uid"},
      {R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","object":"x"}})",
       "request.object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    Result<Request> r = DecodeReview(c.body);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(c.want), std::string::npos) << r.error().message;
  }
  // Every prefix of a good review is either an error or decodes; none crashes.
  const std::string good = ReviewJson("CREATE", "hpc", pod);
  for (std::size_t n = 0; n < good.size(); ++n) {
    (void)DecodeReview(std::string_view(good).substr(0, n));
  }
  // Wrong field types are ignored, not fatal.
  Result<Request> odd = DecodeReview(
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1",)"
      R"("kind":{"kind":"Pod"},"operation":"CREATE","object":{"metadata":{"labels":[1]},)"
      R"("spec":{"schedulerName":5,"containers":"x","topologySpreadConstraints":{}}}}})");
  ASSERT_TRUE(odd.has_value());
  EXPECT_FALSE(odd->object->scheduler_name.has_value());
  EXPECT_TRUE(odd->object->labels.empty());
}

TEST(DecodeReview, ReadsTheRequest) {
  Request r = Decoded(ReviewJson("UPDATE", "hpc", PodJson("hpc", kOurs, "n1"),
                                 PodJson("hpc", kOurs), "bob", "status"));
  EXPECT_EQ(r.uid, "0f9a-11");
  EXPECT_EQ(r.kind, "Pod");
  EXPECT_EQ(r.operation, "UPDATE");
  EXPECT_EQ(r.subresource, "status");
  EXPECT_EQ(r.namespace_, "hpc");
  EXPECT_EQ(r.username, "bob");
  ASSERT_TRUE(r.object.has_value());
  ASSERT_TRUE(r.old_object.has_value());
  EXPECT_EQ(r.object->node_name, "n1");
  EXPECT_FALSE(r.old_object->node_name.has_value());
  EXPECT_EQ(r.object->scheduler_name, std::string(kOurs));
  EXPECT_EQ(r.object->phase, "Pending");
  EXPECT_TRUE(r.object->container_resources.empty());
}

TEST(EncodeReview, AllowedWithPatchAndDenied) {
  Decision allow = Decision::Allow();
  allow.patch = R"([{"op":"remove","path":"/spec/nodeName"}])";
  json::value a = json::parse(EncodeReview("u-1", allow));
  EXPECT_EQ(a.at("apiVersion").as_string(), "admission.k8s.io/v1");
  EXPECT_EQ(a.at("kind").as_string(), "AdmissionReview");
  const json::object& ar = a.at("response").as_object();
  EXPECT_EQ(ar.at("uid").as_string(), "u-1");
  EXPECT_TRUE(ar.at("allowed").as_bool());
  EXPECT_EQ(ar.at("patchType").as_string(), "JSONPatch");
  EXPECT_EQ(Base64Decode(std::string(ar.at("patch").as_string())), allow.patch);

  json::value d = json::parse(EncodeReview("u-2", Decision::Deny("label \"x\" is not allowed")));
  const json::object& dr = d.at("response").as_object();
  EXPECT_FALSE(dr.at("allowed").as_bool());
  EXPECT_FALSE(dr.contains("patch"));
  EXPECT_EQ(dr.at("status").at("code").as_int64(), 403);
  EXPECT_EQ(dr.at("status").at("reason").as_string(), "Forbidden");
  EXPECT_EQ(dr.at("status").at("message").as_string(), "label \"x\" is not allowed");
  EXPECT_FALSE(dr.contains("warnings"));

  Decision warned = Decision::Allow();
  warned.warnings = {"namespace unreadable"};
  json::value w = json::parse(EncodeReview("u-3", warned));
  const json::object& wr = w.at("response").as_object();
  EXPECT_TRUE(wr.at("allowed").as_bool());
  ASSERT_TRUE(wr.contains("warnings"));
  EXPECT_EQ(wr.at("warnings").as_array().size(), 1u);
  EXPECT_EQ(wr.at("warnings").as_array()[0].as_string(), "namespace unreadable");
}

TEST(PolicyFromConfig, CopiesTheConfig) {
  bridge::Config c;
  c.scheduler_name = "s";
  c.managed_namespaces = {"a"};
  Policy p = PolicyFromConfig(c, {"u"});
  EXPECT_EQ(p.scheduler_name, "s");
  EXPECT_EQ(p.managed_namespaces, std::vector<std::string>{"a"});
  EXPECT_FALSE(p.namespace_selector.has_value());
  EXPECT_EQ(p.privileged_users, std::vector<std::string>{"u"});
  c.has_managed_namespace_selector = true;
  c.managed_namespace_selector.match_labels = {{"k", "v"}};
  EXPECT_TRUE(PolicyFromConfig(c, {}).namespace_selector.has_value());
}

// A review of `kind` (any kind but Pod) in namespace `ns`.
std::string KindReviewJson(std::string_view kind, std::string_view op, std::string_view ns,
                           std::string_view object, std::string_view old_object = "null",
                           std::string_view user = "alice") {
  std::string s = ReviewJson(op, ns, object, old_object, user);
  const std::string pod_kind = R"("kind":{"group":"","version":"v1","kind":"Pod"})";
  s.replace(s.find(pod_kind), pod_kind.size(),
            R"("kind":{"group":"x","version":"v1","kind":")" + std::string(kind) + "\"}");
  return s;
}

Policy TeamPolicy() {
  Policy p = ListPolicy();
  p.identity.default_partition = "slurm-bridge";
  p.identity.rules = {bridge::IdentityRule{
      .namespaces = {"team-a"}, .user = "alice", .accounts = {"physics"}, .max_priority = 100}};
  return p;
}

// N-4: the job annotations of a bridge pod (or of any object the bridge reads them from) are
// refused outside the namespace's identity policy, with a message naming the key and the rule.
TEST(Validate, IdentityAnnotationsOutsideThePolicyAreRefused) {
  const Policy p = TeamPolicy();
  auto pod = [](std::string_view ns, std::string_view annotations) {
    return PodJson(ns, kOurs, "", R"("annotations":{)" + std::string(annotations) + "}");
  };
  const std::string prio = R"("slurmjob.slinky.slurm.net/priority":"2000000000")";
  const std::string user = R"("slurmjob.slinky.slurm.net/user-id":"root")";
  const std::string acct = R"("slurmjob.slinky.slurm.net/account":"physics")";
  const std::string part = R"("slurmjob.slinky.slurm.net/partition":"slurm-bridge")";

  Decision d = Validate(Decoded(ReviewJson("CREATE", "team-b", pod("team-b", prio))), p);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.code, 403);
  EXPECT_NE(d.message.find("annotation slurmjob.slinky.slurm.net/priority: \"2000000000\" is "
                           "not allowed in namespace team-b (identityPolicy: no rule names "
                           "namespace team-b"),
            std::string::npos)
      << d.message;
  d = Validate(Decoded(ReviewJson("CREATE", "team-a", pod("team-a", user + "," + prio))), p);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.message.find("user-id: \"root\""), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("priority: \"2000000000\""), std::string::npos) << d.message;
  EXPECT_TRUE(Validate(Decoded(ReviewJson("CREATE", "team-a", pod("team-a", acct + "," + part))), p)
                  .allowed);
  // The legacy prefix is read, so it is checked too.
  EXPECT_FALSE(Validate(Decoded(ReviewJson("CREATE", "team-b",
                                           pod("team-b", R"("slinky.slurm.net/qos":"high")"))),
                        p)
                   .allowed);
  // UPDATE: refused when the job annotations change; an old pod keeps working unchanged.
  const std::string old_pod = pod("team-b", prio);
  EXPECT_TRUE(
      Validate(Decoded(ReviewJson("UPDATE", "team-b", old_pod, old_pod, "kubelet", "status")), p)
          .allowed);
  EXPECT_FALSE(
      Validate(Decoded(ReviewJson("UPDATE", "team-b", pod("team-b", user), pod("team-b", ""))), p)
          .allowed);
  // Not a bridge pod's concern? Pods of other schedulers are the other path: no job to steer.
  EXPECT_TRUE(Validate(Decoded(ReviewJson("CREATE", "team-b",
                                          PodJson("team-b", "default-scheduler", "",
                                                  R"("annotations":{)" + prio + "}"))),
                       p)
                  .allowed);
  // The owner kinds the bridge reads the annotations from.
  for (std::string_view kind : {"Job", "CronJob", "JobSet", "LeaderWorkerSet", "PodGroup",
                                "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"}) {
    SCOPED_TRACE(kind);
    const std::string obj = R"({"metadata":{"name":"w","namespace":"team-b","annotations":{)" +
                            prio + R"(}},"spec":{}})";
    Decision k = Validate(Decoded(KindReviewJson(kind, "CREATE", "team-b", obj)), p);
    EXPECT_FALSE(k.allowed);
    EXPECT_NE(k.message.find("slurmjob.slinky.slurm.net/priority"), std::string::npos);
    EXPECT_TRUE(Validate(Decoded(KindReviewJson(kind, "UPDATE", "team-b", obj, obj)), p).allowed);
  }
}

// N-3: a DaemonSet whose pods would tolerate the managed-node taint is refused where the user
// acts, not only when the DaemonSet controller's pod creations fail.
TEST(Validate, DaemonSetTemplateToleratingManagedNodesIsRefused) {
  Policy p = ListPolicy();
  auto ds = [](std::string_view ns, std::string_view template_spec) {
    return R"({"metadata":{"name":"ds","namespace":")" + std::string(ns) +
           R"("},"spec":{"template":{"metadata":{"labels":{"a":"b"}},"spec":{)" +
           std::string(template_spec) + "}}}}";
  };
  const std::string tolerate_all = R"("tolerations":[{"operator":"Exists"}])";
  const std::string plain = R"("containers":[{"name":"c"}])";
  Decision d =
      Validate(Decoded(KindReviewJson("DaemonSet", "CREATE", "team", ds("team", tolerate_all))), p);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(
      d.message.find("spec.template: a toleration of the taint slinky.slurm.net/managed-node"),
      std::string::npos)
      << d.message;
  EXPECT_NE(d.message.find("only in the system namespaces: kube-system"), std::string::npos)
      << d.message;
  EXPECT_TRUE(Validate(Decoded(KindReviewJson("DaemonSet", "CREATE", "kube-system",
                                              ds("kube-system", tolerate_all))),
                       p)
                  .allowed);
  EXPECT_TRUE(Validate(Decoded(KindReviewJson("DaemonSet", "CREATE", "team", ds("team", plain))), p)
                  .allowed);
  EXPECT_TRUE(
      Validate(Decoded(KindReviewJson(
                   "DaemonSet", "CREATE", "team",
                   ds("team", tolerate_all + R"(,"schedulerName":"slurm-bridge-scheduler")"))),
               p)
          .allowed);
  // UPDATE: adding it is refused; one from before the webhook keeps it.
  EXPECT_FALSE(Validate(Decoded(KindReviewJson("DaemonSet", "UPDATE", "team",
                                               ds("team", tolerate_all), ds("team", plain))),
                        p)
                   .allowed);
  EXPECT_TRUE(Validate(Decoded(KindReviewJson("DaemonSet", "UPDATE", "team",
                                              ds("team", tolerate_all), ds("team", tolerate_all))),
                       p)
                  .allowed);
  p.privileged_users = {"alice"};
  EXPECT_TRUE(
      Validate(Decoded(KindReviewJson("DaemonSet", "CREATE", "team", ds("team", tolerate_all))), p)
          .allowed);
}

// N-6: with podNvidiaVisibleDevices every container of a bridge pod, ephemeral ones included,
// reads NVIDIA_VISIBLE_DEVICES from the GPU annotation; a value of its own is refused.
TEST(Validate, OwnNvidiaVisibleDevicesIsRefused) {
  Policy p = ListPolicy();
  p.nvidia_visible_devices = true;
  const std::string from_annotation =
      R"({"name":"NVIDIA_VISIBLE_DEVICES","valueFrom":{"fieldRef":{"apiVersion":"v1",)"
      R"("fieldPath":"metadata.annotations['slinky.slurm.net/slurm-job-gpus']"}}})";
  const std::string all = R"({"name":"NVIDIA_VISIBLE_DEVICES","value":"all"})";
  const std::string other_field =
      R"({"name":"NVIDIA_VISIBLE_DEVICES","valueFrom":{"fieldRef":{"fieldPath":"metadata.annotations['x']"}}})";
  auto pod = [](std::string_view containers, std::string_view extra = "") {
    return R"({"metadata":{"name":"p","namespace":"hpc"},"spec":{"schedulerName":"slurm-bridge-scheduler","containers":[)" +
           std::string(containers) + "]" + std::string(extra) + "}}";
  };
  auto c = [](std::string_view name, std::string_view env) {
    return R"({"name":")" + std::string(name) + R"(","env":[)" + std::string(env) + "]}";
  };
  struct Row {
    std::string name;
    std::string pod;
    bool allowed;
  };
  for (const Row& r : std::vector<Row>{
           {"from the annotation", pod(c("a", from_annotation)), true},
           {"its own value", pod(c("a", all)), false},
           {"another field", pod(c("a", other_field)), false},
           {"the annotation, then its own", pod(c("a", from_annotation + "," + all)), false},
           {"missing (the image's own would apply)", pod(R"({"name":"a"})"), false},
           {"an init container's own",
            pod(c("a", from_annotation), R"(,"initContainers":[)" + c("i", all) + "]"), false},
       }) {
    SCOPED_TRACE(r.name);
    Decision d = Validate(Decoded(ReviewJson("CREATE", "hpc", r.pod)), p);
    EXPECT_EQ(d.allowed, r.allowed) << d.message;
    if (!r.allowed) {
      EXPECT_NE(d.message.find("NVIDIA_VISIBLE_DEVICES must come from"), std::string::npos);
    }
  }
  // Off: the option's check does not apply.
  p.nvidia_visible_devices = false;
  EXPECT_TRUE(Validate(Decoded(ReviewJson("CREATE", "hpc", pod(c("a", all)))), p).allowed);
  p.nvidia_visible_devices = true;
  // pods/ephemeralcontainers: a new debug container with its own value is refused; an old
  // container (before the option) does not block other updates.
  const std::string before = pod(c("a", from_annotation));
  const std::string debug =
      pod(c("a", from_annotation), R"(,"ephemeralContainers":[)" + c("dbg", all) + "]");
  Decision d = Validate(
      Decoded(ReviewJson("UPDATE", "hpc", debug, before, "alice", "ephemeralcontainers")), p);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.message.find("ephemeralContainers \"dbg\""), std::string::npos) << d.message;
  const std::string legacy = pod(c("a", all));
  EXPECT_TRUE(Validate(Decoded(ReviewJson("UPDATE", "hpc", legacy, legacy, "kubelet", "status")), p)
                  .allowed);
}

// The mutating half of N-6: a new ephemeral container of a bridge pod gets Slurm's variables
// (an image's ENV NVIDIA_VISIBLE_DEVICES=all would apply otherwise); existing ones are left alone.
TEST(Mutate, NewEphemeralContainersGetSlurmsVariables) {
  Policy p = ListPolicy();
  p.nvidia_visible_devices = true;
  const std::string base =
      R"({"metadata":{"name":"p","namespace":"hpc"},"spec":{"schedulerName":"slurm-bridge-scheduler","containers":[{"name":"a"}])";
  const std::string before = base + R"(,"ephemeralContainers":[{"name":"old"}]}})";
  const std::string after_json =
      base +
      R"(,"ephemeralContainers":[{"name":"old"},{"name":"dbg","env":[{"name":"X","value":"1"}]}]}})";
  Decision d = Mutate(
      Decoded(ReviewJson("UPDATE", "hpc", after_json, before, "alice", "ephemeralcontainers")), p,
      nullptr);
  ASSERT_FALSE(d.patch.empty());
  json::value after = ApplyPatch(json::parse(after_json), d.patch);
  const json::array& eph = after.at_pointer("/spec/ephemeralContainers").as_array();
  EXPECT_FALSE(eph.at(0).as_object().contains("env"));
  std::set<std::string> names;
  for (const json::value& e : eph.at(1).at("env").as_array()) {
    names.insert(std::string(e.at("name").as_string()));
  }
  EXPECT_EQ(names, (std::set<std::string>{"X", "NVIDIA_VISIBLE_DEVICES", "SLURM_JOB_ID",
                                          "SLURM_JOB_GPUS"}));
  // The mutated pod passes validation.
  EXPECT_TRUE(Validate(Decoded(ReviewJson("UPDATE", "hpc", json::serialize(after), before, "alice",
                                          "ephemeralcontainers")),
                       p)
                  .allowed);
  // Not a bridge pod: nothing.
  const std::string other =
      R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}],"ephemeralContainers":[{"name":"dbg"}]}})";
  EXPECT_TRUE(
      Mutate(Decoded(ReviewJson("UPDATE", "hpc", other, other, "alice", "ephemeralcontainers")), p,
             nullptr)
          .patch.empty());
}

// Required pod (anti-)affinity cannot be honoured by Slurm's placement: refused at CREATE with
// why, instead of silently ignored (upstream 1.3 refuses it too). Preferred terms pass.
TEST(Validate, RequiredPodAffinityIsRefused) {
  const Policy p = ListPolicy();
  const std::string term =
      R"([{"labelSelector":{"matchLabels":{"app":"x"}},"topologyKey":"kubernetes.io/hostname"}])";
  struct Row {
    std::string name, affinity;
    bool allowed;
  };
  for (
      const Row& r : std::vector<Row>{
          {"required affinity",
           R"({"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":)" + term + "}}",
           false},
          {"required anti-affinity",
           R"({"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":)" + term + "}}",
           false},
          {"preferred anti-affinity",
           R"({"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"podAffinityTerm":)" +
               term.substr(1, term.size() - 2) + "}]}}",
           true},
          {"node affinity",
           R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"Exists"}]}]}}})",
           true},
      }) {
    SCOPED_TRACE(r.name);
    Decision d =
        Validate(Decoded(ReviewJson("CREATE", "hpc",
                                    PodJson("hpc", kOurs, "", "", R"("affinity":)" + r.affinity))),
                 p);
    EXPECT_EQ(d.allowed, r.allowed) << d.message;
    if (!r.allowed) {
      EXPECT_NE(d.message.find("requiredDuringSchedulingIgnoredDuringExecution is not supported"),
                std::string::npos)
          << d.message;
    }
  }
  // Other schedulers' pods are not the bridge's concern.
  EXPECT_TRUE(
      Validate(
          Decoded(ReviewJson(
              "CREATE", "hpc",
              PodJson(
                  "hpc", "default-scheduler", "", "",
                  R"("affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":)" +
                      term + "}}"))),
          p)
          .allowed);
}

}  // namespace
}  // namespace sb::admission
