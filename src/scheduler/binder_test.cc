// SPDX-License-Identifier: Apache-2.0
//
// The binder's DRA step (Binder::WriteClaims) against an in-memory Slurm (FakeSlurmClient) and
// the fake apiserver (resource.k8s.io and the pod's status answered by a hook). The job's layout
// that step 1 (ReadAllocation) read is the one the claims are written from: one GET
// /resources/{id} per bind, not two.
#include "scheduler/binder.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "async/clock.h"
#include "net/http_client.h"
#include "scheduler/stats.h"
#include "testing/fake_apiserver.h"
#include "testing/fake_slurm_client.h"
#include "testing/run.h"
#include "testing/testdata.h"

namespace sb::scheduler {
namespace {
namespace asio = boost::asio;
using sb::testing::FakeApiServer;
using sb::testing::FakeReply;
using sb::testing::FakeRequest;
using sb::testing::HttpReply;

// Events are not the point here: taken and dropped.
class NullSink final : public kube::EventSink {
 public:
  asio::awaitable<Result<kube::Event>> Create(kube::Event event) override { co_return event; }
  asio::awaitable<Result<kube::Event>> Patch(kube::EventPatch) override { co_return kube::Event{}; }
};

class BinderDraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ep = net::ParseEndpoint(api_.url());
    ASSERT_TRUE(ep);
    http_ = std::move(*net::HttpClient::Create(io_.get_executor(), *ep, {}));
    kube_ = kube::MakeClient(*http_, nullptr, {});
    api_.Intercept([this](const FakeRequest& req) { return Hook(req); });
    binder_ = std::make_unique<Binder>(*kube_, slurm_, recorder_, config_, stats_);
    // Pod p0 asks for two of the example driver's GPUs; its job runs on n1 with GPUs 1 and 2.
    pod_.metadata.name = "p0";
    pod_.metadata.namespace_ = "ns";
    pod_.metadata.uid = "0b7a1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d";
    kube::Container c;
    c.name = "train";
    c.resources.limits = {{"deviceclass.resource.kubernetes.io/gpu.example.com", "2"}};
    c.resources.requests = c.resources.limits;
    pod_.spec.containers.push_back(std::move(c));
    slurm::JobInfo job;
    job.job_state = {"RUNNING"};
    job.nodes = "n1";
    job.gres_detail = {"gpu:fake:2(IDX:1-2)"};
    job_id_ = slurm_.AddJob(job);
  }

  std::optional<FakeReply> Hook(const FakeRequest& req) {
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (path == "/apis/resource.k8s.io/v1/resourceslices") {
      return HttpReply(
          200, R"({"kind":"ResourceSliceList","metadata":{},"items":[)" +
                   sb::testing::ReadTestData("kube/resourceslice_gpu_example_n1.json") + "]}");
    }
    if (req.method == "POST" && path == "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims") {
      ++claims_created_;
      return HttpReply(201, req.body);
    }
    if (req.method == "PATCH" && path.ends_with("/status")) {
      if (path.starts_with("/apis/resource.k8s.io/")) claim_status_.push_back(req.body);
      return HttpReply(200, R"({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p0",)"
                            R"("namespace":"ns","uid":"0b7a1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"}})");
    }
    return std::nullopt;
  }

  // Step 4's DRA writes for p0 on n1, with `allocation` as step 1 read it (or none).
  Result<void> WriteClaims(const Allocation* allocation) {
    std::vector<Assignment> assign = {{.pod = &pod_, .node = "n1"}};
    const Binder::DraInput dra{.profiles = &config_.device_profiles};
    return sb::testing::RunSync(
        io_, binder_->WriteClaims(job_id_, assign, {{"n1", "n1"}}, dra, allocation));
  }

  asio::io_context io_;
  FakeApiServer api_{io_};
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  sb::testing::FakeSlurmClient slurm_;
  async::FakeClock clock_;
  NullSink sink_;
  kube::EventRecorder recorder_{clock_, sink_, {}};
  bridge::Config config_;
  Stats stats_;
  std::unique_ptr<Binder> binder_;
  kube::Pod pod_;
  std::int64_t job_id_ = 0;
  int claims_created_ = 0;
  std::vector<std::string> claim_status_;
};

TEST_F(BinderDraTest, TheLayoutReadInStepOneIsNotReadAgainForTheClaims) {
  Result<Allocation> a = sb::testing::RunSync(io_, binder_->ReadAllocation(job_id_, true));
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_EQ(a->nodes, "n1");
  ASSERT_EQ(a->layout.size(), 1u);
  EXPECT_EQ(slurm_.calls("JobResources"), 1);
  Result<void> written = WriteClaims(&*a);
  ASSERT_TRUE(written) << written.error().ToString();
  EXPECT_EQ(slurm_.calls("JobResources"), 1) << "the layout of step 1, not a second GET";
  EXPECT_EQ(claims_created_, 1);
  ASSERT_EQ(claim_status_.size(), 1u);
  EXPECT_NE(claim_status_[0].find(R"("device":"gpu-1")"), std::string::npos) << claim_status_[0];
  EXPECT_NE(claim_status_[0].find(R"("device":"gpu-2")"), std::string::npos) << claim_status_[0];
  EXPECT_EQ(stats_.claims_written, 1u);
}

// Step 1 read the job record (or did not run): the claims read the layout themselves.
TEST_F(BinderDraTest, WithoutALayoutFromStepOneTheClaimsReadIt) {
  Result<Allocation> a = sb::testing::RunSync(io_, binder_->ReadAllocation(job_id_, false));
  ASSERT_TRUE(a) << a.error().ToString();
  EXPECT_TRUE(a->layout.empty());
  EXPECT_EQ(slurm_.calls("GetJob"), 1);  // the job record
  EXPECT_EQ(slurm_.calls("JobResources"), 0);
  ASSERT_TRUE(WriteClaims(&*a));
  EXPECT_EQ(slurm_.calls("JobResources"), 1);
  ASSERT_TRUE(WriteClaims(nullptr));
  EXPECT_EQ(slurm_.calls("JobResources"), 2);
  EXPECT_EQ(claim_status_.size(), 2u);
}

}  // namespace
}  // namespace sb::scheduler
