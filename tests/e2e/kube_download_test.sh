#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# testenv/kube/build.sh's download path (no source tarball in SB_VENDOR_DIR, no SB_KUBE_BIN_DIR),
# against a loopback HTTP server (python3 -m http.server on 127.0.0.1) that serves
# kubernetes-server-linux-amd64.tar.gz assembled from five small stand-ins for the release's
# binaries (layout kubernetes/server/bin/<name>; each prints the version as the real one does, which
# is all build.sh asks of them: the test is of the download, not of Kubernetes) and its .sha512:
#   - SB_KUBE_RELEASE_SHA512 right: the five binaries cached, identical, stamped, no tarball left;
#   - no pinned sum, no override: the site's .sha512 checks it, with a warning that says so;
#   - a corrupted tarball (bytes flipped), a missing .sha512 (HTTP 404), an unreachable site (a
#     closed loopback port), a tarball without the binaries, and a pinned sum that the tarball
#     does not match (a version pinned in testenv/kube/release-sha512, its site's .sha512
#     matching): each refused with a message that names SB_KUBE_BIN_DIR, SB_VENDOR_DIR and
#     SB_KUBE_RELEASE_URL, nothing cached.
# Each run uses an empty cache of its own; etcd is the real cache's.
# Usage: tests/e2e/kube_download_test.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/testenv/lib.sh"
fails=0
check() {
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
[ -x "$SB_ETCD" ] || { echo "no etcd in $SB_ETCD_DIR: run scripts/prepare-testenv.sh"; exit 1; }
command -v python3 >/dev/null || { echo "python3 missing: run scripts/install-deps.sh"; exit 1; }
commands=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
tgz=kubernetes-server-linux-amd64.tar.gz
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sb-kube-download.XXXXXX")
server=""
trap '[ -z "$server" ] || kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT

# The site: good/ (the tarball and its .sha512), corrupt/ (bytes flipped, the original's
# .sha512), nosum/ (no .sha512), lacking/ (a tarball without kubectl).
site=$tmp/site
mkdir -p "$tmp/tree/kubernetes/server/bin" "$site/good" "$site/corrupt" "$site/nosum" "$site/lacking"
# The stand-ins, in stand/ (what `installed` compares against) and in the tarball's tree.
mkdir -p "$tmp/stand"
for c in "${commands[@]}"; do
  printf '#!/bin/sh\n# stand-in for %s\necho "Kubernetes v%s"\n' "$c" "$SB_KUBE_VERSION" >"$tmp/stand/$c"
  chmod 755 "$tmp/stand/$c"
  cp "$tmp/stand/$c" "$tmp/tree/kubernetes/server/bin/$c"
done
# 64 KiB that gzip cannot shrink, so that the bytes flipped at offset 4096 lie inside the archive.
head -c 65536 /dev/urandom >"$tmp/tree/kubernetes/server/bin/padding"
tar -C "$tmp/tree" -cf - kubernetes | gzip -1 >"$site/good/$tgz"
sum=$(sha512sum "$site/good/$tgz" | cut -d' ' -f1)
echo "$sum" >"$site/good/$tgz.sha512"
cp "$site/good/$tgz" "$site/corrupt/$tgz"
python3 - "$site/corrupt/$tgz" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(4096)
    b = f.read(16)
    f.seek(4096)
    f.write(bytes(x ^ 0xFF for x in b))
PY
cp "$site/good/$tgz.sha512" "$site/corrupt/$tgz.sha512"
cp "$site/good/$tgz" "$site/nosum/$tgz"
rm "$tmp/tree/kubernetes/server/bin/kubectl"
tar -C "$tmp/tree" -czf "$site/lacking/$tgz" kubernetes
lacking_sum=$(sha512sum "$site/lacking/$tgz" | cut -d' ' -f1)
rm -rf "$tmp/tree"
check "the corrupted tarball differs" [ "$(sha512sum "$site/corrupt/$tgz" | cut -d' ' -f1)" != "$sum" ]

port=$(free_port)
closed=$(free_port)
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$site" >"$tmp/http.log" 2>&1 &
server=$!
wait_for 20 curl -fsS -o /dev/null "http://127.0.0.1:$port/good/$tgz.sha512" ||
  { cat "$tmp/http.log"; echo "the loopback HTTP server did not start"; exit 1; }
url=http://127.0.0.1:$port

build() { # CACHE_NAME [VAR=VALUE...]: build.sh with an empty cache, no tarball; output in $tmp/out
  local cache=$tmp/$1; shift
  env -u SB_KUBE_BIN_DIR -u SB_KUBE_RELEASE_SHA512 -u SB_KUBE_RELEASE_URL \
    SB_CACHE_DIR="$cache" SB_KUBE_DIR= SB_ETCD_DIR="$SB_ETCD_DIR" SB_VENDOR_DIR="$tmp/nowhere" "$@" \
    "$root/testenv/kube/build.sh" >"$tmp/out" 2>&1
}
names_ways_out() { grep -q SB_KUBE_BIN_DIR "$tmp/out" && grep -q SB_VENDOR_DIR "$tmp/out" &&
  grep -q SB_KUBE_RELEASE_URL "$tmp/out"; }
nothing_cached() { # CACHE_NAME [VERSION]: no binaries, no stamp, no tarball left in the cache
  local cache=$tmp/$1 v=${2:-$SB_KUBE_VERSION}
  [ ! -e "$cache/kube-$v/bin" ] && [ ! -e "$cache/kube-$v/$SB_KUBE_STAMP" ] &&
    [ -z "$(find "$cache" -name "$tgz" 2>/dev/null)" ]
}
installed() { # CACHE_NAME: the five binaries identical to the cache's, stamped, nothing left over
  local cache=$tmp/$1 c
  for c in "${commands[@]}"; do cmp -s "$tmp/stand/$c" "$cache/kube-$SB_KUBE_VERSION/bin/$c" || return 1; done
  [ -f "$cache/kube-$SB_KUBE_VERSION/$SB_KUBE_STAMP" ] && [ ! -e "$cache/kube-build-$SB_KUBE_VERSION" ] &&
    [ -z "$(find "$cache" -name "$tgz" 2>/dev/null)" ]
}
show() { sed 's/^/     | /' "$tmp/out"; }

# (a) The right sum given: cached.
build given SB_KUBE_RELEASE_URL="$url/good" SB_KUBE_RELEASE_SHA512="$sum"
check "SB_KUBE_RELEASE_SHA512 right: succeeds" [ $? = 0 ]
check "SB_KUBE_RELEASE_SHA512 right: five binaries identical, stamped, no tarball left" installed given
check "SB_KUBE_RELEASE_SHA512 right: no warning" bash -c "! grep -q warning '$tmp/out'"
show

# (b) No pinned sum for the version (when this version has one, it is left to (f)), no override:
# the site's .sha512, with a warning.
if ! awk -v v="$SB_KUBE_VERSION" '$1 == v { f = 1 } END { exit !f }' "$root/testenv/kube/release-sha512"; then
  build sitesum SB_KUBE_RELEASE_URL="$url/good"
  check "site's .sha512: succeeds" [ $? = 0 ]
  check "site's .sha512: five binaries identical, stamped, no tarball left" installed sitesum
  check "site's .sha512: warns that the sum is not pinned" grep -q "warning: no sha512 .* is pinned" "$tmp/out"
  check "site's .sha512: says which file it checked against" grep -q "$url/good/$tgz.sha512" "$tmp/out"
  show
else
  echo "skip site's .sha512 (v$SB_KUBE_VERSION has a pinned sum)"
fi

# (c) A corrupted download: refused, expected and got named, nothing cached.
build corrupt SB_KUBE_RELEASE_URL="$url/corrupt"
check "corrupted tarball: fails" [ $? != 0 ]
check "corrupted tarball: says wrong sha512, expected and got" grep -q "wrong sha512 (expected $sum from .*, got [0-9a-f]\{128\})" "$tmp/out"
check "corrupted tarball: names SB_KUBE_BIN_DIR, SB_VENDOR_DIR, SB_KUBE_RELEASE_URL" names_ways_out
check "corrupted tarball: nothing cached" nothing_cached corrupt
show

# (d) An unreachable site (nothing listens on the port): curl's message.
build unreachable SB_KUBE_RELEASE_URL="http://127.0.0.1:$closed/v$SB_KUBE_VERSION"
check "unreachable site: fails" [ $? != 0 ]
check "unreachable site: curl's message" grep -q "fetching http://127.0.0.1:$closed/.* failed: curl: (7)" "$tmp/out"
check "unreachable site: names SB_KUBE_BIN_DIR, SB_VENDOR_DIR, SB_KUBE_RELEASE_URL" names_ways_out
check "unreachable site: nothing cached" nothing_cached unreachable
show

# (e) An HTTP error: the site has no .sha512 (404).
build nosum SB_KUBE_RELEASE_URL="$url/nosum"
check "HTTP 404: fails" [ $? != 0 ]
check "HTTP 404: curl's message" grep -q "$tgz.sha512 failed: curl: (22).*404" "$tmp/out"
check "HTTP 404: names SB_KUBE_BIN_DIR, SB_VENDOR_DIR, SB_KUBE_RELEASE_URL" names_ways_out
check "HTTP 404: nothing cached" nothing_cached nosum
show

# (f) A pinned sum wins over the site's .sha512: the first version pinned in
# testenv/kube/release-sha512, served this tarball (whose .sha512 the site gets right).
pinned=$(awk '$1 !~ /^#/ && NF == 2 { print $1; exit }' "$root/testenv/kube/release-sha512")
pinned_sum=$(awk -v v="$pinned" '$1 == v { print $2 }' "$root/testenv/kube/release-sha512")
check "testenv/kube/release-sha512 pins a version" [ -n "$pinned" ]
sha_gets() { grep -c "GET /good/$tgz.sha512 " "$tmp/http.log"; }
gets_before=$(sha_gets)
build pinned SB_KUBE_VERSION="$pinned" SB_KUBE_RELEASE_URL="$url/good"
check "pinned sum, another tarball: fails" [ $? != 0 ]
check "pinned sum, another tarball: expected is the pinned sum" \
  grep -q "wrong sha512 (expected $pinned_sum from the sum pinned for v$pinned in testenv/kube/release-sha512, got $sum)" "$tmp/out"
check "pinned sum: the site's .sha512 was not fetched" [ "$(sha_gets)" = "$gets_before" ]
check "pinned sum, another tarball: names SB_KUBE_BIN_DIR, SB_VENDOR_DIR, SB_KUBE_RELEASE_URL" names_ways_out
check "pinned sum, another tarball: nothing cached" nothing_cached pinned "$pinned"
show

# (g) The sum is right but the tarball lacks kubectl.
build lacking SB_KUBE_RELEASE_URL="$url/lacking" SB_KUBE_RELEASE_SHA512="$lacking_sum"
check "tarball without kubectl: fails" [ $? != 0 ]
check "tarball without kubectl: says the files are missing" grep -q "lacks the expected files.*kubectl" "$tmp/out"
check "tarball without kubectl: names SB_KUBE_BIN_DIR, SB_VENDOR_DIR, SB_KUBE_RELEASE_URL" names_ways_out
check "tarball without kubectl: nothing cached" nothing_cached lacking
show

[ $fails = 0 ] || { echo "$fails FAILED"; exit 1; }
echo "all passed"
