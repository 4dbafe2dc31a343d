#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Workload speed, bridge vs direct (the seed's 141.93 vs 143.83 FPS comparison): the demo's
# stand-in workload (localhost/slurm-bridge-demo:1, a CPU benchmark in busybox awk) runs N times
# scheduled by the bridge (`slurm-bridge all`, Slurm places it) and N times by the default
# kube-scheduler, interleaved (bridge first in odd runs, direct first in even runs), one pod at a
# time, on the same converged node with the same pod spec (image, limits, toleration of the
# bridge's managed-node taint, nodeSelector); only schedulerName differs. Prints the workload's
# rate (rounds/s, mean and stdev) and the time from the pod's create request to its container's
# start (the workload prints its start in ms), with the ratio bridge/direct. A third number, the
# rate per CPU second (the benchmark's own CPU time), tells contention on a busy machine apart
# from a slower workload: other processes lower the rate, not the rate per CPU second. The CPU
# time slurm-bridge and kube-scheduler spent from each pod's create to its end shows what each
# path costs on this machine, where they share the cores with the workload.
# Starts (and stops) its own environment with kubelets (testenv/up.sh --kubelets --nodes 1).
# Usage: scripts/bench-workload.sh [--runs N] [--rounds R] [--binary PATH] [--smoke]
#   --runs N      pairs of runs (default 5), after one warm-up pair that is not counted
#   --rounds R    the workload's DEMO_ROUNDS (default 1000, about 8 s on one core)
#   --binary P    slurm-bridge to run (default: $SB_BINARY, else build/slurm-bridge)
#   --smoke       1 run, 20 rounds, no warm-up: checks that the benchmark works, times nothing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/testenv/lib.sh"
runs=5 rounds=1000 warmup=1 binary=${SB_BINARY:-$root/build/slurm-bridge}
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --smoke) runs=1 rounds=20 warmup=0; shift ;;
    *) die "usage: $0 [--runs N] [--rounds R] [--binary PATH] [--smoke]" ;;
  esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] && [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--runs and --rounds take a positive number"
[ -x "$binary" ] || die "no slurm-bridge at $binary: build it (scripts/build.sh) or pass --binary"
scheduler_bin=$SB_KUBE_DIR/bin/kube-scheduler
[ -x "$scheduler_bin" ] || die "no kube-scheduler at $scheduler_bin: run scripts/prepare-testenv.sh"
node=n1 ns=bench-workload taint_key=slinky.slurm.net/managed-node bridge=slurm-bridge-scheduler

run=$(mktemp -d "${TMPDIR:-/tmp}/sb-bench-workload.XXXXXX")
pids=()
cleanup() {
  local rc=$? p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
  "$root/testenv/down.sh" "$run" >/dev/null 2>&1 || log "testenv/down.sh $run failed"
  if [ $rc = 0 ]; then rm -rf "$run"; else log "logs kept in $run"; fi
  exit $rc
}
trap cleanup EXIT
log "starting an environment with kubelets in $run"
# (up.sh empties the run dir first: its messages stay in memory)
up_err=$("$root/testenv/up.sh" --kubelets --nodes 1 --run-dir "$run" 2>&1 >/dev/null) ||
  { echo "$up_err" >&2; die "testenv/up.sh failed"; }
set -a; . "$run/env"; set +a

cat >"$run/config.yaml" <<YAML
schedulerName: $bridge
slurmRestApi: $SLURM_REST_URL
partition: $SLURM_PARTITION
mcsLabel: kubernetes
YAML
# As the chart's identities (testenv/kube/chart-identities.sh), not the admin (issue #44).
"$binary" all --config "$run/config.yaml" --metrics-bind-address 0 \
  --kubeconfig "${KUBECONFIG_ALL:-$KUBECONFIG}" \
  --health-probe-bind-address 0 >"$run/bridge.log" 2>&1 &
pids+=($!)
# The default scheduler, serving nothing (no port), as the environment's admin.
"$scheduler_bin" --kubeconfig "$KUBECONFIG" --leader-elect=false --secure-port 0 \
  >"$run/kube-scheduler.log" 2>&1 &
pids+=($!)
# Both kinds of pods meet the node as the bridge leaves it: with its managed-node taint.
tainted() {
  [ "$(kubectl get node "$node" -o jsonpath="{.spec.taints[?(@.key==\"$taint_key\")].effect}")" = NoExecute ]
}
wait_for 60 tainted || die "the bridge's node controller did not taint $node (log: $run/bridge.log)"
kubectl create namespace "$ns" >/dev/null

# pod NAME SCHEDULER: the manifest; only the scheduler differs between the two kinds.
pod() {
  jq -cn --arg name "$1" --arg sched "$2" --arg node "$node" --arg key "$taint_key" \
    --arg bridge "$bridge" --arg rounds "$rounds" '{
    apiVersion: "v1", kind: "Pod",
    metadata: {name: $name, annotations: {"slurmjob.slinky.slurm.net/exclusive": "false"}},
    spec: {schedulerName: $sched, restartPolicy: "Never", terminationGracePeriodSeconds: 5,
      nodeSelector: {"kubernetes.io/hostname": $node},
      tolerations: [{key: $key, operator: "Equal", value: $bridge, effect: "NoExecute"}],
      containers: [{name: "workload", image: "localhost/slurm-bridge-demo:1",
        imagePullPolicy: "Never",
        env: [{name: "DEMO_ROUNDS", value: $rounds},
          {name: "NODE_NAME", valueFrom: {fieldRef: {fieldPath: "spec.nodeName"}}}],
        resources: {limits: {cpu: "1", memory: "64Mi"}}}]}}'
}
auth=(--cacert "$KUBE_CA_FILE" -H "Authorization: Bearer $(cat "$KUBE_TOKEN_FILE")")
# Waits (up to 600 s) for pod $1 to end, looking once a second: kubectl's own CPU would
# compete with the workload.
wait_ended() {
  local deadline=$((SECONDS + 600))
  until [[ "$(kubectl -n "$ns" get pod "$1" -o jsonpath='{.status.phase}')" =~ ^(Succeeded|Failed)$ ]]; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 1
  done
}
epoch_of() { date -d "$1" +%s; }
hz=$(getconf CLK_TCK)
# CPU time of process $1 so far, in ms.
cpu_ms() { awk -v hz="$hz" '{ printf "%d\n", ($14 + $15) * 1000 / hz }' "/proc/$1/stat"; }
# measure KIND NAME SCHEDULER: runs one pod to its end; appends "KIND RATE CPU_RATE STARTED_MS
# BRIDGE_CPU_MS KUBE_SCHEDULER_CPU_MS" to results.
measure() {
  local kind=$1 name=$2 sched=$3 t0 logs rate cpu_rate started phase on at b0 k0 b k
  pod "$name" "$sched" >"$run/$name.json"
  b0=$(cpu_ms "${pids[0]}") k0=$(cpu_ms "${pids[1]}")
  t0=$(date +%s%3N)
  curl -sSf "${auth[@]}" -H 'Content-Type: application/json' --data-binary "@$run/$name.json" \
    "$KUBE_APISERVER_URL/api/v1/namespaces/$ns/pods" >/dev/null
  wait_ended "$name" || die "pod $name did not finish (logs in $run)"
  b=$(($(cpu_ms "${pids[0]}") - b0)) k=$(($(cpu_ms "${pids[1]}") - k0))
  phase=$(kubectl -n "$ns" get pod "$name" -o jsonpath='{.status.phase}')
  on=$(kubectl -n "$ns" get pod "$name" -o jsonpath='{.spec.nodeName}')
  logs=$(kubectl -n "$ns" logs "$name")
  echo "$logs" >"$run/$name.log"
  [ "$phase" = Succeeded ] || die "pod $name ended $phase: $logs"
  [ "$on" = "$node" ] || die "pod $name ran on $on, not $node"
  rate=$(awk '$1 == "rate:" { gsub(/[()]/, "", $4); print $4 }' <<<"$logs") # "N rounds/s (N.NN)"
  cpu_rate=$(awk '/^rate per CPU second:/ { print $5 }' <<<"$logs")
  started=$(awk '$1 == "started:" { print $2 }' <<<"$logs")
  if ! [[ "$started" =~ ^[0-9]+$ ]]; then # no ms clock in the container: the status, in seconds
    at=$(kubectl -n "$ns" get pod "$name" -o jsonpath='{.status.containerStatuses[0].state.terminated.startedAt}')
    started=$(($(epoch_of "$at") * 1000))
  fi
  [[ "$rate" =~ ^[0-9.]+$ ]] && [[ "$cpu_rate" =~ ^[0-9.]+$ ]] || die "pod $name printed no rate: $logs"
  kubectl -n "$ns" delete pod "$name" --wait=true >/dev/null
  sleep 2 # the pod's teardown (and, for the bridge, its Slurm job's end) settles before the next
  log "$name: $rate rounds/s ($cpu_rate per CPU second), create -> started $((started - t0)) ms," \
    "CPU slurm-bridge $b ms, kube-scheduler $k ms"
  [ "$kind" = warmup ] || echo "$kind $rate $cpu_rate $((started - t0)) $b $k" >>"$run/results"
}

: >"$run/results"
if [ $warmup = 1 ]; then
  measure warmup warmup-bridge "$bridge"
  measure warmup warmup-direct default-scheduler
fi
for i in $(seq 1 "$runs"); do
  if [ $((i % 2)) = 1 ]; then
    measure bridge "bridge-$i" "$bridge"
    measure direct "direct-$i" default-scheduler
  else
    measure direct "direct-$i" default-scheduler
    measure bridge "bridge-$i" "$bridge"
  fi
done

echo "workload speed, bridge vs direct: $runs run(s) each of DEMO_ROUNDS=$rounds on node $node"
awk '
  function median(kind, a, n, i, j, t) {
    n = 0
    for (i = 1; i <= cnt[kind]; i++) a[++n] = lat[kind, i]
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function stdev(kind, m, i, s) {
    if (cnt[kind] < 2) return 0
    for (i = 1; i <= cnt[kind]; i++) s += (r[kind, i] - m) ^ 2
    return sqrt(s / (cnt[kind] - 1))
  }
  { n = ++cnt[$1]; r[$1, n] = $2; lat[$1, n] = $4; sum[$1] += $2; csum[$1] += $3
    bsum[$1] += $5; ksum[$1] += $6 }
  END {
    mb = sum["bridge"] / cnt["bridge"]; md = sum["direct"] / cnt["direct"]
    sb = stdev("bridge", mb); sd = stdev("direct", md)
    cb = csum["bridge"] / cnt["bridge"]; cd = csum["direct"] / cnt["direct"]
    pb = median("bridge"); pd = median("direct")
    printf "%-32s %10s %10s %14s\n", "metric", "bridge", "direct", "bridge/direct"
    printf "%-32s %10.2f %10.2f %14.3f\n", "rate rounds/s, mean", mb, md, mb / md
    printf "%-32s %10.2f %10.2f %14s\n", "rate rounds/s, stdev", sb, sd, "-"
    printf "%-32s %10.2f %10.2f %14.3f\n", "rate per CPU second, mean", cb, cd, cb / cd
    printf "%-32s %10d %10d %14.2f\n", "create -> started ms, p50", pb, pd, (pd > 0 ? pb / pd : 0)
    printf "%-32s %10d %10d %14s\n", "slurm-bridge CPU ms per run", bsum["bridge"] / cnt["bridge"],
      bsum["direct"] / cnt["direct"], "-"
    printf "%-32s %10d %10d %14s\n", "kube-scheduler CPU ms per run", ksum["bridge"] / cnt["bridge"],
      ksum["direct"] / cnt["direct"], "-"
  }' "$run/results"
