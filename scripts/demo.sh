#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The demo: installs what is missing, builds, starts a test environment (a real Slurm 26.05 and a
# real kube-apiserver on loopback) and shows both alive. Until the scheduler lands (issue #5)
# that is all it does; then it will run the seed's YOLO GPU pod through the bridge.
# With --keep the environment stays up and the script prints how to use and stop it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
keep=0
[ "${1:-}" = --keep ] && keep=1
"$root/scripts/install-deps.sh" >/dev/null
"$root/scripts/prepare-testenv.sh"
"$root/scripts/build.sh" >/dev/null
run_dir=${SB_DEMO_DIR:-$root/.testenv/demo}
[ $keep = 1 ] || trap '"$root/testenv/down.sh" "$run_dir"' EXIT
env_file=$("$root/testenv/up.sh" --run-dir "$run_dir")
set -a; . "$env_file"; set +a
H=(-H "X-SLURM-USER-TOKEN: $(cat "$SLURM_JWT_FILE")")

echo
echo "== slurm-bridge: $("$root/build/slurm-bridge" version)"
echo "== Slurm: slurmrestd $SLURM_REST_URL ($SLURM_REST_API)"
curl -s "${H[@]}" "$SLURM_REST_URL/slurm/$SLURM_REST_API/ping/" |
  jq -r '.pings[] | "   ping \(.hostname): \(.pinged), \(.latency) us"'
curl -s "${H[@]}" "$SLURM_REST_URL/slurm/$SLURM_REST_API/nodes/" |
  jq -r '.nodes[] | "   node \(.name): \(.state | join(",")), \(.cpus) CPUs, \(.real_memory) MB, \(.gres)"'
echo "== Kubernetes: kube-apiserver $KUBE_APISERVER_URL"
curl -s --cacert "$KUBE_CA_FILE" -H "Authorization: Bearer $(cat "$KUBE_TOKEN_FILE")" \
  "$KUBE_APISERVER_URL/version" | jq -r '"   server \(.gitVersion), \(.platform)"'
kubectl get namespaces 2>&1 | sed 's/^/   /'
if [ $keep = 1 ]; then
  echo
  echo "The environment stays up. Use it with:  set -a; . $env_file; set +a"
  echo "Stop it with:                           $root/testenv/down.sh $run_dir"
fi
