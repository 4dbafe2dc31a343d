#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The busy-cluster benchmark of issue #46 (scripts/bench.sh --busy --smoke: bench/busy.py in its
# own environment, 200 held native jobs, a churn of one sbatch every 2 s, 20 s windows without,
# with and again without `slurm-bridge all`) still runs and prints its table with numbers.
# Times nothing: 20 s windows of an idle Slurm say nothing about the ratio.
# Usage: bench_busy_smoke_test.sh SLURM_BRIDGE_BINARY
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(bash "$root/scripts/bench.sh" --busy --smoke --binary "$1" 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL bench.sh --busy --smoke exited $rc"; exit 1; }
fails=0
check() {
  if grep -qE "$2" <<<"$out"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}
num='[0-9]+([.][0-9]+)?'
check "table header" '^metric +[|] +without \(A\) [|] with bridge \(B\) [|] +without \(A2\) [|] +B/A [|] +B/A2$'
check "slurmctld row" "^slurmctld CPU-s/s +[|] +$num [|] +$num [|] +$num [|]"
check "both row" "^slurmctld [+] slurmrestd CPU-s/s .*[|] +$num [|] +$num [|] +$num [|] +$num [|] +$num$"
check "slurmrestd RSS row" "^slurmrestd peak RSS MB .*[|] +$num [|] +$num [|] +$num [|]"
check "bridge RSS row" "^bridge peak RSS MB .*[|] +- [|] +$num [|]"
check "requests row" "^bridge -> slurmrestd requests/min \(proxy\) +[|] +- [|] +$num [|]"
check "a request kind" "^  requests/min: GET /jobs/state/"
check "bytes row" "^bytes/min read from slurmrestd, MB \(proxy\) +[|] +- [|] +$num [|]"
check "goal line" "^goal: slurmctld [+] slurmrestd CPU ratio $num, $num "
check "held jobs pending" "^setup: 200 held jobs of [a-z0-9]+ .* 200 still PENDING at the end; .* 0 failed"
[ $fails = 0 ]
