#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Puts the Kubernetes of the test environment into the cache, once: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kubectl at SB_KUBE_VERSION (default 1.36.2;
# 1.34.2 for scripts/compat.sh) in SB_KUBE_DIR/bin, and etcd 3.5 in SB_ETCD_DIR.
#
# The binaries are built offline from the minimal source tarball
# SB_VENDOR_DIR/kubernetes-<version>-openshift-min.tar.xz (OpenShift's fork of Kubernetes, as
# carried in openshift/microshift: upstream's API types, defaults and feature gates; see that
# folder's README), with Go from Debian's archive (1.26 from trixie-backports for 1.36, 1.24 from
# trixie for 1.34), unpacked into the cache, not installed. Where the tarball is missing, set
# SB_KUBE_BIN_DIR to a folder holding the five official release binaries of the same version
# (https://dl.k8s.io/release/v<version>/bin/linux/amd64/<name>): they are copied in instead.
# etcd-server 3.5 comes from Debian sid, also unpacked into the cache.
# The machine's apt sources are left alone (a private APT_CONFIG, see debian_unpack in lib.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
case "$SB_KUBE_VERSION" in
  1.36.2) go_pkg=golang-1.26 go_suite=trixie-backports commit=98b35193b2ac7a23a673325f5e9b830ecd5ba406 ;;
  1.34.2) go_pkg=golang-1.24 go_suite=trixie commit=047d96223dd843e9d54bed59bc212d2e9122c56a ;;
  *) die "SB_KUBE_VERSION=$SB_KUBE_VERSION: this script knows 1.36.2 and 1.34.2" ;;
esac

# One build at a time per cache (the work dirs are shared); a second caller waits, then finds
# the binaries built.
mkdir -p "$SB_CACHE_DIR"
exec 9>"$SB_CACHE_DIR/kube-build.lock"
flock 9
start=$SECONDS

if [ ! -x "$SB_ETCD" ]; then
  log "fetching etcd-server $SB_ETCD_VERSION from Debian sid"
  rm -rf "$SB_ETCD_DIR.tmp"
  debian_unpack sid "$SB_ETCD_DIR.tmp" "etcd-server=$SB_ETCD_VERSION*"
  "$SB_ETCD_DIR.tmp/usr/bin/etcd" --version >/dev/null || die "the unpacked etcd does not run"
  rm -rf "$SB_ETCD_DIR"
  mv "$SB_ETCD_DIR.tmp" "$SB_ETCD_DIR"
fi

if [ -f "$SB_KUBE_DIR/$SB_KUBE_STAMP" ]; then
  log "kubernetes $SB_KUBE_VERSION ready: $SB_KUBE_DIR/bin"
  exit 0
fi

work="$SB_CACHE_DIR/kube-build-$SB_KUBE_VERSION"
rm -rf "$work"
mkdir -p "$work/bin"
tarball="$SB_VENDOR_DIR/kubernetes-$SB_KUBE_VERSION-openshift-min.tar.xz"
if [ -n "${SB_KUBE_BIN_DIR:-}" ]; then
  log "taking the Kubernetes binaries from SB_KUBE_BIN_DIR=$SB_KUBE_BIN_DIR"
  for c in "${COMMANDS[@]}"; do
    [ -x "$SB_KUBE_BIN_DIR/$c" ] || die "SB_KUBE_BIN_DIR: $SB_KUBE_BIN_DIR/$c missing or not executable"
    cp "$SB_KUBE_BIN_DIR/$c" "$work/bin/$c"
  done
elif [ ! -f "$tarball" ]; then
  die "the Kubernetes $SB_KUBE_VERSION source tarball is missing ($tarball). Point SB_VENDOR_DIR at \
the folder that holds kubernetes-$SB_KUBE_VERSION-openshift-min.tar.xz, or SB_KUBE_BIN_DIR at a \
folder with the official v$SB_KUBE_VERSION release binaries ${COMMANDS[*]} \
(https://dl.k8s.io/release/v$SB_KUBE_VERSION/bin/linux/amd64/<name>)"
else
  goroot_parent="$SB_CACHE_DIR/$go_pkg"
  if [ ! -x "$goroot_parent/usr/lib/go-${go_pkg#golang-}/bin/go" ]; then
    log "fetching $go_pkg-go from Debian $go_suite"
    rm -rf "$goroot_parent.tmp"
    debian_unpack "$go_suite" "$goroot_parent.tmp" "$go_pkg-go" "$go_pkg-src"
    rm -rf "$goroot_parent"
    mv "$goroot_parent.tmp" "$goroot_parent"
  fi
  export GOROOT="$goroot_parent/usr/lib/go-${go_pkg#golang-}"
  GO="$GOROOT/bin/go"
  "$GO" version >/dev/null || die "$GO does not run"
  log "unpacking $(basename "$tarball")"
  mkdir -p "$work/src"
  tar -xJf "$tarball" -C "$work/src"
  [ -f "$work/src/cmd/kube-apiserver/apiserver.go" ] || die "unexpected tarball layout in $tarball"
  export GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off GOFLAGS=-mod=vendor CGO_ENABLED=0 \
    GOCACHE="$work/gocache" GOPATH="$work/gopath"
  # The version stamps of the tarball's README: /version and --version say v<version>.
  maj=${SB_KUBE_VERSION%%.*} min=${SB_KUBE_VERSION#*.}
  min=${min%%.*}
  ldf="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $pkg.gitMajor=$maj -X $pkg.gitMinor=$min -X $pkg.gitVersion=v$SB_KUBE_VERSION"
    ldf+=" -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=clean"
  done
  cd "$work/src"
  for c in "${COMMANDS[@]}"; do
    t=$SECONDS
    log "go build $c ($("$GO" version | cut -d' ' -f3))"
    "$GO" build -trimpath -ldflags "$ldf" -o "$work/bin/$c" "./cmd/$c"
    log "$c built in $((SECONDS - t)) s"
  done
  cd /
fi
for c in "${COMMANDS[@]}"; do
  v=$("$work/bin/$c" --version 2>/dev/null || "$work/bin/$c" version --client 2>/dev/null) ||
    die "$c --version failed"
  case "$v" in *"v$SB_KUBE_VERSION"*) ;; *) die "$c says '$v', not v$SB_KUBE_VERSION" ;; esac
done
rm -rf "$SB_KUBE_DIR/bin"
mkdir -p "$SB_KUBE_DIR"
mv "$work/bin" "$SB_KUBE_DIR/bin"
"$SB_KUBE_DIR/bin/kube-apiserver" --version >"$SB_KUBE_DIR/$SB_KUBE_STAMP"
rm -rf "$work"
log "kubernetes $SB_KUBE_VERSION binaries ready in $((SECONDS - start)) s: $SB_KUBE_DIR/bin"
