// SPDX-License-Identifier: Apache-2.0
//
// fuzz/kube_watch_fuzz.cc
//
// The kube client's watch (kube/client.h, Client::Watch): it splits the apiserver's streamed
// reply into event lines, bounded by ClientOptions::max_watch_line, and each line is decoded as a
// watch event (DecodeWatchEvent). The stream comes off the network and runs for minutes (test
// audit N9). Each input is a watch reply body plus its framing: byte 0 chooses the framing (bits
// 0-1: chunked, Content-Length, until close, chunked with chunk extensions) and after how many
// lines the caller stops (bits 2-4, 0: never), byte 1 the line limit (8 + 8 * byte), byte 2 the
// size of the pieces the body is written in (1 + byte; one chunk and one write each); the rest
// is the body. A bare TCP peer on loopback (fuzz/loopback.h) serves it as a 200 to a real kube
// client's Watch() over a real HttpClient; every delivered line is also decoded as a
// WatchEvent<Pod>, errors ignored.
// Properties: every delivered line is non-empty, has no '\n', no trailing '\r' or ' ', and is
// at most the limit long; the lines are exactly the body split on '\n', trailing '\r' and ' '
// trimmed, empty ones left out, up to the caller's stop (then Watch succeeds) or up to the first
// line longer than the limit (then Watch fails with kInternal), else all of them and success.
// Seeds: fuzz/seeds/kube_watch/.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
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
#include "kube/client.h"
#include "kube/codec.h"
#include "net/http_client.h"

namespace {
namespace asio = boost::asio;
using sb::fuzz::Finding;

using Harness = sb::fuzz::ClientHarness;
Harness& Get() { return sb::fuzz::SharedClientHarness(); }

// The reply: a 200 with `body` framed as `framing` says, in pieces of `piece` bytes.
std::vector<std::string> Reply(std::string_view body, unsigned framing, std::size_t piece) {
  std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n";
  std::vector<std::string> out;
  const bool chunked = framing == 0 || framing == 3;
  if (chunked) {
    head += "Transfer-Encoding: chunked\r\n\r\n";
  } else if (framing == 1) {
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  } else {
    head += "Connection: close\r\n\r\n";
  }
  out.push_back(std::move(head));
  for (std::size_t at = 0; at < body.size(); at += piece) {
    std::string_view part = body.substr(at, piece);
    if (!chunked) {
      out.emplace_back(part);
      continue;
    }
    char size[32];
    std::snprintf(size, sizeof size, "%zx", part.size());
    std::string chunk = size;
    if (framing == 3) {
      chunk += ";ext=\"x\"";
    }
    chunk += "\r\n";
    chunk.append(part);
    chunk += "\r\n";
    out.push_back(std::move(chunk));
  }
  if (chunked) {
    out.emplace_back("0\r\n\r\n");
  }
  return out;
}

struct Expected {
  std::vector<std::string_view> lines;
  bool overlong = false;  // Watch fails with kInternal
};

// What Watch must deliver: the body's lines, trimmed, non-empty, up to `stop_after` of them
// (0: all) or up to the first longer than `limit` (before trimming).
Expected Expect(std::string_view body, std::size_t limit, std::size_t stop_after) {
  Expected e;
  for (std::size_t start = 0; start <= body.size();) {
    std::size_t nl = body.find('\n', start);
    std::string_view line =
        body.substr(start, nl == std::string_view::npos ? body.npos : nl - start);
    if (line.size() > limit) {
      e.overlong = true;
      return e;
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.remove_suffix(1);
    }
    if (!line.empty()) {
      e.lines.push_back(line);
      if (e.lines.size() == stop_after) {
        return e;
      }
    }
    if (nl == std::string_view::npos) {
      break;
    }
    start = nl + 1;
  }
  return e;
}

struct Outcome {
  bool done = false;
  std::optional<sb::Result<void>> result;
  std::vector<std::string> lines;
};

asio::awaitable<void> Watch(sb::kube::Client& client, std::size_t limit, std::size_t stop_after,
                            std::shared_ptr<Outcome> out) {
  out->result = co_await client.Watch(
      sb::kube::PodsRef("d"), sb::kube::ListOptions{},
      [out, limit, stop_after](std::string_view l) {
        if (l.empty() || l.size() > limit || l.find('\n') != std::string_view::npos ||
            l.back() == '\r' || l.back() == ' ') {
          Finding("Watch delivered an empty, overlong, untrimmed or multi-line line");
        }
        (void)sb::kube::DecodeWatchEvent<sb::kube::Pod>(l);
        out->lines.emplace_back(l);
        return out->lines.size() != stop_after;
      });
  out->done = true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) {
    return 0;
  }
  Harness& h = Get();
  const unsigned framing = data[0] & 3u;
  const std::size_t stop_after = (data[0] >> 2) & 7u;
  const std::size_t limit = 8 + 8 * std::size_t{data[1]};
  const std::size_t piece = 1 + std::size_t{data[2]};
  const std::string_view body = sb::fuzz::AsText(data + 3, size - 3);
  h.peer->SetReply(Reply(body, framing, piece));

  sb::kube::ClientOptions ko;
  ko.max_watch_line = limit;
  ko.watch_idle_timeout = std::chrono::seconds(2);
  std::unique_ptr<sb::kube::Client> client = sb::kube::MakeClient(*h.client, nullptr, ko);
  auto out = std::make_shared<Outcome>();
  asio::co_spawn(h.io, Watch(*client, limit, stop_after, out), asio::detached);
  if (!sb::fuzz::RunUntil(h.io, [&] { return out->done; }, std::chrono::seconds(8))) {
    Finding("Watch did not finish within 8 s");
  }
  if (!sb::fuzz::RunUntil(h.io, [&] { return h.peer->active() == 0; }, std::chrono::seconds(3))) {
    Finding("the client kept the watch connection open after Watch returned");
  }

  const Expected want = Expect(body, limit, stop_after);
  const sb::Result<void>& got = *out->result;
  if (want.overlong) {
    if (got || got.error().code != sb::ErrorCode::kInternal) {
      Finding("a line over the limit did not fail the watch with kInternal");
    }
  } else if (!got) {
    Finding("Watch failed: " + got.error().ToString());
  }
  if (!std::equal(out->lines.begin(), out->lines.end(), want.lines.begin(), want.lines.end())) {
    Finding("the delivered lines are not the body's lines");
  }
  return 0;
}
