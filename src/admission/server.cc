// SPDX-License-Identifier: Apache-2.0
#include "admission/server.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "kube/informer.h"

namespace sb::admission {
namespace asio = boost::asio;

// The server's state, shared with the HTTP handlers.
struct AdmissionState {
  asio::any_io_executor executor;
  Policy policy;
  ServerOptions options;
  kube::Client* client = nullptr;  // optional; not owned
  std::unique_ptr<net::HttpServer> webhook;
  std::unique_ptr<net::HttpServer> health;
  std::unique_ptr<kube::Informer<kube::Namespace>> namespaces;
  bool informer_running = false;
  ServerStats stats;

  bool Ready() const {
    return webhook && webhook->listening() && (!namespaces || namespaces->HasSynced());
  }
};

struct Server::State : AdmissionState {};

net::ClientOptions NamespaceClientOptions() {
  net::ClientOptions o;
  o.timeout = std::chrono::seconds(3);
  o.connect_timeout = std::chrono::seconds(2);
  o.max_attempts = 1;
  return o;
}

namespace {

using StatePtr = std::shared_ptr<AdmissionState>;

net::HttpResponse JsonResponse(std::string body) {
  return net::TextResponse(200, std::move(body), "application/json");
}

// The labels of namespace `ns`: from the informer's cache, else read with a GET. nullopt (with
// `why`) when neither works.
asio::awaitable<std::optional<Labels>> NamespaceLabels(StatePtr s, std::string ns,
                                                       std::string* why) {
  if (s->namespaces) {
    if (auto cached = s->namespaces->cache().Get(ns)) {
      co_return cached->metadata.labels;
    }
  }
  if (s->client == nullptr) {
    *why = "no Kubernetes client";
    co_return std::nullopt;
  }
  ++s->stats.namespace_gets;
  kube::ResourceRef ref = kube::NamespacesRef().WithName(ns);
  Result<kube::Namespace> got = co_await kube::GetAs<kube::Namespace>(*s->client, std::move(ref));
  if (!got) {
    *why = got.error().ToString();
    co_return std::nullopt;
  }
  co_return got->metadata.labels;
}

// GETs one DRA object into `into` (by name); a 404 is noted in `missing` (when given), any other
// failure logged and counted: the check then decides without it. `out` is shared with the
// other reads of the review, which run at once.
asio::awaitable<void> ReadDraObject(StatePtr s, kube::ResourceRef ref, std::string pod,
                                    std::shared_ptr<DraObjects> out, bool is_template) {
  ++s->stats.dra_reads;
  std::string name = ref.name;
  std::string what = ref.resource;
  Result<kube::GenericObject> got = co_await kube::GetAs<kube::GenericObject>(*s->client, ref);
  auto& into = is_template ? out->claim_templates : out->device_classes;
  if (got) {
    into.insert_or_assign(std::move(name), std::move(*got));
  } else if (got.error().code == ErrorCode::kNotFound) {
    if (is_template) out->missing_templates.insert(std::move(name));
  } else {
    ++s->stats.dra_read_failures;
    spdlog::warn("admission: cannot read {} {} for pod {}: {}; judged without it", what, name, pod,
                 got.error().ToString());
  }
}

// Runs `tasks` side by side; returns when every one has ended.
asio::awaitable<void> RunSideBySide(std::vector<asio::awaitable<void>> tasks) {
  if (tasks.empty()) co_return;
  auto executor = co_await asio::this_coro::executor;
  auto left = std::make_shared<std::size_t>(tasks.size());
  auto all_done =
      std::make_shared<asio::steady_timer>(executor, asio::steady_timer::time_point::max());
  for (asio::awaitable<void>& t : tasks) {
    asio::co_spawn(executor, std::move(t), [left, all_done](const std::exception_ptr&) {
      if (--*left == 0) all_done->cancel();
    });
  }
  boost::system::error_code ec;
  if (*left > 0) co_await all_done->async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// The ResourceClaimTemplates and DeviceClasses the DRA check of `req` needs (DraObjectsToRead),
// then the classes the templates name. Each round's reads run at once (review R-8): with one try
// of at most 3 s a read, the two rounds stay inside the webhook's 10 s however many objects a
// pod names, where one after another four slow reads made the apiserver give up on the review.
asio::awaitable<DraObjects> ReadDraObjects(StatePtr s, const Request& req, DraNeeds needs) {
  if (s->client == nullptr) {
    spdlog::warn(
        "admission: no Kubernetes client: DeviceClasses and ResourceClaimTemplates of pod {}/{} "
        "not read; judged without them",
        req.namespace_, req.name);
    co_return DraObjects{};
  }
  auto out = std::make_shared<DraObjects>();
  std::string ns = req.namespace_.empty() && req.object ? req.object->namespace_ : req.namespace_;
  const std::string pod = req.namespace_ + "/" + req.name;
  std::vector<asio::awaitable<void>> reads;
  for (const std::string& t : needs.claim_templates) {
    reads.push_back(
        ReadDraObject(s, kube::DraRef("resourceclaimtemplates", ns, t), pod, out, true));
  }
  co_await RunSideBySide(std::move(reads));
  for (const auto& [name, tmpl] : out->claim_templates) {
    for (std::string& cls : TemplateDeviceClasses(tmpl)) needs.device_classes.insert(cls);
  }
  reads.clear();
  for (const std::string& c : needs.device_classes) {
    reads.push_back(ReadDraObject(s, kube::DraRef("deviceclasses", "", c), pod, out, false));
  }
  co_await RunSideBySide(std::move(reads));
  co_return std::move(*out);
}

asio::awaitable<net::HttpResponse> HandleReview(StatePtr s, Hook hook, net::ServerRequest http) {
  if (s == nullptr) {
    co_return net::TextResponse(503, "shutting down\n");
  }
  if (http.method != "POST") {
    ++s->stats.bad_requests;
    net::HttpResponse r = net::TextResponse(405, "method not allowed: use POST\n");
    r.headers.push_back({"Allow", "POST"});
    co_return r;
  }
  std::string_view content_type = http.HeaderValue("Content-Type");
  if (!content_type.empty() && !content_type.starts_with("application/json")) {
    ++s->stats.bad_requests;
    co_return net::TextResponse(
        400, "contentType=" + std::string(content_type) + ", expected application/json\n");
  }
  Result<Request> req = DecodeReview(http.body);
  if (!req) {
    ++s->stats.bad_requests;
    spdlog::warn("admission: {} from {}: {}", http.path, http.remote, req.error().message);
    co_return net::TextResponse(400, req.error().message + "\n");
  }
  ++s->stats.reviews;
  Decision decision;
  if (hook == Hook::kMutate) {
    std::optional<Labels> labels;
    // A pod whose schedulerName already is the bridge's is managed whatever its namespace: its
    // labels are not needed (nor a failure to read them).
    const bool ours_by_name = req->object && req->object->scheduler_name &&
                              *req->object->scheduler_name == s->policy.scheduler_name;
    bool need_labels = s->policy.namespace_selector.has_value() && req->kind == "Pod" &&
                       req->operation == "CREATE" && req->subresource.empty() &&
                       req->object.has_value() && !ours_by_name;
    std::string ns = req->namespace_;
    if (ns.empty() && req->object) {
      ns = req->object->namespace_;
    }
    std::string why;
    if (need_labels) {
      labels = co_await NamespaceLabels(s, ns, &why);
    }
    if (need_labels && !labels) {
      // Fail open: refusing would stop every pod CREATE in the webhook's namespaces (with
      // failurePolicy Fail) whenever the apiserver hiccups; the pod stays with its own scheduler.
      ++s->stats.namespace_failures;
      spdlog::warn(
          "admission: cannot read the labels of namespace {} (pod {}): {}; admitted unchanged", ns,
          req->name, why);
      decision = Decision::Allow();
      decision.warnings.push_back("slurm-bridge admission: cannot read namespace " + ns + " (" +
                                  why + "); the pod was admitted unchanged, not handed to " +
                                  s->policy.scheduler_name);
    } else {
      decision = Mutate(*req, s->policy, labels ? &*labels : nullptr);
    }
  } else {
    DraObjects dra;
    if (DraNeeds needs = DraObjectsToRead(*req, s->policy); !needs.empty()) {
      dra = co_await ReadDraObjects(s, *req, std::move(needs));
    }
    decision = Validate(*req, s->policy, dra);
  }
  if (!decision.allowed) {
    ++s->stats.denied;
    spdlog::info("admission: denied {} of pod {}/{} by {}: {}", req->operation, req->namespace_,
                 req->name, req->username, decision.message);
  } else if (!decision.patch.empty()) {
    ++s->stats.patched;
    spdlog::debug("admission: patched pod {}/{}: {}", req->namespace_, req->name, decision.patch);
  }
  co_return JsonResponse(EncodeReview(req->uid, decision));
}

asio::awaitable<void> RunInformer(StatePtr s) { co_await s->namespaces->Run(); }

}  // namespace

Server::Server(asio::any_io_executor executor, Policy policy, ServerOptions options,
               kube::Client* client)
    : s_(std::make_shared<State>()) {
  s_->executor = std::move(executor);
  s_->policy = std::move(policy);
  s_->options = std::move(options);
  s_->client = client;
}

Server::~Server() { Stop(); }

Result<void> Server::Start() {
  State& s = *s_;
  if (s.policy.namespace_selector && s.client == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "admission: managedNamespaceSelector needs a Kubernetes client");
  }
  net::ServerOptions web;
  web.bind_address = s.options.bind_address;
  web.cert_file = s.options.cert_file;
  web.key_file = s.options.key_file;
  web.tls_reload_interval = s.options.tls_reload_interval;
  web.header_timeout = s.options.header_timeout;
  web.max_connections_per_ip = s.options.max_connections_per_ip;
  web.name = "webhook";
  s.webhook = std::make_unique<net::HttpServer>(s.executor, web);
  for (auto [path, hook] :
       {std::pair{kMutatePodPath, Hook::kMutate}, std::pair{kValidatePodPath, Hook::kValidate}}) {
    // A weak pointer: the routes live in the HttpServer that State owns.
    std::weak_ptr<State> weak = s_;
    Hook h = hook;
    s.webhook->Route(std::string(path), [weak, h](net::ServerRequest r) {
      return HandleReview(weak.lock(), h, std::move(r));
    });
  }
  if (Result<void> r = s.webhook->Start(); !r) {
    return r;
  }
  if (!s.options.health_bind_address.empty() && s.options.health_bind_address != "0") {
    net::ServerOptions hopt;
    hopt.bind_address = s.options.health_bind_address;
    hopt.name = "health";
    s.health = std::make_unique<net::HttpServer>(s.executor, hopt);
    s.health->RouteSync("/healthz",
                        [](const net::ServerRequest&) { return net::TextResponse(200, "ok"); });
    std::weak_ptr<State> weak = s_;
    s.health->RouteSync("/readyz", [weak](const net::ServerRequest&) {
      StatePtr st = weak.lock();
      if (st && st->Ready()) {
        return net::TextResponse(200, "ok");
      }
      return net::TextResponse(503, "not ready: waiting for the namespace cache\n");
    });
    if (Result<void> r = s.health->Start(); !r) {
      s.webhook->Stop();
      return r;
    }
  }
  if (s.policy.namespace_selector) {
    s.namespaces =
        std::make_unique<kube::Informer<kube::Namespace>>(*s.client, kube::NamespacesRef());
    s.namespaces->reflector().SetErrorHandler(
        [](const Error& e) { spdlog::warn("admission: namespace watch: {}", e.ToString()); });
    s.informer_running = true;
    asio::co_spawn(s.executor, RunInformer(s_), asio::detached);
  }
  return {};
}

void Server::Stop() {
  State& s = *s_;
  if (s.webhook) {
    s.webhook->Stop();
  }
  if (s.health) {
    s.health->Stop();
  }
  if (s.namespaces && s.informer_running) {
    s.informer_running = false;
    s.namespaces->Stop();
  }
}

std::uint16_t Server::port() const { return s_->webhook ? s_->webhook->port() : 0; }
std::uint16_t Server::health_port() const { return s_->health ? s_->health->port() : 0; }
bool Server::Ready() const { return s_->Ready(); }
const ServerStats& Server::stats() const { return s_->stats; }

}  // namespace sb::admission
