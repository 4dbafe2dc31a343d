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

# Every process of this environment's Slurm (the daemons, slurmstepd, job processes): in the
# recorded mount namespace and with this environment's slurm.conf mounted. The namespace's
# number alone is not enough: numbers are reused (and here not even unique among live
# namespaces), so it may name other environments' namespaces too.
S_REAL=$(cd "$run_dir" && pwd -P)/slurm
ours() { grep -qF " $S_REAL/etc " "/proc/$1/mountinfo" 2>/dev/null; }
pids_in_ns() {
  local ns=$1 p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] && ours "${p#/proc/}" && echo "${p#/proc/}"
  done
}

# The converged nodes (up.sh --kubelets), side by side: everything in each node's cgroup
# subtree; the nodes' mounts lived only in their own mount namespaces. Nodes are found by their
# directories and by their cgroups (named after this run directory), whichever is left.
cg_prefix="sb-$(printf '%s' "$(cd "$run_dir" && pwd -P)" | sha256sum | cut -c1-10)-"
node_names=$({
  for d in "$run_dir"/nodes/*/; do [ -d "$d" ] && basename "$d"; done
  for d in /sys/fs/cgroup/*/"$cg_prefix"*/; do [ -d "$d" ] && basename "$d" | sed "s/^$cg_prefix//"; done
} | sort -u)
if [ -n "$node_names" ]; then
  for n in $node_names; do "$here/kube/node.sh" down "$run_dir" "$n" & done
  wait
fi

S="$run_dir/slurm"
# The recorded pids that are still this environment's (pids are reused): without the check, a
# second down.sh, or the one up.sh runs before a start, stopped whichever Slurm had them now.
recorded_in_ns() {
  local p
  for p in $(cat "$S/supervisor.pid" 2>/dev/null) $(awk '{print $2}' "$S/pids" 2>/dev/null); do
    [ "$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" = "$1" ] && ours "$p" && echo "$p"
  done
}
if [ -f "$S/mntns" ]; then
  ns=$(cat "$S/mntns")
  mapfile -t mine < <(recorded_in_ns "$ns")
  # With accounting (up.sh --accounting): first everything but the supervisor (whose TERM would
  # stop its children all at once) and its unshare parent, slurmdbd and MariaDB, so that
  # slurmctld still reaches slurmdbd as it stops; then slurmdbd; then MariaDB, which shuts down
  # cleanly.
  if [ ${#mine[@]} -gt 0 ] && grep -q '^slurmdbd ' "$S/pids" 2>/dev/null; then
    keep_pids=" $(cat "$S/supervisor.pid" "$S/unshare.pid" 2>/dev/null | tr '\n' ' ') "
    others=() dbds=() dbs=()
    for p in $(pids_in_ns "$ns"); do
      case "$keep_pids" in *" $p "*) continue ;; esac
      case "$(cat "/proc/$p/comm" 2>/dev/null)" in
        slurmdbd) dbds+=("$p") ;; mariadbd) dbs+=("$p") ;; *) others+=("$p") ;;
      esac
    done
    stop_pids 10 "${others[@]}"
    stop_pids 10 "${dbds[@]}"
    stop_pids 30 "${dbs[@]}"
    mapfile -t mine < <(recorded_in_ns "$ns")
  fi
  if [ ${#mine[@]} -gt 0 ]; then
    # The daemons first (slurmrestd, slurmd, slurmctld save state on TERM), then anything left.
    stop_pids 10 "${mine[@]}"
    mapfile -t rest < <(pids_in_ns "$ns")
    [ ${#rest[@]} -eq 0 ] || stop_pids 5 "${rest[@]}"
  fi
fi
# A supervisor whose namespace was never written down: while it is the unshare's child.
if [ ! -f "$S/mntns" ] && [ -f "$S/supervisor.pid" ] && [ -f "$S/unshare.pid" ]; then
  sup=$(cat "$S/supervisor.pid")
  [ "$(awk '/^PPid:/{print $2}' "/proc/$sup/status" 2>/dev/null)" = "$(cat "$S/unshare.pid")" ] &&
    stop_pids 5 "$sup"
fi
# The unshare parent (also when the namespace was never written down), while it is one.
if [ -f "$S/unshare.pid" ]; then
  u=$(cat "$S/unshare.pid")
  [ "$(cat "/proc/$u/comm" 2>/dev/null)" = unshare ] && stop_pids 5 "$u"
fi
if [ -f "$S/mntns" ] && [ -n "$(recorded_in_ns "$(cat "$S/mntns")")" ]; then
  left=$(pids_in_ns "$(cat "$S/mntns")" | wc -l)
  log "warning: $left processes still in the Slurm namespace"
fi

K="$run_dir/kube"
if [ -f "$K/pids" ]; then
  # Controller manager and apiserver before etcd; a recorded pid only while it runs what was
  # recorded (pids are reused).
  same() { while read -r name pid; do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "${name:0:15}" ] && echo "$pid"
  done; }
  stop_pids 10 $(awk '$1!="etcd"' "$K/pids" | same)
  stop_pids 10 $(awk '$1=="etcd"' "$K/pids" | same)
fi
[ $keep = 1 ] || rm -rf "$K/etcd" "$S/mariadb"
rm -f "$S/ready"
# Nothing of ours may stay mounted: the chroot's mounts lived only in the namespace.
if grep -q " $SB_CHROOT/" /proc/self/mountinfo 2>/dev/null; then
  log "warning: mounts under $SB_CHROOT remain in the host namespace"
fi
log "environment stopped in $((SECONDS - started)) s: $run_dir"
