// SPDX-License-Identifier: Apache-2.0
//
// slurm-bridge: one binary, one subcommand per component (see app/cli.h).
#include <iostream>

#include "app/cli.h"

int main(int argc, char** argv) { return sb::app::RunCli(argc, argv, std::cout, std::cerr); }
