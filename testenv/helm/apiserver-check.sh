#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Checks the chart against a real kube-apiserver (the test environment's; RBAC on), rendered by
# real Helm (the pinned Helm 4 of testenv/helm/ensure-helm.sh) with `helm template
# --dry-run=server`: the server's version and API groups as .Capabilities, `lookup` answered by
# the server.
#   1. `kubectl apply --dry-run=server` of every object the chart renders, the `helm test` pod
#      included, for several value sets (defaults with cert-manager off, leader election with 2
#      replicas and PDBs, the values files of upstream 1.2 and 1.3 users). cert-manager objects
#      only when its CRDs are served.
#   2. `lookup`: with the webhook's Secret in the namespace (as an install leaves it), an
#      upgrade's render (--is-upgrade) keeps its pair, in the Secret and in both webhooks'
#      caBundle (upstream minted a new CA on every upgrade).
#   3. RBAC, enforced by the apiserver's authorizer: the chart's ServiceAccounts, roles and
#      bindings are applied for real, then `kubectl auth can-i --as=<each ServiceAccount>` must
#      answer yes for every rule each component needs and no for requests outside its role.
# Everything it creates has a unique name (nameOverride, schedulerName, namespace) and is
# deleted at the end. It installs no release: no webhook of it is ever registered in the shared
# environment (tests/e2e/chart_incluster_test.sh installs one in a cluster of its own).
#
# Usage: apiserver-check.sh ENV_FILE     (ENV_FILE: the `env` that testenv/up.sh writes)
set -euo pipefail
env_file=${1:?usage: apiserver-check.sh ENV_FILE}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck disable=SC1090
. "$env_file"
export KUBECONFIG PATH="$KUBE_BIN_DIR:$PATH"
work=$(mktemp -d "${TMPDIR:-/tmp}/sb-chart-check.XXXXXX")
id="sbchk$$"
ns="$id-ns"
cleanup() {
  if [ -f "$work/rbac.yaml" ]; then
    kubectl delete --ignore-not-found --wait=false -f "$work/rbac.yaml" >/dev/null 2>&1 || true
  fi
  kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

helm=$("$here/ensure-helm.sh") || exit 1
export HELM_CONFIG_HOME=$work/helm/config HELM_CACHE_HOME=$work/helm/cache HELM_DATA_HOME=$work/helm/data
server=$(kubectl version -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["serverVersion"]["gitVersion"])')
echo "kube-apiserver $server"
kubectl create namespace "$ns" >/dev/null
# The apiserver labels it kubernetes.io/metadata.name (1.21 on), which the webhooks' selector uses.
[ "$(kubectl get namespace "$ns" -o jsonpath='{.metadata.labels.kubernetes\.io/metadata\.name}')" = "$ns" ] ||
  fail "namespace $ns lacks its kubernetes.io/metadata.name label"

names=(--set "nameOverride=$id" --set "schedulerConfig.schedulerName=$id-scheduler")
render() { "$helm" template "$id" "$root/helm/slurm-bridge" --namespace "$ns" --dry-run=server "${names[@]}" "$@"; }
have_cm=0
kubectl api-resources --api-group=cert-manager.io -o name 2>/dev/null | grep -q . && have_cm=1

dry_run() { # NAME RENDER_ARGS...
  local name=$1; shift
  render "$@" >"$work/$name.yaml"
  if [ $have_cm = 0 ]; then
    python3 - "$work/$name.yaml" <<'EOF'
import sys, yaml
p = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(p)) if d and not d["apiVersion"].startswith("cert-manager.io/")]
yaml.safe_dump_all(docs, open(p, "w"))
EOF
  fi
  local n
  n=$(grep -c '^kind:' "$work/$name.yaml")
  if kubectl apply --dry-run=server -f "$work/$name.yaml" >"$work/$name.out" 2>&1; then
    echo "ok   dry-run $name: $n objects accepted"
  else
    fail "dry-run $name:"; cat "$work/$name.out"
  fi
}
dry_run defaults --set admission.certManager.enabled=false
[ $have_cm = 1 ] && dry_run cert-manager
dry_run leader-election --set admission.certManager.enabled=false \
  --set scheduler.replicaCount=2 --set scheduler.leaderElect=true \
  --set controllers.replicas=2 --set controllers.leaderElect=true \
  --set scheduler.pdb.enabled=true --set controllers.pdb.enabled=true \
  --set admission.pdb.enabled=true --set admission.pdb.maxUnavailable=1
dry_run upstream-1.2 -f "$root/tests/chart/testdata/upstream-1.2-values.yaml" \
  --set namespaceOverride="$ns"
dry_run upstream-1.3 -f "$root/tests/chart/testdata/upstream-1.3-values.yaml" \
  --set admission.certManager.enabled=false

# lookup, for real: the Secret an install made is kept by an upgrade's render.
adm="$id-admission"
secret_of() { python3 -c '
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
s = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == sys.argv[2]]
hooks = [w["clientConfig"]["caBundle"] for d in docs if d["kind"].endswith("WebhookConfiguration")
         for w in d["webhooks"]]
print(json.dumps({"secret": s[0] if s else None, "caBundles": sorted(set(hooks))}))
' "$@"; }
render --set admission.certManager.enabled=false --show-only templates/admission/webhook.yaml >"$work/first.yaml"
secret_of "$work/first.yaml" "$adm" | jq '.secret' >"$work/secret.json"
if jq -e '.data["ca.crt"] | length > 100' "$work/secret.json" >/dev/null; then
  # As an install leaves it: Helm's ownership annotations (an upgrade adopts only objects of the
  # release; helm template --dry-run=server checks that too).
  jq --arg r "$id" --arg n "$ns" '.metadata.annotations = {"meta.helm.sh/release-name": $r,
    "meta.helm.sh/release-namespace": $n}' "$work/secret.json" | kubectl apply -f - >/dev/null
  render --set admission.certManager.enabled=false --is-upgrade \
    --show-only templates/admission/webhook.yaml >"$work/upgrade.yaml"
  got=$(secret_of "$work/upgrade.yaml" "$adm")
  if jq -e --slurpfile s "$work/secret.json" '.secret.data == $s[0].data' <<<"$got" >/dev/null; then
    echo "ok   lookup: an upgrade's render keeps the webhook's Secret $adm"
  else
    fail "lookup: an upgrade's render minted a new pair for Secret $adm"
  fi
  if jq -e --slurpfile s "$work/secret.json" '.caBundles == [$s[0].data["ca.crt"]]' <<<"$got" >/dev/null; then
    echo "ok   lookup: both webhooks' caBundle is the kept CA"
  else
    fail "lookup: the webhooks' caBundle is not the kept CA ($(jq -c .caBundles <<<"$got"))"
  fi
else
  fail "lookup: no Secret $adm rendered with admission.certManager.enabled=false"
fi

# RBAC for real, then ask the authorizer as each ServiceAccount.
render --set admission.certManager.enabled=false --set scheduler.leaderElect=true \
  --set controllers.leaderElect=true --set epilog.rbac.create=true |
  python3 "$here/rbac-only.py" >"$work/rbac.yaml"
kubectl apply -f "$work/rbac.yaml" >/dev/null
sleep 1 # the authorizer's informers
can() { # WANT(yes|no) SA VERB RESOURCE [kubectl auth can-i args...]
  local want=$1 sa=$2; shift 2
  local got
  got=$(kubectl auth can-i --as="system:serviceaccount:$ns:$sa" "$@" 2>/dev/null || true)
  if [ "$got" = "$want" ]; then
    echo "ok   $sa: can-i $* = $got"
  else
    fail "$sa: can-i $* = $got, want $want"
  fi
}
s="$id-scheduler" c="$id-controllers" a="$id-admission"
for v in get list watch patch; do can yes "$s" "$v" pods -n default; done
can yes "$s" create pods --subresource=binding -n default
can yes "$s" patch pods --subresource=status -n default
can yes "$s" list nodes
can yes "$s" watch nodes
can yes "$s" create events -n default
can yes "$s" patch events -n default
for r in deployments.apps replicasets.apps statefulsets.apps jobs.batch jobsets.jobset.x-k8s.io \
  leaderworkersets.leaderworkerset.x-k8s.io podgroups.scheduling.x-k8s.io; do
  can yes "$s" get "$r" -n default
done
for r in resourceslices deviceclasses resourceclaimtemplates; do
  for v in get list watch; do can yes "$s" "$v" "$r.resource.k8s.io" -n default; done
done
for v in get list watch create patch update delete; do
  can yes "$s" "$v" resourceclaims.resource.k8s.io -n default
done
can yes "$s" patch resourceclaims.resource.k8s.io --subresource=status -n default
can yes "$s" update resourceclaims.resource.k8s.io --subresource=status -n default
# 1.36's granular status authorization: allocation and reservedFor as resourceclaims/binding.
can yes "$s" patch resourceclaims.resource.k8s.io --subresource=binding -n default
can yes "$s" update resourceclaims.resource.k8s.io --subresource=binding -n default
can yes "$s" get "leases.coordination.k8s.io/$s" -n "$ns"
can yes "$s" update "leases.coordination.k8s.io/$s" -n "$ns"
can yes "$s" create leases.coordination.k8s.io -n "$ns"
# outside the scheduler's role
can no "$s" delete pods -n default
can no "$s" create pods -n default
can no "$s" get secrets -n "$ns"
can no "$s" list deployments.apps -n default
can no "$s" patch nodes
can no "$s" update "leases.coordination.k8s.io/$id-controllers" -n "$ns"
can no "$s" get leases.coordination.k8s.io/other -n "$ns"
can no "$s" create leases.coordination.k8s.io -n default

for v in get list watch patch delete; do can yes "$c" "$v" pods -n default; done
for v in list watch patch; do can yes "$c" "$v" nodes; done
can yes "$c" patch nodes --subresource=status
can yes "$c" get namespaces
for v in get list watch; do can yes "$c" "$v" resourceslices.resource.k8s.io; done
for v in get delete; do can yes "$c" "$v" resourceclaims.resource.k8s.io -n default; done
can yes "$c" create events -n default
can yes "$c" patch events -n default
can yes "$c" get leases.coordination.k8s.io/69d5fe47.my.slinky.slurm.net -n "$ns"
can yes "$c" update leases.coordination.k8s.io/69d5fe47.my.slinky.slurm.net -n "$ns"
# outside the controllers' role
can no "$c" create pods --subresource=binding -n default
can no "$c" delete nodes
can no "$c" list namespaces
can no "$c" get secrets -n "$ns"
can no "$c" get "leases.coordination.k8s.io/$s" -n "$ns"
can no "$c" create resourceclaims.resource.k8s.io -n default

for v in get list watch; do can yes "$a" "$v" namespaces; done
can yes "$a" get deviceclasses.resource.k8s.io
can yes "$a" get resourceclaimtemplates.resource.k8s.io -n default
# outside the admission's role
can no "$a" get pods -n default
can no "$a" get secrets -n "$ns"
can no "$a" create leases.coordination.k8s.io -n "$ns"
can no "$a" patch namespaces
can no "$a" list resourceclaimtemplates.resource.k8s.io -n default

e="$id-epilog"
can yes "$e" list pods --all-namespaces
can yes "$e" get nodes
# outside the epilog's role: it runs as root on every Slurm node
can no "$e" get pods -n default
can no "$e" watch pods --all-namespaces
can no "$e" list nodes
can no "$e" get secrets -n "$ns"
can no "$e" create pods -n default

if [ $fails -gt 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all apiserver checks passed"
