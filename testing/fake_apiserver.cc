// SPDX-License-Identifier: Apache-2.0
#include "testing/fake_apiserver.h"

#include <algorithm>
#include <cstdio>
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
std::optional<std::string> ParseSelectors(std::map<std::string, std::string>& query,
                                          Selector* out) {
  for (const std::string& t : SplitTerms(query["fieldSelector"])) {
    Requirement r;
    if (auto e = ParseTerm(t, false, &r)) return e;
    static const std::vector<std::string> kFields = {"metadata.name", "metadata.namespace",
                                                     "spec.nodeName", "spec.schedulerName"};
    if (std::ranges::find(kFields, r.key) == kFields.end()) {
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

}  // namespace

struct FakeApiServer::Impl {
  std::int64_t rv = 1;
  std::int64_t compacted = 0;
  std::map<std::string, bj::object> pods;  // "ns/name" -> object
  struct LoggedEvent {
    std::int64_t rv;
    std::string ns;
    std::string line;
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
  Hook hook;
  int lists = 0;
  int watches = 0;
  std::vector<std::string> watch_rvs;
  FakeApiServer* owner = nullptr;
  std::unique_ptr<FakeHttpServer> http;

  std::int64_t Record(const std::string& type, const std::string& key, bj::object obj) {
    ++rv;
    obj["metadata"].as_object()["resourceVersion"] = std::to_string(rv);
    std::string ns(obj["metadata"].as_object()["namespace"].as_string());
    bj::object ev{{"type", type}, {"object", obj}};
    std::optional<bj::object> prev;
    if (auto it = pods.find(key); it != pods.end()) prev = it->second;
    log.push_back({rv, ns, bj::serialize(ev), type, obj, std::move(prev)});
    if (type == "DELETED") {
      pods.erase(key);
    } else {
      pods[key] = std::move(obj);
    }
    return rv;
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
    Target t = ParseTarget(req.target);
    std::string ns;
    if (t.path.starts_with("/api/v1/namespaces/") && t.path.ends_with("/pods")) {
      ns = t.path.substr(19, t.path.size() - 19 - 5);
    } else if (t.path != "/api/v1/pods") {
      return HttpReply(404, StatusJson(404, "NotFound", "no such path " + t.path));
    }
    if (req.method != "GET") {
      return HttpReply(405, StatusJson(405, "MethodNotAllowed", "read-only fake"));
    }
    Selector sel;
    if (std::optional<std::string> bad = ParseSelectors(t.query, &sel)) {
      return HttpReply(400, StatusJson(400, "BadRequest", *bad));
    }
    if (t.query.contains("watch")) {
      return Watch(t, ns, sel);
    }
    return List(t, ns, sel);
  }

  FakeReply List(Target& t, const std::string& ns, const Selector& sel) {
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
        return HttpReply(410, StatusJson(410, "Expired", "continue token expired"));
      }
    } else {
      Snapshot snap{rv, {}};
      for (const auto& [key, obj] : pods) {
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
    bj::object body{
        {"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", meta}, {"items", std::move(items)}};
    return HttpReply(200, bj::serialize(body));
  }

  // The event `e` as a watch with `sel` sees it: an object that starts to match is ADDED, one
  // that stops matching is DELETED (its last matching state, at the event's RV); "" when the
  // watch does not see it at all.
  static std::string Filtered(const LoggedEvent& e, const Selector& sel) {
    if (sel.fields.empty() && sel.labels.empty()) return e.line;
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

  FakeReply Watch(Target& t, const std::string& ns, const Selector& sel) {
    ++watches;
    std::string from_text = t.query["resourceVersion"];
    watch_rvs.push_back(from_text);
    std::vector<std::string> lines;
    if (from_text.empty() || from_text == "0") {
      // As the apiserver: the current state as ADDED events, then what happens next.
      for (const auto& [key, obj] : pods) {
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
      if (!owner->gone_as_event) {
        return HttpReply(410, StatusJson(410, "Expired", msg));
      }
      bj::object ev{{"type", "ERROR"},
                    {"object", bj::parse(StatusJson(410, "Expired", msg)).as_object()}};
      return WatchReply({bj::serialize(ev)});
    }
    for (const LoggedEvent& e : log) {
      if (e.rv > from && (ns.empty() || e.ns == ns)) {
        if (std::string line = Filtered(e, sel); !line.empty()) lines.push_back(std::move(line));
      }
    }
    const bool bookmarks = owner->send_bookmarks && t.query["allowWatchBookmarks"] == "true";
    if (bookmarks) {
      bj::object ev{{"type", "BOOKMARK"},
                    {"object",
                     {{"kind", "Pod"},
                      {"apiVersion", "v1"},
                      {"metadata", {{"resourceVersion", std::to_string(rv)}}}}}};
      lines.push_back(bj::serialize(ev));
    }
    FakeReply r = WatchReply(lines);
    if (lines.size() <= (bookmarks ? 1u : 0u)) {
      r.delay = owner->empty_watch_delay;
    }
    return r;
  }
};

FakeApiServer::FakeApiServer(boost::asio::io_context& io) : impl_(std::make_unique<Impl>()) {
  impl_->owner = this;
  Impl* impl = impl_.get();
  impl_->http = std::make_unique<FakeHttpServer>(
      io, [impl](const FakeRequest& req) { return impl->Handle(req); });
}

FakeApiServer::~FakeApiServer() = default;

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
  return impl_->Record("ADDED", ns + "/" + name, std::move(obj));
}

std::int64_t FakeApiServer::PatchPod(const std::string& ns, const std::string& name,
                                     const std::string& merge_patch) {
  auto it = impl_->pods.find(ns + "/" + name);
  std::optional<bj::object> patch = ParseObject(merge_patch);
  if (it == impl_->pods.end() || !patch) return 0;
  bj::object obj = it->second;
  MergePatch(obj, *patch);
  return impl_->Record("MODIFIED", ns + "/" + name, std::move(obj));
}

std::int64_t FakeApiServer::SetPodNode(const std::string& ns, const std::string& name,
                                       const std::string& node) {
  auto it = impl_->pods.find(ns + "/" + name);
  if (it == impl_->pods.end()) return 0;
  bj::object obj = it->second;
  obj["spec"].as_object()["nodeName"] = node;
  return impl_->Record("MODIFIED", ns + "/" + name, std::move(obj));
}

std::int64_t FakeApiServer::DeletePod(const std::string& ns, const std::string& name) {
  auto it = impl_->pods.find(ns + "/" + name);
  if (it == impl_->pods.end()) return 0;
  bj::object obj = it->second;
  return impl_->Record("DELETED", ns + "/" + name, std::move(obj));
}

void FakeApiServer::Compact() {
  impl_->compacted = impl_->rv;
  impl_->log.clear();
}

std::int64_t FakeApiServer::rv() const { return impl_->rv; }

std::string FakeApiServer::PodJson(const std::string& ns, const std::string& name) const {
  auto it = impl_->pods.find(ns + "/" + name);
  return it == impl_->pods.end() ? "" : bj::serialize(it->second);
}

void FakeApiServer::Intercept(Hook hook) { impl_->hook = std::move(hook); }
int FakeApiServer::lists() const { return impl_->lists; }
int FakeApiServer::watches() const { return impl_->watches; }
const std::vector<std::string>& FakeApiServer::watch_rvs() const { return impl_->watch_rvs; }

FakeReply FakeApiServer::WatchReply(const std::vector<std::string>& lines, bool cut) {
  std::string out =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  char size[32];
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string chunk = lines[i] + "\n";
    bool last = i + 1 == lines.size();
    if (cut && last) {
      std::snprintf(size, sizeof size, "%zx\r\n", chunk.size() + 100);
      out += size;
      out += chunk.substr(0, chunk.size() / 2);
      return FakeReply{std::move(out), true, {}};
    }
    std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    out += size;
    out += chunk;
    out += "\r\n";
  }
  out += "0\r\n\r\n";
  return FakeReply{std::move(out), cut, {}};
}

std::string FakeApiServer::EventLine(const std::string& type, const std::string& ns,
                                     const std::string& name) const {
  auto it = impl_->pods.find(ns + "/" + name);
  bj::object obj = it == impl_->pods.end() ? bj::object{} : it->second;
  bj::object ev{{"type", type}, {"object", obj}};
  return bj::serialize(ev);
}

}  // namespace sb::testing
