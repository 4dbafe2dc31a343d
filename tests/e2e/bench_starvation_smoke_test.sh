#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The no-starvation benchmark (scripts/bench.sh --starvation: bench/starvation.py) in a small size
# (5 nodes, 2 unfit gangs, a churn of 10 pods/s for 5 s) still runs, prints its table with
# numbers, and ends correct: every pod bound once, the gangs still waiting, `slurm-bridge check`
# clean. Times nothing: the ratios of so few pods say nothing.
# Usage: bench_starvation_smoke_test.sh SLURM_BRIDGE_BINARY
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(bash "$root/scripts/bench.sh" --smoke --starvation --binary "$1" --churn-rate 10 \
  --churn-seconds 5 --gangs 2 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL bench.sh --smoke --starvation exited $rc"; exit 1; }
fails=0
check() {
  if grep -qE "$2" <<<"$out"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}
num='[0-9]+([.][0-9]+)?'
check "bind rate row" "^bind rate, pods/s .*[|] +$num [|] +$num [|] +$num [|]"
check "p99 row" "^create->bound ms, p99 +[|] +$num [|] +$num [|] +$num [|]"
check "goal line" "^goal: bind rate ratio $num .* p99 ratio $num"
check "correctness" "^correctness: ok$"
[ $fails = 0 ]
