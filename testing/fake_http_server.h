// SPDX-License-Identifier: Apache-2.0
//
// testing/fake_http_server.h
//
// A loopback HTTP/1.1 server for unit tests that need to inject faults a real server will not
// produce on demand: a reply cut off mid-body, a connection closed at once, a slow reply,
// arbitrary bytes. Listens on 127.0.0.1:0 (or a Unix socket) and runs on the caller's
// io_context, so a test drives client and server on one thread.
//
// The handler sees each parsed request and returns the raw bytes to send back, plus what to do
// with the connection afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

namespace sb::testing {

struct FakeRequest {
  std::string method;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  int connection_index = 0;  // which accepted connection (0-based) carried it

  [[nodiscard]] std::string Header(const std::string& name) const;  // case-insensitive
};

// A reply that stays open after its first bytes (a watch): the bytes Push() is given are written
// as they come, in order; End() writes its bytes last and the connection goes back to reading
// requests. The handler keeps it (shared with the connection) to push to later.
class FakeStream {
 public:
  void Push(std::string bytes);
  void End(std::string last_bytes = {});
  // False after End(), or once a write failed (the client went away).
  [[nodiscard]] bool open() const { return !ended_ && !gone_; }

 private:
  friend class FakeHttpServer;
  std::vector<std::string> pending_;
  bool ended_ = false;
  bool gone_ = false;
  std::function<void()> wake_;  // set while a connection writes this stream
};

struct FakeReply {
  std::string bytes;                   // written as is
  bool close_after = false;            // close the connection after writing
  std::chrono::milliseconds delay{0};  // wait this long before writing
  // When set, the reply goes on after `bytes` with what the stream is given, until its End().
  std::shared_ptr<FakeStream> stream;
};

// A complete response with Content-Length.
FakeReply HttpReply(int status, std::string body, std::string content_type = "application/json",
                    std::vector<std::pair<std::string, std::string>> extra_headers = {});

class FakeHttpServer {
 public:
  using Handler = std::function<FakeReply(const FakeRequest&)>;
  // TCP on 127.0.0.1 with a free port.
  FakeHttpServer(boost::asio::io_context& io, Handler handler);
  // A Unix socket at `path`.
  FakeHttpServer(boost::asio::io_context& io, const std::string& unix_path, Handler handler);
  ~FakeHttpServer();

  [[nodiscard]] std::uint16_t port() const;
  [[nodiscard]] std::string url() const;  // "http://127.0.0.1:PORT"
  [[nodiscard]] int connections_accepted() const;
  [[nodiscard]] const std::vector<FakeRequest>& requests() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace sb::testing
