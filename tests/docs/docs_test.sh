#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The docs test (ctest docs.commands): the shell blocks of chosen documentation pages run against
# the test environment with kubelets (fixture testenv-kubelets) and the bridge, so that what the
# pages tell a reader to type keeps working.
#
# Fence convention, on the pages this test runs (README.md and docs/operations.md):
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
# Usage: docs_test.sh SLURM_BRIDGE_BINARY   (SB_TESTENV: the env file of a running environment
# with kubelets). SB_DOCS_PAGES overrides the pages (space-separated, relative to the repository);
# SB_DOCS_SKIP, an extended regex: blocks that match it are reported and not run (for trying the
# rest while a command is being written); SB_DOCS_BLOCK_TIMEOUT, the seconds a block may run
# (default 120).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
binary=${1:?usage: docs_test.sh SLURM_BRIDGE_BINARY}
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
env_file=${SB_TESTENV:?SB_TESTENV must name the env file of a running test environment (kubelets)}
read -ra pages <<<"${SB_DOCS_PAGES:-README.md docs/operations.md}"
skip_re=${SB_DOCS_SKIP:-}
block_timeout=${SB_DOCS_BLOCK_TIMEOUT:-120}
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
      if ($0 ~ /^```[[:space:]]*$/) { infence = 0; flush(); next }
      if (kind == "sh") text = text $0 "\n"
      next
    }
    /^```/ {
      lang = substr($0, 4); sub(/[[:space:]].*/, "", lang)
      if (lang == "bash") { print FILENAME ":" NR ": a ```bash block (write ```sh to run it, ```text to show it)" > "/dev/stderr"; bad = 1 }
      infence = 1; kind = (lang == "sh") ? "sh" : "other"; start = NR + 1
      skip = pending; pending = ""
      next
    }
    /^<!-- docs-test: skip/ { pending = $0; sub(/^<!-- docs-test: skip[[:space:]]*/, "", pending); sub(/[[:space:]]*-->.*/, "", pending)
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
  if [ $rc = 0 ]; then rm -rf "$work"; else log "work directory kept: $work"; fi
  exit $rc
}
trap cleanup EXIT

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

"$binary" all --config "$work/.testenv/tour/config.yaml" --metrics-bind-address "$metrics" \
  --health-probe-bind-address "$health" >"$work/bridge.log" 2>&1 &
bridge_pid=$!
ready() { curl -fsS -o /dev/null "http://$health/readyz"; }
wait_for 60 ready || { tail -n 40 "$work/bridge.log" >&2; die "the bridge did not get ready"; }
log "the bridge runs (pid $bridge_pid, metrics $metrics, health $health)"

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
  (cd "$work" && timeout 250 bash "$blocks/session.sh") || true
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
    echo "=== the end of the bridge's log ==="
    tail -n 30 "$work/bridge.log" | sed 's/^/  # /'
  } >&2
  for i in $(seq 1 $((reached - 1))); do
    log "$page:$(cat "$blocks/$i.line"): passed"
  done
done
kill -0 "$bridge_pid" 2>/dev/null || { failed=1; log "the bridge exited"; tail -n 40 "$work/bridge.log" >&2; }
[ $failed = 0 ] || die "docs test failed"
log "docs test passed: ${pages[*]}"
