#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The bridge installed by real Helm (the pinned Helm 4 of testenv/helm/ensure-helm.sh) from its
# chart and running as pods (issue #12, part 5; issue #43), on a test environment of its own
# (testenv/up.sh --kubelets --in-cluster, in a temporary run dir, stopped by the EXIT trap
# whatever happens). The release is an upstream user's: release slurm-bridge in namespace slurm
# (upstream's since 1.2), installed with the values file of an upstream 1.3 user
# (tests/chart/testdata/upstream-1.3-values.yaml), then upgraded, rolled back, tested and
# uninstalled with Helm:
#   1. the image (scripts/build-image.sh from BINARY) is imported into every node's containerd;
#      `helm install --create-namespace` with that values file, the seed's settings and what this
#      environment needs (testenv/kube/chart-lib.sh); the JWT Secret once Helm made the namespace;
#   2. the three Deployments' pods Running and Ready (their probes answered), leader election
#      on (Lease holders are the running pods), the webhook configurations registered, each
#      pod with its ServiceAccount's token and no other credential;
#   3. RBAC with the real tokens: each component's token may make a call of its role and is
#      refused one outside it (403 from the apiserver);
#   4. the seed's YOLO pod (examples/yolo-benchmark-slurm-bridge.yaml, image replaced by the
#      offline stand-in localhost/slurm-bridge-demo:1, schedulerName removed) in the managed
#      namespace slurm-bridge: mutated by the in-cluster webhook (schedulerName set), scheduled
#      through Slurm by the in-cluster scheduler, runs on its Slurm job's node, and its
#      completion ends the job (in-cluster controllers); what the webhooks refuse;
#   5. `helm upgrade` with the same values file, a changed config value, and slurmrestd over
#      https behind a private CA (a TLS-terminating socat on loopback; the CA in a Secret mounted
#      with extraVolumes/extraVolumeMounts, config.slurmCaFile, no slurmInsecureSkipVerify; the
#      local binary refuses another CA): revision 2, the webhook's certificate kept (Helm's
#      `lookup`), checksum/config changes, every Deployment gets a new ReplicaSet whose pods are
#      Ready, and the bridge talks to Slurm through the proxy from then on;
#   6. `helm upgrade --reuse-values` to 2 scheduler replicas: one leads (the Lease's holder), the
#      other stands by; deleting the leader hands the Lease to the other;
#   7. `helm rollback` to revision 2: one scheduler replica with its probes again, the config of
#      revision 2, Ready;
#   8. `helm test`: the chart's test pod (templates/tests/) is placed by the bridge through a
#      Slurm job and succeeds;
#   9. `helm uninstall` leaves nothing of the release (no object with its labels, no webhook
#      configuration, ClusterRole or ClusterRoleBinding, no bridge pod), only what
#      docs/install.md says it keeps.
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
ROOT=$root BASE=$base BINARY=$binary CHART_NS=slurm
. "$here/kube/chart-lib.sh"
ns=$CHART_NS
upstream_values=$root/tests/chart/testdata/upstream-1.3-values.yaml
need_root

fails=0
# helm_ok CMD...: runs a helm command, its output in $base/helm.out, shown when it fails.
helm_ok() { "$@" >"$base/helm.out" 2>&1 || { sed 's/^/  | /' "$base/helm.out" >&2; return 1; }; }
# same A B: A is not empty and is B; changed A B: A is not empty and is not B.
same() { [ -n "$1" ] && [ "$1" = "$2" ]; }
changed() { [ -n "$1" ] && [ "$1" != "$2" ]; }
check() {
  local name=$1; shift
  if "$@" >/dev/null; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
cleanup() {
  # socat forks one child per connection: those first, then the listener.
  [ -z "${socat_pid:-}" ] || { pkill -P "$socat_pid" socat; kill "$socat_pid"; } 2>/dev/null
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
    grep -c "/slurm-bridge-[a-z]*:$image_tag\$"; done | awk '{s += $1} END {print s}')" -ge $((3 * ${#nodes[@]})) ]

check "the managed namespace slurm-bridge created" k create namespace slurm-bridge
step "helm install (an upstream 1.3 user's values file, release slurm-bridge in namespace $ns)"
check "namespace $ns does not exist yet" sh -c "! kubectl get namespace $ns 2>/dev/null"
check "helm install --create-namespace" helm_ok chart_helm install --create-namespace -f "$upstream_values"
check "Helm made namespace $ns" k get namespace "$ns"
check "JWT Secret created" jwt_secret
release_is() { # REVISION STATUS
  "$helm" status slurm-bridge -n "$ns" -o json | jq -e --argjson r "$1" --arg s "$2" '.version == $r and .info.status == $s'
}
check "release slurm-bridge revision 1 deployed" release_is 1 deployed
check "the Deployments are the release's (Helm's ownership annotations)" sh -c "kubectl -n $ns get deploy -o json | jq -e '
  .items | length == 3 and all(.[]; .metadata.annotations[\"meta.helm.sh/release-name\"] == \"slurm-bridge\"
  and .metadata.annotations[\"meta.helm.sh/release-namespace\"] == \"$ns\")' >/dev/null"
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
holder() { k -n "$ns" get lease "$1" -o jsonpath='{.spec.holderIdentity}'; }
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
  sh -c "kubectl -n $ns get endpointslices -l kubernetes.io/service-name=slurm-bridge-admission -o json |
    jq -e '[.items[].endpoints[]? | select(.conditions.ready)] | length == 1' >/dev/null"

# --- 3. RBAC with the real tokens -------------------------------------------------------------
step "RBAC with the ServiceAccounts' tokens"
token_of() { # SA: a token of it from the TokenRequest API (what the kubelet projects into its pods)
  k -n "$ns" create token "$1" --duration 10m
}
# as SA METHOD PATH -> HTTP status
as() {
  curl -s -o "$base/as.out" -w '%{http_code}' --cacert "$KUBE_CA_FILE" -X "$2" \
    -H "Authorization: Bearer $(token_of "$1")" "$KUBE_APISERVER_URL$3"
}
check "scheduler token: list pods allowed (200)" [ "$(as slurm-bridge-scheduler GET /api/v1/pods?limit=1)" = 200 ]
check "scheduler token: read Secrets refused (403)" [ "$(as slurm-bridge-scheduler GET /api/v1/namespaces/$ns/secrets)" = 403 ]
check "the refusal names the ServiceAccount" grep -q "system:serviceaccount:$ns:slurm-bridge-scheduler" "$base/as.out"
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
k -n "$ns" scale deploy slurm-bridge-admission --replicas=0 >/dev/null
no_admission_pods() { [ "$(k -n "$ns" get pods -l app.kubernetes.io/name=slurm-bridge-admission -o name | wc -l)" = 0 ]; }
wait_for 90 no_admission_pods
check "webhook down: an unrelated pod is still admitted (matchConditions)" admitted "$plain"
check "webhook down: a pod for the bridge fails closed" \
  refused 'failed calling webhook' "${bridge_pod/2000000000/1}"
k -n "$ns" scale deploy slurm-bridge-admission --replicas=1 >/dev/null
wait_for 120 rolled_out slurm-bridge-admission
check "webhook back: Ready" rolled_out slurm-bridge-admission
webhook_answers() { refused 'is not allowed in namespace' "$bridge_pod" 2>/dev/null; }
wait_for 60 webhook_answers

# --- 5. helm upgrade, and slurmrestd over https behind a private CA ----------------------------
# A TLS-terminating proxy from Debian (socat) on loopback in front of the environment's
# slurmrestd, with a server certificate for IP 127.0.0.1 signed by a CA of this test's own that
# no system trust store holds. The upgrade points the release at it as docs/install.md and
# values.yaml tell an admin to: the CA in a Secret, mounted into the scheduler and the controllers
# with extraVolumes/extraVolumeMounts, config.slurmCaFile naming it, no slurmInsecureSkipVerify.
# Every later step (the second upgrade, the rollback, helm test) talks to Slurm through it.
step "a private CA and an https proxy in front of slurmrestd"
tls=$base/tls
mkdir -p "$tls"
openssl_ok() { openssl "$@" >>"$tls/openssl.log" 2>&1; }
check "a private CA" openssl_ok req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=sb-test-private-ca \
  -keyout "$tls/ca.key" -out "$tls/ca.crt"
check "another CA (for the refusal below)" openssl_ok req -x509 -newkey rsa:2048 -nodes -days 1 \
  -subj /CN=sb-test-other-ca -keyout "$tls/other-ca.key" -out "$tls/other-ca.crt"
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$tls/ext"
check "the proxy's certificate (IP:127.0.0.1), signed by the private CA" sh -c "
  openssl req -newkey rsa:2048 -nodes -subj /CN=slurmrestd-proxy -keyout '$tls/server.key' \
    -out '$tls/server.csr' && openssl x509 -req -in '$tls/server.csr' -CA '$tls/ca.crt' \
    -CAkey '$tls/ca.key' -CAcreateserial -days 1 -extfile '$tls/ext' -out '$tls/server.crt'" 2>>"$tls/openssl.log"
tls_port=$(free_port)
rest_hostport=${SLURM_REST_URL#*://}
rest_hostport=${rest_hostport%%/*}
# -d -d: a line "accepting connection" for each client; fork: each connection its own process.
socat -d -d "OPENSSL-LISTEN:$tls_port,bind=127.0.0.1,reuseaddr,fork,cert=$tls/server.crt,key=$tls/server.key,verify=0" \
  "TCP:$rest_hostport" 2>"$tls/socat.log" &
socat_pid=$!
proxy_url=https://127.0.0.1:$tls_port
proxy_up() { curl -s -o /dev/null --cacert "$tls/ca.crt" "$proxy_url/"; }
wait_for 30 proxy_up
check "the proxy answers https with the private CA ($proxy_url)" proxy_up
check "a client trusting only the system's CAs is refused" sh -c "! curl -s -o /dev/null '$proxy_url/'"
accepted() { grep -c 'accepting connection' "$tls/socat.log"; }
# The local binary through the proxy: the right CA works, another CA is a clear error. (With
# --all-jobs: plain `jobs` asks Slurm only about the jobs pods name, and none does here.)
local_jobs() { # CA_FILE
  printf 'slurmRestApi: %s\npartition: %s\nslurmCaFile: %s\n' "$proxy_url" "$SLURM_PARTITION" "$1" \
    >"$tls/local-config.yaml"
  "$binary" jobs --all-jobs --config "$tls/local-config.yaml" >"$tls/local.out" 2>&1
}
check "slurm-bridge jobs through the proxy with slurmCaFile: the private CA" local_jobs "$tls/ca.crt"
fails_() { ! "$@"; }
check "slurm-bridge jobs with another CA fails" fails_ local_jobs "$tls/other-ca.crt"
check "... and says the certificate is not trusted" grep -qi 'certificate' "$tls/local.out"
sed 's/^/  | /' "$tls/local.out"
check "the CA as a Secret in $ns" k -n "$ns" create secret generic slurm-ca --from-file=ca.crt="$tls/ca.crt"
cat >"$tls/values.yaml" <<'EOF_VALUES'
config:
  slurmCaFile: /etc/slurm-bridge-ca/ca.crt
scheduler:
  extraVolumes: [{name: slurm-ca, secret: {secretName: slurm-ca}}]
  extraVolumeMounts: [{name: slurm-ca, mountPath: /etc/slurm-bridge-ca, readOnly: true}]
controllers:
  extraVolumes: [{name: slurm-ca, secret: {secretName: slurm-ca}}]
  extraVolumeMounts: [{name: slurm-ca, mountPath: /etc/slurm-bridge-ca, readOnly: true}]
EOF_VALUES
export CHART_REST_URL=$proxy_url
accepted_before=$(accepted)

step "helm upgrade: the same values file, config.jobPollInterval=1s, slurmrestd through the https proxy"
declare -A sum_before rs_before
for d in "${deploys[@]}"; do
  sum_before[$d]=$(k -n "$ns" get deploy "$d" -o jsonpath='{.spec.template.metadata.annotations.checksum/config}')
  rs_before[$d]=$(k -n "$ns" get rs -l "app.kubernetes.io/name=$d" -o json | jq -r '[.items[] | select(.spec.replicas > 0) | .metadata.name] | join(",")')
done
pair() { k -n "$ns" get secret slurm-bridge-admission -o json | jq -c '.data'; }
ca_bundles() { # the distinct caBundles of both webhook configurations
  kubectl get validatingwebhookconfiguration,mutatingwebhookconfiguration slurm-bridge-admission -o json |
    jq -c '[.items[].webhooks[].clientConfig.caBundle] | unique'
}
pair_before=$(pair)
check "helm upgrade" helm_ok chart_helm upgrade -f "$upstream_values" -f "$tls/values.yaml" \
  --set config.jobPollInterval=1s
check "release revision 2 deployed" release_is 2 deployed
check "the webhook's certificate is kept (lookup)" same "$(pair)" "$pair_before"
check "both webhooks' caBundle is the kept CA" [ "$(ca_bundles)" = "$(jq -c '[.["ca.crt"]]' <<<"$pair_before")" ]
check "config.yaml has the new value" sh -c "kubectl -n $ns get cm slurm-bridge-config -o jsonpath='{.data.config\.yaml}' | grep -q 'jobPollInterval: \"\\?1s'"
wait_for 300 all_rolled_out
for d in "${deploys[@]}"; do
  sum=$(k -n "$ns" get deploy "$d" -o jsonpath='{.spec.template.metadata.annotations.checksum/config}')
  check "$d: checksum/config changed" changed "$sum" "${sum_before[$d]}"
  rs=$(k -n "$ns" get rs -l "app.kubernetes.io/name=$d" -o json | jq -r '[.items[] | select(.spec.replicas > 0) | .metadata.name] | join(",")')
  check "$d: a new ReplicaSet ($rs, was ${rs_before[$d]})" changed "$rs" "${rs_before[$d]}"
  check "$d: rolled, Ready" rolled_out "$d"
done
check "the pods have the new checksum" sh -c "kubectl -n $ns get pods -o json | jq -e '[.items[].metadata.annotations[\"checksum/config\"]] | unique | length == 1' >/dev/null"
tls_config() {
  local c
  c=$(kubectl -n "$ns" get cm slurm-bridge-config -o jsonpath='{.data.config\.yaml}')
  grep -q "slurmRestApi: \"\\?$proxy_url" <<<"$c" && grep -q 'slurmCaFile: "\?/etc/slurm-bridge-ca/ca.crt' <<<"$c" &&
    ! grep -q 'slurmInsecureSkipVerify: true' <<<"$c"
}
check "config.yaml: the https URL and slurmCaFile, no slurmInsecureSkipVerify" tls_config
for d in slurm-bridge-scheduler slurm-bridge-controllers; do
  check "$d: the CA Secret mounted at /etc/slurm-bridge-ca" jq -e '.items | length > 0 and all(.[];
      ([.spec.volumes[] | select(.secret.secretName == "slurm-ca")] | length == 1) and
      ([.spec.containers[0].volumeMounts[] | select(.mountPath == "/etc/slurm-bridge-ca")] | length == 1))' \
    <<<"$(pods_of "$d")"
done
more_accepted() { [ "$(accepted)" -gt "$accepted_before" ]; }
wait_for 60 more_accepted
check "the in-cluster bridge talks to Slurm through the proxy ($(($(accepted) - accepted_before)) connections)" more_accepted
no_tls_errors() {
  local d
  for d in slurm-bridge-scheduler slurm-bridge-controllers; do
    k -n "$ns" logs "deploy/$d" | grep -i 'certificate\|handshake' && return 1
  done
  return 0
}
check "no TLS error in the scheduler's and the controllers' logs" no_tls_errors

# --- 6. two scheduler replicas ---------------------------------------------------------------
# All nodes share one network namespace here: two replicas cannot both listen on one port, so
# their health and metrics listeners are off (scheduler.ports.*=0: no probes) for this step.
step "2 scheduler replicas with leader election"
check "helm upgrade --reuse-values" helm_ok chart_helm upgrade --reuse-values \
  --set scheduler.replicaCount=2 --set scheduler.ports.health=0 --set scheduler.ports.metrics=0
check "release revision 3 deployed" release_is 3 deployed
wait_for 300 rolled_out slurm-bridge-scheduler
check "2 scheduler pods Running and Ready" rolled_out slurm-bridge-scheduler
leading_pods() { # names of the scheduler pods, not being deleted, whose log says they lead
  local p
  # A pod of the old ReplicaSet still terminating is left out: its log says it led, and counting
  # it let the check below run before a new pod led (seen once in CI).
  for p in $(k -n "$ns" get pods -l app.kubernetes.io/name=slurm-bridge-scheduler -o json |
               jq -r '.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name'); do
    # grep reads the whole log (not -q): with pipefail, -q stopping at the first match made
    # kubectl die of SIGPIPE on a long log and the pod look as if it did not lead (seen in CI).
    k -n "$ns" logs "pod/$p" | grep "leading ($ns/slurm-bridge-scheduler)" >/dev/null && echo "$p"
  done
}
# Until a new pod's log says it leads: the Lease may still name the old pod, and an old holder
# on a node where a new pod also runs passes leader_on_pod_node (seen once in CI).
one_leads() { [ "$(leading_pods | wc -w)" = 1 ] && leader_on_pod_node slurm-bridge-scheduler slurm-bridge-scheduler; }
wait_for 120 one_leads
leaders=$(leading_pods)
one_leader() { [ "$(wc -w <<<"$leaders")" = 1 ] && leader_on_pod_node slurm-bridge-scheduler slurm-bridge-scheduler; }
check "exactly one replica leads ($leaders), holding the Lease ($(holder slurm-bridge-scheduler))" one_leader
old_holder=$(holder slurm-bridge-scheduler)
if [ "$(wc -w <<<"$leaders")" = 1 ]; then
  k -n "$ns" delete pod "$leaders" --wait=false >/dev/null
  new_leader() { local h; h=$(holder slurm-bridge-scheduler); [ -n "$h" ] && [ "$h" != "$old_holder" ]; }
  wait_for 120 new_leader
  check "the standby takes over when the leader goes ($old_holder -> $(holder slurm-bridge-scheduler))" new_leader
fi

# --- 7. helm rollback ----------------------------------------------------------------------------
step "helm rollback to revision 2"
check "helm rollback slurm-bridge 2" helm_ok "$helm" rollback slurm-bridge 2 -n "$ns"
check "release revision 4 deployed, a rollback to 2" sh -c "'$helm' history slurm-bridge -n $ns -o json |
  jq -e '.[-1] | .revision == 4 and .status == \"deployed\" and .description == \"Rollback to 2\"' >/dev/null"
check "revision 4 has revision 2's values" [ "$("$helm" get values slurm-bridge -n "$ns" --revision 4 -o json)" = \
  "$("$helm" get values slurm-bridge -n "$ns" --revision 2 -o json)" ]
wait_for 300 all_rolled_out
check "one scheduler replica again, Ready" rolled_out slurm-bridge-scheduler
check "its readiness probe is back" sh -c "kubectl -n $ns get deploy slurm-bridge-scheduler -o json |
  jq -e '.spec.replicas == 1 and .spec.template.spec.containers[0].readinessProbe.httpGet.path == \"/readyz\"' >/dev/null"
check "the config is revision 2's (jobPollInterval 1s)" sh -c "kubectl -n $ns get cm slurm-bridge-config -o jsonpath='{.data.config\.yaml}' | grep -q 'jobPollInterval: \"\\?1s'"
check "the webhook's certificate is still the first one" same "$(pair)" "$pair_before"
for d in "${deploys[@]}"; do check "$d: rolled, Ready" rolled_out "$d"; done

# --- 8. helm test ---------------------------------------------------------------------------------
step "helm test: the chart's test pod, placed by the bridge"
check "helm test slurm-bridge" helm_ok "$helm" test slurm-bridge -n "$ns" --timeout 3m --logs
sed 's/^/  | /' "$base/helm.out"
check "the test pod ran the chart's image: slurm-bridge version says $image_tag" \
  grep -q "slurm-bridge.*$image_tag" "$base/helm.out"
test_job=$(kubectl -n "$ns" get events --field-selector involvedObject.name=slurm-bridge-test,reason=Scheduled -o json |
  jq -r '[.items[] | select(.source.component == "slurm-bridge-scheduler") | .message | capture("Slurm job (?<j>[0-9]+)").j] | last // ""')
check "the test pod was Scheduled by the bridge through Slurm job ${test_job:-?}" [ -n "$test_job" ]
test_pod_gone() { ! k -n "$ns" get pod slurm-bridge-test; }
wait_for 60 test_pod_gone
check "the test pod is deleted after it succeeded (hook-delete-policy)" test_pod_gone

# --- 9. helm uninstall --------------------------------------------------------------------------
step "helm uninstall"
check "helm uninstall slurm-bridge" helm_ok "$helm" uninstall slurm-bridge -n "$ns" --wait --timeout 5m
no_pods() { [ -z "$(k -n "$ns" get pods -o name)" ]; }
wait_for 300 no_pods
check "no bridge pod left" no_pods
check "no release left (helm list -A)" [ -z "$("$helm" list -A -q)" ]
listable=$(k api-resources --verbs=list -o name | grep -v '^events' | paste -sd,)
labelled_objects() { k get "$listable" -A -l app.kubernetes.io/instance=slurm-bridge -o name; }
none_labelled() { [ -z "$(labelled_objects)" ]; }
wait_for 120 none_labelled
labelled=$(labelled_objects)
check "no object with the release's label left (${labelled//$'\n'/ })" [ -z "$labelled" ]
left=$(k get clusterrole,clusterrolebinding -o name | grep slurm-bridge)
check "no ClusterRole or ClusterRoleBinding of the chart left (${left//$'\n'/ })" [ -z "$left" ]
left=$(k get validatingwebhookconfiguration,mutatingwebhookconfiguration -o name)
check "no webhook configuration left (${left//$'\n'/ })" [ -z "$left" ]
# (What the cluster puts in every namespace stays: its default ServiceAccount, its CA bundles.)
left=$(k -n "$ns" get all,cm,secret,sa,role,rolebinding,pdb -o name | grep -v -e '^configmap/kube-root-ca.crt$' \
  -e '^configmap/openshift-service-ca.crt$' -e '^serviceaccount/default$' -e '^secret/slurm-bridge-token$' \
  -e '^secret/slurm-ca$')
check "namespace $ns holds nothing but the JWT and CA Secrets (${left//$'\n'/ })" [ -z "$left" ]
echo "  kept, as docs/install.md says: namespaces $ns and slurm-bridge, Secret slurm-bridge-token," \
  "$(k -n "$ns" get lease -o name | paste -sd' '), the nodes' managed-node taint"

echo "$((SECONDS - t0)) s"
[ $fails = 0 ] && echo "PASS" || echo "$fails FAILED"
[ $fails = 0 ]
