#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Injects one fault into a running test environment (testenv/up.sh), for scripts/chaos.sh and
# tests that need a daemon restarted or stopped:
#
#   slurmctld-restart     SIGTERM slurmctld (it saves its state), start it again, wait for `scontrol ping`
#   slurmrestd-stop       SIGTERM slurmrestd; its port stays reserved, nothing answers on it
#   slurmrestd-start      start slurmrestd again on its port (no-op when it runs), wait for /ping
#   apiserver-restart     SIGTERM kube-apiserver, start it again with the same command line (and
#                         mount namespace setup), wait for /readyz; etcd keeps the data
#   node-down NODE        scontrol update nodename=NODE state=down (Slurm ends the jobs on it)
#   node-resume NODE      scontrol update nodename=NODE state=resume
#
# Faults of one daemon are serialised (flock on RUN_DIR/.fault-DAEMON.lock).
# A daemon started here runs under a small bash that waits for it (and so reaps it: PID 1 of
# this machine does not reap orphans, and down.sh waits for the recorded pids to be gone); its
# pid is recorded in RUN_DIR's pids files, so down.sh stops it as it stops the first one.
#
# Usage: fault.sh RUN_DIR KIND [NODE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_root
[ $# -ge 2 ] || die "usage: fault.sh RUN_DIR KIND [NODE]"
run_dir=$(cd "$1" && pwd) kind=$2 node=${3:-}
S="$run_dir/slurm" K="$run_dir/kube"
PATHS=/usr/sbin:/usr/bin:/sbin:/bin

alive() { kill -0 "$1" 2>/dev/null; }
# Waits up to $2 s for pid $1 to be gone.
wait_gone() {
  local deadline=$((SECONDS + $2))
  while alive "$1"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

# slurm_pid NAME: the pids of this environment's Slurm daemon NAME (slurmctld, slurmrestd): in
# the recorded mount namespace, with this environment's slurm.conf mounted (as down.sh finds them).
slurm_pid() {
  local ns p S_REAL
  ns=$(cat "$S/mntns")
  S_REAL=$(cd "$S" && pwd -P)
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = "$1" ] || continue
    [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns" ] || continue
    grep -qF " $S_REAL/etc " "$p/mountinfo" 2>/dev/null && echo "${p#/proc/}"
  done
}

# in_slurm_bg NAME LOG COMMAND...: runs COMMAND in the Slurm cluster's namespaces, in the
# background under a waiting bash; records "NAME PID" in $S/pids.
in_slurm_bg() {
  local name=$1 out=$2 sup pidfile
  shift 2
  sup=$(cat "$S/supervisor.pid")
  pidfile=$(mktemp "$S/.fault.XXXXXX")
  setsid bash -c 'pidfile=$1; shift; "$@" & echo $! >"$pidfile"; wait' \
    fault "$pidfile" nsenter -t "$sup" -m -u "$@" </dev/null >>"$out" 2>&1 9>&- &
  local deadline=$((SECONDS + 10))
  until [ -s "$pidfile" ]; do
    [ $SECONDS -lt $deadline ] || die "$name did not start"
    sleep 0.05
  done
  echo "$name $(cat "$pidfile")" >>"$S/pids"
  rm -f "$pidfile"
}

slurm_ping() { "$here/slurm/exec.sh" "$run_dir" scontrol ping 2>/dev/null | grep -q 'is UP'; }
rest_ping() {
  curl -sf -m 5 -H "X-SLURM-USER-TOKEN: $(cat "$S/jwt-slurm")" \
    "$SLURM_REST_URL/slurm/v0.0.44/ping/" 2>/dev/null | grep -q '"pinged": *"UP"'
}

stop_slurm_daemon() {
  local p
  for p in $(slurm_pid "$1"); do
    kill -TERM "$p" 2>/dev/null || true
    wait_gone "$p" 30 || { kill -KILL "$p" 2>/dev/null || true; wait_gone "$p" 10 || true; }
  done
}

[ -f "$run_dir/env" ] || die "no environment in $run_dir"
# One fault at a time per daemon (two restarts of one apiserver at once would race for its port
# and its line in the pids file); faults of different daemons may overlap.
case "$kind" in
  slurmctld-*) lock=slurmctld ;; slurmrestd-*) lock=slurmrestd ;; apiserver-*) lock=apiserver ;;
  *) lock=node ;;
esac
exec 9>"$run_dir/.fault-$lock.lock"
flock 9
set -a
. "$run_dir/env"
set +a

case "$kind" in
  slurmctld-restart)
    [ -f "$S/ready" ] || die "no running Slurm in $S"
    stop_slurm_daemon slurmctld
    in_slurm_bg slurmctld "$S/log/slurmctld.stdout" env -i PATH=$PATHS chroot "$SB_CHROOT" \
      /usr/sbin/slurmctld -D -i
    wait_for 60 slurm_ping || die "slurmctld not up 60 s after its restart (log: $S/log/slurmctld.log)"
    ;;
  slurmrestd-stop)
    [ -f "$S/ready" ] || die "no running Slurm in $S"
    stop_slurm_daemon slurmrestd
    ;;
  slurmrestd-start)
    [ -f "$S/ready" ] || die "no running Slurm in $S"
    if [ -z "$(slurm_pid slurmrestd)" ]; then
      # The plugins supervise.sh started it with (/slurmdb/ too with accounting).
      plugins=openapi/slurmctld,openapi/util
      [ "${SB_ACCOUNTING:-0}" = 0 ] || plugins+=,openapi/slurmdbd
      in_slurm_bg slurmrestd "$S/log/slurmrestd.log" env -i SLURM_JWT=daemon PATH=$PATHS \
        chroot --userspec=slurmrest:slurmrest "$SB_CHROOT" /usr/sbin/slurmrestd -a rest_auth/jwt \
        -s "$plugins" "${SLURM_REST_URL#http://}"
    fi
    wait_for 30 rest_ping || die "slurmrestd not answering 30 s after its start"
    ;;
  apiserver-restart)
    [ -f "$K/pids" ] || die "no kube-apiserver in $K"
    pid=$(awk '$1=="kube-apiserver"{print $2}' "$K/pids" | tail -1)
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != kube-apiserver ]; then
      # Not the recorded one: this environment's by its --cert-dir.
      pid=""
      for p in /proc/[0-9]*; do
        [ "$(cat "$p/comm" 2>/dev/null)" = kube-apiserver ] &&
          tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "--cert-dir $K/certs " && pid=${p#/proc/}
      done
      [ -n "$pid" ] || die "kube-apiserver not running"
    fi
    mapfile -d '' -t cmd <"/proc/$pid/cmdline"
    kill -TERM "$pid"
    wait_gone "$pid" 30 || { kill -KILL "$pid"; wait_gone "$pid" 10; }
    wrap=()
    # With kubelets, up.sh runs it in a mount namespace of its own with $K/hosts on /etc/hosts.
    [ ! -f "$K/hosts" ] ||
      wrap=(unshare --mount --propagation private -- sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$K/hosts")
    pidfile=$(mktemp "$K/.fault.XXXXXX")
    setsid bash -c 'pidfile=$1; shift; "$@" & echo $! >"$pidfile"; wait' \
      fault "$pidfile" "${wrap[@]}" "${cmd[@]}" </dev/null >>"$K/log/kube-apiserver.log" 2>&1 9>&- &
    until [ -s "$pidfile" ]; do sleep 0.05; done
    new=$(cat "$pidfile")
    rm -f "$pidfile"
    awk -v new="$new" '$1=="kube-apiserver"{$2=new} {print}' "$K/pids" >"$K/pids.new"
    mv "$K/pids.new" "$K/pids"
    ready() {
      curl -sf --cacert "$KUBE_CA_FILE" -H "Authorization: Bearer $(cat "$KUBE_TOKEN_FILE")" \
        "$KUBE_APISERVER_URL/readyz" >/dev/null
    }
    wait_for 120 ready || die "kube-apiserver not ready 120 s after its restart"
    ;;
  node-down | node-resume)
    [ -n "$node" ] || die "$kind needs a NODE"
    state=down
    [ "$kind" = node-down ] || state=resume
    # Retried while slurmctld does not answer (a restart); resuming a node that is not DOWN (two
    # overlapping downs, one resumed) is a no-op.
    deadline=$((SECONDS + 60))
    until out=$("$here/slurm/exec.sh" "$run_dir" scontrol update nodename="$node" state=$state \
      reason=fault.sh 2>&1); do
      if [ $state = resume ] && show=$("$here/slurm/exec.sh" "$run_dir" scontrol show node "$node" 2>/dev/null) &&
        ! grep -q 'State=[A-Z+]*DOWN' <<<"$show"; then
        break
      fi
      [ $SECONDS -lt $deadline ] || die "scontrol update nodename=$node state=$state: $out"
      sleep 1
    done
    ;;
  *) die "unknown fault: $kind (see testenv/fault.sh)" ;;
esac
