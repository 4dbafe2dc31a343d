#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The workload benchmark (scripts/bench-workload.sh --smoke: its own environment with kubelets,
# one bridge pod and one kube-scheduler pod of the stand-in workload, 20 rounds) still runs and
# prints its table with numbers. Times nothing: the numbers only have to be there.
# Usage: bench_workload_smoke_test.sh SLURM_BRIDGE_BINARY
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(bash "$root/scripts/bench-workload.sh" --smoke --binary "$1" 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "FAIL bench-workload.sh --smoke exited $rc"; exit 1; }
fails=0
# row NAME: the table has row NAME with a bridge and a direct number above 0 (or, for the
# stdev of one run, 0) and a ratio (a number, or "-").
row() {
  if awk -v name="$1" '
      index($0, name) == 1 {
        split(substr($0, length(name) + 1), f, " ")
        num = "^[0-9]+([.][0-9]+)?$"
        ok = f[1] ~ num && f[2] ~ num && (f[3] ~ num || f[3] == "-") && length(f) == 3
        if (name !~ /stdev/) ok = ok && f[1] > 0 && f[2] > 0
        found = ok }
      END { exit !found }' <<<"$out"; then
    echo "ok   $1"
  else
    echo "FAIL $1: no such row with numbers"; fails=$((fails + 1))
  fi
}
grep -qE '^metric +bridge +direct +bridge/direct$' <<<"$out" && echo "ok   table header" ||
  { echo "FAIL table header"; fails=$((fails + 1)); }
row "rate rounds/s, mean"
row "rate rounds/s, stdev"
row "rate per CPU second, mean"
row "create -> started ms, p50"
[ $fails = 0 ]
