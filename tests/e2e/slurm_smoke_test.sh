#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The Slurm half of the test environment is real: slurmrestd answers v0.0.44 with the SlurmUser
# token and refuses bad ones; the nodes, GPUs and partitions are what up.sh configured; an
# external job gets a node and a GPU index from slurmctld.
set -uo pipefail
. "${SB_TESTENV:?SB_TESTENV must name the env file of a running test environment}"
fails=0
check() { # check NAME COND-COMMAND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
U="$SLURM_REST_URL/slurm/$SLURM_REST_API"
tok=$(cat "$SLURM_JWT_FILE")
utok=$(cat "$SLURM_USER_JWT_FILE")
H=(-H "X-SLURM-USER-TOKEN: $tok" -H "Content-Type: application/json")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# ping with the SlurmUser token: UP.
code=$(curl -s -o "$tmp/ping" -w '%{http_code}' "${H[@]}" "$U/ping/")
check "ping answers 200" [ "$code" = 200 ]
check "ping says UP" [ "$(jq -r '.pings[0].pinged' "$tmp/ping")" = UP ]

# A bad token: /ping says DOWN (200), real endpoints answer 511 with error 1007; no token: 401.
code=$(curl -s -o "$tmp/badping" -w '%{http_code}' -H "X-SLURM-USER-TOKEN: ${tok%?????}xxxxx" "$U/ping/")
check "ping with bad token: 200 and DOWN" [ "$code:$(jq -r '.pings[0].pinged' "$tmp/badping")" = 200:DOWN ]
code=$(curl -s -o "$tmp/badjobs" -w '%{http_code}' -H "X-SLURM-USER-TOKEN: ${tok%?????}xxxxx" "$U/jobs/")
check "jobs with bad token: 511" [ "$code" = 511 ]
check "jobs with bad token: error 1007" [ "$(jq -r '.errors[0].error_number' "$tmp/badjobs")" = 1007 ]
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/jobs/")
check "jobs without token: 401" [ "$code" = 401 ]
code=$(curl -s -o /dev/null -w '%{http_code}' -H "X-SLURM-USER-TOKEN: $utok" "$U/jobs/")
check "ordinary user's token works" [ "$code" = 200 ]

# The data_parser versions the client must support are all served.
curl -s "${H[@]}" "$SLURM_REST_URL/openapi/v3" >"$tmp/openapi"
for v in v0.0.42 v0.0.43 v0.0.44 v0.0.45; do
  check "openapi serves $v" [ "$(jq --arg p "/slurm/$v/ping/" '.paths | has($p)' "$tmp/openapi")" = true ]
done

# Nodes n1..nN, idle, 4 fake GPUs each; partitions batch and ext.
curl -s "${H[@]}" "$U/nodes/" >"$tmp/nodes"
want_nodes=$(echo "$SLURM_NODES" | tr ',' '\n' | sort | paste -sd,)
check "nodes are $want_nodes" [ "$(jq -r '[.nodes[].name] | sort | join(",")' "$tmp/nodes")" = "$want_nodes" ]
check "every node has gpu:fake:4" [ "$(jq -r '[.nodes[].gres] | unique | join(",")' "$tmp/nodes")" = gpu:fake:4 ]
curl -s "${H[@]}" "$U/partitions/" >"$tmp/parts"
check "partitions batch and ext" [ "$(jq -r '[.partitions[].name] | sort | join(",")' "$tmp/parts")" = batch,ext ]

# An external job with one GPU runs on a node with a GPU index, and cancels.
body='{"job":{"name":"smoke","flags":["EXTERNAL_JOB"],"partition":"batch","current_working_directory":"/tmp",
  "nodes":"1","tasks_per_node":1,"cpus_per_task":1,"tres_per_node":"gres/gpu:1","admin_comment":"{\"pods\":[\"default/smoke\"]}"}}'
curl -s "${H[@]}" -X POST -d "$body" "$U/job/submit" >"$tmp/submit"
id=$(jq -r '.job_id' "$tmp/submit")
check "external job submitted" [ "${id:-null}" != null ]
state=""
for _ in $(seq 1 100); do
  curl -s "${H[@]}" "$U/job/$id" >"$tmp/job"
  state=$(jq -r '.jobs[0].job_state | join(",")' "$tmp/job")
  [ "$state" = RUNNING ] && break
  sleep 0.1
done
check "external job RUNNING (was $state)" [ "$state" = RUNNING ]
check "external job has a node" grep -Eq '^n[0-9]+$' <<<"$(jq -r '.jobs[0].nodes // empty' "$tmp/job")"
check "external job has a GPU index" grep -Eq '^gpu:fake:1\(IDX:[0-3]\)$' <<<"$(jq -r '.jobs[0].gres_detail[0]' "$tmp/job")"
code=$(curl -s -o /dev/null -w '%{http_code}' "${H[@]}" -X DELETE "$U/job/$id")
check "cancel answers 200" [ "$code" = 200 ]
state=$(curl -s "${H[@]}" "$U/job/$id" | jq -r '.jobs[0].job_state | join(",")')
check "job CANCELLED (was $state)" [ "$state" = CANCELLED ]

# Commands inside the cluster work (tests use this for what REST cannot do).
out=$("$(dirname "$0")/../../testenv/slurm/exec.sh" "$SB_ENV_DIR" sinfo -h -p batch -o %D)
check "sinfo through exec.sh sees the nodes" [ "$out" = "$(echo "$SLURM_NODES" | tr ',' '\n' | wc -l)" ]

echo "$fails failed"
[ $fails = 0 ]
