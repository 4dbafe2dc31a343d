// SPDX-License-Identifier: Apache-2.0
//
// common/files.h
//
// Reading small files whole (configs, tokens, keys, certificates) and telling when one changed.
// Callers say in their own errors what the file was for.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace sb {

// The whole content of `path` (bytes as they are), or nullopt when it cannot be opened.
[[nodiscard]] std::optional<std::string> ReadWholeFile(const std::string& path);

// What identifies one version of a file: a replaced file (new inode, the way Kubernetes swaps
// secret volumes) and one rewritten in place (size, mtime) both look different.
struct FileStamp {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

// The stamp of `path` now; `exists` is false when it cannot be stat'ed.
[[nodiscard]] FileStamp StatFile(const std::string& path);

}  // namespace sb
