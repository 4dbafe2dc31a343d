// SPDX-License-Identifier: Apache-2.0
//
#include "wiring/tag_pods.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "net/http_client.h"
#include "testing/fake_apiserver.h"
#include "testing/run.h"

namespace sb::wiring {
namespace {

using sb::testing::FakeApiServer;
using sb::testing::RunSync;

class TagPodsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ep = net::ParseEndpoint(api_.url());
    ASSERT_TRUE(ep);
    http_ = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, {}));
    kube_ = kube::MakeClient(*http_, nullptr);
  }
  std::string UidOf(const std::string& name) const {
    const std::string json = api_.PodJson("ns", name);
    const std::string key = R"("uid":")";
    const std::size_t at = json.find(key);
    if (at == std::string::npos) return "";
    const std::size_t from = at + key.size();
    return json.substr(from, json.find('"', from) - from);
  }
  TagPodsAnswer Read(std::vector<std::string> pods, std::vector<std::string> uids) {
    return RunSync(io_, ReadTagPods(*kube_, std::move(pods), std::move(uids)));
  }

  boost::asio::io_context io_;
  FakeApiServer api_{io_};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
};

TEST_F(TagPodsTest, GoneWhenNoneExistsOrEachHasAnotherUid) {
  api_.AddPod("ns", "recreated");
  const TagPodsAnswer a = Read({"ns/deleted", "ns/recreated", "no-slash"}, {"u1", "old-uid"});
  EXPECT_TRUE(a.gone);
  EXPECT_EQ(a.existing, "");
  EXPECT_FALSE(a.error);
}

TEST_F(TagPodsTest, AnExistingPodIsNamed) {
  api_.AddPod("ns", "live");
  const std::string uid = UidOf("live");
  ASSERT_FALSE(uid.empty());
  TagPodsAnswer a = Read({"ns/deleted", "ns/live"}, {"u1", uid});
  EXPECT_FALSE(a.gone);
  EXPECT_EQ(a.existing, "ns/live");
  // Without its UID in the tag, a pod of that name counts as existing.
  a = Read({"ns/live"}, {});
  EXPECT_FALSE(a.gone);
  EXPECT_EQ(a.existing, "ns/live");
}

TEST_F(TagPodsTest, AFailedReadLeavesTheAnswerUnknown) {
  api_.Intercept([](const sb::testing::FakeRequest& req) -> std::optional<sb::testing::FakeReply> {
    if (req.target.find("/pods/broken") == std::string::npos) return std::nullopt;
    return sb::testing::HttpReply(500, R"({"kind":"Status","code":500,"message":"boom"})");
  });
  const TagPodsAnswer a = Read({"ns/deleted", "ns/broken", "ns/after"}, {"u1", "u2", "u3"});
  EXPECT_FALSE(a.gone);
  ASSERT_TRUE(a.error);
  EXPECT_EQ(a.failed, "ns/broken");
  EXPECT_EQ(a.existing, "");
}

}  // namespace
}  // namespace sb::wiring
