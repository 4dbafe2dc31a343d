#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/chaos/streaks.awk on hand-made samples (ctest chaos.streaks, label unit): a violation
# that stays through readable samples for the limit is reported, one that comes and goes is
# not, and samples that could not be read neither end a streak nor lengthen it.
set -euo pipefail
awk_file=$(cd "$(dirname "$0")" && pwd)/streaks.awk
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
sample() { # NAME T_MS RC [LINE...]
  local f=$dir/$1
  printf '%s %s\n' "$2" "$3" >"$f"
  shift 3
  for l in "$@"; do printf '%s\n' "$l" >>"$f"; done
}
expect() { # WHAT WANT GOT
  if [ "$2" != "$3" ]; then echo "FAIL: $1: want '$2', got '$3'"; fail=1; else echo "ok: $1"; fi
}
a='unbound-job: pod chaos/a is bound to node n1 but its Slurm job 7 is COMPLETED'
b='two-live-jobs: group chaos/g has 2 live Slurm jobs: 8, 9'
# a: seen from 0 s to 95 s; the 30 s around the unreadable sample (a daemon down) do not count:
# 10 + 40 + 15 = 65 s.
sample 01 0 1 "$a"
sample 02 10000 1 "$a" "$b"
sample 03 30000 1
sample 04 40000 1 "$a"
sample 05 80000 1 "$a" "$b"
sample 06 95000 1 "${a/COMPLETED/FAILED}"
sample 07 100000 0 "no violations"
out=$(awk -v limit=60 -f "$awk_file" "$dir"/[0-9]*)
expect "samples counted, unreadable ones apart" "samples 7 6" "$(grep '^samples' <<<"$out")"
expect "the longest streak" "longest 65 unbound-job: pod chaos/a" "$(grep '^longest' <<<"$out")"
expect "a persistent violation, with its last text" "persistent 65 ${a/COMPLETED/FAILED}" \
  "$(grep '^persistent' <<<"$out")"
# b came, went (sample 04 is readable without it) and came back: two short streaks.
expect "a violation that comes and goes is not persistent" "0" "$(grep -c "group chaos/g" <<<"$(grep '^persistent' <<<"$out")" || true)"
out=$(awk -v limit=66 -f "$awk_file" "$dir"/[0-9]*)
expect "under the limit" "" "$(grep '^persistent' <<<"$out" || true)"
rm -f "$dir"/*
sample 01 0 0 "no violations"
out=$(awk -v limit=60 -f "$awk_file" "$dir"/[0-9]*)
expect "no violation at all" "longest 0 -" "$(grep '^longest' <<<"$out")"
exit $fail
