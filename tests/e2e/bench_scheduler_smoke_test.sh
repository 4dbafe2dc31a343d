#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The scheduler benchmark of issue #13 (scripts/bench.sh --smoke: its own environment, 5
# external nodes, 5 latency pods, 20 burst pods) still runs and prints its table with numbers.
# Times nothing: the numbers only have to be there.
# Usage: bench_scheduler_smoke_test.sh SLURM_BRIDGE_BINARY
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(bash "$root/scripts/bench.sh" --smoke --binary "$1" 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL bench.sh --smoke exited $rc"; exit 1; }
fails=0
# row NAME COLUMNS: the table's row starting with NAME has a number in each of COLUMNS (1 =
# kube-scheduler, 2 = Slurm alone, 3 = bridge, 4 = ratio) and "-" or a number elsewhere.
row() {
  if awk -F' [|] ' -v name="$1" -v cols="$2" '
      index($0, name) == 1 {
        num = "^ *-?[0-9]+([.][0-9]+)?[*]? *$"
        ok = NF == 5
        for (i = 2; i <= 5; i++) {
          if (index(cols, i - 1)) ok = ok && $i ~ num
          else ok = ok && ($i ~ num || $i ~ /^ *- *$/)
        }
        found = ok }
      END { exit !found }' <<<"$out"; then
    echo "ok   $1"
  else
    echo "FAIL $1: no such row with numbers in columns $2"; fails=$((fails + 1))
  fi
}
grep -qE '^metric +[|] +kube-scheduler [|] Slurm alone [|] +bridge [|] +ratio$' <<<"$out" &&
  echo "ok   table header" || { echo "FAIL table header"; fails=$((fails + 1)); }
row "latency: create->bound ms, p50" 1234
row "latency: create->bound ms, p99" 1234
row "latency: bridge overhead ms, p50" 3
row "latency: bridge overhead ms, p99" 3
row "burst: pods/s" 1234
row "burst: scheduler CPU ms per bound pod" 13
row "burst: scheduler peak RSS MB" 134
row "burst: slurmctld CPU s" 23
row "burst: kube-apiserver CPU s" 123
row "burst: apiserver writes per pod" 134
row "burst: Slurm requests per pod" 234
row "create: kube-apiserver + etcd + webhook CPU s" 13
row "system cost: CPU ms per pod" 134
# The webhook served the bridge's pods (their finalizer came with the create).
grep -q "webhook: serving on" <<<"$out" && echo "ok   webhook" ||
  { echo "FAIL webhook: not started"; fails=$((fails + 1)); }
[ $fails = 0 ]
