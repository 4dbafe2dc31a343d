#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The unit tests under AddressSanitizer and UndefinedBehaviorSanitizer: configures and builds
# build-asan/ (SB_ASAN_DIR) with the clang that scripts/install-deps.sh installs (clang 14 on
# Debian 12, clang 19 on Debian 13; SB_ASAN_CC / SB_ASAN_CXX for another), SB_SANITIZE=ON and
# SB_FUZZ=ON (the same build holds the fuzz targets of scripts/fuzz.sh), then runs `ctest -L unit`
# there.
# Any sanitizer report fails its test. Arguments go to ctest (e.g. -R slurm).
# SB_TEST_JOBS (default 2) is ctest's --parallel; --build-only builds and runs nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SB_ASAN_DIR:-$root/build-asan}
build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
# Benchmarks and the e2e tests are not run sanitized (SB_BUILD_BENCHMARKS, SB_E2E_TESTS off),
# except admission_e2e_test (SB_SANITIZED_E2E_TESTS; scripts/test.sh runs it against its own
# environment); the build of everything else is the unit tests' (and the cli test's binary).
# Warnings are the gcc build's gate (-Werror there); clang's own extra ones do not fail this one.
cc=${SB_ASAN_CC:-} cxx=${SB_ASAN_CXX:-}
if [ -z "$cc" ] || [ -z "$cxx" ]; then
  for v in 14 19; do
    if command -v "clang++-$v" >/dev/null; then
      cc=${cc:-clang-$v} cxx=${cxx:-clang++-$v}
      break
    fi
  done
  if [ -z "$cc" ] || [ -z "$cxx" ]; then
    echo "sanitize.sh: no clang++-14 or clang++-19: run scripts/install-deps.sh, or name a clang" \
      "with SB_ASAN_CC and SB_ASAN_CXX" >&2
    exit 1
  fi
fi
BUILD_DIR=$build CC=$cc CXX=$cxx \
  "$root/scripts/build.sh" -DSB_SANITIZE=ON -DSB_FUZZ=ON -DSB_BUILD_BENCHMARKS=OFF -DSB_E2E_TESTS=OFF \
  -DSB_SANITIZED_E2E_TESTS=admission_e2e_test -DSB_WERROR=OFF
[ "$build_only" = 1 ] && exit 0
cd "$build"
# halt_on_error: the first report ends the test (UBSan already aborts: -fno-sanitize-recover).
# exitcode=86: a report cannot pass for an expected exit status (cli.binary expects 1 from a bad
# config, which the default exit code of a report shares).
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:exitcode=86}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=86}
ctest -L unit --output-on-failure --timeout 300 --parallel "${SB_TEST_JOBS:-2}" "$@"
