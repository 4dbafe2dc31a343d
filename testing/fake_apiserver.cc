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
  };
  std::vector<LoggedEvent> log;
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
    log.push_back({rv, ns, bj::serialize(ev)});
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
    if (t.query.contains("watch")) {
      return Watch(t, ns);
    }
    return List(t, ns);
  }

  FakeReply List(Target& t, const std::string& ns) {
    ++lists;
    std::size_t limit = t.query.contains("limit") ? std::stoul(t.query["limit"]) : 0;
    std::size_t offset = 0;
    std::string list_rv = std::to_string(rv);
    if (auto it = t.query.find("continue"); it != t.query.end() && !it->second.empty()) {
      if (owner->expire_continue_tokens) {
        return HttpReply(410, StatusJson(410, "Expired", "continue token expired"));
      }
      std::size_t colon = it->second.find(':');
      offset = std::stoul(it->second.substr(0, colon));
      list_rv = it->second.substr(colon + 1);
    }
    std::vector<const bj::object*> match;
    for (const auto& [key, obj] : pods) {
      if (ns.empty() || key.starts_with(ns + "/")) match.push_back(&obj);
    }
    bj::array items;
    std::size_t end = limit == 0 ? match.size() : std::min(match.size(), offset + limit);
    for (std::size_t i = offset; i < end; ++i) items.push_back(*match[i]);
    bj::object meta{{"resourceVersion", list_rv}};
    if (end < match.size()) {
      meta["continue"] = std::to_string(end) + ":" + list_rv;
      meta["remainingItemCount"] = match.size() - end;
    }
    bj::object body{
        {"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", meta}, {"items", std::move(items)}};
    return HttpReply(200, bj::serialize(body));
  }

  FakeReply Watch(Target& t, const std::string& ns) {
    ++watches;
    std::string from_text = t.query["resourceVersion"];
    watch_rvs.push_back(from_text);
    std::int64_t from = from_text.empty() ? rv : std::stoll(from_text);
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
    std::vector<std::string> lines;
    for (const LoggedEvent& e : log) {
      if (e.rv > from && (ns.empty() || e.ns == ns)) lines.push_back(e.line);
    }
    if (owner->send_bookmarks) {
      bj::object ev{{"type", "BOOKMARK"},
                    {"object",
                     {{"kind", "Pod"},
                      {"apiVersion", "v1"},
                      {"metadata", {{"resourceVersion", std::to_string(rv)}}}}}};
      lines.push_back(bj::serialize(ev));
    }
    FakeReply r = WatchReply(lines);
    if (lines.size() <= (owner->send_bookmarks ? 1u : 0u)) {
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
      {"spec", {{"schedulerName", "s"}, {"nodeName", node}, {"containers", bj::array{}}}},
      {"status", {{"phase", "Pending"}}}};
  return impl_->Record("ADDED", ns + "/" + name, std::move(obj));
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
