#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The end-to-end tests on another Kubernetes than the default 1.36.2: builds that version into the
# cache (testenv/kube/build.sh; 1.34.2 takes Go 1.24 and about 25 minutes of two cores cold) and
# runs `ctest -L e2e` with SB_KUBE_VERSION set, so that every test environment starts on it.
# Not part of scripts/test.sh (the cold build would not fit CI's budget).
#
# Usage: scripts/compat.sh VERSION [ctest arguments]
#   VERSION   1.34 (1.34.2, upstream slurm-bridge's floor) or 1.36 (1.36.2)
#   e.g.      scripts/compat.sh 1.34
#             scripts/compat.sh 1.34 -R 'SchedulerE2e|KubeletE2e'
# The project must be built (scripts/build.sh); BUILD_DIR as there. SB_TEST_JOBS (default 2) is
# ctest's --parallel.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  1.34 | 1.34.2) version=1.34.2 ;;
  1.36 | 1.36.2) version=1.36.2 ;;
  *) echo "usage: scripts/compat.sh 1.34|1.36 [ctest arguments]" >&2; exit 2 ;;
esac
shift
export SB_KUBE_VERSION=$version
"$root/testenv/kube/build.sh"
build=${BUILD_DIR:-$root/build}
[ -x "$build/slurm-bridge" ] || { echo "compat.sh: no build in $build: run scripts/build.sh" >&2; exit 1; }
cd "$build"
start=$SECONDS
status=0
ctest -L e2e --output-on-failure --timeout 900 --parallel "${SB_TEST_JOBS:-2}" "$@" || status=$?
echo "compat.sh: Kubernetes $version, e2e tests in $((SECONDS - start)) s, ctest status $status"
exit $status
