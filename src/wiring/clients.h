// SPDX-License-Identifier: Apache-2.0
//
// wiring/clients.h
//
// From the bridge's config file to its clients: LoadConfig reads the file (bridge/config.h parses
// the text), SlurmClientConfig and JobWatchOptionsOf turn the config into the settings of the
// Slurm client and the job watch. The I/O side of bridge/config.h, which stays pure; one place
// for every subcommand that reads the file or talks to Slurm (app/, check/, explain/, the
// scheduler's own job watch).
//
// Thread model: pure functions, but LoadConfig reads a file.
#pragma once

#include <string>

#include "bridge/config.h"
#include "common/error.h"
#include "slurm/client.h"
#include "slurm/job_watch.h"

namespace sb::wiring {

// Reads and parses `path`; errors name the file.
[[nodiscard]] Result<bridge::Config> LoadConfig(const std::string& path);

// The Slurm client settings the config names (URL, pinned API version, user name, TLS, request
// timeout); the caller adds its own connection limits.
[[nodiscard]] slurm::ClientConfig SlurmClientConfig(const bridge::Config& config);
// The job watch's cadence: a full state poll every jobPollInterval (the fresh cadence after a
// submit is slurm::JobWatchOptions' own).
[[nodiscard]] slurm::JobWatchOptions JobWatchOptionsOf(const bridge::Config& config);

}  // namespace sb::wiring
