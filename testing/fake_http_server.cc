// SPDX-License-Identifier: Apache-2.0
#include "testing/fake_http_server.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace sb::testing {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;

namespace {
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace

std::string FakeRequest::Header(const std::string& name) const {
  for (const auto& [k, v] : headers) {
    if (Lower(k) == Lower(name)) {
      return v;
    }
  }
  return {};
}

void FakeStream::Push(std::string bytes) {
  if (!open()) return;
  pending_.push_back(std::move(bytes));
  if (wake_) wake_();
}

void FakeStream::End(std::string last_bytes) {
  if (!open()) return;
  if (!last_bytes.empty()) pending_.push_back(std::move(last_bytes));
  ended_ = true;
  if (wake_) wake_();
}

FakeReply HttpReply(int status, std::string body, std::string content_type,
                    std::vector<std::pair<std::string, std::string>> extra_headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " X\r\n";
  out += "Content-Type: " + content_type + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& [k, v] : extra_headers) {
    out += k + ": " + v + "\r\n";
  }
  out += "\r\n" + body;
  return FakeReply{std::move(out), false, {}};
}

struct FakeHttpServer::Impl {
  asio::io_context& io;
  Handler handler;
  std::optional<tcp::acceptor> tcp_acceptor;
  std::optional<asio::local::stream_protocol::acceptor> unix_acceptor;
  std::string unix_path;
  int accepted = 0;
  std::vector<FakeRequest> requests;
  bool stopped = false;

  Impl(asio::io_context& i, Handler h) : io(i), handler(std::move(h)) {}

  // Static with the owner passed by value: the coroutine keeps Impl alive even when it first
  // runs after the FakeHttpServer is gone.
  template <typename Socket>
  static asio::awaitable<void> Serve(std::shared_ptr<Impl> self, Socket socket, int index) {
    Impl& d = *self;
    boost::beast::flat_buffer buffer;
    for (;;) {
      // Headers as long as slurmrestd takes (about 80 KB: long /jobs/state/ queries), not
      // Beast's default 8 KiB.
      http::request_parser<http::string_body> parser;
      parser.header_limit(128 * 1024);
      parser.body_limit(std::numeric_limits<std::uint64_t>::max());
      auto [ec, n] = co_await http::async_read(socket, buffer, parser, kTuple);
      if (ec || d.stopped) {
        co_return;
      }
      http::request<http::string_body> req = parser.release();
      FakeRequest fr;
      fr.method = std::string(req.method_string());
      fr.target = std::string(req.target());
      for (const auto& f : req) {
        fr.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
      }
      fr.body = req.body();
      fr.connection_index = index;
      d.requests.push_back(fr);
      FakeReply reply = d.handler(fr);
      if (reply.delay.count() > 0) {
        asio::steady_timer t(d.io, reply.delay);
        co_await t.async_wait(kTuple);
      }
      if (!reply.bytes.empty()) {
        auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(reply.bytes), kTuple);
        if (wec) {
          co_return;
        }
      }
      if (reply.stream && !co_await WriteStream(d, socket, *reply.stream)) {
        co_return;
      }
      if (reply.close_after) {
        boost::system::error_code ignored;
        socket.shutdown(asio::socket_base::shutdown_both, ignored);
        socket.close(ignored);
        co_return;
      }
    }
  }

  // Writes `stream` to `socket` until it ends or a write fails; false when the connection is lost.
  template <typename Socket>
  static asio::awaitable<bool> WriteStream(Impl& d, Socket& socket, FakeStream& stream) {
    asio::steady_timer wake(d.io);
    // The wake-up lives as long as this frame: a stream pushed to after the connection is gone (or
    // the io_context destroyed this frame) wakes nothing.
    struct Attach {
      FakeStream& s;
      ~Attach() { s.wake_ = nullptr; }
    } attach{stream};
    stream.wake_ = [&wake] { wake.cancel(); };
    for (;;) {
      while (!stream.pending_.empty()) {
        std::string bytes = std::move(stream.pending_.front());
        stream.pending_.erase(stream.pending_.begin());
        auto [wec, wn] = co_await asio::async_write(socket, asio::buffer(bytes), kTuple);
        if (wec) {
          stream.gone_ = true;
          co_return false;
        }
      }
      if (stream.ended_) co_return true;
      if (d.stopped) {
        stream.gone_ = true;
        co_return false;
      }
      wake.expires_at(asio::steady_timer::time_point::max());
      co_await wake.async_wait(kTuple);
    }
  }

  template <typename Acceptor>
  static asio::awaitable<void> Accept(std::shared_ptr<Impl> self, Acceptor* acceptor) {
    Impl& d = *self;
    for (;;) {
      auto [ec, socket] = co_await acceptor->async_accept(kTuple);
      if (ec || d.stopped) {
        co_return;
      }
      asio::co_spawn(d.io, Serve(self, std::move(socket), d.accepted++), asio::detached);
    }
  }
};

FakeHttpServer::FakeHttpServer(asio::io_context& io, Handler handler)
    : impl_(std::make_shared<Impl>(io, std::move(handler))) {
  impl_->tcp_acceptor.emplace(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  asio::co_spawn(io, Impl::Accept(impl_, &*impl_->tcp_acceptor), asio::detached);
}

FakeHttpServer::FakeHttpServer(asio::io_context& io, const std::string& unix_path, Handler handler)
    : impl_(std::make_shared<Impl>(io, std::move(handler))) {
  std::filesystem::remove(unix_path);
  impl_->unix_path = unix_path;
  impl_->unix_acceptor.emplace(io, asio::local::stream_protocol::endpoint(unix_path));
  asio::co_spawn(io, Impl::Accept(impl_, &*impl_->unix_acceptor), asio::detached);
}

FakeHttpServer::~FakeHttpServer() {
  impl_->stopped = true;
  boost::system::error_code ignored;
  if (impl_->tcp_acceptor) {
    impl_->tcp_acceptor->close(ignored);
  }
  if (impl_->unix_acceptor) {
    impl_->unix_acceptor->close(ignored);
    std::filesystem::remove(impl_->unix_path, ignored);
  }
}

std::uint16_t FakeHttpServer::port() const {
  return impl_->tcp_acceptor ? impl_->tcp_acceptor->local_endpoint().port() : 0;
}
std::string FakeHttpServer::url() const { return "http://127.0.0.1:" + std::to_string(port()); }
int FakeHttpServer::connections_accepted() const { return impl_->accepted; }
const std::vector<FakeRequest>& FakeHttpServer::requests() const { return impl_->requests; }

}  // namespace sb::testing
