#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The test command: installs what is missing, builds, checks formatting and the include rules
# (scripts/check-layers.sh), and runs every test (unit, then e2e against a real Slurm and
# kube-apiserver that ctest starts and stops), then the unit tests under ASan + UBSan and a short
# run of each fuzz target (scripts/sanitize.sh, scripts/fuzz.sh; SB_SANITIZE=0 skips them). The
# sanitized build runs beside the tests.
# Arguments go to ctest, e.g. scripts/test.sh -R slurm.
# SB_TEST_JOBS (default 2) is ctest's --parallel.
#
# The quick unit run: scripts/test.sh --unit [ctest arguments] (or the first two arguments
# `-L unit`) checks the packages, builds, checks formatting and the include rules and runs
# `ctest -L unit` only: no test environment (no Slurm chroot, no Kubernetes, no Helm: nothing
# fetched, no root), no e2e test, no sanitized build, no fuzzing (scripts/sanitize.sh and
# scripts/fuzz.sh run those on their own, also without root). As a user other than root it needs
# the Debian packages of scripts/install-deps.sh installed already.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
unit_only=0
if [ "${1:-}" = --unit ]; then
  unit_only=1
  shift
elif [ "${1:-}" = -L ] && [ "${2:-}" = unit ]; then
  unit_only=1
  shift 2
fi
t0=$SECONDS
"$root/scripts/install-deps.sh"
t1=$SECONDS
[ $unit_only = 1 ] || "$root/scripts/prepare-testenv.sh"
t2=$SECONDS
"$root/scripts/build.sh"
t3=$SECONDS
"$root/scripts/check-format.sh"
"$root/scripts/check-layers.sh"
build=${BUILD_DIR:-$root/build}
status=0
# failed_tails BUILD_DIR: for each test that failed in BUILD_DIR's last ctest run, the last 60
# lines of its output (from Testing/Temporary/LastTest.log).
failed_tails() {
  local t=$1/Testing/Temporary name
  [ -s "$t/LastTestsFailed.log" ] || return 0
  while IFS=: read -r _ name; do
    echo "=== failed: $name (the last 60 lines of its output)"
    awk -v n="$name" '$0 ~ "^[0-9]+/[0-9]+ Testing: " && $3 == n { on = 1; next }
      on && index($0, "\"" n "\" end time:") == 1 { exit }
      on { print }' "$t/LastTest.log" | tail -n 60
  done <"$t/LastTestsFailed.log"
}
if [ $unit_only = 1 ]; then
  cd "$build"
  ctest -L unit --output-on-failure --timeout 900 --parallel "${SB_TEST_JOBS:-2}" "$@" || status=$?
  echo "test.sh --unit: deps $((t1 - t0)) s, build $((t3 - t2)) s, unit tests $((SECONDS - t3)) s," \
    "total $((SECONDS - t0)) s"
  exit $status
fi
# The sanitized build (build-asan/) goes on beside the tests at the lowest CPU priority: the e2e
# tests spend much of their time waiting on the daemons, and the build takes the CPU they leave
# (nice 19 yields to them whenever they want it). Its output: build/sanitize-build.log.
asan_pid=""
if [ "${SB_SANITIZE:-1}" != 0 ]; then
  mkdir -p "$build"
  nice -n 19 "$root/scripts/sanitize.sh" --build-only >"$build/sanitize-build.log" 2>&1 &
  asan_pid=$!
fi
cd "$build"
# Two at a time: the tests of each environment hold its RESOURCE_LOCK (cmake/Testing.cmake), so
# what runs side by side is a unit test, or the tests of different environments (SB_TEST_JOBS=1:
# one at a time).
# (ctest leaves an earlier run's LastTestsFailed.log in place when every test passes.)
rm -f "$build/failed-tests.txt" "$build/Testing/Temporary/LastTestsFailed.log"
ctest --output-on-failure --timeout 900 --parallel "${SB_TEST_JOBS:-2}" "$@" || status=$?
[ $status = 0 ] || failed_tails "$build" >"$build/failed-tests.txt"
t4=$SECONDS
# The unit tests again under ASan + UBSan (build-asan/, clang 14), then each fuzz target for
# SB_FUZZ_SECONDS (default 10) from its corpus, two at a time. SB_SANITIZE=0 skips both.
sanitized=""
sanitized_e2e='^(testenv\.up|testenv\.down|SchedulerE2e\.(EveryAnnotationReachesTheSlurmJob|IdentityPolicyIsEnforcedAtSubmit|PersistentVolumeNodeAffinityIsHonouredAndFirstConsumerClaimsRefused)|ServeE2e\.AllModePollsSlurmOncePerIntervalForEveryComponent)$'
if [ -n "$asan_pid" ]; then
  if ! wait "$asan_pid"; then
    tail -50 "$build/sanitize-build.log"
    echo "test.sh: the sanitized build failed (log: $build/sanitize-build.log)" >&2
    status=1
  fi
  t5=$SECONDS
  "$root/scripts/sanitize.sh" || status=$?
  # The sanitized binary on the real daemons (test audit N5): bridge e2e tests of build/ start
  # build-asan's slurm-bridge instead (the scheduler, the Slurm and Kubernetes clients, `all`),
  # stop it with SIGTERM, and fail on a report (exit 86).
  (cd "$build" && SB_BRIDGE_BINARY="${SB_ASAN_DIR:-$root/build-asan}/slurm-bridge" \
    ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:exitcode=86 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86 \
    ctest --output-on-failure --timeout 300 -R "$sanitized_e2e") || status=$?
  # The webhook's server sanitized behind the real apiserver (its own environment, from
  # build-asan/; the only e2e binary that build has).
  (cd "${SB_ASAN_DIR:-$root/build-asan}" &&
    ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:exitcode=86 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86 \
    ctest --output-on-failure --timeout 300 -R '^(testenv\.up|testenv\.down|AdmissionE2e\..*)$') ||
    status=$?
  t6=$SECONDS
  SB_FUZZ_BUILD=0 SB_FUZZ_JOBS=${SB_FUZZ_JOBS:-2} "$root/scripts/fuzz.sh" "${SB_FUZZ_SECONDS:-10}" ||
    status=$?
  sanitized=", sanitized build after the tests $((t5 - t4)) s, sanitized unit and e2e tests $((t6 - t5)) s,"
  sanitized+=" fuzzing $((SECONDS - t6)) s"
fi
# What the failed tests of the main run printed last, once more at the very end: the output of a
# long run is often kept only in part.
[ ! -s "$build/failed-tests.txt" ] || cat "$build/failed-tests.txt"
echo "test.sh: deps $((t1 - t0)) s, test environment artifacts $((t2 - t1)) s, build $((t3 - t2)) s," \
  "tests (sanitized build beside them) $((t4 - t3)) s$sanitized, total $((SECONDS - t0)) s"
exit $status
