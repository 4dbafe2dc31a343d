#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The scheduler's benchmark (bench/scheduler_bench.cc): pod created -> bound through the bridge
# beside Slurm's own submit -> RUNNING for jobs of the same shape, and slurmrestd requests per
# second while pods wait. Starts (and stops) its own environment with 25 Slurm nodes (200 CPUs),
# so that 200 one-CPU pods fit at once.
# Usage: scripts/bench-scheduler.sh [pods] [waiting pods]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
cmake --build "$build" --target scheduler_bench slurm-bridge >/dev/null
run=$(mktemp -d "${TMPDIR:-/tmp}/sb-bench.XXXXXX")
trap '"$root/testenv/down.sh" "$run" >/dev/null 2>&1' EXIT
"$root/testenv/up.sh" --run-dir "$run" --nodes 25 >/dev/null
"$root/testenv/kube/register-nodes.sh" "$run/env" >/dev/null
SB_TESTENV="$run/env" "$build/bench/scheduler_bench" "$build/slurm-bridge" "$run" "${1:-200}" "${2:-1000}"
