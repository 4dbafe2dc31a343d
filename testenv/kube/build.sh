#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Puts the Kubernetes of the test environment into the cache, once: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kubectl at SB_KUBE_VERSION (default 1.36.2;
# 1.34.2 for scripts/compat.sh) in SB_KUBE_DIR/bin, and etcd 3.5 in SB_ETCD_DIR.
#
# The binaries come from the first of these that applies:
#   SB_KUBE_BIN_DIR  a folder holding the five official release binaries of the same version
#                    (https://dl.k8s.io/release/v<version>/bin/linux/amd64/<name>): copied in.
#   SB_VENDOR_DIR    holds the minimal source tarball kubernetes-<version>-openshift-min.tar.xz
#                    (OpenShift's fork of Kubernetes, as carried in openshift/microshift:
#                    upstream's API types, defaults and feature gates; see that folder's README):
#                    built offline with Go from Debian's archive (1.26 from trixie-backports for
#                    1.36, 1.24 from trixie for 1.34), unpacked into the cache, not installed.
#   otherwise        Kubernetes' official server tarball kubernetes-server-linux-amd64.tar.gz is
#                    fetched from SB_KUBE_RELEASE_URL (default https://dl.k8s.io/v<version>),
#                    checked against its sha512 (SB_KUBE_RELEASE_SHA512 if set, else the sum
#                    pinned for the version in testenv/kube/release-sha512, else, with a warning,
#                    the .sha512 file the site serves beside the tarball), and the five binaries
#                    unpacked from kubernetes/server/bin/; the tarball (several hundred MB) is
#                    deleted once they are out, whatever the outcome.
# Each way checks that every binary says v<version> before it is cached.
# etcd-server 3.5 comes from Debian sid, also unpacked into the cache.
# The machine's apt sources are left alone (a private APT_CONFIG, see debian_unpack in lib.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
# What the source build needs per version (the other two ways take any version).
go_pkg=""
case "$SB_KUBE_VERSION" in
  1.36.2) go_pkg=golang-1.26 go_suite=trixie-backports commit=98b35193b2ac7a23a673325f5e9b830ecd5ba406 ;;
  1.34.2) go_pkg=golang-1.24 go_suite=trixie commit=047d96223dd843e9d54bed59bc212d2e9122c56a ;;
esac
SB_KUBE_RELEASE_URL="${SB_KUBE_RELEASE_URL:-https://dl.k8s.io/v$SB_KUBE_VERSION}"
# The sums pinned per version (where each comes from: that file).
pins="$here/kube/release-sha512"
server_tgz=kubernetes-server-linux-amd64.tar.gz

# The ways out, for every message of the download path.
ways_out() {
  echo "Ways out: SB_KUBE_RELEASE_URL=<a site serving $server_tgz of v$SB_KUBE_VERSION> \
(now $SB_KUBE_RELEASE_URL), SB_KUBE_BIN_DIR=<a folder with the official v$SB_KUBE_VERSION release \
binaries ${COMMANDS[*]}> (https://dl.k8s.io/release/v$SB_KUBE_VERSION/bin/linux/amd64/<name>), or \
SB_VENDOR_DIR=<the folder that holds kubernetes-$SB_KUBE_VERSION-openshift-min.tar.xz> (now $SB_VENDOR_DIR)"
}

# download WORK: fetches the server tarball into WORK, checks its sha512 and puts the five
# binaries into WORK/bin; the tarball and what else it holds are deleted. Dies (WORK removed) on
# an unreachable site, an HTTP error, a wrong sum or a tarball without the binaries.
download() {
  local work=$1 url="$SB_KUBE_RELEASE_URL/$server_tgz" want="" from got err c
  fail() { rm -rf "$work"; die "$* $(ways_out)"; }
  command -v curl >/dev/null || fail "curl missing (scripts/install-deps.sh installs it)."
  if [ -n "${SB_KUBE_RELEASE_SHA512:-}" ]; then
    want=$SB_KUBE_RELEASE_SHA512 from="SB_KUBE_RELEASE_SHA512"
  else
    want=$(awk -v v="$SB_KUBE_VERSION" '$1 == v { print $2 }' "$pins")
    from="the sum pinned for v$SB_KUBE_VERSION in testenv/kube/release-sha512"
  fi
  mkdir -p "$work/download"
  if [ -z "$want" ]; then
    log "warning: no sha512 of $server_tgz v$SB_KUBE_VERSION is pinned in this repository \
(testenv/kube/release-sha512): checking it against $url.sha512 from the same site, which catches \
a broken download but not a tampered site. Set SB_KUBE_RELEASE_SHA512 to the sum that Kubernetes' \
CHANGELOG publishes for it (or add it to testenv/kube/release-sha512) to pin it."
    err=$(curl -fsSL --connect-timeout 20 --retry 2 -o "$work/download/sum" "$url.sha512" 2>&1) ||
      fail "fetching $url.sha512 failed: ${err:-curl exit $?}."
    want=$(awk 'NR == 1 { print $1 }' "$work/download/sum")
    from="$url.sha512"
  fi
  want=$(printf '%s' "$want" | tr 'A-F' 'a-f')
  [[ "$want" =~ ^[0-9a-f]{128}$ ]] || fail "the expected sha512 from $from is not 128 hex digits: '$want'."
  log "fetching $url (several hundred MB)"
  err=$(curl -fsSL --connect-timeout 20 --retry 2 -o "$work/download/$server_tgz" "$url" 2>&1) ||
    fail "fetching $url failed: ${err:-curl exit $?}."
  got=$(sha512sum "$work/download/$server_tgz" | cut -d' ' -f1)
  [ "$got" = "$want" ] || fail "$url: wrong sha512 (expected $want from $from, got $got); \
nothing cached."
  log "sha512 matches $from; unpacking ${COMMANDS[*]}"
  local members=()
  for c in "${COMMANDS[@]}"; do members+=("kubernetes/server/bin/$c"); done
  err=$(tar -xzf "$work/download/$server_tgz" -C "$work/download" "${members[@]}" 2>&1) ||
    fail "$url: the tarball lacks the expected files kubernetes/server/bin/{$(IFS=,; echo "${COMMANDS[*]}")}: $err."
  for c in "${COMMANDS[@]}"; do
    [ -f "$work/download/kubernetes/server/bin/$c" ] || fail "$url: no kubernetes/server/bin/$c in the tarball."
    mv "$work/download/kubernetes/server/bin/$c" "$work/bin/$c"
    chmod +x "$work/bin/$c"
  done
  rm -rf "$work/download"
}

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
  log "no Kubernetes $SB_KUBE_VERSION source tarball ($tarball) and no SB_KUBE_BIN_DIR: \
downloading the official release from $SB_KUBE_RELEASE_URL"
  download "$work"
else
  [ -n "$go_pkg" ] || die "SB_KUBE_VERSION=$SB_KUBE_VERSION: the source build knows 1.36.2 and \
1.34.2; for another version set SB_KUBE_BIN_DIR, or move $tarball away to download the release"
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
