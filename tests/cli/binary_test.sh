#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The built binary answers `version`, refuses an unknown subcommand with status 2, lists its
# components, and stops with status 1 and a message naming the key on a bad config.
set -u
bin=$1
fail=0
out=$("$bin" version) || { echo "FAIL: version exited $?"; fail=1; }
[[ "$out" =~ ^slurm-bridge\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAIL: version printed '$out'"; fail=1; }
"$bin" no-such-subcommand >/dev/null 2>&1
rc=$?
[ $rc = 2 ] || { echo "FAIL: unknown subcommand exited $rc, want 2"; fail=1; }
for sub in scheduler controllers admission all check; do
  "$bin" "$sub" --help >/dev/null 2>&1 || { echo "FAIL: $sub --help exited $?"; fail=1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'slurmRestApi: http://127.0.0.1:1\njobPollInterval: fast\n' >"$tmp/bad.yaml"
for sub in scheduler controllers check; do
  out=$(SLURM_JWT_FILE=/dev/null "$bin" "$sub" --config "$tmp/bad.yaml" 2>&1)
  rc=$?
  [ $rc = 1 ] || { echo "FAIL: $sub with a bad config exited $rc, want 1"; fail=1; }
  [[ $out == *'config key jobPollInterval: "fast" is not a duration'* ]] ||
    { echo "FAIL: $sub did not name the bad key: $out"; fail=1; }
done
printf 'slurmRestApi: http://127.0.0.1:1\n' >"$tmp/ok.yaml"
out=$(env -u SLURM_JWT_FILE "$bin" scheduler --config "$tmp/ok.yaml" 2>&1)
rc=$?
[ $rc = 1 ] && [[ $out == *SLURM_JWT_FILE* ]] || { echo "FAIL: no SLURM_JWT_FILE: $rc $out"; fail=1; }
out=$("$bin" scheduler --config "$tmp/missing.yaml" 2>&1)
[[ $out == *"$tmp/missing.yaml"* ]] || { echo "FAIL: missing config not named: $out"; fail=1; }
[ $fail = 0 ] && echo "ok"
exit $fail
