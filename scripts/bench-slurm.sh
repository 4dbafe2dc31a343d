#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The Slurm client's benchmarks: decode of 10,000-job replies, and requests per second against
# the real slurmrestd beside curl. Starts (and stops) its own Slurm environment.
# Usage: scripts/bench-slurm.sh [requests] [concurrency]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/build.sh" >/dev/null
cmake --build "$build" --target slurm_decode_bench slurm_rest_bench >/dev/null
"$build/bench/slurm_decode_bench" --benchmark_min_time=1
run=$(mktemp -d "${TMPDIR:-/tmp}/sb-bench.XXXXXX")
trap '"$root/testenv/down.sh" "$run" >/dev/null 2>&1; rm -rf "$run"' EXIT
"$root/testenv/up.sh" --no-kube --run-dir "$run" >/dev/null
SB_TESTENV="$run/env" "$build/bench/slurm_rest_bench" "${1:-2000}" "${2:-8}"
