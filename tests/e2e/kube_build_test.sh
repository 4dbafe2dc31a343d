#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# testenv/kube/build.sh where the source tarball is missing (a machine outside this workplace),
# with SB_KUBE_BIN_DIR: pointing at binaries of the right version it takes them (here: the cache's
# own, standing in for the official release binaries), and it refuses binaries of another
# version. (Without SB_KUBE_BIN_DIR it downloads the release: tests/e2e/kube_download_test.sh.)
# Each run uses an empty cache of its own; etcd is the real cache's.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/testenv/lib.sh"
fails=0
check() {
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
[ -f "$SB_KUBE_DIR/$SB_KUBE_STAMP" ] || { echo "no Kubernetes in $SB_KUBE_DIR: run scripts/prepare-testenv.sh"; exit 1; }
real_bin=$SB_KUBE_DIR/bin
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sb-kube-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
build() { # CACHE_NAME [VAR=VALUE...]: build.sh with an empty cache; its output in $tmp/out
  local cache=$tmp/$1; shift
  env SB_CACHE_DIR="$cache" SB_KUBE_DIR= SB_ETCD_DIR="$SB_ETCD_DIR" "$@" \
    "$root/testenv/kube/build.sh" >"$tmp/out" 2>&1
}

build given SB_VENDOR_DIR="$tmp/nowhere" SB_KUBE_BIN_DIR="$real_bin"
check "SB_KUBE_BIN_DIR: succeeds" [ $? = 0 ]
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  check "SB_KUBE_BIN_DIR: $c installed" cmp -s "$real_bin/$c" "$tmp/given/kube-$SB_KUBE_VERSION/bin/$c"
done
check "SB_KUBE_BIN_DIR: stamped" [ -f "$tmp/given/kube-$SB_KUBE_VERSION/$SB_KUBE_STAMP" ]

# Binaries of another version than SB_KUBE_VERSION are refused.
other=1.34.2
[ "$SB_KUBE_VERSION" != 1.34.2 ] || other=1.36.2
build wrong SB_KUBE_VERSION=$other SB_VENDOR_DIR="$tmp/nowhere" SB_KUBE_BIN_DIR="$real_bin"
check "binaries of v$SB_KUBE_VERSION for $other: fails" [ $? != 0 ]
check "binaries of another version: says which" grep -q "not v$other" "$tmp/out"
check "binaries of another version: nothing installed" [ ! -e "$tmp/wrong/kube-$other/bin" ]

[ $fails = 0 ] || { cat "$tmp/out"; echo "$fails FAILED"; exit 1; }
echo "all passed"
