#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Chaos run (issue #14): a mixed workload on converged nodes (real kubelets) while faults are
# injected at random points, then the invariant checker on what is left.
#
# Starts its own environment (testenv/up.sh --kubelets), a pass-through proxy in front of
# slurmrestd (tests/chaos/slurm_proxy.py) and two replicas each of `slurm-bridge scheduler` and
# `slurm-bridge controllers` with leader election, talking to Slurm through the proxy with a JWT
# file of their own. The workload (namespace chaos; busybox containers that sleep 2-8 s, some
# 15-40 s): single pods, gang Jobs (slurmjob.slinky.slurm.net/gang) and coscheduling PodGroups of
# 2-3 pods; about one unit in seven is deleted by the driver a little after its creation. The
# faults, spread over --duration, a seeded shuffle of every kind per round (so that a run of
# N >= 9 faults has each kind at least once):
#
#   sigkill-scheduler     SIGKILL the leading scheduler replica (restarted 1-5 s later)
#   sigkill-controllers   SIGKILL the leading controllers replica (restarted 1-5 s later)
#   sigkill-contending    SIGKILL a leader, restart it at once (both replicas contend for the
#                         Lease) and SIGKILL one of the two again 5-15 s later
#   slurmrestd-stop       slurmrestd stopped for 30 s (testenv/fault.sh)
#   slurmctld-restart     slurmctld restarted (testenv/fault.sh)
#   apiserver-restart     kube-apiserver restarted (testenv/fault.sh)
#   drop-submit-replies   the proxy loses the reply to the next 1-3 job submits (the job exists)
#   jwt-invalid           the bridge's JWT file replaced by an invalid token for 5-20 s
#   node-down             a Slurm node with running pods set DOWN for 10-30 s
#
# The seed is printed first; the same seed gives the same schedule (written to RUN/schedule),
# whose events then run at their times (a fault that blocks, a restart, delays what follows).
# The SIGKILLs aim at the replica that holds the role's Lease (its holderIdentity). A replica that
# exits with status 1 after losing its Lease is restarted as a Deployment would; any other exit
# it was not sent is a crash. While the workload runs, a snapshot check samples the invariants
# every 5 s (`slurm-bridge check --settle 0s`). After the last event everything is restored, the
# driver waits for every pod to end (or be gone), then runs `slurm-bridge check -n chaos`
# (straight to slurmrestd) and prints a table: faults by kind, pods and groups, violations, time
# to settle. Exits 1 on any of: a violation at the end; a violation that the samples show for
# --violation-limit seconds; a stuck pod; a crashed replica; a fault that could not be injected,
# or a kind never injected when --faults covers every kind; submit replies meant to be lost and
# none lost; more Lease losses than two per apiserver restart; a gang Job left incomplete; a pod
# of a single or PodGroup unit the driver did not delete that ended other than Succeeded, or is
# gone without the bridge's SlurmJobEnded/SlurmJobNotRunning event; a pod that ran whose job-id
# label names a Slurm job the samples (`scontrol show job` every 5 s) never saw allocated with
# the pod's node.
#
# Usage: scripts/chaos.sh [--seed N] [--pods N] [--faults N] [--duration S] [--binary PATH]
#                         [--kinds K,K,...] [--settle-timeout S] [--waves N] [--keep] [--keep-logs]
#                         [--violation-limit S] [--schedule-only]
#   --seed N        RNG seed (default: random, printed)
#   --pods N        pods of the workload (default 40)
#   --faults N      faults to inject (default 9)
#   --duration S    seconds over which the workload is created and the faults injected (default 90)
#   --kinds K,...   only these fault kinds (default: all of the above)
#   --settle-timeout S  how long the pods may take to end after the last event (default 300)
#   --waves N       gang Jobs run N waves (completions = N x parallelism; default 1): from the
#                   second wave on, each pod that succeeds is replaced by one bound into the
#                   running Slurm job (a refill), so N >= 2 refills every gang at least twice
#   --violation-limit S  how long a violation may last while the run goes on (default 60: two
#                   job-list and sweep intervals of 10 s, a Lease takeover and some slack)
#   --binary PATH   slurm-bridge (default: $SB_BINARY, else build/slurm-bridge)
#   --keep          leave the environment running (and print its directory)
#   --keep-logs     keep the run directory (logs, schedule) also when the run passes
#   --schedule-only print the schedule the seed gives ("T_MS create|delete|fault|undo ...") and exit
set -euo pipefail
# The whole script in braces: bash parses it before it runs, so editing this file during a run
# (which may take an hour) cannot change what the run does.
{
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/testenv/lib.sh"
need_root
schedule_only=0 keep_logs=0 seed="" pods=40 nfaults=9 duration=90 settle_timeout=300 keep=0 kinds_arg="" waves=1
violation_limit=60
binary=${SB_BINARY:-$root/build/slurm-bridge}
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) seed=$2; shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --faults) nfaults=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --kinds) kinds_arg=$2; shift 2 ;;
    --settle-timeout) settle_timeout=$2; shift 2 ;;
    --waves) waves=$2; shift 2 ;;
    --violation-limit) violation_limit=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --keep-logs) keep_logs=1; shift ;;
    --schedule-only) schedule_only=1; shift ;;
    -h | --help) awk 'NR > 2 && /^set -euo/ { exit } NR > 2' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[ -n "$seed" ] || seed=$(($(od -An -tu2 -N2 /dev/urandom) + 1))
for v in seed pods nfaults duration settle_timeout waves violation_limit; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "--${v%%_*} wants a number, got '${!v}'"
done
[ "$pods" -ge 1 ] && [ "$duration" -ge 10 ] && [ "$waves" -ge 1 ] ||
  die "--pods >= 1, --duration >= 10 and --waves >= 1"
[ -x "$binary" ] || die "no slurm-bridge at $binary: build it (scripts/build.sh) or pass --binary"
all_kinds=(sigkill-scheduler sigkill-controllers sigkill-contending slurmrestd-stop
  slurmctld-restart apiserver-restart drop-submit-replies jwt-invalid node-down)
if [ -n "$kinds_arg" ]; then
  IFS=, read -r -a kinds <<<"$kinds_arg"
  for k in "${kinds[@]}"; do
    [[ " ${all_kinds[*]} " == *" $k "* ]] || die "unknown fault kind: $k"
  done
else
  kinds=("${all_kinds[@]}")
fi
echo "chaos: seed $seed (replay: scripts/chaos.sh --seed $seed --pods $pods --faults $nfaults" \
  "--duration $duration${kinds_arg:+ --kinds $kinds_arg} --waves $waves)"
wall_start=$SECONDS
ns=chaos

# ---- The schedule, from the seed alone -----------------------------------------------------------
RANDOM=$seed
# rnd LO HI: R = a number in [LO, HI].
rnd() { R=$(($1 + (RANDOM * 32768 + RANDOM) % ($2 - $1 + 1))); }
events=()   # "T_MS TYPE ARGS..."
planned=0 units=0 n_single=0 n_job=0 n_pg=0 n_deleted=0
# Units are created over 90 % of the duration: the faults (over all of it) meet a loaded cluster.
window=$((duration * 1000 * 9 / 10))
while [ $planned -lt "$pods" ]; do
  units=$((units + 1))
  left=$((pods - planned))
  rnd 1 100
  if [ $R -le 50 ] || [ $left -lt 2 ]; then kind=pod size=1; else
    if [ $R -le 75 ]; then kind=job; else kind=pg; fi
    rnd 2 3; size=$R
    [ $size -le $left ] || size=$left
  fi
  rnd 1 10
  if [ $R -le 7 ]; then rnd 2 8; else rnd 15 40; fi
  sleep_s=$R
  rnd 0 $window; t=$R
  case $kind in pod) name=p-$units ;; job) name=j-$units ;; pg) name=g-$units ;; esac
  events+=("$t create $kind $name $size $sleep_s")
  case $kind in pod) n_single=$((n_single + 1)) ;; job) n_job=$((n_job + 1)) ;; pg) n_pg=$((n_pg + 1)) ;; esac
  planned=$((planned + size))
  rnd 1 100
  if [ $R -le 15 ]; then
    rnd 1000 20000
    events+=("$((t + R)) delete $kind $name")
    n_deleted=$((n_deleted + 1))
  fi
done
order=()
for ((i = 0; i < nfaults; i++)); do
  if [ $((i % ${#kinds[@]})) = 0 ]; then # a fresh shuffle of the kinds each round
    order=("${kinds[@]}")
    for ((j = ${#order[@]} - 1; j > 0; j--)); do
      rnd 0 $j; tmp=${order[$j]}; order[$j]=${order[$R]}; order[$R]=$tmp
    done
  fi
  k=${order[$((i % ${#kinds[@]}))]}
  rnd 3000 $((duration * 1000 - 3000)); t=$R
  case $k in
    sigkill-scheduler | sigkill-controllers)
      rnd 0 1; pick=$R; rnd 1 5
      events+=("$t fault $k $pick $R") ;;
    sigkill-contending)
      rnd 0 1; role=$([ $R = 0 ] && echo scheduler || echo controllers)
      rnd 0 1; pick=$R; rnd 5000 15000; later=$R; rnd 0 1
      events+=("$t fault $k $role $pick")
      events+=("$((t + later)) fault sigkill-again $role $R") ;;
    slurmrestd-stop)
      events+=("$t fault $k" "$((t + 30000)) undo slurmrestd-start") ;;
    drop-submit-replies)
      rnd 1 3; events+=("$t fault $k $R") ;;
    jwt-invalid)
      rnd 5000 20000; events+=("$t fault $k" "$((t + R)) undo jwt-restore") ;;
    node-down)
      rnd 0 99; pick=$R; rnd 10000 30000
      events+=("$t fault $k $pick $R") ;;
    *) events+=("$t fault $k") ;;
  esac
done

mapfile -t events < <(printf '%s\n' "${events[@]}" | sort -s -n -k1,1)
# The pods that must end Succeeded (or be deleted by the bridge with a reason): the single pods
# and PodGroup members of the units the driver does not delete.
expected_pods=()
declare -A driver_deletes
for e in "${events[@]}"; do
  read -r _ type _ name _ <<<"$e"
  [ "$type" != delete ] || driver_deletes[$name]=1
done
for e in "${events[@]}"; do
  read -r _ type kind name size _ <<<"$e"
  [ "$type" = create ] && [ -z "${driver_deletes[$name]:-}" ] || continue
  case $kind in
    pod) expected_pods+=("$name") ;;
    pg) for ((k = 0; k < size; k++)); do expected_pods+=("$name-$k"); done ;;
  esac
done
if [ $schedule_only = 1 ]; then
  printf '%s\n' "${events[@]}"
  exit 0
fi
run=$(mktemp -d "${TMPDIR:-/tmp}/sb-chaos.XXXXXX")
printf '%s\n' "${events[@]}" >"$run/schedule"
echo "chaos: $planned pods in $units units ($n_single pods, $n_job gang Jobs, $n_pg PodGroups;" \
  "$n_deleted to delete), $nfaults faults over $duration s; schedule: $run/schedule"

# ---- The environment, the proxy, the replicas --------------------------------------------------
declare -A rpid rgen rkilled rdown
replicas=(scheduler-0 scheduler-1 controllers-0 controllers-1)
proxy_pid="" sampler_pid=""
cleanup() {
  local rc=$? r
  for r in "${replicas[@]}"; do
    [ -z "${rpid[$r]:-}" ] || kill -TERM "${rpid[$r]}" 2>/dev/null || true
  done
  for r in "${replicas[@]}"; do [ -z "${rpid[$r]:-}" ] || wait "${rpid[$r]}" 2>/dev/null || true; done
  [ -z "$proxy_pid" ] || { kill "$proxy_pid" 2>/dev/null; wait "$proxy_pid" 2>/dev/null || true; }
  [ -z "$sampler_pid" ] || { kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true; }
  if [ $keep = 1 ]; then
    log "environment left running: $run (stop: testenv/down.sh $run)"
  else
    [ -z "${envdir:-}" ] || "$root/testenv/down.sh" --keep-logs "$envdir" >/dev/null 2>&1 || log "testenv/down.sh $envdir failed"
    if [ $rc = 0 ] && [ $keep_logs = 0 ]; then rm -rf "$run"; else log "logs kept in $run"; fi
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log "starting an environment with kubelets in $run"
up_err=$("$root/testenv/up.sh" --kubelets --run-dir "$run/env.d" 2>&1 >/dev/null) ||
  { echo "$up_err" >&2; die "testenv/up.sh failed"; }
# down.sh and fault.sh take the run dir: the environment's own.
envdir=$run/env.d
set -a; . "$envdir/env"; set +a
printf '%s\n' "${events[@]}" >"$run/schedule"
mkdir -p "$run/proxy" "$run/logs"
python3 "$root/tests/chaos/slurm_proxy.py" "$SLURM_REST_URL" "$run/proxy" >"$run/logs/proxy.log" 2>&1 &
proxy_pid=$!
wait_for 10 test -s "$run/proxy/port" || die "the proxy did not start (log: $run/logs/proxy.log)"
cp "$SLURM_JWT_FILE" "$run/jwt.good"
cp "$SLURM_JWT_FILE" "$run/jwt"
intervals="jobListInterval: 10s
nodeListInterval: 10s
jobSweepInterval: 10s"
printf 'schedulerName: slurm-bridge-scheduler\nslurmRestApi: http://127.0.0.1:%s\npartition: %s\n%s\n' \
  "$(cat "$run/proxy/port")" "$SLURM_PARTITION" "$intervals" >"$run/config.yaml"
# The checker reads Slurm straight, with the environment's token.
printf 'schedulerName: slurm-bridge-scheduler\nslurmRestApi: %s\npartition: %s\n%s\n' \
  "$SLURM_REST_URL" "$SLURM_PARTITION" "$intervals" >"$run/check.yaml"

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
NOW=0
tick_now() { local t=${EPOCHREALTIME/./}; NOW=$((t / 1000)); }
# A pid that runs (not a zombie waiting to be reaped).
running() { local s; [ -r "/proc/$1/stat" ] && read -r _ _ s _ <"/proc/$1/stat" && [ "$s" != Z ]; }
start_replica() {
  local r=$1 role=${1%-*}
  rgen[$r]=$((${rgen[$r]:-0} + 1))
  rkilled[$r]=0
  # Each role with the chart's ServiceAccount and its leader-election Role in the chart's
  # namespace (testenv/kube/chart-identities.sh), not the admin's kubeconfig (issue #44).
  local kc=KUBECONFIG_${role^^}
  SLURM_JWT_FILE=$run/jwt "$binary" "$role" --config "$run/config.yaml" --kubeconfig "${!kc}" \
    --leader-elect --leader-election-namespace "$LEADER_ELECTION_NAMESPACE" --metrics-bind-address 0 \
    --health-probe-bind-address 0 >"$run/logs/$r.${rgen[$r]}.log" 2>&1 &
  rpid[$r]=$!
}
log_of() { echo "$run/logs/$1.${rgen[$1]}.log"; }
# lease_of ROLE: the Lease the replicas of ROLE contend for (run_cmd.cc's upstream names).
lease_of() {
  case $1 in scheduler) echo slurm-bridge-scheduler ;; *) echo 69d5fe47.my.slinky.slurm.net ;; esac
}
# leader_of ROLE: the replica (0 or 1) of ROLE that holds its Lease now (the Lease's
# holderIdentity is the identity a replica logs when it starts); none when the holder is not a
# running replica (in between, or the Lease could not be read).
leader_of() {
  local i holder
  holder=$(kcurl -f "$api/apis/coordination.k8s.io/v1/namespaces/$LEADER_ELECTION_NAMESPACE/leases/$(lease_of "$1")" 2>/dev/null |
    jq -r '.spec.holderIdentity // empty' 2>/dev/null) || return 1
  [ -n "$holder" ] || return 1
  for i in 0 1; do
    [ -n "${rpid[$1-$i]:-}" ] && running "${rpid[$1-$i]}" &&
      grep -qF "leader election: Lease $LEADER_ELECTION_NAMESPACE/$(lease_of "$1") as $holder" "$(log_of "$1-$i")" &&
      { echo "$i"; return 0; }
  done
  return 1
}
# await_leader ROLE: LEADER = the leading replica of ROLE once there is one (within 45 s: a
# killed leader's Lease expires after 15 s), restarting replicas meanwhile; false after that.
# Not in a subshell: supervise changes the replicas' state.
await_leader() {
  local end=$((SECONDS + 45))
  while :; do
    LEADER=$(leader_of "$1") && return 0
    [ $SECONDS -lt $end ] || return 1
    supervise
    sleep 1
  done
}
exits_killed=0 exits_lease=0 crashes=()
declare -A faults_done
count_fault() { faults_done[$1]=$((${faults_done[$1]:-0} + 1)); }
# fault_failed KIND WHY: a fault that could not be injected (the run fails on it: test audit N6).
faults_failed=()
fault_failed() { faults_failed+=("$1: $2"); log "FAULT NOT INJECTED: $1: $2"; }
# kill_replica R DELAY_S: SIGKILL replica R; restarted DELAY_S later.
kill_replica() {
  local r=$1
  [ -n "${rpid[$r]:-}" ] || return 0
  kill -KILL "${rpid[$r]}" 2>/dev/null || true
  wait "${rpid[$r]}" 2>/dev/null || true
  rpid[$r]=""
  exits_killed=$((exits_killed + 1))
  tick_now
  rdown[$r]=$((NOW + $2 * 1000))
  log "SIGKILL $r (restart in $2 s)"
}
supervise() {
  local r st
  tick_now
  for r in "${replicas[@]}"; do
    if [ -n "${rpid[$r]:-}" ] && ! running "${rpid[$r]}"; then
      st=0
      wait "${rpid[$r]}" 2>/dev/null || st=$?
      # Only status 1 after "leadership lost" is a Lease exit (run_cmd.cc); anything else (a
      # signal during that shutdown, an abort, a sanitizer's exit code) is a crash.
      if [ "$st" = 1 ] && grep -q 'leadership lost: exiting' "$(log_of "$r")"; then
        exits_lease=$((exits_lease + 1))
        log "$r exited $st after losing its Lease; restarting it"
      else
        crashes+=("$r exited with status $st (log: $(log_of "$r"))")
        log "CRASH: $r exited with status $st (log: $(log_of "$r"))"
      fi
      rpid[$r]=""
      rdown[$r]=$NOW
    fi
    if [ -z "${rpid[$r]:-}" ] && [ "$NOW" -ge "${rdown[$r]:-0}" ]; then start_replica "$r"; fi
  done
}
kcurl() {
  curl -sS -m 20 --cacert "$KUBE_CA_FILE" -H "Authorization: Bearer $(cat "$KUBE_TOKEN_FILE")" "$@"
}
api=$KUBE_APISERVER_URL
for r in "${replicas[@]}"; do start_replica "$r"; done
leaders() { leader_of scheduler >/dev/null && leader_of controllers >/dev/null; }
wait_for 60 leaders || die "no leader after 60 s (logs: $run/logs)"
kcurl -o /dev/null -X POST -H 'Content-Type: application/json' "$api/api/v1/namespaces" \
  -d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"

# ---- The workload --------------------------------------------------------------------------------
exclusive='"slurmjob.slinky.slurm.net/exclusive":"false"'
# pod_spec SLEEP: a pod spec for the bridge whose container sleeps SLEEP seconds.
pod_spec() {
  printf '{"schedulerName":"slurm-bridge-scheduler","restartPolicy":"Never","terminationGracePeriodSeconds":5,"containers":[{"name":"c","image":"localhost/busybox:1","imagePullPolicy":"Never","command":["sh","-c","sleep %s"],"resources":{"limits":{"cpu":"100m","memory":"32Mi"}}}]}' "$1"
}
# post PATH JSON: creates; true when created (or there already), false to retry later.
post() {
  local code
  code=$(kcurl -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    "$api$1" -d "$2" 2>/dev/null) || code=000
  [ "$code" = 201 ] || [ "$code" = 409 ]
}
del() {
  local code
  code=$(kcurl -o /dev/null -w '%{http_code}' -X DELETE -H 'Content-Type: application/json' \
    "$api$1" -d '{"propagationPolicy":"Background"}' 2>/dev/null) || code=000
  [ "$code" = 200 ] || [ "$code" = 202 ] || [ "$code" = 404 ]
}
create_unit() { # KIND NAME SIZE SLEEP
  local kind=$1 name=$2 size=$3 s=$4 k
  case $kind in
    pod)
      post "/api/v1/namespaces/$ns/pods" "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$name\",\"annotations\":{$exclusive}},\"spec\":$(pod_spec "$s")}" ;;
    job)
      # Over several waves each pod sleeps 1..2xSLEEP s, drawn in the container: the pods of a
      # wave end at different times, so a replacement is bound into the running job while the
      # others still run (a refill). Pods that all end at once end the job with them instead.
      [ "$waves" -le 1 ] || s="\$((RANDOM % $((2 * s)) + 1))"
      post "/apis/batch/v1/namespaces/$ns/jobs" "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"$name\",\"annotations\":{\"slurmjob.slinky.slurm.net/gang\":\"true\",$exclusive}},\"spec\":{\"parallelism\":$size,\"completions\":$((size * waves)),\"backoffLimit\":6,\"template\":{\"spec\":$(pod_spec "$s")}}}" ;;
    pg)
      post "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/$ns/podgroups" "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"PodGroup\",\"metadata\":{\"name\":\"$name\",\"annotations\":{$exclusive}},\"spec\":{\"minMember\":$size}}" || return 1
      for ((k = 0; k < size; k++)); do
        post "/api/v1/namespaces/$ns/pods" "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$name-$k\",\"labels\":{\"scheduling.x-k8s.io/pod-group\":\"$name\"},\"annotations\":{$exclusive}},\"spec\":$(pod_spec "$s")}" || return 1
      done ;;
  esac
}
delete_unit() { # KIND NAME
  case $1 in
    pod) del "/api/v1/namespaces/$ns/pods/$2" ;;
    job) del "/apis/batch/v1/namespaces/$ns/jobs/$2" ;;
    pg)
      del "/api/v1/namespaces/$ns/pods?labelSelector=scheduling.x-k8s.io/pod-group%3D$2" &&
        del "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/$ns/podgroups/$2" ;;
  esac
}

# ---- The faults ----------------------------------------------------------------------------------
fault_sh() { "$root/testenv/fault.sh" "$envdir" "$@" >>"$run/logs/fault.log" 2>&1; }
declare -A slurm_of
for pair in ${KUBE_SLURM_NODES//,/ }; do slurm_of[${pair%%=*}]=${pair#*=}; done
nodes_down=() bg_faults=() pods_under_down=0
inject() { # KIND ARGS...
  local k=$1 r role i nodes
  shift
  case $k in
    sigkill-scheduler | sigkill-controllers)
      # The Lease's holder, never a replica picked at random (test audit N6).
      role=${k#sigkill-}
      if await_leader "$role"; then
        kill_replica "$role-$LEADER" "$2"; count_fault "$k"
      else
        fault_failed "$k" "no $role replica held the Lease for 45 s"
      fi ;;
    sigkill-contending)
      role=$1
      if await_leader "$role"; then
        kill_replica "$role-$LEADER" 0
        supervise # restarted at once: the two replicas contend for the Lease
        count_fault "$k"
      else
        fault_failed "$k" "no $role replica held the Lease for 45 s"
      fi ;;
    sigkill-again)
      kill_replica "$1-$2" 0 ;;
    slurmrestd-stop)
      if fault_sh slurmrestd-stop; then count_fault "$k"; else fault_failed "$k" "fault.sh failed (log: $run/logs/fault.log)"; fi ;;
    slurmrestd-start)
      fault_sh slurmrestd-start || log "slurmrestd-start failed (log: $run/logs/fault.log)" ;;
    slurmctld-restart | apiserver-restart)
      # In the background: the workload goes on while the daemon restarts (tens of seconds for
      # the apiserver on a busy machine); counted when done.
      (fault_sh "$k" && echo "$k" >>"$run/faults.bg" || echo "$k" >>"$run/faults.bg-failed") &
      bg_faults+=($!) ;;
    drop-submit-replies)
      local n=0
      [ ! -s "$run/proxy/drop-submits" ] || n=$(cat "$run/proxy/drop-submits")
      echo $((n + $1)) >"$run/proxy/drop-submits.tmp"
      mv "$run/proxy/drop-submits.tmp" "$run/proxy/drop-submits"
      count_fault "$k" ;;
    jwt-invalid)
      # A well-formed JWT that slurmrestd cannot verify.
      echo 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQxMDI0NDQ4MDAsImlhdCI6MCwic3VuIjoic2x1cm0ifQ.aW52YWxpZC1zaWduYXR1cmU' \
        >"$run/jwt.tmp"
      mv "$run/jwt.tmp" "$run/jwt"
      count_fault "$k" ;;
    jwt-restore)
      cp "$run/jwt.good" "$run/jwt.tmp"
      mv "$run/jwt.tmp" "$run/jwt" ;;
    node-down)
      # A node with running pods of the workload (the one picked by the seed among them), else any.
      mapfile -t nodes < <(kcurl "$api/api/v1/namespaces/$ns/pods?fieldSelector=status.phase%3DRunning" 2>/dev/null |
        jq -r '.items[].spec.nodeName // empty' 2>/dev/null | sort -u)
      [ ${#nodes[@]} -gt 0 ] || mapfile -t nodes < <(printf '%s\n' "${!slurm_of[@]}" | sort)
      local kn=${nodes[$(($1 % ${#nodes[@]}))]} sn on
      sn=${slurm_of[$kn]:-$kn}
      on=$(kcurl "$api/api/v1/namespaces/$ns/pods?fieldSelector=status.phase%3DRunning,spec.nodeName%3D$kn" 2>/dev/null |
        jq '.items | length' 2>/dev/null) || on="?"
      if fault_sh node-down "$sn"; then
        count_fault "$k"
        nodes_down+=("$sn")
        [[ ! "$on" =~ ^[0-9]+$ ]] || pods_under_down=$((pods_under_down + on))
        log "Slurm node $sn DOWN for $(($2 / 1000)) s under $on running pod(s)"
        tick_now
        pending+=("$((NOW - t0 + $2)) undo node-resume $sn")
      else
        fault_failed "$k" "fault.sh node-down $sn failed (log: $run/logs/fault.log)"
      fi ;;
    node-resume)
      fault_sh node-resume "$1" || log "node-resume $1 failed (log: $run/logs/fault.log)" ;;
  esac
}

# ---- The run -------------------------------------------------------------------------------------
pending=() # events added while running (retries, node resumes): "T_MS TYPE ARGS..."
created_units=0 deleted_units=0 failed_creates=0
run_event() { # TYPE ARGS...
  local type=$1
  shift
  case $type in
    create)
      if create_unit "$@"; then
        created_units=$((created_units + 1))
      else
        failed_creates=$((failed_creates + 1))
        pending+=("$((NOW - t0 + 2000)) create $*")
      fi ;;
    delete)
      if delete_unit "$@"; then deleted_units=$((deleted_units + 1)); else pending+=("$((NOW - t0 + 2000)) delete $*"); fi ;;
    fault) log "fault: $*"; inject "$@" ;;
    undo) inject "$@" ;;
  esac
}
# ---- The invariants while it runs (test audit N1) ---------------------------------------------
# Every 5 s, one snapshot check (--settle 0s) straight to slurmrestd, into samples/N: "T_MS RC"
# then the violations. Checked after the run by tests/chaos/streaks.awk: a violation is only a
# failure when it stays through readable samples for --violation-limit seconds (the bridge
# catches up in a poll and a sweep; samples that could not be read, e.g. while slurmrestd or
# the apiserver is down, neither end nor lengthen a streak).
sampler() {
  local i=0 t out rc
  mkdir -p "$run/samples"
  while [ ! -f "$run/samples/stop" ]; do
    t=$(now_ms)
    out=$(SLURM_JWT_FILE=$SLURM_JWT_FILE timeout 20 "$binary" check --config "$run/check.yaml" \
      --kubeconfig "$KUBECONFIG" -n "$ns" --settle 0s --all-jobs 2>/dev/null) && rc=0 || rc=$?
    i=$((i + 1))
    printf '%s %s\n%s\n' "$t" "$rc" "$out" >"$run/samples/$(printf %05d $i)"
    # Slurm's jobs as slurmctld has them (ended ones stay MinJobAge = 60 s): for the history
    # check of the pods at the end.
    timeout 20 "$root/testenv/slurm/exec.sh" "$envdir" scontrol show job -o \
      >"$run/samples/jobs.$(printf %05d $i)" 2>/dev/null || true
    sleep 5
  done
}
sampler &
sampler_pid=$!
log "workload and faults start (seed $seed)"
tick_now
t0=$NOW
ei=0
while [ $ei -lt ${#events[@]} ] || [ ${#pending[@]} -gt 0 ]; do
  supervise
  rel=$((NOW - t0))
  if [ $ei -lt ${#events[@]} ] && [ "${events[$ei]%% *}" -le $rel ]; then
    read -r -a ev <<<"${events[$ei]}"
    ei=$((ei + 1))
    run_event "${ev[@]:1}"
    continue
  fi
  if [ ${#pending[@]} -gt 0 ]; then
    keep_p=() due=()
    for p in "${pending[@]}"; do
      if [ "${p%% *}" -le $rel ]; then due+=("$p"); else keep_p+=("$p"); fi
    done
    pending=("${keep_p[@]}")
    for p in "${due[@]}"; do read -r -a ev <<<"$p"; run_event "${ev[@]:1}"; done
    [ ${#due[@]} -eq 0 ] || continue
  fi
  sleep 0.2
done
for p in "${bg_faults[@]}"; do wait "$p" || true; done
[ ! -f "$run/faults.bg" ] || while read -r k; do count_fault "$k"; done <"$run/faults.bg"
[ ! -f "$run/faults.bg-failed" ] || while read -r k; do
  fault_failed "$k" "fault.sh failed (log: $run/logs/fault.log)"
done <"$run/faults.bg-failed"
# Everything restored (each undo ran; this is the safety net).
fault_sh slurmrestd-start || true
cp "$run/jwt.good" "$run/jwt.tmp" && mv "$run/jwt.tmp" "$run/jwt"
rm -f "$run/proxy/drop-submits"
for sn in "${nodes_down[@]}"; do
  "$root/testenv/slurm/exec.sh" "$envdir" scontrol show node "$sn" 2>/dev/null | grep -q 'State=DOWN' &&
    fault_sh node-resume "$sn"
done
for r in "${replicas[@]}"; do rdown[$r]=0; done
supervise
dropped=0
[ ! -f "$run/proxy/dropped" ] || dropped=$(wc -l <"$run/proxy/dropped")
tick_now
settle_start=$NOW
log "last event done after $(((NOW - t0) / 1000)) s; waiting for the pods to end"

# ---- Settling and the check ----------------------------------------------------------------------
# The pods that have not ended; fails when they cannot be read (which is not "none left").
live_pods() {
  local out
  out=$(kcurl -f "$api/api/v1/namespaces/$ns/pods" 2>/dev/null) || return 1
  jq -r '.items[] | select(.status.phase != "Succeeded" and .status.phase != "Failed") | .metadata.name' <<<"$out"
}
stuck=() left=("(the pods could not be read)")
deadline=$((SECONDS + settle_timeout))
while :; do
  supervise
  if left_s=$(live_pods); then
    [ -n "$left_s" ] || break
    mapfile -t left <<<"$left_s"
  fi
  if [ $SECONDS -ge $deadline ]; then stuck=("${left[@]}"); break; fi
  sleep 3
done
for p in "${stuck[@]}"; do
  echo "stuck: pod $ns/$p: $(kcurl "$api/api/v1/namespaces/$ns/pods/$p" | jq -c '{phase: .status.phase,
    node: .spec.nodeName, job: .metadata.labels["scheduler.slinky.slurm.net/slurm-jobid"],
    deleting: .metadata.deletionTimestamp, message: .status.message}')"
done
touch "$run/samples/stop"
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""
streaks=$(awk -v limit="$violation_limit" -f "$root/tests/chaos/streaks.awk" "$run"/samples/[0-9]*)
echo "$streaks" >"$run/streaks.out"
read -r _ n_samples n_readable <<<"$(grep '^samples ' <<<"$streaks")"
read -r _ longest_s longest_key <<<"$(grep '^longest ' <<<"$streaks")"
mapfile -t persistent < <(grep '^persistent ' <<<"$streaks" | cut -d' ' -f2-)
check_out=$(SLURM_JWT_FILE=$SLURM_JWT_FILE "$binary" check --config "$run/check.yaml" \
  --kubeconfig "$KUBECONFIG" -n "$ns" --settle 60s --all-jobs 2>"$run/logs/check.err") && check_rc=0 || check_rc=$?
tick_now
settle_ms=$((NOW - settle_start))
echo "$check_out" >"$run/check.out"
violations=$(grep -cvE '^(no violations|$)' <<<"$check_out" || true)
[ $check_rc = 0 ] || [ "$violations" -gt 0 ] || violations="check failed"
supervise

# What ran: every pod left in the namespace (those deleted by the driver are gone), by phase.
phases=$(kcurl "$api/api/v1/namespaces/$ns/pods" | jq -r '.items[].status.phase' | sort | uniq -c |
  awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')
jobs_done=$(kcurl "$api/apis/batch/v1/namespaces/$ns/jobs" | jq -r '[.items[] |
  select(any(.status.conditions[]?; .type == "Complete" and .status == "True"))] | length')
errors=$(cat "$run"/logs/{scheduler,controllers}-*.log | grep -c '\[error\]' || true)
# The jobGoneBrake engaging (many watched jobs missing at once) is an error line too; no fault
# here loses slurmctld's state, so any is a false alarm worth seeing.
brakes=$(cat "$run"/logs/controllers-*.log | grep -c 'jobGoneBrake [0-9]*): slurmctld may' || true)
refills=$(cat "$run"/logs/scheduler-*.log | awk -f "$root/tests/chaos/refills.awk" || true)
# History (test audit N1): every pod left that ran names, in its job-id label, a Slurm job the
# samples saw out of PENDING with the pod's node among its nodes: none ran without a job of its
# own or where Slurm allocated nothing, even briefly.
declare -A job_nodes job_started hostnames_of
while IFS= read -r line; do
  id=$(grep -o 'JobId=[0-9]*' <<<"$line" | head -1 | cut -d= -f2)
  nl=$(grep -o ' NodeList=[^ ]*' <<<"$line" | head -1 | cut -d= -f2)
  st=$(grep -o ' JobState=[^ ]*' <<<"$line" | head -1 | cut -d= -f2)
  [ -n "$id" ] || continue
  # A job that left PENDING with nodes ran (RUNNING, then COMPLETING, COMPLETED, CANCELLED, ...).
  if [ -n "$nl" ] && [ "$nl" != "(null)" ] && [ -n "$st" ] && [ "$st" != PENDING ]; then
    if [ -z "${hostnames_of[$nl]:-}" ]; then
      hostnames_of[$nl]=" $("$root/testenv/slurm/exec.sh" "$envdir" scontrol show hostnames "$nl" 2>/dev/null | tr '\n' ' ')"
    fi
    job_nodes[$id]="${job_nodes[$id]:-}${hostnames_of[$nl]}"
    job_started[$id]=1
  fi
done < <(cat "$run"/samples/jobs.* 2>/dev/null | grep -F '"slurm-bridge"' || true)
history_pods=()
pods_checked=0
while IFS=$'\t' read -r name node jid; do
  [ -n "$node" ] && [ -n "$jid" ] || continue
  pods_checked=$((pods_checked + 1))
  sn=${slurm_of[$node]:-$node}
  if [ -z "${job_started[$jid]:-}" ]; then
    history_pods+=("$name ran on $node; the samples never saw its Slurm job $jid allocated")
  elif [[ "${job_nodes[$jid]:-} " != *" $sn "* ]]; then
    history_pods+=("$name ran on $node (Slurm $sn); its Slurm job $jid had${job_nodes[$jid]:- none}")
  fi
done < <(kcurl "$api/api/v1/namespaces/$ns/pods" | jq -r '.items[] | select(.status.phase == "Succeeded") |
  [.metadata.name, .spec.nodeName // "", .metadata.labels["scheduler.slinky.slurm.net/slurm-jobid"] // ""] | @tsv')
# Every gang Job left (the driver's deletions are gone) completed (test audit N1).
jobs_left=$(kcurl "$api/apis/batch/v1/namespaces/$ns/jobs" | jq -r '.items | length')
# Every pod the driver did not delete ended Succeeded, or was deleted by the bridge with a
# reason (its job ended or stopped running: a node-down, a cancel): none is lost or Failed.
# The gang Jobs' pods are the Job controller's to replace; their Jobs' completion stands for them.
all_pods=$(kcurl "$api/api/v1/namespaces/$ns/pods")
all_events=$(kcurl "$api/api/v1/namespaces/$ns/events")
lost_pods=()
for name in "${expected_pods[@]}"; do
  phase=$(jq -r --arg n "$name" '.items[] | select(.metadata.name == $n) | .status.phase' <<<"$all_pods")
  if [ -z "$phase" ]; then
    why=$(jq -r --arg n "$name" '[.items[] | select(.involvedObject.name == $n and
      (.reason == "SlurmJobEnded" or .reason == "SlurmJobNotRunning")) | .reason] | first // empty' <<<"$all_events")
    [ -n "$why" ] || lost_pods+=("$name: gone without a SlurmJobEnded or SlurmJobNotRunning event")
  elif [ "$phase" != Succeeded ]; then
    lost_pods+=("$name: $phase")
  fi
done

echo
echo "chaos run, seed $seed: $planned pods, $nfaults faults over $duration s"
printf '%-40s %s\n' "fault" "injected"
total=0
for k in "${all_kinds[@]}"; do
  n=${faults_done[$k]:-0}
  [ "$k" != drop-submit-replies ] || n="$n ($dropped replies lost)"
  printf '%-40s %s\n' "$k" "$n"
  total=$((total + ${faults_done[$k]:-0}))
done
printf '%-40s %s\n' "total" "$total"
printf '%-40s %s\n' "workload units (pods, Jobs, PodGroups)" "$units ($n_single, $n_job, $n_pg)"
printf '%-40s %s\n' "pods planned" "$planned"
printf '%-40s %s\n' "units deleted by the driver" "$deleted_units"
printf '%-40s %s\n' "pods left, by phase" "${phases:-none}"
printf '%-40s %s\n' "pods running on nodes set DOWN" "$pods_under_down"
printf '%-40s %s\n' "gang Jobs complete (of those left)" "$jobs_done ($jobs_left)"
printf '%-40s %s\n' "pods not ended well (of those expected)" "${#lost_pods[@]} (${#expected_pods[@]})"
printf '%-40s %s\n' "pods off their job's nodes (of checked)" "${#history_pods[@]} ($pods_checked)"
printf '%-40s %s\n' "gang refills" "$refills"
printf '%-40s %s\n' "replica exits: SIGKILL, lost Lease" "$exits_killed, $exits_lease"
printf '%-40s %s\n' "replica crashes" "${#crashes[@]}"
printf '%-40s %s\n' "faults not injected" "${#faults_failed[@]}"
printf '%-40s %s\n' "bridge error log lines" "$errors"
printf '%-40s %s\n' "jobGoneBrake engaged (none expected)" "$brakes"
printf '%-40s %s\n' "stuck pods" "${#stuck[@]}"
printf '%-40s %s\n' "invariant samples (readable)" "$n_samples ($n_readable)"
printf '%-40s %s\n' "longest violation while running" "$longest_s s ($longest_key)"
printf '%-40s %s\n' "violations over ${violation_limit} s while running" "${#persistent[@]}"
printf '%-40s %s\n' "violations" "$violations"
printf '%-40s %s\n' "time to settle" "$((settle_ms / 1000)) s"
printf '%-40s %s\n' "wall time" "$((SECONDS - wall_start)) s"
status=0
if [ "$violations" != 0 ]; then echo "$check_out"; status=1; fi
for c in "${crashes[@]}"; do echo "crash: $c"; status=1; done
[ ${#stuck[@]} -eq 0 ] || status=1
# What the table prints is asserted (test audit N1, N6).
for p in "${persistent[@]}"; do echo "violation for $p while running"; status=1; done
[ "$n_readable" -gt 0 ] || { echo "no invariant sample could be read"; status=1; }
for f in "${faults_failed[@]}"; do echo "fault not injected: $f"; status=1; done
for k in "${kinds[@]}"; do
  if [ "$nfaults" -ge ${#kinds[@]} ] && [ "${faults_done[$k]:-0}" -lt 1 ]; then
    echo "fault kind $k was never injected"; status=1
  fi
done
if [ "${faults_done[drop-submit-replies]:-0}" -gt 0 ] && [ "$dropped" -lt 1 ]; then
  echo "drop-submit-replies was injected but no submit reply was lost"; status=1
fi
# Each apiserver restart may cost each role's leader its Lease once; any other loss is a bridge
# that cannot keep its Lease.
max_lease=$((2 * ${faults_done[apiserver-restart]:-0}))
if [ "$exits_lease" -gt "$max_lease" ]; then
  echo "$exits_lease Lease losses, more than the $max_lease the apiserver restarts explain"; status=1
fi
if [ "$jobs_done" != "$jobs_left" ]; then
  echo "$((jobs_left - jobs_done)) gang Job(s) did not complete"; status=1
fi
for p in "${lost_pods[@]}"; do echo "pod $ns/$p"; status=1; done
for p in "${history_pods[@]}"; do echo "pod $ns/$p"; status=1; done
[ "$pods_checked" -gt 0 ] || { echo "no pod that ran could be checked against Slurm's jobs"; status=1; }
# Belt and braces: the last list of the pods has none that has not ended.
if [[ "$phases" =~ (Pending|Running|Unknown) ]]; then echo "pods have not ended: $phases"; status=1; fi
exit $status
}
