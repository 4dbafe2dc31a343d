#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The docs tests: the shell blocks of chosen documentation pages run as written, so that what the
# pages tell a reader to type keeps working. Two modes:
#   docs.commands (default): README.md and docs/operations.md against the test environment with
#     kubelets (fixture testenv-kubelets) and the bridge running as a process (below);
#   docs.install (--install): docs/install.md on a fresh test cluster of its own, with real Helm
#     (see "The install harness" below).
#
# Fence convention, on the pages this test runs (a fence may be indented, in a list item):
#   ```sh       run, in the page's order; all blocks of one page in one bash session with
#               `set -euo pipefail` (a variable set in one block is there in the next), from a
#               work directory that holds the repository's examples/ and the tour's .testenv/tour/
#               (config.yaml). A block fails when a command in it fails.
#   <!-- docs-test: skip (why) -->
#               on the line right before a ```sh block: the block is shown, not run. For blocks
#               that start or stop the environment or the bridge (this script does that itself,
#               as the README's tour's first block does), or that need a real cluster.
#   ```text, ```console, ```yaml, ...
#               shown only.
#   ```bash     refused: on these pages a block says whether it runs (sh) or is shown (text).
# A failing block fails the test, which prints the page, the block's line, the block and its
# output (and the end of the bridge's log).
#
# The harness does what the README tour's first (skipped) block does: the environment's env file
# exported (KUBECONFIG, SLURM_REST_URL, SLURM_JWT_FILE, ...), its kubectl, slurm-bridge and
# kubectl-slurm on PATH, .testenv/tour/config.yaml written, `slurm-bridge all` started with its
# metrics and health servers at $metrics and $health (free ports here). After the pages it deletes
# the pods of the namespaces the pages made (while the bridge runs, so that their jobs end and
# their finalizers go) and those namespaces, and stops the bridge.
#
# The install harness (--install) is a cluster admin's fresh cluster: testenv/up.sh --kubelets
# --in-cluster of its own (testenv/kube/chart-lib.sh: the image built from the binary and imported
# into every node, a stand-in kube-scheduler for the bridge's own pods), nothing installed, no
# namespace made. The page runs from the root of the checkout with the environment's kubectl and
# two stand-ins first on PATH: `scontrol` runs the environment's own scontrol (in its Slurm
# chroot), and `helm` is the pinned real Helm 4 (testenv/helm/ensure-helm.sh) that adds to every
# `helm install` and `helm upgrade` what this environment needs and a real cluster does not
# (chart-lib.sh's values: hostNetwork and free ports, the apiserver's address, the imported image,
# one webhook replica, no cert-manager; and where its slurmrestd is, as --set config.slurmRestApi
# and config.partition). After the page: no release left (the page uninstalls it), and nothing of
# it (no object with its label, no webhook configuration, no ClusterRole of it); then the
# environment stops.
#
# Usage: docs_test.sh [--install] SLURM_BRIDGE_BINARY   (without --install, SB_TESTENV: the env
# file of a running environment with kubelets). SB_DOCS_PAGES overrides the pages
# (space-separated, relative to the repository); SB_DOCS_SKIP, an extended regex: blocks that
# match it are reported and not run (for trying the rest while a command is being written);
# SB_DOCS_BLOCK_TIMEOUT, the seconds a block may run (default 120; 300 with --install).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=commands
if [ "${1:-}" = --install ]; then mode=install; shift; fi
binary=${1:?usage: docs_test.sh [--install] SLURM_BRIDGE_BINARY}
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
if [ $mode = install ]; then
  read -ra pages <<<"${SB_DOCS_PAGES:-docs/install.md}"
  block_timeout=${SB_DOCS_BLOCK_TIMEOUT:-300}
else
  env_file=${SB_TESTENV:?SB_TESTENV must name the env file of a running test environment (kubelets)}
  read -ra pages <<<"${SB_DOCS_PAGES:-README.md docs/operations.md}"
  block_timeout=${SB_DOCS_BLOCK_TIMEOUT:-120}
fi
skip_re=${SB_DOCS_SKIP:-}
. "$root/testenv/lib.sh"

# --- the blocks of a page --------------------------------------------------------------------
# extract PAGE OUTDIR: writes OUTDIR/N.sh (the block's text) and OUTDIR/N.line (its first line in
# the page) for each block to run, and OUTDIR/skipped (one "LINE reason" per skipped block).
# Fails on a ```bash block.
extract() {
  awk -v out="$2" -v skip_re="$skip_re" '
    function flush() {
      if (kind == "sh") {
        if (skip != "") { print start " " skip >> (out "/skipped") }
        else if (skip_re != "" && text ~ skip_re) { print start " matches SB_DOCS_SKIP" >> (out "/skipped") }
        else { n++; printf "%s", text > (out "/" n ".sh"); print start > (out "/" n ".line")
               close(out "/" n ".sh"); close(out "/" n ".line") }
      }
      kind = ""; text = ""; skip = ""
    }
    infence {
      if ($0 ~ /^[[:space:]]*```[[:space:]]*$/) { infence = 0; flush(); next }
      # A fence indented in a list item: its lines lose that indentation.
      line = $0
      if (indent > 0 && substr(line, 1, indent) ~ /^ *$/) line = substr(line, indent + 1)
      if (kind == "sh") text = text line "\n"
      next
    }
    /^[[:space:]]*```/ {
      match($0, /^[[:space:]]*/); indent = RLENGTH
      lang = substr($0, indent + 4); sub(/[[:space:]].*/, "", lang)
      if (lang == "bash") { print FILENAME ":" NR ": a ```bash block (write ```sh to run it, ```text to show it)" > "/dev/stderr"; bad = 1 }
      infence = 1; kind = (lang == "sh") ? "sh" : "other"; start = NR + 1
      skip = pending; pending = ""
      next
    }
    /^[[:space:]]*<!-- docs-test: skip/ { pending = $0; sub(/^[[:space:]]*<!-- docs-test: skip[[:space:]]*/, "", pending); sub(/[[:space:]]*-->.*/, "", pending)
                              if (pending == "") pending = "(skip)"; next }
    /^[[:space:]]*$/ { next }
    { pending = "" }
    END { if (infence) { print FILENAME ": a block is not closed" > "/dev/stderr"; bad = 1 }
          exit bad }
  ' "$1"
}

# --- the harness -----------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/sb-docs-test.XXXXXX")
bridge_pid=""
namespaces_before=""
run_dir=$work          # where the pages' commands run
failure_context() { :; } # what a failing block's report ends with
chart_up=0
cleanup() {
  local rc=$? ns
  if [ -n "$namespaces_before" ]; then
    # The pods the pages made go while the bridge still runs (it ends their jobs and removes its
    # finalizer); what is left after a minute is forced.
    for ns in $(kubectl get namespaces -o name | sed 's|^namespace/||'); do
      grep -qx "$ns" <<<"$namespaces_before" && continue
      kubectl -n "$ns" delete pods --all --wait=true --timeout=60s >/dev/null 2>&1 || {
        log "pods of namespace $ns did not go within 60 s: their finalizers removed"
        for p in $(kubectl -n "$ns" get pods -o name); do
          kubectl -n "$ns" patch "$p" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1 || true
        done
        kubectl -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
      }
      # The namespace too (the environment runs no namespace controller: its finalizer is
      # removed here), so that the environment is left as the test found it.
      kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
      kubectl get namespace "$ns" -o json 2>/dev/null | jq '.spec.finalizers = []' |
        kubectl replace --raw "/api/v1/namespaces/$ns/finalize" -f - >/dev/null 2>&1 || true
    done
  fi
  if [ -n "$bridge_pid" ]; then
    kill "$bridge_pid" 2>/dev/null || true
    wait "$bridge_pid" 2>/dev/null || true
  fi
  [ $chart_up = 0 ] || chart_stop
  if [ $rc = 0 ]; then rm -rf "$work"; else log "work directory kept: $work"; fi
  exit $rc
}
trap cleanup EXIT

install_harness() {
  need_root
  ROOT=$root BASE=$work/chart BINARY=$binary CHART_NS=slinky
  mkdir -p "$BASE"
  . "$root/testenv/kube/chart-lib.sh"
  log "building the image, starting a test cluster of its own (testenv/up.sh --kubelets --in-cluster)"
  chart_image >/dev/null
  chart_up=1
  chart_env
  real_helm=$helm # (global: failure_context uses it)
  mkdir -p "$work/bin"
  # The stand-ins (see the header): the environment's additions come last on the command line.
  {
    echo '#!/usr/bin/env bash'
    echo '# docs test: real Helm, with the test environment'"'"'s values added to install and upgrade'
    printf 'case "${1:-}" in install | upgrade) exec %q "$@"' "$real_helm"
    local a
    while read -r a; do printf ' %q' "$a"; done < <(env_helm_args)
    printf ' ;; esac\nexec %q "$@"\n' "$real_helm"
  } >"$work/bin/helm"
  printf '#!/usr/bin/env bash\nexec %q %q scontrol "$@"\n' "$root/testenv/slurm/exec.sh" "$BASE/env" \
    >"$work/bin/scontrol"
  chmod +x "$work/bin/helm" "$work/bin/scontrol"
  export PATH="$work/bin:$KUBE_BIN_DIR:$PATH"
  [ "$(command -v helm)" = "$work/bin/helm" ] && [ "$(command -v kubectl)" = "$KUBE_BIN_DIR/kubectl" ] ||
    die "the stand-ins are not first on PATH"
  run_dir=$root
  failure_context() {
    echo "=== the cluster ==="
    { kubectl get namespaces; kubectl get pods -A -o wide; "$real_helm" list -A; } 2>&1 | sed 's/^/  # /'
    local d
    for d in "${deploys[@]}"; do
      echo "=== the end of $d's log ==="
      kubectl -n "$CHART_NS" logs "deploy/$d" --tail=15 2>&1 | sed 's/^/  # /'
    done
  }
  log "a fresh cluster: $(kubectl get nodes -o name | wc -l) nodes, namespaces $(kubectl get namespaces -o name | sed 's|^namespace/||' | paste -sd' ')"
}

# After docs/install.md: its uninstall left nothing of the release.
install_leftovers() {
  local listable left
  left=$("$helm" list -A -q)
  [ -z "$left" ] || { log "releases left after the page: $left"; return 1; }
  listable=$(kubectl api-resources --verbs=list -o name | grep -v '^events' | paste -sd,)
  nothing_labelled() { [ -z "$(kubectl get "$listable" -A -l app.kubernetes.io/instance=slurm-bridge -o name 2>/dev/null)" ]; }
  wait_for 120 nothing_labelled || {
    log "objects of the release left: $(kubectl get "$listable" -A -l app.kubernetes.io/instance=slurm-bridge -o name 2>/dev/null | paste -sd' ')"
    return 1
  }
  left=$(kubectl get clusterrole,clusterrolebinding,validatingwebhookconfiguration,mutatingwebhookconfiguration -o name | grep slurm-bridge || true)
  [ -z "$left" ] || { log "cluster-wide objects of the release left: $left"; return 1; }
  log "nothing of the release is left (kept, as the page says: $(kubectl -n "$CHART_NS" get secret,lease -o name | paste -sd' '))"
}

commands_harness() {
  set -a
  . "$env_file"
  set +a
  [ "${SB_KUBELETS:-0}" = 1 ] || die "the docs need an environment with kubelets (fixture testenv-kubelets)"
  bin_dir=$(dirname "$binary")
  path_extra=$bin_dir
  if [ ! -x "$bin_dir/kubectl-slurm" ]; then
    # kubectl-slurm is the same binary under that name (the build makes build/kubectl-slurm).
    mkdir -p "$work/bin"
    ln -s "$binary" "$work/bin/slurm-bridge"
    ln -s "$binary" "$work/bin/kubectl-slurm"
    path_extra=$work/bin
  fi
  export PATH="$KUBE_BIN_DIR:$path_extra:$PATH"
  command -v kubectl >/dev/null || die "no kubectl in $KUBE_BIN_DIR"
  [ "$(command -v slurm-bridge)" -ef "$binary" ] || die "slurm-bridge on PATH is not $binary"

  # The work directory stands where the pages' commands run: the repository's examples/, and the
  # tour's run directory with the config its first block writes.
  mkdir -p "$work/.testenv/tour"
  ln -s "$root/examples" "$work/examples"
  cat >"$work/.testenv/tour/config.yaml" <<EOF
slurmRestApi: $SLURM_REST_URL
partition: $SLURM_PARTITION
EOF
  metrics=127.0.0.1:$(free_port)
  health=127.0.0.1:$(free_port)
  export metrics health
  namespaces_before=$(kubectl get namespaces -o name | sed 's|^namespace/||')

  # As the chart's identities (testenv/kube/chart-identities.sh), not the admin (issue #44).
  "$binary" all --config "$work/.testenv/tour/config.yaml" --metrics-bind-address "$metrics" \
    --kubeconfig "${KUBECONFIG_ALL:-$KUBECONFIG}" \
    --health-probe-bind-address "$health" >"$work/bridge.log" 2>&1 &
  bridge_pid=$!
  ready() { curl -fsS -o /dev/null "http://$health/readyz"; }
  wait_for 60 ready || { tail -n 40 "$work/bridge.log" >&2; die "the bridge did not get ready"; }
  log "the bridge runs (pid $bridge_pid, metrics $metrics, health $health)"
  failure_context() {
    echo "=== the end of the bridge's log ==="
    tail -n 30 "$work/bridge.log" | sed 's/^/  # /'
  }
}

if [ $mode = install ]; then install_harness; else commands_harness; fi
page_timeout=250 # a page's blocks together, in seconds
if [ $mode = install ]; then page_timeout=900; fi

failed=0
for page in "${pages[@]}"; do
  [ -f "$root/$page" ] || die "no page $page"
  blocks=$work/blocks/${page//\//_}
  mkdir -p "$blocks"
  extract "$root/$page" "$blocks" || { failed=1; continue; }
  n=$(find "$blocks" -name '*.sh' | wc -l)
  [ "$n" -gt 0 ] || { log "$page: no block to run"; failed=1; continue; }
  rm -f "$blocks/reached"
  if [ -f "$blocks/skipped" ]; then
    while read -r line why; do log "$page:$line: not run: $why"; done <"$blocks/skipped"
  fi
  # One session for the page: each block's output into its own file; "reached" says which block
  # runs (or "done"). A watchdog per block stops the commands of a block that runs past
  # SB_DOCS_BLOCK_TIMEOUT seconds (the session's own children, by its process id).
  {
    cat <<'PRELUDE'
set -euo pipefail
__sb_session=$$
__sb_watch() { # after $1 s, TERM the session's other children: the block's commands
  trap 'kill "$__sb_sleep" 2>/dev/null; exit 0' TERM
  sleep "$1" &
  __sb_sleep=$!
  wait "$__sb_sleep"
  echo "docs test: the block ran past $1 s; stopping it" >&2
  kill -TERM $(pgrep -P "$__sb_session" | grep -vx "$BASHPID") 2>/dev/null
}
PRELUDE
    for i in $(seq 1 "$n"); do
      echo "echo $i >\"$blocks/reached\"; exec >\"$blocks/$i.out\" 2>&1"
      echo "__sb_watch $block_timeout & __sb_watchdog=\$!"
      cat "$blocks/$i.sh"
      echo 'kill "$__sb_watchdog" 2>/dev/null || true'
    done
    echo "echo done >\"$blocks/reached\""
  } >"$blocks/session.sh"
  log "$page: running $n block(s)"
  started=$SECONDS
  (cd "$run_dir" && timeout "$page_timeout" bash "$blocks/session.sh") || true
  reached=$(cat "$blocks/reached" 2>/dev/null || echo 1)
  if [ "$reached" = "done" ]; then
    log "$page: $n block(s) passed in $((SECONDS - started)) s"
    for i in $(seq 1 "$n"); do # what each block printed, for the reader of the test's log
      echo "--- $page:$(cat "$blocks/$i.line")"
      sed 's/^/  > /' "$blocks/$i.out"
    done
    continue
  fi
  failed=1
  {
    echo "=== $page: the block at line $(cat "$blocks/$reached.line") failed ==="
    sed 's/^/  | /' "$blocks/$reached.sh"
    echo "=== its output ==="
    sed 's/^/  > /' "$blocks/$reached.out" 2>/dev/null || true
    failure_context
  } >&2
  for i in $(seq 1 $((reached - 1))); do
    log "$page:$(cat "$blocks/$i.line"): passed"
  done
done
if [ $mode = install ]; then
  [ $failed = 1 ] || install_leftovers || failed=1
else
  kill -0 "$bridge_pid" 2>/dev/null || { failed=1; log "the bridge exited"; tail -n 40 "$work/bridge.log" >&2; }
fi
[ $failed = 0 ] || die "docs test failed"
log "docs test passed: ${pages[*]}"
