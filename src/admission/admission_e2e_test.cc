// SPDX-License-Identifier: Apache-2.0
//
// The admission webhook behind the real kube-apiserver 1.20.2 of the test environment
// ($SB_TESTENV): the server runs in this process over TLS (a throw-away CA, a certificate for
// 127.0.0.1), Mutating- and ValidatingWebhookConfigurations point the apiserver at it, and pods
// created through the apiserver come back mutated or are refused with our message.
//
// The webhook configurations select only namespaces carrying this run's unique label, so a run
// that dies before its clean-up cannot disturb pods of other tests; they are deleted at the end
// in any case.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "admission/server.h"
#include "bridge/names.h"
#include "common/base64.h"
#include "kube/client.h"
#include "kube/config.h"
#include "net/test_certs.h"
#include "testing/run.h"
#include "testing/testenv.h"

namespace sb::admission {
namespace {
namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using sb::testing::RunSync;
using sb::testing::TestEnv;

constexpr std::string_view kSelectorKey = "slurm-bridge.test/admission-e2e";

kube::ResourceRef WebhookRef(std::string resource) {
  return kube::ResourceRef{
      .group = "admissionregistration.k8s.io", .version = "v1", .resource = std::move(resource)};
}

std::string WebhookConfig(const std::string& kind, const std::string& name,
                          const std::string& hook_name, const std::string& url,
                          const std::string& ca_pem, const std::string& run_id) {
  json::object selector{{"matchLabels", json::object{{kSelectorKey, run_id}}}};
  json::object rule{{"apiGroups", json::array{""}},
                    {"apiVersions", json::array{"v1"}},
                    {"operations", json::array{"CREATE", "UPDATE"}},
                    {"resources", json::array{"pods"}},
                    {"scope", "Namespaced"}};
  json::object hook{
      {"name", hook_name},
      {"admissionReviewVersions", json::array{"v1"}},
      {"sideEffects", "None"},
      {"failurePolicy", "Fail"},
      {"timeoutSeconds", 10},
      {"clientConfig", json::object{{"url", url}, {"caBundle", Base64Encode(ca_pem)}}},
      {"namespaceSelector", std::move(selector)},
      {"rules", json::array{std::move(rule)}}};
  json::object cfg{{"apiVersion", "admissionregistration.k8s.io/v1"},
                   {"kind", kind},
                   {"metadata", json::object{{"name", name}}},
                   {"webhooks", json::array{std::move(hook)}}};
  return json::serialize(cfg);
}

std::string PodJson(const std::string& name, const std::string& labels_json = "{}",
                    const std::string& spec_extra = "") {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(","labels":)" +
         labels_json + R"(},"spec":{"containers":[{"name":"c","image":"busybox"}])" + spec_extra +
         "}}";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class AdmissionE2e : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto env = TestEnv::Load(&why);
    ASSERT_TRUE(env.has_value()) << why;
    Result<kube::Config> cfg = kube::LoadConfig({.kubeconfig_path = env->Get("KUBECONFIG")});
    ASSERT_TRUE(cfg) << cfg.error().message;
    auto http = kube::MakeHttpClient(io_.get_executor(), *cfg);
    ASSERT_TRUE(http) << http.error().message;
    http_ = std::move(*http);
    client_ = kube::MakeClient(*http_, cfg->token);

    char tmpl[] = "/tmp/sb-admission-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::optional<net::testing::TestCerts> certs =
        net::testing::MakeTestCerts(dir_, "webhook", &why);
    ASSERT_TRUE(certs.has_value()) << why;
    certs_ = *certs;

    std::mt19937 rng(std::random_device{}());
    run_id_ = std::to_string(::getpid()) + "-" + std::to_string(rng() % 1000000);
    managed_ns_ = "adm-managed-" + run_id_;
    other_ns_ = "adm-other-" + run_id_;
    hooks_name_ = "sb-admission-e2e-" + run_id_;
  }

  void TearDown() override {
    if (client_) {
      // Always: a webhook configuration left behind would point at a server that is gone.
      for (const char* res : {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}) {
        Result<std::string> r =
            RunSync(io_, client_->Delete(WebhookRef(res).WithName(hooks_name_), {}));
        if (!r && r.error().code != ErrorCode::kNotFound) {
          ADD_FAILURE() << "deleting " << res << " " << hooks_name_ << ": " << r.error().message;
        }
      }
      // No namespace controller runs in the environment: delete the pods ourselves.
      for (const std::string& ns : {managed_ns_, other_ns_}) {
        (void)RunSync(io_, client_->Delete(kube::PodsRef(ns), {.grace_period_seconds = 0}));
        (void)RunSync(io_, client_->Delete(kube::NamespacesRef().WithName(ns), {}));
      }
    }
    if (server_) {
      server_->Stop();
      io_.restart();
      while (io_.poll() > 0) {
      }
    }
    if (!dir_.empty()) {
      std::filesystem::remove_all(dir_);
    }
  }

  Result<std::string> CreatePod(const std::string& ns, const std::string& body) {
    return RunSync(io_, client_->Create(kube::PodsRef(ns), body));
  }
  void DeletePod(const std::string& ns, const std::string& name) {
    (void)RunSync(io_,
                  client_->Delete(kube::PodsRef(ns).WithName(name), {.grace_period_seconds = 0}));
  }
  // Waits `d` while serving the webhook (the loop keeps running).
  void Pause(std::chrono::milliseconds d) {
    asio::steady_timer t(io_, d);
    bool done = false;
    t.async_wait([&](const boost::system::error_code&) { done = true; });
    while (!done && io_.run_one() > 0) {
    }
  }
  static std::string SchedulerOf(const std::string& pod_json) {
    json::value v = json::parse(pod_json);
    const json::object& spec = v.at("spec").as_object();
    return spec.contains("schedulerName") ? std::string(spec.at("schedulerName").as_string()) : "";
  }

  asio::io_context io_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> client_;
  std::unique_ptr<Server> server_;
  std::string dir_;
  net::testing::TestCerts certs_;
  std::string run_id_, managed_ns_, other_ns_, hooks_name_;
};

TEST_F(AdmissionE2e, MutatesAndValidatesPodsThroughTheApiserver) {
  Policy policy;
  policy.managed_namespaces = {managed_ns_};
  server_ = std::make_unique<Server>(io_.get_executor(), policy,
                                     ServerOptions{.bind_address = "127.0.0.1:0",
                                                   .cert_file = certs_.cert_file,
                                                   .key_file = certs_.key_file,
                                                   .health_bind_address = ""},
                                     nullptr);
  ASSERT_TRUE(server_->Start().has_value());
  const std::string base = "https://127.0.0.1:" + std::to_string(server_->port());

  for (const std::string& ns : {managed_ns_, other_ns_}) {
    std::string body = R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + ns +
                       R"(","labels":{")" + std::string(kSelectorKey) + R"(":")" + run_id_ +
                       R"("}}})";
    Result<std::string> r = RunSync(io_, client_->Create(kube::NamespacesRef(), body));
    ASSERT_TRUE(r) << r.error().message;
  }
  const std::string ca = ReadFile(certs_.ca_file);
  const std::string mutating =
      WebhookConfig("MutatingWebhookConfiguration", hooks_name_, "mpod.slurm-bridge.test",
                    base + std::string(kMutatePodPath), ca, run_id_);
  const std::string validating =
      WebhookConfig("ValidatingWebhookConfiguration", hooks_name_, "vpod.slurm-bridge.test",
                    base + std::string(kValidatePodPath), ca, run_id_);
  Result<std::string> m =
      RunSync(io_, client_->Create(WebhookRef("mutatingwebhookconfigurations"), mutating));
  ASSERT_TRUE(m) << m.error().message;
  Result<std::string> v =
      RunSync(io_, client_->Create(WebhookRef("validatingwebhookconfigurations"), validating));
  ASSERT_TRUE(v) << v.error().message;

  // The apiserver picks new webhook configurations up from its own informer: probe until both
  // hooks answer (bounded).
  const std::string job_label = R"({")" + std::string(bridge::kJobIdLabel) + R"(":"42"})";
  bool mutating_live = false;
  bool validating_live = false;
  for (int i = 0; i < 150 && !(mutating_live && validating_live); ++i) {
    const std::string probe = "probe-" + std::to_string(i);
    Result<std::string> p = CreatePod(managed_ns_, PodJson(probe));
    if (p) {
      mutating_live = SchedulerOf(*p) == bridge::kDefaultSchedulerName;
      DeletePod(managed_ns_, probe);
    }
    Result<std::string> l = CreatePod(managed_ns_, PodJson(probe + "-l", job_label));
    if (l) {
      DeletePod(managed_ns_, probe + "-l");
    } else {
      validating_live = l.error().message.find(bridge::kJobIdLabel) != std::string::npos;
    }
    if (!(mutating_live && validating_live)) {
      Pause(200ms);
    }
  }
  ASSERT_TRUE(mutating_live) << "the mutating webhook was never called";
  ASSERT_TRUE(validating_live) << "the validating webhook was never called";
  const std::uint64_t reviews_after_probe = server_->stats().reviews;

  // Managed namespace: schedulerName set, nodeName removed.
  Result<std::string> a = CreatePod(managed_ns_, PodJson("a", "{}", R"(,"nodeName":"somewhere")"));
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(SchedulerOf(*a), bridge::kDefaultSchedulerName);
  EXPECT_FALSE(json::parse(*a).at("spec").as_object().contains("nodeName")) << *a;

  // Another namespace: left to the default scheduler.
  Result<std::string> b = CreatePod(other_ns_, PodJson("b"));
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(SchedulerOf(*b), "default-scheduler");

  // Refusals name what is wrong.
  Result<std::string> c = CreatePod(managed_ns_, PodJson("c", job_label));
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find(bridge::kJobIdLabel), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("vpod.slurm-bridge.test"), std::string::npos)
      << c.error().message;
  Result<std::string> d = CreatePod(
      managed_ns_,
      PodJson(
          "d", "{}",
          R"(,"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{}}])"));
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("topologySpreadConstraints"), std::string::npos)
      << d.error().message;

  // The bridge labels a pending pod (a PATCH): allowed.
  kube::ResourceRef pod_a = kube::PodsRef(managed_ns_).WithName("a");
  const std::string label_patch = R"({"metadata":{"labels":)" + job_label + "}}";
  Result<std::string> labelled =
      RunSync(io_, client_->Patch(pod_a, kube::PatchType::kJsonMerge, label_patch));
  ASSERT_TRUE(labelled) << labelled.error().message;
  // Once Running, the label is locked.
  Result<std::string> running =
      RunSync(io_, client_->Patch(pod_a.WithSubresource("status"), kube::PatchType::kJsonMerge,
                                  R"({"status":{"phase":"Running"}})"));
  ASSERT_TRUE(running) << running.error().message;
  const std::string relabel =
      R"({"metadata":{"labels":{")" + std::string(bridge::kJobIdLabel) + R"(":"43"}}})";
  Result<std::string> locked =
      RunSync(io_, client_->Patch(pod_a, kube::PatchType::kJsonMerge, relabel));
  ASSERT_FALSE(locked);
  EXPECT_NE(locked.error().message.find("Running"), std::string::npos) << locked.error().message;
  // Other labels still change.
  Result<std::string> other_label = RunSync(
      io_,
      client_->Patch(pod_a, kube::PatchType::kJsonMerge, R"({"metadata":{"labels":{"app":"x"}}})"));
  EXPECT_TRUE(other_label) << other_label.error().message;
  // Each of the six writes to the managed namespace's pods since the probe (a, c, d, the
  // label, the relabel, the other label) was reviewed by at least one hook.
  EXPECT_GE(server_->stats().reviews - reviews_after_probe, 6u);
}

}  // namespace
}  // namespace sb::admission
