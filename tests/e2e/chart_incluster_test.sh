#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The bridge installed by its Helm chart and running as pods (issue #12, part 5), on a test
# environment of its own (testenv/up.sh --kubelets --in-cluster, in a temporary run dir, stopped
# by the EXIT trap whatever happens):
#   1. the image (scripts/build-image.sh from BINARY) is imported into every node's containerd;
#      namespace slinky, the JWT Secret (the environment's SLURM_JWT_FILE), the chart rendered by
#      testenv/helm-render with the seed's settings (config.slurmRestApi, config.partition) plus
#      what this environment needs (values below) and applied with kubectl;
#   2. the three Deployments' pods Running and Ready (their probes answered), leader election
#      on (Lease holders are the running pods), the webhook configurations registered, each
#      pod with its ServiceAccount's token and no other credential;
#   3. RBAC with the real tokens: each component's token may make a call of its role and is
#      refused one outside it (403 from the apiserver);
#   4. the seed's YOLO pod (examples/yolo-benchmark-slurm-bridge.yaml, image replaced by the
#      offline stand-in localhost/slurm-bridge-demo:1, schedulerName removed) in the managed
#      namespace slurm-bridge: mutated by the in-cluster webhook (schedulerName set), scheduled
#      through Slurm by the in-cluster scheduler, runs on its Slurm job's node, and its
#      completion ends the job (in-cluster controllers);
#   5. upgrade-equivalent: re-render with a changed config value (the webhook's Secret looked
#      up as helm upgrade does), apply: checksum/config changes, every Deployment gets a new
#      ReplicaSet whose pods are Ready;
#   6. 2 scheduler replicas: one leads (the Lease's holder), the other stands by; deleting the
#      leader hands the Lease to the other;
#   7. uninstall-equivalent (kubectl delete of the rendered objects) leaves no chart object and
#      no bridge pod.
# What this environment needs and a real cluster does not: testenv/kube/chart-lib.sh.
#
# Usage: chart_incluster_test.sh [BINARY]   (default: $SB_BINARY, else build/slurm-bridge)
# SB_KEEP_LOGS=1 keeps the run dir (logs of every daemon and node) after stopping everything.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/testenv
binary=${1:-${SB_BINARY:-$root/build/slurm-bridge}}
[ -x "$binary" ] || { echo "no slurm-bridge binary at $binary" >&2; exit 1; }
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
base=$(mktemp -d "${TMPDIR:-/tmp}/sb-incluster.XXXXXX")
ROOT=$root BASE=$base BINARY=$binary
. "$here/kube/chart-lib.sh"
need_root

fails=0
check() {
  local name=$1; shift
  if "$@" >/dev/null; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
cleanup() {
  chart_stop
  [ -n "${SB_KEEP_LOGS:-}" ] || rm -rf "$base"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
t0=$SECONDS
step() { echo "== $* ($((SECONDS - t0)) s)"; }

# --- 1. image, environment, install ----------------------------------------------------------
step "image"
chart_image
step "environment"
chart_env
check "image imported into ${#nodes[@]} nodes" [ "$(for n in "${nodes[@]}"; do
  ctr -a "$SB_ENV_DIR/nodes/$n/containerd/containerd.sock" -n k8s.io images ls -q |
    grep -c "^ghcr.io/slinkyproject/slurm-bridge-.*:$version\$"; done | awk '{s += $1} END {print s}')" = $((3 * ${#nodes[@]})) ]
check "JWT Secret created" k -n slinky get secret slurm-bridge-token

step "install"
render "$base/install.yaml" || die "rendering failed"
check "rendered $(grep -c '^kind:' "$base/install.yaml") objects, applied" apply "$base/install.yaml"
# A pod of the old ReplicaSet can take a while to be removed by its kubelet (~2 min seen on 1.20).
wait_for 300 all_rolled_out
for d in "${deploys[@]}"; do
  check "$d: pods Running and Ready" rolled_out "$d"
  j=$(pods_of "$d")
  # Ready with probes configured means the kubelet's readiness probe got 200 from /readyz.
  check "$d: readiness probe on its health port" jq -e '.items | length > 0 and all(.[];
      (.spec.containers[0].readinessProbe.httpGet.path == "/readyz") and .spec.hostNetwork
      and (.status.conditions[] | select(.type == "Ready") | .status) == "True")' <<<"$j"
  check "$d: runs with its ServiceAccount's token only" jq -e --arg sa "$d" '.items | all(.[];
      .spec.serviceAccountName == $sa and
      ([.spec.volumes[] | select(.projected.sources[]?.serviceAccountToken)] | length == 1) and
      ([.spec.containers[0].env[]?.name] | index("KUBECONFIG") == null))' <<<"$j"
done
holder() { k -n slinky get lease "$1" -o jsonpath='{.spec.holderIdentity}'; }
# The binary's identity is <hostname>_<random>; a hostNetwork pod's hostname is its node's.
leader_on_pod_node() { # LEASE DEPLOY
  local h
  h=$(holder "$1")
  [ -n "$h" ] && pods_of "$2" | jq -e --arg n "${h%%_*}" '[.items[] | select(.spec.nodeName == $n)] | length == 1' >/dev/null
}
wait_for 60 leader_on_pod_node slurm-bridge-scheduler slurm-bridge-scheduler
check "scheduler Lease held by its pod ($(holder slurm-bridge-scheduler))" leader_on_pod_node slurm-bridge-scheduler slurm-bridge-scheduler
check "controllers Lease held by its pod ($(holder 69d5fe47.my.slinky.slurm.net))" \
  leader_on_pod_node 69d5fe47.my.slinky.slurm.net slurm-bridge-controllers
for kind in validatingwebhookconfiguration mutatingwebhookconfiguration; do
  check "$kind slurm-bridge-admission registered, CA bundle set" \
    sh -c "kubectl get $kind slurm-bridge-admission -o json | jq -e '.webhooks[0].clientConfig | .service.name == \"slurm-bridge-admission\" and (.caBundle | length > 100)' >/dev/null"
done
# In its EndpointSlice (discovery.k8s.io/v1; v1 Endpoints are deprecated since 1.33).
check "admission Service has the pod's endpoint (hostNetwork: the node's address)" \
  sh -c "kubectl -n slinky get endpointslices -l kubernetes.io/service-name=slurm-bridge-admission -o json |
    jq -e '[.items[].endpoints[]? | select(.conditions.ready)] | length == 1' >/dev/null"

# --- 3. RBAC with the real tokens -------------------------------------------------------------
step "RBAC with the ServiceAccounts' tokens"
token_of() { # SA: a token of it from the TokenRequest API (what the kubelet projects into its pods)
  k -n slinky create token "$1" --duration 10m
}
# as SA METHOD PATH -> HTTP status
as() {
  curl -s -o "$base/as.out" -w '%{http_code}' --cacert "$KUBE_CA_FILE" -X "$2" \
    -H "Authorization: Bearer $(token_of "$1")" "$KUBE_APISERVER_URL$3"
}
check "scheduler token: list pods allowed (200)" [ "$(as slurm-bridge-scheduler GET /api/v1/pods?limit=1)" = 200 ]
check "scheduler token: read Secrets refused (403)" [ "$(as slurm-bridge-scheduler GET /api/v1/namespaces/slinky/secrets)" = 403 ]
check "the refusal names the ServiceAccount" grep -q 'system:serviceaccount:slinky:slurm-bridge-scheduler' "$base/as.out"
check "controllers token: list nodes allowed (200)" [ "$(as slurm-bridge-controllers GET /api/v1/nodes?limit=1)" = 200 ]
check "controllers token: delete a node refused (403)" [ "$(as slurm-bridge-controllers DELETE /api/v1/nodes/n1)" = 403 ]
check "admission token: list namespaces allowed (200)" [ "$(as slurm-bridge-admission GET /api/v1/namespaces?limit=1)" = 200 ]
check "admission token: list pods refused (403)" [ "$(as slurm-bridge-admission GET /api/v1/pods?limit=1)" = 403 ]
check "n1 still exists" k get node n1

# --- 4. the seed's pod ------------------------------------------------------------------------
step "the seed's YOLO pod"
python3 - "$root/examples/yolo-benchmark-slurm-bridge.yaml" >"$base/yolo.yaml" <<'EOF'
import sys, yaml
pod = yaml.safe_load(open(sys.argv[1]))
del pod["spec"]["schedulerName"]          # the in-cluster webhook sets it
c = pod["spec"]["containers"][0]
c["image"] = "localhost/slurm-bridge-demo:1"   # offline stand-in for ultralytics/ultralytics
c["imagePullPolicy"] = "Never"
c.pop("command", None)
c["env"] = [{"name": "DEMO_ROUNDS", "value": "20"},
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
yaml.safe_dump(pod, sys.stdout)
EOF
pod=yolo-benchmark-slurm-bridge
check "pod created in the managed namespace" k -n slurm-bridge apply -f "$base/yolo.yaml"
check "mutated by the webhook: schedulerName slurm-bridge-scheduler" \
  [ "$(k -n slurm-bridge get pod $pod -o jsonpath='{.spec.schedulerName}')" = slurm-bridge-scheduler ]
done_pod() { local p; p=$(k -n slurm-bridge get pod $pod -o jsonpath='{.status.phase}'); [ "$p" = Succeeded ] || [ "$p" = Failed ]; }
wait_for 180 done_pod
pj=$(k -n slurm-bridge get pod $pod -o json)
job=$(jq -r '.metadata.labels["scheduler.slinky.slurm.net/slurm-jobid"] // ""' <<<"$pj")
node=$(jq -r '.spec.nodeName // ""' <<<"$pj")
check "pod Succeeded ($(jq -r .status.phase <<<"$pj") on $node)" [ "$(jq -r .status.phase <<<"$pj")" = Succeeded ]
check "pod carries its Slurm job id ($job)" [ -n "$job" ]
check "Scheduled event from the in-cluster scheduler names the job" \
  sh -c "kubectl -n slurm-bridge get events --field-selector involvedObject.name=$pod,reason=Scheduled -o json | jq -e '.items[] | select(.message | contains(\"Slurm job $job\"))' >/dev/null"
slurm_job() {
  curl -s -H "X-SLURM-USER-NAME: $SLURM_JWT_USER" -H "X-SLURM-USER-TOKEN: $(cat "$SLURM_JWT_FILE")" \
    "$SLURM_REST_URL/slurm/$SLURM_REST_API/job/$job" | jq -c '.jobs[0]'
}
# The Kubernetes node's Slurm name (kube-n5 is Slurm's n5).
slurm_node=$(tr ',' '\n' <<<"$KUBE_SLURM_NODES" | awk -F= -v n="$node" '$1 == n {print $2}')
check "runs on its Slurm job's node (Slurm: $(slurm_job | jq -r .nodes), pod: $node = $slurm_node)" \
  [ "$(slurm_job | jq -r .nodes)" = "$slurm_node" ]
k -n slurm-bridge logs $pod >"$base/yolo.log"
sed 's/^/  | /' "$base/yolo.log"
check "the container saw its Slurm job id" grep -q "SLURM_JOB_ID: *$job\$" "$base/yolo.log"
job_ended() { slurm_job | jq -e '.job_state | index("RUNNING") == null and index("PENDING") == null' >/dev/null; }
wait_for 60 job_ended
check "its completion ended the Slurm job ($(slurm_job | jq -r '.job_state | join(",")'))" job_ended

# --- 4b. what the webhooks refuse, through the real apiserver (issue #25) ----------------------
step "the webhooks' refusals and their scope (matchConditions)"
refused() { # EXPECTED_TEXT MANIFEST_JSON: a server-side dry run is refused with the text
  local out
  out=$(kubectl create --dry-run=server -f - <<<"$2" 2>&1) && return 1
  grep -qF "$1" <<<"$out" || { echo "$out" >&2; return 1; }
}
admitted() { kubectl create --dry-run=server -f - <<<"$1" >/dev/null; }
bridge_pod='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"greedy","namespace":"slurm-bridge",
  "annotations":{"slurmjob.slinky.slurm.net/priority":"2000000000"}},
  "spec":{"containers":[{"name":"c","image":"busybox"}]}}'
check "N-4: a pod asking for a priority its namespace may not use is refused" \
  refused 'slurmjob.slinky.slurm.net/priority: "2000000000" is not allowed in namespace slurm-bridge' "$bridge_pod"
check "N-4: so is a Job whose annotations ask for another account" \
  refused 'slurmjob.slinky.slurm.net/account: "other-team" is not allowed' \
  '{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"slurm-bridge",
    "annotations":{"slurmjob.slinky.slurm.net/account":"other-team"}},"spec":{"template":{"spec":{
    "restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}'
daemonset='{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"ds","namespace":"NS"},
  "spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},
  "spec":{"tolerations":[{"operator":"Exists"}],"containers":[{"name":"c","image":"busybox"}]}}}}'
check "N-3: a tenant's DaemonSet tolerating every taint is refused" \
  refused 'spec.template: a toleration of the taint slinky.slurm.net/managed-node' "${daemonset/NS/slurm-bridge}"
check "N-3: the same DaemonSet in kube-system is admitted" admitted "${daemonset/NS/kube-system}"
plain='{"apiVersion":"v1","kind":"Pod","metadata":{"name":"plain","namespace":"default"},
  "spec":{"containers":[{"name":"c","image":"busybox"}]}}'
check "an unrelated pod is admitted" admitted "$plain"
# N-7: with the webhook down, only the writes it judges fail; other pods are not sent to it.
k -n slinky scale deploy slurm-bridge-admission --replicas=0 >/dev/null
no_admission_pods() { [ "$(k -n slinky get pods -l app.kubernetes.io/name=slurm-bridge-admission -o name | wc -l)" = 0 ]; }
wait_for 90 no_admission_pods
check "webhook down: an unrelated pod is still admitted (matchConditions)" admitted "$plain"
check "webhook down: a pod for the bridge fails closed" \
  refused 'failed calling webhook' "${bridge_pod/2000000000/1}"
k -n slinky scale deploy slurm-bridge-admission --replicas=1 >/dev/null
wait_for 120 rolled_out slurm-bridge-admission
check "webhook back: Ready" rolled_out slurm-bridge-admission
webhook_answers() { refused 'is not allowed in namespace' "$bridge_pod" 2>/dev/null; }
wait_for 60 webhook_answers

# --- 5. upgrade-equivalent ----------------------------------------------------------------------
step "upgrade: re-render with config.jobPollInterval=1s, apply"
declare -A sum_before rs_before
for d in "${deploys[@]}"; do
  sum_before[$d]=$(k -n slinky get deploy "$d" -o jsonpath='{.spec.template.metadata.annotations.checksum/config}')
  rs_before[$d]=$(k -n slinky get rs -l "app.kubernetes.io/name=$d" -o json | jq -r '[.items[] | select(.spec.replicas > 0) | .metadata.name] | join(",")')
done
# helm upgrade looks the webhook's Secret up and keeps the pair: so does the renderer, from a file.
k -n slinky get secret slurm-bridge-admission -o yaml >"$base/lookup.yaml"
render "$base/upgrade.yaml" --set config.jobPollInterval=1s --lookup-file "$base/lookup.yaml" || die "rendering failed"
check "the webhook's certificate is kept" \
  [ "$(grep -c "$(k -n slinky get secret slurm-bridge-admission -o jsonpath='{.data.tls\.crt}' | cut -c1-60)" "$base/upgrade.yaml")" -ge 1 ]
check "applied" apply "$base/upgrade.yaml"
check "config.yaml has the new value" sh -c "kubectl -n slinky get cm slurm-bridge-config -o jsonpath='{.data.config\.yaml}' | grep -q 'jobPollInterval: \"\\?1s'"
wait_for 300 all_rolled_out
for d in "${deploys[@]}"; do
  sum=$(k -n slinky get deploy "$d" -o jsonpath='{.spec.template.metadata.annotations.checksum/config}')
  check "$d: checksum/config changed" [ -n "$sum" ] && [ "$sum" != "${sum_before[$d]}" ]
  rs=$(k -n slinky get rs -l "app.kubernetes.io/name=$d" -o json | jq -r '[.items[] | select(.spec.replicas > 0) | .metadata.name] | join(",")')
  check "$d: a new ReplicaSet ($rs, was ${rs_before[$d]})" [ -n "$rs" ] && [ "$rs" != "${rs_before[$d]}" ]
  check "$d: rolled, Ready" rolled_out "$d"
done
check "the pods have the new checksum" sh -c "kubectl -n slinky get pods -o json | jq -e '[.items[].metadata.annotations[\"checksum/config\"]] | unique | length == 1' >/dev/null"

# --- 6. two scheduler replicas ---------------------------------------------------------------
# All nodes share one network namespace here: two replicas cannot both listen on one port, so
# their health and metrics listeners are off (scheduler.ports.*=0: no probes) for this step.
step "2 scheduler replicas with leader election"
render "$base/two.yaml" --set config.jobPollInterval=1s --lookup-file "$base/lookup.yaml" \
  --set scheduler.replicaCount=2 --set scheduler.ports.health=0 --set scheduler.ports.metrics=0 || die "rendering failed"
check "applied" apply "$base/two.yaml"
wait_for 300 rolled_out slurm-bridge-scheduler
check "2 scheduler pods Running and Ready" rolled_out slurm-bridge-scheduler
leading_pods() { # names of the scheduler pods, not being deleted, whose log says they lead
  local p
  # A pod of the old ReplicaSet still terminating is left out: its log says it led, and counting
  # it let the check below run before a new pod led (seen once in CI).
  for p in $(k -n slinky get pods -l app.kubernetes.io/name=slurm-bridge-scheduler -o json |
               jq -r '.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name'); do
    # grep reads the whole log (not -q): with pipefail, -q stopping at the first match made
    # kubectl die of SIGPIPE on a long log and the pod look as if it did not lead (seen in CI).
    k -n slinky logs "pod/$p" | grep 'leading (slinky/slurm-bridge-scheduler)' >/dev/null && echo "$p"
  done
}
# Until a new pod's log says it leads: the Lease may still name the old pod, and an old holder
# on a node where a new pod also runs passes leader_on_pod_node (seen once in CI).
one_leads() { [ "$(leading_pods | wc -w)" = 1 ] && leader_on_pod_node slurm-bridge-scheduler slurm-bridge-scheduler; }
wait_for 120 one_leads
leaders=$(leading_pods)
check "exactly one replica leads ($leaders), holding the Lease ($(holder slurm-bridge-scheduler))" \
  [ "$(wc -w <<<"$leaders")" = 1 ] && leader_on_pod_node slurm-bridge-scheduler slurm-bridge-scheduler
old_holder=$(holder slurm-bridge-scheduler)
if [ "$(wc -w <<<"$leaders")" = 1 ]; then
  k -n slinky delete pod "$leaders" --wait=false >/dev/null
  new_leader() { local h; h=$(holder slurm-bridge-scheduler); [ -n "$h" ] && [ "$h" != "$old_holder" ]; }
  wait_for 120 new_leader
  check "the standby takes over when the leader goes ($old_holder -> $(holder slurm-bridge-scheduler))" new_leader
fi

# --- 7. uninstall-equivalent --------------------------------------------------------------------
step "uninstall: kubectl delete of the rendered objects"
check "deleted" sh -c "kubectl delete -f '$base/two.yaml' --wait=true >/dev/null"
no_pods() { [ -z "$(k -n slinky get pods -o name)" ]; }
wait_for 300 no_pods
check "no bridge pod left" no_pods
check "no rendered object left" [ -z "$(k get -f "$base/two.yaml" -o name --ignore-not-found)" ]
left=$(k get clusterrole,clusterrolebinding,validatingwebhookconfiguration,mutatingwebhookconfiguration -o name | grep slurm-bridge)
left+=$(k -n slinky get all,sa,cm,role,rolebinding,secret -l app.kubernetes.io/instance=slurm-bridge -o name)
check "nothing labelled with the release left ($left)" [ -z "$left" ]
echo "  left by design (not chart objects, as with helm uninstall): $(k -n slinky get lease -o name | paste -sd' '), Secret slurm-bridge-token, the nodes' managed-node taint"

echo "$((SECONDS - t0)) s"
[ $fails = 0 ] && echo "PASS" || echo "$fails FAILED"
[ $fails = 0 ]
