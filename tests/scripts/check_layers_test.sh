#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/check-layers.sh on hand-made trees (ctest scripts.check-layers, label unit): a clean
# tree passes, and each rule fails with a message that names the file, the line and the rule
# (bridge/ including an I/O header, an upward or sideways folder edge, testing/ outside a test,
# a folder without a floor, an include cycle between units).
set -euo pipefail
check=$(cd "$(dirname "$0")/../.." && pwd)/scripts/check-layers.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
put() { # PATH [INCLUDE...]: a file under $dir/src that includes each quoted path
  local f=$dir/src/$1
  mkdir -p "$(dirname "$f")"
  printf '// SPDX-License-Identifier: Apache-2.0\n' >"$f"
  shift
  for i in "$@"; do printf '#include %s\n' "$i" >>"$f"; done
}
run() { out=$("$check" "$dir" 2>&1) && rc=0 || rc=$?; }
expect() { # WHAT WANT_RC WANT_TEXT
  if [ "$rc" != "$2" ] || ! grep -qF -- "$3" <<<"$out"; then
    echo "FAIL: $1: want rc $2 and '$3', got rc $rc:"
    echo "$out"
    fail=1
  else
    echo "ok: $1"
  fi
}
clean_tree() {
  rm -rf "$dir/src"
  put common/error.h '<string>'
  put kube/types.h '"common/error.h"'
  put kube/client.h '"kube/types.h"' '<boost/asio/awaitable.hpp>'
  put slurm/types.h '"common/error.h"'
  put slurm/client.h '"slurm/types.h"'
  put bridge/config.h '"kube/types.h"' '"slurm/types.h"' '<map>'
  put bridge/config.cc '"bridge/config.h"' '<fmt/format.h>'
  put bridge/config_test.cc '"bridge/config.h"' '"testing/testdata.h"' '<fstream>'
  put wiring/clients.h '"bridge/config.h"' '"slurm/client.h"'
  put scheduler/scheduler.cc '"wiring/clients.h"' '"kube/client.h"'
  put scheduler/scheduler_test.cc '"scheduler/scheduler.h"' '"controllers/pod.h"' '"testing/run.h"'
  put scheduler/scheduler.h '"bridge/config.h"'
  put controllers/pod.h '"kube/client.h"'
  put app/run.cc '"scheduler/scheduler.h"' '"controllers/pod.h"'
  put main.cc '"app/run.h"'
}

clean_tree
run
expect "a clean tree passes" 0 "check-layers: 15 files"

put bridge/config.cc '"bridge/config.h"' '"slurm/client.h"'
run
expect "bridge/ including the Slurm client" 1 \
  'src/bridge/config.cc:3 includes "slurm/client.h": bridge/ does no I/O'
clean_tree
put bridge/explain.cc '"bridge/config.h"' '<fstream>'
run
expect "bridge/ including a file stream" 1 'src/bridge/explain.cc:3 includes <fstream>: bridge/ does no I/O'
clean_tree
put bridge/x.h '"kube/runtime/time_format.h"'
run
expect "bridge/ including kube/runtime/" 1 'includes "kube/runtime/time_format.h": bridge/ does no I/O'

clean_tree
put kube/types.h '"common/error.h"' '"bridge/config.h"'
run
expect "kube/ including bridge/ (upward)" 1 \
  'src/kube/types.h:3 includes "bridge/config.h": kube/ (floor 3) may not include bridge/ (floor 4)'
clean_tree
put slurm/client.h '"slurm/types.h"' '"kube/types.h"'
run
expect "slurm/ including kube/ (sideways)" 1 'slurm/ (floor 3) may not include kube/ (floor 3)'
clean_tree
put controllers/pod.h '"kube/client.h"' '"scheduler/scheduler.h"'
run
expect "controllers/ including scheduler/" 1 'controllers/ (floor 6) may not include scheduler/'
clean_tree
put scheduler/scheduler.h '"bridge/config.h"' '"testing/fake.h"'
run
expect "testing/ outside a test" 1 \
  'src/scheduler/scheduler.h:3 includes "testing/fake.h": only *_test.cc files include testing/'
clean_tree
put newroom/x.h '"common/error.h"'
run
expect "a folder without a floor" 1 'src/newroom/ has no floor'

clean_tree
put bridge/dra.h '"bridge/config.h"'
put bridge/dra.cc '"bridge/dra.h"'
put bridge/config.cc '"bridge/config.h"' '"bridge/dra.h"'
run
expect "a cycle through a .cc (config.cc -> dra.h -> config.h)" 1 \
  'include cycle: bridge/config -> bridge/dra -> bridge/config'
expect "the cycle's include lines" 1 'src/bridge/config.cc:3 (bridge/config -> bridge/dra)'
clean_tree
put kube/a.h '"kube/b.h"'
put kube/b.h '"kube/c.h"'
put kube/c.h '"kube/a.h"'
run
expect "a cycle of three headers" 1 'include cycle: kube/a -> kube/b -> kube/c -> kube/a'
exit $fail
