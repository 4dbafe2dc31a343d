// SPDX-License-Identifier: Apache-2.0
//
// slurm/token_source.h
//
// Where the Slurm JWT (sent as X-SLURM-USER-TOKEN) comes from.
//
// - FileTokenSource: upstream's contract (SLURM_JWT_FILE): the file holds the token, with
//   surrounding whitespace and an optional "SLURM_JWT=" prefix stripped; an empty file is an
//   error. The file is re-read whenever it changes (inode, size or modification time), so a
//   rotated token is picked up on the next request, and on Invalidate() (after a 401).
// - Hs256TokenSource: mints short-lived HS256 tokens itself from the cluster's jwt_hs256.key for
//   a configured user (claims sun, iat, exp), renewing when half the lifetime is gone. Useful in
//   development and tests; upstream cannot do this.
// - StaticTokenSource: a fixed token (tests).
//
// Tokens never appear in a log line, an error message or an exception text.
//
// Thread model: loop-confined.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/error.h"

namespace sb::slurm {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // The token to send now. kUnauthenticated when none can be had (missing or empty file).
  [[nodiscard]] virtual Result<std::string> Token() = 0;
  // The server refused the token: forget any cached copy, so the next Token() re-reads/re-mints.
  virtual void Invalidate() = 0;
};

using TokenSourcePtr = std::unique_ptr<TokenSource>;

[[nodiscard]] TokenSourcePtr MakeFileTokenSource(std::string path);
[[nodiscard]] TokenSourcePtr MakeStaticTokenSource(std::string token);
// `now` is injectable for tests. Fails with kInvalidArgument when the key file cannot be read.
[[nodiscard]] Result<TokenSourcePtr> MakeHs256TokenSource(
    const std::string& key_file, std::string user, std::chrono::seconds lifetime,
    std::function<std::chrono::system_clock::time_point()> now = std::chrono::system_clock::now);

// An HS256 JWT (RFC 7519) with the given claims JSON, signed with `key`.
[[nodiscard]] std::string SignHs256Jwt(std::string_view claims_json, std::string_view key);

}  // namespace sb::slurm
