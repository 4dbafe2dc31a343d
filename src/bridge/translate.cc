// SPDX-License-Identifier: Apache-2.0
#include "bridge/translate.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/annotations.h"
#include "bridge/dra/profiles.h"
#include "bridge/dra/requests.h"
#include "bridge/names.h"
#include "bridge/tag.h"
#include "common/strings.h"
#include "kube/quantity.h"

namespace sb::bridge {
namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

Error AnnotationError(std::string_view key, std::string_view value, std::string_view what) {
  return Error{ErrorCode::kInvalidArgument,
               fmt::format("annotation {}{}: \"{}\" {}", kJobAnnotationPrefix, key, value, what)};
}

Result<std::int32_t> ParseInt32(std::string_view key, std::string_view value) {
  std::int32_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || p != value.data() + value.size()) {
    return tl::unexpected(AnnotationError(key, value, "is not an integer"));
  }
  return n;
}

Result<std::int32_t> ParsePositive(std::string_view key, std::string_view value) {
  Result<std::int32_t> n = ParseInt32(key, value);
  if (n && *n < 1) return tl::unexpected(AnnotationError(key, value, "must be at least 1"));
  return n;
}

// Non-negative decimal digits only (a Slurm --time field); nullopt otherwise or beyond int64.
std::optional<std::int64_t> Digits(std::string_view s) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || s.front() == '-') {
    return std::nullopt;
  }
  return n;
}

// Seconds of a Slurm --time string with ':' or '-': "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM",
// "D-HH:MM:SS"; nullopt when it is not one.
std::optional<std::int64_t> SlurmTimeSeconds(std::string_view s) {
  std::int64_t days = 0;
  const bool has_days = s.find('-') != std::string_view::npos;
  if (has_days) {
    std::optional<std::int64_t> d = Digits(s.substr(0, s.find('-')));
    if (!d || *d > 100'000) return std::nullopt;
    days = *d;
    s.remove_prefix(s.find('-') + 1);
  }
  std::vector<std::int64_t> parts;
  for (std::string_view rest = s;;) {
    const std::size_t colon = rest.find(':');
    std::optional<std::int64_t> v = Digits(rest.substr(0, colon));
    if (!v || *v > 10'000'000) return std::nullopt;
    parts.push_back(*v);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  if (parts.size() > 3) return std::nullopt;
  std::int64_t seconds = days * 86'400;
  if (has_days) {  // D-HH, D-HH:MM, D-HH:MM:SS
    const std::int64_t unit[] = {3600, 60, 1};
    for (std::size_t i = 0; i < parts.size(); ++i) seconds += parts[i] * unit[i];
  } else if (parts.size() == 2) {  // MM:SS
    seconds += parts[0] * 60 + parts[1];
  } else if (parts.size() == 3) {  // HH:MM:SS
    seconds += parts[0] * 3600 + parts[1] * 60 + parts[2];
  } else {
    return std::nullopt;  // bare minutes are read before
  }
  return seconds;
}

// `total += v`; false (total unchanged) when the sum leaves int64.
[[nodiscard]] bool AddTo(std::int64_t& total, std::int64_t v) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(total, v, &sum)) return false;
  total = sum;
  return true;
}

Error TooLarge(const kube::Pod& pod, std::string_view name) {
  return Error{ErrorCode::kInvalidArgument,
               fmt::format("pod {}/{}: total {} is too large", pod.metadata.namespace_,
                           pod.metadata.name, name)};
}

// Pod-level spec.resources may set these (PodLevelResources); others stay per container.
bool IsPodLevelResource(std::string_view name) {
  return name == "cpu" || name == "memory" || name.starts_with("hugepages-");
}

// Whole-pod use of `name` from the `pick` lists (requests or limits), as kube-scheduler counts it
// (component-helpers PodRequests / PodLimits): the containers' sum; each init container in order:
// a sidecar (restartPolicy Always) adds to the sum and keeps running, a plain one needs itself
// plus the sidecars started before it; the pod needs the larger of the sum and any init
// container's need. A pod-level value (spec.resources) replaces all that for cpu, memory and
// hugepages. Then overhead is added. `value` reads a quantity.
template <typename Pick, typename Value>
Result<std::int64_t> PodTotal(const kube::Pod& pod, const std::string& name, Pick pick,
                              Value value) {
  std::int64_t total = 0;
  if (const kube::ResourceList& pod_level = pick(pod.spec.resources);
      IsPodLevelResource(name) && pod_level.contains(name)) {
    Result<std::int64_t> v = value(pod_level.at(name));
    if (!v) return v;
    total = *v;
  } else {
    std::int64_t sum = 0;
    for (const kube::Container& c : pod.spec.containers) {
      const kube::ResourceList& l = pick(c.resources);
      if (auto it = l.find(name); it != l.end()) {
        Result<std::int64_t> v = value(it->second);
        if (!v) return v;
        if (!AddTo(sum, *v)) return tl::unexpected(TooLarge(pod, name));
      }
    }
    std::int64_t sidecars = 0;  // sidecars started so far
    std::int64_t init_peak = 0;
    for (const kube::Container& c : pod.spec.init_containers) {
      const kube::ResourceList& l = pick(c.resources);
      std::int64_t own = 0;
      if (auto it = l.find(name); it != l.end()) {
        Result<std::int64_t> v = value(it->second);
        if (!v) return v;
        own = *v;
      }
      if (c.restart_policy == "Always") {
        if (!AddTo(sum, own) || !AddTo(sidecars, own)) return tl::unexpected(TooLarge(pod, name));
        init_peak = std::max(init_peak, sidecars);
      } else {
        if (!AddTo(own, sidecars)) return tl::unexpected(TooLarge(pod, name));
        init_peak = std::max(init_peak, own);
      }
    }
    total = std::max(sum, init_peak);
  }
  if (auto it = pod.spec.overhead.find(name); it != pod.spec.overhead.end()) {
    Result<std::int64_t> v = value(it->second);
    if (!v) return v;
    if (!AddTo(total, *v)) return tl::unexpected(TooLarge(pod, name));
  }
  return total;
}

// Every resource name any container of the pod mentions.
std::set<std::string> ResourceNames(const kube::Pod& pod) {
  std::set<std::string> names;
  auto add = [&](const std::vector<kube::Container>& cs) {
    for (const kube::Container& c : cs) {
      for (const auto& [k, v] : c.resources.requests) names.insert(k);
      for (const auto& [k, v] : c.resources.limits) names.insert(k);
    }
  };
  add(pod.spec.containers);
  add(pod.spec.init_containers);
  for (const auto& [k, v] : pod.spec.overhead) names.insert(k);
  for (const auto& [k, v] : pod.spec.resources.requests) names.insert(k);
  for (const auto& [k, v] : pod.spec.resources.limits) names.insert(k);
  return names;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

bool HasDraResources(const kube::Pod& pod,
                     const std::set<std::string, std::less<>>& dra_resource_names) {
  auto asks = [&](const std::vector<kube::Container>& list) {
    for (const kube::Container& c : list) {
      for (const auto* m : {&c.resources.limits, &c.resources.requests}) {
        for (const auto& [name, value] : *m) {
          if (name.starts_with(kDraExtendedResourcePrefix) || dra_resource_names.contains(name)) {
            return true;
          }
        }
      }
    }
    return false;
  };
  return !pod.spec.resource_claims.empty() || asks(pod.spec.containers) ||
         asks(pod.spec.init_containers);
}

namespace {

auto Requests(const kube::ResourceRequirements& r) -> const kube::ResourceList& {
  return r.requests;
}
auto Limits(const kube::ResourceRequirements& r) -> const kube::ResourceList& { return r.limits; }

// Every resource of the pod: the requests, or the larger of request and limit.
Result<std::map<std::string, std::int64_t>> PodTotals(const kube::Pod& pod, bool with_limits) {
  std::map<std::string, std::int64_t> out;
  for (const std::string& name : ResourceNames(pod)) {
    auto value = [&](const std::string& q) -> Result<std::int64_t> {
      Result<std::int64_t> v =
          name == "cpu" ? kube::ParseQuantityMilli(q) : kube::ParseQuantityValue(q);
      if (!v) {
        return MakeError(ErrorCode::kInvalidArgument,
                         fmt::format("pod {}/{}: resource {}: {}", pod.metadata.namespace_,
                                     pod.metadata.name, name, v.error().message));
      }
      return v;
    };
    Result<std::int64_t> req = PodTotal(pod, name, Requests, value);
    if (!req) return tl::unexpected(req.error());
    std::int64_t total = *req;
    if (with_limits) {
      Result<std::int64_t> lim = PodTotal(pod, name, Limits, value);
      if (!lim) return tl::unexpected(lim.error());
      total = std::max(total, *lim);
    }
    out[name] = total;
  }
  return out;
}

}  // namespace

Result<std::map<std::string, std::int64_t>> PodResources(const kube::Pod& pod) {
  return PodTotals(pod, /*with_limits=*/true);
}

Result<std::map<std::string, std::int64_t>> PodRequests(const kube::Pod& pod) {
  return PodTotals(pod, /*with_limits=*/false);
}

Result<slurm::NoValNumber> ParseTimeLimit(std::string_view raw) {
  const std::string_view key = "timelimit";
  if (EqualsIgnoreCase(raw, "UNLIMITED") || EqualsIgnoreCase(raw, "INFINITE")) {
    return slurm::NoValNumber::Infinite();
  }
  std::optional<std::int64_t> seconds;
  if (std::optional<std::int64_t> minutes = Digits(raw)) {
    if (*minutes > std::numeric_limits<std::int32_t>::max()) {
      return tl::unexpected(AnnotationError(key, raw, "is too long"));
    }
    seconds = *minutes * 60;
  } else if (raw.find_first_of(":-") != std::string_view::npos) {
    seconds = SlurmTimeSeconds(raw);
  } else if (!raw.empty() && std::isdigit(static_cast<unsigned char>(raw.front()))) {
    Result<std::chrono::milliseconds> d = ParseDuration(raw);
    if (d) seconds = (d->count() + 999) / 1000;
  }
  if (!seconds) {
    return tl::unexpected(AnnotationError(
        key, raw,
        "is not a time limit: minutes (90), a duration (90s, 2h, 1h30m) or a Slurm --time string "
        "(MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS)"));
  }
  const std::int64_t minutes = (*seconds + 59) / 60;  // Slurm rounds seconds up
  if (minutes < 1) return tl::unexpected(AnnotationError(key, raw, "must be at least 1 minute"));
  if (minutes > std::numeric_limits<std::int32_t>::max()) {
    return tl::unexpected(AnnotationError(key, raw, "is too long"));
  }
  return slurm::NoValNumber::Of(minutes);
}

std::string CoResidentSharingRisk(const slurm::PartitionInfo& partition) {
  if (partition.oversubscribe_jobs <= 1) return "";
  return fmt::format(
      "partition {} has OverSubscribe={}:{}: up to {} jobs may share a core, so with nodeSharing "
      "coResident a pod may run on cores Slurm also gave other jobs; set OverSubscribe=NO",
      partition.name, partition.oversubscribe_force ? "FORCE" : "YES", partition.oversubscribe_jobs,
      partition.oversubscribe_jobs);
}

namespace {

// Review R-2: a pod that shares its node with other jobs (nodeSharing coResident) is held to
// what Slurm gave it by its limits alone, so it must be Guaranteed for cpu and memory: limits in
// every container (or at pod level), and requests, where given, equal to them. "" when it is.
std::string NotGuaranteed(const kube::Pod& pod) {
  auto same = [](const std::string& name, const std::string& a, const std::string& b) {
    Result<std::int64_t> x =
        name == "cpu" ? kube::ParseQuantityMilli(a) : kube::ParseQuantityValue(a);
    Result<std::int64_t> y =
        name == "cpu" ? kube::ParseQuantityMilli(b) : kube::ParseQuantityValue(b);
    return x && y ? *x == *y : a == b;
  };
  auto check = [&](const kube::ResourceRequirements& r, const std::string& what) -> std::string {
    for (const std::string name : {"cpu", "memory"}) {
      auto limit = r.limits.find(name);
      if (limit == r.limits.end()) return fmt::format("{} has no {} limit", what, name);
      auto request = r.requests.find(name);
      if (request != r.requests.end() && !same(name, request->second, limit->second)) {
        return fmt::format("{} requests {} {} but its limit is {}", what, request->second, name,
                           limit->second);
      }
    }
    return "";
  };
  if (pod.spec.resources.limits.contains("cpu") && pod.spec.resources.limits.contains("memory")) {
    return check(pod.spec.resources, "the pod");
  }
  for (const kube::Container& c : pod.spec.init_containers) {
    if (std::string why = check(c.resources, "init container " + c.name); !why.empty()) return why;
  }
  for (const kube::Container& c : pod.spec.containers) {
    if (std::string why = check(c.resources, "container " + c.name); !why.empty()) return why;
  }
  return "";
}

// The count of TRES `tres` (such as gres/gpu) in a tres_per_node string, typed ones included:
// gres/gpu=2, gres/gpu:2, gres/gpu:a100=2, gres/gpu:a100:2 and gpu:2 each count 2 for
// gres/gpu, and gres/gpu alone 1 (Slurm's forms); an entry whose count does not parse counts
// nothing.
std::int64_t TresCount(std::string_view per_node, std::string_view tres) {
  auto number = [](std::string_view digits) -> std::optional<std::int64_t> {
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size()) {
      return std::nullopt;
    }
    return n;
  };
  std::int64_t total = 0;
  for (std::string_view rest = per_node; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::string_view name = entry;
    std::optional<std::int64_t> count = 1;
    if (const std::size_t eq = entry.find('='); eq != std::string_view::npos) {
      name = entry.substr(0, eq);
      count = number(entry.substr(eq + 1));
    } else if (const std::size_t colon = entry.rfind(':'); colon != std::string_view::npos) {
      if (std::optional<std::int64_t> n = number(entry.substr(colon + 1))) {
        name = entry.substr(0, colon);
        count = n;
      }
    }
    std::string full(name);
    if (full.find('/') == std::string::npos) full = "gres/" + full;
    const bool match = full == tres || (full.starts_with(tres) && full.size() > tres.size() &&
                                        full[tres.size()] == ':');
    if (match && count && *count > 0) total += *count;
  }
  return total;
}

}  // namespace

Result<slurm::JobDescription> Translate(const GroupSpec& group,
                                        const std::vector<const kube::Pod*>& pods,
                                        const TranslateOptions& options) {
  slurm::JobDescription job;
  job.name = group.name;
  job.partition = options.partition;
  job.mcs_label = options.mcs_label;
  job.current_working_directory = "/tmp";
  if (options.mode == JobMode::kExternal) {
    job.flags = {"EXTERNAL_JOB"};
  } else {
    // A placeholder that holds the allocation until the bridge cancels it.
    job.script = "#!/bin/sh\n# slurm-bridge placeholder for " + group.key +
                 "\nwhile :; do sleep 3600; done\n";
    job.environment = {"PATH=/usr/local/bin:/usr/bin:/bin"};
    job.standard_output = "/dev/null";
    job.standard_error = "/dev/null";
  }
  const int count = std::max<int>(group.size, static_cast<int>(pods.size()));
  job.nodes = std::to_string(count);
  job.minimum_nodes = count;
  job.maximum_nodes = count;
  job.tasks_per_node = 1;
  if (options.node_sharing == NodeSharing::kExclusive) job.shared = {"none"};
  if (group.time_limit_minutes) {
    job.time_limit = slurm::NoValNumber::Of(*group.time_limit_minutes);
  } else if (options.default_time_limit_minutes > 0) {
    job.time_limit = slurm::NoValNumber::Of(options.default_time_limit_minutes);
  }

  // Resources: the largest pod decides, as each pod gets a node of its own.
  std::int64_t cpu_milli = 0;
  std::int64_t mem_bytes = 0;
  std::map<std::string, std::int64_t> tres;  // "gres/gpu" -> count per node
  JobTag tag{
      .group = group.key, .cluster = options.cluster_name, .scheduler = options.scheduler_name};
  for (const kube::Pod* pod : pods) {
    // Refused at admission too; again here, since the webhook can be off (issue #25): Slurm
    // chooses the nodes and sees no pods, so a required term would be silently broken.
    if (pod->spec.required_pod_affinity > 0 || pod->spec.required_pod_anti_affinity > 0) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          fmt::format("pod {}/{}: spec.affinity.{}.requiredDuringSchedulingIgnoredDuringExecution "
                      "is not supported: Slurm chooses the nodes and cannot see other pods (a "
                      "gang's pods get one node each already); remove the required term or use "
                      "a preferred one, which is ignored",
                      pod->metadata.namespace_, pod->metadata.name,
                      pod->spec.required_pod_affinity > 0 ? "podAffinity" : "podAntiAffinity"));
    }
    Result<std::map<std::string, std::int64_t>> res = PodResources(*pod);
    if (!res) return tl::unexpected(res.error());
    std::map<std::string, std::int64_t> pod_tres;
    for (const auto& [name, value] : *res) {
      if (name == "cpu") {
        cpu_milli = std::max(cpu_milli, value);
      } else if (name == "memory") {
        mem_bytes = std::max(mem_bytes, value);
      } else if (auto it = options.resource_tres.find(name); it != options.resource_tres.end()) {
        if (!AddTo(pod_tres[it->second], value)) return tl::unexpected(TooLarge(*pod, name));
      } else if (name.starts_with(kDraExtendedResourcePrefix) ||
                 options.dra_resource_names.contains(name)) {
        continue;  // below, through the device profiles
      }
    }
    if (HasDraResources(*pod, options.dra_resource_names)) {
      static const ObjectsByName kNone;
      auto templates =
          options.claim_templates.find(pod->metadata.namespace_ + "/" + pod->metadata.name);
      Result<std::vector<DraRequest>> dra = PodDraRequests(
          *pod, options.device_profiles, options.device_classes, PodResourceClaimsOf(*pod),
          templates == options.claim_templates.end() ? kNone : templates->second);
      if (!dra) return tl::unexpected(dra.error());
      for (const DraRequest& r : *dra) {
        const DeviceProfile* profile = FindProfile(options.device_profiles, r.profile);
        if (profile == nullptr) continue;  // PodDraRequests resolved it to one of them
        if (profile->backend == DeviceBackend::kCoreBitmap) {
          std::int64_t milli = 0;
          if (__builtin_mul_overflow(r.count, 1000, &milli)) {
            return tl::unexpected(TooLarge(*pod, r.resource_name));
          }
          cpu_milli = std::max(cpu_milli, milli);
        } else if (!AddTo(pod_tres[DraTres(*profile)], r.count)) {
          return tl::unexpected(TooLarge(*pod, r.resource_name));
        }
      }
    }
    for (const auto& [t, v] : pod_tres) tres[t] = std::max(tres[t], v);
    tag.pods.push_back(pod->metadata.namespace_ + "/" + pod->metadata.name);
    tag.uids.push_back(pod->metadata.uid);
  }
  // Rounded up without `+ 999`, which overflows near the int64 limit.
  if (const std::int64_t cpus = cpu_milli / 1000 + (cpu_milli % 1000 > 0 ? 1 : 0); cpus > 0) {
    if (cpus > INT32_MAX) {
      return tl::unexpected(
          Error{ErrorCode::kInvalidArgument,
                fmt::format("group {}: {} CPUs per pod is too many", group.key, cpus)});
    }
    job.cpus_per_task = static_cast<std::int32_t>(cpus);
  }
  // Whole MiB, rounded up: 0 would mean "all the node's memory" to Slurm.
  if (mem_bytes > 0) {
    job.memory_per_node = slurm::NoValNumber::Of(mem_bytes / kMiB + (mem_bytes % kMiB > 0 ? 1 : 0));
  }
  std::string tres_str;
  for (const auto& [t, v] : tres) {
    if (v <= 0) continue;
    if (!tres_str.empty()) tres_str += ',';
    tres_str += fmt::format("{}={}", t, v);
  }
  job.tres_per_node = tres_str;
  job.admin_comment = EncodeJobTag(tag);
  // What the pods can take, which the annotations below may raise but not lower (review R-2:
  // Slurm would give the rest of the node to other jobs while the pod uses it).
  const std::optional<std::int32_t> derived_cpus = job.cpus_per_task;
  const slurm::NoValNumber derived_memory = job.memory_per_node;

  // Annotations win over derived values, within the namespace's identity policy.
  const std::map<std::string, std::string> annotations = JobAnnotations(group.annotations);
  if (std::vector<std::string> refused =
          IdentityViolations(annotations, group.namespace_, options.identity);
      !refused.empty()) {
    return tl::unexpected(
        Error{ErrorCode::kPermissionDenied, fmt::format("{}", fmt::join(refused, "; "))});
  }
  const Identity identity = IdentityFor(annotations, group.namespace_, options.identity);
  if (!identity.user_id.empty()) job.user_id = identity.user_id;
  if (!identity.group_id.empty()) job.group_id = identity.group_id;
  for (const auto& [key, raw] : annotations) {
    const std::string value = TrimWhitespace(raw);
    if (key == "account") {
      job.account = value;
    } else if (key == "constraints") {
      job.constraints = value;
    } else if (key == "comment") {
      job.comment = value;
    } else if (key == "cpu-per-task") {
      Result<std::int64_t> v = kube::ParseQuantityValue(value);
      if (!v || *v < 1 || *v > INT32_MAX) {
        return tl::unexpected(AnnotationError(key, raw, "is not a positive CPU quantity"));
      }
      if (derived_cpus && *v < *derived_cpus) {
        return tl::unexpected(AnnotationError(
            key, raw,
            fmt::format("is less than the pod's {} CPU(s) (its containers' requests and limits)",
                        *derived_cpus)));
      }
      job.cpus_per_task = static_cast<std::int32_t>(*v);
    } else if (key == "exclusive") {
      job.shared =
          Lower(value) == "false" ? std::vector<std::string>{} : std::vector<std::string>{"none"};
    } else if (key == "gres") {
      for (const auto& [t, v] : tres) {
        if (v > 0 && TresCount(value, t) < v) {
          return tl::unexpected(
              AnnotationError(key, raw, fmt::format("asks for fewer {} than the pod's {}", t, v)));
        }
      }
      job.tres_per_node = value;
    } else if (key == "job-name") {
      job.name = value;
    } else if (key == "licenses") {
      job.licenses = value;
    } else if (key == "max-nodes") {
      Result<std::int32_t> v = ParsePositive(key, raw);
      if (!v) return tl::unexpected(v.error());
      job.maximum_nodes = *v;
    } else if (key == "min-nodes") {
      Result<std::int32_t> v = ParsePositive(key, raw);
      if (!v) return tl::unexpected(v.error());
      job.minimum_nodes = *v;
    } else if (key == "mem-per-node") {
      Result<std::int64_t> v = kube::ParseQuantityValue(value);
      if (!v || *v < kMiB) {
        return tl::unexpected(AnnotationError(key, raw, "is not a memory quantity of 1Mi or more"));
      }
      if (derived_memory.set && *v / kMiB < derived_memory.number) {
        return tl::unexpected(AnnotationError(
            key, raw,
            fmt::format("is less than the pod's {}Mi (its containers' requests and limits)",
                        derived_memory.number)));
      }
      job.memory_per_node = slurm::NoValNumber::Of(*v / kMiB);
    } else if (key == "partition") {
      job.partition = value;
    } else if (key == "priority") {
      Result<std::int32_t> v = ParseInt32(key, raw);
      if (!v) return tl::unexpected(v.error());
      // Slurm holds a job of priority 0 (JobHeldAdmin) until an admin releases it (review R-11).
      if (*v < 1) {
        return tl::unexpected(
            AnnotationError(key, raw, "must be at least 1 (Slurm holds a job of priority 0)"));
      }
      job.priority = slurm::NoValNumber::Of(*v);
    } else if (key == "qos") {
      job.qos = value;
    } else if (key == "reservation") {
      job.reservation = value;
    } else if (key == "timelimit") {
      Result<slurm::NoValNumber> v = ParseTimeLimit(raw);
      if (!v) return tl::unexpected(v.error());
      job.time_limit = *v;
    } else if (key == "wckey") {
      job.wckey = value;
    }
    // Unknown suffixes are ignored, as upstream does (and slinky.slurm.net/slurm-node is not a
    // job annotation).
  }
  if (job.shared.empty() && options.node_sharing == NodeSharing::kExclusive &&
      options.mcs_sharing) {
    job.shared = {"mcs"};
    if (job.mcs_label.empty()) job.mcs_label = std::string(kDefaultMcsLabel);
  }
  if (options.node_sharing == NodeSharing::kCoResident && job.shared.empty()) {
    for (const kube::Pod* pod : pods) {
      if (std::string why = NotGuaranteed(*pod); !why.empty()) {
        return tl::unexpected(Error{
            ErrorCode::kInvalidArgument,
            fmt::format("pod {}/{}: with nodeSharing coResident a pod shares its node with other "
                        "jobs and must be Guaranteed for cpu and memory (limits equal to requests "
                        "in every container): {}",
                        pod->metadata.namespace_, pod->metadata.name, why)});
      }
    }
  }
  if (job.minimum_nodes && job.maximum_nodes && *job.minimum_nodes > *job.maximum_nodes) {
    return tl::unexpected(Error{
        ErrorCode::kInvalidArgument,
        fmt::format("annotations {0}min-nodes ({1}) and {0}max-nodes ({2}) contradict each other",
                    kJobAnnotationPrefix, *job.minimum_nodes, *job.maximum_nodes)});
  }
  if (job.minimum_nodes && job.maximum_nodes) {
    job.nodes = *job.minimum_nodes == *job.maximum_nodes
                    ? std::to_string(*job.minimum_nodes)
                    : fmt::format("{}-{}", *job.minimum_nodes, *job.maximum_nodes);
  }
  return job;
}

std::string SlurmNodeName(const kube::Node& node) {
  auto it = node.metadata.labels.find(std::string(kSlurmNodeNameLabel));
  return it != node.metadata.labels.end() && !it->second.empty() ? it->second : node.metadata.name;
}

bool Tolerates(const std::vector<kube::Toleration>& tolerations, const kube::Taint& taint) {
  for (const kube::Toleration& t : tolerations) {
    if (!t.effect.empty() && t.effect != taint.effect) continue;
    if (t.operator_ == "Exists") {
      if (t.key.empty() || t.key == taint.key) return true;
    } else if (t.key == taint.key && t.value == taint.value) {
      return true;
    }
  }
  return false;
}

namespace {

bool MatchesRequirement(const kube::NodeSelectorRequirement& r,
                        const std::optional<std::string>& value) {
  auto in = [&] { return value && std::ranges::find(r.values, *value) != r.values.end(); };
  auto number = [](std::string_view s) -> std::optional<std::int64_t> {
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return n;
  };
  if (r.operator_ == "In") return in();
  if (r.operator_ == "NotIn") return !in();
  if (r.operator_ == "Exists") return value.has_value();
  if (r.operator_ == "DoesNotExist") return !value.has_value();
  if ((r.operator_ == "Gt" || r.operator_ == "Lt") && value && r.values.size() == 1) {
    std::optional<std::int64_t> have = number(*value);
    std::optional<std::int64_t> want = number(r.values.front());
    if (!have || !want) return false;
    return r.operator_ == "Gt" ? *have > *want : *have < *want;
  }
  return false;
}

}  // namespace

bool MatchesNodeSelector(const kube::Pod& pod, const kube::Node& node) {
  const kube::StringMap& labels = node.metadata.labels;
  for (const auto& [k, v] : pod.spec.node_selector) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

bool MatchesNodeSelectorTerms(const std::vector<kube::NodeSelectorTerm>& terms,
                              const kube::Node& node) {
  if (terms.empty()) return true;
  for (const kube::NodeSelectorTerm& term : terms) {
    if (term.match_expressions.empty() && term.match_fields.empty()) continue;  // matches nothing
    bool ok = true;
    for (const kube::NodeSelectorRequirement& r : term.match_expressions) {
      auto it = node.metadata.labels.find(r.key);
      std::optional<std::string> v;
      if (it != node.metadata.labels.end()) v = it->second;
      if (!MatchesRequirement(r, v)) {
        ok = false;
        break;
      }
    }
    for (const kube::NodeSelectorRequirement& r : term.match_fields) {
      if (!ok) break;
      std::optional<std::string> v;
      if (r.key == "metadata.name") v = node.metadata.name;
      if (!MatchesRequirement(r, v)) ok = false;
    }
    if (ok) return true;
  }
  return false;
}

namespace {

bool MatchesAffinity(const kube::Pod& pod, const kube::Node& node) {
  return MatchesNodeSelectorTerms(pod.spec.required_node_affinity, node);
}

}  // namespace

bool NodeIsReady(const kube::Node& node) {
  for (const kube::Condition& c : node.conditions) {
    if (c.type == "Ready") return c.status == "True";
  }
  return false;
}

std::string ExclusionKey(const std::vector<const kube::Pod*>& pods) {
  std::string key;
  // Length-prefixed, so that no two different inputs give the same key.
  const auto add = [&key](std::string_view s) {
    key += std::to_string(s.size());
    key += ':';
    key += s;
  };
  const auto requirements = [&](const std::vector<kube::NodeSelectorRequirement>& rs) {
    add("r" + std::to_string(rs.size()));
    for (const kube::NodeSelectorRequirement& r : rs) {
      add(r.key);
      add(r.operator_);
      add("v" + std::to_string(r.values.size()));
      for (const std::string& v : r.values) add(v);
    }
  };
  for (const kube::Pod* pod : pods) {
    const kube::PodSpec& spec = pod->spec;
    add("t" + std::to_string(spec.tolerations.size()));
    for (const kube::Toleration& t : spec.tolerations) {
      add(t.key);
      add(t.operator_);
      add(t.value);
      add(t.effect);
    }
    add("s" + std::to_string(spec.node_selector.size()));
    for (const auto& [k, v] : spec.node_selector) {
      add(k);
      add(v);
    }
    add("a" + std::to_string(spec.required_node_affinity.size()));
    for (const kube::NodeSelectorTerm& term : spec.required_node_affinity) {
      requirements(term.match_expressions);
      requirements(term.match_fields);
    }
    Result<std::map<std::string, std::int64_t>> r = PodRequests(*pod);
    add(r ? "q" + std::to_string(r->size()) : "q!");
    if (r) {
      for (const auto& [name, n] : *r) {
        add(name);
        add(std::to_string(n));
      }
    }
    const std::vector<kube::HostPort> ports = HostPortsOf(*pod);
    add("p" + std::to_string(ports.size()));
    for (const kube::HostPort& p : ports) {
      add(std::to_string(p.port));
      add(p.protocol);
      add(p.host_ip);
    }
  }
  return key;
}

std::vector<kube::HostPort> HostPortsOf(const kube::Pod& pod) {
  std::vector<kube::HostPort> out;
  for (const kube::Container& c : pod.spec.containers) {
    out.insert(out.end(), c.host_ports.begin(), c.host_ports.end());
  }
  for (const kube::Container& c : pod.spec.init_containers) {
    if (c.restart_policy == "Always")
      out.insert(out.end(), c.host_ports.begin(), c.host_ports.end());
  }
  return out;
}

NodePorts PortsOf(const std::vector<const kube::Pod*>& pods) {
  NodePorts out;
  for (const kube::Pod* p : pods) {
    if (p->spec.node_name.empty()) continue;
    std::vector<kube::HostPort> ports = HostPortsOf(*p);
    if (ports.empty()) continue;
    std::vector<kube::HostPort>& on = out[p->spec.node_name];
    on.insert(on.end(), ports.begin(), ports.end());
  }
  return out;
}

bool PortsConflict(const kube::HostPort& a, const kube::HostPort& b) {
  const auto any = [](const std::string& ip) { return ip.empty() || ip == "0.0.0.0"; };
  const auto protocol = [](const std::string& p) { return p.empty() ? std::string("TCP") : p; };
  return a.port == b.port && protocol(a.protocol) == protocol(b.protocol) &&
         (any(a.host_ip) || any(b.host_ip) || a.host_ip == b.host_ip);
}

NodeUsage UsageOf(const std::vector<const kube::Pod*>& pods) {
  NodeUsage out;
  for (const kube::Pod* p : pods) {
    if (p->spec.node_name.empty()) continue;
    Result<std::map<std::string, std::int64_t>> r = PodRequests(*p);
    if (!r) continue;
    std::map<std::string, std::int64_t>& used = out[p->spec.node_name];
    for (const auto& [name, v] : *r) used[name] += v;
  }
  return out;
}

std::vector<Exclusion> ExcludedNodes(
    const std::vector<const kube::Pod*>& pods, const std::vector<std::string>& slurm_nodes,
    const std::map<std::string, const kube::Node*>& k8s_nodes_by_slurm_name,
    const NodeUsage* used_by_others, const NodePorts* ports_in_use,
    const std::set<std::string, std::less<>>* dra_resource_names) {
  std::vector<std::map<std::string, std::int64_t>> needs;
  for (const kube::Pod* pod : pods) {
    // Requests, as kube-scheduler's fit check: a limit above allocatable is legal.
    Result<std::map<std::string, std::int64_t>> r = PodRequests(*pod);
    needs.push_back(r ? std::move(*r) : std::map<std::string, std::int64_t>{});
  }
  std::vector<Exclusion> out;
  std::set<std::string> names(slurm_nodes.begin(), slurm_nodes.end());
  for (const std::string& slurm_name : names) {
    auto found = k8s_nodes_by_slurm_name.find(slurm_name);
    if (found == k8s_nodes_by_slurm_name.end() || found->second == nullptr) {
      out.push_back({slurm_name, "no Kubernetes node"});
      continue;
    }
    const kube::Node& node = *found->second;
    const std::map<std::string, std::int64_t>* used = nullptr;
    if (used_by_others != nullptr) {
      auto u = used_by_others->find(node.metadata.name);
      if (u != used_by_others->end()) used = &u->second;
    }
    std::string reason;
    if (node.unschedulable) {
      reason = "unschedulable";
    } else if (!NodeIsReady(node)) {
      reason = "not Ready";
    }
    for (std::size_t i = 0; reason.empty() && i < pods.size(); ++i) {
      const kube::Pod& pod = *pods[i];
      for (const kube::Taint& taint : node.taints) {
        if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
        if (taint.key == kManagedNodeTaint) continue;  // the bridge adds this toleration
        if (!Tolerates(pod.spec.tolerations, taint)) {
          reason = fmt::format("taint {}{}{}:{}", taint.key, taint.value.empty() ? "" : "=",
                               taint.value, taint.effect);
          break;
        }
      }
      if (reason.empty() && !MatchesNodeSelector(pod, node)) reason = "node selector";
      if (reason.empty() && !MatchesAffinity(pod, node)) reason = "node affinity";
      if (reason.empty() && ports_in_use != nullptr) {
        auto taken = ports_in_use->find(node.metadata.name);
        if (taken != ports_in_use->end()) {
          for (const kube::HostPort& want : HostPortsOf(pod)) {
            auto clash = std::ranges::find_if(
                taken->second, [&](const kube::HostPort& t) { return PortsConflict(want, t); });
            if (clash != taken->second.end()) {
              reason = fmt::format("host port {}/{} in use", want.protocol, want.port);
              break;
            }
          }
        }
      }
      if (!reason.empty()) break;
      for (const auto& [name, need] : needs[i]) {
        if (need <= 0) continue;
        auto a = node.allocatable.find(name);
        // A DRA device class's extended resource is no node's allocatable: Slurm counts the
        // devices (the profile's GRES), and the claim written at bind time names them.
        if (a == node.allocatable.end() &&
            (name.starts_with(kDraExtendedResourcePrefix) ||
             (dra_resource_names != nullptr && dra_resource_names->contains(name)))) {
          continue;
        }
        std::int64_t have = 0;
        if (a != node.allocatable.end()) {
          Result<std::int64_t> v = name == "cpu" ? kube::ParseQuantityMilli(a->second)
                                                 : kube::ParseQuantityValue(a->second);
          have = v ? *v : 0;
        }
        std::int64_t taken = 0;
        if (used != nullptr) {
          auto t = used->find(name);
          if (t != used->end()) taken = t->second;
        }
        if (have - taken < need) {
          reason = taken > 0 ? "insufficient " + name + " (other pods request some)"
                             : "insufficient " + name;
          break;
        }
      }
    }
    if (!reason.empty()) out.push_back({slurm_name, std::move(reason)});
  }
  return out;
}

}  // namespace sb::bridge
