#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Prints the project's version: the VERSION of project() in CMakeLists.txt, the one source of it
# (the binary's --version, the image tags and labels, the release's file names; the chart's
# version and appVersion must equal it, which chart.lint and scripts/release.sh check).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^project(slurm-bridge VERSION \([0-9][0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[ -n "$version" ] || { echo "version.sh: no project VERSION in $root/CMakeLists.txt" >&2; exit 1; }
echo "$version"
