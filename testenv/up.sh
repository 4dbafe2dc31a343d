#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Starts a test environment on loopback: a Slurm 26.05 cluster (slurmctld, 4 slurmd nodes with
# 4 fake GPUs each, slurmrestd with JWT) from the cached chroot, and etcd + kube-apiserver (+
# kube-controller-manager) from the cached build, with the CRDs of testenv/kube/crds (PodGroup,
# LeaderWorkerSet, JobSet). Every port is chosen free at start, so several
# environments can run side by side. Writes RUN_DIR/env, a shell-sourceable file with what
# clients need, and prints its path. On any failure it stops what it started (down.sh).
#
# With --kubelets the nodes are converged: each Slurm node n1..nN also gets a real kubelet and
# its own containerd (testenv/kube/node.sh), registered as the Kubernetes Node of the same
# name, plus one extra Slurm node n(N+1) whose kubelet registers as kube-n(N+1) with the label
# slinky.slurm.net/slurm-nodename=n(N+1). Every Node advertises nvidia.com/gpu as Slurm's GRES
# (4), and the controller manager also runs the node lifecycle and the resourceclaim
# controllers. The nodes run containerd 1.7 with CDI (Debian trixie's, fetched into the cache
# once: ensure_containerd in lib.sh), and with SB_DRA_DRIVER_BINARY set (the ctest fixture
# testenv-kubelets sets it) each runs the test DRA driver (testing/dra-driver: gpu.example.com
# with the node's 4 GPUs, dra.cpu with 8 CPUs; kube/node.sh). Without --kubelets
# there are no kubelets: tests register the Node objects they need (kube/register-nodes.sh).
#
# With --in-cluster (for the bridge running as pods, tests/e2e/chart_incluster_test.sh) pods
# get ServiceAccount tokens and Services route to their endpoints: the ServiceAccount admission
# plugin is on, kube-controller-manager also runs the deployment, serviceaccount,
# serviceaccount-token (token Secrets with the apiserver's CA as ca.crt) and endpoint
# controllers, and the apiserver
# dials webhooks (and aggregated APIs) at a Service's endpoint address instead of its
# ClusterIP, which nothing routes here (--enable-aggregator-routing). Off by default: with the
# plugin on, a pod's namespace needs its `default` ServiceAccount (the controller makes it).
#
# With SB_EPILOG_BINARY set (a slurm-bridge binary; the ctest fixture testenv-kubelets sets it)
# and both Slurm and kube started, every slurmd runs `slurm-bridge epilog` as its Epilog
# (testenv/slurm/epilog-dir.sh; --max-wait SB_EPILOG_MAX_WAIT, default 90s): a job ends only once
# its bridge pods on the node are gone. Its log: RUN_DIR/slurm/log/epilog-<node>.log. Unset:
# no Epilog.
#
# With --external-kubelet (and --kubelets) one more kubelet, kube-x1, runs with no slurmd and no
# Slurm node: a Kubernetes node for the bridge's external-node registration to turn into a
# Slurm external node (KUBE_EXTERNAL_NODES; it is not in KUBE_SLURM_NODES).
#
# With --accounting (issue #29: Slurm's policy) Slurm keeps accounts and decides by them: MariaDB
# (its own data directory, RUN_DIR/slurm/mariadb, on 127.0.0.1 only) and slurmdbd start before
# slurmctld (testenv/slurm/supervise.sh); slurm.conf enforces associations, limits and QOS,
# orders jobs by priority/multifactor (fair share and QOS) and preempts by QOS (preempt/qos,
# PreemptMode=REQUEUE; a QOS may say cancel). The cluster `lab` has the account `default` with the
# users root, slurm and k8s, QOS normal. slurmrestd also serves /slurmdb/. The env file gets
# SB_ACCOUNTING=1, SLURMDBD_PORT and MARIADB_PORT. The database is made once per cache
# (SB_CACHE_DIR/slurm-accounting-db, ~10 s) and copied at every start. Without --accounting
# nothing of this runs and slurm.conf is what it was.
#
# A failed start prints the last lines of every log it wrote. With --tries N (the ctest fixtures
# give 2) a failed start is stopped and made again from nothing, up to N starts in all: the
# environment is the tests' ground, not what they test, and one start in some hundreds fails on
# two loaded cores (the first failure's logs stay in the output).
#
# Usage: up.sh [--run-dir DIR] [--no-slurm] [--no-kube] [--no-kcm] [--nodes N] [--kubelets]
#              [--external-kubelet] [--in-cluster] [--accounting] [--tries N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_root

run_dir="" with_slurm=1 with_kube=1 with_kcm=1 nodes=4 with_kubelets=0 in_cluster=0 with_ext=0
accounting=0 tries=1 args=()
# --tries first (the starts it makes get every other argument as given).
while [ $# -gt 0 ]; do
  if [ "$1" = --tries ]; then tries=${2-}; shift $(($# > 1 ? 2 : 1)); else args+=("$1"); shift; fi
done
set -- ${args[@]+"${args[@]}"}
while [ $# -gt 0 ]; do
  case "$1" in
    --run-dir) run_dir=$2; shift 2 ;;
    --no-slurm) with_slurm=0; shift ;;
    --no-kube) with_kube=0; with_kcm=0; shift ;;
    --no-kcm) with_kcm=0; shift ;;
    --nodes) nodes=$2; shift 2 ;;
    --kubelets) with_kubelets=1; shift ;;
    --external-kubelet) with_ext=1; shift ;;
    --in-cluster) in_cluster=1; shift ;;
    --accounting) accounting=1; shift ;;
    -h|--help) sed -n '3,56p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done
[[ "$nodes" =~ ^[1-9][0-9]?$ ]] || die "--nodes wants 1..99, got '$nodes'"
[[ "$tries" =~ ^[1-9]$ ]] || die "--tries wants 1..9, got '$tries'"
if [ "$tries" -gt 1 ]; then
  for ((try = 1; try <= tries; try++)); do
    "$0" ${args[@]+"${args[@]}"} && exit 0
    [ $try = "$tries" ] || log "start failed (try $try of $tries; its logs are above); starting again"
  done
  die "start failed $tries times"
fi
if [ $with_kubelets = 1 ]; then
  [ $with_slurm = 1 ] && [ $with_kube = 1 ] && [ $with_kcm = 1 ] || die "--kubelets needs Slurm, kube and the controller manager"
fi
if [ $in_cluster = 1 ]; then
  [ $with_kube = 1 ] && [ $with_kcm = 1 ] || die "--in-cluster needs kube and the controller manager"
fi
[ $accounting = 0 ] || [ $with_slurm = 1 ] || die "--accounting needs Slurm"
# Every Slurm node has this many (fake) GPUs; a kubelet's Node advertises as many.
gpus_per_node=4
# Slurm's nodes, and with --kubelets the Kubernetes name of each (NAME=SLURM_NAME).
slurm_count=$((nodes + with_kubelets))
kube_nodes=()
if [ $with_kubelets = 1 ]; then
  for ((i = 1; i <= nodes; i++)); do kube_nodes+=("n$i=n$i"); done
  kube_nodes+=("kube-n$slurm_count=n$slurm_count")
fi
# Every kubelet (NAME=SLURM_NAME): the converged ones, and kube-x1 (no slurmd) when asked.
ext_nodes=()
[ $with_ext = 0 ] || { [ $with_kubelets = 1 ] || die "--external-kubelet needs --kubelets"; ext_nodes=(kube-x1); }
all_kubelets=("${kube_nodes[@]}")
for x in "${ext_nodes[@]}"; do all_kubelets+=("$x=$x"); done
if [ -z "$run_dir" ]; then
  run_dir=$(mktemp -d "${TMPDIR:-/tmp}/slurm-bridge-env.XXXXXX")
else
  # A stale environment in the same directory is stopped first.
  [ -d "$run_dir" ] && "$here/down.sh" "$run_dir" >/dev/null 2>&1 || true
  rm -rf "$run_dir"
  mkdir -p "$run_dir"
fi
run_dir=$(cd "$run_dir" && pwd)
started=$SECONDS
cleanup_on_failure() {
  local rc=$?
  if [ $rc != 0 ]; then
    log "start failed; stopping what was started (logs stay in $run_dir)"
    "$here/down.sh" --keep-logs "$run_dir" >&2 || true
    dump_logs
  fi
}
# dump_logs: the last lines of every log this start wrote, on stderr, so that a failed start says
# why where only its output is kept (ctest --output-on-failure, a CI excerpt).
dump_logs() {
  local f
  while IFS= read -r f; do
    [ -s "$f" ] || continue
    printf -- '--- %s (last 12 lines)\n' "${f#"$run_dir"/}" >&2
    tail -n 12 "$f" >&2 || true
  done < <(find "$run_dir" -name '*.log' -o -name '*.stdout' -o -name failed 2>/dev/null | sort)
}
trap cleanup_on_failure EXIT
env_file="$run_dir/env"
: >"$env_file"
# KEY=value lines that both a shell and a plain KEY=VALUE reader take: values are written bare,
# so they must not need quoting.
emit() {
  [[ "$2" =~ ^[A-Za-z0-9_./:,@+=-]*$ ]] || die "env value for $1 needs quoting: '$2' (choose a plainer --run-dir)"
  printf '%s=%s\n' "$1" "$2" >>"$env_file"
}
emit SB_ENV_DIR "$run_dir"

start_slurm() {
  [ -f "$SB_CHROOT/$SB_CHROOT_STAMP" ] || die "no Slurm chroot at $SB_CHROOT: run testenv/slurm/build-chroot.sh"
  [ $accounting = 0 ] || [ -f "$SB_CHROOT/$SB_CHROOT_ACCOUNTING_STAMP" ] ||
    die "no slurmdbd and MariaDB in the Slurm chroot at $SB_CHROOT: run testenv/slurm/build-chroot.sh"
  local S="$run_dir/slurm"
  mkdir -p "$S/etc" "$S/state" "$S/spool" "$S/log"
  local ctld_port rest_port first_slurmd last_slurmd
  ctld_port=$(free_port)
  rest_port=$(free_port)
  # slurmd ports must be consecutive (Port=[a-b]); find a free run of $slurm_count.
  while :; do
    first_slurmd=$(free_port)
    last_slurmd=$((first_slurmd + slurm_count - 1))
    local p ok=1
    for ((p = first_slurmd + 1; p <= last_slurmd; p++)); do
      reserve_port "$p" || { ok=0; break; }
    done
    [ $ok = 1 ] && break
  done
  local node_names
  node_names=$(seq -f 'n%g' 1 "$slurm_count" | paste -sd,)
  local epilog_conf="# No Epilog (SB_EPILOG_BINARY unset)"
  if [ $with_epilog = 1 ]; then
    "$here/slurm/epilog-dir.sh" "$SB_EPILOG_BINARY" "$S/epilog" "${SB_EPILOG_MAX_WAIT:-90s}" ||
      die "making the Epilog's directory failed"
    epilog_conf="Epilog=/run/sb-epilog/epilog.sh"
  fi
  # Accounting and policy (--accounting); without it exactly the lines of before.
  local dbd_port="" mariadb_port="" accounting_conf
  local sched_params=sched_min_interval=0,bf_interval=2
  accounting_conf="JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none"
  if [ $accounting = 1 ]; then
    dbd_port=$(free_port)
    mariadb_port=$(free_port)
    # A requeued (preempted) batch job may start again 5 s later (default: 120 s, cred_expire).
    sched_params=sched_min_interval=0,bf_interval=1,bf_continue,requeue_delay=5
    # Fair share and QOS decide the order (age, size, partition do not); usage is folded in every
    # minute (PriorityCalcPeriod's least) and halves every 5 minutes, so a test's own usage
    # counts and an earlier test's fades. preempt/qos with REQUEUE (a QOS's own PreemptMode, e.g.
    # cancel, wins for the jobs of that QOS); never GANG or SUSPEND; no exempt time.
    accounting_conf="JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=slurmlab
AccountingStoragePort=$dbd_port
AccountingStorageEnforce=associations,limits,qos,safe
AccountingStorageTRES=gres/gpu
PriorityType=priority/multifactor
PriorityWeightFairshare=100000
PriorityWeightQOS=10000
PriorityWeightAge=0
PriorityWeightJobSize=0
PriorityWeightPartition=0
PriorityWeightAssoc=0
PriorityCalcPeriod=1
PriorityDecayHalfLife=00:05:00
PreemptType=preempt/qos
PreemptMode=REQUEUE
PreemptExemptTime=00:00:00
JobRequeue=1"
  fi
  cat >"$S/etc/slurm.conf" <<CONF
# Written by testenv/up.sh for $run_dir
ClusterName=lab
MailProg=/bin/true
SlurmctldHost=slurmlab(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/slurm
CredType=cred/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
$accounting_conf
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
GresTypes=gpu
Licenses=matlab:4
SchedulerType=sched/backfill
# Heterogeneous jobs are started by the backfill scheduler only: every 2 s here (default 30).
SchedulerParameters=$sched_params
EnforcePartLimits=ALL
# Time-only sharing (issue #44, as upstream's fix of its #53): the bridge's non-exclusive jobs
# ask for --exclusive=mcs with its MCS label, so a node holds either pods or native jobs.
MCSPlugin=mcs/label
MCSParameters=ondemand,ondemandselect
MaxJobCount=100000
MaxNodeCount=3000
MinJobAge=60
KillWait=5
InactiveLimit=0
Waittime=0
$epilog_conf
NodeName=n[1-$slurm_count] NodeHostname=slurmlab NodeAddr=127.0.0.1 Port=[$first_slurmd-$last_slurmd] CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:fake:$gpus_per_node State=UNKNOWN
PartitionName=batch Nodes=n[1-$slurm_count] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
# External nodes (no slurmd) register at run time with Feature=ext: POST /new/node/.
NodeSet=extset Feature=ext
PartitionName=ext Nodes=extset MaxTime=INFINITE State=UP
CONF
  cat >"$S/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=n[1-$slurm_count] Name=gpu Type=fake File=/var/lib/fakegpu/nvidia[0-$((gpus_per_node - 1))]
CONF
  echo "CgroupPlugin=disabled" >"$S/etc/cgroup.conf"
  head -c 1024 /dev/urandom >"$S/etc/slurm.key"
  head -c 32 /dev/urandom >"$S/etc/jwt_hs256.key"
  local uid gid
  uid=$(awk -F: '$1=="slurm"{print $3}' "$SB_CHROOT/etc/passwd")
  gid=$(awk -F: '$1=="slurm"{print $4}' "$SB_CHROOT/etc/passwd")
  [ -n "$uid" ] || die "no slurm user in the chroot"
  chown "$uid:$gid" "$S/etc/slurm.key" "$S/etc/jwt_hs256.key" "$S/state" "$S/log"
  chmod 600 "$S/etc/slurm.key" "$S/etc/jwt_hs256.key"
  # A root-readable copy of the JWT key for clients that mint their own tokens.
  install -m 600 "$S/etc/jwt_hs256.key" "$S/jwt_hs256.key"
  if [ $accounting = 1 ]; then
    # slurmdbd (as SlurmUser, the same keys: auth/slurm, and JWT for slurmrestd's /slurmdb/) on
    # 127.0.0.1, and MariaDB's user for it (supervise.sh creates it from mariadb-init.sql).
    local db_pass
    db_pass=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
    cat >"$S/etc/slurmdbd.conf" <<CONF
# Written by testenv/up.sh for $run_dir
AuthType=auth/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt_hs256.key
DbdHost=slurmlab
DbdAddr=127.0.0.1
DbdPort=$dbd_port
CommunicationParameters=NoInAddrAny
SlurmUser=slurm
DebugLevel=info
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$mariadb_port
StorageUser=slurm
StoragePass=$db_pass
StorageLoc=slurm_acct_db
CONF
    chown "$uid:$gid" "$S/etc/slurmdbd.conf"
    chmod 600 "$S/etc/slurmdbd.conf"
    # Idempotent: supervise.sh runs it on a new MariaDB and on a copy of the cached one. The
    # database exists before slurmdbd first connects: when slurmdbd has to create it, it connects
    # again on the same handle, and with sid's libmariadb 3.4 every query on that connection then
    # fails ("Number of columns in result (=1) set execeeds maxmimum allowed number of columns
    # (=0)", error 5027) and slurmdbd exits.
    (umask 077
      printf "CREATE DATABASE IF NOT EXISTS slurm_acct_db;\n"
      printf "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1';\n"
      printf "ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '%s';\n" "$db_pass"
      printf "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';\n"
    ) >"$S/mariadb-init.sql"
    chmod 600 "$S/mariadb-init.sql"
    # For supervise.sh (sourced there).
    printf 'MARIADB_PORT=%s\nSB_ACCOUNTING_DB_CACHE=%q\nSB_CHROOT_ACCOUNTING_STAMP=%q\n' "$mariadb_port" \
      "$SB_CACHE_DIR/slurm-accounting-db" "$SB_CHROOT_ACCOUNTING_STAMP" >"$S/accounting.env"
    mkdir -p "$S/mariadb"
  fi

  local with_dbd=""
  [ $accounting = 0 ] || with_dbd=", MariaDB :$mariadb_port, slurmdbd :$dbd_port"
  log "starting Slurm ($slurm_count nodes; slurmctld :$ctld_port, slurmd :$first_slurmd-$last_slurmd, slurmrestd :$rest_port$with_dbd)"
  setsid unshare --mount --uts --fork "$here/slurm/supervise.sh" "$SB_CHROOT" "$S" "127.0.0.1:$rest_port" "$node_names" \
    >"$S/log/supervisor.log" 2>&1 </dev/null &
  echo $! >"$S/unshare.pid"
  local deadline=$((SECONDS + 180))
  until [ -f "$S/ready" ]; do
    [ ! -f "$S/failed" ] || die "Slurm did not start: $(cat "$S/failed") (log: $S/log/supervisor.log)"
    if ! kill -0 "$(cat "$S/unshare.pid")" 2>/dev/null; then
      # It writes its reason and then exits: both may have happened since the check above.
      [ ! -f "$S/failed" ] || die "Slurm did not start: $(cat "$S/failed") (log: $S/log/supervisor.log)"
      die "Slurm supervisor exited (log: $S/log/supervisor.log)"
    fi
    [ $SECONDS -lt $deadline ] || die "Slurm not ready after 180 s"
    sleep 0.1
  done
  emit SLURM_REST_URL "http://127.0.0.1:$rest_port"
  emit SLURM_REST_API v0.0.44
  emit SLURM_JWT_FILE "$S/jwt-slurm"
  emit SLURM_JWT_USER slurm
  emit SLURM_USER_JWT_FILE "$S/jwt-k8s"
  emit SLURM_USER_NAME k8s
  emit SLURM_JWT_KEY_FILE "$S/jwt_hs256.key"
  emit SLURM_NODES "$node_names"
  emit SLURM_PARTITION batch
  emit SLURM_EXT_PARTITION ext
  emit SLURM_CTLD_PORT "$ctld_port"
  emit SLURM_CHROOT "$SB_CHROOT"
  if [ $accounting = 1 ]; then
    emit SB_ACCOUNTING 1
    emit SLURMDBD_PORT "$dbd_port"
    emit MARIADB_PORT "$mariadb_port"
  fi
}

start_kube() {
  local B="$SB_KUBE_DIR/bin"
  [ -f "$SB_KUBE_DIR/$SB_KUBE_STAMP" ] || die "no Kubernetes binaries at $B: run testenv/kube/build.sh"
  [ -x "$SB_ETCD" ] || die "no etcd at $SB_ETCD: run testenv/kube/build.sh"
  local K="$run_dir/kube"
  mkdir -p "$K/etcd" "$K/certs" "$K/log"
  local etcd_port peer_port api_port token
  etcd_port=$(free_port)
  peer_port=$(free_port)
  api_port=$(free_port)
  mktoken() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
  token=$(mktoken)
  (umask 077; echo "$token,admin,admin,system:masters" >"$K/tokens.csv"; printf '%s\n' "$token" >"$K/token")
  openssl genrsa -out "$K/sa.key" 2048 2>/dev/null
  # With kubelets: a token per node (system:node:NAME, authorised by the Node authorizer and
  # NodeRestriction as in production), and the apiserver runs in its own mount namespace whose
  # /etc/hosts maps every node name to 127.0.0.1. It reaches a kubelet (logs, exec) at the Node's
  # Hostname address, because a kubelet refuses a loopback InternalIP.
  local authz=(--authorization-mode RBAC) wrap=() spec kname
  local disabled_plugins=ServiceAccount,TaintNodesByCondition routing=()
  if [ $in_cluster = 1 ]; then
    disabled_plugins=TaintNodesByCondition
    routing=(--enable-aggregator-routing=true)
  fi
  if [ $with_kubelets = 1 ]; then
    echo "127.0.0.1 localhost" >"$K/hosts"
    for spec in "${all_kubelets[@]}"; do
      kname=${spec%%=*}
      (umask 077; mktoken >"$K/token.$kname")
      echo "$(cat "$K/token.$kname"),system:node:$kname,node-$kname,system:nodes" >>"$K/tokens.csv"
      echo "127.0.0.1 $kname" >>"$K/hosts"
    done
    authz=(--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction
      --kubelet-preferred-address-types Hostname,InternalIP)
    wrap=(unshare --mount --propagation private -- sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$K/hosts")
  fi

  # The Workload API (scheduling.k8s.io/v1alpha2 PodGroups, the pods' spec.schedulingGroup) is
  # alpha in 1.36 and unknown to 1.34, which refuses a --runtime-config of a group it lacks.
  local api_extra=()
  case "$SB_KUBE_VERSION" in
    1.34.*) ;;
    *) api_extra=(--runtime-config scheduling.k8s.io/v1alpha2=true --feature-gates GenericWorkload=true) ;;
  esac
  log "starting etcd :$etcd_port and kube-apiserver :$api_port (v$SB_KUBE_VERSION)"
  setsid "$SB_ETCD" --name sb --data-dir "$K/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "sb=http://127.0.0.1:$peer_port" --log-level warn \
    >"$K/log/etcd.log" 2>&1 </dev/null &
  echo "etcd $!" >>"$K/pids"
  setsid "${wrap[@]}" "$B/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --cert-dir "$K/certs" --token-auth-file "$K/tokens.csv" "${authz[@]}" \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$K/sa.key" \
    --service-account-signing-key-file "$K/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
    --endpoint-reconciler-type none --allow-privileged \
    --disable-admission-plugins "$disabled_plugins" "${routing[@]}" "${api_extra[@]}" \
    >"$K/log/kube-apiserver.log" 2>&1 </dev/null &
  echo "kube-apiserver $!" >>"$K/pids"
  local url="https://127.0.0.1:$api_port"
  local deadline=$((SECONDS + 120))
  until [ -f "$K/certs/apiserver.crt" ] &&
    curl -sf --cacert "$K/certs/apiserver.crt" -H "Authorization: Bearer $token" "$url/readyz" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "kube-apiserver not ready after 120 s (log: $K/log/kube-apiserver.log)"
    while read -r name pid; do
      kill -0 "$pid" 2>/dev/null || die "$name exited (log: $K/log/$name.log)"
    done <"$K/pids"
    sleep 0.2
  done
  # kubeconfig FILE USER TOKEN_FILE
  kubeconfig() {
    cat >"$1" <<CONF
apiVersion: v1
kind: Config
clusters:
- name: slurm-bridge-testenv
  cluster:
    server: $url
    certificate-authority: $K/certs/apiserver.crt
users:
- name: $2
  user:
    tokenFile: $3
contexts:
- name: slurm-bridge-testenv
  context:
    cluster: slurm-bridge-testenv
    user: $2
    namespace: default
current-context: slurm-bridge-testenv
CONF
    chmod 600 "$1"
  }
  kubeconfig "$K/kubeconfig" admin "$K/token"
  for spec in "${all_kubelets[@]}"; do
    kname=${spec%%=*}
    kubeconfig "$K/kubeconfig.$kname" "system:node:$kname" "$K/token.$kname"
  done
  emit KUBECONFIG "$K/kubeconfig"
  emit KUBE_APISERVER_URL "$url"
  emit KUBE_CA_FILE "$K/certs/apiserver.crt"
  emit KUBE_TOKEN_FILE "$K/token"
  emit ETCD_URL "http://127.0.0.1:$etcd_port"
  emit KUBE_BIN_DIR "$B"
  emit KUBE_VERSION "$SB_KUBE_VERSION"

  # The workload APIs the bridge groups pods by (coscheduling PodGroup, LeaderWorkerSet, JobSet):
  # their CRDs only, no controllers. Before kube-controller-manager, whose garbage collector then
  # knows them as owners from its start.
  log "installing the PodGroup, LeaderWorkerSet and JobSet CRDs"
  KUBECONFIG="$K/kubeconfig" "$B/kubectl" apply -f "$here/kube/crds/" >/dev/null ||
    die "applying testenv/kube/crds failed"
  KUBECONFIG="$K/kubeconfig" "$B/kubectl" wait --for condition=established --timeout=60s \
    -f "$here/kube/crds/" >/dev/null || die "the CRDs of testenv/kube/crds were not established"

  # The chart's ServiceAccounts and RBAC, applied as helm renders them, and a kubeconfig with a
  # token of each (KUBECONFIG_SCHEDULER, _CONTROLLERS, _ADMISSION, _ALL): the e2e tests run the
  # bridge with these, never with the admin's (issue #44). Not with --in-cluster, where the
  # tests install the chart itself with Helm (its objects would collide with these).
  if [ $in_cluster = 0 ]; then
    log "the chart's ServiceAccounts and RBAC (testenv/kube/chart-identities.sh)"
    "$here/kube/chart-identities.sh" "$run_dir" >"$K/chart-identities.env" ||
      die "the chart's identities failed (testenv/kube/chart-identities.sh)"
    cat "$K/chart-identities.env" >>"$env_file"
  fi

  if [ $with_kcm = 1 ]; then
    # The node lifecycle controller only with kubelets: it would mark the registered Nodes of
    # the other mode, which no kubelet heartbeats, NotReady.
    # The controllers by their names since 1.26 (`*-controller`; the short 1.20 names are refused).
    # The disruption controller keeps PodDisruptionBudgets' status, which evictions read.
    # persistentvolume-binder-controller: claims bind to their volumes (the volume e2e tests).
    local controllers=job-controller,replicaset-controller,garbage-collector-controller
    controllers+=,persistentvolume-binder-controller
    controllers+=,disruption-controller
    # resourceclaim-controller: a pod's claims from its ResourceClaimTemplates, and claims
    # released when their pods are gone (DRA on the kubelets).
    [ $with_kubelets = 0 ] || controllers+=,node-lifecycle-controller,resourceclaim-controller
    local sa_args=()
    if [ $in_cluster = 1 ]; then
      # In-cluster pods mount a projected token with ConfigMap kube-root-ca.crt (and, in this
      # fork, openshift-service-ca.crt): their publishers run too.
      controllers+=,deployment-controller,serviceaccount-controller,serviceaccount-token-controller
      controllers+=,endpoints-controller,endpointslice-controller,root-ca-certificate-publisher-controller
      controllers+=,service-ca-certificate-publisher-controller
      sa_args=(--service-account-private-key-file "$K/sa.key" --root-ca-file "$K/certs/apiserver.crt")
    fi
    log "starting kube-controller-manager ($controllers)"
    setsid "$B/kube-controller-manager" --kubeconfig "$K/kubeconfig" --master "$url" \
      --controllers "$controllers" --leader-elect=false "${sa_args[@]}" \
      --bind-address 127.0.0.1 --secure-port 0 \
      >"$K/log/kube-controller-manager.log" 2>&1 </dev/null &
    echo "kube-controller-manager $!" >>"$K/pids"
    emit KUBE_CONTROLLER_MANAGER 1
    [ $in_cluster = 0 ] || emit KUBE_IN_CLUSTER 1
  fi
}

# The Epilog (slurm-bridge epilog) needs both halves.
with_epilog=0
if [ -n "${SB_EPILOG_BINARY:-}" ] && [ $with_slurm = 1 ] && [ $with_kube = 1 ]; then
  [ -x "$SB_EPILOG_BINARY" ] || die "SB_EPILOG_BINARY=$SB_EPILOG_BINARY: no such executable (build slurm-bridge first)"
  with_epilog=1
fi

# Both halves start side by side: Slurm in the background, kube in the foreground.
slurm_status=0
if [ $with_slurm = 1 ]; then
  (start_slurm) &
  slurm_job=$!
fi
[ $with_kube = 1 ] && start_kube
if [ $with_slurm = 1 ]; then wait $slurm_job || slurm_status=$?; fi
[ $slurm_status = 0 ] || die "Slurm failed to start"
# The Epilog's credentials: a token of the chart's epilog ServiceAccount (list pods, get nodes:
# testenv/kube/chart-identities.sh), else the admin's; relative paths resolve beside the
# kubeconfig.
if [ $with_epilog = 1 ]; then
  E="$run_dir/slurm/epilog" K="$run_dir/kube"
  epilog_token=$K/token
  [ ! -s "$K/token.slurm-bridge-epilog" ] || epilog_token=$K/token.slurm-bridge-epilog
  install -m 600 "$epilog_token" "$E/token"
  install -m 644 "$K/certs/apiserver.crt" "$E/ca.crt"
  sed -e "s|certificate-authority: .*|certificate-authority: ca.crt|" \
    -e "s|tokenFile: .*|tokenFile: token|" "$K/kubeconfig" >"$E/kubeconfig.tmp"
  chmod 600 "$E/kubeconfig.tmp"
  mv "$E/kubeconfig.tmp" "$E/kubeconfig"
  emit SB_EPILOG 1
  emit SB_EPILOG_LOG_DIR "$run_dir/slurm/log"
fi
# A process that died after its readiness check fails the start too.
for f in "$run_dir/kube/pids" "$run_dir/slurm/pids"; do
  [ -f "$f" ] || continue
  while read -r name pid; do
    kill -0 "$pid" 2>/dev/null || die "$name exited right after start"
  done <"$f"
done

# The converged nodes: all start side by side, then each must be Ready with its GPUs.
if [ $with_kubelets = 1 ]; then
  "$here/kube/build-images.sh" >/dev/null 2>&1 || die "building the node images failed: run testenv/kube/build-images.sh"
  # containerd 1.7 with CDI; without it (no archive reachable) the machine's 1.6, and no DRA.
  ensure_containerd || log "warning: no containerd $SB_CONTAINERD_SERIES in the cache: the nodes run the machine's containerd, without CDI"
  if [ -n "${SB_DRA_DRIVER_BINARY:-}" ]; then
    [ -x "$SB_DRA_DRIVER_BINARY" ] || die "SB_DRA_DRIVER_BINARY=$SB_DRA_DRIVER_BINARY: no such executable"
    [ -f "$SB_CONTAINERD_DIR/$SB_CONTAINERD_STAMP" ] || die "the DRA driver needs containerd $SB_CONTAINERD_SERIES (CDI)"
  fi
  kubelets_started=$SECONDS
  log "starting kubelets: ${all_kubelets[*]}"
  knames=()
  for spec in "${all_kubelets[@]}"; do
    knames+=("${spec%%=*}")
    gpus=$gpus_per_node
    for x in "${ext_nodes[@]}"; do [ "$x" != "${spec%%=*}" ] || gpus=0; done
    "$here/kube/node.sh" up "$run_dir" "${spec%%=*}" "${spec#*=}" "$gpus"
  done
  readies=()
  for k in "${knames[@]}"; do
    "$here/kube/node.sh" ready "$run_dir" "$k" &
    readies+=($!)
  done
  for r in "${readies[@]}"; do wait "$r" || die "a node did not become Ready (logs: $run_dir/nodes/*/log)"; done
  log "kubelets Ready in $((SECONDS - kubelets_started)) s"
  emit KUBE_NODES "$(IFS=,; echo "${knames[*]}")"
  emit KUBE_SLURM_NODES "$(IFS=,; echo "${kube_nodes[*]}")"
  emit KUBE_EXTERNAL_NODES "$(IFS=,; echo "${ext_nodes[*]}")"
  emit SB_KUBELETS 1
  [ ! -f "$SB_CONTAINERD_DIR/$SB_CONTAINERD_STAMP" ] || emit SB_CDI 1
  [ -z "${SB_DRA_DRIVER_BINARY:-}" ] || emit SB_DRA_DRIVER "$SB_DRA_DRIVER_BINARY"
fi
log "environment up in $((SECONDS - started)) s: $env_file"
echo "$env_file"
