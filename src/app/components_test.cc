// SPDX-License-Identifier: Apache-2.0
//
// The Manager's shared sources: `slurm-bridge controllers` (the pod and node controllers in one
// process) watches the Nodes once and lists Slurm's nodes once per interval, against the fake
// apiserver (on a thread of its own, so that the Manager's loop ends when the Manager stops) and
// an in-memory Slurm.
#include "app/components.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "async/clock.h"
#include "net/http_client.h"
#include "testing/fake_apiserver.h"
#include "testing/fake_slurm_client.h"

namespace sb::app {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

TEST(ManagerTest, ControllersShareOneNodeInformerAndOneSlurmNodeList) {
  // The fake apiserver's own loop and thread.
  asio::io_context api_io;
  sb::testing::FakeApiServer api(api_io);
  std::atomic<int> node_watches{0};
  std::atomic<int> node_lists{0};
  api.Intercept([&](const sb::testing::FakeRequest& req) -> std::optional<sb::testing::FakeReply> {
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (path == "/api/v1/nodes" && req.method == "GET") {
      ++(req.target.find("watch=") != std::string::npos ? node_watches : node_lists);
    }
    return std::nullopt;
  });
  api.PutNode("n1");
  auto api_work = asio::make_work_guard(api_io);
  std::thread api_thread([&] { api_io.run(); });

  asio::io_context io(1);
  auto ep = net::ParseEndpoint(api.url());
  ASSERT_TRUE(ep);
  std::unique_ptr<net::HttpClient> http =
      std::move(*net::HttpClient::Create(io.get_executor(), *ep, {}));
  std::unique_ptr<kube::Client> kube = kube::MakeClient(*http, nullptr);
  sb::testing::FakeSlurmClient slurm;
  slurm::NodeInfo n1;
  n1.name = "n1";
  n1.state = {"IDLE"};
  slurm.AddNode(n1);
  async::SystemClock clock;
  bridge::Config config;
  config.node_list_interval = 60s;  // one list in this test

  Manager manager(io, ManagerOptions{});
  const Shared& shared = manager.Share(*kube, slurm, clock, config);
  manager.Add(MakePodControllerComponent(shared));
  manager.Add(MakeNodeControllerComponent(shared));
  bool ready = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(io);
        for (int i = 0; i < 1000 && !manager.Ready(); ++i) {
          timer.expires_after(10ms);
          (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        ready = manager.Ready();
        manager.Stop();
      },
      asio::detached);
  EXPECT_EQ(manager.Run(), 0);
  api_work.reset();
  api_io.stop();
  api_thread.join();

  EXPECT_TRUE(ready);
  EXPECT_EQ(node_lists.load(), 1) << "one Node informer for both controllers";
  EXPECT_LE(node_watches.load(), 1);
  EXPECT_EQ(slurm.calls("ListNodes"), 1) << "one Slurm node list";
}

}  // namespace
}  // namespace sb::app
