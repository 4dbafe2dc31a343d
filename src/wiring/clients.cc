// SPDX-License-Identifier: Apache-2.0
#include "wiring/clients.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "common/files.h"

namespace sb::wiring {

Result<bridge::Config> LoadConfig(const std::string& path) {
  std::optional<std::string> text = ReadWholeFile(path);
  if (!text) {
    return MakeError(ErrorCode::kInvalidArgument, fmt::format("cannot read config file {}", path));
  }
  Result<bridge::Config> c = bridge::ParseConfig(*text);
  if (!c) {
    Error e = c.error();
    e.message = fmt::format("{}: {}", path, e.message);
    return tl::unexpected(e);
  }
  return c;
}

slurm::ClientConfig SlurmClientConfig(const bridge::Config& config) {
  slurm::ClientConfig out{.url = config.slurm_rest_api, .user_name = config.slurm_user_name};
  if (!config.slurm_api_version.empty()) {
    out.version = slurm::ParseApiVersion(config.slurm_api_version);
  }
  out.http.tls.ca_file = config.slurm_ca_file;
  out.http.tls.insecure_skip_verify = config.slurm_insecure_skip_verify;
  out.http.timeout = config.slurm_request_timeout;
  out.jobs_timeout = std::max(out.jobs_timeout, config.slurm_request_timeout);
  return out;
}

slurm::JobWatchOptions JobWatchOptionsOf(const bridge::Config& config) {
  slurm::JobWatchOptions out;
  out.poll_interval = config.job_poll_interval;
  return out;
}

}  // namespace sb::wiring
