# SPDX-License-Identifier: Apache-2.0
#
# The bridge installed by its Helm chart into a test environment of its own, as pods: shared by
# tests/e2e/chart_incluster_test.sh and scripts/demo.sh. Source it with ROOT (the repository),
# BASE (an empty work directory) and BINARY (a slurm-bridge binary) set, then call:
#   chart_image        the OCI image (scripts/build-image.sh) and the renderer (testenv/helm-render)
#   chart_env          testenv/up.sh --kubelets --in-cluster in BASE/env, its env file sourced, the
#                      image imported into every node (array `nodes`), a stand-in kube-scheduler
#                      for the bridge's own pods (pid in `binder_pid`), namespaces slinky and
#                      slurm-bridge, the JWT Secret
#   render OUT [ARGS]  the chart with the seed's settings, this environment's values and ARGS
#   apply FILE         kubectl apply, Deployments last (as helm orders an install)
#   all_rolled_out     every Deployment's newest ReplicaSet Ready, no older pod left
#   chart_stop         stops the stand-in scheduler and the environment
# What this environment needs and a real cluster does not (the chart's README, "Test
# environment"): pods have only `lo`, so the bridge runs with hostNetwork and free ports (all
# nodes share the host's network namespace), KUBERNETES_SERVICE_HOST/PORT name the apiserver's
# 127.0.0.1 address (nothing routes the `kubernetes` Service's ClusterIP), Recreate strategy
# (an old and a new pod cannot hold the same port), a toleration of the bridge's own
# managed-node taint (every node here is a Slurm node), and a stand-in for kube-scheduler: the
# bridge's own pods ask for default-scheduler, which this environment does not run, so they are
# bound to nodes round-robin (like the kube-scheduler would, through pods/binding).
. "$ROOT/testenv/lib.sh"
deploys=(slurm-bridge-admission slurm-bridge-controllers slurm-bridge-scheduler)
binder_pid=
k() { kubectl "$@" 2>/dev/null; }

chart_image() {
  version=$(sed -n 's/^project(slurm-bridge VERSION \([0-9][0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
  "$ROOT/scripts/build-image.sh" "$BINARY" "$BASE/image.tar" | sed 's/^/  /' || die "build-image failed"
  "$ROOT/testenv/helm-render/build.sh" "$BASE/helm-render" || die "building helm-render failed"
}

# The bridge's own pods ask for default-scheduler: bind them round-robin (kube-scheduler's job).
binder() {
  local i=0 p
  while :; do
    for p in $(k -n slinky get pods -o json | jq -r '.items[] | select((.spec.nodeName // "") == ""
        and .spec.schedulerName == "default-scheduler" and .metadata.deletionTimestamp == null)
        | .metadata.name'); do
      printf '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"%s"},"target":{"apiVersion":"v1","kind":"Node","name":"%s"}}' \
        "$p" "${nodes[$((i % ${#nodes[@]}))]}" |
        k create --raw "/api/v1/namespaces/slinky/pods/$p/binding" -f - >/dev/null && i=$((i + 1))
    done
    sleep 0.5
  done
}

chart_env() {
  "$ROOT/testenv/up.sh" --kubelets --in-cluster --run-dir "$BASE/env" >/dev/null 2>"$BASE/up.log" ||
    { cat "$BASE/up.log"; die "testenv/up.sh failed"; }
  set -a
  . "$BASE/env/env"
  set +a
  IFS=, read -r -a nodes <<<"$KUBE_NODES"
  local n
  for n in "${nodes[@]}"; do
    ctr -a "$SB_ENV_DIR/nodes/$n/containerd/containerd.sock" -n k8s.io images import "$BASE/image.tar" \
      >/dev/null || die "importing the image into $n failed"
  done
  binder &
  binder_pid=$!
  k create namespace slinky >/dev/null
  k create namespace slurm-bridge >/dev/null
  k -n slinky create secret generic slurm-bridge-token --from-file=auth-token="$SLURM_JWT_FILE" >/dev/null
  api_port=${KUBE_APISERVER_URL##*:}
  adm_port=$(free_port); adm_health=$(free_port); ctl_health=$(free_port); ctl_metrics=$(free_port)
  sched_health=$(free_port); sched_metrics=$(free_port)
}

chart_stop() {
  if [ -n "$binder_pid" ]; then kill "$binder_pid" 2>/dev/null; wait "$binder_pid" 2>/dev/null || true; fi
  binder_pid=
  if [ -f "$BASE/env/env" ] && [ -n "${SB_KEEP_LOGS:-}" ]; then
    "$ROOT/testenv/down.sh" --keep-logs "$BASE/env" >/dev/null 2>&1 || true
    echo "logs kept in $BASE/env"
  else
    "$ROOT/testenv/down.sh" "$BASE/env" >/dev/null 2>&1 || true
  fi
}

# This environment's values (see the header); the seed's --set line comes on top.
values() {
  local c
  for c in admission controllers scheduler; do
    cat <<YAML
$c:
  hostNetwork: true
  strategy: {type: Recreate}
  image: {tag: "$version", pullPolicy: Never}
  tolerations: [{key: slinky.slurm.net/managed-node, operator: Exists}]
  extraEnv:
    - {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
    - {name: KUBERNETES_SERVICE_PORT, value: "$api_port"}
YAML
    case $c in
      # One webhook replica: every node shares one network namespace here, so a second
      # hostNetwork replica could not listen on the same port.
      admission) echo "  certManager: {enabled: false}"
        echo "  replicas: 1"
        echo "  ports: {webhook: $adm_port, health: $adm_health}" ;;
      controllers) echo "  leaderElect: true"
        echo "  ports: {metrics: $ctl_metrics, health: $ctl_health}" ;;
      scheduler) echo "  leaderElect: true"
        echo "  ports: {metrics: $sched_metrics, health: $sched_health}" ;;
    esac
  done
}

render() {
  local out=$1; shift
  values >"$BASE/values.yaml"
  "$BASE/helm-render" -n slinky -f "$BASE/values.yaml" \
    --set "config.slurmRestApi=$SLURM_REST_URL" --set "config.partition=$SLURM_PARTITION" \
    "$@" slurm-bridge "$ROOT/helm/slurm-bridge" >"$out"
}

# ServiceAccounts and everything else before the Deployments (the ServiceAccount admission
# plugin refuses a pod whose account does not exist yet), as helm orders its install.
apply() {
  python3 - "$1" "$BASE/first.yaml" "$BASE/deployments.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
yaml.safe_dump_all([d for d in docs if d["kind"] != "Deployment"], open(sys.argv[2], "w"))
yaml.safe_dump_all([d for d in docs if d["kind"] == "Deployment"], open(sys.argv[3], "w"))
PY
  kubectl apply -f "$BASE/first.yaml" >/dev/null && kubectl apply -f "$BASE/deployments.yaml" >/dev/null
}

# rolled_out DEPLOY: the newest ReplicaSet's pods all Ready, no pod of an older one left.
rolled_out() {
  local d=$1 j
  j=$(k -n slinky get deploy "$d" -o json) || return 1
  jq -e '.status.observedGeneration >= .metadata.generation and .status.updatedReplicas == .spec.replicas
    and .status.readyReplicas == .spec.replicas and .status.replicas == .spec.replicas' <<<"$j" >/dev/null || return 1
  # Recreate: the old pods are gone before the new ones exist; count the pods to be sure.
  [ "$(k -n slinky get pods -l "app.kubernetes.io/name=$d" -o name | wc -l)" = "$(jq .spec.replicas <<<"$j")" ]
}
all_rolled_out() { local d; for d in "${deploys[@]}"; do rolled_out "$d" || return 1; done; }
pods_of() { k -n slinky get pods -l "app.kubernetes.io/name=$1" -o json; }
