#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs the libFuzzer targets (fuzz/): scripts/fuzz.sh [seconds per target] [target...]
# (default 60 s, every target). Builds them in build-asan/ (scripts/sanitize.sh --build-only:
# clang 14 or 19, ASan + UBSan), copies each target's seeds (testing/testdata, fuzz/seeds; listed
# in build-asan/fuzz/<target>.seeds) into its working corpus build-asan/fuzz/corpus/<target>/,
# which grows from run to run, and fuzzes it for the given time. Prints a table: executions, exec/s,
# coverage (libFuzzer's cov: edges and ft: features at the end) and crashes.
# Exits non-zero when a target crashed, leaked, timed out or ran out of memory; the input is
# kept as build-asan/fuzz/artifacts/<target>/{crash,leak,timeout,oom}-<sha1> and the log as
# build-asan/fuzz/logs/<target>.log. Reproduce with build-asan/fuzz/<target> <input>.
# SB_FUZZ_JOBS (default 1): targets fuzzed at once. SB_FUZZ_BUILD=0 skips the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SB_ASAN_DIR:-$root/build-asan}
seconds=${1:-60}
shift || true
if [ "${SB_FUZZ_BUILD:-1}" != 0 ]; then
  SB_BUILD_TARGETS=fuzz "$root/scripts/sanitize.sh" --build-only
fi
dir=$build/fuzz
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd "$dir" && ls -- *.seeds | sed 's/\.seeds$//')
fi

# fuzz_one <target>: one run; its summary line goes to logs/<target>.result.
fuzz_one() {
  local t=$1 corpus=$dir/corpus/$1 artifacts=$dir/artifacts/$1/ log=$dir/logs/$1.log rc=0
  mkdir -p "$corpus" "$artifacts" "$dir/logs"
  while IFS= read -r seed; do
    [ -n "$seed" ] && cp -f "$seed" "$corpus/seed-$(basename "$(dirname "$seed")")-$(basename "$seed")"
  done <"$dir/$t.seeds"
  local before
  before=$(find "$artifacts" -type f | wc -l)
  touch "$dir/logs/$t.start"
  # -timeout: one input taking longer is a finding; -rss_limit_mb: so is a blow-up in memory.
  "$dir/$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts" "$corpus" >"$log" 2>&1 || rc=$?
  local execs eps cov ft found
  # `|| true`: a target that fails on its seeds prints no cov: line.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
  found=$(($(find "$artifacts" -type f | wc -l) - before))
  [ "$rc" != 0 ] && [ "$found" = 0 ] && found="rc=$rc"
  echo "$t ${execs:-?} ${eps:-?} ${cov:-?} ${ft:-?} $found" >"$dir/logs/$t.result"
}

jobs=${SB_FUZZ_JOBS:-1}
for t in "${targets[@]}"; do
  [ -x "$dir/$t" ] || { echo "fuzz.sh: no target $t in $dir" >&2; exit 2; }
  rm -f "$dir/logs/$t.result"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait

status=0
printf '%-24s %12s %8s %7s %7s  %s\n' target executions exec/s cov ft crashes
for t in "${targets[@]}"; do
  if [ ! -f "$dir/logs/$t.result" ]; then
    echo "$t: no result (see $dir/logs/$t.log)"
    status=1
    continue
  fi
  read -r name execs eps cov ft found <"$dir/logs/$t.result"
  printf '%-24s %12s %8s %7s %7s  %s\n' "$name" "$execs" "$eps" "$cov" "$ft" "$found"
  if [ "$found" != 0 ]; then
    status=1
    echo "  $(grep -m1 -E 'ERROR|runtime error|Sanitizer' "$dir/logs/$t.log" || true)"
    find "$dir/artifacts/$t" -type f -newer "$dir/logs/$t.start" | sed 's/^/  input: /'
  fi
done
exit $status
