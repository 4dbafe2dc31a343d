// SPDX-License-Identifier: Apache-2.0
//
// fuzz/fuzz_input.h
//
// Helpers shared by the libFuzzer targets: the input as a string_view, and a scratch file for
// the decoders that read a path (kubeconfig, token files).
//
// Thread model: one fuzzing thread per process (libFuzzer's default).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace sb::fuzz {

inline std::string_view AsText(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A file of this process in $TMPDIR (default /tmp) that each input is written to, removed at
// exit. Decoders that take a path read it, so the fuzzed bytes go through the same code as a
// real file.
class ScratchFile {
 public:
  explicit ScratchFile(std::string_view name) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/sb-fuzz-" +
            std::to_string(::getpid()) + "-" + std::string(name);
  }
  ~ScratchFile() { ::unlink(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's contents with `text`; returns its path.
  const std::string& Write(std::string_view text) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    return path_;
  }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace sb::fuzz
