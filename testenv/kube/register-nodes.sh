#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# testenv/kube/register-nodes.sh ENV_FILE [NAME[=SLURM_NAME] ...]
#
# Registers Kubernetes Node objects for the test environment's Slurm nodes, as the kubelets of a
# Converged cluster would: Ready, with the Slurm node's CPUs, memory and GPUs as capacity. There
# is no kubelet here, so nothing runs the pods; the node objects are what the bridge reads.
# Without names, every node of SLURM_NODES is registered under its own name. NAME=SLURM_NAME
# registers NAME with the slinky.slurm.net/slurm-nodename label set to SLURM_NAME.
set -euo pipefail
env_file=${1:?usage: register-nodes.sh ENV_FILE [NAME[=SLURM_NAME] ...]}
shift
# shellcheck disable=SC1090
source "$env_file"
export KUBECONFIG
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  IFS=, read -r -a names <<<"$SLURM_NODES"
fi
for spec in "${names[@]}"; do
  name=${spec%%=*}
  slurm_name=
  [[ $spec == *=* ]] && slurm_name=${spec#*=}
  labels="\"kubernetes.io/hostname\":\"$name\""
  [[ -n $slurm_name ]] && labels+=",\"slinky.slurm.net/slurm-nodename\":\"$slurm_name\""
  kubectl apply -f - >/dev/null <<JSON
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$name","labels":{$labels}}}
JSON
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  resources='{"cpu":"8","memory":"16000Mi","nvidia.com/gpu":"4","pods":"110"}'
  kubectl patch node "$name" --subresource=status --type=merge -p "{\"status\":{
    \"capacity\":$resources,\"allocatable\":$resources,
    \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",
      \"message\":\"registered by the test environment\",\"lastHeartbeatTime\":\"$now\",
      \"lastTransitionTime\":\"$now\"}]}}" >/dev/null 2>&1 ||
    # kubectl older than 1.24 has no --subresource: PATCH the status through the raw API.
    kubectl get --raw "/api/v1/nodes/$name" >/dev/null &&
    curl -sf --cacert "$KUBE_CA_FILE" -H "Authorization: Bearer $(cat "$KUBE_TOKEN_FILE")" \
      -H 'Content-Type: application/merge-patch+json' -X PATCH \
      "$KUBE_APISERVER_URL/api/v1/nodes/$name/status" -d "{\"status\":{
    \"capacity\":$resources,\"allocatable\":$resources,
    \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",
      \"message\":\"registered by the test environment\",\"lastHeartbeatTime\":\"$now\",
      \"lastTransitionTime\":\"$now\"}]}}" >/dev/null
  echo "node $name${slurm_name:+ (Slurm $slurm_name)} registered"
done
