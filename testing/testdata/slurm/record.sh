#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Re-records the slurmrestd replies the Slurm client's unit tests decode, from the real daemons.
# Starts its own Slurm environment, makes the state each reply needs (a running external job, a
# pending one, a drained node, a reservation, error cases), saves the replies here, stops.
#
# Usage: testing/testdata/slurm/record.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
run=$(mktemp -d "${TMPDIR:-/tmp}/sb-record.XXXXXX")
trap '"$root/testenv/down.sh" "$run" >/dev/null 2>&1; rm -rf "$run"' EXIT
"$root/testenv/up.sh" --no-kube --run-dir "$run" >/dev/null
. "$run/env"
tok=$(cat "$SLURM_JWT_FILE")
H=(-H "X-SLURM-USER-TOKEN: $tok" -H "Content-Type: application/json")
B="$SLURM_REST_URL/slurm"
rm -f "$here"/*.json "$here"/*.status
# save NAME METHOD PATH [BODY]: the reply body as slurmrestd sent it, and its HTTP status
save() {
  local name=$1 method=$2 path=$3 body=${4:-}
  local args=("${H[@]}" -s -X "$method" -o "$here/$name.json" -w '%{http_code}')
  [ -n "$body" ] && args+=(-d "$body")
  curl "${args[@]}" "$B$path" >"$here/$name.status"
}
# Scrub what changes between runs and says nothing: the client's source address.
scrub() { sed -i -E 's/"source": "127\.0\.0\.1:[0-9]+\(fd:[0-9]+\)"/"source": "127.0.0.1:1(fd:1)"/' "$here"/*.json; }

ext='{"job":{"name":"rec-ext","flags":["EXTERNAL_JOB"],"partition":"batch","current_working_directory":"/tmp","nodes":"1","tasks_per_node":1,"cpus_per_task":2,"memory_per_node":{"set":true,"infinite":false,"number":1024},"tres_per_node":"gres/gpu:2","admin_comment":"{\"pods\":[\"default/rec\"]}","time_limit":{"set":true,"infinite":false,"number":60}}}'
save submit_external POST /v0.0.44/job/submit "$ext"
id=$(jq -r .job_id "$here/submit_external.json")
for _ in $(seq 1 100); do
  [ "$(curl -s "${H[@]}" "$B/v0.0.44/job/$id" | jq -r '.jobs[0].job_state[0]')" = RUNNING ] && break
  sleep 0.1
done
for v in v0.0.42 v0.0.43 v0.0.44 v0.0.45; do
  save "ping_$v" GET "/$v/ping/"
  save "job_running_$v" GET "/$v/job/$id"
done
save resources_running GET "/v0.0.44/resources/$id"
# A job that must wait: every GPU of 4 nodes while the first job holds 2.
big='{"job":{"name":"rec-pending","flags":["EXTERNAL_JOB"],"partition":"batch","current_working_directory":"/tmp","nodes":"4","tasks_per_node":1,"tres_per_node":"gres/gpu:4"}}'
save submit_pending POST /v0.0.44/job/submit "$big"
pid=$(jq -r .job_id "$here/submit_pending.json")
sleep 1
save job_pending GET "/v0.0.44/job/$pid"
save resources_pending GET "/v0.0.44/resources/$pid"
save update_pending POST "/v0.0.44/job/$pid" '{"comment":"updated","time_limit":{"set":true,"infinite":false,"number":30}}'
save update_running_cpus POST "/v0.0.44/job/$id" '{"cpus_per_task":4}'
save jobs GET /v0.0.44/jobs/
# update_time = that list's last_update, nothing changed since: no jobs, last_update 0 and the
# warning "No job changes since update_time[...]" (not "no jobs").
save jobs_unchanged GET "/v0.0.44/jobs/?update_time=$(jq -r .last_update.number "$here/jobs.json")"
# The spec calls job_id a "CSV list", but 26.05 answers 500 "Unspecified error" to any comma
# (422 "Failure parsing query" when escaped as %2C); the parameter repeated works, and unknown
# ids are left out.
save jobs_state GET "/v0.0.44/jobs/state/?job_id=$id&job_id=$pid"
save jobs_state_with_unknown GET "/v0.0.44/jobs/state/?job_id=$id&job_id=999999"
save jobs_state_csv GET "/v0.0.44/jobs/state/?job_id=$id,$pid"
save jobs_state_all GET "/v0.0.44/jobs/state/"
save job_unknown GET /v0.0.44/job/999999
save cancel_unknown DELETE /v0.0.44/job/999999
save cancel_pending DELETE "/v0.0.44/job/$pid"
# A heterogeneous job (issue #27): a launcher of 1 CPU on one node, 2 workers of 2 CPUs and a GPU.
# Only the backfill scheduler starts it (bf_interval, 2 s in the test environment). GET of its id
# answers every component; /jobs/state/ of its id too, with ids "<id>+0", "<id+1>+1".
het='{"jobs":[{"name":"rec-het","flags":["EXTERNAL_JOB"],"partition":"batch","current_working_directory":"/tmp","nodes":"1","tasks_per_node":1,"cpus_per_task":1,"admin_comment":"{\"pods\":[\"default/l\"]}"},{"name":"rec-het","flags":["EXTERNAL_JOB"],"partition":"batch","current_working_directory":"/tmp","nodes":"2","tasks_per_node":1,"cpus_per_task":2,"tres_per_node":"gres/gpu:1","admin_comment":"{\"pods\":[\"default/w0\",\"default/w1\"]}"}]}'
save submit_het POST /v0.0.44/job/submit "$het"
hid=$(jq -r .job_id "$here/submit_het.json")
for _ in $(seq 1 100); do
  [ "$(curl -s "${H[@]}" "$B/v0.0.44/job/$hid" | jq -r '.jobs[1].job_state[0]')" = RUNNING ] && break
  sleep 0.2
done
save job_het_running GET "/v0.0.44/job/$hid"
save jobs_state_het GET "/v0.0.44/jobs/state/?job_id=$hid"
save cancel_het DELETE "/v0.0.44/job/$hid"
save submit_bad_partition POST /v0.0.44/job/submit '{"job":{"name":"x","flags":["EXTERNAL_JOB"],"partition":"nope","current_working_directory":"/tmp","nodes":"1"}}'
save submit_impossible POST /v0.0.44/job/submit '{"job":{"name":"x","flags":["EXTERNAL_JOB"],"partition":"batch","current_working_directory":"/tmp","nodes":"1","tres_per_node":"gres/gpu:9"}}'
save submit_wrong_type POST /v0.0.44/job/submit '{"job":{"name":"x","flags":["EXTERNAL_JOB"],"partition":"batch","current_working_directory":"/tmp","tasks":"x"}}'
save node_update_drain POST /v0.0.44/node/n2 '{"state":["DRAIN"],"reason":"recorded by record.sh"}'
save nodes GET /v0.0.44/nodes/
save node_n2 GET /v0.0.44/node/n2
save node_unknown GET /v0.0.44/node/nope
save partitions GET /v0.0.44/partitions/
save partition_batch GET /v0.0.44/partition/batch
"$root/testenv/slurm/exec.sh" "$run" scontrol create reservation reservationname=maint starttime=now+1hour duration=60 nodes=n4 users=root >/dev/null
save reservations GET /v0.0.44/reservations/
save new_node POST /v0.0.44/new/node/ '{"node_conf":"NodeName=k1 NodeAddr=127.0.0.1 NodeHostname=k1 CPUs=8 RealMemory=16000 State=External Feature=ext"}'
save delete_node DELETE /v0.0.44/node/k1
curl -s -H "X-SLURM-USER-TOKEN: ${tok%?????}xxxxx" -o "$here/jobs_bad_token.json" -w '%{http_code}' "$B/v0.0.44/jobs/" >"$here/jobs_bad_token.status"
curl -s -H "X-SLURM-USER-TOKEN: ${tok%?????}xxxxx" -o "$here/ping_bad_token.json" -w '%{http_code}' "$B/v0.0.44/ping/" >"$here/ping_bad_token.status"
scrub
echo "recorded $(ls "$here"/*.json | wc -l) replies into $here"
