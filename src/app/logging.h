// SPDX-License-Identifier: Apache-2.0
//
// Process-wide log setup for the subcommands: level and format (text for people, JSON lines for
// log collectors).
#pragma once

#include <string>
#include <string_view>

namespace sb::app {

// `level`: trace, debug, info, warn, error, critical, off. `format`: "text" or "json".
// JSON lines carry ts (UTC, RFC 3339 with milliseconds), level and msg.
void ConfigureLogging(const std::string& level, const std::string& format);

// `text` as the inside of a JSON string: quotes, backslashes and control characters escaped.
std::string JsonEscape(std::string_view text);

}  // namespace sb::app
