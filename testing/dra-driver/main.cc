// SPDX-License-Identifier: Apache-2.0
//
// testing/dra-driver/main.cc (test tooling)
//
// sb-test-dra-driver: the DRA kubelet plugin of the test environment's nodes (testenv/kube/node.sh
// starts one per kubelet, in the node's namespaces). It serves the drivers gpu.example.com (fake
// GPUs) and dra.cpu (CPUs) of one node to that node's kubelet (driver_logic.h says what each
// publishes and injects):
//   - per driver, the kubelet's plugin registration API on
//     <root-dir>/plugins_registry/<driver>-reg.sock and its DRA API v1 (NodePrepareResources,
//     NodeUnprepareResources) on <root-dir>/plugins/<driver>/dra.sock (gRPC, proto/);
//   - per driver, the node's ResourceSlice, created through the apiserver and created again
//     whenever it is missing (the kubelet deletes its node's slices when it starts), deleted on
//     SIGTERM / SIGINT;
//   - NodePrepareResources reads each claim, writes one CDI spec file per (driver, claim) into
//     --cdi-dir (containerd's cdi_spec_dirs) and answers the CDI device ids;
//     NodeUnprepareResources removes the file (idempotent). Errors go into the claim's `error`.
//     A claim owned by a pod annotated `dra.test/fail-first-prepare: "true"` fails its first
//     prepare on purpose (the kubelet's path after a refused claim, for the e2e tests).
// `sb-test-dra-driver cpuset-hook <cpus>` is the OCI createRuntime hook of dra.cpu claims: it
// reads the OCI state on stdin and writes <cpus> into the container's cgroup v1 cpuset.
//
// Thread model: gRPC's sync server threads run the handlers; the Kubernetes client is confined to
// one io_context thread, and handlers hand it work through co_spawn + std::future. The slice
// publisher is its own thread. The main thread waits for the signal. Logs go to stderr.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include "dra.grpc.pb.h"
#include "kube/client.h"
#include "kube/codec.h"
#include "kube/config.h"
#include "pluginregistration.grpc.pb.h"
#include "testing/dra-driver/driver_logic.h"

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;
namespace regpb = pluginregistration;
using sb::Result;
using sb::dra_driver::DriverSpec;

// The Kubernetes client on its own thread.
class Kube {
 public:
  explicit Kube(sb::kube::Config config) : config_(std::move(config)) {}
  ~Kube() {
    guard_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Result<void> Start() {
    auto http = sb::kube::MakeHttpClient(io_.get_executor(), config_);
    if (!http) return tl::unexpected(http.error());
    http_ = std::move(*http);
    client_ = sb::kube::MakeClient(*http_, config_.token);
    thread_ = std::thread([this] { io_.run(); });
    return {};
  }

  // Runs `call(client)` on the client's thread and waits for its answer (30 s at most).
  template <typename F>
  Result<std::string> Call(F call) {
    std::future<Result<std::string>> f = asio::co_spawn(
        io_,
        [this, call]() -> asio::awaitable<Result<std::string>> {
          co_return co_await call(*client_);
        },
        asio::use_future);
    if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      return sb::MakeError(sb::ErrorCode::kDeadlineExceeded,
                           "the apiserver did not answer in 30 s");
    }
    try {
      return f.get();
    } catch (const std::exception& e) {
      return sb::MakeError(sb::ErrorCode::kInternal, e.what());
    }
  }

  Result<std::string> Get(sb::kube::ResourceRef ref) {
    return Call([ref](sb::kube::Client& c) { return c.Get(ref); });
  }
  Result<std::string> Create(sb::kube::ResourceRef ref, std::string body) {
    return Call([ref, body](sb::kube::Client& c) { return c.Create(ref, body); });
  }
  Result<std::string> Delete(sb::kube::ResourceRef ref) {
    return Call([ref](sb::kube::Client& c) { return c.Delete(ref, {}); });
  }

 private:
  sb::kube::Config config_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_{io_.get_executor()};
  std::unique_ptr<sb::net::HttpClient> http_;
  std::unique_ptr<sb::kube::Client> client_;
  std::thread thread_;
};

sb::kube::ResourceRef SlicesRef() {
  return {.group = "resource.k8s.io", .version = "v1", .resource = "resourceslices"};
}
sb::kube::ResourceRef ClaimRef(std::string ns, std::string name) {
  return {.group = "resource.k8s.io",
          .version = "v1",
          .resource = "resourceclaims",
          .namespace_ = std::move(ns),
          .name = std::move(name)};
}

// Writes `text` to `path` through a temporary file and a rename, so that a reader (containerd's
// CDI cache) never sees half of it.
bool WriteFileAtomically(const fs::path& path, const std::string& text, std::string* why) {
  fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      *why = fmt::format("writing {}: {}", tmp.string(), std::strerror(errno));
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    *why = fmt::format("renaming {} to {}: {}", tmp.string(), path.string(), ec.message());
    return false;
  }
  return true;
}

// What one driver serves.
struct DriverContext {
  DriverSpec spec;
  std::string node;
  fs::path cdi_dir;
  std::string hook_binary;
  std::string hook_log;
  fs::path registration_socket;
  fs::path dra_socket;
  Kube* kube = nullptr;
  std::atomic<bool> registered{false};
};

class RegistrationService final : public regpb::Registration::Service {
 public:
  explicit RegistrationService(DriverContext* ctx) : ctx_(ctx) {}

  grpc::Status GetInfo(grpc::ServerContext*, const regpb::InfoRequest*,
                       regpb::PluginInfo* out) override {
    out->set_type("DRAPlugin");
    out->set_name(ctx_->spec.driver);
    out->set_endpoint(ctx_->dra_socket.string());
    out->add_supported_versions("v1.DRAPlugin");
    spdlog::info("{}: kubelet asked GetInfo (endpoint {})", ctx_->spec.driver,
                 ctx_->dra_socket.string());
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const regpb::RegistrationStatus* s,
                                        regpb::RegistrationStatusResponse*) override {
    if (s->plugin_registered()) {
      spdlog::info("{}: registered with the kubelet", ctx_->spec.driver);
    } else {
      spdlog::error("{}: the kubelet refused the registration: {}", ctx_->spec.driver, s->error());
    }
    ctx_->registered = s->plugin_registered();
    return grpc::Status::OK;
  }

 private:
  DriverContext* ctx_;
};

class DraService final : public drapb::DRAPlugin::Service {
 public:
  explicit DraService(DriverContext* ctx) : ctx_(ctx) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*,
                                    const drapb::NodePrepareResourcesRequest* req,
                                    drapb::NodePrepareResourcesResponse* resp) override {
    for (const drapb::Claim& claim : req->claims()) {
      drapb::NodePrepareResourceResponse& r = (*resp->mutable_claims())[claim.uid()];
      std::string why = Prepare(claim, &r);
      if (!why.empty()) {
        r.Clear();
        r.set_error(why);
        spdlog::error("{}: prepare {}/{} ({}): {}", ctx_->spec.driver, claim.namespace_(),
                      claim.name(), claim.uid(), why);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                      const drapb::NodeUnprepareResourcesRequest* req,
                                      drapb::NodeUnprepareResourcesResponse* resp) override {
    for (const drapb::Claim& claim : req->claims()) {
      drapb::NodeUnprepareResourceResponse& r = (*resp->mutable_claims())[claim.uid()];
      fs::path file = ctx_->cdi_dir / sb::dra_driver::CdiFileName(ctx_->spec.driver, claim.uid());
      std::error_code ec;
      bool removed = fs::remove(file, ec);
      if (ec) {
        r.set_error(fmt::format("removing {}: {}", file.string(), ec.message()));
        spdlog::error("{}: unprepare {}/{} ({}): {}", ctx_->spec.driver, claim.namespace_(),
                      claim.name(), claim.uid(), r.error());
      } else {
        spdlog::info("{}: unprepared {}/{} ({}){}", ctx_->spec.driver, claim.namespace_(),
                     claim.name(), claim.uid(), removed ? "" : " (no CDI file: nothing to do)");
      }
    }
    return grpc::Status::OK;
  }

 private:
  // Whether the claim's owning pod asks for its first prepare to fail, and this is it.
  bool FailFirstPrepare(const drapb::Claim& claim, const std::string& claim_json) {
    Result<sb::kube::GenericObject> object = sb::kube::Decode<sb::kube::GenericObject>(claim_json);
    if (!object) return false;
    for (const sb::kube::OwnerReference& owner : object->metadata.owner_references) {
      if (owner.kind != "Pod") continue;
      Result<std::string> body =
          ctx_->kube->Get(sb::kube::PodsRef(claim.namespace_()).WithName(owner.name));
      if (!body) return false;
      Result<sb::kube::Pod> pod = sb::kube::Decode<sb::kube::Pod>(*body);
      if (!pod) return false;
      auto flag = pod->metadata.annotations.find("dra.test/fail-first-prepare");
      if (flag == pod->metadata.annotations.end() || flag->second != "true") return false;
      std::lock_guard<std::mutex> lock(failed_mu_);
      return failed_once_.insert(claim.uid()).second;
    }
    return false;
  }

  // Prepares one claim into `r`; the reason when it cannot.
  std::string Prepare(const drapb::Claim& claim, drapb::NodePrepareResourceResponse* r) {
    Result<std::string> body = ctx_->kube->Get(ClaimRef(claim.namespace_(), claim.name()));
    if (!body) return fmt::format("reading the claim: {}", body.error().ToString());
    if (FailFirstPrepare(claim, *body)) {
      return "first prepare failed on purpose (annotation dra.test/fail-first-prepare)";
    }
    auto allocated =
        sb::dra_driver::ClaimDevices(*body, claim.uid(), ctx_->spec.driver, ctx_->node);
    if (!allocated) return allocated.error().message;
    auto prepared = sb::dra_driver::PrepareClaim(ctx_->spec, claim.uid(), *allocated,
                                                 ctx_->hook_binary, ctx_->hook_log);
    if (!prepared) return prepared.error().message;
    if (!prepared->cdi_file.empty()) {
      std::string why;
      if (!WriteFileAtomically(ctx_->cdi_dir / prepared->cdi_file, prepared->cdi_json, &why)) {
        return why;
      }
    }
    std::vector<std::string> names;
    for (const sb::dra_driver::PreparedDevice& d : prepared->devices) {
      drapb::Device* out = r->add_devices();
      for (const std::string& q : d.requests) out->add_request_names(q);
      out->set_pool_name(d.pool);
      out->set_device_name(d.device);
      for (const std::string& id : d.cdi_ids) out->add_cdi_device_ids(id);
      names.push_back(d.device);
    }
    spdlog::info("{}: prepared {}/{} ({}): devices [{}]{}", ctx_->spec.driver, claim.namespace_(),
                 claim.name(), claim.uid(), fmt::join(names, ", "),
                 prepared->cdi_file.empty() ? "" : ", CDI spec " + prepared->cdi_file);
    return "";
  }

  std::mutex failed_mu_;
  std::set<std::string> failed_once_;  // claim UIDs failed on purpose

  DriverContext* ctx_;
};

// Keeps each driver's ResourceSlice in the apiserver until stopped, then deletes it.
class SlicePublisher {
 public:
  SlicePublisher(Kube* kube, std::string node, std::vector<DriverContext*> drivers,
                 std::chrono::seconds period)
      : kube_(kube), node_(std::move(node)), drivers_(std::move(drivers)), period_(period) {}

  void Start() {
    // A slice left by an earlier run may describe other devices: replaced.
    for (DriverContext* d : drivers_) {
      (void)kube_->Delete(SlicesRef().WithName(sb::dra_driver::SliceName(node_, d->spec.driver)));
    }
    thread_ = std::thread([this] { Run(); });
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    for (DriverContext* d : drivers_) {
      std::string name = sb::dra_driver::SliceName(node_, d->spec.driver);
      Result<std::string> r = kube_->Delete(SlicesRef().WithName(name));
      if (r || r.error().code == sb::ErrorCode::kNotFound) {
        spdlog::info("{}: ResourceSlice {} deleted", d->spec.driver, name);
      } else {
        spdlog::error("{}: deleting ResourceSlice {}: {}", d->spec.driver, name,
                      r.error().ToString());
      }
    }
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      Sync();
      lock.lock();
      cv_.wait_for(lock, period_, [this] { return stop_; });
    }
  }

  void Sync() {
    if (node_uid_.empty()) {
      Result<std::string> node = kube_->Get(sb::kube::NodesRef().WithName(node_));
      if (node) {
        boost::system::error_code ec;
        auto v = boost::json::parse(*node, ec);
        if (!ec && v.is_object()) {
          if (const auto* uid = v.at_pointer("/metadata/uid").if_string()) node_uid_ = *uid;
        }
      }
    }
    for (DriverContext* d : drivers_) {
      std::string name = sb::dra_driver::SliceName(node_, d->spec.driver);
      Result<std::string> have = kube_->Get(SlicesRef().WithName(name));
      if (have) continue;
      if (have.error().code != sb::ErrorCode::kNotFound) {
        spdlog::warn("{}: reading ResourceSlice {}: {}", d->spec.driver, name,
                     have.error().ToString());
        continue;
      }
      Result<std::string> made =
          kube_->Create(SlicesRef(), sb::dra_driver::SliceJson(d->spec, node_, node_uid_));
      if (made) {
        spdlog::info("{}: ResourceSlice {} published ({} devices)", d->spec.driver, name,
                     d->spec.devices.size());
      } else {
        spdlog::warn("{}: creating ResourceSlice {}: {}", d->spec.driver, name,
                     made.error().ToString());
      }
    }
  }

  Kube* kube_;
  std::string node_;
  std::string node_uid_;
  std::vector<DriverContext*> drivers_;
  std::chrono::seconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The cpuset hook: stdin is the OCI state; writes `cpus` into the container's cpuset.
int CpusetHook(const std::string& cpus, const std::string& cpuset_root, const std::string& log) {
  auto fail = [&](const std::string& why) {
    std::cerr << "sb-test-dra-driver cpuset-hook: " << why << "\n";
    if (!log.empty()) std::ofstream(log, std::ios::app) << "error: " << why << "\n";
    return 1;
  };
  if (!sb::dra_driver::ParseCpuList(cpus)) return fail(fmt::format("bad CPU list \"{}\"", cpus));
  std::string state((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  Result<std::string> bundle = sb::dra_driver::BundleFromState(state);
  if (!bundle) return fail(bundle.error().message);
  std::ifstream config_in(fs::path(*bundle) / "config.json");
  if (!config_in) return fail(fmt::format("cannot read {}/config.json", *bundle));
  std::string config((std::istreambuf_iterator<char>(config_in)), std::istreambuf_iterator<char>());
  Result<std::string> path = sb::dra_driver::CgroupsPathFromConfig(config);
  if (!path) return fail(path.error().message);
  std::string file = sb::dra_driver::CpusetCpusFile(cpuset_root, *path);
  {
    std::ofstream out(file);
    out << cpus << "\n";
    out.flush();
    if (!out) return fail(fmt::format("writing {} to {}: {}", cpus, file, std::strerror(errno)));
  }
  std::ifstream back(file);
  std::string now;
  std::getline(back, now);
  if (now != cpus)
    return fail(fmt::format("{} reads \"{}\" after writing \"{}\"", file, now, cpus));
  if (!log.empty()) std::ofstream(log, std::ios::app) << file << " = " << cpus << "\n";
  return 0;
}

bool PrepareSocket(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  fs::remove(path, ec);
  if (path.string().size() > 107) {
    spdlog::error("socket path {} is longer than a unix socket allows (107)", path.string());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sb-test-dra-driver: the test environment's DRA kubelet plugin",
               "sb-test-dra-driver"};
  app.require_subcommand(1);
  std::string node, kubeconfig, root_dir, cdi_dir, drivers_flag = "gpu.example.com,dra.cpu";
  int gpus = 4, cpus = 8, threads_per_core = 1, period = 3;
  CLI::App* serve = app.add_subcommand("serve", "serve the drivers to the node's kubelet");
  serve->add_option("--node-name", node, "the Kubernetes node")->required();
  serve->add_option("--kubeconfig", kubeconfig, "credentials for the apiserver")->required();
  serve->add_option("--kubelet-root-dir", root_dir, "the kubelet's --root-dir")->required();
  serve->add_option("--cdi-dir", cdi_dir, "containerd's CDI spec directory")->required();
  serve->add_option("--drivers", drivers_flag, "drivers to serve (gpu.example.com, dra.cpu)")
      ->capture_default_str();
  serve->add_option("--gpus", gpus, "fake GPUs of gpu.example.com")->capture_default_str();
  serve->add_option("--cpus", cpus, "CPUs of dra.cpu")->capture_default_str();
  serve->add_option("--threads-per-core", threads_per_core)->capture_default_str();
  serve->add_option("--resync-seconds", period, "how often the slices are checked")
      ->capture_default_str();
  std::string hook_cpus, cpuset_root = "/sys/fs/cgroup/cpuset", hook_log;
  CLI::App* hook = app.add_subcommand("cpuset-hook", "OCI hook: the container's cpuset := CPUS");
  hook->add_option("cpus", hook_cpus, "CPU list, e.g. 0-1")->required();
  hook->add_option("--cpuset-root", cpuset_root)->capture_default_str();
  hook->add_option("--log", hook_log, "append what was done to this file");
  CLI11_PARSE(app, argc, argv);

  if (*hook) return CpusetHook(hook_cpus, cpuset_root, hook_log);

  spdlog::set_default_logger(spdlog::stderr_logger_mt("sb-test-dra-driver"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [" + node + "] %v");

  // SIGTERM and SIGINT are taken by sigwait below, in every thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    spdlog::error("cannot resolve /proc/self/exe: {}", ec.message());
    return 1;
  }
  fs::create_directories(cdi_dir, ec);
  if (ec) {
    spdlog::error("cannot create {}: {}", cdi_dir, ec.message());
    return 1;
  }

  Result<sb::kube::Config> config = sb::kube::LoadConfig({.kubeconfig_path = kubeconfig});
  if (!config) {
    spdlog::error("{}", config.error().message);
    return 1;
  }
  Kube kube(*config);
  if (Result<void> ok = kube.Start(); !ok) {
    spdlog::error("{}", ok.error().message);
    return 1;
  }

  std::vector<std::unique_ptr<DriverContext>> contexts;
  std::stringstream list(drivers_flag);
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) continue;
    auto ctx = std::make_unique<DriverContext>();
    if (name == sb::dra_driver::kGpuDriver) {
      if (gpus <= 0) continue;
      ctx->spec = sb::dra_driver::GpuDriver(gpus);
    } else if (name == sb::dra_driver::kCpuDriver) {
      if (cpus <= 0) continue;
      ctx->spec = sb::dra_driver::CpuDriver(cpus, threads_per_core);
    } else {
      spdlog::error("unknown driver {} (gpu.example.com, dra.cpu)", name);
      return 1;
    }
    ctx->node = node;
    ctx->cdi_dir = cdi_dir;
    ctx->hook_binary = self.string();
    ctx->hook_log = (fs::path(cdi_dir) / "cpuset-hook.log").string();
    ctx->registration_socket = fs::path(root_dir) / "plugins_registry" / (name + "-reg.sock");
    ctx->dra_socket = fs::path(root_dir) / "plugins" / name / "dra.sock";
    ctx->kube = &kube;
    contexts.push_back(std::move(ctx));
  }

  // Per driver one server on both sockets: the DRA socket first, so that the kubelet, which
  // connects as soon as the registration socket appears, finds it.
  std::vector<std::unique_ptr<grpc::Service>> services;
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<DriverContext*> driver_ptrs;
  for (auto& ctx : contexts) {
    driver_ptrs.push_back(ctx.get());
    auto dra = std::make_unique<DraService>(ctx.get());
    if (!PrepareSocket(ctx->dra_socket)) return 1;
    grpc::ServerBuilder dra_builder;
    dra_builder.AddListeningPort("unix:" + ctx->dra_socket.string(),
                                 grpc::InsecureServerCredentials());
    dra_builder.RegisterService(dra.get());
    std::unique_ptr<grpc::Server> dra_server = dra_builder.BuildAndStart();
    if (!dra_server) {
      spdlog::error("{}: cannot serve {}", ctx->spec.driver, ctx->dra_socket.string());
      return 1;
    }
    auto reg = std::make_unique<RegistrationService>(ctx.get());
    if (!PrepareSocket(ctx->registration_socket)) return 1;
    grpc::ServerBuilder reg_builder;
    reg_builder.AddListeningPort("unix:" + ctx->registration_socket.string(),
                                 grpc::InsecureServerCredentials());
    reg_builder.RegisterService(reg.get());
    std::unique_ptr<grpc::Server> reg_server = reg_builder.BuildAndStart();
    if (!reg_server) {
      spdlog::error("{}: cannot serve {}", ctx->spec.driver, ctx->registration_socket.string());
      return 1;
    }
    spdlog::info("{}: serving {} devices; registration {}, DRA {}", ctx->spec.driver,
                 ctx->spec.devices.size(), ctx->registration_socket.string(),
                 ctx->dra_socket.string());
    services.push_back(std::move(dra));
    services.push_back(std::move(reg));
    servers.push_back(std::move(dra_server));
    servers.push_back(std::move(reg_server));
  }

  SlicePublisher publisher(&kube, node, driver_ptrs, std::chrono::seconds(std::max(1, period)));
  publisher.Start();

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  // The registration sockets go first: the kubelet deregisters the drivers.
  for (auto& ctx : contexts) fs::remove(ctx->registration_socket, ec);
  for (auto& s : servers) s->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  publisher.Stop();
  for (auto& ctx : contexts) fs::remove(ctx->dra_socket, ec);
  spdlog::info("stopped");
  return 0;
}
