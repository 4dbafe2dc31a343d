#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The demo: installs what is missing, builds, starts a test environment (a real Slurm 26.05 and a
# real kube-apiserver on loopback, with Kubernetes nodes n1..n4 standing for the kubelets of the
# Slurm nodes), starts `slurm-bridge scheduler`, applies the seed's YOLO GPU pod
# (examples/yolo-benchmark-slurm-bridge.yaml, schedulerName slurm-bridge-scheduler,
# nvidia.com/gpu: 1) and shows it bound to the node Slurm chose, with the Slurm job, its GPU
# index and the pod's events. There is no kubelet, so the container itself does not start.
# With --keep the environment and the scheduler stay up and the script prints how to use them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
keep=0
[ "${1:-}" = --keep ] && keep=1
"$root/scripts/install-deps.sh" >/dev/null
"$root/scripts/prepare-testenv.sh"
"$root/scripts/build.sh" >/dev/null
run_dir=${SB_DEMO_DIR:-$root/.testenv/demo}
sched_pid=
cleanup() {
  [ -n "$sched_pid" ] && kill "$sched_pid" 2>/dev/null && wait "$sched_pid" 2>/dev/null
  "$root/testenv/down.sh" "$run_dir"
}
[ $keep = 1 ] || trap cleanup EXIT
env_file=$("$root/testenv/up.sh" --run-dir "$run_dir")
set -a; . "$env_file"; set +a
H=(-H "X-SLURM-USER-TOKEN: $(cat "$SLURM_JWT_FILE")")
slurm() { "$root/testenv/slurm/exec.sh" "$run_dir" "$@"; }

echo
echo "== slurm-bridge: $("$root/build/slurm-bridge" version)"
echo "== Slurm: slurmrestd $SLURM_REST_URL ($SLURM_REST_API)"
slurm sinfo -N -o '   %N %T %c CPUs %m MB %G' | sed 's/^/   /'
echo "== Kubernetes: kube-apiserver $KUBE_APISERVER_URL"
"$root/testenv/kube/register-nodes.sh" "$env_file" | sed 's/^/   /'

cat >"$run_dir/config.yaml" <<YAML
schedulerName: slurm-bridge-scheduler
slurmRestApi: $SLURM_REST_URL
partition: $SLURM_PARTITION
mcsLabel: kubernetes
YAML
echo "== starting: slurm-bridge scheduler --config $run_dir/config.yaml"
"$root/build/slurm-bridge" scheduler --config "$run_dir/config.yaml" >"$run_dir/scheduler.log" 2>&1 &
sched_pid=$!

echo "== kubectl apply -f examples/yolo-benchmark-slurm-bridge.yaml"
kubectl apply -f "$root/examples/yolo-benchmark-slurm-bridge.yaml" | sed 's/^/   /'
pod=yolo-benchmark-slurm-bridge
for _ in $(seq 1 300); do
  node=$(kubectl get pod "$pod" -o jsonpath='{.spec.nodeName}')
  [ -n "$node" ] && break
  sleep 0.1
done
[ -n "$node" ] || { echo "the pod was not bound; scheduler log:"; cat "$run_dir/scheduler.log"; exit 1; }
job=$(kubectl get pod "$pod" -o jsonpath='{.metadata.labels.scheduler\.slinky\.slurm\.net/slurm-jobid}')
echo
echo "== pod $pod is bound to node $node by Slurm job $job"
kubectl get pod "$pod" -o wide | sed 's/^/   /'
echo "== the Slurm job"
slurm squeue -j "$job" -o '%i %j %T %N %b %R' | sed 's/^/   /'
curl -s "${H[@]}" "$SLURM_REST_URL/slurm/$SLURM_REST_API/resources/$job" |
  jq -r '.nodes[]? | "   node \(.node): " + ([.gres[]? | "\(.name):\(.type) x\(.count) index \(.index)"] | join(", "))' ||
  slurm scontrol show job -d "$job" | grep -E 'Nodes=.*GRES' | sed 's/^/   /'
echo "== kubectl describe pod $pod (events)"
kubectl describe pod "$pod" | sed -n '/^Events:/,$p' | sed 's/^/   /'

if [ $keep = 1 ]; then
  echo
  echo "The environment and the scheduler (pid $sched_pid) stay up."
  echo "Use it with:  set -a; . $env_file; set +a"
  echo "Stop it with: kill $sched_pid; $root/testenv/down.sh $run_dir"
fi
