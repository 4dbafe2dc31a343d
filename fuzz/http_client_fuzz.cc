// SPDX-License-Identifier: Apache-2.0
//
// fuzz/http_client_fuzz.cc
//
// HttpClient's response parsing (net/http_client.h, Beast underneath), both Send() (the whole
// reply) and Stream() (the body in pieces, as watches read it): slurmrestd's and the apiserver's
// replies come off the network, from a server or a proxy the bridge does not control (test audit
// N9). Each input is the raw bytes of one reply: a bare TCP peer on loopback (fuzz/loopback.h)
// reads the request head and writes them, then closes. The client (plain HTTP, one attempt, no
// retries) sends a GET with Send() and, on a second connection, reads the same bytes with
// Stream().
// Properties: no crash or hang; a status either call returns is in 100..999; Send() and Stream()
// agree: both succeed or both fail, and when they succeed it is with the same status, and the
// pieces Stream() handed on, joined, are Send()'s body.
// Seeds: fuzz/seeds/http_client/.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include "fuzz/fuzz_input.h"
#include "fuzz/loopback.h"
#include "net/http_client.h"

namespace {
namespace asio = boost::asio;
using sb::fuzz::Finding;

using Harness = sb::fuzz::ClientHarness;
Harness& Get() { return sb::fuzz::SharedClientHarness(); }

struct Outcome {
  bool done = false;
  std::optional<sb::Result<sb::net::HttpResponse>> sent;
  std::optional<sb::Result<int>> streamed;
  int stream_head_status = -1;
  std::string pieces;
};

asio::awaitable<void> Exchange(Harness& h, std::shared_ptr<Outcome> out) {
  sb::net::HttpRequest get;
  get.method = sb::net::Method::kGet;
  get.target = "/fuzz";
  out->sent = co_await h.client->Send(get);
  h.client->CloseIdle();  // the next call opens a new connection: the peer answers it the same
  sb::net::HttpRequest stream;
  stream.method = sb::net::Method::kGet;
  stream.target = "/fuzz?watch=1";
  out->streamed = co_await h.client->Stream(
      stream,
      [out](const sb::net::HttpResponse& head) {
        out->stream_head_status = head.status;
        return true;
      },
      [out](std::string_view piece) {
        if (piece.empty() || piece.size() > 64 * 1024) {
          Finding("Stream handed on an empty piece or one over 64 KiB");
        }
        out->pieces.append(piece);
        return true;
      });
  out->done = true;
}

void CheckStatus(int status, const char* which) {
  if (status < 100 || status > 999) {
    Finding(std::string(which) + " returned status " + std::to_string(status));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Harness& h = Get();
  h.peer->SetReply({std::string(sb::fuzz::AsText(data, size))});
  auto out = std::make_shared<Outcome>();
  asio::co_spawn(h.io, Exchange(h, out), asio::detached);
  if (!sb::fuzz::RunUntil(h.io, [&] { return out->done; }, std::chrono::seconds(8))) {
    Finding("Send and Stream did not finish within 8 s");
  }
  if (!sb::fuzz::RunUntil(h.io, [&] { return h.peer->active() == 0; }, std::chrono::seconds(3))) {
    Finding("the client kept a connection open after the call returned");
  }
  const sb::Result<sb::net::HttpResponse>& sent = *out->sent;
  const sb::Result<int>& streamed = *out->streamed;
  if (sent) {
    CheckStatus(sent->status, "Send");
  }
  if (streamed) {
    CheckStatus(*streamed, "Stream");
    if (*streamed != out->stream_head_status) {
      Finding("Stream returned another status than its on_headers saw");
    }
  }
  if (sent.has_value() != streamed.has_value()) {
    Finding(sent ? "Send succeeded, Stream failed: " + streamed.error().ToString()
                 : "Stream succeeded, Send failed: " + sent.error().ToString());
  }
  if (sent && streamed) {
    if (sent->status != *streamed) {
      Finding("Send and Stream read different statuses");
    }
    if (sent->body != out->pieces) {
      Finding("Stream's pieces, joined, are not Send's body");
    }
  }
  return 0;
}
