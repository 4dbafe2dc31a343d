#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The benchmark of issue #13 in one command: kube-scheduler (the environment's, 1.36.2), Slurm alone and
# `slurm-bridge scheduler` side by side, in an environment of its own (testenv/up.sh, no kubelets)
# with N Slurm *external* nodes (State=External, 64 CPUs, partition `ext` through
# NodeSet Feature=ext) registered as Kubernetes Nodes of the same names (Ready, 64 CPUs). Prints
# one table: metric | kube-scheduler | Slurm alone | bridge | ratio (bench/bench.py says how each
# figure is taken).
#
#   default  100 nodes. Latency: 100 pods (jobs), one every 200 ms. Burst: 2,000 one-CPU
#            non-exclusive pods created while no scheduler runs, then the scheduler started.
#            6-10 minutes on 2 busy cores.
#   --smoke  5 nodes, 5 latency pods, 20 burst pods: checks that the benchmark runs (ctest
#            e2e.bench.scheduler); times nothing worth reading.
#   --scale  1,000 nodes, 10,000 pods in waves of --wave (2,000) through the bridge alone; then
#            every pod bound exactly once, RSS, and slurmrestd requests/s while --waiting (1,000)
#            pods wait. About 4 minutes; the 50,000-pod figure of docs/benchmarks.md is
#            `--scale --nodes 5000 --pods 50000 --wave 5000 --waiting 5000`.
#   --bridge-only  the bridge's latency and burst phases alone, a line each, no table: for
#            trying a change (about 2 minutes); --latency-runs N runs the latency phase N times
#            (a bridge each) and prints each run's overhead p50/p99.
#   The bridge's pods are created through its mutating webhook (`slurm-bridge admission`,
#   registered for the benchmark's bridge namespaces only), as the chart installs it: it sets
#   their finalizer and toleration at CREATE. --no-webhook leaves it out (the bridge then patches
#   them after the submit).
#   --starvation  no starvation (bench/starvation.py): a churn of --churn-rate single pods/s
#            (default 200) for --churn-seconds (20), first with nothing waiting, then with
#            --gangs gangs (20) that cannot fit waiting in Slurm's queue; bind rate and p99
#            latency side by side (goal: rate ratio >= 0.9, p99 ratio <= 2.0). 3-6 minutes.
#            Adds bf_min_age_reserve=86400 to SchedulerParameters: a job that cannot start then
#            no longer stops Slurm's main scheduler from starting the jobs queued after it.
#   --busy   a busy HPC cluster (bench/busy.py, issue #46 goal 1): --held (20,000) held native
#            jobs of another user in Slurm's queue and one short native job every 2 s, then
#            slurmctld + slurmrestd CPU in a --window (120 s) without the bridge, with
#            `slurm-bridge all` running (4 pods bound on 4 external nodes) and without it again;
#            the bridge's requests/min by kind and bytes/min read from slurmrestd (a counting
#            proxy). Goal: CPU ratio <= 1.10. About 10 minutes; with --smoke 200 held jobs and
#            20 s windows (ctest e2e.bench.busy).
#
# Slurm: up.sh's slurm.conf with SchedulerParameters replaced (scontrol reconfigure) by
# `sched_min_interval=0,batch_sched_delay=0,default_queue_depth=2000`, the same for every phase.
# Measured here with Slurm alone (100 external nodes, 2 busy cores): up.sh's
# `sched_min_interval=0` alone gave submit -> RUNNING p50 1.25 s, p99 2.9 s on a quiet cluster
# (batch_sched_delay defaults to 3 s) and 51 s for a burst of 2,000 jobs (default_queue_depth=100
# jobs per pass); batch_sched_delay=0 halves the first (0.6 s, 1.1 s) and default_queue_depth=2000
# makes the second 5 s. --sched-params LIST sets another list (`sched_min_interval=0` for up.sh's).
#
# Usage: scripts/bench.sh [--smoke|--scale|--bridge-only|--starvation|--busy] [--binary PATH]
#                         [--nodes N] [--pods N] [--latency-pods N] [--sched-params LIST]
#                         [--max-concurrent-submits N] [--bridge-config 'KEY: VALUE'] [--keep]
#                         [--churn-rate N] [--churn-seconds N] [--gangs N] (--starvation's)
#                         [--wave N] [--waiting N] (--scale's) [--latency-runs N] [--no-webhook]
#                         [--held N] [--window S] [--settle S] [--no-again] (--busy's)
#   --binary P   slurm-bridge to run (default: $SB_BINARY, else build/slurm-bridge, built here)
#   --max-concurrent-submits N   the bridge's maxConcurrentSubmits (default 16, its own default)
#   --bridge-config L  a line added to the bridge's config.yaml (repeatable), e.g. 'jobListInterval: 10m'
#   --keep       keep the run directory (logs of the schedulers and daemons) even on success
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/testenv/lib.sh"
mode=default nodes=100 pods=2000 latency=100 binary=${SB_BINARY:-} keep=0 submits=16
wave=2000 waiting=1000 busy=0 nodes_set=0 held=20000
sched_params=sched_min_interval=0,batch_sched_delay=0,default_queue_depth=2000
extra=() bridge_cfg=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) mode=smoke nodes=5 pods=20 latency=5 extra+=(--forget-timeout 0); shift ;;
    --scale) mode=scale nodes=1000 pods=10000; shift ;;
    --bridge-only) mode=bridge; shift ;;
    --starvation) mode=starvation; shift ;;
    --busy) busy=1; shift ;;
    --held) held=$2; shift 2 ;;
    --window | --settle) extra+=("$1" "$2"); shift 2 ;;
    --no-again) extra+=("$1"); shift ;;
    --churn-rate | --churn-seconds | --gangs) extra+=("$1" "$2"); shift 2 ;;
    --latency-runs) extra+=("$1" "$2"); shift 2 ;;
    --wave) wave=$2; extra+=("$1" "$2"); shift 2 ;;
    --waiting) waiting=$2; extra+=("$1" "$2"); shift 2 ;;
    --no-webhook) extra+=("$1"); shift ;;
    --binary) binary=$2; shift 2 ;;
    --nodes) nodes=$2 nodes_set=1; shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --latency-pods) latency=$2; shift 2 ;;
    --sched-params) sched_params=$2; shift 2 ;;
    --max-concurrent-submits) submits=$2; shift 2 ;;
    --bridge-config) extra+=(--bridge-config "$2") bridge_cfg+="; $2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '3,58p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
if [ $busy = 1 ]; then
  # --smoke --busy: small enough for CI; it times nothing worth reading.
  [ "$mode" = smoke ] && { held=200; extra+=(--window 20 --settle 5); }
  [ $nodes_set = 1 ] || nodes=4
  mode=busy
fi
[[ "$held" =~ ^[0-9]+$ ]] || die "--held takes a number"
for v in "$nodes" "$pods" "$latency" "$submits"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "--nodes, --pods and --latency-pods take a positive number"
done
if [ -z "$binary" ]; then
  binary=$root/build/slurm-bridge
  if [ ! -x "$binary" ]; then
    "$root/scripts/build.sh" >/dev/null
  fi
  cmake --build "$root/build" --target slurm-bridge >/dev/null
fi
[ -x "$binary" ] || die "no slurm-bridge at $binary"
kube_scheduler=$SB_KUBE_DIR/bin/kube-scheduler
[ -x "$kube_scheduler" ] || die "no kube-scheduler at $kube_scheduler: run scripts/prepare-testenv.sh"

run=$(mktemp -d "${TMPDIR:-/tmp}/sb-bench.XXXXXX")
cleanup() {
  local rc=$?
  "$root/testenv/down.sh" "$run/env" >/dev/null 2>&1 || log "testenv/down.sh $run/env failed"
  if [ $rc = 0 ] && [ $keep = 0 ]; then rm -rf "$run"; else log "logs kept in $run"; fi
  exit $rc
}
trap cleanup EXIT
started=$SECONDS
log "starting an environment in $run"
# One slurmd node (the batch partition, unused here) and no kube-controller-manager: nothing
# but the schedulers and the benchmark talks to the apiserver.
up_err=$("$root/testenv/up.sh" --run-dir "$run/env" --nodes 1 --no-kcm 2>&1 >/dev/null) ||
  { echo "$up_err" >&2; die "testenv/up.sh failed"; }
[ "$mode" = starvation ] && sched_params+=,bf_min_age_reserve=86400
[[ "$sched_params" =~ ^[a-z_=0-9,]+$ ]] || die "--sched-params: a comma-separated list, got '$sched_params'"
sed -i "s/^SchedulerParameters=.*/SchedulerParameters=$sched_params/" "$run/env/slurm/etc/slurm.conf"
# Room for the external nodes (up.sh allows 3,000; `scontrol reconfigure` restarts slurmctld, so
# the new maximum holds before any node is registered).
max_nodes=$(sed -n 's/^MaxNodeCount=//p' "$run/env/slurm/etc/slurm.conf")
if [ "$((nodes + 100))" -gt "${max_nodes:-0}" ]; then
  sed -i "s/^MaxNodeCount=.*/MaxNodeCount=$((nodes + 100))/" "$run/env/slurm/etc/slurm.conf"
fi
# Room for --busy's held jobs, the churn's and the bridge's (up.sh allows 100,000).
max_jobs=$(sed -n 's/^MaxJobCount=//p' "$run/env/slurm/etc/slurm.conf")
if [ "$mode" = busy ] && [ "$((held + 10000))" -gt "${max_jobs:-10000}" ]; then
  if [ -n "$max_jobs" ]; then
    sed -i "s/^MaxJobCount=.*/MaxJobCount=$((held + 10000))/" "$run/env/slurm/etc/slurm.conf"
  else
    echo "MaxJobCount=$((held + 10000))" >>"$run/env/slurm/etc/slurm.conf"
  fi
fi
"$root/testenv/slurm/exec.sh" "$run/env" scontrol reconfigure
sleep 2
params=$(sed -n 's/^SchedulerParameters=//p' "$run/env/slurm/etc/slurm.conf")
[ "$mode" = scale ] && extra+=(--mode scale)
[ "$mode" = bridge ] && extra+=(--mode bridge)
if [ "$mode" = busy ]; then
  echo "slurm-bridge busy-cluster benchmark: $held held native jobs and a churn of one short" \
    "native job every 2 s in Slurm's queue; slurm-bridge all with 4 pods on $nodes external" \
    "nodes (64 CPUs) (bench/busy.py)"
  extra+=(--held "$held")
elif [ "$mode" = starvation ]; then
  echo "slurm-bridge scheduler benchmark (no starvation): $nodes external nodes (64 CPUs)," \
    "churn of single pods with nothing waiting, then with unfit gangs waiting (bench/starvation.py)"
elif [ "$mode" = scale ]; then
  echo "slurm-bridge scheduler benchmark (scale): $nodes external nodes (64 CPUs), $pods pods" \
    "(1 CPU, 100Mi, exclusive=false) through the bridge in waves of $wave, then $waiting waiting"
else
  echo "slurm-bridge scheduler benchmark ($mode): $nodes external nodes (64 CPUs), $pods burst pods" \
    "(1 CPU, 100Mi, exclusive=false), $latency latency pods one every 200 ms"
fi
echo "Slurm SchedulerParameters=$params; kube-scheduler --kube-api-qps 1000 --kube-api-burst 1000;" \
  "bridge maxConcurrentSubmits $submits$bridge_cfg (no client QPS limit); load average $(cut -d' ' -f1-3 /proc/loadavg)"
script=bench.py
[ "$mode" = starvation ] && script=starvation.py
[ "$mode" = busy ] && script=busy.py
python3 "$root/bench/$script" --env "$run/env/env" --root "$root" --out "$run" \
  --binary "$binary" --kube-scheduler "$kube_scheduler" --nodes "$nodes" --pods "$pods" \
  --latency-pods "$latency" --max-concurrent-submits "$submits" --metrics-port "$(free_port)" "${extra[@]}"
echo "took $((SECONDS - started)) s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
