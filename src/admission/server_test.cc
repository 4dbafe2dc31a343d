// SPDX-License-Identifier: Apache-2.0
#include "admission/server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include "bridge/names.h"
#include "common/base64.h"
#include "net/http_client.h"
#include "net/test_certs.h"
#include "testing/run.h"

namespace sb::admission {
namespace {
namespace asio = boost::asio;
namespace json = boost::json;
using sb::testing::RunSync;

std::string NamespaceJson(const std::string& name, const std::string& labels_json) {
  return R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + name +
         R"(","resourceVersion":"3","labels":)" + labels_json + R"(},"status":{"phase":"Active"}})";
}

// The webhook only reads: a fake's writes answer Unimplemented.
class ReadOnlyClient : public kube::Client {
 public:
  asio::awaitable<Result<std::string>> Create(kube::ResourceRef, std::string) override {
    co_return tl::unexpected(Error{ErrorCode::kUnimplemented, "no"});
  }
  asio::awaitable<Result<std::string>> Update(kube::ResourceRef, std::string) override {
    co_return tl::unexpected(Error{ErrorCode::kUnimplemented, "no"});
  }
  asio::awaitable<Result<std::string>> Patch(kube::ResourceRef, kube::PatchType,
                                             std::string) override {
    co_return tl::unexpected(Error{ErrorCode::kUnimplemented, "no"});
  }
  asio::awaitable<Result<std::string>> Delete(kube::ResourceRef, kube::DeleteOptions) override {
    co_return tl::unexpected(Error{ErrorCode::kUnimplemented, "no"});
  }
};

// Serves namespaces: a LIST with "team-a" (managed) and "team-b" (not), a GET of "late"
// (managed, not in the list), 404 for anything else; watches wait until cancelled.
class FakeNamespaces final : public ReadOnlyClient {
 public:
  asio::awaitable<Result<std::string>> Get(kube::ResourceRef ref) override {
    ++gets;
    if (ref.name == "late") {
      co_return NamespaceJson("late", R"({"slurm-bridge/managed":"true"})");
    }
    if (ref.name == "secret") {
      co_return tl::unexpected(
          Error{ErrorCode::kPermissionDenied, "namespaces \"secret\" is forbidden", 403});
    }
    co_return tl::unexpected(
        Error{ErrorCode::kNotFound, "namespaces \"" + ref.name + "\" not found", 404});
  }
  asio::awaitable<Result<std::string>> List(kube::ResourceRef, kube::ListOptions) override {
    ++lists;
    co_return R"({"apiVersion":"v1","kind":"NamespaceList","metadata":{"resourceVersion":"5"},"items":[)" +
        NamespaceJson("team-a", R"({"slurm-bridge/managed":"true"})") + "," +
        NamespaceJson("team-b", R"({"team":"b"})") + "]}";
  }
  asio::awaitable<Result<void>> Watch(kube::ResourceRef, kube::ListOptions,
                                      std::function<bool(std::string_view)>) override {
    asio::steady_timer forever(co_await asio::this_coro::executor, std::chrono::hours(24));
    co_await forever.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return Result<void>{};
  }
  int gets = 0;
  int lists = 0;
};

std::string Review(const std::string& op, const std::string& ns, const std::string& meta_extra,
                   const std::string& scheduler = "default-scheduler") {
  std::string pod = R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":")" + ns +
                    "\"" + meta_extra + R"(},"spec":{"schedulerName":")" + scheduler +
                    R"(","containers":[{"name":"c","image":"i"}]}})";
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-)" +
         ns + R"(","kind":{"group":"","version":"v1","kind":"Pod"},"namespace":")" + ns +
         R"(","operation":")" + op + R"(","userInfo":{"username":"alice"},"object":)" + pod + "}}";
}

class AdmissionServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Let stopped servers close their connections before the loop goes.
    io_.restart();
    while (io_.poll() > 0) {
    }
  }
  std::unique_ptr<net::HttpClient> Client(std::uint16_t port) {
    auto ep = net::ParseEndpoint("http://127.0.0.1:" + std::to_string(port));
    auto c = net::HttpClient::Create(io_.get_executor(), *ep, {.max_attempts = 1});
    EXPECT_TRUE(c.has_value());
    return std::move(*c);
  }
  net::HttpResponse Post(net::HttpClient& c, std::string_view path, std::string body,
                         std::string content_type = "application/json") {
    net::HttpRequest req{.method = net::Method::kPost,
                         .target = std::string(path),
                         .headers = {{"Content-Type", std::move(content_type)}},
                         .body = std::move(body)};
    Result<net::HttpResponse> r = RunSync(io_, c.Send(req));
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    return r.value_or(net::HttpResponse{});
  }
  net::HttpResponse Get(net::HttpClient& c, std::string path) {
    net::HttpRequest req{.target = std::move(path)};
    Result<net::HttpResponse> r = RunSync(io_, c.Send(req));
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    return r.value_or(net::HttpResponse{});
  }
  static json::object Response(const net::HttpResponse& r) {
    json::value v = json::parse(r.body);
    return v.at("response").as_object();
  }

  asio::io_context io_;
};

TEST_F(AdmissionServerTest, ServesBothHooksAndHealth) {
  Policy policy;
  policy.managed_namespaces = {"hpc"};
  Server server(io_.get_executor(), policy,
                {.bind_address = "127.0.0.1:0", .health_bind_address = "127.0.0.1:0"}, nullptr);
  ASSERT_TRUE(server.Start().has_value());
  ASSERT_NE(server.port(), 0);
  ASSERT_NE(server.health_port(), 0);
  EXPECT_TRUE(server.Ready());
  auto web = Client(server.port());

  net::HttpResponse mutated = Post(*web, kMutatePodPath, Review("CREATE", "hpc", ""));
  EXPECT_EQ(mutated.status, 200);
  EXPECT_EQ(mutated.HeaderValue("Content-Type"), "application/json");
  json::object m = Response(mutated);
  EXPECT_EQ(m.at("uid").as_string(), "u-hpc");
  EXPECT_TRUE(m.at("allowed").as_bool());
  EXPECT_EQ(m.at("patchType").as_string(), "JSONPatch");
  EXPECT_NE(Base64Decode(std::string(m.at("patch").as_string()))->find("slurm-bridge-scheduler"),
            std::string::npos);

  net::HttpResponse untouched = Post(*web, kMutatePodPath, Review("CREATE", "other", ""));
  EXPECT_FALSE(Response(untouched).contains("patch"));

  net::HttpResponse denied =
      Post(*web, kValidatePodPath,
           Review("CREATE", "hpc", R"(,"labels":{"scheduler.slinky.slurm.net/slurm-jobid":"1"})",
                  "slurm-bridge-scheduler"));
  EXPECT_EQ(denied.status, 200);
  json::object d = Response(denied);
  EXPECT_FALSE(d.at("allowed").as_bool());
  EXPECT_EQ(d.at("status").at("code").as_int64(), 403);
  EXPECT_NE(std::string(d.at("status").at("message").as_string())
                .find("scheduler.slinky.slurm.net/slurm-jobid"),
            std::string::npos);

  // Bad calls.
  net::HttpResponse get = Get(*web, std::string(kMutatePodPath));
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.HeaderValue("Allow"), "POST");
  net::HttpResponse junk = Post(*web, kMutatePodPath, "{not json");
  EXPECT_EQ(junk.status, 400);
  EXPECT_NE(junk.body.find("not JSON"), std::string::npos) << junk.body;
  net::HttpResponse v1beta1 = Post(
      *web, kValidatePodPath,
      R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}})");
  EXPECT_EQ(v1beta1.status, 400);
  net::HttpResponse yaml = Post(*web, kMutatePodPath, Review("CREATE", "hpc", ""), "text/yaml");
  EXPECT_EQ(yaml.status, 400);
  EXPECT_EQ(Post(*web, "/other", "{}").status, 404);
  EXPECT_EQ(server.stats().reviews, 3u);
  EXPECT_EQ(server.stats().bad_requests, 4u);
  EXPECT_EQ(server.stats().patched, 1u);
  EXPECT_EQ(server.stats().denied, 1u);

  auto health = Client(server.health_port());
  EXPECT_EQ(Get(*health, "/healthz").status, 200);
  EXPECT_EQ(Get(*health, "/readyz").status, 200);
  server.Stop();
  EXPECT_FALSE(server.Ready());
}

TEST_F(AdmissionServerTest, NamespaceSelectorUsesTheCacheThenAGet) {
  Policy policy;
  bridge::LabelSelector sel;
  sel.match_labels = {{"slurm-bridge/managed", "true"}};
  policy.namespace_selector = sel;
  FakeNamespaces kube;
  Server server(io_.get_executor(), policy,
                {.bind_address = "127.0.0.1:0", .health_bind_address = "127.0.0.1:0"}, &kube);
  ASSERT_TRUE(server.Start().has_value());
  EXPECT_FALSE(server.Ready());  // the namespace cache has not synced
  auto health = Client(server.health_port());
  net::HttpResponse first = Get(*health, "/readyz");
  if (first.status == 503) {
    EXPECT_NE(first.body.find("namespace cache"), std::string::npos);
  }
  // The informer's LIST runs on the loop.
  while (!server.Ready() && io_.run_one() > 0) {
  }
  EXPECT_TRUE(server.Ready());
  EXPECT_EQ(Get(*health, "/readyz").status, 200);
  auto web = Client(server.port());
  json::object a = Response(Post(*web, kMutatePodPath, Review("CREATE", "team-a", "")));
  EXPECT_TRUE(a.contains("patch"));
  json::object b = Response(Post(*web, kMutatePodPath, Review("CREATE", "team-b", "")));
  EXPECT_FALSE(b.contains("patch"));
  EXPECT_EQ(kube.gets, 0);
  // Not in the cache: read with a GET.
  json::object late = Response(Post(*web, kMutatePodPath, Review("CREATE", "late", "")));
  EXPECT_TRUE(late.contains("patch"));
  EXPECT_EQ(kube.gets, 1);
  EXPECT_EQ(kube.lists, 1);
  server.Stop();
}

TEST_F(AdmissionServerTest, UnreadableNamespaceFailsOpenAndSchedulerNameDecidesFirst) {
  Policy policy;
  bridge::LabelSelector sel;
  sel.match_labels = {{"slurm-bridge/managed", "true"}};
  policy.namespace_selector = sel;
  FakeNamespaces kube;
  Server server(io_.get_executor(), policy,
                {.bind_address = "127.0.0.1:0", .health_bind_address = ""}, &kube);
  ASSERT_TRUE(server.Start().has_value());
  while (!server.Ready() && io_.run_one() > 0) {
  }
  auto web = Client(server.port());
  // 403 and 404 on the namespace: the pod is admitted unchanged, with a warning that says why.
  for (const std::string ns : {"secret", "gone"}) {
    SCOPED_TRACE(ns);
    json::object r = Response(Post(*web, kMutatePodPath, Review("CREATE", ns, "", "foo")));
    EXPECT_TRUE(r.at("allowed").as_bool());
    EXPECT_FALSE(r.contains("patch"));
    ASSERT_TRUE(r.contains("warnings"));
    ASSERT_EQ(r.at("warnings").as_array().size(), 1u);
    EXPECT_NE(std::string(r.at("warnings").as_array()[0].as_string()).find(ns), std::string::npos);
  }
  EXPECT_EQ(kube.gets, 2);
  EXPECT_EQ(server.stats().namespace_failures, 2u);
  // A pod already scheduled by the bridge is managed whatever its namespace: no GET, no warning.
  json::object ours =
      Response(Post(*web, kMutatePodPath,
                    Review("CREATE", "secret", "", std::string(bridge::kDefaultSchedulerName))));
  EXPECT_TRUE(ours.at("allowed").as_bool());
  EXPECT_FALSE(ours.contains("warnings"));
  EXPECT_EQ(kube.gets, 2);
  server.Stop();
}

TEST_F(AdmissionServerTest, SelectorWithoutClientIsAStartupError) {
  Policy policy;
  policy.namespace_selector = bridge::LabelSelector{};
  Server server(io_.get_executor(), policy, {.bind_address = "127.0.0.1:0"}, nullptr);
  Result<void> r = server.Start();
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("managedNamespaceSelector"), std::string::npos);
}

// Serves DRA objects: the ResourceClaimTemplate hpc/one-gpu (asking for class big-gpus), the
// DeviceClass big-gpus (gpu.example.com's selector); "broken" answers 500, anything else 404.
class FakeDra : public ReadOnlyClient {
 public:
  asio::awaitable<Result<std::string>> Get(kube::ResourceRef ref) override {
    paths.push_back(ref.Path());
    if (ref.name == "broken") {
      co_return tl::unexpected(Error{ErrorCode::kUnavailable, "etcd is away", 500});
    }
    if (ref.group == "resource.k8s.io" && ref.resource == "resourceclaimtemplates" &&
        ref.namespace_ == "hpc" && ref.name == "one-gpu") {
      co_return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate",)"
                R"("metadata":{"name":"one-gpu","namespace":"hpc"},"spec":{"spec":{"devices":)"
                R"({"requests":[{"name":"gpu","exactly":{"deviceClassName":"big-gpus"}}]}}}})";
    }
    if (ref.group == "resource.k8s.io" && ref.resource == "deviceclasses" &&
        ref.name == "big-gpus") {
      co_return R"({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":)"
                R"({"name":"big-gpus"},"spec":{"selectors":[{"cel":{"expression":)"
                R"("device.driver == 'gpu.example.com'"}}]}})";
    }
    co_return tl::unexpected(Error{ErrorCode::kNotFound, ref.name + " not found", 404});
  }
  asio::awaitable<Result<std::string>> List(kube::ResourceRef, kube::ListOptions) override {
    co_return tl::unexpected(Error{ErrorCode::kUnimplemented, "no"});
  }
  asio::awaitable<Result<void>> Watch(kube::ResourceRef, kube::ListOptions,
                                      std::function<bool(std::string_view)>) override {
    co_return tl::unexpected(Error{ErrorCode::kUnimplemented, "no"});
  }
  std::vector<std::string> paths;
};

// A bridge pod whose spec ends with `spec_extra`, as an AdmissionReview.
std::string DraReview(const std::string& op, const std::string& spec_extra) {
  std::string pod =
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"hpc"},"spec":{)"
      R"("schedulerName":"slurm-bridge-scheduler","containers":[{"name":"c","image":"i"}],)" +
      spec_extra + "}}";
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",)"
         R"("kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"hpc","operation":")" +
         op + R"(","userInfo":{"username":"alice"},"object":)" + pod + "}}";
}

std::string ClaimOf(const std::string& tmpl) {
  return R"("resourceClaims":[{"name":"gpu","resourceClaimTemplateName":")" + tmpl + R"("}])";
}

// The webhook reads the ResourceClaimTemplates a bridge pod names and the DeviceClasses they and
// its extended resources name, and judges the pod with them.
TEST_F(AdmissionServerTest, DraObjectsAreReadForTheCheck) {
  Policy policy;
  policy.managed_namespaces = {"hpc"};
  FakeDra kube;
  Server server(io_.get_executor(), policy,
                {.bind_address = "127.0.0.1:0", .health_bind_address = ""}, &kube);
  ASSERT_TRUE(server.Start().has_value());
  auto web = Client(server.port());
  auto validate = [&](const std::string& spec) {
    return Response(Post(*web, kValidatePodPath, DraReview("CREATE", spec)));
  };

  json::object ok = validate(ClaimOf("one-gpu"));
  EXPECT_TRUE(ok.at("allowed").as_bool()) << json::serialize(ok);
  EXPECT_EQ(kube.paths,
            (std::vector<std::string>{
                "/apis/resource.k8s.io/v1/namespaces/hpc/resourceclaimtemplates/one-gpu",
                "/apis/resource.k8s.io/v1/deviceclasses/big-gpus"}));

  json::object missing = validate(ClaimOf("nope"));
  EXPECT_FALSE(missing.at("allowed").as_bool());
  EXPECT_NE(std::string(missing.at("status").at("message").as_string()).find("does not exist"),
            std::string::npos)
      << json::serialize(missing);

  // A failed read (not a 404) is logged and counted; the pod is judged without the template.
  json::object broken = validate(ClaimOf("broken"));
  EXPECT_FALSE(broken.at("allowed").as_bool());
  EXPECT_NE(std::string(broken.at("status").at("message").as_string()).find("could not be read"),
            std::string::npos)
      << json::serialize(broken);
  EXPECT_EQ(server.stats().dra_read_failures, 1u);

  // An extended resource of a class read from the apiserver; an absent class falls back to the
  // driver's name.
  kube.paths.clear();
  json::object by_class = validate(
      R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/big-gpus":"1"}}}])");
  EXPECT_TRUE(by_class.at("allowed").as_bool()) << json::serialize(by_class);
  json::object by_driver = validate(
      R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/gpu.example.com":"1"}}}])");
  EXPECT_TRUE(by_driver.at("allowed").as_bool()) << json::serialize(by_driver);
  EXPECT_EQ(kube.paths.size(), 2u);
  // A pod without DRA requests costs no read.
  kube.paths.clear();
  EXPECT_TRUE(validate(R"("restartPolicy":"Never")").at("allowed").as_bool());
  EXPECT_TRUE(kube.paths.empty());
  EXPECT_EQ(server.stats().dra_reads, 6u);
  server.Stop();
}

// Review R-8: the DRA objects of one review are read side by side, a round for the templates,
// then one for the classes they name, so that slow reads (one try of up to 3 s each) stay inside
// the webhook's 10 s however many a pod names. Each read of this apiserver takes 200 ms; the
// two templates (and then the two classes) are asked for before either is answered.
class SlowDra final : public FakeDra {
 public:
  asio::awaitable<Result<std::string>> Get(kube::ResourceRef ref) override {
    ++in_flight;
    max_in_flight = std::max(max_in_flight, in_flight);
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(200));
    co_await t.async_wait(asio::use_awaitable);
    --in_flight;
    // A second template and class, the same as the first under other names.
    if (ref.name == "one-gpu-b") ref.name = "one-gpu";
    if (ref.name == "big-gpus-b") ref.name = "big-gpus";
    co_return co_await FakeDra::Get(ref);
  }
  int in_flight = 0;
  int max_in_flight = 0;
};

TEST_F(AdmissionServerTest, DraObjectsOfAReviewAreReadSideBySide) {
  Policy policy;
  policy.managed_namespaces = {"hpc"};
  SlowDra kube;
  Server server(io_.get_executor(), policy,
                {.bind_address = "127.0.0.1:0", .health_bind_address = ""}, &kube);
  ASSERT_TRUE(server.Start().has_value());
  auto web = Client(server.port());
  const std::string spec =
      R"("resourceClaims":[{"name":"a","resourceClaimTemplateName":"one-gpu"},)"
      R"({"name":"b","resourceClaimTemplateName":"one-gpu-b"}],)"
      R"("initContainers":[{"name":"i","resources":{"limits":)"
      R"({"deviceclass.resource.kubernetes.io/big-gpus-b":"1"}}}])";
  json::object r = Response(Post(*web, kValidatePodPath, DraReview("CREATE", spec)));
  EXPECT_TRUE(r.at("allowed").as_bool()) << json::serialize(r);
  EXPECT_EQ(server.stats().dra_reads, 4u);  // two templates, then two classes
  EXPECT_EQ(kube.max_in_flight, 2) << "read one after another";
  EXPECT_EQ(kube.in_flight, 0);
  server.Stop();
}

TEST_F(AdmissionServerTest, DraWithoutClientJudgesWithoutTheObjects) {
  Policy policy;
  policy.managed_namespaces = {"hpc"};
  Server server(io_.get_executor(), policy,
                {.bind_address = "127.0.0.1:0", .health_bind_address = ""}, nullptr);
  ASSERT_TRUE(server.Start().has_value());
  auto web = Client(server.port());
  json::object claim = Response(Post(*web, kValidatePodPath, DraReview("CREATE", ClaimOf("t"))));
  EXPECT_FALSE(claim.at("allowed").as_bool());
  EXPECT_NE(std::string(claim.at("status").at("message").as_string()).find("could not be read"),
            std::string::npos);
  json::object by_driver = Response(Post(
      *web, kValidatePodPath,
      DraReview(
          "CREATE",
          R"("initContainers":[{"name":"i","resources":{"limits":{"deviceclass.resource.kubernetes.io/gpu.nvidia.com":"1"}}}])")));
  EXPECT_TRUE(by_driver.at("allowed").as_bool()) << json::serialize(by_driver);
  EXPECT_EQ(server.stats().dra_reads, 0u);
  server.Stop();
}

// N-19: a namespace GET to an apiserver that accepts the connection and never answers gives up
// after NamespaceClientOptions' 3 s, inside the webhook's 10 s, so the webhook can fail open.
TEST(NamespaceClient, GivesUpWellInsideTheWebhookTimeout) {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::vector<asio::ip::tcp::socket> held;  // accepted, never answered
  std::function<void()> accept = [&] {
    acceptor.async_accept([&](boost::system::error_code ec, asio::ip::tcp::socket sock) {
      if (ec) return;
      held.push_back(std::move(sock));
      accept();
    });
  };
  accept();
  auto endpoint =
      net::ParseEndpoint("http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()));
  ASSERT_TRUE(endpoint);
  auto http = net::HttpClient::Create(io.get_executor(), *endpoint, NamespaceClientOptions());
  ASSERT_TRUE(http);
  std::unique_ptr<kube::Client> client = kube::MakeClient(**http, nullptr);
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> got = RunSync(io, client->Get(kube::NamespacesRef().WithName("slow")));
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code, ErrorCode::kDeadlineExceeded) << got.error().ToString();
  EXPECT_GE(took, std::chrono::milliseconds(2900));
  EXPECT_LT(took, std::chrono::seconds(5)) << "one try of 3 s, no retry";
  EXPECT_EQ(held.size(), 1u) << "no second attempt";
}

// N-7: a burst of 200 concurrent AdmissionReviews from one address (one kube-apiserver, one
// TLS connection per call) is answered in full. Prints the time the burst took (the load figure;
// not asserted).
TEST_F(AdmissionServerTest, BurstOf200ConcurrentReviewsFromOneAddressIsAnswered) {
  char tmpl[] = "/tmp/sb-adm-load.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::string why;
  std::optional<net::testing::TestCerts> certs = net::testing::MakeTestCerts(dir, "w", &why);
  ASSERT_TRUE(certs) << why;
  Policy policy;
  policy.managed_namespaces = {"hpc"};
  Server server(io_.get_executor(), policy,
                {.bind_address = "127.0.0.1:0",
                 .cert_file = certs->cert_file,
                 .key_file = certs->key_file,
                 .health_bind_address = "0"},
                nullptr);
  ASSERT_TRUE(server.Start().has_value());
  auto ep = net::ParseEndpoint("https://127.0.0.1:" + std::to_string(server.port()));
  ASSERT_TRUE(ep);
  net::ClientOptions copt{.max_attempts = 1, .max_idle_connections = 256};
  copt.tls.ca_file = certs->ca_file;
  auto client = net::HttpClient::Create(io_.get_executor(), *ep, copt);
  ASSERT_TRUE(client);
  constexpr int kBurst = 200;
  int ok = 0;
  int done = 0;
  std::vector<std::string> errors;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kBurst; ++i) {
    net::HttpRequest req{.method = net::Method::kPost,
                         .target = std::string(i % 2 ? kMutatePodPath : kValidatePodPath),
                         .headers = {{"Content-Type", "application/json"}},
                         .body = Review("CREATE", "hpc", "")};
    asio::co_spawn(
        io_,
        [&, req = std::move(req)]() -> asio::awaitable<void> {
          Result<net::HttpResponse> r = co_await (*client)->Send(req);
          if (r && r->status == 200) {
            ++ok;
          } else if (errors.size() < 5) {
            errors.push_back(r ? std::to_string(r->status) : r.error().ToString());
          }
          ++done;
        },
        asio::detached);
  }
  while (done < kBurst && io_.run_one_for(std::chrono::seconds(30)) > 0) {
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(ok, kBurst) << ::testing::PrintToString(errors);
  EXPECT_EQ(server.stats().reviews, static_cast<std::uint64_t>(kBurst));
  EXPECT_GT((*client)->stats().connections_opened, 64u) << "the burst did not exceed the old cap";
  std::printf(
      "webhook load: %d concurrent AdmissionReviews over TLS from one address in %lld ms\n", kBurst,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  server.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sb::admission
