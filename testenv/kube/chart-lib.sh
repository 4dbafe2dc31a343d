# SPDX-License-Identifier: Apache-2.0
#
# The bridge installed by its Helm chart, with real Helm (the pinned Helm 4 of
# testenv/helm/ensure-helm.sh), into a test environment of its own, as pods: shared by
# tests/e2e/chart_incluster_test.sh, tests/docs/docs_test.sh (docs/install.md) and scripts/demo.sh.
# Source it with ROOT (the repository), BASE (an empty work directory) and BINARY (a slurm-bridge
# binary) set, and CHART_NS (the release namespace; default slinky), then call:
#   chart_image        the OCI image (scripts/build-image.sh) and helm (`$helm`, its HELM_*_HOME
#                      under BASE/helm); `image_repo[scheduler|controllers|admission]` and
#                      `image_tag`: the names the image carries
#   chart_env          testenv/up.sh --kubelets --in-cluster in BASE/env, its env file sourced, the
#                      image imported into every node (array `nodes`), a stand-in kube-scheduler
#                      for the bridge's own pods (pid in `binder_pid`), and BASE/values.yaml:
#                      this environment's values (below); no namespace is made
#   chart_helm VERB [ARGS]
#                      helm VERB slurm-bridge ROOT/helm/slurm-bridge --namespace CHART_NS ARGS, then
#                      this environment's values (-f BASE/values.yaml, and where slurmrestd is:
#                      config.slurmRestApi, config.partition), for VERB install or upgrade
#   jwt_secret         the JWT Secret slurm-bridge-token in CHART_NS (the environment's token)
#   all_rolled_out     every Deployment's newest ReplicaSet Ready, no older pod left
#   chart_stop         stops the stand-in scheduler and the environment
# What this environment needs and a real cluster does not (the chart's README, "Test
# environment"): pods have only `lo`, so the bridge runs with hostNetwork and free ports (all
# nodes share the host's network namespace), KUBERNETES_SERVICE_HOST/PORT name the apiserver's
# 127.0.0.1 address (nothing routes the `kubernetes` Service's ClusterIP), Recreate strategy
# (an old and a new pod cannot hold the same port), one webhook replica (a second hostNetwork
# replica could not listen on the same port), the image imported into the nodes (pullPolicy
# Never), no cert-manager (the chart's own CA, kept across upgrades by `lookup`), a toleration of
# the bridge's own managed-node taint (every node here is a Slurm node), and a stand-in for
# kube-scheduler: the bridge's own pods ask for default-scheduler, which this environment does
# not run, so they are bound to nodes round-robin (like the kube-scheduler would, through
# pods/binding).
. "$ROOT/testenv/lib.sh"
CHART_NS=${CHART_NS:-slinky}
deploys=(slurm-bridge-admission slurm-bridge-controllers slurm-bridge-scheduler)
binder_pid=
declare -gA image_repo=() # global, also when sourced in a function
image_tag=
k() { kubectl "$@" 2>/dev/null; }

chart_image() {
  local names n c
  "$ROOT/scripts/build-image.sh" "$BINARY" "$BASE/image.tar" | sed 's/^/  /' || die "build-image failed"
  helm=$("$ROOT/testenv/helm/ensure-helm.sh") || die "no helm (testenv/helm/ensure-helm.sh; scripts/prepare-testenv.sh fetches it)"
  export HELM_CONFIG_HOME=$BASE/helm/config HELM_CACHE_HOME=$BASE/helm/cache HELM_DATA_HOME=$BASE/helm/data
  # The names build-image.sh gave the image (REPO/slurm-bridge-COMPONENT:VERSION).
  names=$(tar -xOf "$BASE/image.tar" index.json | jq -r '.manifests[].annotations["io.containerd.image.name"]') ||
    die "no image names in $BASE/image.tar"
  for c in scheduler controllers admission; do
    n=$(grep -E -- "-$c:[^:/]+\$" <<<"$names" | head -n1)
    [ -n "$n" ] || die "the image has no name for $c: $names"
    image_repo[$c]=${n%:*}
    image_tag=${n##*:}
  done
}

# The bridge's own pods ask for default-scheduler: bind them round-robin (kube-scheduler's job).
binder() {
  local i=0 p
  while :; do
    for p in $(k -n "$CHART_NS" get pods -o json | jq -r '.items[] | select((.spec.nodeName // "") == ""
        and .spec.schedulerName == "default-scheduler" and .metadata.deletionTimestamp == null)
        | .metadata.name'); do
      printf '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"%s"},"target":{"apiVersion":"v1","kind":"Node","name":"%s"}}' \
        "$p" "${nodes[$((i % ${#nodes[@]}))]}" |
        k create --raw "/api/v1/namespaces/$CHART_NS/pods/$p/binding" -f - >/dev/null && i=$((i + 1))
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
  api_port=${KUBE_APISERVER_URL##*:}
  adm_port=$(free_port); adm_health=$(free_port); ctl_health=$(free_port); ctl_metrics=$(free_port)
  sched_health=$(free_port); sched_metrics=$(free_port)
  values >"$BASE/values.yaml"
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

# This environment's values (see the header); they come after the user's values files.
values() {
  local c
  for c in admission controllers scheduler; do
    cat <<YAML
$c:
  hostNetwork: true
  strategy: {type: Recreate}
  image: {repository: "${image_repo[$c]}", tag: "$image_tag", pullPolicy: Never}
  tolerations: [{key: slinky.slurm.net/managed-node, operator: Exists}]
  extraEnv:
    - {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
    - {name: KUBERNETES_SERVICE_PORT, value: "$api_port"}
YAML
    case $c in
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

# The environment's part of a helm install/upgrade command line: its values, then where its
# slurmrestd is (--set outranks every values file, as for a user's own --set): CHART_REST_URL
# where set (the in-cluster test's https proxy), else the environment's own URL.
env_helm_args() {
  printf '%s\n' -f "$BASE/values.yaml" --set "config.slurmRestApi=${CHART_REST_URL:-$SLURM_REST_URL}" \
    --set "config.partition=$SLURM_PARTITION"
}

# chart_helm install|upgrade [ARGS]: the release slurm-bridge of the chart in CHART_NS.
chart_helm() {
  local verb=$1 extra
  shift
  mapfile -t extra < <(env_helm_args)
  "$helm" "$verb" slurm-bridge "$ROOT/helm/slurm-bridge" --namespace "$CHART_NS" "$@" "${extra[@]}"
}

jwt_secret() {
  kubectl -n "$CHART_NS" create secret generic slurm-bridge-token --from-file=auth-token="$SLURM_JWT_FILE" >/dev/null
}

# rolled_out DEPLOY: the newest ReplicaSet's pods all Ready, no pod of an older one left.
rolled_out() {
  local d=$1 j
  j=$(k -n "$CHART_NS" get deploy "$d" -o json) || return 1
  jq -e '.status.observedGeneration >= .metadata.generation and .status.updatedReplicas == .spec.replicas
    and .status.readyReplicas == .spec.replicas and .status.replicas == .spec.replicas' <<<"$j" >/dev/null || return 1
  # Recreate: the old pods are gone before the new ones exist; count the pods to be sure.
  [ "$(k -n "$CHART_NS" get pods -l "app.kubernetes.io/name=$d" -o name | wc -l)" = "$(jq .spec.replicas <<<"$j")" ]
}
all_rolled_out() { local d; for d in "${deploys[@]}"; do rolled_out "$d" || return 1; done; }
pods_of() { k -n "$CHART_NS" get pods -l "app.kubernetes.io/name=$1" -o json; }
