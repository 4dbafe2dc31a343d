#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The test environment's own contract: a start that fails half-way leaves no process and no
# mount behind; a second environment runs beside another; stop leaves nothing behind.
set -uo pipefail
here=$(cd "$(dirname "$0")/../../testenv" && pwd)
. "$here/lib.sh"
fails=0
check() {
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); return 1; fi
}
# Count the environment's Slurm processes: in its mount namespace and with its slurm.conf
# mounted (the namespace's number alone may name other environments' namespaces too).
procs_in_ns() {
  local ns p n=0 etc
  ns=$(cat "$1/slurm/mntns" 2>/dev/null) || { echo 0; return; }
  etc=$(cd "$1/slurm" && pwd -P)/etc
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && grep -qF " $etc " "$p/mountinfo" 2>/dev/null &&
      n=$((n + 1))
  done
  echo $n
}
mounts_under_chroot() { grep -c " $SB_CHROOT/" /proc/self/mountinfo; }
base=$(mktemp -d "${TMPDIR:-/tmp}/sb-lifecycle.XXXXXX")
trap '"$here/down.sh" "$base/a" >/dev/null 2>&1; "$here/down.sh" "$base/b" >/dev/null 2>&1; rm -rf "$base"' EXIT
mounts_before=$(mounts_under_chroot)

SB_TESTENV_INJECT_FAILURE=after-slurmctld "$here/up.sh" --no-kube --run-dir "$base/a" >/dev/null 2>"$base/a.err"
rc=$?
check "failed start exits non-zero" [ $rc != 0 ]
check "failed start says why" grep -q "injected failure after slurmctld" "$base/a.err" ||
  sed 's/^/  up.sh: /' "$base/a.err"
check "failed start left no process" [ "$(procs_in_ns "$base/a")" = 0 ]
check "failed start left no mount" [ "$(mounts_under_chroot)" = "$mounts_before" ]
check "failed start kept its logs" [ -s "$base/a/slurm/log/slurmctld.log" ]

"$here/up.sh" --no-kube --nodes 2 --run-dir "$base/a" >/dev/null 2>"$base/a.err" || cat "$base/a.err"
"$here/up.sh" --no-kube --nodes 2 --run-dir "$base/b" >/dev/null 2>"$base/b.err" || cat "$base/b.err"
check "two environments side by side" test -f "$base/a/slurm/ready" -a -f "$base/b/slurm/ready"
. "$base/a/env"; url_a=$SLURM_REST_URL
. "$base/b/env"; url_b=$SLURM_REST_URL
check "they use different ports" [ "$url_a" != "$url_b" ]
for d in a b; do
  . "$base/$d/env"
  st=$(curl -s -H "X-SLURM-USER-TOKEN: $(cat "$SLURM_JWT_FILE")" "$SLURM_REST_URL/slurm/v0.0.44/ping/" | jq -r '.pings[0].pinged')
  check "environment $d answers" [ "$st" = UP ]
done
check "no mount leaked into the host namespace" [ "$(mounts_under_chroot)" = "$mounts_before" ]
"$here/down.sh" "$base/a" 2>/dev/null
check "stopping a leaves b running" [ "$(procs_in_ns "$base/b")" -gt 0 ]
check "a left no process" [ "$(procs_in_ns "$base/a")" = 0 ]
"$here/down.sh" "$base/b" 2>/dev/null
check "b left no process" [ "$(procs_in_ns "$base/b")" = 0 ]
check "no mount left" [ "$(mounts_under_chroot)" = "$mounts_before" ]
echo "$fails failed"
[ $fails = 0 ]
