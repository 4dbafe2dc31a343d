#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Fails when a C++ file differs from what clang-format (the repo's .clang-format) would write.
# With --fix, rewrites them instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.h.in' 2>/dev/null; git ls-files --others --exclude-standard '*.h' '*.cc' 2>/dev/null)
[ ${#files[@]} -gt 0 ] || { echo "check-format: no files"; exit 0; }
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if clang-format --dry-run -Werror "${files[@]}"; then
  echo "check-format: ${#files[@]} files clean"
else
  echo "check-format: run scripts/check-format.sh --fix" >&2
  exit 1
fi
