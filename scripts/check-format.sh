#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Fails when a C++ file differs from what clang-format 19 (the repo's .clang-format) would write.
# With --fix, rewrites them instead. Version 19 on every supported release (scripts/install-deps.sh
# installs clang-format-19 on Debian 12 and 13): another version formats some constructs
# differently, whatever .clang-format says. SB_CLANG_FORMAT names another binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cf=${SB_CLANG_FORMAT:-clang-format-19}
command -v "$cf" >/dev/null || { echo "check-format: $cf missing (scripts/install-deps.sh)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.h.in' 2>/dev/null; git ls-files --others --exclude-standard '*.h' '*.cc' 2>/dev/null)
[ ${#files[@]} -gt 0 ] || { echo "check-format: no files"; exit 0; }
if [ "${1:-}" = --fix ]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
if "$cf" --dry-run -Werror "${files[@]}"; then
  echo "check-format: ${#files[@]} files clean"
else
  echo "check-format: run scripts/check-format.sh --fix" >&2
  exit 1
fi
