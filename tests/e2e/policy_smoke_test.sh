#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The environment with Slurm accounting (testenv/up.sh --accounting, fixture testenv-policy) is
# what the policy tests assume: MariaDB and slurmdbd on loopback only; the cluster `lab` with the
# account `default` and the users root, slurm and k8s (QOS normal); an ordinary job of k8s is
# accounted to `default`; priority/multifactor and preempt/qos (PreemptMode=REQUEUE, never GANG
# or SUSPEND); slurmrestd serves /slurmdb/. Preemption by QOS works both ways: a preempted job
# whose QOS says cancel ends PREEMPTED, one whose QOS says requeue goes back to PENDING under the
# same job id. The preempted job's QOS decides, not the preemptor's: smoke-high says cancel and
# still requeues a smoke-low job that says requeue. An external job (the bridge's placeholder:
# no batch script) is not requeued: it ends PREEMPTED. The QOSes are removed afterwards.
set -uo pipefail
. "${SB_TESTENV:?SB_TESTENV must name the env file of a running test environment}"
fails=0
check() { # check NAME COND-COMMAND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
X() { "$(dirname "$0")/../../testenv/slurm/exec.sh" "$SB_ENV_DIR" "$@"; }
# As k8s (uid 2000), the user the bridge's ordinary jobs run as.
as_k8s() { X setpriv --reuid=k8s --regid=k8s --clear-groups "$@"; }
sbatch_k8s() { as_k8s sbatch --parsable --chdir=/tmp --output=/dev/null "$@"; }
job_field() { X scontrol show job -o "$1" 2>/dev/null | grep -o " $2=[^ ]*" | cut -d= -f2; }
# wait_state JOB STATE [SECONDS]: until the job is in STATE; prints the last state seen.
wait_state() {
  local s="" deadline=$((SECONDS + ${3:-30}))
  while [ $SECONDS -lt $deadline ]; do
    s=$(job_field "$1" JobState)
    [ "$s" = "$2" ] && break
    sleep 0.2
  done
  echo "$s"
}
cleanup() {
  X scancel --qos=smoke-low,smoke-high >/dev/null 2>&1
  X sacctmgr -i modify user k8s,slurm set qos-=smoke-low,smoke-high >/dev/null 2>&1
  X sacctmgr -i delete qos smoke-high,smoke-low >/dev/null 2>&1
}
trap cleanup EXIT

check "env says SB_ACCOUNTING=1" [ "${SB_ACCOUNTING:-}" = 1 ]
for p in "${MARIADB_PORT:-}" "${SLURMDBD_PORT:-}"; do
  addrs=$(ss -Htln "( sport = :$p )" 2>/dev/null | awk '{print $4}' | sort -u | paste -sd,)
  check "port $p listens on 127.0.0.1 only (${addrs:-nothing})" [ "$addrs" = "127.0.0.1:$p" ]
done

# The associations everything else relies on.
check "cluster lab registered" grep -qx lab <<<"$(X sacctmgr -n -P show cluster format=cluster)"
check "account default exists" grep -qx default <<<"$(X sacctmgr -n -P show account format=account)"
for u in root slurm k8s; do
  a=$(X sacctmgr -n -P show user "$u" format=defaultaccount)
  check "user $u has default account default (got '$a')" [ "$a" = default ]
  q=$(X sacctmgr -n -P show assoc where user="$u" account=default format=qos,defaultqos)
  check "user $u in default has QOS normal, its default (got '$q')" [ "$q" = "normal|normal" ]
done

# The policy slurm.conf asked for.
X scontrol show config >"${TMPDIR:-/tmp}/policy-smoke-config.$$"
conf() { awk -v k="$1" '$1 == k { sub(/^[^=]*= */, ""); print }' "${TMPDIR:-/tmp}/policy-smoke-config.$$"; }
check "PriorityType priority/multifactor" [ "$(conf PriorityType)" = priority/multifactor ]
check "PreemptType preempt/qos" [ "$(conf PreemptType)" = preempt/qos ]
check "PreemptMode REQUEUE, without GANG or SUSPEND (got $(conf PreemptMode))" [ "$(conf PreemptMode)" = REQUEUE ]
check "AccountingStorageEnforce associations,limits,qos,safe" \
  [ "$(conf AccountingStorageEnforce)" = associations,limits,qos,safe ]
check "AccountingStorageTRES has gres/gpu" grep -q 'gres/gpu' <<<"$(conf AccountingStorageTRES)"
check "fair share and QOS weigh" [ "$(conf PriorityWeightFairShare):$(conf PriorityWeightQOS)" = 100000:10000 ]
rm -f "${TMPDIR:-/tmp}/policy-smoke-config.$$"

# An ordinary job of k8s runs and is accounted to default, QOS normal.
id=$(sbatch_k8s --wrap 'sleep 1')
check "sbatch as k8s gives a job id ($id)" grep -Eq '^[0-9]+$' <<<"$id"
row=""
for _ in $(seq 1 150); do
  row=$(X sacct -n -P -X -j "$id" -o User,Account,QOS,State 2>/dev/null)
  [ "${row##*|}" = COMPLETED ] && break
  sleep 0.2
done
check "sacct: k8s's job COMPLETED in default, QOS normal (got '$row')" [ "$row" = "k8s|default|normal|COMPLETED" ]

# slurmrestd's /slurmdb/ (dbv0.0.44) answers with the SlurmUser token.
users=$(curl -s -H "X-SLURM-USER-TOKEN: $(cat "$SLURM_JWT_FILE")" \
  "$SLURM_REST_URL/slurmdb/$SLURM_REST_API/associations/" | jq -r '[.associations[].user] | sort | unique | join(",")')
check "REST /slurmdb/ lists the associations (users: $users)" [ "$users" = ",k8s,root,slurm" ]

# Preemption by QOS. smoke-high preempts smoke-low; each fills node n1.
X sacctmgr -i add qos smoke-low,smoke-high >/dev/null
X sacctmgr -i modify qos smoke-low set PreemptMode=cancel >/dev/null
X sacctmgr -i modify qos smoke-high set Preempt=smoke-low PreemptMode=cancel Priority=100 >/dev/null
X sacctmgr -i modify user k8s,slurm set qos+=smoke-low,smoke-high >/dev/null
check "QOS smoke-high preempts smoke-low" \
  [ "$(X sacctmgr -n -P show qos smoke-high format=preempt)" = smoke-low ]
node=${SLURM_NODES%%,*}
fill=(-w "$node" --exclusive --wrap 'sleep 300')

low=$(sbatch_k8s --qos=smoke-low "${fill[@]}")
check "cancel: low job RUNNING" [ "$(wait_state "$low" RUNNING)" = RUNNING ]
high=$(sbatch_k8s --qos=smoke-high "${fill[@]}")
check "cancel: high job RUNNING" [ "$(wait_state "$high" RUNNING)" = RUNNING ]
check "cancel: low job PREEMPTED" [ "$(wait_state "$low" PREEMPTED)" = PREEMPTED ]
X scancel "$high"
check "high job ended" [ "$(wait_state "$high" CANCELLED)" = CANCELLED ]

# The preempted job's QOS decides: smoke-low now says requeue (smoke-high still says cancel).
X sacctmgr -i modify qos smoke-low set PreemptMode=requeue >/dev/null
low=$(sbatch_k8s --qos=smoke-low "${fill[@]}")
check "requeue: low job RUNNING" [ "$(wait_state "$low" RUNNING)" = RUNNING ]
high=$(sbatch_k8s --qos=smoke-high "${fill[@]}")
check "requeue: high job RUNNING" [ "$(wait_state "$high" RUNNING)" = RUNNING ]
check "requeue: low job PENDING again under the same id" [ "$(wait_state "$low" PENDING)" = PENDING ]
check "requeue: low job restarted once" [ "$(job_field "$low" Restarts)" = 1 ]
X scancel "$low" "$high"
wait_state "$high" CANCELLED >/dev/null

# An external job (no batch script) in a QOS that says requeue is killed instead.
body=$(jq -nc --arg n "$node" '{job: {name: "smoke-ext", flags: ["EXTERNAL_JOB"], partition: "batch",
  qos: "smoke-low", current_working_directory: "/tmp", nodes: "1", required_nodes: [$n],
  tasks_per_node: 1, cpus_per_task: 8}}')
ext=$(curl -s -H "X-SLURM-USER-TOKEN: $(cat "$SLURM_JWT_FILE")" -H "Content-Type: application/json" \
  -X POST -d "$body" "$SLURM_REST_URL/slurm/$SLURM_REST_API/job/submit" | jq -r '.job_id')
check "external: low job RUNNING" [ "$(wait_state "$ext" RUNNING)" = RUNNING ]
high=$(sbatch_k8s --qos=smoke-high "${fill[@]}")
check "external: high job RUNNING" [ "$(wait_state "$high" RUNNING)" = RUNNING ]
check "external: low job PREEMPTED, not requeued" [ "$(wait_state "$ext" PREEMPTED)" = PREEMPTED ]
X scancel "$high"
wait_state "$high" CANCELLED >/dev/null

cleanup
check "QOSes removed" [ -z "$(X sacctmgr -n -P show qos smoke-low,smoke-high format=name)" ]
echo "$fails failed"
[ $fails = 0 ]
