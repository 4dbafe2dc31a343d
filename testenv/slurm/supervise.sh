#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs one Slurm cluster (slurmctld, N slurmd, slurmrestd) from the chroot. up.sh starts it as
# `unshare --mount --uts --fork supervise.sh ...`: every mount below is private to that mount
# namespace, so none outlives the daemons, whatever happens. The per-run directory ($S) is
# bound over the chroot's /etc/slurm, spool and log directories, and /run is a private tmpfs, so
# several clusters share one chroot without seeing each other.
#
# Usage: supervise.sh CHROOT RUN_SLURM_DIR REST_ADDR NODE[,NODE...]
# Writes $S/supervisor.pid at once, then $S/ready (or $S/failed with a reason) when done.
set -euo pipefail
C=$1 S=$2 REST_ADDR=$3 NODES=$4
echo $$ >"$S/supervisor.pid"
readlink /proc/self/ns/mnt >"$S/mntns"
PATHS=/usr/sbin:/usr/bin:/sbin:/bin
# Never hand SLURM_JWT (or anything else of the caller's) to slurmctld, slurmd or scontrol
# (slurm-local pitfall 4): every command runs under env -i.
in_chroot() { env -i PATH=$PATHS chroot "$C" "$@"; }
fail() { echo "$*" >"$S/failed"; echo "supervise: $*" >&2; exit 1; }
trap 'fail "failed at line $LINENO"' ERR
trap 'kill $(jobs -p) 2>/dev/null || true; wait || true; exit 0' TERM INT

mount -t proc proc "$C/proc"
mount --rbind /dev "$C/dev"
mount -t sysfs sysfs "$C/sys"
mount -t tmpfs -o mode=755 tmpfs "$C/run"
mount --bind "$S/etc" "$C/etc/slurm"
mount --bind "$S/state" "$C/var/spool/slurmctld"
mount --bind "$S/spool" "$C/var/spool/slurmd"
mount --bind "$S/log" "$C/var/log/slurm"
# The Epilog's directory (testenv/slurm/epilog-dir.sh), when up.sh made one: read-only at
# /run/sb-epilog, on this namespace's private /run.
if [ -d "$S/epilog" ]; then
  mkdir -p "$C/run/sb-epilog"
  mount --bind "$S/epilog" "$C/run/sb-epilog"
  mount -o remount,bind,ro "$C/run/sb-epilog"
fi
# slurmd wants /run/slurm owned by root (pitfall 5); slurmctld's pid file goes elsewhere.
mkdir -p "$C/run/slurm" "$C/run/slurmctld"
in_chroot chown slurm:slurm /run/slurmctld
# SlurmctldHost and CommunicationParameters=NoCtldInAddrAny,NoInAddrAny bind to the address of
# gethostname(), which the chroot's /etc/hosts maps to 127.0.0.1 (pitfall 3).
hostname slurmlab

in_chroot /usr/sbin/slurmctld -D -i &
echo "slurmctld $!" >>"$S/pids"
deadline=$((SECONDS + 60))
until in_chroot scontrol ping 2>/dev/null | grep -q 'is UP'; do
  [ $SECONDS -lt $deadline ] || fail "slurmctld not up after 60 s (see $S/log/slurmctld.log)"
  kill -0 "$!" 2>/dev/null || fail "slurmctld exited (see $S/log/slurmctld.log)"
  sleep 0.1
done

# Lets tests prove that a start failing half-way leaves nothing behind.
[ "${SB_TESTENV_INJECT_FAILURE:-}" != after-slurmctld ] || fail "injected failure after slurmctld"

# One slurmd at a time: each (like slurmctld) unlinks and binds /run/slurm/sack.socket at
# start, and two doing it at once make one of them exit ("Unable to bind UNIX socket: Address
# already in use"). A slurmd is past that point once it logs "slurmd version"; one that exited
# before is started again.
for n in ${NODES//,/ }; do
  mkdir -p "$S/spool/$n"
  for attempt in 1 2 3; do
    in_chroot /usr/sbin/slurmd -D -N "$n" &
    pid=$!
    deadline=$((SECONDS + 15))
    until grep -q 'slurmd version' "$S/log/slurmd-$n.log" 2>/dev/null; do
      kill -0 "$pid" 2>/dev/null || break
      [ $SECONDS -lt $deadline ] || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurmd-$n $pid" >>"$S/pids"
      break
    fi
    echo "slurmd $n exited at start (attempt $attempt); starting it again"
    [ "$attempt" -lt 3 ] || fail "slurmd $n does not start (see $S/log/slurmd-$n.log)"
  done
done
want=$(echo "$NODES" | tr ',' '\n' | wc -l)
deadline=$((SECONDS + 60))
until [ "$(in_chroot sinfo -N -h -p batch -t idle -o %N 2>/dev/null | sort -u | wc -l)" = "$want" ]; do
  [ $SECONDS -lt $deadline ] || fail "nodes not idle after 60 s: $(in_chroot sinfo -N -h -o '%N %T' | tr '\n' ' ')"
  sleep 0.1
done

# Tokens: SlurmUser's (external jobs and nodes need it) and an ordinary user's.
lifespan=${SB_JWT_LIFESPAN:-604800}
for user in slurm k8s; do
  tok=$(in_chroot scontrol token username=$user lifespan=$lifespan | sed -n 's/^SLURM_JWT=//p')
  [ -n "$tok" ] || fail "scontrol token username=$user gave no token"
  (umask 077; printf '%s\n' "$tok" >"$S/jwt-$user")
done

SLURM_JWT=daemon env PATH=$PATHS chroot --userspec=slurmrest:slurmrest "$C" \
  /usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/slurmctld,openapi/util "$REST_ADDR" \
  >>"$S/log/slurmrestd.log" 2>&1 &
echo "slurmrestd $!" >>"$S/pids"
tok=$(cat "$S/jwt-slurm")
deadline=$((SECONDS + 30))
until curl -sf -H "X-SLURM-USER-TOKEN: $tok" "http://$REST_ADDR/slurm/v0.0.44/ping/" 2>/dev/null |
  grep -q '"pinged": *"UP"'; do
  [ $SECONDS -lt $deadline ] || fail "slurmrestd not answering after 30 s (see $S/log/slurmrestd.log)"
  sleep 0.1
done
trap - ERR
touch "$S/ready"
# Stay as the parent of the daemons until down.sh stops them.
wait
