// SPDX-License-Identifier: Apache-2.0
#include "slurm/token_source.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/base64.h"
#include "common/files.h"
#include "common/strings.h"

namespace sb::slurm {
namespace {

class FileTokenSource final : public TokenSource {
 public:
  explicit FileTokenSource(std::string path) : path_(std::move(path)) {}

  Result<std::string> Token() override {
    const FileStamp stamp = StatFile(path_);
    if (!stamp.exists) {
      return MakeError(ErrorCode::kUnauthenticated, "cannot read token file " + path_);
    }
    if (!cached_.empty() && stamp == stamp_) {
      return cached_;
    }
    std::optional<std::string> text = ReadWholeFile(path_);
    if (!text) {
      return MakeError(ErrorCode::kUnauthenticated, "cannot read token file " + path_);
    }
    std::string token = TrimWhitespace(*text);
    if (token.starts_with("SLURM_JWT=")) {
      token = TrimWhitespace(token.substr(10));
    }
    if (token.empty()) {
      return MakeError(ErrorCode::kUnauthenticated, "token file " + path_ + " is empty");
    }
    cached_ = std::move(token);
    stamp_ = stamp;
    return cached_;
  }

  void Invalidate() override { cached_.clear(); }

 private:
  std::string path_;
  std::string cached_;
  FileStamp stamp_;
};

class StaticTokenSource final : public TokenSource {
 public:
  explicit StaticTokenSource(std::string token) : token_(std::move(token)) {}
  Result<std::string> Token() override {
    if (token_.empty()) {
      return MakeError(ErrorCode::kUnauthenticated, "no Slurm token configured");
    }
    return token_;
  }
  void Invalidate() override {}

 private:
  std::string token_;
};

class Hs256TokenSource final : public TokenSource {
 public:
  Hs256TokenSource(std::string key, std::string user, std::chrono::seconds lifetime,
                   std::function<std::chrono::system_clock::time_point()> now)
      : key_(std::move(key)), user_(std::move(user)), lifetime_(lifetime), now_(std::move(now)) {}

  Result<std::string> Token() override {
    auto now = now_();
    if (token_.empty() || now >= renew_at_) {
      auto iat = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
      auto exp = iat + lifetime_.count();
      std::string claims = "{\"exp\":" + std::to_string(exp) + ",\"iat\":" + std::to_string(iat) +
                           ",\"sun\":\"" + user_ + "\"}";
      token_ = SignHs256Jwt(claims, key_);
      renew_at_ = now + lifetime_ / 2;
    }
    return token_;
  }
  void Invalidate() override { token_.clear(); }

 private:
  std::string key_;
  std::string user_;
  std::chrono::seconds lifetime_;
  std::function<std::chrono::system_clock::time_point()> now_;
  std::string token_;
  std::chrono::system_clock::time_point renew_at_;
};

}  // namespace

std::string SignHs256Jwt(std::string_view claims_json, std::string_view key) {
  std::string signing_input =
      Base64UrlEncode(R"({"alg":"HS256","typ":"JWT"})") + "." + Base64UrlEncode(claims_json);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(), mac,
       &mac_len);
  return signing_input + "." +
         Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(mac), mac_len));
}

TokenSourcePtr MakeFileTokenSource(std::string path) {
  return std::make_unique<FileTokenSource>(std::move(path));
}

TokenSourcePtr MakeStaticTokenSource(std::string token) {
  return std::make_unique<StaticTokenSource>(std::move(token));
}

Result<TokenSourcePtr> MakeHs256TokenSource(
    const std::string& key_file, std::string user, std::chrono::seconds lifetime,
    std::function<std::chrono::system_clock::time_point()> now) {
  std::optional<std::string> key = ReadWholeFile(key_file);
  if (!key) {
    return MakeError(ErrorCode::kInvalidArgument, "cannot read JWT key file " + key_file);
  }
  if (key->empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "JWT key file " + key_file + " is empty");
  }
  if (user.empty() || user.find_first_of("\"\\") != std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument, "invalid user name for minted Slurm tokens");
  }
  return TokenSourcePtr(
      std::make_unique<Hs256TokenSource>(*key, std::move(user), lifetime, std::move(now)));
}

}  // namespace sb::slurm
