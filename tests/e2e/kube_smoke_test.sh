#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The Kubernetes half of the test environment is real: kube-apiserver stores a Node and a Pod
# with our schedulerName, accepts a pods/binding once (a second answers 409), a watch sees the
# pod become bound, and kube-controller-manager's job controller makes pods for a Job.
set -uo pipefail
. "${SB_TESTENV:?SB_TESTENV must name the env file of a running test environment}"
export PATH="$KUBE_BIN_DIR:$PATH"
fails=0
check() {
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
tmp=$(mktemp -d)
watch_pid=""
trap '[ -n "$watch_pid" ] && kill $watch_pid 2>/dev/null; rm -rf "$tmp"' EXIT
A=$KUBE_APISERVER_URL
C=(--cacert "$KUBE_CA_FILE" -H "Authorization: Bearer $(cat "$KUBE_TOKEN_FILE")")
req() { # req METHOD PATH [BODY] -> body in $tmp/out, prints status
  local m=$1 p=$2 b=${3:-}
  if [ -n "$b" ]; then
    curl -s "${C[@]}" -X "$m" -H 'Content-Type: application/json' -d "$b" -o "$tmp/out" -w '%{http_code}' "$A$p"
  else
    curl -s "${C[@]}" -X "$m" -o "$tmp/out" -w '%{http_code}' "$A$p"
  fi
}
sfx=$RANDOM$RANDOM
node=smoke-node-$sfx
pod=smoke-pod-$sfx

check "version is v$KUBE_VERSION" [ "$(req GET /version >/dev/null; jq -r .gitVersion "$tmp/out")" = "v$KUBE_VERSION" ]
check "anonymous request forbidden (RBAC)" [ "$(curl -s --cacert "$KUBE_CA_FILE" -o /dev/null -w '%{http_code}' "$A/api/v1/nodes")" = 403 ]
check "a wrong token is refused" [ "$(curl -s --cacert "$KUBE_CA_FILE" -H 'Authorization: Bearer wrong' -o /dev/null -w '%{http_code}' "$A/api/v1/nodes")" = 401 ]

code=$(req POST /api/v1/nodes "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"$node\",\"labels\":{\"slinky.slurm.net/slurm-nodename\":\"n1\"}}}")
check "node created (201)" [ "$code" = 201 ]
code=$(curl -s "${C[@]}" -X PATCH -H 'Content-Type: application/merge-patch+json' -o "$tmp/out" -w '%{http_code}' \
  -d '{"status":{"capacity":{"cpu":"8","memory":"16Gi","pods":"110","nvidia.com/gpu":"4"},"allocatable":{"cpu":"8","memory":"16Gi","pods":"110","nvidia.com/gpu":"4"},"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"test","lastHeartbeatTime":null}]}}' \
  "$A/api/v1/nodes/$node/status")
check "node status patched (200)" [ "$code" = 200 ]
check "node allocatable has 4 GPUs" [ "$(jq -r '.status.allocatable["nvidia.com/gpu"]' "$tmp/out")" = 4 ]

code=$(req POST /api/v1/namespaces/default/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$pod\"},\"spec\":{\"schedulerName\":\"slurm-bridge-scheduler\",\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}")
check "pod created (201)" [ "$code" = 201 ]
rv=$(jq -r .metadata.resourceVersion "$tmp/out")
check "pod is unbound" [ "$(jq -r '.spec.nodeName // ""' "$tmp/out")" = "" ]

curl -sN "${C[@]}" "$A/api/v1/namespaces/default/pods?watch=1&resourceVersion=$rv&fieldSelector=metadata.name%3D$pod&timeoutSeconds=30" >"$tmp/watch" &
watch_pid=$!
sleep 0.3
bind="{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"$pod\"},\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"$node\"}}"
code=$(req POST "/api/v1/namespaces/default/pods/$pod/binding" "$bind")
check "binding accepted (201)" [ "$code" = 201 ]
code=$(req POST "/api/v1/namespaces/default/pods/$pod/binding" "$bind")
check "second binding refused (409)" [ "$code" = 409 ]
seen=""
for _ in $(seq 1 100); do
  seen=$(jq -r --arg n "$node" 'select(.type=="MODIFIED" and .object.spec.nodeName==$n) | .type' "$tmp/watch" 2>/dev/null | head -n1)
  [ -n "$seen" ] && break
  sleep 0.1
done
check "watch saw the pod bound to $node" [ "$seen" = MODIFIED ]
req GET "/api/v1/namespaces/default/pods/$pod" >/dev/null
check "pod spec.nodeName is $node" [ "$(jq -r .spec.nodeName "$tmp/out")" = "$node" ]
check "PodScheduled=True" [ "$(jq -r '.status.conditions[] | select(.type=="PodScheduled") | .status' "$tmp/out")" = True ]

if [ "${KUBE_CONTROLLER_MANAGER:-0}" = 1 ]; then
  job=smoke-job-$sfx
  code=$(req POST /apis/batch/v1/namespaces/default/jobs "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"$job\"},\"spec\":{\"parallelism\":2,\"completions\":2,\"template\":{\"spec\":{\"schedulerName\":\"slurm-bridge-scheduler\",\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}}}")
  check "job created (201)" [ "$code" = 201 ]
  n=0
  for _ in $(seq 1 150); do
    req GET "/api/v1/namespaces/default/pods?labelSelector=job-name%3D$job" >/dev/null
    n=$(jq '.items | length' "$tmp/out")
    [ "$n" = 2 ] && break
    sleep 0.2
  done
  check "job controller created 2 pods (got $n)" [ "$n" = 2 ]
  req DELETE "/apis/batch/v1/namespaces/default/jobs/$job?propagationPolicy=Background" >/dev/null
fi

req DELETE "/api/v1/namespaces/default/pods/$pod?gracePeriodSeconds=0" >/dev/null
req DELETE "/api/v1/nodes/$node" >/dev/null
echo "$fails failed"
[ $fails = 0 ]
