#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Stops the environment that up.sh started in RUN_DIR: every process it started, and with the
# Slurm daemons their private mount namespace (and so every mount). Safe to run twice, and after
# a start that failed half-way. Logs stay in RUN_DIR; etcd's data is removed unless --keep-logs.
#
# Usage: down.sh [--keep-logs] RUN_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

keep=0
if [ "${1:-}" = --keep-logs ]; then keep=1; shift; fi
run_dir=${1:-}
[ -n "$run_dir" ] || die "usage: down.sh [--keep-logs] RUN_DIR"
[ -d "$run_dir" ] || exit 0
started=$SECONDS

alive() { kill -0 "$1" 2>/dev/null; }

# Stops the given pids: TERM, then KILL after `grace` seconds.
stop_pids() {
  local grace=$1; shift
  local pids=() p
  for p in "$@"; do alive "$p" && pids+=("$p"); done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null
  local deadline=$((SECONDS + grace))
  while [ $SECONDS -lt $deadline ]; do
    local any=0
    for p in "${pids[@]}"; do alive "$p" && any=1; done
    [ $any = 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null
  for p in "${pids[@]}"; do while alive "$p"; do sleep 0.05; done; done
}

# True when process $1 descends from process $2.
descends_from() {
  local p=$1
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    [ "$p" = "$2" ] && return 0
    p=$(awk '/^PPid:/{print $2}' "/proc/$p/status" 2>/dev/null)
  done
  return 1
}

# Every process whose mount namespace is `ns` and that descends from `root` (the unshare that
# made the namespace): the Slurm daemons, slurmstepd, job processes. A namespace's inode number
# is reused once the namespace is gone, so the number alone may name another environment's
# namespace (a second down.sh, or a down.sh after a failed start, would stop that one).
pids_in_ns() {
  local ns=$1 root=$2 p
  [ -n "$root" ] || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && descends_from "${p#/proc/}" "$root" &&
      echo "${p#/proc/}"
  done
}

S="$run_dir/slurm"
root=$(cat "$S/unshare.pid" 2>/dev/null || true)
# A recorded pid may belong to someone else by now: the unshare only while it runs unshare.
[ -n "$root" ] && [ "$(cat "/proc/$root/comm" 2>/dev/null)" = unshare ] || root=""
if [ -f "$S/mntns" ]; then
  ns=$(cat "$S/mntns")
  # The daemons first (slurmrestd, slurmd, slurmctld save state on TERM), then anything left.
  if [ -f "$S/pids" ]; then
    mapfile -t daemons < <(for p in $(awk '{print $2}' "$S/pids"); do
      [ "$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" = "$ns" ] && descends_from "$p" "$root" && echo "$p"
    done)
    [ ${#daemons[@]} -eq 0 ] || stop_pids 10 "${daemons[@]}"
  fi
  mapfile -t rest < <(pids_in_ns "$ns" "$root")
  [ ${#rest[@]} -eq 0 ] || stop_pids 5 "${rest[@]}"
fi
# The supervisor and the unshare parent (also when the namespace was never written down).
sup=$(cat "$S/supervisor.pid" 2>/dev/null || true)
[ -n "$sup" ] && [ -n "$root" ] && descends_from "$sup" "$root" && stop_pids 5 "$sup"
[ -n "$root" ] && stop_pids 5 "$root"
if [ -f "$S/mntns" ]; then
  left=$(pids_in_ns "$(cat "$S/mntns")" "$root" | wc -l)
  [ "$left" = 0 ] || log "warning: $left processes still in the Slurm namespace"
fi

K="$run_dir/kube"
if [ -f "$K/pids" ]; then
  # Controller manager and apiserver before etcd.
  stop_pids 10 $(awk '$1!="etcd"{print $2}' "$K/pids")
  stop_pids 10 $(awk '$1=="etcd"{print $2}' "$K/pids")
fi
[ $keep = 1 ] || rm -rf "$K/etcd"
rm -f "$S/ready"
# Nothing of ours may stay mounted: the chroot's mounts lived only in the namespace.
if grep -q " $SB_CHROOT/" /proc/self/mountinfo 2>/dev/null; then
  log "warning: mounts under $SB_CHROOT remain in the host namespace"
fi
log "environment stopped in $((SECONDS - started)) s: $run_dir"
