#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# `helm lint --strict` of helm/slurm-bridge with the pinned real Helm 4 (testenv/helm/ensure-helm.sh),
# as upstream's chart CI runs it: with the chart's defaults, without cert-manager, with the
# monitoring objects on, and with the values files of upstream 1.2 and 1.3 users
# (tests/chart/testdata). Strict: a warning fails it, as an error does. Then the packaged chart
# (`helm package`) holds the `helm test` hook (.helmignore leaves templates/tests/ in).
#
# Usage: lint_test.sh [HELM]   (default: what testenv/helm/ensure-helm.sh prints)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
helm=${1:-$("$root/testenv/helm/ensure-helm.sh")}
work=$(mktemp -d "${TMPDIR:-/tmp}/sb-chart-lint.XXXXXX")
trap 'rm -rf "$work"' EXIT
export HELM_CONFIG_HOME=$work/config HELM_CACHE_HOME=$work/cache HELM_DATA_HOME=$work/data
chart=$root/helm/slurm-bridge
testdata=$root/tests/chart/testdata
echo "$("$helm" version --short) ($helm)"
fails=0
lint() { # NAME ARGS...
  local name=$1
  shift
  if "$helm" lint --strict "$chart" "$@" >"$work/out" 2>&1; then
    echo "ok   helm lint --strict: $name"
  else
    echo "FAIL helm lint --strict: $name"
    sed 's/^/  | /' "$work/out"
    fails=$((fails + 1))
  fi
}
lint "defaults"
lint "without cert-manager" --set admission.certManager.enabled=false
lint "monitoring on" --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true \
  --set metrics.dashboard.enabled=true
lint "an upstream 1.2 user's values file" -f "$testdata/upstream-1.2-values.yaml"
lint "an upstream 1.3 user's values file" -f "$testdata/upstream-1.3-values.yaml"
# A broken chart must fail the lint (the check above can fail): an unknown top-level value.
if "$helm" lint --strict "$chart" --set no-such-value=1 >"$work/out" 2>&1; then
  echo "FAIL helm lint --strict accepted an unknown value (values.schema.json)"
  fails=$((fails + 1))
else
  echo "ok   helm lint --strict refuses an unknown value"
fi

if "$helm" package "$chart" -d "$work" >"$work/out" 2>&1; then
  tgz=$(ls "$work"/slurm-bridge-*.tgz)
  files=$(tar -tzf "$tgz")
  if grep -qx 'slurm-bridge/templates/tests/scheduling-test.yaml' <<<"$files"; then
    echo "ok   the packaged chart holds the helm test hook"
  else
    echo "FAIL the packaged chart lacks templates/tests/scheduling-test.yaml (.helmignore?)"
    fails=$((fails + 1))
  fi
else
  echo "FAIL helm package"
  sed 's/^/  | /' "$work/out"
  fails=$((fails + 1))
fi
[ $fails = 0 ] && echo "PASS" || echo "$fails FAILED"
[ $fails = 0 ]
