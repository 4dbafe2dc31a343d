// SPDX-License-Identifier: Apache-2.0
#include "slurm/types.h"

#include <algorithm>

namespace sb::slurm {

std::string_view ApiVersionName(ApiVersion v) {
  switch (v) {
    case ApiVersion::kV0042:
      return "v0.0.42";
    case ApiVersion::kV0043:
      return "v0.0.43";
    case ApiVersion::kV0044:
      return "v0.0.44";
    case ApiVersion::kV0045:
      return "v0.0.45";
  }
  return "v0.0.44";
}

std::optional<ApiVersion> ParseApiVersion(std::string_view name) {
  for (ApiVersion v : AllApiVersions()) {
    if (ApiVersionName(v) == name) {
      return v;
    }
  }
  return std::nullopt;
}

const std::vector<ApiVersion>& AllApiVersions() {
  static const std::vector<ApiVersion> kAll = {ApiVersion::kV0045, ApiVersion::kV0044,
                                               ApiVersion::kV0043, ApiVersion::kV0042};
  return kAll;
}

bool JobInfo::HasState(std::string_view state) const {
  return std::find(job_state.begin(), job_state.end(), state) != job_state.end();
}

bool NodeInfo::HasState(std::string_view s) const {
  return std::find(state.begin(), state.end(), s) != state.end();
}

}  // namespace sb::slurm
