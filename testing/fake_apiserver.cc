// SPDX-License-Identifier: Apache-2.0
#include "testing/fake_apiserver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <utility>

#include <boost/json.hpp>

namespace sb::testing {
namespace bj = boost::json;

namespace {

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && Hex(s[i + 1]) >= 0 && Hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2])));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// RFC 7386: objects merge key by key, null removes a key, anything else replaces.
void MergePatch(bj::object& target, const bj::object& patch) {
  for (const auto& [k, v] : patch) {
    if (v.is_null()) {
      target.erase(k);
    } else if (v.is_object() && target.contains(k) && target.at(k).is_object()) {
      MergePatch(target.at(k).as_object(), v.as_object());
    } else {
      target[k] = v;
    }
  }
}

// The patch as an object; nullopt when it is not one.
std::optional<bj::object> ParseObject(const std::string& json) {
  boost::system::error_code ec;
  bj::value v = bj::parse(json, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return v.as_object();
}

struct Target {
  std::string path;
  std::map<std::string, std::string> query;
};

Target ParseTarget(const std::string& t) {
  Target out;
  std::size_t q = t.find('?');
  out.path = t.substr(0, q);
  if (q == std::string::npos) return out;
  std::string_view rest = std::string_view(t).substr(q + 1);
  while (!rest.empty()) {
    std::size_t amp = rest.find('&');
    std::string_view kv = rest.substr(0, amp);
    std::size_t eq = kv.find('=');
    out.query[PercentDecode(kv.substr(0, eq))] =
        eq == std::string_view::npos ? "" : PercentDecode(kv.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// Splits at commas outside parentheses ("a in (x,y),b=c" -> "a in (x,y)", "b=c").
std::vector<std::string> SplitTerms(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      std::string t = Trim(s.substr(start, i - start));
      if (!t.empty()) out.push_back(t);
      start = i + 1;
    } else if (s[i] == '(') {
      ++depth;
    } else if (s[i] == ')') {
      --depth;
    }
  }
  return out;
}

// One term of a label or field selector.
struct Requirement {
  enum class Op { kEq, kNe, kIn, kNotIn, kExists, kNotExists };
  std::string key;
  Op op = Op::kEq;
  std::vector<std::string> values;
};

struct Selector {
  std::vector<Requirement> fields;
  std::vector<Requirement> labels;
};

// "k=v", "k==v", "k!=v"; for labels also "k in (a,b)", "k notin (a,b)", "k", "!k". An error
// text for anything else.
std::optional<std::string> ParseTerm(const std::string& t, bool label, Requirement* r) {
  if (std::size_t ne = t.find("!="); ne != std::string::npos) {
    *r = {Trim(t.substr(0, ne)), Requirement::Op::kNe, {Trim(t.substr(ne + 2))}};
    return std::nullopt;
  }
  if (std::size_t eq = t.find('='); eq != std::string::npos) {
    const std::size_t skip = t.compare(eq, 2, "==") == 0 ? 2 : 1;
    *r = {Trim(t.substr(0, eq)), Requirement::Op::kEq, {Trim(t.substr(eq + skip))}};
    return std::nullopt;
  }
  if (!label) return "invalid field selector term: " + t;
  for (const auto& [word, op] : {std::pair{std::string(" notin "), Requirement::Op::kNotIn},
                                 std::pair{std::string(" in "), Requirement::Op::kIn}}) {
    std::size_t at = t.find(word);
    if (at == std::string::npos) continue;
    std::string set = Trim(t.substr(at + word.size()));
    if (set.size() < 2 || set.front() != '(' || set.back() != ')') {
      return "invalid label selector term: " + t;
    }
    *r = {Trim(t.substr(0, at)), op, {}};
    for (std::string v : SplitTerms(std::string_view(set).substr(1, set.size() - 2))) {
      r->values.push_back(std::move(v));
    }
    return std::nullopt;
  }
  if (t.starts_with("!")) {
    *r = {Trim(t.substr(1)), Requirement::Op::kNotExists, {}};
  } else {
    *r = {t, Requirement::Op::kExists, {}};
  }
  return std::nullopt;
}

// The selectors of a LIST or WATCH query; an error text (answered 400) when malformed or when
// a field is one the apiserver does not index for pods.
std::optional<std::string> ParseSelectors(std::map<std::string, std::string>& query, bool pods,
                                          Selector* out) {
  for (const std::string& t : SplitTerms(query["fieldSelector"])) {
    Requirement r;
    if (auto e = ParseTerm(t, false, &r)) return e;
    static const std::vector<std::string> kPodFields = {"metadata.name", "metadata.namespace",
                                                        "spec.nodeName", "spec.schedulerName",
                                                        "status.phase"};
    static const std::vector<std::string> kNodeFields = {"metadata.name"};
    const std::vector<std::string>& fields = pods ? kPodFields : kNodeFields;
    if (std::ranges::find(fields, r.key) == fields.end()) {
      return "field label not supported: " + r.key;
    }
    out->fields.push_back(std::move(r));
  }
  for (const std::string& t : SplitTerms(query["labelSelector"])) {
    Requirement r;
    if (auto e = ParseTerm(t, true, &r)) return e;
    out->labels.push_back(std::move(r));
  }
  return std::nullopt;
}

std::optional<std::string> StringAt(const bj::object& o, std::string_view a, std::string_view b) {
  const bj::value* x = o.if_contains(a);
  if (x == nullptr || !x->is_object()) return std::nullopt;
  const bj::value* y = x->as_object().if_contains(b);
  if (y == nullptr || !y->is_string()) return std::nullopt;
  return std::string(y->as_string());
}

bool Holds(const Requirement& r, const std::optional<std::string>& value) {
  switch (r.op) {
    case Requirement::Op::kEq:
      return value.value_or("") == r.values[0];
    case Requirement::Op::kNe:
      return value.value_or("") != r.values[0];
    case Requirement::Op::kIn:
      return value && std::ranges::find(r.values, *value) != r.values.end();
    case Requirement::Op::kNotIn:
      return !value || std::ranges::find(r.values, *value) == r.values.end();
    case Requirement::Op::kExists:
      return value.has_value();
    case Requirement::Op::kNotExists:
      return !value.has_value();
  }
  return false;
}

bool Matches(const Selector& sel, const bj::object& pod) {
  for (const Requirement& r : sel.fields) {
    const std::size_t dot = r.key.find('.');
    if (!Holds(r, StringAt(pod, r.key.substr(0, dot), r.key.substr(dot + 1)))) return false;
  }
  for (const Requirement& r : sel.labels) {
    std::optional<std::string> v;
    if (const bj::value* m = pod.if_contains("metadata"); m != nullptr && m->is_object()) {
      if (const bj::value* l = m->as_object().if_contains("labels");
          l != nullptr && l->is_object()) {
        if (const bj::value* x = l->as_object().if_contains(r.key);
            x != nullptr && x->is_string()) {
          v = std::string(x->as_string());
        }
      }
    }
    if (!Holds(r, v)) return false;
  }
  return true;
}

std::string StatusJson(int code, const std::string& reason, const std::string& message) {
  bj::object o{{"kind", "Status"},   {"apiVersion", "v1"}, {"status", "Failure"},
               {"message", message}, {"reason", reason},   {"code", code}};
  return bj::serialize(o);
}

FakeReply StatusReply(int code, const std::string& reason, const std::string& message) {
  return HttpReply(code, StatusJson(code, reason, message));
}

// The apiserver's rule for a pod update (ValidatePodUpdate, validateOnlyAddedTolerations): every
// toleration the pod had is still there, equal in all but tolerationSeconds; fields left out
// equal empty ones, as Go's decoding has it (operator is not defaulted).
std::optional<std::string> TolerationsChanged(const bj::object& before, const bj::object& after) {
  auto list = [](const bj::object& pod) {
    std::vector<std::string> out;
    const bj::value* spec = pod.if_contains("spec");
    const bj::value* tols = spec != nullptr && spec->is_object()
                                ? spec->as_object().if_contains("tolerations")
                                : nullptr;
    if (tols == nullptr || !tols->is_array()) return out;
    for (const bj::value& t : tols->as_array()) {
      if (!t.is_object()) continue;
      std::string norm;
      for (const char* f : {"key", "operator", "value", "effect"}) {
        const bj::value* v = t.as_object().if_contains(f);
        norm += std::string(f) + "=" +
                (v != nullptr && v->is_string() ? std::string(v->as_string()) : "") + ";";
      }
      out.push_back(std::move(norm));
    }
    return out;
  };
  std::vector<std::string> now = list(after);
  for (const std::string& t : list(before)) {
    auto it = std::ranges::find(now, t);
    if (it == now.end()) {
      return "Pod \"\" is invalid: spec.tolerations: Forbidden: existing toleration can not be "
             "modified except its tolerationSeconds (" +
             t + ")";
    }
    now.erase(it);
  }
  return std::nullopt;
}

// A strategic merge patch as the fake applies it: a merge patch, except that lists named
// "conditions" merge element by element on "type" (as PodStatus and NodeStatus declare).
// The merge key of the lists the bridge patches, as the API's patchMergeKey tags say
// (k8s.io/api/core/v1/types.go); lists not named here are replaced, as the apiserver does for
// lists without a patch strategy (tolerations, taints).
const char* MergeKeyOf(std::string_view list) {
  if (list == "conditions") return "type";
  if (list == "containers" || list == "initContainers" || list == "ephemeralContainers" ||
      list == "env" || list == "volumes" || list == "imagePullSecrets") {
    return "name";
  }
  if (list == "ownerReferences") return "uid";
  if (list == "volumeMounts") return "mountPath";
  return nullptr;
}

// Lists of primitives merged as sets (patchStrategy "merge" without a key).
bool IsSetList(std::string_view list) { return list == "finalizers"; }

// Strategic merge patch as the apiserver applies it to the kinds the bridge writes: objects
// merge recursively, null deletes, keyed lists merge by their key (an element with
// "$patch": "delete" removes its match), set lists union (and "$deleteFromPrimitiveList/<list>"
// removes), "$patch": "replace" replaces the object it is in, other lists are replaced.
void StrategicMerge(bj::object& target, const bj::object& patch) {
  if (const bj::value* p = patch.if_contains("$patch"); p && p->is_string() && *p == "replace") {
    target = patch;
    target.erase("$patch");
    return;
  }
  for (const auto& [k, v] : patch) {
    if (k == "$patch" || k.starts_with("$retainKeys") || k.starts_with("$setElementOrder/")) {
      continue;
    }
    if (k.starts_with("$deleteFromPrimitiveList/")) {
      const std::string list(k.substr(std::string_view("$deleteFromPrimitiveList/").size()));
      if (v.is_array() && target.contains(list) && target.at(list).is_array()) {
        bj::array& have = target.at(list).as_array();
        for (const bj::value& gone : v.as_array()) {
          auto it = std::ranges::find(have, gone);
          if (it != have.end()) have.erase(it);
        }
      }
      continue;
    }
    // Merged lists come out as the real 1.36 apiserver orders them (kube_e2e_test's contract
    // run shows it): the patch's new elements first, in its order, then the object's elements
    // in their order, merged in place (or removed by "$patch": "delete").
    const char* key = MergeKeyOf(k);
    if (key != nullptr && v.is_array()) {
      bj::array have;
      if (target.contains(k) && target.at(k).is_array()) have = target.at(k).as_array();
      std::vector<bool> gone(have.size(), false);
      bj::array out;
      for (const bj::value& c : v.as_array()) {
        const bj::value* id = c.is_object() ? c.as_object().if_contains(key) : nullptr;
        auto same = std::ranges::find_if(have, [&](const bj::value& h) {
          return id != nullptr && h.is_object() && h.as_object().if_contains(key) != nullptr &&
                 h.as_object().at(key) == *id;
        });
        const bj::value* directive = c.is_object() ? c.as_object().if_contains("$patch") : nullptr;
        if (directive != nullptr && directive->is_string() && *directive == "delete") {
          if (same != have.end()) gone[static_cast<std::size_t>(same - have.begin())] = true;
        } else if (same != have.end() && c.is_object() && same->is_object()) {
          StrategicMerge(same->as_object(), c.as_object());
        } else {
          out.push_back(c);
        }
      }
      for (std::size_t i = 0; i < have.size(); ++i) {
        if (!gone[i]) out.push_back(have[i]);
      }
      target[k] = std::move(out);
    } else if (IsSetList(k) && v.is_array()) {
      bj::array out;
      const bj::array* had =
          target.contains(k) && target.at(k).is_array() ? &target.at(k).as_array() : nullptr;
      for (const bj::value& e : v.as_array()) {
        const bool old = had != nullptr && std::ranges::find(*had, e) != had->end();
        if (!old && std::ranges::find(out, e) == out.end()) out.push_back(e);
      }
      if (had != nullptr) out.insert(out.end(), had->begin(), had->end());
      target[k] = std::move(out);
    } else if (v.is_object() && target.contains(k) && target.at(k).is_object()) {
      StrategicMerge(target.at(k).as_object(), v.as_object());
    } else if (v.is_null()) {
      target.erase(k);
    } else {
      target[k] = v;
    }
  }
}

// A string at metadata.`field` of `o`; "" when absent.
std::string Meta(const bj::object& o, std::string_view field) {
  return StringAt(o, "metadata", field).value_or("");
}

// metav1.Time: RFC 3339 in UTC, whole seconds ("2026-01-01T00:00:30Z").
std::string Rfc3339(std::chrono::system_clock::time_point t) {
  const std::time_t secs =
      std::chrono::system_clock::to_time_t(std::chrono::floor<std::chrono::seconds>(t));
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The inverse of Rfc3339 for the "...Z" form the fake writes; nullopt otherwise.
std::optional<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& s) {
  std::tm tm{};
  int used = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6 ||
      static_cast<std::size_t>(used) != s.size()) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(::timegm(&tm));
}

// An integer at o[a][b]; nullopt when absent or not one.
std::optional<std::int64_t> IntAt(const bj::object& o, std::string_view a, std::string_view b) {
  const bj::value* x = o.if_contains(a);
  if (x == nullptr || !x->is_object()) return std::nullopt;
  const bj::value* y = x->as_object().if_contains(b);
  if (y == nullptr || !y->is_number()) return std::nullopt;
  if (y->is_int64()) return y->as_int64();
  if (y->is_uint64()) return static_cast<std::int64_t>(y->as_uint64());
  return static_cast<std::int64_t>(y->as_double());
}

bool HasFinalizers(const bj::object& o) {
  const bj::value* m = o.if_contains("metadata");
  if (m == nullptr || !m->is_object()) return false;
  const bj::value* f = m->as_object().if_contains("finalizers");
  return f != nullptr && f->is_array() && !f->as_array().empty();
}

// One chunk of a chunked reply body: the line and a newline.
std::string Chunk(const std::string& line) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", line.size() + 1);
  return size + line + "\n\r\n";
}

constexpr std::string_view kChunkedHeader =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace

struct FakeApiServer::Impl {
  std::int64_t rv = 1;
  std::int64_t compacted = 0;
  // Per resource ("pods", "nodes"): "ns/name" (pods) or "name" (nodes) -> object.
  std::map<std::string, std::map<std::string, bj::object>> store{{"pods", {}}, {"nodes", {}}};
  struct LoggedEvent {
    std::int64_t rv;
    std::string resource;
    std::string ns;
    std::string type;
    bj::object object;               // after the change (DELETED: as it was)
    std::optional<bj::object> prev;  // before the change; nullopt for ADDED
  };
  std::vector<LoggedEvent> log;
  struct Snapshot {
    std::int64_t rv;
    std::vector<bj::object> items;
  };
  std::vector<Snapshot> snapshots;  // of each paged LIST, by continue token
  struct Watcher {
    std::string resource;
    std::string ns;
    Selector sel;
    bool bookmarks = false;
    std::string kind;
    std::shared_ptr<FakeStream> stream;
  };
  std::vector<Watcher> watchers;
  Hook hook;
  int lists = 0;
  int watches = 0;
  int writes = 0;
  std::vector<std::string> watch_rvs;
  std::vector<std::string> events;
  // The Events POSTed, by "ns/name"; generate_names counts the names made from generateName.
  std::map<std::string, bj::object> event_store;
  int generated_names = 0;
  FakeApiServer* owner = nullptr;
  std::unique_ptr<FakeHttpServer> http;

  static std::string KeyOf(const std::string& ns, const std::string& name) {
    return ns.empty() ? name : ns + "/" + name;
  }

  std::int64_t Record(const std::string& resource, const std::string& type, const std::string& key,
                      bj::object obj) {
    ++rv;
    obj["metadata"].as_object()["resourceVersion"] = std::to_string(rv);
    const std::string ns = Meta(obj, "namespace");
    std::map<std::string, bj::object>& objects = store[resource];
    std::optional<bj::object> prev;
    if (auto it = objects.find(key); it != objects.end()) prev = it->second;
    log.push_back({rv, resource, ns, type, obj, std::move(prev)});
    if (type == "DELETED") {
      objects.erase(key);
    } else {
      objects[key] = std::move(obj);
    }
    const LoggedEvent& e = log.back();
    std::erase_if(watchers, [](const Watcher& w) { return !w.stream->open(); });
    for (Watcher& w : watchers) {
      if (w.resource == resource && (w.ns.empty() || w.ns == ns)) {
        if (std::string line = Filtered(e, w.sel); !line.empty()) w.stream->Push(Chunk(line));
      }
    }
    return rv;
  }

  std::string BookmarkLine(const std::string& kind) const {
    bj::object ev{{"type", "BOOKMARK"},
                  {"object",
                   {{"kind", kind},
                    {"apiVersion", "v1"},
                    {"metadata", {{"resourceVersion", std::to_string(rv)}}}}}};
    return bj::serialize(ev);
  }

  FakeReply Handle(const FakeRequest& req) {
    if (hook) {
      if (std::optional<FakeReply> r = hook(req)) {
        Target t = ParseTarget(req.target);
        if (t.query.contains("watch")) {
          ++watches;
          watch_rvs.push_back(t.query["resourceVersion"]);
        }
        return std::move(*r);
      }
    }
    return Serve(req);
  }

  // The non-empty segments of a path: "/api/v1/nodes" -> api, v1, nodes.
  static std::vector<std::string> SplitPath(const std::string& path) {
    std::vector<std::string> parts;
    for (std::size_t at = 0; at < path.size();) {
      std::size_t slash = path.find('/', at);
      if (slash == std::string::npos) slash = path.size();
      if (slash > at) parts.push_back(path.substr(at, slash - at));
      at = slash + 1;
    }
    return parts;
  }

  // The fake's own answer, without the hook.
  FakeReply Serve(const FakeRequest& req) {
    Target t = ParseTarget(req.target);
    // /api/v1/namespaces/{ns}/events[/{name}], /apis/events.k8s.io/v1/namespaces/{ns}/events[...]
    if (t.path.find("/events") != std::string::npos) {
      if (std::optional<FakeReply> r = ServeEvent(req, t)) return std::move(*r);
    }
    // /api/v1/pods, /api/v1/namespaces/{ns}/pods[/{name}[/{sub}]], /api/v1/nodes[/{name}[/{sub}]]
    const std::vector<std::string> parts = SplitPath(t.path);
    std::size_t i = 2;
    std::string ns;
    if (parts.size() < 3 || parts[0] != "api" || parts[1] != "v1") return NoSuchPath(t);
    if (parts[2] == "namespaces" && parts.size() >= 5 && parts[4] == "pods") {
      ns = parts[3];
      i = 4;
    }
    const std::string resource = parts[i];
    if ((resource != "pods" && resource != "nodes") || (resource == "nodes" && i != 2) ||
        parts.size() > i + 3) {
      return NoSuchPath(t);
    }
    const std::string name = parts.size() > i + 1 ? parts[i + 1] : "";
    const std::string sub = parts.size() > i + 2 ? parts[i + 2] : "";
    if (!name.empty()) {
      if (resource == "pods" && ns.empty()) return NoSuchPath(t);
      return Item(req, resource, ns, name, sub);
    }
    if (req.method != "GET") {
      return StatusReply(405, "MethodNotAllowed", "the fake does not create by POST");
    }
    Selector sel;
    if (std::optional<std::string> bad = ParseSelectors(t.query, resource == "pods", &sel)) {
      return StatusReply(400, "BadRequest", *bad);
    }
    if (t.query.contains("watch")) return Watch(t, resource, ns, sel);
    return List(t, resource, ns, sel);
  }

  // An Event request; nullopt when the path is not an Event's.
  std::optional<FakeReply> ServeEvent(const FakeRequest& req, const Target& t) {
    const std::vector<std::string> parts = SplitPath(t.path);
    // Skip the group prefix: "api/v1" or "apis/{group}/{version}".
    std::size_t i = 0;
    if (parts.size() >= 2 && parts[0] == "api") {
      i = 2;
    } else if (parts.size() >= 3 && parts[0] == "apis") {
      i = 3;
    } else {
      return std::nullopt;
    }
    if (parts.size() < i + 3 || parts[i] != "namespaces" || parts[i + 2] != "events" ||
        parts.size() > i + 4) {
      return std::nullopt;
    }
    const std::string ns = parts[i + 1];
    if (parts.size() == i + 3) {
      if (req.method != "POST") return std::nullopt;
      return CreateEvent(req, ns);
    }
    const std::string name = parts[i + 3];
    auto it = event_store.find(ns + "/" + name);
    if (it == event_store.end()) {
      if (req.method != "GET" && req.method != "PATCH") return std::nullopt;
      return NotFound("events", name);
    }
    if (req.method == "GET") return HttpReply(200, bj::serialize(it->second));
    if (req.method != "PATCH") return std::nullopt;
    if (req.Header("Content-Type").find("json-patch") != std::string::npos) {
      return StatusReply(415, "UnsupportedMediaType", "the fake applies merge patches only");
    }
    std::optional<bj::object> patch = ParseObject(req.body);
    if (!patch) return StatusReply(400, "BadRequest", "the patch is not a JSON object");
    if (std::optional<FakeReply> c = InjectedConflict()) return std::move(*c);
    if (auto c = Precondition("ResourceVersion", Meta(*patch, "resourceVersion"),
                              Meta(it->second, "resourceVersion"))) {
      return std::move(*c);
    }
    MergePatch(it->second, *patch);
    bj::object& meta = it->second["metadata"].as_object();
    meta["name"] = name;
    meta["namespace"] = ns;
    meta["resourceVersion"] = std::to_string(++rv);
    return HttpReply(200, bj::serialize(it->second));
  }

  FakeReply CreateEvent(const FakeRequest& req, const std::string& ns) {
    events.push_back(req.body);
    std::optional<bj::object> event = ParseObject(req.body);
    if (!event) return StatusReply(400, "BadRequest", "the Event is not a JSON object");
    bj::value& meta_value = (*event)["metadata"];
    if (!meta_value.is_object()) meta_value = bj::object{};
    bj::object& meta = meta_value.as_object();
    std::string name = Meta(*event, "name");
    if (name.empty()) {
      const std::string prefix = Meta(*event, "generateName");
      if (prefix.empty()) {
        return StatusReply(422, "Invalid",
                           "metadata.name: Required value: name or generateName "
                           "is required");
      }
      name = prefix + "fake" + std::to_string(++generated_names);
    }
    if (const std::string body_ns = Meta(*event, "namespace"); !body_ns.empty() && body_ns != ns) {
      return StatusReply(400, "BadRequest",
                         "the namespace of the provided object does not match the namespace "
                         "sent on the request");
    }
    const std::string key = ns + "/" + name;
    if (event_store.contains(key)) {
      return StatusReply(409, "AlreadyExists", "events \"" + name + "\" already exists");
    }
    meta["name"] = name;
    meta["namespace"] = ns;
    meta["uid"] = "uid-event-" + ns + "-" + name;
    meta["resourceVersion"] = std::to_string(++rv);
    event_store[key] = *event;
    return HttpReply(201, bj::serialize(*event));
  }

  static FakeReply NoSuchPath(const Target& t) {
    return StatusReply(404, "NotFound", "no such path " + t.path);
  }

  static FakeReply NotFound(const std::string& resource, const std::string& name) {
    return StatusReply(404, "NotFound", resource + " \"" + name + "\" not found");
  }

  static FakeReply Conflict(const std::string& message) {
    return StatusReply(409, "Conflict", message);
  }

  // The fault a test asked for: the next write answers 409.
  std::optional<FakeReply> InjectedConflict() {
    if (owner->conflict_writes <= 0) return std::nullopt;
    --owner->conflict_writes;
    return Conflict("Operation cannot be fulfilled: the object has been modified (injected)");
  }

  // 409 when the precondition `want` (uid or resourceVersion; empty: none) is not `have`.
  static std::optional<FakeReply> Precondition(std::string_view field, const std::string& want,
                                               const std::string& have) {
    if (want.empty() || want == have) return std::nullopt;
    return Conflict("Precondition failed: " + std::string(field) + " in precondition: " + want +
                    ", " + std::string(field) + " in object meta: " + have);
  }

  FakeReply Item(const FakeRequest& req, const std::string& resource, const std::string& ns,
                 const std::string& name, const std::string& sub) {
    const std::string key = KeyOf(ns, name);
    std::map<std::string, bj::object>& objects = store[resource];
    auto it = objects.find(key);
    if (req.method != "GET") ++writes;
    if (it == objects.end()) return NotFound(resource, name);
    const bj::object& cur = it->second;
    const bool pod = resource == "pods";
    if (req.method == "GET" && (sub.empty() || sub == "status")) {
      return HttpReply(200, bj::serialize(cur));
    }
    if (req.method == "PATCH" && (sub.empty() || sub == "status")) return Patch(req, resource, key);
    if (req.method == "PUT" && (sub.empty() || sub == "status")) return Put(req, resource, key);
    if (req.method == "DELETE" && sub.empty()) return Delete(req.body, resource, key, false);
    if (req.method == "POST" && pod && sub == "binding") return Bind(req, key);
    if (req.method == "POST" && pod && sub == "eviction") {
      std::optional<bj::object> eviction = ParseObject(req.body.empty() ? "{}" : req.body);
      if (!eviction) return StatusReply(400, "BadRequest", "the eviction is not a JSON object");
      std::string options = "{}";
      if (const bj::value* o = eviction->if_contains("deleteOptions"); o != nullptr) {
        options = bj::serialize(*o);
      }
      return Delete(options, resource, key, true);
    }
    return StatusReply(405, "MethodNotAllowed",
                       req.method + " " + resource + (sub.empty() ? "" : "/" + sub) +
                           " is not served by the fake");
  }

  FakeReply Patch(const FakeRequest& req, const std::string& resource, const std::string& key) {
    const std::string type = req.Header("Content-Type");
    if (type.find("json-patch") != std::string::npos) {
      return StatusReply(415, "UnsupportedMediaType", "the fake applies merge patches only");
    }
    std::optional<bj::object> patch = ParseObject(req.body);
    if (!patch) return StatusReply(400, "BadRequest", "the patch is not a JSON object");
    if (std::optional<FakeReply> c = InjectedConflict()) return std::move(*c);
    bj::object obj = store[resource].at(key);
    if (auto c = Precondition("UID", Meta(*patch, "uid"), Meta(obj, "uid"))) return std::move(*c);
    if (auto c = Precondition("ResourceVersion", Meta(*patch, "resourceVersion"),
                              Meta(obj, "resourceVersion"))) {
      return std::move(*c);
    }
    const bj::object before = obj;
    if (type.find("strategic-merge-patch") != std::string::npos) {
      StrategicMerge(obj, *patch);
    } else {
      MergePatch(obj, *patch);
    }
    if (resource == "pods") {
      if (std::optional<std::string> why = TolerationsChanged(before, obj)) {
        return StatusReply(422, "Invalid", *why);
      }
    }
    return Update(resource, key, before, std::move(obj));
  }

  // Stores `obj` as the update of `before` (its deletionTimestamp and deletionGracePeriodSeconds
  // kept, as rest.BeforeUpdate does); an object being deleted that is left without finalizers
  // goes when registry.ShouldDeleteDuringUpdate says so (grace 0 or unset; for a pod, also when
  // unbound). Answers the object.
  FakeReply Update(const std::string& resource, const std::string& key, const bj::object& before,
                   bj::object obj) {
    if (!obj.contains("metadata") || !obj.at("metadata").is_object())
      obj["metadata"] = bj::object{};
    bj::object& meta = obj["metadata"].as_object();
    const bj::object& was = before.at("metadata").as_object();
    for (const char* f : {"deletionTimestamp", "deletionGracePeriodSeconds"}) {
      if (const bj::value* v = was.if_contains(f)) {
        meta[f] = *v;
      } else {
        meta.erase(f);
      }
    }
    bool gone = false;
    if (was.contains("deletionTimestamp") && !HasFinalizers(obj)) {
      gone = IntAt(before, "metadata", "deletionGracePeriodSeconds").value_or(0) == 0 ||
             (resource == "pods" && StringAt(obj, "spec", "nodeName").value_or("").empty());
    }
    if (gone) {
      Record(resource, "DELETED", key, std::move(obj));
      return HttpReply(200, bj::serialize(log.back().object));
    }
    Record(resource, "MODIFIED", key, std::move(obj));
    return HttpReply(200, bj::serialize(store[resource].at(key)));
  }

  FakeReply Put(const FakeRequest& req, const std::string& resource, const std::string& key) {
    std::optional<bj::object> obj = ParseObject(req.body);
    if (!obj || !obj->contains("metadata") || !obj->at("metadata").is_object()) {
      return StatusReply(400, "BadRequest", "the object is not a JSON object with metadata");
    }
    if (std::optional<FakeReply> c = InjectedConflict()) return std::move(*c);
    const bj::object& cur = store[resource].at(key);
    const std::string want = Meta(*obj, "resourceVersion");
    if (want.empty()) {
      return StatusReply(422, "Invalid",
                         "metadata.resourceVersion: Invalid value: 0x0: must be specified for an "
                         "update");
    }
    if (auto c = Precondition("ResourceVersion", want, Meta(cur, "resourceVersion"))) {
      return std::move(*c);
    }
    if (auto c = Precondition("UID", Meta(*obj, "uid"), Meta(cur, "uid"))) return std::move(*c);
    bj::object& meta = (*obj)["metadata"].as_object();
    meta["uid"] = Meta(cur, "uid");
    meta["name"] = Meta(cur, "name");
    if (const std::string ns = Meta(cur, "namespace"); !ns.empty()) meta["namespace"] = ns;
    return Update(resource, key, cur, std::move(*obj));
  }

  // DELETE with DeleteOptions `options_json`; an eviction answers 201 with a Status.
  FakeReply Delete(const std::string& options_json, const std::string& resource,
                   const std::string& key, bool eviction) {
    std::optional<bj::object> options = ParseObject(options_json.empty() ? "{}" : options_json);
    if (!options) return StatusReply(400, "BadRequest", "DeleteOptions is not a JSON object");
    if (std::optional<FakeReply> c = InjectedConflict()) return std::move(*c);
    bj::object obj = store[resource].at(key);
    const std::string uid = StringAt(*options, "preconditions", "uid").value_or("");
    const std::string want_rv = StringAt(*options, "preconditions", "resourceVersion").value_or("");
    if (auto c = Precondition("UID", uid, Meta(obj, "uid"))) return std::move(*c);
    if (auto c = Precondition("ResourceVersion", want_rv, Meta(obj, "resourceVersion"))) {
      return std::move(*c);
    }
    const bool pod = resource == "pods";
    const bool finalized = HasFinalizers(obj);
    std::optional<std::int64_t> asked;
    if (const bj::value* g = options->if_contains("gracePeriodSeconds");
        g != nullptr && g->is_number()) {
      asked = g->is_int64() ? g->as_int64() : static_cast<std::int64_t>(g->to_number<double>());
      if (*asked < 0) asked = 1;  // as rest.BeforeDelete
    }
    bj::object& meta = obj["metadata"].as_object();
    std::string reply;
    if (meta.contains("deletionTimestamp")) {
      // Being deleted already: a DELETE may only shorten the grace period (rest.BeforeDelete).
      const std::int64_t had = IntAt(obj, "metadata", "deletionGracePeriodSeconds").value_or(0);
      bool gone = false;
      if (had == 0) {
        gone = !finalized;  // an update that set grace 0 and then failed to delete
      } else if (pod && asked && *asked < had) {
        if (std::optional<std::chrono::system_clock::time_point> at =
                ParseRfc3339(Meta(obj, "deletionTimestamp"))) {
          meta["deletionTimestamp"] =
              Rfc3339(*at - std::chrono::seconds(had) + std::chrono::seconds(*asked));
        }
        meta["deletionGracePeriodSeconds"] = *asked;
        gone = *asked == 0 && !finalized;
        if (!gone) Record(resource, "MODIFIED", key, std::move(obj));
      }
      if (gone) {
        Record(resource, "DELETED", key, std::move(obj));
        reply = bj::serialize(log.back().object);
      } else {
        reply = bj::serialize(store[resource].at(key));
      }
    } else {
      // A pod's grace (podStrategy.CheckGracefulDelete); other kinds have none.
      std::int64_t grace = 0;
      if (pod) {
        grace = asked.value_or(IntAt(obj, "spec", "terminationGracePeriodSeconds").value_or(30));
        const std::string phase = StringAt(obj, "status", "phase").value_or("");
        if (StringAt(obj, "spec", "nodeName").value_or("").empty() || phase == "Succeeded" ||
            phase == "Failed") {
          grace = 0;
        }
      }
      if (pod || finalized) {
        meta["deletionTimestamp"] = Rfc3339(owner->now() + std::chrono::seconds(grace));
        meta["deletionGracePeriodSeconds"] = grace;
      }
      if (finalized || grace > 0) {
        Record(resource, "MODIFIED", key, std::move(obj));
        reply = bj::serialize(store[resource].at(key));
      } else {
        Record(resource, "DELETED", key, std::move(obj));
        reply = bj::serialize(log.back().object);
      }
    }
    if (eviction)
      return HttpReply(201, R"({"kind":"Status","apiVersion":"v1","status":"Success"})");
    return HttpReply(200, reply);
  }

  FakeReply Bind(const FakeRequest& req, const std::string& key) {
    std::optional<bj::object> binding = ParseObject(req.body);
    const std::string node =
        binding ? StringAt(*binding, "target", "name").value_or("") : std::string();
    if (node.empty()) return StatusReply(400, "BadRequest", "the binding names no target node");
    if (std::optional<FakeReply> c = InjectedConflict()) return std::move(*c);
    bj::object pod = store["pods"].at(key);
    const std::string name = Meta(pod, "name");
    if (auto c = Precondition("UID", Meta(*binding, "uid"), Meta(pod, "uid"))) return std::move(*c);
    if (const std::string bound = StringAt(pod, "spec", "nodeName").value_or(""); !bound.empty()) {
      return Conflict("pod " + name + " is already assigned to node \"" + bound + "\"");
    }
    if (!Meta(pod, "deletionTimestamp").empty()) {
      return Conflict("pod " + name + " is being deleted, cannot be assigned to a host");
    }
    pod["spec"].as_object()["nodeName"] = node;
    // The Binding's annotations join the pod's (BindingREST.setPodNodeAndMetadata), and its
    // labels too unless binding_drops_labels (servers before 1.35).
    if (const bj::value* meta = binding->if_contains("metadata"); meta && meta->is_object()) {
      for (const char* field : {"annotations", "labels"}) {
        if (std::string_view(field) == "labels" && owner->binding_drops_labels) continue;
        const bj::value* a = meta->as_object().if_contains(field);
        if (a == nullptr || !a->is_object()) continue;
        bj::value& pod_meta = pod["metadata"];
        if (!pod_meta.is_object()) pod_meta = bj::object{};
        bj::value& pod_values = pod_meta.as_object()[field];
        if (!pod_values.is_object()) pod_values = bj::object{};
        for (const auto& [k, v] : a->as_object()) pod_values.as_object()[k] = v;
      }
    }
    bj::object scheduled{{"type", "PodScheduled"}, {"status", "True"}};
    bj::object status{{"conditions", bj::array{scheduled}}};
    StrategicMerge(pod, bj::object{{"status", status}});
    Record("pods", "MODIFIED", key, std::move(pod));
    return HttpReply(201, R"({"kind":"Status","apiVersion":"v1","status":"Success","code":201})");
  }

  FakeReply List(Target& t, const std::string& resource, const std::string& ns,
                 const Selector& sel) {
    ++lists;
    std::size_t limit = t.query.contains("limit") ? std::stoul(t.query["limit"]) : 0;
    std::size_t offset = 0;
    std::size_t snapshot = 0;
    if (auto it = t.query.find("continue"); it != t.query.end() && !it->second.empty()) {
      // "<snapshot>:<offset>": the pages of one LIST serve the state of its first page.
      std::size_t colon = it->second.find(':');
      snapshot = std::stoul(it->second.substr(0, colon));
      offset = std::stoul(it->second.substr(colon + 1));
      if (owner->expire_continue_tokens || snapshot >= snapshots.size() ||
          snapshots[snapshot].rv < compacted) {
        return StatusReply(410, "Expired", "continue token expired");
      }
    } else {
      Snapshot snap{rv, {}};
      for (const auto& [key, obj] : store[resource]) {
        if ((ns.empty() || key.starts_with(ns + "/")) && Matches(sel, obj)) {
          snap.items.push_back(obj);
        }
      }
      snapshot = snapshots.size();
      snapshots.push_back(std::move(snap));
    }
    const std::vector<bj::object>& match = snapshots[snapshot].items;
    const std::string list_rv = std::to_string(snapshots[snapshot].rv);
    bj::array items;
    std::size_t end = limit == 0 ? match.size() : std::min(match.size(), offset + limit);
    for (std::size_t i = offset; i < end; ++i) items.push_back(match[i]);
    bj::object meta{{"resourceVersion", list_rv}};
    if (end < match.size()) {
      meta["continue"] = std::to_string(snapshot) + ":" + std::to_string(end);
      meta["remainingItemCount"] = match.size() - end;
    }
    bj::object body{{"kind", resource == "pods" ? "PodList" : "NodeList"},
                    {"apiVersion", "v1"},
                    {"metadata", meta},
                    {"items", std::move(items)}};
    return HttpReply(200, bj::serialize(body));
  }

  // The event `e` as a watch with `sel` sees it: an object that starts to match is ADDED, one
  // that stops matching is DELETED (its last matching state, at the event's RV); "" when the
  // watch does not see it at all.
  static std::string Filtered(const LoggedEvent& e, const Selector& sel) {
    const bool now = e.type != "DELETED" && Matches(sel, e.object);
    const bool before =
        e.type == "DELETED" ? Matches(sel, e.object) : e.prev.has_value() && Matches(sel, *e.prev);
    std::string type;
    bj::object obj = e.object;
    if (now && before) {
      type = "MODIFIED";
    } else if (now) {
      type = "ADDED";
    } else if (before) {
      type = "DELETED";
      if (e.type != "DELETED") {
        obj = *e.prev;
        obj["metadata"].as_object()["resourceVersion"] = std::to_string(e.rv);
      }
    } else {
      return "";
    }
    return bj::serialize(bj::object{{"type", type}, {"object", std::move(obj)}});
  }

  FakeReply Watch(Target& t, const std::string& resource, const std::string& ns,
                  const Selector& sel) {
    ++watches;
    std::string from_text = t.query["resourceVersion"];
    watch_rvs.push_back(from_text);
    std::vector<std::string> lines;
    if (from_text.empty() || from_text == "0") {
      // As the apiserver: the current state as ADDED events, then what happens next.
      for (const auto& [key, obj] : store[resource]) {
        if ((ns.empty() || key.starts_with(ns + "/")) && Matches(sel, obj)) {
          lines.push_back(bj::serialize(bj::object{{"type", "ADDED"}, {"object", obj}}));
        }
      }
      from_text = std::to_string(rv);
    }
    std::int64_t from = std::stoll(from_text);
    if (from < compacted) {
      std::string msg =
          "too old resource version: " + from_text + " (" + std::to_string(compacted) + ")";
      if (!owner->gone_as_event) return StatusReply(410, "Expired", msg);
      bj::object ev{{"type", "ERROR"},
                    {"object", bj::parse(StatusJson(410, "Expired", msg)).as_object()}};
      return WatchReply({bj::serialize(ev)});
    }
    for (const LoggedEvent& e : log) {
      if (e.rv > from && e.resource == resource && (ns.empty() || e.ns == ns)) {
        if (std::string line = Filtered(e, sel); !line.empty()) lines.push_back(std::move(line));
      }
    }
    const bool bookmarks = t.query["allowWatchBookmarks"] == "true";
    const std::string kind = resource == "pods" ? "Pod" : "Node";
    std::string bytes(kChunkedHeader);
    for (const std::string& line : lines) bytes += Chunk(line);
    if (owner->end_watches_at_once) {
      if (bookmarks && owner->send_bookmarks) bytes += Chunk(BookmarkLine(kind));
      bytes += kLastChunk;
      return FakeReply{std::move(bytes), false, {}, nullptr};
    }
    auto stream = std::make_shared<FakeStream>();
    watchers.push_back({resource, ns, sel, bookmarks, kind, stream});
    return FakeReply{std::move(bytes), false, {}, std::move(stream)};
  }

  void EndWatches() {
    for (Watcher& w : watchers) {
      std::string last;
      if (w.bookmarks && owner->send_bookmarks) last = Chunk(BookmarkLine(w.kind));
      w.stream->End(last + std::string(kLastChunk));
    }
    watchers.clear();
  }
};

FakeApiServer::FakeApiServer(boost::asio::io_context& io) : impl_(std::make_unique<Impl>()) {
  impl_->owner = this;
  Impl* impl = impl_.get();
  impl_->http = std::make_unique<FakeHttpServer>(
      io, [impl](const FakeRequest& req) { return impl->Handle(req); });
}

FakeApiServer::~FakeApiServer() {
  for (Impl::Watcher& w : impl_->watchers) w.stream->End(std::string(kLastChunk));
}

std::string FakeApiServer::url() const { return impl_->http->url(); }
FakeHttpServer& FakeApiServer::http() { return *impl_->http; }

std::int64_t FakeApiServer::AddPod(const std::string& ns, const std::string& name,
                                   const std::map<std::string, std::string>& labels,
                                   const std::string& node) {
  bj::object l;
  for (const auto& [k, v] : labels) l[k] = v;
  bj::object obj{
      {"kind", "Pod"},
      {"apiVersion", "v1"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"uid", "uid-" + ns + "-" + name + "-" + std::to_string(impl_->rv + 1)},
        {"labels", l}}},
      {"spec",
       {{"schedulerName", pod_scheduler_name}, {"nodeName", node}, {"containers", bj::array{}}}},
      {"status", {{"phase", "Pending"}}}};
  if (pod_priority) obj["spec"].as_object()["priority"] = *pod_priority;
  if (!pod_merge_patch.empty()) {
    std::optional<bj::object> patch = ParseObject(pod_merge_patch);
    if (!patch) return 0;
    MergePatch(obj, *patch);
  }
  return impl_->Record("pods", "ADDED", ns + "/" + name, std::move(obj));
}

std::int64_t FakeApiServer::PatchPod(const std::string& ns, const std::string& name,
                                     const std::string& merge_patch) {
  auto& pods = impl_->store["pods"];
  auto it = pods.find(ns + "/" + name);
  std::optional<bj::object> patch = ParseObject(merge_patch);
  if (it == pods.end() || !patch) return 0;
  bj::object obj = it->second;
  MergePatch(obj, *patch);
  return impl_->Record("pods", "MODIFIED", ns + "/" + name, std::move(obj));
}

std::int64_t FakeApiServer::SetPodNode(const std::string& ns, const std::string& name,
                                       const std::string& node) {
  return PatchPod(ns, name, bj::serialize(bj::object{{"spec", {{"nodeName", node}}}}));
}

std::int64_t FakeApiServer::DeletePod(const std::string& ns, const std::string& name) {
  auto& pods = impl_->store["pods"];
  auto it = pods.find(ns + "/" + name);
  if (it == pods.end()) return 0;
  bj::object obj = it->second;
  return impl_->Record("pods", "DELETED", ns + "/" + name, std::move(obj));
}

std::int64_t FakeApiServer::PutNode(const std::string& name, const std::string& fields) {
  std::optional<bj::object> parts = ParseObject(fields);
  if (!parts) return 0;
  auto& nodes = impl_->store["nodes"];
  const bool added = !nodes.contains(name);
  const std::string uid = added ? "uid-node-" + name + "-" + std::to_string(impl_->rv + 1)
                                : Meta(nodes.at(name), "uid");
  bj::object obj{{"kind", "Node"},
                 {"apiVersion", "v1"},
                 {"metadata", {{"name", name}, {"uid", uid}}},
                 {"spec", bj::object{}},
                 {"status", bj::object{}}};
  MergePatch(obj, *parts);
  obj["metadata"].as_object()["name"] = name;
  obj["metadata"].as_object()["uid"] = uid;
  return impl_->Record("nodes", added ? "ADDED" : "MODIFIED", name, std::move(obj));
}

std::int64_t FakeApiServer::PatchNode(const std::string& name, const std::string& merge_patch) {
  auto& nodes = impl_->store["nodes"];
  auto it = nodes.find(name);
  std::optional<bj::object> patch = ParseObject(merge_patch);
  if (it == nodes.end() || !patch) return 0;
  bj::object obj = it->second;
  MergePatch(obj, *patch);
  return impl_->Record("nodes", "MODIFIED", name, std::move(obj));
}

std::string FakeApiServer::NodeJson(const std::string& name) const {
  const auto& nodes = impl_->store.at("nodes");
  auto it = nodes.find(name);
  return it == nodes.end() ? "" : bj::serialize(it->second);
}

void FakeApiServer::CloseWatches() { impl_->EndWatches(); }

void FakeApiServer::Bookmark() {
  if (!send_bookmarks) return;
  for (Impl::Watcher& w : impl_->watchers) {
    if (w.bookmarks) w.stream->Push(Chunk(impl_->BookmarkLine(w.kind)));
  }
}

int FakeApiServer::open_watches() const {
  return static_cast<int>(std::ranges::count_if(
      impl_->watchers, [](const Impl::Watcher& w) { return w.stream->open(); }));
}

const std::vector<std::string>& FakeApiServer::events() const { return impl_->events; }

std::string FakeApiServer::EventJson(const std::string& ns, const std::string& name) const {
  auto it = impl_->event_store.find(ns + "/" + name);
  return it == impl_->event_store.end() ? "" : bj::serialize(it->second);
}

void FakeApiServer::Compact() {
  impl_->compacted = impl_->rv;
  impl_->log.clear();
}

std::int64_t FakeApiServer::rv() const { return impl_->rv; }

std::string FakeApiServer::PodJson(const std::string& ns, const std::string& name) const {
  const auto& pods = impl_->store.at("pods");
  auto it = pods.find(ns + "/" + name);
  return it == pods.end() ? "" : bj::serialize(it->second);
}

void FakeApiServer::Intercept(Hook hook) { impl_->hook = std::move(hook); }

FakeReply FakeApiServer::Answer(const FakeRequest& req) { return impl_->Serve(req); }
int FakeApiServer::lists() const { return impl_->lists; }
int FakeApiServer::writes() const { return impl_->writes; }
int FakeApiServer::watches() const { return impl_->watches; }
const std::vector<std::string>& FakeApiServer::watch_rvs() const { return impl_->watch_rvs; }

FakeReply FakeApiServer::WatchReply(const std::vector<std::string>& lines, bool cut) {
  std::string out(kChunkedHeader);
  char size[32];
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string chunk = lines[i] + "\n";
    bool last = i + 1 == lines.size();
    if (cut && last) {
      std::snprintf(size, sizeof size, "%zx\r\n", chunk.size() + 100);
      out += size;
      out += chunk.substr(0, chunk.size() / 2);
      return FakeReply{std::move(out), true, {}, nullptr};
    }
    out += Chunk(lines[i]);
  }
  out += kLastChunk;
  return FakeReply{std::move(out), cut, {}, nullptr};
}

std::string FakeApiServer::EventLine(const std::string& type, const std::string& ns,
                                     const std::string& name) const {
  const auto& pods = impl_->store.at("pods");
  auto it = pods.find(ns + "/" + name);
  bj::object obj = it == pods.end() ? bj::object{} : it->second;
  bj::object ev{{"type", type}, {"object", obj}};
  return bj::serialize(ev);
}

}  // namespace sb::testing
