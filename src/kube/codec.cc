// SPDX-License-Identifier: Apache-2.0
#include "kube/codec.h"

#include <cstring>
#include <utility>
#include <vector>

#include <simdjson.h>
#include <boost/json.hpp>

namespace sb::kube {
namespace {

namespace od = simdjson::ondemand;
using simdjson::error_code;
using simdjson::SUCCESS;

#define SB_JSON_TRY(expr)                              \
  do {                                                 \
    if (error_code sb_e_ = (expr); sb_e_ != SUCCESS) { \
      return sb_e_;                                    \
    }                                                  \
  } while (0)

// The per-thread parser and padded input buffer, reused across calls.
struct Scratch {
  od::parser parser;
  std::vector<char> buffer;
};
Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

// Copies `json` into the padded scratch buffer and starts a document over it.
error_code Start(Scratch& s, std::string_view json, od::document& doc) {
  s.buffer.resize(json.size() + simdjson::SIMDJSON_PADDING);
  if (!json.empty()) {
    std::memcpy(s.buffer.data(), json.data(), json.size());
  }
  std::memset(s.buffer.data() + json.size(), 0, simdjson::SIMDJSON_PADDING);
  return s.parser.iterate(s.buffer.data(), json.size(), s.buffer.size()).get(doc);
}

template <typename T>
Error DecodeError(error_code e, const char* what) {
  return Error{ErrorCode::kInvalidArgument,
               std::string("decode ") + what + ": " + simdjson::error_message(e), 0};
}

bool IsNull(od::value& v) {
  od::json_type t;
  return !v.type().get(t) && t == od::json_type::null;
}

// Fields -------------------------------------------------------------------------------------

error_code ReadString(od::value v, std::string& out) {
  if (IsNull(v)) {
    out.clear();
    return SUCCESS;
  }
  std::string_view sv;
  SB_JSON_TRY(v.get_string().get(sv));
  out.assign(sv);
  return SUCCESS;
}

error_code ReadOptString(od::value v, std::optional<std::string>& out) {
  if (IsNull(v)) {
    out.reset();
    return SUCCESS;
  }
  std::string_view sv;
  SB_JSON_TRY(v.get_string().get(sv));
  out.emplace(sv);
  return SUCCESS;
}

error_code ReadInt64(od::value v, std::int64_t& out) {
  if (IsNull(v)) {
    out = 0;
    return SUCCESS;
  }
  return v.get_int64().get(out);
}

template <typename I>
error_code ReadOptInt(od::value v, std::optional<I>& out) {
  if (IsNull(v)) {
    out.reset();
    return SUCCESS;
  }
  std::int64_t x = 0;
  SB_JSON_TRY(v.get_int64().get(x));
  out = static_cast<I>(x);
  return SUCCESS;
}

error_code ReadInt32(od::value v, std::int32_t& out) {
  std::int64_t x = 0;
  SB_JSON_TRY(ReadInt64(v, x));
  out = static_cast<std::int32_t>(x);
  return SUCCESS;
}

error_code ReadBool(od::value v, bool& out) {
  if (IsNull(v)) {
    out = false;
    return SUCCESS;
  }
  return v.get_bool().get(out);
}

// Iterates the fields of object `v` (null is an empty object), calling fn(key, value) -> error.
template <typename Fn>
error_code ForEachField(od::value v, Fn&& fn) {
  if (IsNull(v)) {
    return SUCCESS;
  }
  od::object obj;
  SB_JSON_TRY(v.get_object().get(obj));
  for (auto field_result : obj) {
    od::field field;
    SB_JSON_TRY(std::move(field_result).get(field));
    std::string_view key;
    SB_JSON_TRY(field.unescaped_key().get(key));
    SB_JSON_TRY(fn(key, field.value()));
  }
  return SUCCESS;
}

template <typename Fn>
error_code ForEachElement(od::value v, Fn&& fn) {
  if (IsNull(v)) {
    return SUCCESS;
  }
  od::array arr;
  SB_JSON_TRY(v.get_array().get(arr));
  for (auto elem_result : arr) {
    od::value elem;
    SB_JSON_TRY(std::move(elem_result).get(elem));
    SB_JSON_TRY(fn(elem));
  }
  return SUCCESS;
}

error_code ReadStringMap(od::value v, StringMap& out) {
  out.clear();
  return ForEachField(v, [&](std::string_view key, od::value val) -> error_code {
    std::string s;
    SB_JSON_TRY(ReadString(val, s));
    out.emplace(std::string(key), std::move(s));
    return SUCCESS;
  });
}

// Quantities are JSON strings; a bare number (seen from hand-written clients) is kept as text.
error_code ReadResourceList(od::value v, ResourceList& out) {
  out.clear();
  return ForEachField(v, [&](std::string_view key, od::value val) -> error_code {
    od::json_type t;
    SB_JSON_TRY(val.type().get(t));
    std::string s;
    if (t == od::json_type::number) {
      std::string_view tok = val.raw_json_token();
      while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' ||
                              tok.back() == '\t')) {
        tok.remove_suffix(1);
      }
      s.assign(tok);
    } else {
      SB_JSON_TRY(ReadString(val, s));
    }
    out.emplace(std::string(key), std::move(s));
    return SUCCESS;
  });
}

error_code ReadStringList(od::value v, std::vector<std::string>& out) {
  out.clear();
  return ForEachElement(v, [&](od::value e) -> error_code {
    std::string s;
    SB_JSON_TRY(ReadString(e, s));
    out.push_back(std::move(s));
    return SUCCESS;
  });
}

// Objects ------------------------------------------------------------------------------------

error_code ReadOwnerRef(od::value v, OwnerReference& o) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "apiVersion") return ReadString(val, o.api_version);
    if (k == "kind") return ReadString(val, o.kind);
    if (k == "name") return ReadString(val, o.name);
    if (k == "uid") return ReadString(val, o.uid);
    if (k == "controller") return ReadBool(val, o.controller);
    if (k == "blockOwnerDeletion") return ReadBool(val, o.block_owner_deletion);
    return SUCCESS;
  });
}

error_code ReadMeta(od::value v, ObjectMeta& m) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "name") return ReadString(val, m.name);
    if (k == "namespace") return ReadString(val, m.namespace_);
    if (k == "uid") return ReadString(val, m.uid);
    if (k == "resourceVersion") return ReadString(val, m.resource_version);
    if (k == "generateName") return ReadString(val, m.generate_name);
    if (k == "generation") return ReadInt64(val, m.generation);
    if (k == "labels") return ReadStringMap(val, m.labels);
    if (k == "annotations") return ReadStringMap(val, m.annotations);
    if (k == "finalizers") return ReadStringList(val, m.finalizers);
    if (k == "creationTimestamp") return ReadString(val, m.creation_timestamp);
    if (k == "deletionTimestamp") return ReadString(val, m.deletion_timestamp);
    if (k == "deletionGracePeriodSeconds") {
      return ReadOptInt(val, m.deletion_grace_period_seconds);
    }
    if (k == "ownerReferences") {
      m.owner_references.clear();
      return ForEachElement(val, [&](od::value e) -> error_code {
        OwnerReference o;
        SB_JSON_TRY(ReadOwnerRef(e, o));
        m.owner_references.push_back(std::move(o));
        return SUCCESS;
      });
    }
    return SUCCESS;
  });
}

error_code ReadConditions(od::value v, std::vector<Condition>& out) {
  out.clear();
  return ForEachElement(v, [&](od::value e) -> error_code {
    Condition c;
    SB_JSON_TRY(ForEachField(e, [&](std::string_view k, od::value val) -> error_code {
      if (k == "type") return ReadString(val, c.type);
      if (k == "status") return ReadString(val, c.status);
      if (k == "reason") return ReadString(val, c.reason);
      if (k == "message") return ReadString(val, c.message);
      if (k == "lastTransitionTime") return ReadString(val, c.last_transition_time);
      return SUCCESS;
    }));
    out.push_back(std::move(c));
    return SUCCESS;
  });
}

error_code ReadResources(od::value v, ResourceRequirements& r) {
  return ForEachField(v, [&](std::string_view rk, od::value rv) -> error_code {
    if (rk == "requests") return ReadResourceList(rv, r.requests);
    if (rk == "limits") return ReadResourceList(rv, r.limits);
    return SUCCESS;
  });
}

// ports[]: only the entries that open a port on the node (hostPort > 0).
error_code ReadHostPorts(od::value v, std::vector<HostPort>& out) {
  out.clear();
  return ForEachElement(v, [&](od::value e) -> error_code {
    HostPort p;
    SB_JSON_TRY(ForEachField(e, [&](std::string_view k, od::value val) -> error_code {
      if (k == "hostPort") return ReadInt64(val, p.port);
      if (k == "containerPort") return ReadInt64(val, p.container_port);
      if (k == "protocol") return ReadString(val, p.protocol);
      if (k == "hostIP") return ReadString(val, p.host_ip);
      return SUCCESS;
    }));
    if (p.protocol.empty()) p.protocol = "TCP";
    if (p.port > 0) out.push_back(std::move(p));
    return SUCCESS;
  });
}

error_code ReadContainers(od::value v, std::vector<Container>& out) {
  out.clear();
  return ForEachElement(v, [&](od::value e) -> error_code {
    Container c;
    SB_JSON_TRY(ForEachField(e, [&](std::string_view k, od::value val) -> error_code {
      if (k == "name") return ReadString(val, c.name);
      if (k == "image") return ReadString(val, c.image);
      if (k == "resources") return ReadResources(val, c.resources);
      if (k == "restartPolicy") return ReadString(val, c.restart_policy);
      if (k == "ports") return ReadHostPorts(val, c.host_ports);
      return SUCCESS;
    }));
    out.push_back(std::move(c));
    return SUCCESS;
  });
}

error_code ReadRequirements(od::value v, std::vector<NodeSelectorRequirement>& out) {
  out.clear();
  return ForEachElement(v, [&](od::value e) -> error_code {
    NodeSelectorRequirement r;
    SB_JSON_TRY(ForEachField(e, [&](std::string_view k, od::value val) -> error_code {
      if (k == "key") return ReadString(val, r.key);
      if (k == "operator") return ReadString(val, r.operator_);
      if (k == "values") return ReadStringList(val, r.values);
      return SUCCESS;
    }));
    out.push_back(std::move(r));
    return SUCCESS;
  });
}

// A NodeSelector's nodeSelectorTerms list (appended to `out`).
error_code ReadNodeSelectorTerms(od::value terms, std::vector<NodeSelectorTerm>& out) {
  return ForEachElement(terms, [&](od::value t) -> error_code {
    NodeSelectorTerm term;
    SB_JSON_TRY(ForEachField(t, [&](std::string_view k, od::value val) -> error_code {
      if (k == "matchExpressions") return ReadRequirements(val, term.match_expressions);
      if (k == "matchFields") return ReadRequirements(val, term.match_fields);
      return SUCCESS;
    }));
    out.push_back(std::move(term));
    return SUCCESS;
  });
}

// affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms; of
// podAffinity and podAntiAffinity, only how many required terms they have.
error_code ReadAffinity(od::value v, PodSpec& s) {
  std::vector<NodeSelectorTerm>& out = s.required_node_affinity;
  out.clear();
  s.required_pod_affinity = s.required_pod_anti_affinity = 0;
  return ForEachField(v, [&](std::string_view k, od::value na) -> error_code {
    if (k == "podAffinity" || k == "podAntiAffinity") {
      std::size_t& count =
          k == "podAffinity" ? s.required_pod_affinity : s.required_pod_anti_affinity;
      return ForEachField(na, [&](std::string_view k2, od::value terms) -> error_code {
        if (k2 != "requiredDuringSchedulingIgnoredDuringExecution") return SUCCESS;
        return ForEachElement(terms, [&](od::value) -> error_code {
          ++count;
          return SUCCESS;
        });
      });
    }
    if (k != "nodeAffinity") return SUCCESS;
    return ForEachField(na, [&](std::string_view k2, od::value req) -> error_code {
      if (k2 != "requiredDuringSchedulingIgnoredDuringExecution") return SUCCESS;
      return ForEachField(req, [&](std::string_view k3, od::value terms) -> error_code {
        return k3 == "nodeSelectorTerms" ? ReadNodeSelectorTerms(terms, out) : SUCCESS;
      });
    });
  });
}

error_code ReadTolerations(od::value v, std::vector<Toleration>& out) {
  out.clear();
  return ForEachElement(v, [&](od::value e) -> error_code {
    Toleration t;
    SB_JSON_TRY(ForEachField(e, [&](std::string_view k, od::value val) -> error_code {
      if (k == "key") return ReadString(val, t.key);
      if (k == "operator") return ReadString(val, t.operator_);
      if (k == "value") return ReadString(val, t.value);
      if (k == "effect") return ReadString(val, t.effect);
      if (k == "tolerationSeconds") return ReadOptInt(val, t.toleration_seconds);
      return SUCCESS;
    }));
    out.push_back(std::move(t));
    return SUCCESS;
  });
}

error_code ReadPodSpec(od::value v, PodSpec& s) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "schedulerName") return ReadString(val, s.scheduler_name);
    if (k == "nodeName") return ReadString(val, s.node_name);
    if (k == "priority") return ReadOptInt(val, s.priority);
    if (k == "priorityClassName") return ReadString(val, s.priority_class_name);
    if (k == "containers") return ReadContainers(val, s.containers);
    if (k == "initContainers") return ReadContainers(val, s.init_containers);
    if (k == "tolerations") return ReadTolerations(val, s.tolerations);
    if (k == "nodeSelector") return ReadStringMap(val, s.node_selector);
    if (k == "affinity") return ReadAffinity(val, s);
    if (k == "overhead") return ReadResourceList(val, s.overhead);
    if (k == "resources") return ReadResources(val, s.resources);
    if (k == "schedulingGates") {
      s.scheduling_gates.clear();
      return ForEachElement(val, [&](od::value g) -> error_code {
        std::string name;
        SB_JSON_TRY(ForEachField(g, [&](std::string_view gk, od::value gv) -> error_code {
          return gk == "name" ? ReadString(gv, name) : SUCCESS;
        }));
        s.scheduling_gates.push_back(std::move(name));
        return SUCCESS;
      });
    }
    if (k == "resourceClaims") {
      s.resource_claims.clear();
      return ForEachElement(val, [&](od::value e) -> error_code {
        PodClaim c;
        SB_JSON_TRY(ForEachField(e, [&](std::string_view ck, od::value cv) -> error_code {
          if (ck == "name") return ReadString(cv, c.name);
          if (ck == "resourceClaimName") return ReadString(cv, c.resource_claim_name);
          if (ck == "resourceClaimTemplateName") {
            return ReadString(cv, c.resource_claim_template_name);
          }
          return SUCCESS;
        }));
        s.resource_claims.push_back(std::move(c));
        return SUCCESS;
      });
    }
    if (k == "volumes") {
      s.claim_volumes.clear();
      return ForEachElement(val, [&](od::value e) -> error_code {
        ClaimVolume vol;
        bool claim = false;
        SB_JSON_TRY(ForEachField(e, [&](std::string_view vk, od::value vv) -> error_code {
          if (vk == "name") return ReadString(vv, vol.name);
          if (vk == "persistentVolumeClaim") {
            claim = true;
            return ForEachField(vv, [&](std::string_view ck, od::value cv) -> error_code {
              return ck == "claimName" ? ReadString(cv, vol.claim_name) : SUCCESS;
            });
          }
          if (vk == "ephemeral") claim = vol.ephemeral = true;
          return SUCCESS;
        }));
        if (claim) s.claim_volumes.push_back(std::move(vol));
        return SUCCESS;
      });
    }
    if (k == "schedulingGroup") {
      s.scheduling_group.clear();
      return ForEachField(val, [&](std::string_view gk, od::value gv) -> error_code {
        return gk == "podGroupName" ? ReadString(gv, s.scheduling_group) : SUCCESS;
      });
    }
    return SUCCESS;
  });
}

error_code ReadObject(od::value v, Pod& p) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "metadata") return ReadMeta(val, p.metadata);
    if (k == "spec") return ReadPodSpec(val, p.spec);
    if (k == "status") {
      return ForEachField(val, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "phase") return ReadString(sv, p.status.phase);
        if (sk == "conditions") return ReadConditions(sv, p.status.conditions);
        if (sk == "reason") return ReadString(sv, p.status.reason);
        if (sk == "message") return ReadString(sv, p.status.message);
        if (sk == "nominatedNodeName") return ReadString(sv, p.status.nominated_node_name);
        if (sk == "resourceClaimStatuses") {
          p.status.resource_claim_statuses.clear();
          return ForEachElement(sv, [&](od::value e) -> error_code {
            std::string name;
            std::string claim;
            SB_JSON_TRY(ForEachField(e, [&](std::string_view ck, od::value cv) -> error_code {
              if (ck == "name") return ReadString(cv, name);
              if (ck == "resourceClaimName") return ReadString(cv, claim);
              return SUCCESS;
            }));
            if (!claim.empty()) p.status.resource_claim_statuses[name] = std::move(claim);
            return SUCCESS;
          });
        }
        return SUCCESS;
      });
    }
    return SUCCESS;
  });
}

error_code ReadObject(od::value v, Node& n) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "metadata") return ReadMeta(val, n.metadata);
    if (k == "spec") {
      return ForEachField(val, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "unschedulable") return ReadBool(sv, n.unschedulable);
        if (sk == "providerID") return ReadString(sv, n.provider_id);
        if (sk == "taints") {
          n.taints.clear();
          return ForEachElement(sv, [&](od::value e) -> error_code {
            Taint t;
            SB_JSON_TRY(ForEachField(e, [&](std::string_view tk, od::value tv) -> error_code {
              if (tk == "key") return ReadString(tv, t.key);
              if (tk == "value") return ReadString(tv, t.value);
              if (tk == "effect") return ReadString(tv, t.effect);
              if (tk == "timeAdded") return ReadString(tv, t.time_added);
              return SUCCESS;
            }));
            n.taints.push_back(std::move(t));
            return SUCCESS;
          });
        }
        return SUCCESS;
      });
    }
    if (k == "status") {
      return ForEachField(val, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "capacity") return ReadResourceList(sv, n.capacity);
        if (sk == "allocatable") return ReadResourceList(sv, n.allocatable);
        if (sk == "conditions") return ReadConditions(sv, n.conditions);
        if (sk == "addresses") {
          n.addresses.clear();
          return ForEachElement(sv, [&](od::value e) -> error_code {
            NodeAddress a;
            SB_JSON_TRY(ForEachField(e, [&](std::string_view ak, od::value av) -> error_code {
              if (ak == "type") return ReadString(av, a.type);
              if (ak == "address") return ReadString(av, a.address);
              return SUCCESS;
            }));
            n.addresses.push_back(std::move(a));
            return SUCCESS;
          });
        }
        return SUCCESS;
      });
    }
    return SUCCESS;
  });
}

error_code ReadObject(od::value v, Namespace& n) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "metadata") return ReadMeta(val, n.metadata);
    if (k == "status") {
      return ForEachField(val, [&](std::string_view sk, od::value sv) -> error_code {
        return sk == "phase" ? ReadString(sv, n.phase) : SUCCESS;
      });
    }
    return SUCCESS;
  });
}

error_code ReadObject(od::value v, Event& e) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "metadata") return ReadMeta(val, e.metadata);
    if (k == "involvedObject") {
      ObjectReference& r = e.involved_object;
      return ForEachField(val, [&](std::string_view rk, od::value rv) -> error_code {
        if (rk == "apiVersion") return ReadString(rv, r.api_version);
        if (rk == "kind") return ReadString(rv, r.kind);
        if (rk == "namespace") return ReadString(rv, r.namespace_);
        if (rk == "name") return ReadString(rv, r.name);
        if (rk == "uid") return ReadString(rv, r.uid);
        if (rk == "resourceVersion") return ReadString(rv, r.resource_version);
        if (rk == "fieldPath") return ReadString(rv, r.field_path);
        return SUCCESS;
      });
    }
    if (k == "reason") return ReadString(val, e.reason);
    if (k == "message") return ReadString(val, e.message);
    if (k == "type") return ReadString(val, e.type);
    if (k == "count") return ReadInt32(val, e.count);
    if (k == "firstTimestamp") return ReadString(val, e.first_timestamp);
    if (k == "lastTimestamp") return ReadString(val, e.last_timestamp);
    if (k == "reportingComponent") return ReadString(val, e.reporting_component);
    if (k == "reportingInstance") return ReadString(val, e.reporting_instance);
    if (k == "action") return ReadString(val, e.action);
    if (k == "source") {
      return ForEachField(val, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "component") return ReadString(sv, e.source_component);
        if (sk == "host") return ReadString(sv, e.source_host);
        return SUCCESS;
      });
    }
    return SUCCESS;
  });
}

error_code ReadObject(od::value v, Lease& l) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "metadata") return ReadMeta(val, l.metadata);
    if (k == "spec") {
      return ForEachField(val, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "holderIdentity") return ReadOptString(sv, l.holder_identity);
        if (sk == "leaseDurationSeconds") return ReadOptInt(sv, l.lease_duration_seconds);
        if (sk == "acquireTime") return ReadOptString(sv, l.acquire_time);
        if (sk == "renewTime") return ReadOptString(sv, l.renew_time);
        if (sk == "leaseTransitions") return ReadOptInt(sv, l.lease_transitions);
        return SUCCESS;
      });
    }
    return SUCCESS;
  });
}

error_code ReadObject(od::value v, Job& j) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "metadata") return ReadMeta(val, j.metadata);
    if (k == "spec") {
      return ForEachField(val, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "parallelism") return ReadOptInt(sv, j.parallelism);
        if (sk == "completions") return ReadOptInt(sv, j.completions);
        if (sk == "backoffLimit") return ReadOptInt(sv, j.backoff_limit);
        if (sk == "completionMode") return ReadString(sv, j.completion_mode);
        if (sk == "suspend") {
          if (IsNull(sv)) {
            j.suspend.reset();
            return SUCCESS;
          }
          bool b = false;
          SB_JSON_TRY(sv.get_bool().get(b));
          j.suspend = b;
          return SUCCESS;
        }
        if (sk == "template") {
          return ForEachField(sv, [&](std::string_view tk, od::value tv) -> error_code {
            if (tk == "spec") return ReadPodSpec(tv, j.template_spec);
            if (tk == "metadata") {
              ObjectMeta m;
              SB_JSON_TRY(ReadMeta(tv, m));
              j.template_labels = std::move(m.labels);
              j.template_annotations = std::move(m.annotations);
            }
            return SUCCESS;
          });
        }
        return SUCCESS;
      });
    }
    if (k == "status") {
      return ForEachField(val, [&](std::string_view sk, od::value sv) -> error_code {
        if (sk == "active") return ReadInt32(sv, j.active);
        if (sk == "succeeded") return ReadInt32(sv, j.succeeded);
        if (sk == "failed") return ReadInt32(sv, j.failed);
        if (sk == "conditions") return ReadConditions(sv, j.conditions);
        return SUCCESS;
      });
    }
    return SUCCESS;
  });
}

// The raw JSON text of any value; objects and arrays whole.
error_code RawJson(od::value v, std::string& out) {
  od::json_type t;
  SB_JSON_TRY(v.type().get(t));
  std::string_view sv;
  if (t == od::json_type::object) {
    od::object o;
    SB_JSON_TRY(v.get_object().get(o));
    SB_JSON_TRY(o.raw_json().get(sv));
  } else if (t == od::json_type::array) {
    od::array a;
    SB_JSON_TRY(v.get_array().get(a));
    SB_JSON_TRY(a.raw_json().get(sv));
  } else {
    sv = v.raw_json_token();
    while (!sv.empty() && (sv.back() == ' ' || sv.back() == '\n' || sv.back() == '\r' ||
                           sv.back() == '\t' || sv.back() == ',')) {
      sv.remove_suffix(1);
    }
  }
  out.assign(sv);
  return SUCCESS;
}

error_code ReadObject(od::value v, GenericObject& g) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "apiVersion") return ReadString(val, g.api_version);
    if (k == "kind") return ReadString(val, g.kind);
    if (k == "metadata") return ReadMeta(val, g.metadata);
    if (k == "spec") return IsNull(val) ? SUCCESS : RawJson(val, g.spec_json);
    if (k == "status") return IsNull(val) ? SUCCESS : RawJson(val, g.status_json);
    return SUCCESS;
  });
}

error_code ReadObject(od::value v, Status& s) {
  return ForEachField(v, [&](std::string_view k, od::value val) -> error_code {
    if (k == "status") return ReadString(val, s.status);
    if (k == "message") return ReadString(val, s.message);
    if (k == "reason") return ReadString(val, s.reason);
    if (k == "code") return ReadInt32(val, s.code);
    return SUCCESS;
  });
}

template <typename T>
constexpr const char* TypeName() {
  if constexpr (std::is_same_v<T, Pod>) return "Pod";
  if constexpr (std::is_same_v<T, Node>) return "Node";
  if constexpr (std::is_same_v<T, Namespace>) return "Namespace";
  if constexpr (std::is_same_v<T, Event>) return "Event";
  if constexpr (std::is_same_v<T, Lease>) return "Lease";
  if constexpr (std::is_same_v<T, Job>) return "Job";
  if constexpr (std::is_same_v<T, GenericObject>) return "object";
  if constexpr (std::is_same_v<T, Status>) return "Status";
  return "object";
}

// Runs fn(od::value root) over `json`, requiring the whole document be consumed validly.
template <typename Fn>
error_code WithDocument(std::string_view json, Fn&& fn) {
  Scratch& s = ThreadScratch();
  od::document doc;
  SB_JSON_TRY(Start(s, json, doc));
  od::value root;
  SB_JSON_TRY(doc.get_value().get(root));
  SB_JSON_TRY(fn(root));
  // Anything after the root value is an error (On Demand does not look there by itself).
  const char* rest = nullptr;
  if (!doc.current_location().get(rest)) {
    return simdjson::TRAILING_CONTENT;
  }
  return SUCCESS;
}

}  // namespace

template <typename T>
Result<T> Decode(std::string_view json) {
  T out;
  if (error_code e = WithDocument(json, [&](od::value root) { return ReadObject(root, out); })) {
    return tl::unexpected(DecodeError<T>(e, TypeName<T>()));
  }
  return out;
}

template <typename T>
Result<List<T>> DecodeList(std::string_view json) {
  List<T> out;
  error_code e = WithDocument(json, [&](od::value root) {
    return ForEachField(root, [&](std::string_view k, od::value val) -> error_code {
      if (k == "metadata") {
        return ForEachField(val, [&](std::string_view mk, od::value mv) -> error_code {
          if (mk == "resourceVersion") return ReadString(mv, out.resource_version);
          if (mk == "continue") return ReadString(mv, out.continue_token);
          if (mk == "remainingItemCount") return ReadOptInt(mv, out.remaining_item_count);
          return SUCCESS;
        });
      }
      if (k == "items") {
        return ForEachElement(val, [&](od::value item) -> error_code {
          T obj;
          SB_JSON_TRY(ReadObject(item, obj));
          out.items.push_back(std::move(obj));
          return SUCCESS;
        });
      }
      return SUCCESS;
    });
  });
  if (e) {
    return tl::unexpected(DecodeError<T>(e, (std::string(TypeName<T>()) + " list").c_str()));
  }
  return out;
}

template <typename T>
Result<WatchEvent<T>> DecodeWatchEvent(std::string_view json) {
  WatchEvent<T> out;
  std::string type;
  std::string deferred;  // the object, when it came before the type
  bool have_object = false;
  error_code e = WithDocument(json, [&](od::value root) {
    return ForEachField(root, [&](std::string_view k, od::value val) -> error_code {
      if (k == "type") return ReadString(val, type);
      if (k == "object") {
        have_object = true;
        if (type.empty()) {
          return RawJson(val, deferred);
        }
        if (type == "ERROR") return ReadObject(val, out.status);
        return ReadObject(val, out.object);
      }
      return SUCCESS;
    });
  });
  if (!e && !deferred.empty()) {
    e = WithDocument(deferred, [&](od::value root) {
      return type == "ERROR" ? ReadObject(root, out.status) : ReadObject(root, out.object);
    });
  }
  if (e) {
    return tl::unexpected(DecodeError<T>(e, "watch event"));
  }
  if (type == "ADDED") {
    out.type = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    out.type = WatchEventType::kModified;
  } else if (type == "DELETED") {
    out.type = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    out.type = WatchEventType::kBookmark;
  } else if (type == "ERROR") {
    out.type = WatchEventType::kError;
  } else {
    return MakeError(ErrorCode::kInvalidArgument,
                     "decode watch event: unknown type \"" + type + "\"");
  }
  if (!have_object) {
    return MakeError(ErrorCode::kInvalidArgument, "decode watch event: no object");
  }
  return out;
}

#define SB_INSTANTIATE(T)                                   \
  template Result<T> Decode<T>(std::string_view);           \
  template Result<List<T>> DecodeList<T>(std::string_view); \
  template Result<WatchEvent<T>> DecodeWatchEvent<T>(std::string_view);
SB_INSTANTIATE(Pod)
SB_INSTANTIATE(Node)
SB_INSTANTIATE(Namespace)
SB_INSTANTIATE(Event)
SB_INSTANTIATE(Lease)
SB_INSTANTIATE(Job)
SB_INSTANTIATE(GenericObject)
#undef SB_INSTANTIATE
template Result<Status> Decode<Status>(std::string_view);

// JSON pointer access -------------------------------------------------------------------------

namespace {
template <typename Fn>
Result<std::string> AtPointer(std::string_view json, std::string_view pointer, Fn&& fn) {
  if (pointer.empty()) {
    // "" names the document itself, which On Demand reads through the document, not as a value:
    // a value's getters on the root break simdjson's assumptions (undefined behaviour, found by
    // fuzz/kube_codec_fuzz).
    return MakeError(ErrorCode::kInvalidArgument, "the empty JSON pointer is not supported");
  }
  Scratch& s = ThreadScratch();
  od::document doc;
  std::string out;
  error_code e = Start(s, json, doc);
  od::value v;
  if (!e) {
    e = doc.at_pointer(pointer).get(v);
  }
  if (e == simdjson::NO_SUCH_FIELD || e == simdjson::INDEX_OUT_OF_BOUNDS) {
    return MakeError(ErrorCode::kNotFound, "no value at " + std::string(pointer));
  }
  if (!e) {
    e = fn(v, out);
  }
  if (e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "at " + std::string(pointer) + ": " + simdjson::error_message(e));
  }
  return out;
}
}  // namespace

Result<std::string> JsonStringAt(std::string_view json, std::string_view pointer) {
  return AtPointer(json, pointer, [](od::value v, std::string& out) {
    std::string_view sv;
    SB_JSON_TRY(v.get_string().get(sv));
    out.assign(sv);
    return SUCCESS;
  });
}

Result<std::int64_t> JsonIntAt(std::string_view json, std::string_view pointer) {
  std::int64_t x = 0;
  auto r =
      AtPointer(json, pointer, [&](od::value v, std::string&) { return v.get_int64().get(x); });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return x;
}

Result<bool> JsonBoolAt(std::string_view json, std::string_view pointer) {
  bool b = false;
  auto r = AtPointer(json, pointer, [&](od::value v, std::string&) { return v.get_bool().get(b); });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return b;
}

Result<std::string> JsonRawAt(std::string_view json, std::string_view pointer) {
  return AtPointer(json, pointer, [](od::value v, std::string& out) { return RawJson(v, out); });
}

Result<std::vector<NodeSelectorTerm>> JsonNodeSelectorTermsAt(std::string_view json,
                                                              std::string_view pointer) {
  std::vector<NodeSelectorTerm> terms;
  auto r = AtPointer(json, pointer,
                     [&](od::value v, std::string&) { return ReadNodeSelectorTerms(v, terms); });
  if (!r) {
    return tl::unexpected(r.error());
  }
  return terms;
}

// Encoding ----------------------------------------------------------------------------------

namespace {
namespace bj = boost::json;

void PutIf(bj::object& o, std::string_view key, const std::string& v) {
  if (!v.empty()) {
    o[key] = v;
  }
}

bj::object StringMapJson(const StringMap& m) {
  bj::object o;
  for (const auto& [k, v] : m) {
    o[k] = v;
  }
  return o;
}

bj::object MetaJson(const ObjectMeta& m) {
  bj::object o;
  PutIf(o, "name", m.name);
  PutIf(o, "generateName", m.generate_name);
  PutIf(o, "namespace", m.namespace_);
  PutIf(o, "uid", m.uid);
  PutIf(o, "resourceVersion", m.resource_version);
  if (m.generation != 0) o["generation"] = m.generation;
  PutIf(o, "creationTimestamp", m.creation_timestamp);
  PutIf(o, "deletionTimestamp", m.deletion_timestamp);
  if (m.deletion_grace_period_seconds) {
    o["deletionGracePeriodSeconds"] = *m.deletion_grace_period_seconds;
  }
  if (!m.labels.empty()) o["labels"] = StringMapJson(m.labels);
  if (!m.annotations.empty()) o["annotations"] = StringMapJson(m.annotations);
  if (!m.finalizers.empty()) {
    bj::array a;
    for (const auto& f : m.finalizers) a.emplace_back(f);
    o["finalizers"] = std::move(a);
  }
  if (!m.owner_references.empty()) {
    bj::array a;
    for (const auto& r : m.owner_references) {
      bj::object ro;
      ro["apiVersion"] = r.api_version;
      ro["kind"] = r.kind;
      ro["name"] = r.name;
      ro["uid"] = r.uid;
      if (r.controller) ro["controller"] = true;
      if (r.block_owner_deletion) ro["blockOwnerDeletion"] = true;
      a.emplace_back(std::move(ro));
    }
    o["ownerReferences"] = std::move(a);
  }
  return o;
}

bj::array ConditionsJson(const std::vector<Condition>& cs) {
  bj::array a;
  for (const auto& c : cs) {
    bj::object o;
    o["type"] = c.type;
    o["status"] = c.status;
    PutIf(o, "reason", c.reason);
    PutIf(o, "message", c.message);
    PutIf(o, "lastTransitionTime", c.last_transition_time);
    a.emplace_back(std::move(o));
  }
  return a;
}

bj::array ContainersJson(const std::vector<Container>& cs) {
  bj::array a;
  for (const auto& c : cs) {
    bj::object o;
    o["name"] = c.name;
    PutIf(o, "image", c.image);
    PutIf(o, "restartPolicy", c.restart_policy);
    if (!c.host_ports.empty()) {
      bj::array ports;
      for (const HostPort& p : c.host_ports) {
        bj::object po{
            {"containerPort", p.container_port}, {"hostPort", p.port}, {"protocol", p.protocol}};
        PutIf(po, "hostIP", p.host_ip);
        ports.emplace_back(std::move(po));
      }
      o["ports"] = std::move(ports);
    }
    bj::object res;
    if (!c.resources.requests.empty()) res["requests"] = StringMapJson(c.resources.requests);
    if (!c.resources.limits.empty()) res["limits"] = StringMapJson(c.resources.limits);
    if (!res.empty()) o["resources"] = std::move(res);
    a.emplace_back(std::move(o));
  }
  return a;
}

bj::array RequirementsJson(const std::vector<NodeSelectorRequirement>& rs) {
  bj::array a;
  for (const auto& r : rs) {
    bj::object o;
    o["key"] = r.key;
    o["operator"] = r.operator_;
    if (!r.values.empty()) {
      bj::array v;
      for (const auto& s : r.values) v.emplace_back(s);
      o["values"] = std::move(v);
    }
    a.emplace_back(std::move(o));
  }
  return a;
}

bj::object PodSpecJson(const PodSpec& s) {
  bj::object o;
  PutIf(o, "schedulerName", s.scheduler_name);
  PutIf(o, "nodeName", s.node_name);
  if (s.priority) o["priority"] = *s.priority;
  PutIf(o, "priorityClassName", s.priority_class_name);
  o["containers"] = ContainersJson(s.containers);
  if (!s.init_containers.empty()) o["initContainers"] = ContainersJson(s.init_containers);
  if (!s.tolerations.empty()) {
    bj::array a;
    for (const auto& t : s.tolerations) {
      bj::object to;
      PutIf(to, "key", t.key);
      PutIf(to, "operator", t.operator_);
      PutIf(to, "value", t.value);
      PutIf(to, "effect", t.effect);
      if (t.toleration_seconds) to["tolerationSeconds"] = *t.toleration_seconds;
      a.emplace_back(std::move(to));
    }
    o["tolerations"] = std::move(a);
  }
  if (!s.node_selector.empty()) o["nodeSelector"] = StringMapJson(s.node_selector);
  if (!s.required_node_affinity.empty()) {
    bj::array terms;
    for (const auto& t : s.required_node_affinity) {
      bj::object to;
      if (!t.match_expressions.empty())
        to["matchExpressions"] = RequirementsJson(t.match_expressions);
      if (!t.match_fields.empty()) to["matchFields"] = RequirementsJson(t.match_fields);
      terms.emplace_back(std::move(to));
    }
    o["affinity"] = {{"nodeAffinity",
                      {{"requiredDuringSchedulingIgnoredDuringExecution",
                        {{"nodeSelectorTerms", std::move(terms)}}}}}};
  }
  if (!s.overhead.empty()) o["overhead"] = StringMapJson(s.overhead);
  if (!s.scheduling_group.empty()) {
    o["schedulingGroup"] = {{"podGroupName", s.scheduling_group}};
  }
  if (!s.claim_volumes.empty()) {
    bj::array vols;
    for (const ClaimVolume& v : s.claim_volumes) {
      bj::object vo{{"name", v.name}};
      if (v.ephemeral) {
        vo["ephemeral"] = bj::object{};
      } else {
        vo["persistentVolumeClaim"] = {{"claimName", v.claim_name}};
      }
      vols.emplace_back(std::move(vo));
    }
    o["volumes"] = std::move(vols);
  }
  if (!s.resources.requests.empty() || !s.resources.limits.empty()) {
    bj::object res;
    if (!s.resources.requests.empty()) res["requests"] = StringMapJson(s.resources.requests);
    if (!s.resources.limits.empty()) res["limits"] = StringMapJson(s.resources.limits);
    o["resources"] = std::move(res);
  }
  return o;
}

std::string Envelope(const char* api_version, const char* kind, bj::object body) {
  body["apiVersion"] = api_version;
  body["kind"] = kind;
  return bj::serialize(body);
}
}  // namespace

std::string Encode(const Pod& pod) {
  bj::object o;
  o["metadata"] = MetaJson(pod.metadata);
  o["spec"] = PodSpecJson(pod.spec);
  bj::object st;
  PutIf(st, "phase", pod.status.phase);
  if (!pod.status.conditions.empty()) st["conditions"] = ConditionsJson(pod.status.conditions);
  PutIf(st, "reason", pod.status.reason);
  PutIf(st, "message", pod.status.message);
  PutIf(st, "nominatedNodeName", pod.status.nominated_node_name);
  if (!st.empty()) o["status"] = std::move(st);
  return Envelope("v1", "Pod", std::move(o));
}

std::string Encode(const Node& node) {
  bj::object o;
  o["metadata"] = MetaJson(node.metadata);
  bj::object spec;
  if (node.unschedulable) spec["unschedulable"] = true;
  PutIf(spec, "providerID", node.provider_id);
  if (!node.taints.empty()) {
    bj::array a;
    for (const auto& t : node.taints) {
      bj::object to;
      to["key"] = t.key;
      PutIf(to, "value", t.value);
      to["effect"] = t.effect;
      PutIf(to, "timeAdded", t.time_added);
      a.emplace_back(std::move(to));
    }
    spec["taints"] = std::move(a);
  }
  o["spec"] = std::move(spec);
  bj::object st;
  if (!node.capacity.empty()) st["capacity"] = StringMapJson(node.capacity);
  if (!node.allocatable.empty()) st["allocatable"] = StringMapJson(node.allocatable);
  if (!node.conditions.empty()) st["conditions"] = ConditionsJson(node.conditions);
  if (!node.addresses.empty()) {
    bj::array a;
    for (const auto& addr : node.addresses) {
      a.emplace_back(bj::object{{"type", addr.type}, {"address", addr.address}});
    }
    st["addresses"] = std::move(a);
  }
  if (!st.empty()) o["status"] = std::move(st);
  return Envelope("v1", "Node", std::move(o));
}

std::string Encode(const Namespace& ns) {
  bj::object o;
  o["metadata"] = MetaJson(ns.metadata);
  return Envelope("v1", "Namespace", std::move(o));
}

std::string Encode(const Event& e) {
  bj::object o;
  o["metadata"] = MetaJson(e.metadata);
  bj::object r;
  PutIf(r, "apiVersion", e.involved_object.api_version);
  PutIf(r, "kind", e.involved_object.kind);
  PutIf(r, "namespace", e.involved_object.namespace_);
  PutIf(r, "name", e.involved_object.name);
  PutIf(r, "uid", e.involved_object.uid);
  PutIf(r, "resourceVersion", e.involved_object.resource_version);
  PutIf(r, "fieldPath", e.involved_object.field_path);
  o["involvedObject"] = std::move(r);
  PutIf(o, "reason", e.reason);
  PutIf(o, "message", e.message);
  PutIf(o, "type", e.type);
  if (e.count != 0) o["count"] = e.count;
  PutIf(o, "firstTimestamp", e.first_timestamp);
  PutIf(o, "lastTimestamp", e.last_timestamp);
  PutIf(o, "reportingComponent", e.reporting_component);
  PutIf(o, "reportingInstance", e.reporting_instance);
  PutIf(o, "action", e.action);
  bj::object src;
  PutIf(src, "component", e.source_component);
  PutIf(src, "host", e.source_host);
  if (!src.empty()) o["source"] = std::move(src);
  return Envelope("v1", "Event", std::move(o));
}

std::string Encode(const Lease& l) {
  bj::object o;
  o["metadata"] = MetaJson(l.metadata);
  bj::object spec;
  if (l.holder_identity) spec["holderIdentity"] = *l.holder_identity;
  if (l.lease_duration_seconds) spec["leaseDurationSeconds"] = *l.lease_duration_seconds;
  if (l.acquire_time) spec["acquireTime"] = *l.acquire_time;
  if (l.renew_time) spec["renewTime"] = *l.renew_time;
  if (l.lease_transitions) spec["leaseTransitions"] = *l.lease_transitions;
  o["spec"] = std::move(spec);
  return Envelope("coordination.k8s.io/v1", "Lease", std::move(o));
}

std::string Encode(const Job& j) {
  bj::object o;
  o["metadata"] = MetaJson(j.metadata);
  bj::object spec;
  if (j.parallelism) spec["parallelism"] = *j.parallelism;
  if (j.completions) spec["completions"] = *j.completions;
  if (j.backoff_limit) spec["backoffLimit"] = *j.backoff_limit;
  if (j.suspend) spec["suspend"] = *j.suspend;
  PutIf(spec, "completionMode", j.completion_mode);
  bj::object tmeta;
  if (!j.template_labels.empty()) tmeta["labels"] = StringMapJson(j.template_labels);
  if (!j.template_annotations.empty()) tmeta["annotations"] = StringMapJson(j.template_annotations);
  bj::object tmpl;
  tmpl["metadata"] = std::move(tmeta);
  bj::object pspec = PodSpecJson(j.template_spec);
  if (!pspec.contains("restartPolicy")) pspec["restartPolicy"] = "Never";
  tmpl["spec"] = std::move(pspec);
  spec["template"] = std::move(tmpl);
  o["spec"] = std::move(spec);
  return Envelope("batch/v1", "Job", std::move(o));
}

Result<std::string> Encode(const GenericObject& g) {
  bj::object o;
  o["apiVersion"] = g.api_version;
  o["kind"] = g.kind;
  o["metadata"] = MetaJson(g.metadata);
  boost::system::error_code ec;
  if (!g.spec_json.empty()) {
    bj::value v = bj::parse(g.spec_json, ec);
    if (ec) return MakeError(ErrorCode::kInvalidArgument, "spec_json: " + ec.message());
    o["spec"] = std::move(v);
  }
  if (!g.status_json.empty()) {
    bj::value v = bj::parse(g.status_json, ec);
    if (ec) return MakeError(ErrorCode::kInvalidArgument, "status_json: " + ec.message());
    o["status"] = std::move(v);
  }
  return bj::serialize(o);
}

std::string EncodeBinding(std::string_view ns, std::string_view name, std::string_view uid,
                          std::string_view node,
                          const std::map<std::string, std::string>& annotations,
                          const std::map<std::string, std::string>& labels) {
  bj::object meta;
  meta["name"] = name;
  meta["namespace"] = ns;
  if (!uid.empty()) meta["uid"] = uid;
  for (const auto& [field, values] :
       {std::pair{"annotations", &annotations}, {"labels", &labels}}) {
    if (values->empty()) continue;
    bj::object o;
    for (const auto& [k, v] : *values) o[k] = v;
    meta[field] = std::move(o);
  }
  bj::object o;
  o["apiVersion"] = "v1";
  o["kind"] = "Binding";
  o["metadata"] = std::move(meta);
  o["target"] = {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}};
  return bj::serialize(o);
}

namespace {
bj::object DeleteOptionsJson(const DeleteOptions& d) {
  bj::object o;
  o["apiVersion"] = "v1";
  o["kind"] = "DeleteOptions";
  if (d.grace_period_seconds) o["gracePeriodSeconds"] = *d.grace_period_seconds;
  if (d.uid || d.resource_version) {
    bj::object pre;
    if (d.uid) pre["uid"] = *d.uid;
    if (d.resource_version) pre["resourceVersion"] = *d.resource_version;
    o["preconditions"] = std::move(pre);
  }
  if (d.propagation_policy) o["propagationPolicy"] = *d.propagation_policy;
  return o;
}
}  // namespace

std::string EncodeDeleteOptions(const DeleteOptions& options) {
  return bj::serialize(DeleteOptionsJson(options));
}

std::string EncodeEviction(std::string_view ns, std::string_view name, const DeleteOptions& options,
                           std::string_view api_version) {
  bj::object o;
  o["apiVersion"] = api_version;
  o["kind"] = "Eviction";
  o["metadata"] = {{"name", name}, {"namespace", ns}};
  o["deleteOptions"] = DeleteOptionsJson(options);
  return bj::serialize(o);
}

std::string EncodeMetadataMergePatch(
    const std::map<std::string, std::optional<std::string>>& labels,
    const std::map<std::string, std::optional<std::string>>& annotations) {
  bj::object meta;
  auto put = [&](const char* key, const std::map<std::string, std::optional<std::string>>& m) {
    if (m.empty()) return;
    bj::object o;
    for (const auto& [k, v] : m) {
      if (v) {
        o[k] = *v;
      } else {
        o[k] = nullptr;
      }
    }
    meta[key] = std::move(o);
  };
  put("labels", labels);
  put("annotations", annotations);
  bj::object root;
  root["metadata"] = std::move(meta);
  return bj::serialize(root);
}

std::string JsonQuote(std::string_view s) { return bj::serialize(bj::string(s)); }

}  // namespace sb::kube
