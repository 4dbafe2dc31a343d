// SPDX-License-Identifier: Apache-2.0
//
// The admission webhook behind the real kube-apiserver (1.36.2) of the test environment
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
#include <functional>
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
#include "net/http_client.h"
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
                    {"resources", json::array{"pods", "pods/resize"}},
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

// The spec field that makes a pod the bridge's (JSON text, for PodJson's `spec_extra`).
std::string OurScheduler() {
  return std::string(R"(,"schedulerName":")") + std::string(bridge::kDefaultSchedulerName) + "\"";
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
    token_ = cfg->token;
    // The webhook reads DRA objects as the chart's admission ServiceAccount (issue #44: least
    // privilege proven), with the token testenv/kube/chart-identities.sh minted for it.
    const std::string admission = env->Get("KUBECONFIG_ADMISSION");
    ASSERT_FALSE(admission.empty()) << "no KUBECONFIG_ADMISSION in the environment";
    Result<kube::Config> acfg = kube::LoadConfig({.kubeconfig_path = admission});
    ASSERT_TRUE(acfg) << acfg.error().message;
    auto ahttp = kube::MakeHttpClient(io_.get_executor(), *acfg);
    ASSERT_TRUE(ahttp) << ahttp.error().message;
    server_http_ = std::move(*ahttp);
    server_client_ = kube::MakeClient(*server_http_, acfg->token);

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
  // A write to the apiserver as `user`, impersonated by the environment's admin. The error
  // message (the apiserver's Status) when it is refused.
  Result<std::string> As(const std::string& user, net::Method method, const std::string& target,
                         const std::string& body, const std::string& content_type) {
    net::HttpRequest req{.method = method, .target = target, .headers = {}, .body = body};
    req.headers.push_back({"Content-Type", content_type});
    req.headers.push_back({"Accept", "application/json"});
    req.headers.push_back({"Impersonate-User", user});
    req.headers.push_back({"Impersonate-Group", "system:authenticated"});
    if (token_) {
      Result<std::string> t = token_->Token();
      if (!t) {
        return tl::unexpected(t.error());
      }
      req.headers.push_back({"Authorization", "Bearer " + *t});
    }
    Result<net::HttpResponse> r = RunSync(io_, http_->Send(std::move(req)));
    if (!r) {
      return tl::unexpected(r.error());
    }
    if (r->status < 200 || r->status >= 300) {
      return tl::unexpected(kube::ErrorFromResponse(r->status, r->body, target));
    }
    return r->body;
  }
  Result<std::string> CreatePodAs(const std::string& user, const std::string& ns,
                                  const std::string& body) {
    return As(user, net::Method::kPost, kube::PodsRef(ns).Path(), body, "application/json");
  }
  Result<std::string> PatchPodAs(const std::string& user, const std::string& ns,
                                 const std::string& name, const std::string& patch) {
    return As(user, net::Method::kPatch, kube::PodsRef(ns).WithName(name).Path(), patch,
              "application/merge-patch+json");
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

  // Starts the webhook server, the two namespaces (each with user "alice" allowed to write pods)
  // and the webhook configurations, and waits until the apiserver calls both hooks.
  void StartWebhooks() {
    Policy policy;
    policy.managed_namespaces = {managed_ns_};
    policy.privileged_users = {"admin"};  // the environment's user stands for the bridge
    server_ = std::make_unique<Server>(io_.get_executor(), policy,
                                       ServerOptions{.bind_address = "127.0.0.1:0",
                                                     .cert_file = certs_.cert_file,
                                                     .key_file = certs_.key_file,
                                                     .health_bind_address = ""},
                                       server_client_.get());  // DRA objects: read through it
    ASSERT_TRUE(server_->Start().has_value());
    const std::string base = "https://127.0.0.1:" + std::to_string(server_->port());

    for (const std::string& ns : {managed_ns_, other_ns_}) {
      std::string body = R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + ns +
                         R"(","labels":{")" + std::string(kSelectorKey) + R"(":")" + run_id_ +
                         R"("}}})";
      Result<std::string> r = RunSync(io_, client_->Create(kube::NamespacesRef(), body));
      ASSERT_TRUE(r) << r.error().message;
      // "alice", an ordinary user who may write pods in both namespaces. (The built-in "edit" role
      // is aggregated by kube-controller-manager, which the environment does not run.)
      const std::string role =
          R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"pod-writer"},)"
          R"("rules":[{"apiGroups":[""],"resources":["pods","pods/resize"],)"
          R"("verbs":["get","list","create","update","patch","delete"]}]})";
      kube::ResourceRef roles{.group = "rbac.authorization.k8s.io",
                              .version = "v1",
                              .resource = "roles",
                              .namespace_ = ns};
      Result<std::string> ro = RunSync(io_, client_->Create(roles, role));
      ASSERT_TRUE(ro) << ro.error().message;
      const std::string binding =
          R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"alice-pod-writer"},)"
          R"("roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"pod-writer"},)"
          R"("subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"alice"}]})";
      kube::ResourceRef bindings{.group = "rbac.authorization.k8s.io",
                                 .version = "v1",
                                 .resource = "rolebindings",
                                 .namespace_ = ns};
      Result<std::string> rb = RunSync(io_, client_->Create(bindings, binding));
      ASSERT_TRUE(rb) << rb.error().message;
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
    // hooks answer (bounded). topologySpreadConstraints are refused for everyone.
    const std::string ours = OurScheduler();
    const std::string spread =
        ours +
        R"(,"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{}}])";
    bool mutating_live = false;
    bool validating_live = false;
    for (int i = 0; i < 150 && !(mutating_live && validating_live); ++i) {
      const std::string probe = "probe-" + std::to_string(i);
      Result<std::string> p = CreatePod(managed_ns_, PodJson(probe));
      if (p) {
        mutating_live = SchedulerOf(*p) == bridge::kDefaultSchedulerName;
        DeletePod(managed_ns_, probe);
      }
      Result<std::string> l = CreatePod(managed_ns_, PodJson(probe + "-s", "{}", spread));
      if (l) {
        DeletePod(managed_ns_, probe + "-s");
      } else {
        validating_live = l.error().message.find("topologySpreadConstraints") != std::string::npos;
      }
      if (!(mutating_live && validating_live)) {
        Pause(200ms);
      }
    }
    ASSERT_TRUE(mutating_live) << "the mutating webhook was never called";
    ASSERT_TRUE(validating_live) << "the validating webhook was never called";
  }

  asio::io_context io_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> client_;
  std::shared_ptr<kube::TokenSource> token_;
  // The webhook's own client: the chart's admission ServiceAccount.
  std::unique_ptr<net::HttpClient> server_http_;
  std::unique_ptr<kube::Client> server_client_;
  std::unique_ptr<Server> server_;
  std::string dir_;
  net::testing::TestCerts certs_;
  std::string run_id_, managed_ns_, other_ns_, hooks_name_;
};

TEST_F(AdmissionE2e, MutatesAndValidatesPodsThroughTheApiserver) {
  ASSERT_NO_FATAL_FAILURE(StartWebhooks());
  const std::uint64_t reviews_after_probe = server_->stats().reviews;
  int writes = 0;  // pod CREATEs and UPDATEs below: each is reviewed by both hooks or by one

  // Managed namespace: schedulerName set, nodeName removed.
  Result<std::string> a = CreatePod(managed_ns_, PodJson("a", "{}", R"(,"nodeName":"somewhere")"));
  ++writes;
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(SchedulerOf(*a), bridge::kDefaultSchedulerName);
  EXPECT_FALSE(json::parse(*a).at("spec").as_object().contains("nodeName")) << *a;

  // Another namespace: left to the default scheduler.
  Result<std::string> b = CreatePod(other_ns_, PodJson("b"));
  ++writes;
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(SchedulerOf(*b), "default-scheduler");

  // Refusals name what is wrong: a user may not set the job-id label.
  const std::string job_label = R"({")" + std::string(bridge::kJobIdLabel) + R"(":"42"})";
  Result<std::string> c = CreatePodAs("alice", managed_ns_, PodJson("c", job_label));
  ++writes;
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find(bridge::kJobIdLabel), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("vpod.slurm-bridge.test"), std::string::npos)
      << c.error().message;

  // A pod of another scheduler may not tolerate the managed-node taint (it would run on a Slurm
  // node without an allocation), not even with an Exists toleration of every taint.
  Result<std::string> t = CreatePodAs(
      "alice", other_ns_, PodJson("t", "{}", R"(,"tolerations":[{"operator":"Exists"}])"));
  ++writes;
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find(bridge::kManagedNodeTaint), std::string::npos)
      << t.error().message;

  // The bridge (privileged) labels a pending pod: allowed.
  kube::ResourceRef pod_a = kube::PodsRef(managed_ns_).WithName("a");
  const std::string label_patch = R"({"metadata":{"labels":)" + job_label + "}}";
  Result<std::string> labelled =
      RunSync(io_, client_->Patch(pod_a, kube::PatchType::kJsonMerge, label_patch));
  ++writes;
  ASSERT_TRUE(labelled) << labelled.error().message;
  // Anyone else may not change it, in any phase: not while the pod is pending...
  const std::string relabel =
      R"({"metadata":{"labels":{")" + std::string(bridge::kJobIdLabel) + R"(":"43"}}})";
  Result<std::string> pending = PatchPodAs("alice", managed_ns_, "a", relabel);
  ++writes;
  ASSERT_FALSE(pending);
  EXPECT_NE(pending.error().message.find("cannot be changed"), std::string::npos)
      << pending.error().message;
  // ...nor once it runs.
  Result<std::string> running =
      RunSync(io_, client_->Patch(pod_a.WithSubresource("status"), kube::PatchType::kJsonMerge,
                                  R"({"status":{"phase":"Running"}})"));
  ++writes;
  ASSERT_TRUE(running) << running.error().message;
  Result<std::string> locked = PatchPodAs("alice", managed_ns_, "a", relabel);
  ++writes;
  ASSERT_FALSE(locked);
  EXPECT_NE(locked.error().message.find("cannot be changed"), std::string::npos)
      << locked.error().message;
  // Other labels still change.
  Result<std::string> other_label =
      PatchPodAs("alice", managed_ns_, "a", R"({"metadata":{"labels":{"app":"x"}}})");
  ++writes;
  EXPECT_TRUE(other_label) << other_label.error().message;
  EXPECT_GE(server_->stats().reviews - reviews_after_probe, static_cast<std::uint64_t>(writes));
}

// The APIs of a current Kubernetes through the real apiserver: DRA (resource.k8s.io/v1) claims
// at admission: a pod naming a shared ResourceClaim is refused saying why, one naming a
// ResourceClaimTemplate whose class the default device profiles cover (read from the apiserver)
// is admitted, one naming a template that does not exist is refused saying so; an in-place
// resize (pods/resize) of a bridge pod is refused with a message that names Slurm, and neither
// side changes.
TEST_F(AdmissionE2e, DraClaimsAndInPlaceResizeAreJudgedWithWhy) {
  ASSERT_NO_FATAL_FAILURE(StartWebhooks());
  const std::string ours = OurScheduler();
  // A DeviceClass and a ResourceClaim exist on the server: the claim is real, not a typo.
  const std::string device_class =
      R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpu-)" +
      run_id_ +
      R"("},"spec":{"selectors":[{"cel":{"expression":"device.driver == 'gpu.example.com'"}}]}})";
  kube::ResourceRef classes{
      .group = "resource.k8s.io", .version = "v1", .resource = "deviceclasses"};
  Result<std::string> dc = RunSync(io_, client_->Create(classes, device_class));
  ASSERT_TRUE(dc) << dc.error().message;
  struct AtEnd {
    std::function<void()> f;
    ~AtEnd() { f(); }
  } delete_class{
      [&] { (void)RunSync(io_, client_->Delete(classes.WithName("gpu-" + run_id_), {})); }};
  const std::string claim =
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"one-gpu"},)"
      R"("spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu-)" +
      run_id_ + R"("}}]}}})";
  kube::ResourceRef claims{.group = "resource.k8s.io",
                           .version = "v1",
                           .resource = "resourceclaims",
                           .namespace_ = managed_ns_};
  Result<std::string> rc = RunSync(io_, client_->Create(claims, claim));
  ASSERT_TRUE(rc) << rc.error().message;
  const std::string with_claim =
      ours + R"(,"resourceClaims":[{"name":"gpu","resourceClaimName":"one-gpu"}])";
  Result<std::string> refused = CreatePodAs("alice", managed_ns_, PodJson("dra", "{}", with_claim));
  ASSERT_FALSE(refused) << "a pod with a shared ResourceClaim was admitted";
  EXPECT_NE(refused.error().message.find("a claim shared by pods"), std::string::npos)
      << refused.error().message;
  // A template of the class: the webhook reads it and the DeviceClass (whose selector is the
  // gpu-example profile's) and admits the pod; a template that does not exist is refused.
  const std::string tmpl =
      R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"name":"one-gpu"},)"
      R"("spec":{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu-)" +
      run_id_ + R"("}}]}}}})";
  kube::ResourceRef templates{.group = "resource.k8s.io",
                              .version = "v1",
                              .resource = "resourceclaimtemplates",
                              .namespace_ = managed_ns_};
  Result<std::string> rct = RunSync(io_, client_->Create(templates, tmpl));
  ASSERT_TRUE(rct) << rct.error().message;
  const std::uint64_t reads_before = server_->stats().dra_reads;
  Result<std::string> admitted = CreatePodAs(
      "alice", managed_ns_,
      PodJson(
          "dra-tmpl", "{}",
          ours + R"(,"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"one-gpu"}])"));
  EXPECT_TRUE(admitted) << admitted.error().message;
  EXPECT_GE(server_->stats().dra_reads - reads_before, 2u) << "the template and its class";
  Result<std::string> no_template = CreatePodAs(
      "alice", managed_ns_,
      PodJson("dra-none", "{}",
              ours + R"(,"resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"nope"}])"));
  ASSERT_FALSE(no_template) << "a pod naming a missing template was admitted";
  EXPECT_NE(no_template.error().message.find("does not exist"), std::string::npos)
      << no_template.error().message;
  EXPECT_EQ(server_->stats().dra_read_failures, 0u);
  // The same pod for the default scheduler is none of the bridge's business.
  Result<std::string> other = CreatePodAs(
      "alice", other_ns_,
      PodJson("dra", "{}", R"(,"resourceClaims":[{"name":"gpu","resourceClaimName":"one-gpu"}])"));
  EXPECT_TRUE(other) << other.error().message;

  // In-place resize: the pod's Slurm job keeps what it was submitted with, so the kubelet must
  // not grow the container behind Slurm's back. (The resize subresource is served since 1.33.)
  const std::string sized =
      ours +
      R"(,"containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"1","memory":"1Gi"}}}])";
  std::string pod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"sized"},"spec":{)" +
                    sized.substr(1) + "}}";
  Result<std::string> created = CreatePodAs("alice", managed_ns_, pod);
  ASSERT_TRUE(created) << created.error().message;
  const std::string grow =
      R"({"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"2"}}}]}})";
  Result<std::string> resized =
      As("alice", net::Method::kPatch,
         kube::PodsRef(managed_ns_).WithName("sized").WithSubresource("resize").Path(), grow,
         "application/strategic-merge-patch+json");
  ASSERT_FALSE(resized) << "the resize was applied: " << *resized;
  EXPECT_NE(resized.error().message.find("in-place resize"), std::string::npos)
      << resized.error().message;
  EXPECT_NE(resized.error().message.find("Slurm"), std::string::npos) << resized.error().message;
  Result<std::string> after =
      RunSync(io_, client_->Get(kube::PodsRef(managed_ns_).WithName("sized")));
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(json::parse(*after).at_pointer("/spec/containers/0/resources/requests/cpu"), "1")
      << *after;
}

}  // namespace
}  // namespace sb::admission
