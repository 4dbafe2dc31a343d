#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The built binary answers `version` and refuses an unknown subcommand with status 2.
set -u
bin=$1
fail=0
out=$("$bin" version) || { echo "FAIL: version exited $?"; fail=1; }
[[ "$out" =~ ^slurm-bridge\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAIL: version printed '$out'"; fail=1; }
"$bin" no-such-subcommand >/dev/null 2>&1
rc=$?
[ $rc = 2 ] || { echo "FAIL: unknown subcommand exited $rc, want 2"; fail=1; }
[ $fail = 0 ] && echo "ok"
exit $fail
