// SPDX-License-Identifier: Apache-2.0
//
#include "wiring/tag_pods.h"

#include <cstddef>

namespace sb::wiring {

boost::asio::awaitable<TagPodsAnswer> ReadTagPods(kube::Client& kube, std::vector<std::string> pods,
                                                  std::vector<std::string> uids) {
  TagPodsAnswer answer;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const std::string& key = pods[i];
    const std::size_t slash = key.find('/');
    if (slash == std::string::npos) continue;
    Result<kube::Pod> p = co_await kube::GetPod(kube, key.substr(0, slash), key.substr(slash + 1));
    if (p) {
      if (i >= uids.size() || p->metadata.uid == uids[i]) {
        answer.existing = key;
        co_return answer;
      }
    } else if (p.error().code != ErrorCode::kNotFound) {
      answer.error = p.error();
      answer.failed = key;
      co_return answer;
    }
  }
  answer.gone = true;
  co_return answer;
}

}  // namespace sb::wiring
