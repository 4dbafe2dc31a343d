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
# Usage: up.sh [--run-dir DIR] [--no-slurm] [--no-kube] [--no-kcm] [--nodes N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_root

run_dir="" with_slurm=1 with_kube=1 with_kcm=1 nodes=4
while [ $# -gt 0 ]; do
  case "$1" in
    --run-dir) run_dir=$2; shift 2 ;;
    --no-slurm) with_slurm=0; shift ;;
    --no-kube) with_kube=0; with_kcm=0; shift ;;
    --no-kcm) with_kcm=0; shift ;;
    --nodes) nodes=$2; shift 2 ;;
    -h|--help) sed -n '3,12p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done
[[ "$nodes" =~ ^[1-9][0-9]?$ ]] || die "--nodes wants 1..99, got '$nodes'"
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
  fi
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
  local S="$run_dir/slurm"
  mkdir -p "$S/etc" "$S/state" "$S/spool" "$S/log"
  local ctld_port rest_port first_slurmd last_slurmd
  ctld_port=$(free_port)
  rest_port=$(free_port)
  # slurmd ports must be consecutive (Port=[a-b]); find a free run of $nodes.
  while :; do
    first_slurmd=$(free_port)
    last_slurmd=$((first_slurmd + nodes - 1))
    local p ok=1
    for ((p = first_slurmd; p <= last_slurmd; p++)); do
      if ss -Htan "( sport = :$p )" | grep -q . || [[ "$SB_TAKEN_PORTS" == *" $p "* && $p != "$first_slurmd" ]]; then ok=0; fi
    done
    [ $ok = 1 ] && break
  done
  local node_names
  node_names=$(seq -f 'n%g' 1 "$nodes" | paste -sd,)
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
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
GresTypes=gpu
Licenses=matlab:4
SchedulerType=sched/backfill
SchedulerParameters=sched_min_interval=0
EnforcePartLimits=ALL
MaxJobCount=100000
MaxNodeCount=3000
MinJobAge=60
KillWait=5
InactiveLimit=0
Waittime=0
NodeName=n[1-$nodes] NodeHostname=slurmlab NodeAddr=127.0.0.1 Port=[$first_slurmd-$last_slurmd] CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=16000 Gres=gpu:fake:4 State=UNKNOWN
PartitionName=batch Nodes=n[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
# External nodes (no slurmd) register at run time with Feature=ext: POST /new/node/.
NodeSet=extset Feature=ext
PartitionName=ext Nodes=extset MaxTime=INFINITE State=UP
CONF
  cat >"$S/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=n[1-$nodes] Name=gpu Type=fake File=/var/lib/fakegpu/nvidia[0-3]
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

  log "starting Slurm ($nodes nodes; slurmctld :$ctld_port, slurmd :$first_slurmd-$last_slurmd, slurmrestd :$rest_port)"
  setsid unshare --mount --uts --fork "$here/slurm/supervise.sh" "$SB_CHROOT" "$S" "127.0.0.1:$rest_port" "$node_names" \
    >"$S/log/supervisor.log" 2>&1 </dev/null &
  echo $! >"$S/unshare.pid"
  local deadline=$((SECONDS + 180))
  until [ -f "$S/ready" ]; do
    [ ! -f "$S/failed" ] || die "Slurm did not start: $(cat "$S/failed") (log: $S/log/supervisor.log)"
    kill -0 "$(cat "$S/unshare.pid")" 2>/dev/null || die "Slurm supervisor exited (log: $S/log/supervisor.log)"
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
}

start_kube() {
  local B="$SB_KUBE_DIR/bin"
  [ -f "$SB_KUBE_DIR/$SB_KUBE_STAMP" ] || die "no Kubernetes binaries at $B: run testenv/kube/build.sh"
  command -v etcd >/dev/null || die "etcd missing: run scripts/install-deps.sh"
  local K="$run_dir/kube"
  mkdir -p "$K/etcd" "$K/certs" "$K/log"
  local etcd_port peer_port api_port token
  etcd_port=$(free_port)
  peer_port=$(free_port)
  api_port=$(free_port)
  token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  (umask 077; echo "$token,admin,admin,system:masters" >"$K/tokens.csv"; printf '%s\n' "$token" >"$K/token")
  openssl genrsa -out "$K/sa.key" 2048 2>/dev/null

  log "starting etcd :$etcd_port and kube-apiserver :$api_port"
  setsid etcd --name sb --data-dir "$K/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "sb=http://127.0.0.1:$peer_port" --log-level warn \
    >"$K/log/etcd.log" 2>&1 </dev/null &
  echo "etcd $!" >>"$K/pids"
  setsid "$B/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" --insecure-port 0 \
    --cert-dir "$K/certs" --token-auth-file "$K/tokens.csv" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$K/sa.key" \
    --service-account-signing-key-file "$K/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
    --endpoint-reconciler-type none --allow-privileged \
    --disable-admission-plugins ServiceAccount,TaintNodesByCondition \
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
  cat >"$K/kubeconfig" <<CONF
apiVersion: v1
kind: Config
clusters:
- name: slurm-bridge-testenv
  cluster:
    server: $url
    certificate-authority: $K/certs/apiserver.crt
users:
- name: admin
  user:
    tokenFile: $K/token
contexts:
- name: slurm-bridge-testenv
  context:
    cluster: slurm-bridge-testenv
    user: admin
    namespace: default
current-context: slurm-bridge-testenv
CONF
  chmod 600 "$K/kubeconfig"
  emit KUBECONFIG "$K/kubeconfig"
  emit KUBE_APISERVER_URL "$url"
  emit KUBE_CA_FILE "$K/certs/apiserver.crt"
  emit KUBE_TOKEN_FILE "$K/token"
  emit ETCD_URL "http://127.0.0.1:$etcd_port"

  # The workload APIs the bridge groups pods by (coscheduling PodGroup, LeaderWorkerSet, JobSet):
  # their CRDs only, no controllers. Before kube-controller-manager, whose garbage collector then
  # knows them as owners from its start.
  log "installing the PodGroup, LeaderWorkerSet and JobSet CRDs"
  command -v kubectl >/dev/null || die "kubectl missing: run scripts/install-deps.sh"
  KUBECONFIG="$K/kubeconfig" kubectl apply -f "$here/kube/crds/" >/dev/null ||
    die "applying testenv/kube/crds failed"
  KUBECONFIG="$K/kubeconfig" kubectl wait --for condition=established --timeout=60s \
    -f "$here/kube/crds/" >/dev/null || die "the CRDs of testenv/kube/crds were not established"

  if [ $with_kcm = 1 ]; then
    log "starting kube-controller-manager (job, replicaset, garbagecollector)"
    setsid "$B/kube-controller-manager" --kubeconfig "$K/kubeconfig" --master "$url" \
      --controllers job,replicaset,garbagecollector --leader-elect=false \
      --bind-address 127.0.0.1 --secure-port 0 --port 0 \
      >"$K/log/kube-controller-manager.log" 2>&1 </dev/null &
    echo "kube-controller-manager $!" >>"$K/pids"
    emit KUBE_CONTROLLER_MANAGER 1
  fi
}

# Both halves start side by side: Slurm in the background, kube in the foreground.
slurm_status=0
if [ $with_slurm = 1 ]; then
  (start_slurm) &
  slurm_job=$!
fi
[ $with_kube = 1 ] && start_kube
if [ $with_slurm = 1 ]; then wait $slurm_job || slurm_status=$?; fi
[ $slurm_status = 0 ] || die "Slurm failed to start"
# A process that died after its readiness check fails the start too.
for f in "$run_dir/kube/pids" "$run_dir/slurm/pids"; do
  [ -f "$f" ] || continue
  while read -r name pid; do
    kill -0 "$pid" 2>/dev/null || die "$name exited right after start"
  done <"$f"
done
log "environment up in $((SECONDS - started)) s: $env_file"
echo "$env_file"
