// SPDX-License-Identifier: Apache-2.0
#include "kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace sb::kube {
namespace {

namespace fs = std::filesystem;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kube_config_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  fs::path dir_;
};

constexpr const char* kTwoContexts = R"(apiVersion: v1
kind: Config
current-context: alpha
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority: ca.crt
- name: c2
  cluster:
    server: https://example.test
    certificate-authority-data: aGVsbG8gQ0E=
    insecure-skip-tls-verify: true
    tls-server-name: api.example.test
users:
- name: u1
  user:
    token: secret-one
- name: u2
  user:
    tokenFile: tok
    client-certificate-data: Y2VydA==
    client-key: key.pem
contexts:
- name: alpha
  context: {cluster: c1, user: u1, namespace: team-a}
- name: beta
  context: {cluster: c2, user: u2}
)";

TEST_F(ConfigTest, CurrentContext) {
  Write("ca.crt", "CA PEM");
  std::string path = Write("config", kTwoContexts);
  Result<Config> cfg = LoadKubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg->tls.ca_file, (dir_ / "ca.crt").string());
  EXPECT_TRUE(cfg->tls.ca_pem.empty());
  EXPECT_FALSE(cfg->tls.insecure_skip_verify);
  EXPECT_EQ(cfg->default_namespace, "team-a");
  ASSERT_TRUE(cfg->token);
  EXPECT_EQ(cfg->token->Token().value(), "secret-one");
}

TEST_F(ConfigTest, NamedContextWithDataFieldsAndTokenFile) {
  Write("tok", "file-token\n");
  Write("key.pem", "KEY PEM");
  std::string path = Write("config", kTwoContexts);
  Result<Config> cfg = LoadKubeconfig(path, "beta");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://example.test");
  EXPECT_EQ(cfg->tls.ca_pem, "hello CA");
  EXPECT_TRUE(cfg->tls.insecure_skip_verify);
  EXPECT_EQ(cfg->tls.server_name, "api.example.test");
  EXPECT_EQ(cfg->tls.cert_pem, "cert");
  EXPECT_EQ(cfg->tls.key_pem, "KEY PEM");
  EXPECT_EQ(cfg->default_namespace, "default");
  EXPECT_EQ(cfg->token->Token().value(), "file-token");
  EXPECT_EQ(cfg->token->path(), (dir_ / "tok").string());
}

TEST_F(ConfigTest, ErrorsNameFileAndKey) {
  struct Case {
    std::string name;
    std::string yaml;
    std::string context;
    std::string want;  // substring of the message
  };
  const std::string head =
      "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n";
  const std::vector<Case> cases = {
      {"no current context", "clusters: []\n", "", "current-context"},
      {"unknown context", head, "zzz", "contexts: no entry named \"zzz\""},
      {"no cluster", head + "users: [{name: u, user: {}}]\n", "", "clusters: no entry named \"c\""},
      {"no server", head + "clusters: [{name: c, cluster: {}}]\nusers: [{name: u, user: {}}]\n", "",
       "clusters[c].cluster.server: missing"},
      {"bad base64",
       head + "clusters: [{name: c, cluster: {server: 'https://x', certificate-authority-data: "
              "'%%%'}}]\n"
              "users: [{name: u, user: {}}]\n",
       "", "clusters[c].cluster.certificate-authority-data: bad base64"},
      {"bad bool",
       head + "clusters: [{name: c, cluster: {server: 'https://x', insecure-skip-tls-verify: "
              "maybe}}]\n"
              "users: [{name: u, user: {}}]\n",
       "", "insecure-skip-tls-verify"},
      {"missing ca file",
       head + "clusters: [{name: c, cluster: {server: 'https://x', certificate-authority: "
              "nope.crt}}]\n"
              "users: [{name: u, user: {}}]\n",
       "", "certificate-authority: no such file"},
      {"cert without key",
       head + "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
              "users: [{name: u, user: {client-certificate-data: Y2VydA==}}]\n",
       "", "users[u].user: client certificate and client key"},
      {"yaml syntax", "clusters: [\n", "", "config:"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = Write("config", c.yaml);
    Result<Config> cfg = LoadKubeconfig(path, c.context);
    ASSERT_FALSE(cfg);
    EXPECT_EQ(cfg.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(cfg.error().message.find(path), std::string::npos) << cfg.error().message;
    EXPECT_NE(cfg.error().message.find(c.want), std::string::npos) << cfg.error().message;
  }
  Result<Config> missing = LoadKubeconfig((dir_ / "nope").string());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("nope"), std::string::npos);
}

TEST_F(ConfigTest, TokenNeverInErrors) {
  std::string path = Write("config",
                           "current-context: a\ncontexts: [{name: a, context: {cluster: c, user: "
                           "u}}]\nclusters: [{name: c, cluster: {server: 'https://x', "
                           "certificate-authority-data: '!!'}}]\nusers: [{name: u, user: {token: "
                           "TOPSECRET}}]\n");
  Result<Config> cfg = LoadKubeconfig(path);
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.error().message.find("TOPSECRET"), std::string::npos);
}

TEST_F(ConfigTest, InCluster) {
  Write("token", "sa-token-1\n");
  Write("ca.crt", "CA");
  Write("namespace", "kube-system\n");
  InClusterSource src{.host = "10.96.0.1", .port = "443", .dir = dir_.string()};
  Result<Config> cfg = LoadInClusterConfig(src);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->tls.ca_file, (dir_ / "ca.crt").string());
  EXPECT_EQ(cfg->default_namespace, "kube-system");
  EXPECT_EQ(cfg->token->Token().value(), "sa-token-1");

  InClusterSource v6{.host = "fd00::1", .port = "6443", .dir = dir_.string()};
  EXPECT_EQ(LoadInClusterConfig(v6)->server, "https://[fd00::1]:6443");

  fs::remove(dir_ / "token");
  Result<Config> no_token = LoadInClusterConfig(src);
  ASSERT_FALSE(no_token);
  EXPECT_NE(no_token.error().message.find("token"), std::string::npos);
}

TEST_F(ConfigTest, InClusterNeedsEnvironment) {
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  Result<Config> cfg = LoadInClusterConfig({.dir = dir_.string()});
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.error().code, ErrorCode::kNotFound);
}

TEST_F(ConfigTest, Precedence) {
  Write("ca.crt", "CA");
  std::string explicit_path = Write("explicit", kTwoContexts);
  std::string env_cfg = std::string(kTwoContexts);
  env_cfg.replace(env_cfg.find("current-context: alpha"), 22, "current-context: beta");
  Write("tok", "t");
  Write("key.pem", "K");
  std::string env_path = Write("fromenv", env_cfg);
  Write("token", "sa");
  InClusterSource in{.host = "10.0.0.9", .port = "443", .dir = dir_.string()};

  ::setenv("KUBECONFIG", (dir_.string() + "/missing:" + env_path).c_str(), 1);
  Result<Config> a = LoadConfig({.kubeconfig_path = explicit_path, .in_cluster = in});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->server, "https://10.0.0.1:6443");
  Result<Config> b = LoadConfig({.in_cluster = in});
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->server, "https://example.test");
  ::unsetenv("KUBECONFIG");
  Result<Config> c = LoadConfig({.in_cluster = in});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->server, "https://10.0.0.9:443");
}

TEST_F(ConfigTest, TokenFileRotatesAtMostOncePerMinuteAndOnInvalidate) {
  std::string path = Write("token", "one");
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  TokenSource t = TokenSource::File(path, std::chrono::seconds(60), [&] { return now; });
  EXPECT_EQ(t.Token().value(), "one");
  Write("token", "two");
  now += std::chrono::seconds(30);
  EXPECT_EQ(t.Token().value(), "one");  // cached
  EXPECT_EQ(t.reads(), 1);
  now += std::chrono::seconds(31);
  EXPECT_EQ(t.Token().value(), "two");  // a minute passed
  EXPECT_EQ(t.reads(), 2);
  Write("token", "three");
  t.Invalidate();  // after a 401
  EXPECT_EQ(t.Token().value(), "three");
  EXPECT_EQ(t.reads(), 3);
  fs::remove(path);
  t.Invalidate();
  EXPECT_EQ(t.Token().value(), "three");  // an unreadable file keeps the last token
}

TEST(Base64, Table) {
  struct Case {
    std::string in;
    bool ok;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"", true, ""},        {"Zg==", true, "f"},      {"Zm8=", true, "fo"},
      {"Zm9v", true, "foo"}, {"Zm9vYg", true, "foob"}, {"Zm9v\nYmFy", true, "foobar"},
      {"Zm9v!", false, ""},  {"Zg=a", false, ""},      {"Z", false, ""},
      {"Zg===", false, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.in);
    Result<std::string> got = Base64Decode(c.in);
    EXPECT_EQ(got.has_value(), c.ok);
    if (c.ok && got) {
      EXPECT_EQ(*got, c.want);
    }
  }
}

}  // namespace
}  // namespace sb::kube
