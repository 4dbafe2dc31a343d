#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs one Slurm cluster (slurmctld, N slurmd, slurmrestd) from the chroot. up.sh starts it as
# `unshare --mount --uts --fork supervise.sh ...`: every mount below is private to that mount
# namespace, so none outlives the daemons, whatever happens. The per-run directory ($S) is
# bound over the chroot's /etc/slurm, spool and log directories, and /run is a private tmpfs, so
# several clusters share one chroot without seeing each other.
#
# With accounting (up.sh --accounting wrote $S/etc/slurmdbd.conf) MariaDB and slurmdbd start
# first, and slurmctld (which reads the associations at start) only once slurmdbd answers:
# MariaDB on 127.0.0.1 only, its data directory $S/mariadb (at /run/sb-mariadb; its socket in the
# private /run/mysqld) a copy of the database made once per cache (mariadb-install-db, then
# slurmdbd's tables, the cluster `lab`, the account `default` and its users root, slurm and k8s).
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

# mariadb_start / slurmdbd_start: start the daemon (its own pid, not a shell's, in $S/pids: down.sh
# stops them after the other daemons, and stop_child here) and wait until it answers. Their fd 8
# (the template lock) is closed.
mariadb_start() {
  env -i PATH=$PATHS chroot "$C" /usr/sbin/mariadbd "${db_opts[@]}" --bind-address=127.0.0.1 --port="$MARIADB_PORT" \
    --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mariadbd.pid >>"$S/log/mariadb.log" 2>&1 8>&- &
  db_pid=$!
  echo "mariadbd $db_pid" >>"$S/pids"
  local deadline=$((SECONDS + 60))
  until in_chroot mariadb-admin --skip-ssl --socket=/run/mysqld/mysqld.sock ping >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "MariaDB not up after 60 s (see $S/log/mariadb.log)"
    kill -0 "$db_pid" 2>/dev/null || fail "mariadbd exited (see $S/log/mariadb.log)"
    sleep 0.05
  done
  # slurmdbd's user, with this run's password (StoragePass in slurmdbd.conf), and its database.
  in_chroot mariadb --skip-ssl --socket=/run/mysqld/mysqld.sock <"$S/mariadb-init.sql" ||
    fail "creating slurmdbd's MariaDB user failed"
}
slurmdbd_start() {
  env -i PATH=$PATHS chroot "$C" /usr/sbin/slurmdbd -D >>"$S/log/slurmdbd.stdout" 2>&1 8>&- &
  dbd_pid=$!
  echo "slurmdbd $dbd_pid" >>"$S/pids"
  local deadline=$((SECONDS + 60))
  until in_chroot sacctmgr -n list cluster >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "slurmdbd not answering after 60 s (see $S/log/slurmdbd.log)"
    kill -0 "$dbd_pid" 2>/dev/null || fail "slurmdbd exited (see $S/log/slurmdbd.log)"
    sleep 0.05
  done
}
# stop_child PID NAME: SIGTERM, wait until it has exited (it saves and closes its files), and
# strike it from $S/pids (up.sh fails a start when a recorded daemon is gone).
stop_child() {
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  ! kill -0 "$1" 2>/dev/null || fail "$2 did not stop"
  sed -i "/^$2 $1\$/d" "$S/pids"
}

rest_plugins=openapi/slurmctld,openapi/util
if [ -f "$S/etc/slurmdbd.conf" ]; then
  . "$S/accounting.env"
  rest_plugins+=,openapi/slurmdbd
  mkdir -p "$C/run/sb-mariadb" "$C/run/mysqld" "$C/run/slurmdbd"
  mount --bind "$S/mariadb" "$C/run/sb-mariadb"
  in_chroot chown mysql:mysql /run/mysqld
  in_chroot chown slurm:slurm /run/slurmdbd
  # Small and quick rather than durable (the data lives as long as the environment). Slurm
  # refuses innodb_snapshot_isolation (on by default since MariaDB 11.6).
  db_opts=(--no-defaults --datadir=/run/sb-mariadb --user=mysql --skip-name-resolve --skip-log-bin
    --innodb-buffer-pool-size=64M --innodb-log-file-size=16M --innodb-flush-log-at-trx-commit=0
    --innodb-doublewrite=0 --innodb-flush-method=nosync --innodb-lock-wait-timeout=900
    --innodb-snapshot-isolation=OFF --skip-ssl)
  # What everything that ran without accounting needs: the jobs of root, slurm (external jobs,
  # the bridge) and k8s (ordinary jobs) have an association in the account `default`, whose
  # default QOS (inherited by users added later) is normal.
  setup='add cluster lab
add account default Description=default Organization=lab Cluster=lab
add user root,slurm,k8s DefaultAccount=default Account=default Cluster=lab
modify user root set DefaultAccount=default
modify account where name=default cluster=lab set DefaultQOS=normal'
  # Making the database takes seconds (mariadb-install-db ~4 s, slurmdbd's tables and the
  # cluster's ~3 s on 2 busy cores): it is made once per cache, MariaDB version, options and
  # setup (the key), stopped cleanly and kept in SB_ACCOUNTING_DB_CACHE; every start copies it.
  key=$( { cat "$C/$SB_CHROOT_ACCOUNTING_STAMP"; echo "${db_opts[*]}"; echo "$setup"; echo v1; } |
    sha256sum | cut -c1-16)
  template="$SB_ACCOUNTING_DB_CACHE/$key"
  if [ ! -f "$template/.complete" ]; then
    mkdir -p "$SB_ACCOUNTING_DB_CACHE"
    exec 8>"$SB_ACCOUNTING_DB_CACHE/.lock"
    flock 8
  fi
  if [ -f "$template/.complete" ]; then
    exec 8>&-
    cp -a "$template/." "$S/mariadb/"
    rm -f "$S/mariadb/.complete"
    mariadb_start
    slurmdbd_start
  else
    echo "making the accounting database (once per cache): $template"
    in_chroot mariadb-install-db "${db_opts[@]}" --auth-root-authentication-method=socket --skip-test-db \
      >>"$S/log/mariadb-install-db.log" 2>&1 8>&- || fail "mariadb-install-db failed (see $S/log/mariadb-install-db.log)"
    mariadb_start
    slurmdbd_start
    in_chroot sacctmgr -i <<<"$setup" >>"$S/log/sacctmgr.log" 2>&1 ||
      fail "sacctmgr setup failed (see $S/log/sacctmgr.log)"
    stop_child "$dbd_pid" slurmdbd
    stop_child "$db_pid" mariadbd
    # (Other keys' databases stay: another checkout's environment may be copying one now.)
    rm -rf "$template.tmp"
    cp -a "$S/mariadb" "$template.tmp"
    touch "$template.tmp/.complete"
    mv "$template.tmp" "$template"
    exec 8>&-
    mariadb_start
    slurmdbd_start
  fi
fi

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
  /usr/sbin/slurmrestd -a rest_auth/jwt -s "$rest_plugins" "$REST_ADDR" \
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
