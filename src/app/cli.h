// SPDX-License-Identifier: Apache-2.0
//
// app/cli.h
//
// The command line of the one `slurm-bridge` binary: global flags and its subcommands: the
// components (`scheduler`, `controllers`, `admission`, `all`), the operator's read-only tools
// (`check`, `explain`, `jobs`, `nodes`), the node `epilog`, and `version`.
//
// Example:
//   int main(int argc, char** argv) { return sb::app::RunCli(argc, argv, std::cout, std::cerr); }
#pragma once

#include <iosfwd>

namespace sb::app {

// Parses `argv` and runs the chosen subcommand. Writes normal output to `out` and diagnostics to
// `err`. Returns the process exit status: 0 on success, 1 on a runtime failure, 2 on a usage
// error (unknown subcommand or flag, missing subcommand).
int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace sb::app
