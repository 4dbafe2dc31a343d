// SPDX-License-Identifier: Apache-2.0
//
// testing/e2e_env.h
//
// E2eEnv: what every end-to-end fixture needs of the test environment — its env file, a
// Kubernetes client (through its KUBECONFIG) and a Slurm client (SlurmUser's token) on the
// fixture's own io_context, and scontrol & co. in the Slurm chroot. Shell and WaitFor are the
// fixtures' common helpers. The checkout is found at run time (testing/paths.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "kube/client.h"
#include "kube/config.h"
#include "slurm/client.h"
#include "testing/paths.h"
#include "testing/run.h"
#include "testing/testenv.h"

namespace sb::testing {

// Runs `cmd` with sh; a test failure (with its output) when it exits non-zero.
inline std::string Shell(const std::string& cmd) {
  std::string out;
  int rc = RunCommand(cmd, &out);
  EXPECT_EQ(rc, 0) << cmd << "\n" << out;
  return out;
}

class E2eEnv {
 protected:
  // Loads the environment and connects both clients; a fatal test failure when it cannot
  // (callers check HasFatalFailure()).
  void Connect() {
    std::string why;
    std::optional<TestEnv> env = TestEnv::Load(&why);
    ASSERT_TRUE(env) << why;
    env_ = *env;
    ::setenv("KUBECONFIG", env_.Get("KUBECONFIG").c_str(), 1);
    Result<kube::Config> cfg = kube::LoadConfig({});
    ASSERT_TRUE(cfg) << cfg.error().message;
    kube_config_ = *cfg;
    auto http = kube::MakeHttpClient(io_.get_executor(), kube_config_);
    ASSERT_TRUE(http) << http.error().message;
    http_ = std::move(*http);
    kube_ = kube::MakeClient(*http_, kube_config_.token);
    auto slurm = slurm::MakeClient(io_.get_executor(), {.url = env_.Get("SLURM_REST_URL")},
                                   slurm::MakeFileTokenSource(env_.Get("SLURM_JWT_FILE")));
    ASSERT_TRUE(slurm) << slurm.error().message;
    slurm_ = std::move(*slurm);
  }

  // `cmd` (scontrol, squeue, ...) in the Slurm chroot; its output, errors included.
  std::string Slurm(const std::string& cmd) {
    std::string out;
    RunCommand(fmt::format("{}/testenv/slurm/exec.sh {} {} 2>&1", sb::testing::SourceDir(),
                           env_.dir(), cmd),
               &out);
    return out;
  }

  // An external job of one CPU named `name` with `admin_comment`, submitted straight to Slurm
  // (someone else's job, or one the bridge would have left); its id, 0 when Slurm refused it.
  std::int64_t SubmitExternal(const std::string& name, const std::string& admin_comment) {
    slurm::JobDescription j;
    j.name = name;
    j.partition = env_.Get("SLURM_PARTITION");
    j.flags = {"EXTERNAL_JOB"};
    j.nodes = "1";
    j.cpus_per_task = 1;
    j.memory_per_node = slurm::NoValNumber::Of(64);
    j.current_working_directory = "/tmp";
    j.admin_comment = admin_comment;
    auto r = RunSync(io_, slurm_->SubmitJob(j));
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->job_id : 0;
  }

  // Polls `done` every 100 ms until it holds or `limit` has passed; its last answer.
  static bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return done();
  }

  TestEnv env_;
  boost::asio::io_context io_;
  kube::Config kube_config_;
  std::unique_ptr<net::HttpClient> http_;
  std::unique_ptr<kube::Client> kube_;
  slurm::ClientPtr slurm_;
};

}  // namespace sb::testing
