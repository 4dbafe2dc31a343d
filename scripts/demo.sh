#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The demo: the seed's flow for real. Installs what is missing, builds, starts a test environment
# with converged nodes (a real Slurm 26.05 and kube-apiserver on loopback; every Slurm node also
# runs a real kubelet with its own containerd), installs the bridge with its Helm chart as a user
# does (`helm install` of helm/slurm-bridge with the seed's --set line, real Helm 4 from
# testenv/helm/ensure-helm.sh, plus what this environment needs: testenv/kube/chart-lib.sh; the
# image from scripts/build-image.sh imported into the nodes), sees the three Deployments Running in
# namespace slinky, applies the seed's YOLO GPU pod as its offline
# stand-in (examples/yolo-benchmark-standin.yaml: the seed's name, labels, scheduler, restart
# policy and GPU request; an image that exists here) in the managed namespace slurm-bridge, and
# shows: the Slurm job Slurm made for it, the pod bound to that job's node, the kubelet starting
# the container, the pod's events, the container's own output (node, Slurm job, GPU index, a CPU
# benchmark), and the Slurm job ended after the pod completed.
# With --keep the environment stays up and the script prints how to use it.
# SB_DEMO_SKIP_SETUP=1 skips install/prepare/build (the test that runs the demo has done them);
# SB_BINARY names the slurm-bridge binary (default build/slurm-bridge).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/testenv/lib.sh"
keep=0
[ "${1:-}" = --keep ] && keep=1
if [ "${SB_DEMO_SKIP_SETUP:-0}" != 1 ]; then
  "$root/scripts/install-deps.sh" >/dev/null
  "$root/scripts/prepare-testenv.sh"
  # Only the binary the demo runs (not the tests and benchmarks: a first run's build is a third).
  SB_BUILD_TARGETS=${SB_BUILD_TARGETS:-slurm-bridge} "$root/scripts/build.sh" >/dev/null
fi
bin=${SB_BINARY:-$root/build/slurm-bridge}
run_dir=${SB_DEMO_DIR:-$root/.testenv/demo}
"$root/testenv/down.sh" "$run_dir/env" >/dev/null 2>&1 || true  # a kept demo from before
rm -rf "$run_dir"
mkdir -p "$run_dir"
ROOT=$root BASE=$run_dir BINARY=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
. "$root/testenv/kube/chart-lib.sh"
[ $keep = 1 ] || trap chart_stop EXIT
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

echo "== building the image (scripts/build-image.sh) and starting the environment"
chart_image >/dev/null
chart_env
env_file=$BASE/env/env
slurm() { "$root/testenv/slurm/exec.sh" "$BASE/env" "$@"; }

echo
echo "== slurm-bridge: $("$bin" version), images ${image_repo[scheduler]%-scheduler}-{scheduler,controllers,admission}:$image_tag"
echo "== Slurm: slurmrestd $SLURM_REST_URL ($SLURM_REST_API)"
slurm sinfo -N -o '%N %T %c CPUs %m MB %G' | indent
echo "== Kubernetes: kube-apiserver $KUBE_APISERVER_URL, nodes (a kubelet beside each slurmd)"
kubectl get nodes -L slinky.slurm.net/slurm-nodename | indent
echo "== helm install slurm-bridge helm/slurm-bridge --namespace slinky --create-namespace --set config.slurmRestApi=$SLURM_REST_URL --set config.partition=$SLURM_PARTITION"
echo "   ($("$helm" version --short); plus what this environment needs, -f values.yaml: hostNetwork,"
echo "   free ports, the apiserver's address, the imported image: testenv/kube/chart-lib.sh)"
chart_helm install --create-namespace >"$run_dir/helm.out" 2>&1 || { cat "$run_dir/helm.out"; die "helm install failed"; }
sed -n '/^NAME:\|^NAMESPACE:\|^STATUS:\|^REVISION:/p' "$run_dir/helm.out" | indent
echo "== kubectl -n slinky create secret generic slurm-bridge-token --from-literal=auth-token=<the environment's JWT>"
jwt_secret || die "creating the JWT Secret failed"
echo "== kubectl create namespace slurm-bridge   (the managed namespace: its pods go to the bridge)"
kubectl create namespace slurm-bridge >/dev/null || die "creating namespace slurm-bridge failed"
wait_for 300 all_rolled_out || { kubectl -n slinky get pods -o wide; die "the bridge's pods did not get Ready"; }
echo "== kubectl get pods -n slinky"
kubectl -n slinky get pods -o wide | indent

ns=slurm-bridge
pod=yolo-benchmark-slurm-bridge
echo "== kubectl apply -f examples/yolo-benchmark-standin.yaml (the seed's pod, offline image)"
kubectl -n $ns apply -f "$root/examples/yolo-benchmark-standin.yaml" | indent
# The pod's field at jsonpath $1 once set (60 s at most); "" when it never was.
pod_field() {
  local v= _
  for _ in $(seq 1 600); do
    v=$(kubectl -n $ns get pod "$pod" -o jsonpath="$1")
    [ -n "$v" ] && break
    sleep 0.1
  done
  echo "$v"
}
job=$(pod_field '{.metadata.labels.scheduler\.slinky\.slurm\.net/slurm-jobid}')
[ -n "$job" ] || { echo "no Slurm job for the pod; scheduler log:"; kubectl -n slinky logs deploy/slurm-bridge-scheduler; exit 1; }
echo "== the Slurm job for the pod: $job"
slurm squeue -j "$job" -o '%i %j %T %N %b %R' | indent
node=$(pod_field '{.spec.nodeName}')
[ -n "$node" ] || { echo "the pod was not bound; scheduler log:"; kubectl -n slinky logs deploy/slurm-bridge-scheduler; exit 1; }
echo "== bound to $node; Slurm's allocation (job $job, GPU index as the container sees it):"
slurm scontrol show job -d "$job" | grep -E 'JobState|Nodes=.*(GRES|IDX)' | indent
echo "== waiting for the kubelet to run the container"
phase=
for _ in $(seq 1 1800); do
  phase=$(kubectl -n $ns get pod "$pod" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  case "$phase" in Succeeded | Failed) break ;; esac
  sleep 0.1
done
kubectl -n $ns get pod "$pod" -o wide | indent
echo "== the pod's events (scheduler, then kubelet)"
kubectl -n $ns get events --field-selector "involvedObject.name=$pod" --sort-by=.metadata.creationTimestamp \
  -o custom-columns=TYPE:.type,REASON:.reason,FROM:.source.component,MESSAGE:.message | indent
echo "== kubectl logs -n $ns $pod (the container's own output)"
kubectl -n $ns logs "$pod" | indent
case "$phase" in Succeeded | Failed) ;; *)
  echo "the container did not finish (phase ${phase:-unknown}); scheduler log:"
  kubectl -n slinky logs deploy/slurm-bridge-scheduler
  exit 1 ;;
esac
echo "== the Slurm job after the pod completed (the controllers release it)"
state=
for _ in $(seq 1 300); do
  state=$(slurm scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case "$state" in RUNNING | PENDING | "") sleep 0.1 ;; *) break ;; esac
done
slurm scontrol show job "$job" | grep -E 'JobId|JobState' | indent
# When each ended, as Unix seconds: the job must not end before the container it held the node
# for (tests/e2e/demo_test.sh checks it).
finished=$(kubectl -n $ns get pod "$pod" -o jsonpath='{.status.containerStatuses[0].state.terminated.finishedAt}' 2>/dev/null || true)
ended=$(slurm env SLURM_TIME_FORMAT=%s scontrol show job "$job" 2>/dev/null | sed -n 's/.*EndTime=\([0-9]*\).*/\1/p')
echo "== the container finished at $(date -u -d "${finished:-@0}" +%s 2>/dev/null || echo 0), the Slurm job ended at ${ended:-0}"
echo "== kubectl get pods -n $ns"
kubectl -n $ns get pods -o wide 2>&1 | indent

if [ $keep = 1 ]; then
  echo
  echo "The environment and the bridge (pods in namespace slinky) stay up."
  echo "Use it with:  set -a; . $env_file; set +a; PATH=\$KUBE_BIN_DIR:\$PATH   (its kubectl)"
  echo "Its Helm:     $helm -n slinky list     (then helm upgrade, helm test slurm-bridge, ...)"
  echo "Stop it with: kill $binder_pid; $root/testenv/down.sh $run_dir/env"
fi
