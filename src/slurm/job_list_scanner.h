// SPDX-License-Identifier: Apache-2.0
//
// slurm/job_list_scanner.h
//
// Decodes a GET /jobs/ reply one job at a time as it arrives, so that reading the whole list
// costs the memory of the jobs kept plus one job, not of the list (16 MB of JSON for 2,000 jobs;
// the DOM DecodeJobList builds is several times that). Pure: no I/O; fed by
// slurm::Client::ScanJobs in the real client.
//
// Fed the body in pieces of any size (Feed, then Finish), it finds each element of the top-level
// "jobs" array (following JSON strings, escapes and nesting), decodes that element alone with
// the decoder DecodeJobList uses (DecodeJobListEntry), asks `keep`, and holds on only to the
// jobs kept. The other top-level members (errors, warnings, meta, last_update, last_backfill) are
// small: they are copied aside and decoded at Finish exactly as DecodeJobList decodes them
// (DecodeJobListRest: errors[] and warnings[] in the Reply, the "unchanged" rule). Finish's
// result equals DecodeJobList's on the same body with the jobs `keep` refused left out.
//
// Malformed input is an Error (kInternal, "malformed reply from slurmrestd (...)"), never a
// crash: a body that ends early, an element that is not valid JSON or not an object, text after
// the object, a "jobs" that is neither an array nor null. A body over `body_limit` bytes, or other
// members over `rest_limit` bytes, is kInternal too. Once Feed returned false the body is known
// bad: stop feeding; Finish says why.
//
// Memory: the scanner holds the unfinished element (never a whole piece: a piece is read in
// place), the other members, the first bytes of the body (for messages) and the jobs kept.
//
// Example:
//   JobListScanner scan([](const JobInfo& j) { return j.admin_comment.starts_with("{\"pods\""); });
//   for (std::string_view piece : pieces) if (!scan.Feed(piece)) break;
//   Result<Reply<JobList>> list = scan.Finish();
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "slurm/codec.h"
#include "slurm/types.h"

namespace sb::slurm {

class JobListScanner {
 public:
  // Default of rest_limit: the members beside "jobs" are about 1 KB in every recorded reply.
  static constexpr std::size_t kRestLimit = std::size_t{1} << 20;

  // `keep` null keeps every job.
  explicit JobListScanner(std::function<bool(const JobInfo&)> keep,
                          std::size_t body_limit = std::size_t{1} << 30,
                          std::size_t rest_limit = kRestLimit);

  // The next piece of the body. False once the body is known bad: stop feeding.
  bool Feed(std::string_view piece);
  // The end of the body: the list as DecodeJobList would decode it, less the jobs not kept; or
  // why the body is bad. Once per body: after a success the scanner is as new (Restart).
  [[nodiscard]] Result<Reply<JobList>> Finish();
  // Forgets everything fed, to read a body again from its start (a retried request).
  void Restart();

  // Elements of "jobs" decoded so far, kept or not.
  [[nodiscard]] std::size_t entries() const { return entries_; }
  // Bytes of the body held now: the unfinished element and the other members.
  [[nodiscard]] std::size_t buffered() const { return element_.size() + rest_.size(); }

 private:
  enum class State : std::uint8_t {
    kBeforeObject,  // white space, then '{'
    kBeforeKey,     // white space, then a key's '"' (or '}' right after '{')
    kKey,           // inside a key
    kBeforeColon,
    kBeforeValue,
    kValue,        // inside a member's value other than the jobs array: copied to rest_
    kAfterValue,   // white space, then ',' or '}'
    kBeforeEntry,  // inside "jobs": white space, then an element (or ']' right after '[')
    kEntry,        // inside an element: copied to element_
    kAfterEntry,   // white space, then ',' or ']'
    kAfterObject,  // white space only
    kFailed,
  };

  // Follows one JSON value byte by byte: where it ends, not whether it is valid (the parse of
  // the element or of rest_ says that).
  struct ValueEnd {
    std::size_t depth = 0;
    bool in_string = false;
    bool escaped = false;
    bool scalar = false;
    // A new value whose first byte is `c` (consumed by the caller).
    void Start(char c);
    // Past the value's last byte in [p, end), or nullptr when it goes on beyond `end`. A scalar
    // ends before its delimiter (which is not consumed).
    const char* Advance(const char* p, const char* end);
  };

  bool Fail(std::string_view why);
  bool Fail(Error error);
  bool AppendRest(std::string_view bytes);
  bool EndOfEntry();

  std::function<bool(const JobInfo&)> keep_;
  std::size_t body_limit_;
  std::size_t rest_limit_;

  State state_ = State::kBeforeObject;
  ValueEnd value_;
  bool after_comma_ = false;  // kBeforeKey / kBeforeEntry: a ',' came before
  std::string key_;           // the key being read, as written (escapes kept)
  std::string element_;       // the unfinished element of "jobs"
  std::string rest_;          // "{" and the other members so far
  std::string head_;          // the body's first bytes, for messages
  std::size_t bytes_ = 0;
  std::size_t entries_ = 0;
  std::vector<JobInfo> kept_;
  std::optional<Error> error_;
};

}  // namespace sb::slurm
