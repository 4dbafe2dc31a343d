// SPDX-License-Identifier: Apache-2.0
//
// `slurm-bridge epilog` (RunEpilog) against a fake apiserver on a thread of its own: what it
// waits for, how many requests a native job costs, and that bad input or an apiserver that is
// down end it with status 0 within the max wait.
#include "app/epilog_cmd.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "bridge/names.h"
#include "testing/fake_apiserver.h"

namespace sb::app {
namespace {
namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kJobLabel(bridge::kJobIdLabel);

class EpilogCmdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sb-epilog-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    api_ = std::make_unique<sb::testing::FakeApiServer>(io_);
    api_->pod_scheduler_name = std::string(bridge::kDefaultSchedulerName);  // the bridge's pods
    WriteKubeconfig(dir_ / "kubeconfig", api_->url());
    ::setenv("SLURM_JOB_ID", "42", 1);
    ::setenv("SLURMD_NODENAME", "n1", 1);
  }
  void TearDown() override {
    StopServer();
    std::filesystem::remove_all(dir_);
    ::unsetenv("SLURM_JOB_ID");
    ::unsetenv("SLURMD_NODENAME");
  }
  static void WriteKubeconfig(const std::filesystem::path& path, const std::string& server) {
    std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                           "    server: "
                        << server
                        << "\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n"
                           "  context:\n    cluster: c\n    user: u\ncurrent-context: x\n";
  }
  // The fake serves from here on (on its thread); touch it only through Post() until StopServer.
  void StartServer() {
    thread_ = std::thread([this] { io_.run(); });
  }
  void Post(std::function<void()> f) { asio::post(io_, std::move(f)); }
  void StopServer() {
    guard_.reset();
    if (thread_.joinable()) {
      io_.stop();
      thread_.join();
    }
  }
  EpilogOptions Options(const std::string& max_wait = "20s") {
    EpilogOptions o;
    o.kubeconfig = (dir_ / "kubeconfig").string();
    o.max_wait = max_wait;
    o.log_level = "debug";
    return o;
  }
  // Seconds RunEpilog took; its status in `status`.
  static double Timed(const EpilogOptions& o, int* status) {
    const auto start = Clock::now();
    *status = RunEpilog(o);
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  std::filesystem::path dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_{io_.get_executor()};
  std::unique_ptr<sb::testing::FakeApiServer> api_;
  std::thread thread_;
};

TEST_F(EpilogCmdTest, ANativeJobCostsOneListAndReturnsAtOnce) {
  api_->AddPod("ns", "other-job", {{kJobLabel, "41"}}, "n1");
  int status = -1;
  StartServer();
  const double took = Timed(Options(), &status);
  StopServer();
  EXPECT_EQ(status, 0);
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(api_->lists(), 1);
}

TEST_F(EpilogCmdTest, AFinishedPodOrOneOnAnotherNodeDoesNotHold) {
  api_->AddPod("ns", "elsewhere", {{kJobLabel, "42"}}, "n2");
  api_->AddPod("ns", "done", {{kJobLabel, "42"}}, "n1");
  api_->PatchPod("ns", "done", R"({"status":{"phase":"Succeeded"}})");
  int status = -1;
  StartServer();
  const double took = Timed(Options(), &status);
  StopServer();
  EXPECT_EQ(status, 0);
  EXPECT_LT(took, 2.0);
}

// R-3: a tenant's pod of another scheduler, labelled with the job and annotated with the node,
// and an unbound bridge pod annotated so, held the node for the max wait. Neither holds now, and
// the native job still costs one LIST.
TEST_F(EpilogCmdTest, AnotherSchedulersPodOrAnUnboundOneDoesNotHold) {
  const std::string annotated =
      fmt::format(R"({{"metadata":{{"annotations":{{"{}":"n1"}}}}}})", bridge::kNodeAnnotation);
  api_->pod_scheduler_name = "nobody";
  api_->AddPod("team-b", "hold", {{kJobLabel, "42"}});
  api_->PatchPod("team-b", "hold", annotated);
  api_->AddPod("team-b", "bound-hold", {{kJobLabel, "42"}}, "n1");
  api_->pod_scheduler_name = std::string(bridge::kDefaultSchedulerName);
  api_->AddPod("ns", "unbound", {{kJobLabel, "42"}});
  api_->PatchPod("ns", "unbound", annotated);
  int status = -1;
  StartServer();
  const double took = Timed(Options(), &status);
  StopServer();
  EXPECT_EQ(status, 0);
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(api_->lists(), 1);
}

TEST_F(EpilogCmdTest, WaitsUntilThePodOnItsNodeIsGone) {
  api_->AddPod("ns", "p", {{kJobLabel, "42"}}, "n1");
  api_->PatchPod("ns", "p", R"({"status":{"phase":"Running"}})");
  StartServer();
  asio::steady_timer later(io_, 3s);
  later.async_wait([this](const boost::system::error_code&) { api_->DeletePod("ns", "p"); });
  int status = -1;
  const double took = Timed(Options(), &status);
  StopServer();
  EXPECT_EQ(status, 0);
  EXPECT_GE(took, 2.9);
  EXPECT_LT(took, 6.0);  // polls every second
}

TEST_F(EpilogCmdTest, MapsAKubernetesNodeNamedOtherwiseThroughItsLabel) {
  api_->PutNode("kube-n5", R"({"metadata":{"labels":{"slinky.slurm.net/slurm-nodename":"n5"}}})");
  api_->AddPod("ns", "p", {{kJobLabel, "42"}}, "kube-n5");
  api_->PatchPod("ns", "p", R"({"status":{"phase":"Running"}})");
  ::setenv("SLURMD_NODENAME", "n1", 1);
  int status = -1;
  StartServer();
  double took = Timed(Options(), &status);  // n1: not its node
  EXPECT_EQ(status, 0);
  EXPECT_LT(took, 2.0);
  ::setenv("SLURMD_NODENAME", "n5", 1);
  took = Timed(Options("2s"), &status);  // n5: held until the max wait
  StopServer();
  EXPECT_EQ(status, 0);
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 4.0);
}

TEST_F(EpilogCmdTest, GivesUpAfterTheMaxWait) {
  api_->AddPod("ns", "p", {{kJobLabel, "42"}}, "n1");
  int status = -1;
  StartServer();
  const double took = Timed(Options("2s"), &status);
  StopServer();
  EXPECT_EQ(status, 0);
  EXPECT_GE(took, 1.9);
  EXPECT_LT(took, 4.0);
}

TEST_F(EpilogCmdTest, AnApiserverThatIsDownEndsItWithinTheMaxWait) {
  WriteKubeconfig(dir_ / "kubeconfig", "http://127.0.0.1:1");  // nothing listens
  int status = -1;
  const double took = Timed(Options("3s"), &status);
  EXPECT_EQ(status, 0);
  EXPECT_LT(took, 5.0);
}

TEST_F(EpilogCmdTest, BadInputExitsZeroAtOnce) {
  int status = -1;
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_LT(Timed(Options(), &status), 1.0);
  EXPECT_EQ(status, 0);
  ::setenv("SLURM_JOB_ID", "4x", 1);
  EXPECT_LT(Timed(Options(), &status), 1.0);
  EXPECT_EQ(status, 0);
  ::setenv("SLURM_JOB_ID", "42", 1);
  ::unsetenv("SLURMD_NODENAME");
  EXPECT_LT(Timed(Options(), &status), 1.0);
  EXPECT_EQ(status, 0);
  ::setenv("SLURMD_NODENAME", "n1", 1);
  std::ofstream(dir_ / "kubeconfig") << "this: [is not a kubeconfig";
  EXPECT_LT(Timed(Options(), &status), 1.0);
  EXPECT_EQ(status, 0);
  EpilogOptions missing = Options();
  missing.kubeconfig = (dir_ / "nope").string();
  missing.config_path = (dir_ / "no-config.yaml").string();
  EXPECT_LT(Timed(missing, &status), 1.0);
  EXPECT_EQ(status, 0);
}

}  // namespace
}  // namespace sb::app
