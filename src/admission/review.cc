// SPDX-License-Identifier: Apache-2.0
#include "admission/review.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include <boost/json.hpp>

#include "bridge/annotations.h"
#include "bridge/json_path.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/translate.h"
#include "common/base64.h"
#include "kube/codec.h"

namespace sb::admission {
namespace json = boost::json;

namespace {

using bridge::ObjectAt;
using bridge::StringAt;

constexpr std::string_view kReviewApiVersion = "admission.k8s.io/v1";
constexpr std::string_view kDefaultScheduler = "default-scheduler";
constexpr std::string_view kMirrorAnnotation = "kubernetes.io/config.mirror";
constexpr std::string_view kNvidiaVisibleDevices = "NVIDIA_VISIBLE_DEVICES";

Labels StringMapAt(const json::object& obj, std::string_view key) {
  Labels out;
  if (const json::object* m = ObjectAt(obj, {key})) {
    for (const auto& [k, v] : *m) {
      if (v.is_string()) {
        out.emplace(std::string(k), std::string(v.get_string()));
      }
    }
  }
  return out;
}

// Adds the names in resources.requests and resources.limits of `holder` to `out`.
void AddResourceNames(const json::object* holder, std::set<std::string>& out) {
  if (holder == nullptr) {
    return;
  }
  const json::object* resources = ObjectAt(*holder, {"resources"});
  if (resources == nullptr) {
    return;
  }
  for (std::string_view part : {"requests", "limits"}) {
    if (const json::object* list = ObjectAt(*resources, {part})) {
      for (const auto& [name, quantity] : *list) {
        out.emplace(std::string(name));
      }
    }
  }
}

PodFacts DecodePod(const json::object& pod) {
  PodFacts f;
  if (const json::object* meta = ObjectAt(pod, {"metadata"})) {
    f.has_metadata = true;
    f.name = StringAt(*meta, {"name"});
    f.namespace_ = StringAt(*meta, {"namespace"});
    f.labels = StringMapAt(*meta, "labels");
    f.annotations = StringMapAt(*meta, "annotations");
    f.mirror_pod = f.annotations.contains(std::string(kMirrorAnnotation));
    if (const json::value* v = meta->if_contains("finalizers"); v && v->is_array()) {
      f.has_finalizers = true;
      for (const json::value& e : v->get_array()) {
        if (e.is_string()) f.finalizers.emplace_back(e.get_string());
      }
    }
  }
  if (const json::object* spec = ObjectAt(pod, {"spec"})) {
    f.has_spec = true;
    if (const json::value* v = spec->if_contains("schedulerName"); v && v->is_string()) {
      f.scheduler_name = std::string(v->get_string());
    }
    if (const json::value* v = spec->if_contains("nodeName"); v && v->is_string()) {
      f.node_name = std::string(v->get_string());
    }
    if (const json::value* v = spec->if_contains("terminationGracePeriodSeconds")) {
      if (v->is_int64()) {
        f.termination_grace_seconds = v->get_int64();
      } else if (v->is_uint64() && v->get_uint64() <= INT64_MAX) {
        f.termination_grace_seconds = static_cast<std::int64_t>(v->get_uint64());
      }
    }
    if (const json::object* affinity = ObjectAt(*spec, {"affinity"})) {
      for (auto [key, count] : {std::pair{"podAffinity", &f.required_pod_affinity},
                                {"podAntiAffinity", &f.required_pod_anti_affinity}}) {
        const json::object* a = ObjectAt(*affinity, {key});
        const json::value* terms =
            a == nullptr ? nullptr
                         : a->if_contains("requiredDuringSchedulingIgnoredDuringExecution");
        if (terms != nullptr && terms->is_array()) *count = terms->as_array().size();
      }
    }
    if (const json::value* v = spec->if_contains("topologySpreadConstraints")) {
      if (const json::array* a = v->if_array()) {
        f.topology_spread_constraints = a->size();
      }
    }
    for (std::string_view list : {"containers", "initContainers", "ephemeralContainers"}) {
      const json::value* v = spec->if_contains(list);
      if (v == nullptr || !v->is_array()) {
        continue;
      }
      for (const json::value& c : v->get_array()) {
        AddResourceNames(c.if_object(), f.container_resources);
        PodFacts::Container facts{.list = std::string(list)};
        if (const json::object* o = c.if_object()) {
          facts.name = StringAt(*o, {"name"});
          if (const json::value* env = o->if_contains("env"); env && env->is_array()) {
            facts.has_env = true;
            for (const json::value& e : env->get_array()) {
              const json::object* eo = e.if_object();
              if (eo == nullptr) continue;
              facts.env.push_back(StringAt(*eo, {"name"}));
              std::string field_path;
              if (const json::object* from = ObjectAt(*eo, {"valueFrom"})) {
                if (const json::object* ref = ObjectAt(*from, {"fieldRef"})) {
                  field_path = StringAt(*ref, {"fieldPath"});
                }
              }
              facts.env_field_paths.push_back(std::move(field_path));
            }
          }
        }
        f.containers.push_back(std::move(facts));
      }
    }
    AddResourceNames(spec, f.pod_resources);
    if (const json::value* v = spec->if_contains("tolerations"); v && v->is_array()) {
      f.has_tolerations = true;
      for (const json::value& t : v->get_array()) {
        if (const json::object* o = t.if_object()) {
          f.tolerations.push_back({StringAt(*o, {"key"}), StringAt(*o, {"operator"}),
                                   StringAt(*o, {"value"}), StringAt(*o, {"effect"})});
        }
      }
    }
  }
  if (const json::object* status = ObjectAt(pod, {"status"})) {
    f.phase = StringAt(*status, {"phase"});
  }
  return f;
}

// The DRA part of a pod's facts: its resourceClaims, and with DRA requests the pod as kube::Pod.
// A pod without any costs no second decoding.
void DecodeDra(const json::object& obj, PodFacts& f) {
  const json::object* spec = ObjectAt(obj, {"spec"});
  const json::value* listed = spec == nullptr ? nullptr : spec->if_contains("resourceClaims");
  const bool has_claims = listed != nullptr && listed->is_array() && !listed->get_array().empty();
  if (!has_claims && !HasDraRequests(f)) return;
  const std::string text = json::serialize(obj);
  if (Result<std::vector<bridge::PodResourceClaim>> claims = bridge::PodResourceClaimsOf(text)) {
    f.resource_claims = std::move(*claims);
  }
  if (!HasDraRequests(f)) return;
  if (Result<kube::Pod> pod = kube::Decode<kube::Pod>(text)) {
    f.pod = std::move(*pod);
  } else {
    f.pod_error = pod.error().message;
  }
}

bool Contains(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

const std::string* Find(const Labels& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? nullptr : &it->second;
}

// Whether label/annotation `key` differs between the two maps (added, removed or changed).
bool Changed(const Labels& before, const Labels& after, std::string_view key) {
  const std::string* a = Find(before, key);
  const std::string* b = Find(after, key);
  if (a == nullptr || b == nullptr) {
    return a != b;
  }
  return *a != *b;
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool ToleratesManagedNode(const PodFacts::Toleration& t, std::string_view scheduler) {
  return bridge::ToleratesManagedNode(t.key, t.operator_, t.value, t.effect, scheduler);
}

bool ToleratesManagedNode(const PodFacts& pod, std::string_view scheduler) {
  return std::any_of(
      pod.tolerations.begin(), pod.tolerations.end(),
      [&](const PodFacts::Toleration& t) { return ToleratesManagedNode(t, scheduler); });
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    out += (out.empty() ? "" : "; ") + p;
  }
  return out;
}

}  // namespace

Policy PolicyFromConfig(const bridge::Config& config, std::vector<std::string> privileged_users) {
  Policy p;
  p.scheduler_name = config.scheduler_name.empty() ? std::string(bridge::kDefaultSchedulerName)
                                                   : config.scheduler_name;
  p.managed_namespaces = config.managed_namespaces;
  if (config.has_managed_namespace_selector) {
    p.namespace_selector = config.managed_namespace_selector;
  }
  p.privileged_users = std::move(privileged_users);
  p.slurm_env = config.pod_slurm_env;
  p.nvidia_visible_devices = config.pod_nvidia_visible_devices;
  p.max_termination_grace_seconds = bridge::GraceCapSeconds(config);
  p.identity = config.identity_policy;
  p.device_profiles = config.device_profiles;
  return p;
}

std::vector<std::pair<std::string, std::string>> SlurmEnv(const Policy& policy) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!policy.slurm_env && !policy.nvidia_visible_devices) return out;
  const std::string job = "metadata.labels['" + std::string(bridge::kJobIdLabel) + "']";
  const std::string gpus =
      "metadata.annotations['" + std::string(bridge::kJobGpusAnnotation) + "']";
  if (policy.slurm_env) {
    out.emplace_back("SLURM_JOB_ID", job);
    out.emplace_back("SLURM_JOB_GPUS", gpus);
  }
  if (policy.nvidia_visible_devices) out.emplace_back(std::string(kNvidiaVisibleDevices), gpus);
  return out;
}

Result<Request> DecodeReview(std::string_view body) {
  auto bad = [](std::string why) {
    return MakeError(ErrorCode::kInvalidArgument, "bad AdmissionReview: " + std::move(why));
  };
  json::parse_options opts;
  opts.max_depth = 512;
  boost::system::error_code ec;
  json::value doc = json::parse(body, ec, {}, opts);
  if (ec) {
    return bad("not JSON: " + ec.message());
  }
  const json::object* review = doc.if_object();
  if (review == nullptr) {
    return bad("not a JSON object");
  }
  std::string api_version = StringAt(*review, {"apiVersion"});
  std::string kind = StringAt(*review, {"kind"});
  if (kind != "AdmissionReview") {
    return bad("kind is " + Quote(kind) + ", want \"AdmissionReview\"");
  }
  if (api_version != kReviewApiVersion) {
    return bad("apiVersion is " + Quote(api_version) + ", want \"" +
               std::string(kReviewApiVersion) + "\"");
  }
  const json::object* req = ObjectAt(*review, {"request"});
  if (req == nullptr) {
    return bad("no request");
  }
  Request out;
  out.uid = StringAt(*req, {"uid"});
  if (out.uid.empty()) {
    return bad("no request.uid");
  }
  if (const json::object* k = ObjectAt(*req, {"kind"})) {
    out.kind = StringAt(*k, {"kind"});
  }
  out.operation = StringAt(*req, {"operation"});
  out.subresource = StringAt(*req, {"subResource"});
  out.namespace_ = StringAt(*req, {"namespace"});
  out.name = StringAt(*req, {"name"});
  if (const json::object* user = ObjectAt(*req, {"userInfo"})) {
    out.username = StringAt(*user, {"username"});
    if (const json::value* g = user->if_contains("groups"); g && g->is_array()) {
      for (const json::value& v : g->get_array()) {
        if (v.is_string()) {
          out.groups.emplace_back(v.get_string());
        }
      }
    }
  }
  if (const json::value* v = req->if_contains("dryRun"); v && v->is_bool()) {
    out.dry_run = v->get_bool();
  }
  if (const json::object* options = ObjectAt(*req, {"options"})) {
    if (const json::value* v = options->if_contains("gracePeriodSeconds")) {
      if (v->is_int64()) {
        out.grace_period_seconds = v->get_int64();
      } else if (v->is_uint64() && v->get_uint64() <= INT64_MAX) {
        out.grace_period_seconds = static_cast<std::int64_t>(v->get_uint64());
      }
    }
  }
  for (auto [key, slot] : {std::pair{"object", &out.object}, {"oldObject", &out.old_object}}) {
    const json::value* v = req->if_contains(key);
    if (v == nullptr || v->is_null()) {
      continue;
    }
    const json::object* obj = v->if_object();
    if (obj == nullptr) {
      return bad(std::string("request.") + key + " is not an object");
    }
    *slot = DecodePod(*obj);
    if (out.kind == "Pod") DecodeDra(*obj, **slot);
    if (out.kind == "DaemonSet") {
      std::optional<PodFacts>& tmpl =
          slot == &out.object ? out.object_template : out.old_object_template;
      if (const json::object* spec = ObjectAt(*obj, {"spec"})) {
        if (const json::object* t = ObjectAt(*spec, {"template"})) tmpl = DecodePod(*t);
      }
    }
  }
  return out;
}

Decision Decision::Deny(std::string message) {
  Decision d;
  d.allowed = false;
  d.code = 403;
  d.reason = "Forbidden";
  d.message = std::move(message);
  return d;
}

bool IsManaged(const PodFacts& pod, std::string_view ns, const Policy& policy,
               const Labels* ns_labels) {
  if (pod.scheduler_name && *pod.scheduler_name == policy.scheduler_name) {
    return true;
  }
  if (policy.namespace_selector) {
    return ns_labels != nullptr && policy.namespace_selector->Matches(*ns_labels);
  }
  return Contains(policy.managed_namespaces, ns);
}

namespace {

// Appends to `ops` the JSON Patch that gives container `c` the variables of `env` it does not set.
void AddEnvOps(const PodFacts::Container& c, const std::string& base,
               const std::vector<std::pair<std::string, std::string>>& env, json::array& ops) {
  json::array add;
  for (const auto& [name, path] : env) {
    if (Contains(c.env, name)) continue;
    add.push_back(json::object{
        {"name", name},
        {"valueFrom",
         json::object{{"fieldRef", json::object{{"apiVersion", "v1"}, {"fieldPath", path}}}}}});
  }
  if (add.empty()) return;
  if (!c.has_env) {
    ops.push_back(json::object{{"op", "add"}, {"path", base}, {"value", std::move(add)}});
  } else {
    for (json::value& v : add) {
      ops.push_back(json::object{{"op", "add"}, {"path", base + "/-"}, {"value", std::move(v)}});
    }
  }
}

// pods/ephemeralcontainers of a bridge pod: the new ephemeral containers get Slurm's env too
// (an image's own NVIDIA_VISIBLE_DEVICES=all would otherwise reach every GPU of the node).
Decision MutateEphemeral(const Request& request, const Policy& policy) {
  const PodFacts& pod = *request.object;
  if (!pod.scheduler_name || *pod.scheduler_name != policy.scheduler_name) {
    return Decision::Allow();
  }
  std::set<std::string> existing;
  if (request.old_object) {
    for (const PodFacts::Container& c : request.old_object->containers) {
      if (c.list == "ephemeralContainers") existing.insert(c.name);
    }
  }
  const std::vector<std::pair<std::string, std::string>> env = SlurmEnv(policy);
  json::array ops;
  int i = 0;
  for (const PodFacts::Container& c : pod.containers) {
    if (c.list != "ephemeralContainers") continue;
    const int index = i++;
    if (existing.contains(c.name)) continue;  // the apiserver refuses changes to those
    AddEnvOps(c, "/spec/ephemeralContainers/" + std::to_string(index) + "/env", env, ops);
  }
  Decision d = Decision::Allow();
  if (!ops.empty()) d.patch = json::serialize(ops);
  return d;
}

}  // namespace

Decision Mutate(const Request& request, const Policy& policy, const Labels* ns_labels) {
  if (request.kind == "Pod" && request.operation == "UPDATE" &&
      request.subresource == "ephemeralcontainers" && request.object) {
    return MutateEphemeral(request, policy);
  }
  // Only a CREATE of the pod itself: spec.nodeName and spec.schedulerName are immutable after
  // it, so a patch on UPDATE would make the apiserver refuse the update. (Upstream patches the
  // scheduler name on UPDATE too; for a pod created before the webhook that breaks every update.)
  if (request.kind != "Pod" || request.operation != "CREATE" || !request.subresource.empty() ||
      !request.object) {
    return Decision::Allow();
  }
  const PodFacts& pod = *request.object;
  std::string_view ns = request.namespace_.empty() ? pod.namespace_ : request.namespace_;
  if (!IsManaged(pod, ns, policy, ns_labels)) {
    return Decision::Allow();
  }
  json::array ops;
  if (pod.node_name && !pod.node_name->empty()) {
    ops.push_back(json::object{{"op", "remove"}, {"path", "/spec/nodeName"}});
  }
  const bool set_name = !pod.scheduler_name || pod.scheduler_name->empty() ||
                        *pod.scheduler_name == kDefaultScheduler;
  // The pod is the bridge's from here on (another custom scheduler name is left alone): its
  // finalizer and the toleration of the managed-node taint are set now, in the pod's first
  // write, instead of by a patch of the scheduler's after the submit (one write less per pod).
  const bool ours = set_name || *pod.scheduler_name == policy.scheduler_name;
  const bool add_toleration = ours && !ToleratesManagedNode(pod, policy.scheduler_name);
  // (Made only when it is added: every pod create passes here.)
  const json::value toleration =
      add_toleration ? json::parse(bridge::ManagedNodeTolerationJson(policy.scheduler_name))
                     : json::value();
  if (!pod.has_spec) {
    json::object spec{{"schedulerName", policy.scheduler_name}};
    spec["tolerations"] = json::array{toleration};
    ops.push_back(json::object{{"op", "add"}, {"path", "/spec"}, {"value", std::move(spec)}});
  } else {
    if (set_name) {
      ops.push_back(json::object{
          {"op", "add"}, {"path", "/spec/schedulerName"}, {"value", policy.scheduler_name}});
    }
    if (add_toleration && pod.has_tolerations) {
      ops.push_back(
          json::object{{"op", "add"}, {"path", "/spec/tolerations/-"}, {"value", toleration}});
    } else if (add_toleration) {
      ops.push_back(json::object{
          {"op", "add"}, {"path", "/spec/tolerations"}, {"value", json::array{toleration}}});
    }
  }
  if (ours && !Contains(pod.finalizers, bridge::kFinalizer)) {
    if (pod.has_finalizers) {
      ops.push_back(json::object{
          {"op", "add"}, {"path", "/metadata/finalizers/-"}, {"value", bridge::kFinalizer}});
    } else if (pod.has_metadata) {
      ops.push_back(json::object{{"op", "add"},
                                 {"path", "/metadata/finalizers"},
                                 {"value", json::array{json::string(bridge::kFinalizer)}}});
    }
  }
  // The grace period a terminating pod holds its job for, capped (the apiserver's defaulting
  // has set it already, to 30 s when the manifest has none).
  if (const std::int64_t cap = policy.max_termination_grace_seconds; cap > 0 && pod.has_spec) {
    const std::int64_t grace = pod.termination_grace_seconds.value_or(30);
    if (grace > cap) {
      ops.push_back(json::object{
          {"op", "add"}, {"path", "/spec/terminationGracePeriodSeconds"}, {"value", cap}});
    }
  }
  // Slurm's allocation for the containers: appended to each container's env (created when
  // absent), never over a variable the container sets.
  const std::vector<std::pair<std::string, std::string>> env = SlurmEnv(policy);
  std::map<std::string, int> index;  // per list
  for (const PodFacts::Container& c : pod.containers) {
    const int i = index[c.list]++;
    if (c.list == "ephemeralContainers") continue;  // added later, through their subresource
    AddEnvOps(c, "/spec/" + c.list + "/" + std::to_string(i) + "/env", env, ops);
  }
  Decision d = Decision::Allow();
  if (!ops.empty()) {
    d.patch = json::serialize(ops);
  }
  return d;
}

bool HasDraRequests(const PodFacts& pod) {
  if (!pod.resource_claims.empty()) return true;
  auto dra = [](const std::string& r) { return r.starts_with(bridge::kDraExtendedResourcePrefix); };
  return std::ranges::any_of(pod.container_resources, dra) ||
         std::ranges::any_of(pod.pod_resources, dra);
}

DraNeeds DraObjectsToRead(const Request& request, const Policy& policy) {
  DraNeeds out;
  if (request.kind != "Pod" || !request.object) return out;
  const PodFacts& pod = *request.object;
  if (!pod.scheduler_name || *pod.scheduler_name != policy.scheduler_name) return out;
  if (!HasDraRequests(pod)) return out;
  if (request.operation == "UPDATE") {
    // Only a change of the job annotations can add a DRA problem after CREATE.
    if (!request.old_object || bridge::JobAnnotations(request.old_object->annotations) ==
                                   bridge::JobAnnotations(pod.annotations)) {
      return out;
    }
  } else if (request.operation != "CREATE") {
    return out;
  }
  for (const std::set<std::string>* list : {&pod.container_resources, &pod.pod_resources}) {
    for (const std::string& r : *list) {
      if (r.starts_with(bridge::kDraExtendedResourcePrefix)) {
        std::string cls = r.substr(bridge::kDraExtendedResourcePrefix.size());
        if (!cls.empty()) out.device_classes.insert(std::move(cls));
      }
    }
  }
  for (const bridge::PodResourceClaim& c : pod.resource_claims) {
    if (c.resource_claim_name.empty() && !c.resource_claim_template_name.empty()) {
      out.claim_templates.insert(c.resource_claim_template_name);
    }
  }
  return out;
}

std::vector<std::string> TemplateDeviceClasses(const kube::GenericObject& tmpl) {
  std::vector<std::string> out;
  boost::system::error_code ec;
  json::value spec = json::parse(tmpl.spec_json, ec);
  if (ec || !spec.is_object()) return out;
  auto add = [&](const json::object* o) {
    if (o == nullptr) return;
    std::string name = StringAt(*o, {"deviceClassName"});
    if (!name.empty() && !Contains(out, name)) out.push_back(std::move(name));
  };
  const json::object* claim = ObjectAt(spec.get_object(), {"spec"});
  const json::object* devices = claim == nullptr ? nullptr : ObjectAt(*claim, {"devices"});
  const json::value* requests = devices == nullptr ? nullptr : devices->if_contains("requests");
  if (requests == nullptr || !requests->is_array()) return out;
  for (const json::value& r : requests->get_array()) {
    const json::object* ro = r.if_object();
    if (ro == nullptr) continue;
    add(ObjectAt(*ro, {"exactly"}));
    if (const json::value* alts = ro->if_contains("firstAvailable"); alts && alts->is_array()) {
      for (const json::value& a : alts->get_array()) add(a.if_object());
    }
  }
  return out;
}

std::vector<std::string> DefaultPrivilegedUsers(std::string_view ns) {
  if (ns.empty()) {
    return {};
  }
  return {"system:serviceaccount:" + std::string(ns) + ":slurm-bridge-*"};
}

bool IsPrivileged(const Request& request, const Policy& policy) {
  const std::string_view user = request.username;
  for (const std::string& u : policy.privileged_users) {
    const bool match = u.ends_with('*')
                           ? user.starts_with(std::string_view(u).substr(0, u.size() - 1))
                           : u == user;
    if (match && !user.empty()) {
      return true;
    }
  }
  return std::any_of(request.groups.begin(), request.groups.end(),
                     [&](const std::string& g) { return Contains(policy.privileged_groups, g); });
}

namespace {

std::string TolerationRefusal(const Policy& policy) {
  return "a toleration of the taint " + std::string(bridge::kManagedNodeTaint) + "=" +
         policy.scheduler_name + ":" + std::string(bridge::kManagedNodeTaintEffect) +
         " (or of every taint) is reserved for pods scheduled by " + Quote(policy.scheduler_name) +
         ": Slurm allocates those nodes; set spec.schedulerName to " +
         Quote(policy.scheduler_name) + " instead";
}

std::string JoinComma(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "none" : out;
}

// Whether label (`label`) or annotation `key` of a pod is the bridge's to write (Validate):
// on any pod, the keys under bridge::kBridgeKeyPrefix and bridge::kBridgePodAnnotations; on a
// bridge pod, every other key under slinky.slurm.net/ too, but for the legacy spelling of the
// job options (annotations, tenants'). Other pods keep the rest of slinky.slurm.net/: SchedMD's
// slurm-operator writes its own keys there on its NodeSet pods (slinky.slurm.net/pod-cordon, ...).
bool ReservedKey(std::string_view key, bool label, bool bridge_pod) {
  if (key.starts_with(bridge::kBridgeKeyPrefix) ||
      std::ranges::find(bridge::kBridgePodAnnotations, key) !=
          bridge::kBridgePodAnnotations.end()) {
    return true;
  }
  if (!bridge_pod || !key.starts_with(bridge::kLegacyJobAnnotationPrefix)) return false;
  const std::string_view option = key.substr(bridge::kLegacyJobAnnotationPrefix.size());
  return label || std::ranges::find(bridge::kJobOptionKeys, option) == bridge::kJobOptionKeys.end();
}

// The bridge's keys (ReservedKey) a request that is not privileged sets at CREATE or changes
// (adds, removes or alters) at UPDATE, in every phase and through every subresource (pods/status
// may change labels too). A user who can point a pod at another job id or node, another
// ResourceClaim or another het-job part makes the bridge act on it.
void CheckReservedKeys(const Request& request, const Policy& policy, bool bridge_pod,
                       std::vector<std::string>& problems) {
  if (IsPrivileged(request, policy)) return;
  static const PodFacts kNone;
  const bool create = request.operation == "CREATE";
  const PodFacts& pod = *request.object;
  const PodFacts& old = !create && request.old_object ? *request.old_object : kNone;
  for (auto [what, before, after] : {std::tuple{"label", &old.labels, &pod.labels},
                                     {"annotation", &old.annotations, &pod.annotations}}) {
    const bool label = std::string_view(what) == "label";
    std::set<std::string> keys;
    for (const Labels* m : {before, after}) {
      for (const auto& [k, v] : *m) {
        if (ReservedKey(k, label, bridge_pod)) keys.insert(k);
      }
    }
    for (const std::string& k : keys) {
      if (!create && !Changed(*before, *after, k)) continue;
      std::string m = std::string(what) + " " + Quote(k) +
                      " is set by slurm-bridge and cannot be " +
                      (create ? "set on a new pod" : "changed");
      if (k.starts_with(bridge::kLegacyJobAnnotationPrefix) &&
          std::ranges::find(bridge::kBridgePodAnnotations, k) ==
              bridge::kBridgePodAnnotations.end()) {
        m += " (on pods scheduled by " + Quote(policy.scheduler_name) + ", the keys under " +
             Quote(bridge::kLegacyJobAnnotationPrefix) +
             " are the bridge's but for the job options' old spelling as annotations; job "
             "options go under " +
             Quote(bridge::kJobAnnotationPrefix) + ")";
      }
      problems.push_back(std::move(m));
    }
  }
}

// A pod that is not the bridge's: it must not tolerate the managed-node taint, or it could run on
// a Slurm node without a Slurm allocation; and it must not carry the bridge's own keys, which
// the bridge's readers of labels (the node epilog, the binder's holders) would take for its own.
Decision ValidateOtherPod(const Request& request, const PodFacts& pod, const Policy& policy) {
  std::vector<std::string> problems;
  CheckReservedKeys(request, policy, /*bridge_pod=*/false, problems);
  std::string_view ns = request.namespace_.empty() ? pod.namespace_ : request.namespace_;
  // A mirror pod counts only when a kubelet writes it: anyone may put the annotation on a pod.
  const bool from_kubelet = std::string_view(request.username).starts_with("system:node:") &&
                            std::find(request.groups.begin(), request.groups.end(),
                                      "system:nodes") != request.groups.end();
  // DaemonSet pods get no exception (N-3): anyone with the `edit` role may own a DaemonSet, so
  // only those of the system namespaces may tolerate the taint, as any pod there.
  const bool may_tolerate = !ToleratesManagedNode(pod, policy.scheduler_name) ||
                            (pod.mirror_pod && from_kubelet) ||
                            Contains(policy.system_namespaces, ns) || IsPrivileged(request, policy);
  // A pod from before the webhook keeps a toleration an UPDATE does not add.
  const bool had = request.operation == "UPDATE" && request.old_object &&
                   ToleratesManagedNode(*request.old_object, policy.scheduler_name);
  if (!may_tolerate && !had) problems.push_back(TolerationRefusal(policy));
  if (problems.empty()) return Decision::Allow();
  return Decision::Deny(Join(problems));
}

// Identity-policy problems of the object's job annotations: at CREATE, and at UPDATE when they
// changed (an object from before the policy keeps working until its annotations are edited).
void CheckIdentity(const Request& request, const Policy& policy,
                   std::vector<std::string>& problems) {
  const PodFacts& obj = *request.object;
  std::map<std::string, std::string> now = bridge::JobAnnotations(obj.annotations);
  if (now.empty()) return;
  if (request.operation == "UPDATE" && request.old_object &&
      bridge::JobAnnotations(request.old_object->annotations) == now) {
    return;
  }
  std::string_view ns = request.namespace_.empty() ? obj.namespace_ : request.namespace_;
  for (std::string& m : bridge::IdentityViolations(now, ns, policy.identity)) {
    problems.push_back(std::move(m));
  }
}

// With nvidia_visible_devices: the containers of `pod` ("<list> <name>") whose
// NVIDIA_VISIBLE_DEVICES is missing or not read from the GPU annotation (Mutate sets it so).
std::set<std::string> OwnGpuVariables(const PodFacts& pod) {
  const std::string want =
      "metadata.annotations['" + std::string(bridge::kJobGpusAnnotation) + "']";
  std::set<std::string> out;
  for (const PodFacts::Container& c : pod.containers) {
    bool seen = false;
    bool good = true;
    for (std::size_t i = 0; i < c.env.size(); ++i) {
      if (c.env[i] != kNvidiaVisibleDevices) continue;
      seen = true;
      good = good && i < c.env_field_paths.size() && c.env_field_paths[i] == want;
    }
    if (!seen || !good) out.insert(c.list + " " + Quote(c.name));
  }
  return out;
}

void CheckGpuVariables(const Request& request, std::vector<std::string>& problems) {
  std::set<std::string> bad = OwnGpuVariables(*request.object);
  if (request.operation == "UPDATE" && request.old_object) {
    for (const std::string& c : OwnGpuVariables(*request.old_object)) bad.erase(c);
  }
  for (const std::string& c : bad) {
    problems.push_back(
        c + ": " + std::string(kNvidiaVisibleDevices) + " must come from the annotation " +
        Quote(bridge::kJobGpusAnnotation) +
        " (the webhook sets it; podNvidiaVisibleDevices is on): a value of the container's "
        "own would reach GPUs Slurm gave other jobs");
  }
}

// Why bridge::DraAdmissionProblems refuses `pod` with what was read, plus the templates that do
// not exist.
std::vector<std::string> DraProblems(const PodFacts& pod, std::string_view ns,
                                     const DraObjects& dra, const Policy& policy) {
  if (!HasDraRequests(pod)) return {};
  if (!pod.pod) return {"the pod's DRA requests could not be read: " + pod.pod_error};
  std::vector<std::string> out;
  std::vector<bridge::PodResourceClaim> claims;
  for (const bridge::PodResourceClaim& c : pod.resource_claims) {
    if (c.resource_claim_name.empty() &&
        dra.missing_templates.contains(c.resource_claim_template_name)) {
      out.push_back("pod claim " + Quote(c.name) + ": ResourceClaimTemplate " +
                    Quote(c.resource_claim_template_name) + " does not exist in namespace " +
                    Quote(ns));
      continue;
    }
    claims.push_back(c);
  }
  bridge::ObjectsByName classes;
  for (const auto& [name, obj] : dra.device_classes) classes.emplace(name, &obj);
  bridge::ObjectsByName templates;
  for (const auto& [name, obj] : dra.claim_templates) templates.emplace(name, &obj);
  std::vector<std::string> problems =
      bridge::DraAdmissionProblems(*pod.pod, policy.device_profiles, classes, claims, templates);
  problems.insert(problems.end(), std::make_move_iterator(out.begin()),
                  std::make_move_iterator(out.end()));
  return problems;
}

// The DRA problems of a bridge pod: all at CREATE; at UPDATE those the update adds (claims and
// resources are fixed at CREATE; a job annotation can be added later).
void CheckDra(const Request& request, const DraObjects& dra, const Policy& policy,
              std::vector<std::string>& problems) {
  const PodFacts& pod = *request.object;
  std::string_view ns = request.namespace_.empty() ? pod.namespace_ : request.namespace_;
  std::vector<std::string> now = DraProblems(pod, ns, dra, policy);
  if (request.operation == "UPDATE" && request.old_object) {
    for (const std::string& m : DraProblems(*request.old_object, ns, dra, policy)) {
      std::erase(now, m);
    }
  }
  problems.insert(problems.end(), std::make_move_iterator(now.begin()),
                  std::make_move_iterator(now.end()));
}

// Any kind but Pod: the job annotations, and a DaemonSet's pod template tolerations.
Decision ValidateObject(const Request& request, const Policy& policy) {
  std::vector<std::string> problems;
  CheckIdentity(request, policy, problems);
  if (request.kind == "DaemonSet" && request.object_template) {
    const PodFacts& t = *request.object_template;
    std::string_view ns =
        request.namespace_.empty() ? request.object->namespace_ : request.namespace_;
    const bool ours = t.scheduler_name && *t.scheduler_name == policy.scheduler_name;
    const bool had = request.operation == "UPDATE" && request.old_object_template &&
                     ToleratesManagedNode(*request.old_object_template, policy.scheduler_name);
    if (!ours && !had && ToleratesManagedNode(t, policy.scheduler_name) &&
        !Contains(policy.system_namespaces, ns) && !IsPrivileged(request, policy)) {
      problems.push_back("spec.template: " + TolerationRefusal(policy) +
                         " (DaemonSets may tolerate it only in the system namespaces: " +
                         JoinComma(policy.system_namespaces) + ")");
    }
  }
  if (problems.empty()) return Decision::Allow();
  return Decision::Deny(Join(problems));
}

// A DELETE of a bridge pod: a grace period above the cap. Mutate caps the pod's own
// terminationGracePeriodSeconds at CREATE; DeleteOptions.gracePeriodSeconds overrides it, and a
// terminating pod holds its node after its job ended only as long as the epilog waits
// (maxTerminationGracePeriodSeconds + 30 s): longer, its containers would run on beside the
// next job on the node. A DELETE without a grace period uses the pod's own.
Decision ValidateDelete(const Request& request, const Policy& policy) {
  const std::int64_t cap = policy.max_termination_grace_seconds;
  if (request.kind != "Pod" || !request.old_object || cap <= 0 || !request.grace_period_seconds ||
      *request.grace_period_seconds <= cap) {
    return Decision::Allow();
  }
  const PodFacts& pod = *request.old_object;
  if (!pod.scheduler_name || *pod.scheduler_name != policy.scheduler_name ||
      IsPrivileged(request, policy)) {
    return Decision::Allow();
  }
  return Decision::Deny(
      "DeleteOptions.gracePeriodSeconds " + std::to_string(*request.grace_period_seconds) +
      " is above " + std::to_string(cap) + ", the most a pod scheduled by " +
      Quote(policy.scheduler_name) +
      " may have (config maxTerminationGracePeriodSeconds): its Slurm job's node is held only "
      "that long after the job ends; delete it with a grace period of " +
      std::to_string(cap) + " s or less (kubectl delete --grace-period=" + std::to_string(cap) +
      "), or none");
}

}  // namespace

Decision Validate(const Request& request, const Policy& policy, const DraObjects& dra) {
  if (request.operation == "DELETE") return ValidateDelete(request, policy);
  if ((request.operation != "CREATE" && request.operation != "UPDATE") || !request.object) {
    return Decision::Allow();
  }
  if (request.kind != "Pod") return ValidateObject(request, policy);
  const PodFacts& pod = *request.object;
  if (!pod.scheduler_name || *pod.scheduler_name != policy.scheduler_name) {
    return ValidateOtherPod(request, pod, policy);
  }
  std::vector<std::string> problems;
  CheckReservedKeys(request, policy, /*bridge_pod=*/true, problems);
  if (request.operation == "CREATE") {
    if (pod.node_name && !pod.node_name->empty()) {
      problems.push_back("spec.nodeName cannot be set on a pod scheduled by " +
                         Quote(policy.scheduler_name) + ": Slurm chooses the node");
    }
    if (pod.required_pod_affinity > 0 || pod.required_pod_anti_affinity > 0) {
      problems.push_back(
          "spec.affinity." +
          std::string(pod.required_pod_affinity > 0 ? "podAffinity" : "podAntiAffinity") +
          ".requiredDuringSchedulingIgnoredDuringExecution is not supported for pods scheduled "
          "by " +
          Quote(policy.scheduler_name) +
          ": Slurm chooses the nodes and cannot see other pods; a gang's pods get one node each "
          "already (one pod per node), and preferred terms are ignored");
    }
    if (pod.topology_spread_constraints > 0) {
      problems.push_back("spec.topologySpreadConstraints is not supported for pods scheduled by " +
                         Quote(policy.scheduler_name));
    }
  } else {
    if (request.subresource == "resize") {
      problems.push_back(
          "in-place resize (subresource \"resize\") is not supported for pods "
          "scheduled by " +
          Quote(policy.scheduler_name) +
          ": the pod's Slurm job keeps the CPUs and memory it was submitted with; delete and "
          "re-create the pod to change them");
    }
  }
  CheckDra(request, dra, policy, problems);
  CheckIdentity(request, policy, problems);
  if (policy.nvidia_visible_devices) CheckGpuVariables(request, problems);
  if (problems.empty()) {
    return Decision::Allow();
  }
  return Decision::Deny(Join(problems));
}

std::string EncodeReview(std::string_view uid, const Decision& decision) {
  json::object status{{"code", decision.code}};
  if (!decision.reason.empty()) {
    status["reason"] = decision.reason;
  }
  if (!decision.message.empty()) {
    status["message"] = decision.message;
  }
  json::object response{{"uid", uid}, {"allowed", decision.allowed}, {"status", std::move(status)}};
  if (!decision.patch.empty()) {
    response["patchType"] = "JSONPatch";
    response["patch"] = Base64Encode(decision.patch);
  }
  if (!decision.warnings.empty()) {
    json::array warnings;
    for (const std::string& w : decision.warnings) {
      warnings.emplace_back(w);
    }
    response["warnings"] = std::move(warnings);
  }
  json::object review{{"apiVersion", kReviewApiVersion},
                      {"kind", "AdmissionReview"},
                      {"response", std::move(response)}};
  return json::serialize(review);
}

}  // namespace sb::admission
