#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and the kubelet v1.20.2 offline
# from Debian bookworm's `kubernetes` source package (its orig tarball carries the full tree with
# vendor/), with Debian's Go 1.19, into the cache, once. Builds only what the cache lacks: the
# control plane (stamp SB_KUBE_STAMP) and the kubelet (stamp SB_KUBELET_STAMP) separately, so a
# cache from before the kubelet gets just the kubelet added.
# The machine's apt sources are left alone: a private APT_CONFIG adds the deb-src line.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

KUBE_SRC_VERSION="${KUBE_SRC_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}"
GO="${GO:-/usr/lib/go-1.19/bin/go}"

# One build at a time per cache (the work dir is shared); a second caller waits, then finds the
# binaries built.
mkdir -p "$SB_CACHE_DIR"
exec 9>"$SB_CACHE_DIR/kube-build.lock"
flock 9
want=()
[ -f "$SB_KUBE_DIR/$SB_KUBE_STAMP" ] || want+=(kube-apiserver kube-controller-manager kube-scheduler)
[ -f "$SB_KUBE_DIR/$SB_KUBELET_STAMP" ] || want+=(kubelet)
if [ ${#want[@]} -eq 0 ]; then
  log "kubernetes binaries ready: $SB_KUBE_DIR/bin"
  exit 0
fi
log "building ${want[*]}"
[ -x "$GO" ] || die "$GO missing: run scripts/install-deps.sh (golang-1.19-go)"
start=$SECONDS
mkdir -p "$SB_CACHE_DIR/src"
work="$SB_CACHE_DIR/kube-build"
rm -rf "$work"
mkdir -p "$work/apt/lists/partial" "$work/apt/archives/partial" "$work/gopath/src/k8s.io"

orig=$(ls "$SB_CACHE_DIR"/src/kubernetes_*really1.20.2.orig.tar.gz 2>/dev/null | head -n1 || true)
if [ -z "$orig" ]; then
  log "fetching the kubernetes source package from Debian's archive"
  cat >"$work/apt/sources.list" <<SRC
deb-src $DEBIAN_MIRROR bookworm main
deb-src $DEBIAN_MIRROR bookworm-updates main
deb-src ${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
SRC
  cat >"$work/apt/apt.conf" <<CONF
Dir::Etc::sourcelist "$work/apt/sources.list";
Dir::Etc::sourceparts "-";
Dir::State::Lists "$work/apt/lists";
Dir::Cache "$work/apt/cache";
Dir::Cache::archives "$work/apt/archives";
CONF
  mkdir -p "$work/apt/cache"
  export APT_CONFIG="$work/apt/apt.conf"
  apt-get -q update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; die "apt-get update (deb-src) failed"; }
  (cd "$SB_CACHE_DIR/src" && apt-get -q source --download-only "kubernetes=$KUBE_SRC_VERSION") >>"$work/apt.log" 2>&1 ||
    { tail -20 "$work/apt.log" >&2; die "apt-get source kubernetes=$KUBE_SRC_VERSION failed"; }
  unset APT_CONFIG
  orig=$(ls "$SB_CACHE_DIR"/src/kubernetes_*really1.20.2.orig.tar.gz | head -n1)
fi
log "unpacking $(basename "$orig")"
tree="$work/gopath/src/k8s.io/kubernetes"
mkdir -p "$tree"
tar -xzf "$orig" -C "$tree" --strip-components=1
[ -f "$tree/cmd/kube-apiserver/apiserver.go" ] || die "unexpected tarball layout in $orig"

# Kubernetes 1.20 vendors modern-go/reflect2 1.0.1, whose map iteration crashes under Go >= 1.18
# ("fatal error: fault" in mapiterinit as soon as the apiserver encodes a map). Debian's own
# reflect2 1.0.2 (golang-github-modern-go-reflect2-dev) is the fixed release with the same API.
reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -f "$reflect2/go_above_118.go" ] || die "$reflect2 missing: run scripts/install-deps.sh"
rm -rf "$tree/vendor/github.com/modern-go/reflect2"
cp -r "$reflect2" "$tree/vendor/github.com/modern-go/reflect2"
rm -f "$tree/vendor/github.com/modern-go/reflect2/go.mod"

export GOPATH="$work/gopath" GOCACHE="$work/gocache" GO111MODULE=off GOPROXY=off GOFLAGS= CGO_ENABLED=0
cd "$tree"
# The one generated file the tarball lacks (upstream's make generates it); the apiserver needs
# it, the kubelet does not.
if [[ " ${want[*]} " == *" kube-apiserver "* ]]; then
log "generating pkg/generated/openapi"
"$GO" build -o "$work/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
pkgs=$(grep -rl --include='*.go' '+k8s:openapi-gen=' --exclude-dir=vendor --exclude-dir=_output . |
  xargs -n1 dirname | sort -u | sed -e 's|^\./||' -e 's|^staging/src/|vendor/|' |
  grep -v -e '^vendor/k8s.io/code-generator' -e '^vendor/k8s.io/sample-apiserver' |
  sed 's|^|k8s.io/kubernetes/|' | paste -sd, -)
"$work/openapi-gen" -i "$pkgs" -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
  -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$work/openapi-report.txt" >"$work/openapi-gen.log" 2>&1 ||
  { tail -20 "$work/openapi-gen.log" >&2; die "openapi-gen failed"; }
fi

# /version must say v1.20.2. -X on the vendored package paths does not take in GOPATH mode with
# staging symlinks, so the defaults in both version packages (component-base's, behind
# --version, and client-go's, behind the apiserver's /version) are set instead.
for base in "$tree/staging/src/k8s.io/component-base/version/base.go" \
  "$tree/staging/src/k8s.io/client-go/pkg/version/base.go"; do
  sed -i -e 's|^\(\s*gitMajor\) string.*|\1 string = "1"|' -e 's|^\(\s*gitMinor\) string.*|\1 string = "20"|' \
    -e 's|^\(\s*gitVersion\s*\(string\s*\)\?=\s*\)"[^"]*"|\1"v1.20.2"|' \
    -e 's|^\(\s*gitTreeState\s*\(string\s*\)\?=\s*\)"[^"]*"|\1"clean"|' "$base"
  grep -Eq 'gitVersion +(string +)?= *"v1.20.2"' "$base" || die "could not set the version in $base"
done
ldflags="-s -w"
mkdir -p "$work/bin"
for cmd in "${want[@]}"; do
  t=$SECONDS
  log "go build $cmd"
  "$GO" build -ldflags "$ldflags" -o "$work/bin/$cmd" "./cmd/$cmd"
  log "$cmd built in $((SECONDS - t)) s"
done
mkdir -p "$SB_KUBE_DIR/bin"
for cmd in "${want[@]}"; do
  "$work/bin/$cmd" --version >/dev/null || die "$cmd --version failed"
  mv -f "$work/bin/$cmd" "$SB_KUBE_DIR/bin/$cmd"
done
[ -f "$SB_KUBE_DIR/$SB_KUBE_STAMP" ] || "$SB_KUBE_DIR/bin/kube-apiserver" --version >"$SB_KUBE_DIR/$SB_KUBE_STAMP"
[ -f "$SB_KUBE_DIR/$SB_KUBELET_STAMP" ] || "$SB_KUBE_DIR/bin/kubelet" --version >"$SB_KUBE_DIR/$SB_KUBELET_STAMP"
cd /
rm -rf "$work"
log "kubernetes binaries ready in $((SECONDS - start)) s: $SB_KUBE_DIR/bin"
