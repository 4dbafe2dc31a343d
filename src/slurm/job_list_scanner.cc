// SPDX-License-Identifier: Apache-2.0
#include "slurm/job_list_scanner.h"

#include <algorithm>
#include <array>
#include <utility>

namespace sb::slurm {
namespace {

// As many bytes of the body as a DecodeJobList error quotes.
constexpr std::size_t kHeadBytes = 120;
// An element buffer grown past this (a job with a huge script or environment) is given back
// after its element, so that one odd job does not hold its size for the rest of the list.
constexpr std::size_t kElementCapacity = std::size_t{1} << 20;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

JobListScanner::JobListScanner(std::function<bool(const JobInfo&)> keep, std::size_t body_limit,
                               std::size_t rest_limit)
    : keep_(std::move(keep)), body_limit_(body_limit), rest_limit_(rest_limit) {}

void JobListScanner::ValueEnd::Start(char c) {
  *this = {};
  if (c == '"') {
    in_string = true;
  } else if (c == '{' || c == '[') {
    depth = 1;
  } else {
    scalar = true;
  }
}

// What ValueEnd::Advance stops at: inside a string, '"' and '\\'; outside, '"' and brackets.
// A table, not a chain of comparisons: this loop reads every byte of the list.
struct Stops {
  std::array<bool, 256> in_string{};
  std::array<bool, 256> outside{};
  constexpr Stops() {
    in_string['"'] = in_string['\\'] = true;
    outside['"'] = outside['{'] = outside['}'] = outside['['] = outside[']'] = true;
  }
};
constexpr Stops kStops;

const char* JobListScanner::ValueEnd::Advance(const char* p, const char* end) {
  if (scalar) {
    p = std::find_if(p, end, [](char c) { return IsSpace(c) || c == ',' || c == '}' || c == ']'; });
    return p == end ? nullptr : p;
  }
  while (p < end) {
    if (in_string) {
      if (escaped) {
        escaped = false;
        ++p;
        continue;
      }
      while (p < end && !kStops.in_string[static_cast<unsigned char>(*p)]) ++p;
      if (p == end) return nullptr;
      if (*p++ == '\\') {
        escaped = true;
        continue;
      }
      in_string = false;
      if (depth == 0) return p;  // a string value: its closing quote
      continue;
    }
    while (p < end && !kStops.outside[static_cast<unsigned char>(*p)]) ++p;
    if (p == end) return nullptr;
    switch (*p++) {
      case '"':
        in_string = true;
        break;
      case '{':
      case '[':
        ++depth;
        break;
      default:  // '}' or ']'
        // A '}' for a '[' is not caught here: the element's parse refuses it.
        if (depth > 0 && --depth == 0) return p;
        break;
    }
  }
  return nullptr;
}

bool JobListScanner::Fail(std::string_view why) {
  return Fail(Error{ErrorCode::kInternal,
                    "malformed reply from slurmrestd (" + std::string(why) + "): " + head_, 0});
}

bool JobListScanner::Fail(Error error) {
  error_ = std::move(error);
  state_ = State::kFailed;
  kept_.clear();
  element_.clear();
  rest_.clear();
  return false;
}

bool JobListScanner::AppendRest(std::string_view bytes) {
  if (rest_.size() + bytes.size() > rest_limit_) {
    return Fail("the members beside \"jobs\" are over " + std::to_string(rest_limit_) + " bytes");
  }
  rest_.append(bytes);
  return true;
}

bool JobListScanner::EndOfEntry() {
  Result<JobInfo> job = DecodeJobListEntry(element_);
  if (!job) return Fail(std::move(job.error()));
  ++entries_;
  if (!keep_ || keep_(*job)) kept_.push_back(std::move(*job));
  if (element_.capacity() > kElementCapacity) {
    std::string().swap(element_);
  } else {
    element_.clear();
  }
  return true;
}

void JobListScanner::Restart() {
  state_ = State::kBeforeObject;
  value_ = {};
  after_comma_ = false;
  key_.clear();
  element_.clear();
  rest_.clear();
  head_.clear();
  bytes_ = 0;
  entries_ = 0;
  kept_.clear();
  error_.reset();
}

bool JobListScanner::Feed(std::string_view piece) {
  if (state_ == State::kFailed) return false;
  if (head_.size() < kHeadBytes) head_.append(piece.substr(0, kHeadBytes - head_.size()));
  bytes_ += piece.size();
  if (bytes_ > body_limit_) {
    return Fail(Error{ErrorCode::kInternal,
                      "reply body over the size limit of " + std::to_string(body_limit_) +
                          " bytes (" + std::to_string(entries_) + " jobs read)",
                      0});
  }
  const char* p = piece.data();
  const char* const end = p + piece.size();
  while (p < end) {
    switch (state_) {
      case State::kBeforeObject: {
        const char c = *p++;
        if (IsSpace(c)) break;
        if (c != '{') return Fail("not a JSON object");
        rest_ = "{";
        after_comma_ = false;
        state_ = State::kBeforeKey;
        break;
      }
      case State::kBeforeKey: {
        const char c = *p++;
        if (IsSpace(c)) break;
        if (c == '"') {
          key_.clear();
          value_.Start(c);
          state_ = State::kKey;
        } else if (c == '}' && !after_comma_) {
          state_ = State::kAfterObject;
        } else {
          return Fail("expected a key");
        }
        break;
      }
      case State::kKey: {
        const char* stop = value_.Advance(p, end);
        const char* last = stop != nullptr ? stop - 1 : end;  // without the closing quote
        if (key_.size() + static_cast<std::size_t>(last - p) > rest_limit_) {
          return Fail("a key over " + std::to_string(rest_limit_) + " bytes");
        }
        key_.append(p, last);
        if (stop == nullptr) return true;
        p = stop;
        state_ = State::kBeforeColon;
        break;
      }
      case State::kBeforeColon: {
        const char c = *p++;
        if (IsSpace(c)) break;
        if (c != ':') return Fail("expected ':'");
        state_ = State::kBeforeValue;
        break;
      }
      case State::kBeforeValue: {
        const char c = *p++;
        if (IsSpace(c)) break;
        if (key_ == "jobs" && c == '[') {
          after_comma_ = false;
          state_ = State::kBeforeEntry;
          break;
        }
        // Any other member, and a "jobs" that is not an array: DecodeJobListRest judges it.
        if (!AppendRest(rest_.size() > 1 ? ",\"" : "\"") || !AppendRest(key_) ||
            !AppendRest("\":") || !AppendRest(std::string_view(&c, 1))) {
          return false;
        }
        value_.Start(c);
        state_ = State::kValue;
        break;
      }
      case State::kValue: {
        const char* stop = value_.Advance(p, end);
        if (!AppendRest(std::string_view(p, stop != nullptr ? stop : end))) return false;
        if (stop == nullptr) return true;
        p = stop;
        state_ = State::kAfterValue;
        break;
      }
      case State::kAfterValue: {
        const char c = *p++;
        if (IsSpace(c)) break;
        if (c == ',') {
          after_comma_ = true;
          state_ = State::kBeforeKey;
        } else if (c == '}') {
          state_ = State::kAfterObject;
        } else {
          return Fail("expected ',' or '}'");
        }
        break;
      }
      case State::kBeforeEntry: {
        const char c = *p++;
        if (IsSpace(c)) break;
        if (c == ']' && !after_comma_) {
          state_ = State::kAfterValue;
          break;
        }
        if (c != '{') return Fail("an entry of \"jobs\" is not an object");
        element_.assign(1, c);
        value_.Start(c);
        state_ = State::kEntry;
        break;
      }
      case State::kEntry: {
        const char* stop = value_.Advance(p, end);
        element_.append(p, stop != nullptr ? stop : end);
        if (stop == nullptr) return true;
        p = stop;
        if (!EndOfEntry()) return false;
        state_ = State::kAfterEntry;
        break;
      }
      case State::kAfterEntry: {
        const char c = *p++;
        if (IsSpace(c)) break;
        if (c == ',') {
          after_comma_ = true;
          state_ = State::kBeforeEntry;
        } else if (c == ']') {
          state_ = State::kAfterValue;
        } else {
          return Fail("expected ',' or ']' in \"jobs\"");
        }
        break;
      }
      case State::kAfterObject:
        if (!IsSpace(*p++)) return Fail("text after the JSON object");
        break;
      case State::kFailed:
        return false;
    }
  }
  return true;
}

Result<Reply<JobList>> JobListScanner::Finish() {
  if (!error_ && state_ != State::kAfterObject) {
    Fail(bytes_ == 0 ? "empty reply" : "the reply ends before its JSON object does");
  }
  if (error_) return tl::unexpected(*error_);
  rest_ += '}';
  Result<Reply<JobList>> list = DecodeJobListRest(rest_, std::move(kept_), entries_);
  Restart();
  return list;
}

}  // namespace sb::slurm
