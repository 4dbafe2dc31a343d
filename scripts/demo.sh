#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The demo: the seed's flow for real. Installs what is missing, builds, starts a test environment
# with converged nodes (a real Slurm 26.05 and kube-apiserver on loopback; every Slurm node also
# runs a real kubelet with its own containerd), starts `slurm-bridge all` (scheduler and
# controllers) and `slurm-bridge admission` (the webhook, registered with the apiserver), applies
# the seed's YOLO GPU pod as its offline stand-in (examples/yolo-benchmark-standin.yaml: the seed's
# name, labels, scheduler, restart policy and GPU request; an image that exists here) and shows:
# the Slurm job Slurm made for it, the pod bound to that job's node, the kubelet starting the
# container, the pod's events, the container's own output (node, Slurm job, GPU index, a CPU
# benchmark), and the Slurm job ended after the pod completed.
# With --keep the environment and the bridge stay up and the script prints how to use them.
# SB_DEMO_SKIP_SETUP=1 skips install/prepare/build (the test that runs the demo has done them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/testenv/lib.sh"
keep=0
[ "${1:-}" = --keep ] && keep=1
if [ "${SB_DEMO_SKIP_SETUP:-0}" != 1 ]; then
  "$root/scripts/install-deps.sh" >/dev/null
  "$root/scripts/prepare-testenv.sh"
  "$root/scripts/build.sh" >/dev/null
fi
bin=${SB_BINARY:-$root/build/slurm-bridge}
run_dir=${SB_DEMO_DIR:-$root/.testenv/demo}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  "$root/testenv/down.sh" "$run_dir"
}
[ $keep = 1 ] || trap cleanup EXIT
indent() { sed 's/^/   /'; }

# The stand-in keeps what the seed's manifest says about scheduling.
python3 - "$root/examples/yolo-benchmark-slurm-bridge.yaml" "$root/examples/yolo-benchmark-standin.yaml" <<'PY'
import sys, yaml
seed, stand = (yaml.safe_load(open(f)) for f in sys.argv[1:3])
def keep(p):
    c = p["spec"]["containers"][0]
    return (p["metadata"]["name"], p["metadata"]["labels"], p["spec"]["schedulerName"],
            p["spec"]["restartPolicy"], c["resources"])
if keep(seed) != keep(stand):
    sys.exit("examples/yolo-benchmark-standin.yaml no longer matches the seed's pod")
PY

env_file=$("$root/testenv/up.sh" --kubelets --run-dir "$run_dir")
set -a; . "$env_file"; set +a
slurm() { "$root/testenv/slurm/exec.sh" "$run_dir" "$@"; }

echo
echo "== slurm-bridge: $("$bin" version)"
echo "== Slurm: slurmrestd $SLURM_REST_URL ($SLURM_REST_API)"
slurm sinfo -N -o '%N %T %c CPUs %m MB %G' | indent
echo "== Kubernetes: kube-apiserver $KUBE_APISERVER_URL, nodes (a kubelet beside each slurmd)"
kubectl get nodes -L slinky.slurm.net/slurm-nodename | indent

cat >"$run_dir/config.yaml" <<YAML
schedulerName: slurm-bridge-scheduler
slurmRestApi: $SLURM_REST_URL
partition: $SLURM_PARTITION
mcsLabel: kubernetes
managedNamespaces: [default]
YAML
echo "== starting: slurm-bridge all --config $run_dir/config.yaml (scheduler + controllers)"
"$bin" all --config "$run_dir/config.yaml" --health-probe-bind-address 127.0.0.1:0 \
  --metrics-bind-address 127.0.0.1:0 >"$run_dir/bridge.log" 2>&1 &
pids+=($!)

# The webhook over TLS with a throw-away CA, registered by URL (no Service here).
port=$(free_port)
health=$(free_port)
certs="$run_dir/webhook-certs"
mkdir -p "$certs"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=demo-ca -keyout "$certs/ca.key" \
  -out "$certs/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$certs/tls.key" \
  -out "$certs/tls.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$certs/san.ext"
openssl x509 -req -in "$certs/tls.csr" -CA "$certs/ca.crt" -CAkey "$certs/ca.key" -CAcreateserial \
  -days 1 -extfile "$certs/san.ext" -out "$certs/tls.crt" 2>/dev/null
echo "== starting: slurm-bridge admission --bind-address 127.0.0.1:$port (the webhook)"
# The bridge runs with the environment's admin account (group system:masters): it may write the
# bridge's label and annotations.
"$bin" admission --config "$run_dir/config.yaml" --bind-address "127.0.0.1:$port" \
  --health-probe-bind-address "127.0.0.1:$health" --cert-file "$certs/tls.crt" \
  --key-file "$certs/tls.key" --privileged-group system:masters >"$run_dir/admission.log" 2>&1 &
pids+=($!)
wait_for 30 curl -sf "http://127.0.0.1:$health/readyz" >/dev/null ||
  { echo "the webhook did not get ready:"; cat "$run_dir/admission.log"; exit 1; }
ca=$(base64 -w0 "$certs/ca.crt")
kubectl label namespace default slurm-bridge.demo/webhook=on --overwrite >/dev/null
for kind in Mutating Validating; do
  path=/mutate--v1-pod
  resources='["pods"]'
  if [ $kind = Validating ]; then path=/validate--v1-pod; resources='["pods","pods/status"]'; fi
  kubectl apply -f - >/dev/null <<JSON
{"apiVersion":"admissionregistration.k8s.io/v1","kind":"${kind}WebhookConfiguration",
 "metadata":{"name":"slurm-bridge-demo"},
 "webhooks":[{"name":"pods.slurm-bridge.demo","admissionReviewVersions":["v1"],
   "sideEffects":"None","failurePolicy":"Fail","timeoutSeconds":10,
   "clientConfig":{"url":"https://127.0.0.1:$port$path","caBundle":"$ca"},
   "namespaceSelector":{"matchLabels":{"slurm-bridge.demo/webhook":"on"}},
   "rules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE","UPDATE"],
             "resources":$resources,"scope":"Namespaced"}]}]}
JSON
done

pod=yolo-benchmark-slurm-bridge
echo "== kubectl apply -f examples/yolo-benchmark-standin.yaml (the seed's pod, offline image)"
kubectl apply -f "$root/examples/yolo-benchmark-standin.yaml" | indent
# The pod's field at jsonpath $1 once set (60 s at most); "" when it never was.
pod_field() {
  local v= _
  for _ in $(seq 1 600); do
    v=$(kubectl get pod "$pod" -o jsonpath="$1")
    [ -n "$v" ] && break
    sleep 0.1
  done
  echo "$v"
}
job=$(pod_field '{.metadata.labels.scheduler\.slinky\.slurm\.net/slurm-jobid}')
[ -n "$job" ] || { echo "no Slurm job for the pod; bridge log:"; cat "$run_dir/bridge.log"; exit 1; }
echo "== the Slurm job for the pod: $job"
slurm squeue -j "$job" -o '%i %j %T %N %b %R' | indent
node=$(pod_field '{.spec.nodeName}')
[ -n "$node" ] || { echo "the pod was not bound; bridge log:"; cat "$run_dir/bridge.log"; exit 1; }
echo "== bound to $node; Slurm's allocation (job $job, GPU index as the container sees it):"
slurm scontrol show job -d "$job" | grep -E 'JobState|Nodes=.*(GRES|IDX)' | indent
echo "== waiting for the kubelet to run the container"
phase=
for _ in $(seq 1 1800); do
  phase=$(kubectl get pod "$pod" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  case "$phase" in Succeeded | Failed) break ;; esac
  sleep 0.1
done
kubectl get pod "$pod" -o wide | indent
echo "== the pod's events (scheduler, then kubelet)"
kubectl get events --field-selector "involvedObject.name=$pod" --sort-by=.metadata.creationTimestamp \
  -o custom-columns=TYPE:.type,REASON:.reason,FROM:.source.component,MESSAGE:.message | indent
echo "== kubectl logs $pod (the container's own output)"
kubectl logs "$pod" | indent
case "$phase" in Succeeded | Failed) ;; *)
  echo "the container did not finish (phase ${phase:-unknown}); bridge log:"
  cat "$run_dir/bridge.log"
  exit 1 ;;
esac
echo "== the Slurm job after the pod completed (the controllers release it)"
state=
for _ in $(seq 1 300); do
  state=$(slurm scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case "$state" in RUNNING | PENDING | "") sleep 0.1 ;; *) break ;; esac
done
slurm scontrol show job "$job" | grep -E 'JobId|JobState' | indent
echo "== kubectl get pods"
kubectl get pods -o wide 2>&1 | indent

if [ $keep = 1 ]; then
  echo
  echo "The environment and the bridge (pids ${pids[*]}) stay up."
  echo "Use it with:  set -a; . $env_file; set +a"
  echo "Stop it with: kill ${pids[*]}; $root/testenv/down.sh $run_dir"
fi
