// SPDX-License-Identifier: Apache-2.0
//
// The Manager's shared sources: `slurm-bridge controllers` (the pod and node controllers in one
// process) watches the Nodes once and lists Slurm's nodes once per interval, against the fake
// apiserver (on a thread of its own, so that the Manager's loop ends when the Manager stops) and
// an in-memory Slurm.
#include "app/components.h"

#include <atomic>
#include <chrono>
#include <functional>
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

// What one process asked of the apiserver and of Slurm between its start and its readiness.
struct Counts {
  bool ready = false;
  int node_lists = 0;    // GET /api/v1/nodes without watch=
  int node_watches = 0;  // with watch=
  int slurm_node_lists = 0;
};

// Runs a Manager with the components `add` adds until it is ready (10 s at most), then stops it.
Counts RunUntilReady(const std::function<void(Manager&, const Shared&)>& add) {
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
  EXPECT_TRUE(ep);
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
  add(manager, manager.Share(*kube, slurm, clock, config));
  Counts counts;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(io);
        for (int i = 0; i < 1000 && !manager.Ready(); ++i) {
          timer.expires_after(10ms);
          (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        counts.ready = manager.Ready();
        manager.Stop();
      },
      asio::detached);
  EXPECT_EQ(manager.Run(), 0);
  api_work.reset();
  api_io.stop();
  api_thread.join();
  counts.node_lists = node_lists.load();
  counts.node_watches = node_watches.load();
  counts.slurm_node_lists = slurm.calls("ListNodes");
  return counts;
}

TEST(ManagerTest, ControllersShareOneNodeInformerAndOneSlurmNodeList) {
  Counts c = RunUntilReady([](Manager& manager, const Shared& shared) {
    manager.Add(MakePodControllerComponent(shared));
    manager.Add(MakeNodeControllerComponent(shared));
  });
  EXPECT_TRUE(c.ready);
  EXPECT_EQ(c.node_lists, 1) << "one Node informer for both controllers";
  EXPECT_LE(c.node_watches, 1);
  EXPECT_EQ(c.slurm_node_lists, 1) << "one Slurm node list";
}

// `slurm-bridge all`: the scheduler reads the same Node informer as the controllers. (It still
// lists Slurm's nodes itself, on its job-poll budget: docs/architecture.md, "Shared sources".)
TEST(ManagerTest, SchedulerAndControllersShareOneNodeInformer) {
  Counts c = RunUntilReady([](Manager& manager, const Shared& shared) {
    manager.Add(MakeSchedulerComponent(shared));
    manager.Add(MakePodControllerComponent(shared));
    manager.Add(MakeNodeControllerComponent(shared));
  });
  EXPECT_TRUE(c.ready);
  EXPECT_EQ(c.node_lists, 1) << "one Node informer for the three components";
  EXPECT_LE(c.node_watches, 1);
}

}  // namespace
}  // namespace sb::app
