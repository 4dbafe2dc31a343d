#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The chart's identities in a test environment (issue #44: every e2e bridge runs with them, never
# with the admin's token). `helm template` (the pinned Helm of testenv/helm/ensure-helm.sh)
# renders helm/slurm-bridge as an install would (release slurm-bridge, namespace
# slurm-bridge-system, leader election on, no cert-manager); its ServiceAccounts, ClusterRoles,
# ClusterRoleBindings, Roles and RoleBindings are applied for real and nothing else. Then, for
# each component, a token of its ServiceAccount from the TokenRequest API (what the kubelet
# projects into its pod) and a kubeconfig with it:
#   kubeconfig.scheduler    slurm-bridge-scheduler     `slurm-bridge scheduler`
#   kubeconfig.controllers  slurm-bridge-controllers   `slurm-bridge controllers`
#   kubeconfig.admission    slurm-bridge-admission     `slurm-bridge admission`
#   kubeconfig.all          slurm-bridge-all           `slurm-bridge all`: the chart deploys no
#                           such process; this ServiceAccount (the environment's own) is bound to
#                           the three ClusterRoles above and to nothing else.
#   kubeconfig.epilog       slurm-bridge-epilog        `slurm-bridge epilog` on the slurmd nodes
#                           (the chart's epilog.rbac.create: list pods, get nodes); up.sh gives
#                           its token to the Epilog.
# The Leases: each component's Role allows its own Lease in slurm-bridge-system only
# (LEADER_ELECTION_NAMESPACE); slurm-bridge-all gets the scheduler's and the controllers' Roles.
#
# Usage: chart-identities.sh RUN_DIR   (after kube-apiserver is up and RUN_DIR/env has
#        KUBECONFIG, KUBE_APISERVER_URL, KUBE_CA_FILE, KUBE_BIN_DIR); prints the env lines to add.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$here/.." && pwd)
run_dir=${1:?usage: chart-identities.sh RUN_DIR}
# shellcheck disable=SC1091
. "$run_dir/env"
K=$run_dir/kube
ns=slurm-bridge-system
kubectl() { KUBECONFIG="$KUBECONFIG" "$KUBE_BIN_DIR/kubectl" "$@"; }
die() { echo "chart-identities: $*" >&2; exit 1; }

helm=$("$here/helm/ensure-helm.sh") || die "no Helm (testenv/helm/ensure-helm.sh)"
export HELM_CONFIG_HOME=$K/helm/config HELM_CACHE_HOME=$K/helm/cache HELM_DATA_HOME=$K/helm/data
"$helm" template slurm-bridge "$root/helm/slurm-bridge" --namespace "$ns" \
  --set admission.certManager.enabled=false --set scheduler.leaderElect=true \
  --set controllers.leaderElect=true --set epilog.rbac.create=true >"$K/chart-rendered.yaml" ||
  die "helm template of helm/slurm-bridge failed"
python3 "$here/helm/rbac-only.py" <"$K/chart-rendered.yaml" >"$K/chart-rbac.yaml" ||
  die "keeping the chart's RBAC failed"
kubectl create namespace "$ns" >/dev/null
kubectl apply -f "$K/chart-rbac.yaml" >"$K/chart-rbac.out" 2>&1 ||
  die "applying the chart's RBAC failed: $(cat "$K/chart-rbac.out")"

# slurm-bridge-all: the union of the chart's component roles (and their Lease Roles).
{
  cat <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: slurm-bridge-all, namespace: $ns}
EOF
  for c in scheduler controllers admission; do
    cat <<EOF
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: slurm-bridge-all-as-$c}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: slurm-bridge-$c}
subjects: [{kind: ServiceAccount, name: slurm-bridge-all, namespace: $ns}]
EOF
  done
  for c in scheduler controllers; do
    cat <<EOF
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: slurm-bridge-all-as-$c-leader-election, namespace: $ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: slurm-bridge-$c-leader-election}
subjects: [{kind: ServiceAccount, name: slurm-bridge-all, namespace: $ns}]
EOF
  done
} >"$K/chart-all.yaml"
kubectl apply -f "$K/chart-all.yaml" >"$K/chart-all.out" 2>&1 ||
  die "applying slurm-bridge-all failed: $(cat "$K/chart-all.out")"

for c in scheduler controllers admission all epilog; do
  sa=slurm-bridge-$c
  kubectl -n "$ns" get serviceaccount "$sa" >/dev/null 2>&1 || die "the chart rendered no ServiceAccount $sa"
  (umask 077 && kubectl -n "$ns" create token "$sa" --duration 48h >"$K/token.$sa") ||
    die "no token for ServiceAccount $sa"
  (umask 077 && sed -e "s|tokenFile: .*|tokenFile: $K/token.$sa|" \
    -e "s|^- name: admin\$|- name: $sa|" -e "s|user: admin\$|user: $sa|" "$KUBECONFIG" >"$K/kubeconfig.$c")
  key=$(tr '[:lower:]' '[:upper:]' <<<"$c")
  echo "KUBECONFIG_$key=$K/kubeconfig.$c"
done
echo "LEADER_ELECTION_NAMESPACE=$ns"
