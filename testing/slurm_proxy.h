// SPDX-License-Identifier: Apache-2.0
//
// testing/slurm_proxy.h
//
// LossyProxy: a loopback HTTP proxy in front of the test environment's slurmrestd that injects
// one kind of fault, for the end-to-end tests of what the bridge does when Slurm's replies are
// lost, late, refused or strange. It runs on a thread of its own; one request at a time.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "testing/fake_http_server.h"

namespace sb::testing {

// A pass-through proxy in front of slurmrestd that breaks the first request of one kind:
// kLoseSubmitReply forwards the first job submit and loses its reply (a timeout, a connection
// lost after the request was written); kFailCancel answers the first job cancel call (its three
// HTTP attempts) 503 without forwarding it (slurmrestd briefly down); kFailNodeListUntilReleased
// answers every node list 503 until Release(); kUnmappedFirstJob shows the nodes of jobs as
// x1..x4 until a second job is submitted; kSlowSubmitReply forwards every job submit and holds
// its reply for 150 ms (the job exists in Slurm while its submitter does not know it yet).
class LossyProxy {
 public:
  enum class Fault {
    kLoseSubmitReply,
    kFailCancel,
    kFailNodeListUntilReleased,
    kUnmappedFirstJob,
    kSlowSubmitReply,
  };
  LossyProxy(std::string upstream_url, Fault fault)
      : fault_(fault),
        server_(io_, [this](const FakeRequest& r) { return Forward(r); }),
        guard_(io_.get_executor()) {
    // "http://127.0.0.1:PORT"
    const std::size_t colon = upstream_url.rfind(':');
    port_ = upstream_url.substr(colon + 1);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~LossyProxy() {
    io_.stop();
    thread_.join();
  }
  [[nodiscard]] std::string url() const { return server_.url(); }
  [[nodiscard]] int lost() const { return lost_; }
  void Release() { released_ = true; }

 private:
  FakeReply Forward(const FakeRequest& r) {
    namespace asio = boost::asio;
    if (fault_ == Fault::kFailNodeListUntilReleased && r.method == "GET" &&
        r.target.find("/nodes") != std::string::npos && !released_) {
      ++lost_;
      return HttpReply(503, R"({"errors":[{"error":"proxy: unavailable"}]})");
    }
    // Three times: the HTTP client's own attempts at one call (net::ClientOptions::max_attempts).
    if (fault_ == Fault::kFailCancel && r.method == "DELETE" &&
        r.target.find("/job/") != std::string::npos && lost_ < 3) {
      ++lost_;
      return HttpReply(503, R"({"errors":[{"error":"proxy: unavailable"}]})");
    }
    std::string raw = r.method + " " + r.target + " HTTP/1.1\r\n";
    for (const auto& [k, v] : r.headers) {
      std::string lower = k;
      std::ranges::transform(lower, lower.begin(),
                             [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (lower == "connection" || lower == "keep-alive") continue;
      raw += k + ": " + v + "\r\n";
    }
    raw += "Connection: close\r\n\r\n" + r.body;
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    asio::ip::tcp::resolver resolver(io);
    boost::system::error_code ec;
    asio::connect(socket, resolver.resolve("127.0.0.1", port_, ec), ec);
    if (ec) return {.bytes = "", .close_after = true};
    asio::write(socket, asio::buffer(raw), ec);
    std::string reply;
    std::array<char, 65536> buf{};
    for (;;) {
      const std::size_t n = socket.read_some(asio::buffer(buf), ec);
      reply.append(buf.data(), n);
      if (ec) break;
    }
    if (fault_ == Fault::kUnmappedFirstJob) {
      // Jobs seem allocated on x1..x4 (Slurm names no Kubernetes node has) until a second job is
      // submitted.
      if (r.method == "POST" && r.target.find("/job/submit") != std::string::npos) ++submits_;
      // The job record's "nodes" and the resource layout's "node" (GET /resources/{id}).
      if (submits_ < 2 && r.method == "GET" &&
          (r.target.find("/job") != std::string::npos ||
           r.target.find("/resources/") != std::string::npos)) {
        static const std::regex kNodes(R"re(("nodes?"\s*:\s*")n([0-9]))re");
        std::string rewritten = std::regex_replace(reply, kNodes, "$1x$2");
        if (rewritten != reply) ++lost_;
        // The body's length is unchanged: the header stays right.
        reply = std::move(rewritten);
      }
    }
    if (fault_ == Fault::kLoseSubmitReply && r.method == "POST" &&
        r.target.find("/job/submit") != std::string::npos && lost_ == 0) {
      ++lost_;
      return {.bytes = "", .close_after = true};  // the job exists; its id never arrives
    }
    if (fault_ == Fault::kSlowSubmitReply && r.method == "POST" &&
        r.target.find("/job/submit") != std::string::npos) {
      ++lost_;
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
    }
    return {.bytes = std::move(reply), .close_after = true};
  }

  Fault fault_;
  boost::asio::io_context io_;
  FakeHttpServer server_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::string port_;
  std::atomic<int> lost_{0};
  std::atomic<bool> released_{false};
  int submits_ = 0;
  std::thread thread_;
};

}  // namespace sb::testing
