// SPDX-License-Identifier: Apache-2.0
//
// wiring/tag_pods.h
//
// Whether any pod a job's tag names (bridge/tag.h: "ns/name" keys with their UIDs) still exists,
// as the apiserver says: the last word before a job is cancelled as an orphan (the controllers'
// sweep, the scheduler after start-up). A cache may lag; the apiserver decides.
//
// Thread model: a coroutine on the caller's executor; the client must outlive the call.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/error.h"
#include "kube/client.h"

namespace sb::wiring {

struct TagPodsAnswer {
  bool gone = false;           // every pod is gone (NotFound, or another UID under its name)
  std::string existing;        // the key of a pod that exists ("" when none, or when a read failed)
  std::optional<Error> error;  // a read that failed (not NotFound): the answer is unknown
  std::string failed;          // its key
};

// Reads `pods` one by one (GET), stopping at the first that exists or cannot be read. A key
// without a '/' is skipped. uids[i] is pods[i]'s UID; a pod past the end of `uids` exists
// whatever its UID.
[[nodiscard]] boost::asio::awaitable<TagPodsAnswer> ReadTagPods(kube::Client& kube,
                                                                std::vector<std::string> pods,
                                                                std::vector<std::string> uids);

}  // namespace sb::wiring
