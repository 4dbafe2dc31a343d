#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Configures and builds the project in BUILD_DIR (default: build/). Extra arguments go to cmake's
# configure step, e.g. scripts/build.sh -DCMAKE_BUILD_TYPE=Debug.
# With ccache installed (scripts/install-deps.sh installs it) compilations are cached in
# ~/.cache/slurm-bridge/ccache (SB_CCACHE_DIR), keyed on paths relative to the checkout, so a fresh
# clone of the same sources rebuilds from the cache; SB_CCACHE=0 turns it off.
# SB_BUILD_TARGETS (space-separated) builds only those targets instead of everything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
gen=()
command -v ninja >/dev/null && [ ! -f "$build/Makefile" ] && gen=(-G Ninja)
launcher=()
if [ "${SB_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  cache=${SB_CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-bridge/ccache}
  [ -f "$cache/ccache.conf" ] || { mkdir -p "$cache" && echo "max_size = 4G" >"$cache/ccache.conf"; }
  # Through env, so that a later `cmake --build` or ninja outside this script uses the same cache.
  l="env;CCACHE_DIR=$cache;CCACHE_BASEDIR=$root;CCACHE_NOHASHDIR=1;ccache"
  launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=$l" "-DCMAKE_C_COMPILER_LAUNCHER=$l")
fi
cmake -S "$root" -B "$build" "${gen[@]}" -DSB_WERROR=ON "${launcher[@]}" "$@" >/dev/null
targets=()
[ -n "${SB_BUILD_TARGETS:-}" ] && read -ra targets <<<"$SB_BUILD_TARGETS" && targets=(--target "${targets[@]}")
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
