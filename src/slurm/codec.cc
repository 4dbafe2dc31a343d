// SPDX-License-Identifier: Apache-2.0
#include "slurm/codec.h"

#include <charconv>
#include <cstdint>
#include <iterator>
#include <limits>
#include <string>

#include <simdjson.h>
#include <boost/json.hpp>

namespace sb::slurm {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// One parser per thread: its buffers are reused across replies (the client is loop-confined).
simdjson::dom::parser& Parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

Error Malformed(std::string_view json, std::string_view why) {
  std::string head(json.substr(0, 120));
  return Error{ErrorCode::kInternal,
               "malformed reply from slurmrestd (" + std::string(why) + "): " + head, 0};
}

std::string Str(const element& e) {
  std::string_view sv;
  if (e.get_string().get(sv) == simdjson::SUCCESS) {
    return std::string(sv);
  }
  return {};
}

std::string Str(const object& o, std::string_view key) {
  element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS) {
    return {};
  }
  return Str(e);
}

// Any integer-looking JSON value: int64, uint64 (clamped), double, a digit string ("42", as
// /jobs/state/ sends job_id), or a no-val struct's number.
std::int64_t Int(const element& e) {
  std::int64_t i = 0;
  if (e.get_int64().get(i) == simdjson::SUCCESS) {
    return i;
  }
  std::uint64_t u = 0;
  if (e.get_uint64().get(u) == simdjson::SUCCESS) {
    return u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
               ? std::numeric_limits<std::int64_t>::max()
               : static_cast<std::int64_t>(u);
  }
  double d = 0;
  if (e.get_double().get(d) == simdjson::SUCCESS) {
    // Clamped as above: converting a double outside int64 (1e19) is undefined behaviour.
    constexpr double kTwoTo63 = 9223372036854775808.0;
    if (d >= kTwoTo63) {
      return std::numeric_limits<std::int64_t>::max();
    }
    if (d < -kTwoTo63) {
      return std::numeric_limits<std::int64_t>::min();
    }
    return static_cast<std::int64_t>(d);
  }
  std::string_view sv;
  if (e.get_string().get(sv) == simdjson::SUCCESS) {
    std::from_chars(sv.data(), sv.data() + sv.size(), i);
    return i;
  }
  object o;
  if (e.get_object().get(o) == simdjson::SUCCESS) {
    element n;
    if (o.at_key("number").get(n) == simdjson::SUCCESS) {
      return Int(n);
    }
  }
  return 0;
}

std::int64_t Int(const object& o, std::string_view key) {
  element e;
  return o.at_key(key).get(e) == simdjson::SUCCESS ? Int(e) : 0;
}

bool Bool(const object& o, std::string_view key) {
  bool b = false;
  element e;
  if (o.at_key(key).get(e) == simdjson::SUCCESS && e.get_bool().get(b) == simdjson::SUCCESS) {
    return b;
  }
  return false;
}

// {"set":..,"infinite":..,"number":..}, or a bare number (older shapes).
NoValNumber NoVal(const object& o, std::string_view key) {
  element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS) {
    return {};
  }
  object nv;
  if (e.get_object().get(nv) == simdjson::SUCCESS) {
    NoValNumber n;
    n.set = Bool(nv, "set");
    n.infinite = Bool(nv, "infinite");
    n.number = Int(nv, "number");
    return n;
  }
  if (e.is_null()) {
    return {};
  }
  return NoValNumber::Of(Int(e));
}

// An array of strings, or a comma-separated string (Slurm's csv_string in some places).
std::vector<std::string> Strings(const object& o, std::string_view key) {
  std::vector<std::string> out;
  element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS) {
    return out;
  }
  array a;
  if (e.get_array().get(a) == simdjson::SUCCESS) {
    for (element item : a) {
      out.push_back(Str(item));
    }
    return out;
  }
  std::string_view sv;
  if (e.get_string().get(sv) == simdjson::SUCCESS) {
    while (!sv.empty()) {
      std::size_t comma = sv.find(',');
      std::string_view part = sv.substr(0, comma);
      if (!part.empty()) {
        out.emplace_back(part);
      }
      if (comma == std::string_view::npos) {
        break;
      }
      sv.remove_prefix(comma + 1);
    }
  }
  return out;
}

// Parses `json`, reads errors[] and warnings[], and hands the root object to `payload`.
template <typename T, typename F>
Result<Reply<T>> DecodeWith(std::string_view json, F&& payload) {
  element root;
  if (auto err = Parser().parse(json.data(), json.size()).get(root); err) {
    return tl::unexpected(Malformed(json, simdjson::error_message(err)));
  }
  object o;
  if (root.get_object().get(o) != simdjson::SUCCESS) {
    return tl::unexpected(Malformed(json, "not a JSON object"));
  }
  Reply<T> reply;
  array errs;
  if (o.at_key("errors").get(errs) == simdjson::SUCCESS) {
    for (element item : errs) {
      object eo;
      if (item.get_object().get(eo) != simdjson::SUCCESS) {
        continue;
      }
      reply.errors.push_back(ErrorDetail{static_cast<int>(Int(eo, "error_number")),
                                         Str(eo, "error"), Str(eo, "description"),
                                         Str(eo, "source")});
    }
  }
  array warns;
  if (o.at_key("warnings").get(warns) == simdjson::SUCCESS) {
    for (element item : warns) {
      object wo;
      if (item.get_object().get(wo) != simdjson::SUCCESS) {
        continue;
      }
      std::string w = Str(wo, "description");
      std::string src = Str(wo, "source");
      if (!src.empty()) {
        w += " (" + src + ")";
      }
      reply.warnings.push_back(std::move(w));
    }
  }
  if (auto why = payload(o, reply.value); !why.empty()) {
    return tl::unexpected(Malformed(json, why));
  }
  return reply;
}

// Decodes each object of array `key` with `one`. A missing key gives an empty list; a key of
// another type is malformed.
template <typename T, typename F>
std::string EachObject(const object& o, std::string_view key, std::vector<T>& out, F&& one) {
  element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS || e.is_null()) {
    return {};
  }
  array a;
  if (e.get_array().get(a) != simdjson::SUCCESS) {
    return std::string("\"") + std::string(key) + "\" is not an array";
  }
  out.reserve(a.size());
  for (element item : a) {
    object io;
    if (item.get_object().get(io) != simdjson::SUCCESS) {
      return std::string("an entry of \"") + std::string(key) + "\" is not an object";
    }
    out.push_back(one(io));
  }
  return {};
}

JobInfo DecodeJob(const object& j) {
  JobInfo job;
  job.job_id = Int(j, "job_id");
  job.name = Str(j, "name");
  job.job_state = Strings(j, "job_state");
  job.state_reason = Str(j, "state_reason");
  job.state_description = Str(j, "state_description");
  job.partition = Str(j, "partition");
  job.nodes = Str(j, "nodes");
  job.batch_host = Str(j, "batch_host");
  job.user_name = Str(j, "user_name");
  job.user_id = Int(j, "user_id");
  job.account = Str(j, "account");
  job.qos = Str(j, "qos");
  job.admin_comment = Str(j, "admin_comment");
  job.comment = Str(j, "comment");
  job.flags = Strings(j, "flags");
  job.tres_per_node = Str(j, "tres_per_node");
  job.tres_req_str = Str(j, "tres_req_str");
  job.tres_alloc_str = Str(j, "tres_alloc_str");
  job.gres_detail = Strings(j, "gres_detail");
  job.node_count = Int(j, "node_count");
  job.cpus = Int(j, "cpus");
  job.time_limit = NoVal(j, "time_limit");
  job.submit_time = NoVal(j, "submit_time");
  job.start_time = NoVal(j, "start_time");
  job.end_time = NoVal(j, "end_time");
  job.preempt_time = NoVal(j, "preempt_time");
  job.priority = NoVal(j, "priority");
  job.het_job_id = NoVal(j, "het_job_id").Value().value_or(0);
  job.het_job_offset = NoVal(j, "het_job_offset").Value().value_or(0);
  return job;
}

// ---- encoding -------------------------------------------------------------------------------

boost::json::object NoValJson(const NoValNumber& n) {
  return {{"set", n.set}, {"infinite", n.infinite}, {"number", n.number}};
}

boost::json::array StringArray(const std::vector<std::string>& v) {
  boost::json::array a;
  for (const auto& s : v) {
    a.emplace_back(s);
  }
  return a;
}

boost::json::object JobDescriptionJson(const JobDescription& j) {
  boost::json::object o;
  auto str = [&](std::string_view key, const std::string& v) {
    if (!v.empty()) {
      o[key] = v;
    }
  };
  auto num = [&](std::string_view key, const std::optional<std::int32_t>& v) {
    if (v) {
      o[key] = *v;
    }
  };
  auto noval = [&](std::string_view key, const NoValNumber& v) {
    if (v.set) {
      o[key] = NoValJson(v);
    }
  };
  auto strs = [&](std::string_view key, const std::vector<std::string>& v) {
    if (!v.empty()) {
      o[key] = StringArray(v);
    }
  };
  str("name", j.name);
  str("partition", j.partition);
  str("account", j.account);
  str("qos", j.qos);
  str("reservation", j.reservation);
  str("constraints", j.constraints);
  str("licenses", j.licenses);
  str("wckey", j.wckey);
  str("comment", j.comment);
  str("admin_comment", j.admin_comment);
  str("mcs_label", j.mcs_label);
  str("current_working_directory", j.current_working_directory);
  if (j.script) {
    o["script"] = *j.script;
  }
  strs("environment", j.environment);
  str("standard_output", j.standard_output);
  str("standard_error", j.standard_error);
  strs("flags", j.flags);
  str("nodes", j.nodes);
  num("minimum_nodes", j.minimum_nodes);
  num("maximum_nodes", j.maximum_nodes);
  num("tasks", j.tasks);
  num("tasks_per_node", j.tasks_per_node);
  num("cpus_per_task", j.cpus_per_task);
  noval("memory_per_node", j.memory_per_node);
  noval("time_limit", j.time_limit);
  noval("priority", j.priority);
  str("tres_per_node", j.tres_per_node);
  str("tres_per_job", j.tres_per_job);
  strs("required_nodes", j.required_nodes);
  strs("excluded_nodes", j.excluded_nodes);
  strs("shared", j.shared);
  str("user_id", j.user_id);
  str("group_id", j.group_id);
  if (j.hold) {
    o["hold"] = *j.hold;
  }
  for (const std::string& key : j.clear) {
    if (key == "excluded_nodes" || key == "required_nodes" || key == "flags" ||
        key == "environment" || key == "shared") {
      o[key] = boost::json::array{""};  // Slurm reads [] as "unchanged", [""] as "none"
    } else {
      o[key] = "";
    }
  }
  return o;
}

}  // namespace

Result<Reply<bool>> DecodeStatusOnly(std::string_view json) {
  return DecodeWith<bool>(json, [](const object&, bool& ok) {
    ok = true;
    return std::string();
  });
}

Result<Reply<JobSubmitResult>> DecodeSubmit(std::string_view json) {
  return DecodeWith<JobSubmitResult>(json, [](const object& o, JobSubmitResult& r) {
    r.job_id = Int(o, "job_id");
    r.step_id = Str(o, "step_id");
    r.job_submit_user_msg = Str(o, "job_submit_user_msg");
    return std::string();
  });
}

Result<Reply<std::vector<JobInfo>>> DecodeJobs(std::string_view json) {
  return DecodeWith<std::vector<JobInfo>>(json, [](const object& o, std::vector<JobInfo>& out) {
    return EachObject(o, "jobs", out, DecodeJob);
  });
}

Result<Reply<JobList>> DecodeJobList(std::string_view json) {
  return DecodeJobListRest(json, {}, 0);
}

Result<JobInfo> DecodeJobListEntry(std::string_view json) {
  element root;
  if (auto err = Parser().parse(json.data(), json.size()).get(root); err) {
    return tl::unexpected(Malformed(json, simdjson::error_message(err)));
  }
  object o;
  if (root.get_object().get(o) != simdjson::SUCCESS) {
    return tl::unexpected(Malformed(json, "an entry of \"jobs\" is not an object"));
  }
  return DecodeJob(o);
}

Result<Reply<JobList>> DecodeJobListRest(std::string_view json, std::vector<JobInfo> jobs,
                                         std::size_t entries) {
  Result<Reply<JobList>> r = DecodeWith<JobList>(json, [](const object& o, JobList& out) {
    out.last_update = NoVal(o, "last_update").Value().value_or(0);
    return EachObject(o, "jobs", out.jobs, DecodeJob);
  });
  if (!r) return r;
  const bool no_entries = r->value.jobs.empty() && entries == 0;
  std::move(jobs.begin(), jobs.end(), std::back_inserter(r->value.jobs));
  // "No change" is an empty list whose last_update is unset (0), with slurmctld's warning; a
  // cluster without jobs answers a set last_update. Decided on the list's entries, not on the
  // jobs kept of them: a list whose every job was filtered out did change.
  bool no_change_warning = false;
  for (const std::string& w : r->warnings) {
    no_change_warning = no_change_warning || w.starts_with("No job changes since");
  }
  r->value.unchanged = no_entries && (r->value.last_update == 0 || no_change_warning);
  if (r->value.unchanged) {
    r->value.last_update = 0;
    std::erase_if(r->warnings,
                  [](const std::string& w) { return w.starts_with("No job changes since"); });
  }
  return r;
}

Result<Reply<std::vector<JobStateEntry>>> DecodeJobStates(std::string_view json) {
  return DecodeWith<std::vector<JobStateEntry>>(
      json, [](const object& o, std::vector<JobStateEntry>& out) {
        return EachObject(o, "jobs", out, [](const object& j) {
          return JobStateEntry{Int(j, "job_id"), Strings(j, "state")};
        });
      });
}

Result<Reply<std::vector<NodeAllocation>>> DecodeResources(std::string_view json) {
  return DecodeWith<std::vector<NodeAllocation>>(
      json, [](const object& o, std::vector<NodeAllocation>& out) {
        return EachObject(o, "nodes", out, [](const object& n) {
          NodeAllocation a;
          a.node = Str(n, "node");
          a.sockets_per_node = Int(n, "sockets_per_node");
          a.cores_per_socket = Int(n, "cores_per_socket");
          a.mem_alloc = Int(n, "mem_alloc");
          a.core_bitmap = Str(n, "core_bitmap");
          EachObject(n, "gres", a.gres, [](const object& g) {
            return GresAllocation{Str(g, "name"), Str(g, "type"), Int(g, "count"), Str(g, "index")};
          });
          return a;
        });
      });
}

Result<Reply<std::vector<NodeInfo>>> DecodeNodes(std::string_view json) {
  return DecodeWith<std::vector<NodeInfo>>(json, [](const object& o, std::vector<NodeInfo>& out) {
    return EachObject(o, "nodes", out, [](const object& n) {
      NodeInfo node;
      node.name = Str(n, "name");
      node.state = Strings(n, "state");
      node.reason = Str(n, "reason");
      node.address = Str(n, "address");
      node.hostname = Str(n, "hostname");
      node.cpus = Int(n, "cpus");
      node.alloc_cpus = Int(n, "alloc_cpus");
      node.real_memory = Int(n, "real_memory");
      node.alloc_memory = Int(n, "alloc_memory");
      node.gres = Str(n, "gres");
      node.gres_used = Str(n, "gres_used");
      node.features = Strings(n, "features");
      node.active_features = Strings(n, "active_features");
      node.partitions = Strings(n, "partitions");
      node.tres = Str(n, "tres");
      node.comment = Str(n, "comment");
      node.topology = Str(n, "topology");
      return node;
    });
  });
}

Result<Reply<std::vector<PartitionInfo>>> DecodePartitions(std::string_view json) {
  return DecodeWith<std::vector<PartitionInfo>>(
      json, [](const object& o, std::vector<PartitionInfo>& out) {
        return EachObject(o, "partitions", out, [](const object& p) {
          PartitionInfo part;
          part.name = Str(p, "name");
          object sub;
          element e;
          if (p.at_key("nodes").get(e) == simdjson::SUCCESS &&
              e.get_object().get(sub) == simdjson::SUCCESS) {
            part.nodes = Str(sub, "configured");
            part.total_nodes = Int(sub, "total");
          }
          std::string oversubscribe;  // v0.0.45: partition.oversubscribe "NO", "FORCE:2", ...
          if (p.at_key("partition").get(e) == simdjson::SUCCESS &&
              e.get_object().get(sub) == simdjson::SUCCESS) {
            std::vector<std::string> states = Strings(sub, "state");
            part.state = states.empty() ? std::string() : states.front();
            oversubscribe = Str(sub, "oversubscribe");
          }
          if (p.at_key("cpus").get(e) == simdjson::SUCCESS &&
              e.get_object().get(sub) == simdjson::SUCCESS) {
            part.total_cpus = Int(sub, "total");
          }
          if (p.at_key("maximums").get(e) == simdjson::SUCCESS &&
              e.get_object().get(sub) == simdjson::SUCCESS) {
            part.max_time = NoVal(sub, "time");
            object over;
            if (sub.at_key("oversubscribe").get(e) == simdjson::SUCCESS &&
                e.get_object().get(over) == simdjson::SUCCESS) {
              part.oversubscribe_jobs = Int(over, "jobs");
              std::vector<std::string> flags = Strings(over, "flags");
              part.oversubscribe_force = std::ranges::find(flags, "force") != flags.end();
            }
          }
          // v0.0.45 reports maximums.oversubscribe as {jobs: 0} whatever the setting (measured on
          // 26.05) and the setting as a string instead: "EXCLUSIVE", "NO", "YES[:N]",
          // "FORCE[:N]" (N defaults to 4, as in slurm.conf).
          if (!oversubscribe.empty()) {
            const std::size_t colon = oversubscribe.find(':');
            const std::string word = oversubscribe.substr(0, colon);
            std::int64_t n = 4;
            if (colon != std::string::npos) {
              const std::string digits = oversubscribe.substr(colon + 1);
              auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
              if (ec != std::errc() || ptr != digits.data() + digits.size()) n = -1;
            }
            part.oversubscribe_force = word == "FORCE";
            part.oversubscribe_jobs = word == "EXCLUSIVE"                  ? 0
                                      : word == "NO"                       ? 1
                                      : (word == "YES" || word == "FORCE") ? n
                                                                           : -1;
          }
          return part;
        });
      });
}

Result<Reply<std::vector<ReservationInfo>>> DecodeReservations(std::string_view json) {
  return DecodeWith<std::vector<ReservationInfo>>(
      json, [](const object& o, std::vector<ReservationInfo>& out) {
        return EachObject(o, "reservations", out, [](const object& r) {
          ReservationInfo res;
          res.name = Str(r, "name");
          res.node_list = Str(r, "node_list");
          res.partition = Str(r, "partition");
          res.users = Strings(r, "users");
          res.flags = Strings(r, "flags");
          res.start_time = NoVal(r, "start_time");
          res.end_time = NoVal(r, "end_time");
          return res;
        });
      });
}

// {"set":..,"infinite":..,"number":<double>}, or a bare number; nullopt when unset or infinite.
std::optional<double> NoValDouble(const object& o, std::string_view key) {
  element e;
  if (o.at_key(key).get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
  object nv;
  if (e.get_object().get(nv) == simdjson::SUCCESS) {
    if (!Bool(nv, "set") || Bool(nv, "infinite")) return std::nullopt;
    if (nv.at_key("number").get(e) != simdjson::SUCCESS) return std::nullopt;
  }
  double d = 0;
  if (e.get_double().get(d) == simdjson::SUCCESS) return d;
  std::int64_t i = 0;
  if (e.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  return std::nullopt;
}

// {"shares":{"shares":[...],"total_shares":N}}.
Result<Reply<std::vector<Share>>> DecodeShares(std::string_view json) {
  return DecodeWith<std::vector<Share>>(json, [](const object& o, std::vector<Share>& out) {
    object inner;
    if (o.at_key("shares").get(inner) != simdjson::SUCCESS) return std::string();
    return EachObject(inner, "shares", out, [](const object& s) {
      Share share;
      share.name = Str(s, "name");
      share.account = Str(s, "parent");
      share.partition = Str(s, "partition");
      for (const std::string& t : Strings(s, "type")) share.user = share.user || t == "USER";
      object fs;
      if (s.at_key("fairshare").get(fs) == simdjson::SUCCESS) {
        share.fairshare = NoValDouble(fs, "factor");
      }
      share.effective_usage = NoValDouble(s, "effective_usage");
      return share;
    });
  });
}

Result<Reply<std::vector<PingResult>>> DecodePings(std::string_view json) {
  return DecodeWith<std::vector<PingResult>>(
      json, [](const object& o, std::vector<PingResult>& out) {
        return EachObject(o, "pings", out, [](const object& p) {
          PingResult r;
          r.hostname = Str(p, "hostname");
          r.responding = Bool(p, "responding");
          // v0.0.45 dropped "pinged"; derive it from "responding" there.
          r.pinged = Str(p, "pinged");
          if (r.pinged.empty()) {
            r.pinged = r.responding ? "UP" : "DOWN";
          }
          r.latency_us = Int(p, "latency");
          r.mode = Str(p, "mode");
          return r;
        });
      });
}

Result<Reply<bool>> DecodeCancel(std::string_view json) {
  // Per-job failures hide in status[].error; they are read in the same parse and lifted into
  // errors.
  auto failures = DecodeWith<std::vector<ErrorDetail>>(
      json, [](const object& o, std::vector<ErrorDetail>& out) {
        array status;
        if (o.at_key("status").get(status) != simdjson::SUCCESS) {
          return std::string();
        }
        for (element item : status) {
          object so;
          object eo;
          element err;
          if (item.get_object().get(so) != simdjson::SUCCESS ||
              so.at_key("error").get(err) != simdjson::SUCCESS ||
              err.get_object().get(eo) != simdjson::SUCCESS) {
            continue;
          }
          int code = static_cast<int>(Int(eo, "code"));
          if (code == 0) {
            continue;
          }
          out.push_back(ErrorDetail{code, Str(eo, "string"),
                                    "job " + Str(so, "step_id") + ": " + Str(eo, "message"),
                                    "kill_jobs"});
        }
        return std::string();
      });
  if (!failures) {
    return tl::unexpected(failures.error());
  }
  Reply<bool> reply{true, std::move(failures->errors), std::move(failures->warnings)};
  std::move(failures->value.begin(), failures->value.end(), std::back_inserter(reply.errors));
  return reply;
}

Result<std::vector<ApiVersion>> DecodeOpenApiVersions(std::string_view json) {
  element root;
  if (auto err = Parser().parse(json.data(), json.size()).get(root); err) {
    return tl::unexpected(Malformed(json, simdjson::error_message(err)));
  }
  object paths;
  if (root["paths"].get(paths) != simdjson::SUCCESS) {
    return tl::unexpected(Malformed(json, "no \"paths\" object"));
  }
  std::vector<ApiVersion> out;
  for (ApiVersion v : AllApiVersions()) {
    element ignored;
    std::string ping = "/slurm/" + std::string(ApiVersionName(v)) + "/ping/";
    if (paths.at_key(ping).get(ignored) == simdjson::SUCCESS) {
      out.push_back(v);
    }
  }
  return out;
}

std::string EncodeJobSubmit(const JobDescription& job) {
  return boost::json::serialize(boost::json::object{{"job", JobDescriptionJson(job)}});
}

std::string EncodeHetJobSubmit(const std::vector<JobDescription>& components) {
  boost::json::array jobs;
  for (const JobDescription& c : components) jobs.emplace_back(JobDescriptionJson(c));
  return boost::json::serialize(boost::json::object{{"jobs", std::move(jobs)}});
}

std::string EncodeJobDescription(const JobDescription& job) {
  return boost::json::serialize(JobDescriptionJson(job));
}

std::string EncodeNodeUpdate(const NodeUpdate& u) {
  boost::json::object o;
  if (!u.state.empty()) {
    o["state"] = StringArray(u.state);
  }
  if (!u.reason.empty()) {
    o["reason"] = u.reason;
  }
  if (u.features) {
    o["features"] = StringArray(*u.features);
  }
  if (u.features_act) {
    o["features_act"] = StringArray(*u.features_act);
  }
  if (!u.comment.empty()) {
    o["comment"] = u.comment;
  }
  if (u.topology_str) {
    o["topology_str"] = *u.topology_str;
  }
  return boost::json::serialize(o);
}

std::string EncodeNewNode(std::string_view node_conf) {
  return boost::json::serialize(boost::json::object{{"node_conf", node_conf}});
}

}  // namespace sb::slurm
