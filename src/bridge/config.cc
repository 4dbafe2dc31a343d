// SPDX-License-Identifier: Apache-2.0
#include "bridge/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "bridge/dra/profiles.h"

namespace sb::bridge {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

Error KeyError(std::string_view key, std::string_view what) {
  return Error{ErrorCode::kInvalidArgument, fmt::format("config key {}: {}", key, what)};
}

Result<std::string> Scalar(const YAML::Node& n, std::string_view key) {
  if (n.IsNull()) return std::string();
  if (!n.IsScalar()) return tl::unexpected(KeyError(key, "must be a string"));
  return n.Scalar();
}

Result<std::vector<std::string>> StringList(const YAML::Node& n, std::string_view key) {
  std::vector<std::string> out;
  if (n.IsNull()) return out;
  if (!n.IsSequence()) return tl::unexpected(KeyError(key, "must be a list of strings"));
  for (const YAML::Node& item : n) {
    if (!item.IsScalar()) return tl::unexpected(KeyError(key, "must be a list of strings"));
    out.push_back(item.Scalar());
  }
  return out;
}

Result<bool> Bool(const YAML::Node& n, std::string_view key) {
  Result<std::string> s = Scalar(n, key);
  if (!s) return tl::unexpected(s.error());
  std::string v = Lower(*s);
  if (v == "true") return true;
  if (v == "false" || v.empty()) return false;
  return tl::unexpected(KeyError(key, fmt::format("\"{}\" is not true or false", *s)));
}

Result<LabelSelector> ParseSelector(const YAML::Node& n, std::string_view key) {
  LabelSelector sel;
  if (n.IsNull()) return sel;
  if (!n.IsMap()) return tl::unexpected(KeyError(key, "must be a LabelSelector map"));
  for (const auto& kv : n) {
    std::string k = Lower(kv.first.Scalar());
    if (k == "matchlabels") {
      if (!kv.second.IsMap() && !kv.second.IsNull()) {
        return tl::unexpected(KeyError(key, "matchLabels must be a map"));
      }
      for (const auto& l : kv.second) {
        if (!l.second.IsScalar()) {
          return tl::unexpected(KeyError(key, "matchLabels values must be strings"));
        }
        sel.match_labels[l.first.Scalar()] = l.second.Scalar();
      }
    } else if (k == "matchexpressions") {
      if (!kv.second.IsSequence() && !kv.second.IsNull()) {
        return tl::unexpected(KeyError(key, "matchExpressions must be a list"));
      }
      for (const YAML::Node& e : kv.second) {
        if (!e.IsMap()) return tl::unexpected(KeyError(key, "matchExpressions entries are maps"));
        LabelSelectorRequirement r;
        for (const auto& f : e) {
          std::string fk = Lower(f.first.Scalar());
          if (fk == "key" && f.second.IsScalar()) {
            r.key = f.second.Scalar();
          } else if (fk == "operator" && f.second.IsScalar()) {
            r.operator_ = f.second.Scalar();
          } else if (fk == "values") {
            Result<std::vector<std::string>> v = StringList(f.second, key);
            if (!v) return tl::unexpected(v.error());
            r.values = std::move(*v);
          } else {
            return tl::unexpected(
                KeyError(key, fmt::format("unknown matchExpressions field {}", f.first.Scalar())));
          }
        }
        if (r.key.empty())
          return tl::unexpected(KeyError(key, "matchExpressions entry has no key"));
        if (r.operator_ != "In" && r.operator_ != "NotIn" && r.operator_ != "Exists" &&
            r.operator_ != "DoesNotExist") {
          return tl::unexpected(
              KeyError(key, fmt::format("operator \"{}\" is not In, NotIn, Exists or DoesNotExist",
                                        r.operator_)));
        }
        if ((r.operator_ == "In" || r.operator_ == "NotIn") && r.values.empty()) {
          return tl::unexpected(
              KeyError(key, fmt::format("operator {} needs values", r.operator_)));
        }
        sel.match_expressions.push_back(std::move(r));
      }
    } else {
      return tl::unexpected(KeyError(key, fmt::format("unknown field {}", kv.first.Scalar())));
    }
  }
  return sel;
}

// An integer in [lo, hi].
Result<int> Int(const YAML::Node& n, std::string_view key, int lo, int hi) {
  Result<std::string> s = Scalar(n, key);
  if (!s) return tl::unexpected(s.error());
  int v = 0;
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || p != s->data() + s->size() || v < lo || v > hi) {
    return tl::unexpected(KeyError(key, fmt::format("\"{}\" is not a number {}..{}", *s, lo, hi)));
  }
  return v;
}

Result<std::chrono::milliseconds> Duration(const YAML::Node& n, std::string_view key) {
  Result<std::string> s = Scalar(n, key);
  if (!s) return tl::unexpected(s.error());
  Result<std::chrono::milliseconds> d = ParseDuration(*s);
  if (!d) return tl::unexpected(KeyError(key, fmt::format("\"{}\" is not a duration", *s)));
  if (d->count() <= 0) return tl::unexpected(KeyError(key, "must be greater than zero"));
  return d;
}

Result<IdentityRule> ParseIdentityRule(const YAML::Node& n, std::string_view key) {
  IdentityRule r;
  if (!n.IsMap()) return tl::unexpected(KeyError(key, "entries must be maps"));
  bool has_namespaces = false;
  for (const auto& kv : n) {
    const std::string field = kv.first.Scalar();
    const std::string k = Lower(field);
    const std::string where = fmt::format("{}.{}", key, field);
    if (k == "namespaces") {
      Result<std::vector<std::string>> v = StringList(kv.second, where);
      if (!v) return tl::unexpected(v.error());
      r.namespaces = std::move(*v);
      has_namespaces = true;
    } else if (k == "user" || k == "group") {
      Result<std::string> v = Scalar(kv.second, where);
      if (!v) return tl::unexpected(v.error());
      (k == "user" ? r.user : r.group) = std::move(*v);
    } else if (k == "accounts" || k == "qos" || k == "partitions" || k == "reservations" ||
               k == "wckeys") {
      Result<std::vector<std::string>> v = StringList(kv.second, where);
      if (!v) return tl::unexpected(v.error());
      (k == "accounts"       ? r.accounts
       : k == "qos"          ? r.qos
       : k == "partitions"   ? r.partitions
       : k == "reservations" ? r.reservations
                             : r.wckeys) = std::move(*v);
    } else if (k == "maxpriority") {
      if (kv.second.IsNull()) continue;
      Result<int> v = Int(kv.second, where, 0, INT32_MAX);
      if (!v) return tl::unexpected(v.error());
      r.max_priority = *v;
    } else {
      return tl::unexpected(KeyError(key, fmt::format("unknown field {}", field)));
    }
  }
  if (!has_namespaces || r.namespaces.empty()) {
    return tl::unexpected(KeyError(key, "every entry needs a non-empty namespaces list"));
  }
  return r;
}

// One entry of deviceProfiles: name, driver, selector, backend {type, gresName, gresType,
// indexFrom}. Unknown fields are errors, as upstream's strict parse and identityPolicy's.
Result<DeviceProfile> ParseDeviceProfile(const YAML::Node& n, const std::string& key) {
  DeviceProfile p;
  if (!n.IsMap()) {
    return tl::unexpected(KeyError(key, "entries must be maps of name, driver, selector, backend"));
  }
  bool has_backend = false;
  for (const auto& kv : n) {
    const std::string field = kv.first.Scalar();
    const std::string k = Lower(field);
    const std::string where = fmt::format("{}.{}", key, field);
    if (k == "name" || k == "driver" || k == "selector") {
      Result<std::string> v = Scalar(kv.second, where);
      if (!v) return tl::unexpected(v.error());
      (k == "name" ? p.name : k == "driver" ? p.driver : p.selector) = std::move(*v);
    } else if (k == "backend") {
      if (!kv.second.IsMap()) {
        return tl::unexpected(KeyError(where,
                                       "must be a map with type (indexed-gres or "
                                       "core-bitmap)"));
      }
      has_backend = true;
      std::string type;
      for (const auto& b : kv.second) {
        const std::string bfield = b.first.Scalar();
        const std::string bk = Lower(bfield);
        const std::string bwhere = fmt::format("{}.{}", where, bfield);
        Result<std::string> v = Scalar(b.second, bwhere);
        if (!v) return tl::unexpected(v.error());
        if (bk == "type") {
          type = std::move(*v);
        } else if (bk == "gresname") {
          p.gres_name = std::move(*v);
        } else if (bk == "grestype") {
          p.gres_type = std::move(*v);
        } else if (bk == "indexfrom") {
          p.index_from = std::move(*v);
        } else {
          return tl::unexpected(KeyError(where, fmt::format("unknown field {}", bfield)));
        }
      }
      if (type == "indexed-gres") {
        p.backend = DeviceBackend::kIndexedGres;
      } else if (type == "core-bitmap") {
        p.backend = DeviceBackend::kCoreBitmap;
      } else {
        return tl::unexpected(
            KeyError(where, fmt::format("type \"{}\" is not indexed-gres or core-bitmap", type)));
      }
    } else {
      return tl::unexpected(KeyError(key, fmt::format("unknown field {}", field)));
    }
  }
  if (!has_backend) {
    return tl::unexpected(KeyError(key,
                                   "needs a backend ({type: indexed-gres, gresName: gpu} or "
                                   "{type: core-bitmap})"));
  }
  return p;
}

}  // namespace

std::vector<DeviceProfile> DefaultDeviceProfiles() {
  // The DeviceClasses of the drivers' own charts select this way (upstream 1.3's registry):
  // kubernetes-sigs/dra-driver-cpu, dra-example-driver v0.4.0, dra-driver-nvidia-gpu v0.4.0.
  return {
      {.name = "cpu",
       .driver = "dra.cpu",
       .selector = R"(device.driver == "dra.cpu")",
       .backend = DeviceBackend::kCoreBitmap},
      {.name = "gpu-example",
       .driver = "gpu.example.com",
       .selector = "device.driver == 'gpu.example.com'",
       .backend = DeviceBackend::kIndexedGres,
       .gres_name = "gpu"},
      {.name = "gpu-nvidia",
       .driver = "gpu.nvidia.com",
       .selector = "device.driver == 'gpu.nvidia.com' && "
                   "device.attributes['gpu.nvidia.com'].type == 'gpu'",
       .backend = DeviceBackend::kIndexedGres,
       .gres_name = "gpu"},
  };
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const LabelSelectorRequirement& r : match_expressions) {
    auto it = labels.find(r.key);
    bool in = it != labels.end() && std::ranges::find(r.values, it->second) != r.values.end();
    if (r.operator_ == "In" && !in) return false;
    if (r.operator_ == "NotIn" && in) return false;
    if (r.operator_ == "Exists" && it == labels.end()) return false;
    if (r.operator_ == "DoesNotExist" && it != labels.end()) return false;
  }
  return true;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return (MakeError(ErrorCode::kInvalidArgument, fmt::format("\"{}\" is not a duration", text)));
  };
  if (text.empty()) return bad();
  if (std::ranges::all_of(text, [](char c) { return c >= '0' && c <= '9'; })) {
    std::int64_t ms = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    if (ec != std::errc() || p != text.data() + text.size()) return bad();
    return std::chrono::milliseconds(ms);
  }
  double total_ms = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    std::size_t i = 0;
    while (i < rest.size() && ((rest[i] >= '0' && rest[i] <= '9') || rest[i] == '.')) ++i;
    if (i == 0) return bad();
    double value = 0;
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + i, value);
    if (ec != std::errc() || p != rest.data() + i) return bad();
    rest.remove_prefix(i);
    std::size_t j = 0;
    while (j < rest.size() && std::isalpha(static_cast<unsigned char>(rest[j]))) ++j;
    std::string_view unit = rest.substr(0, j);
    rest.remove_prefix(j);
    double scale = 0;
    if (unit == "ms") {
      scale = 1;
    } else if (unit == "s") {
      scale = 1000;
    } else if (unit == "m") {
      scale = 60'000;
    } else if (unit == "h") {
      scale = 3'600'000;
    } else {
      return bad();
    }
    total_ms += value * scale;
  }
  // As Go's time.ParseDuration, a duration beyond int64 is an error; converting it would be
  // undefined behaviour (found by fuzz/bridge_config_fuzz).
  if (!(total_ms + 0.5 < 9223372036854775808.0)) {
    return MakeError(ErrorCode::kInvalidArgument, fmt::format("duration \"{}\" is too long", text));
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(total_ms + 0.5));
}

Result<Config> ParseConfig(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return (
        MakeError(ErrorCode::kInvalidArgument, fmt::format("config is not YAML: {}", e.what())));
  }
  Config c;
  if (root.IsNull()) return c;
  if (!root.IsMap()) {
    return (MakeError(ErrorCode::kInvalidArgument, "config must be a YAML map"));
  }
  bool strict = false;               // strictConfig
  std::vector<std::string> unknown;  // keys no version of the bridge knows
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) {
      return (MakeError(ErrorCode::kInvalidArgument, "config keys must be strings"));
    }
    const std::string key = kv.first.Scalar();
    const std::string k = Lower(key);
    const YAML::Node& v = kv.second;
    auto set_string = [&](std::string& field) -> Result<void> {
      Result<std::string> s = Scalar(v, key);
      if (!s) return tl::unexpected(s.error());
      field = std::move(*s);
      return {};
    };
    Result<void> r;
    if (k == "schedulername") {
      r = set_string(c.scheduler_name);
      if (r && c.scheduler_name.empty()) r = tl::unexpected(KeyError(key, "must not be empty"));
    } else if (k == "slurmrestapi") {
      r = set_string(c.slurm_rest_api);
      if (r && !c.slurm_rest_api.empty() && !c.slurm_rest_api.starts_with("http://") &&
          !c.slurm_rest_api.starts_with("https://") && !c.slurm_rest_api.starts_with("unix://")) {
        r = tl::unexpected(KeyError(
            key,
            fmt::format("\"{}\" is not an http://, https:// or unix:// URL", c.slurm_rest_api)));
      }
    } else if (k == "partition") {
      r = set_string(c.partition);
    } else if (k == "mcslabel") {
      r = set_string(c.mcs_label);
    } else if (k == "managednamespaces") {
      Result<std::vector<std::string>> l = StringList(v, key);
      if (!l) return tl::unexpected(l.error());
      c.managed_namespaces = std::move(*l);
    } else if (k == "managednamespaceselector") {
      Result<LabelSelector> s = ParseSelector(v, key);
      if (!s) return tl::unexpected(s.error());
      c.managed_namespace_selector = std::move(*s);
      // Upstream: an empty selector ({}) counts as unset (the chart then uses the list).
      c.has_managed_namespace_selector = !c.managed_namespace_selector.Empty();
    } else if (k == "clustername") {
      r = set_string(c.cluster_name);
      if (r && c.cluster_name.empty()) r = tl::unexpected(KeyError(key, "must not be empty"));
    } else if (k == "slurmapiversion") {
      r = set_string(c.slurm_api_version);
      if (r && !c.slurm_api_version.empty() && c.slurm_api_version != "v0.0.42" &&
          c.slurm_api_version != "v0.0.43" && c.slurm_api_version != "v0.0.44" &&
          c.slurm_api_version != "v0.0.45") {
        r = tl::unexpected(KeyError(
            key, fmt::format("\"{}\" is not one of v0.0.42 .. v0.0.45", c.slurm_api_version)));
      }
    } else if (k == "slurmusername") {
      r = set_string(c.slurm_user_name);
    } else if (k == "slurmcafile") {
      r = set_string(c.slurm_ca_file);
    } else if (k == "slurminsecureskipverify" || k == "podslurmenv" ||
               k == "podnvidiavisibledevices") {
      Result<bool> b = Bool(v, key);
      if (!b) return tl::unexpected(b.error());
      (k == "podslurmenv"               ? c.pod_slurm_env
       : k == "podnvidiavisibledevices" ? c.pod_nvidia_visible_devices
                                        : c.slurm_insecure_skip_verify) = *b;
    } else if (k == "mcssharing") {
      Result<bool> b = Bool(v, key);
      if (!b) return tl::unexpected(b.error());
      c.mcs_sharing = *b;
    } else if (k == "nodesharing") {
      std::string sharing;
      r = set_string(sharing);
      if (r) {
        if (sharing.empty() || Lower(sharing) == "exclusive") {
          c.node_sharing = NodeSharing::kExclusive;
        } else if (Lower(sharing) == "coresident") {
          c.node_sharing = NodeSharing::kCoResident;
        } else {
          r = tl::unexpected(
              KeyError(key, fmt::format("\"{}\" is not \"exclusive\" or \"coResident\"", sharing)));
        }
      }
    } else if (k == "maxterminationgraceperiodseconds") {
      Result<int> n = Int(v, key, 0, INT32_MAX);
      if (!n) return tl::unexpected(n.error());
      c.max_termination_grace_seconds = *n;
    } else if (k == "jobmode" || k == "placeholder") {
      std::string mode;
      r = set_string(mode);
      if (r) {
        if (mode == "external" || mode.empty()) {
          c.job_mode = JobMode::kExternal;
        } else if (mode == "batch") {
          c.job_mode = JobMode::kBatch;
        } else {
          r = tl::unexpected(
              KeyError(key, fmt::format("\"{}\" is not \"external\" or \"batch\"", mode)));
        }
      }
    } else if (k == "slurmrequesttimeout") {
      Result<std::chrono::milliseconds> d = Duration(v, key);
      if (!d) return tl::unexpected(d.error());
      if (d->count() < 100) return tl::unexpected(KeyError(key, "must be at least 100ms"));
      c.slurm_request_timeout = *d;
    } else if (k == "jobpollinterval" || k == "joblistinterval" || k == "nodelistinterval" ||
               k == "jobsweepinterval" || k == "boundjobpollinterval" ||
               k == "pendingjobpollinterval") {
      Result<std::chrono::milliseconds> d = Duration(v, key);
      if (!d) return tl::unexpected(d.error());
      (k == "jobpollinterval"          ? c.job_poll_interval
       : k == "joblistinterval"        ? c.job_list_interval
       : k == "jobsweepinterval"       ? c.job_sweep_interval
       : k == "boundjobpollinterval"   ? c.bound_job_poll_interval
       : k == "pendingjobpollinterval" ? c.pending_job_poll_interval
                                       : c.node_list_interval) = *d;
    } else if (k == "defaulttimelimit") {
      Result<std::string> s = Scalar(v, key);
      if (!s) return tl::unexpected(s.error());
      if (s->empty() || *s == "0") {
        c.default_time_limit = std::chrono::minutes(0);  // none
      } else {
        Result<std::chrono::milliseconds> d = Duration(v, key);
        if (!d) return tl::unexpected(d.error());
        // Slurm counts whole minutes: rounded up, so that a limit is never shorter than asked.
        c.default_time_limit = std::chrono::ceil<std::chrono::minutes>(*d);
      }
    } else if (k == "clientqps") {
      Result<std::string> text = Scalar(v, key);
      if (!text) return tl::unexpected(text.error());
      double qps = -1;
      auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), qps);
      if (text->empty() || ec != std::errc() || p != text->data() + text->size() || qps < 0 ||
          qps > 1e6) {
        return tl::unexpected(KeyError(key, fmt::format("\"{}\" is not a rate (0 to 1000000; "
                                                        "0: no limit)",
                                                        *text)));
      }
      c.client_qps = qps;
    } else if (k == "clientburst") {
      Result<int> n = Int(v, key, 0, 1000000);
      if (!n) return tl::unexpected(n.error());
      c.client_burst = *n;
    } else if (k == "jobgonebrake" || k == "maxconcurrentsubmits") {
      const bool brake = k == "jobgonebrake";
      Result<int> n = Int(v, key, brake ? 0 : 1, brake ? 1000000 : 1024);
      if (!n) return tl::unexpected(n.error());
      (brake ? c.job_gone_brake : c.max_concurrent_submits) = *n;
    } else if (k == "identitypolicy") {
      if (!v.IsSequence() && !v.IsNull()) {
        return tl::unexpected(KeyError(key, "must be a list of rules"));
      }
      c.identity_policy.rules.clear();
      for (const YAML::Node& e : v) {
        Result<IdentityRule> rule =
            ParseIdentityRule(e, fmt::format("{}[{}]", key, c.identity_policy.rules.size()));
        if (!rule) return tl::unexpected(rule.error());
        c.identity_policy.rules.push_back(std::move(*rule));
      }
    } else if (k == "resourcetres") {
      if (!v.IsMap() && !v.IsNull()) {
        return tl::unexpected(KeyError(key, "must be a map of resource name to TRES"));
      }
      for (const auto& e : v) {
        if (!e.first.IsScalar() || !e.second.IsScalar()) {
          return tl::unexpected(KeyError(key, "must be a map of resource name to TRES"));
        }
        const std::string& tres = e.second.Scalar();
        if (!tres.empty() && tres.find('/') == std::string::npos) {
          return tl::unexpected(
              KeyError(key, fmt::format("{}: \"{}\" is not a TRES name like gres/gpu or license/x",
                                        e.first.Scalar(), tres)));
        }
        c.resource_tres[e.first.Scalar()] = tres;  // "" removes a default mapping
      }
      std::erase_if(c.resource_tres, [](const auto& p) { return p.second.empty(); });
    } else if (k == "deviceprofiles") {
      // Absent or null: the defaults; a list replaces them; []: none (DRA off).
      if (v.IsNull()) {
        c.device_profiles = DefaultDeviceProfiles();
      } else if (!v.IsSequence()) {
        return tl::unexpected(KeyError(key, "must be a list of device profiles"));
      } else {
        c.device_profiles.clear();
        for (const YAML::Node& e : v) {
          Result<DeviceProfile> p =
              ParseDeviceProfile(e, fmt::format("{}[{}]", key, c.device_profiles.size()));
          if (!p) return tl::unexpected(p.error());
          c.device_profiles.push_back(std::move(*p));
        }
        if (Result<void> ok = ValidateDeviceProfiles(c.device_profiles); !ok) {
          return tl::unexpected(KeyError(key, ok.error().message));
        }
      }
    } else if (k == "strictconfig") {
      Result<bool> b = Bool(v, key);
      if (!b) return tl::unexpected(b.error());
      strict = *b;
    } else {
      unknown.push_back(key);
      c.warnings.push_back(fmt::format("config key {} is unknown and ignored", key));
    }
    if (!r) return tl::unexpected(r.error());
  }
  // Upstream 1.3 parses its config strictly; here it is opt-in, so that a file with a key of a
  // newer version still loads unless the operator asks otherwise.
  if (strict && !unknown.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     fmt::format("unknown config key{} {} (strictConfig is true)",
                                 unknown.size() > 1 ? "s" : "", fmt::join(unknown, ", ")));
  }
  c.identity_policy.default_partition = c.partition;
  return c;
}

}  // namespace sb::bridge
