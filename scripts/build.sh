#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Configures and builds the project in BUILD_DIR (default: build/). Extra arguments go to cmake's
# configure step, e.g. scripts/build.sh -DCMAKE_BUILD_TYPE=Debug.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
gen=()
command -v ninja >/dev/null && [ ! -f "$build/Makefile" ] && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DSB_WERROR=ON "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
