#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the slurm-bridge container image offline, from the built binary and this machine's
# Debian packages: no registry, no base image, no container engine. The image holds only
#   /usr/bin/slurm-bridge (stripped), its shared-library closure (ldd) and the dynamic loader,
#   /etc/ssl/certs/ca-certificates.crt (TLS to slurmrestd and kube-apiserver),
#   /etc/passwd and /etc/group with a non-root user nonroot (uid and gid 65532, distroless'),
#   /etc/nsswitch.conf (hosts: files dns), and the mount points the chart uses.
# It runs as 65532:65532 with ENTRYPOINT ["/usr/bin/slurm-bridge"].
#
# Output: an OCI image layout packed in a tar (OUT, default build/slurm-bridge-image-VERSION.tar),
# with one layer and four image names, each with its default command (the chart sets its own):
#   ghcr.io/slinkyproject/slurm-bridge:VERSION              CMD ["--help"]
#   ghcr.io/slinkyproject/slurm-bridge-scheduler:VERSION    CMD ["scheduler"]
#   ghcr.io/slinkyproject/slurm-bridge-controllers:VERSION  CMD ["controllers"]
#   ghcr.io/slinkyproject/slurm-bridge-admission:VERSION    CMD ["admission"]
# (upstream's three image names, so that the chart's default values find it; REPO_PREFIX
# changes ghcr.io/slinkyproject). VERSION is the project's (CMakeLists.txt). The tar also holds
# a docker-style manifest.json (as `docker save` since 25 writes), so both
#   ctr -n k8s.io images import OUT        and        podman load -i OUT / docker load -i OUT
# accept it. Reproducible: fixed owners, mtimes and order; the same binary gives the same digests.
#
# Usage: scripts/build-image.sh [BINARY [OUT]]      (BINARY default build/slurm-bridge)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=${1:-$root/build/slurm-bridge}
version=$(sed -n 's/^project(slurm-bridge VERSION \([0-9][0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[ -n "$version" ] || { echo "build-image: no project VERSION in CMakeLists.txt" >&2; exit 1; }
out=${2:-$root/build/slurm-bridge-image-$version.tar}
prefix=${REPO_PREFIX:-ghcr.io/slinkyproject}
die() { echo "build-image: $*" >&2; exit 1; }
[ -x "$binary" ] || die "$binary: no such executable (build it first: cmake --build build)"
for t in jq ldd strip sha256sum tar; do command -v $t >/dev/null || die "$t missing"; done
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || die "$ca missing (apt-get install ca-certificates)"

work=$(mktemp -d "${TMPDIR:-/tmp}/sb-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
mkdir -p "$rootfs"/{usr/bin,etc/ssl/certs,tmp/k8s-webhook-server/serving-certs,etc/slurm-bridge} \
  "$rootfs"/{var/run/secrets/slurm,home/nonroot,proc,sys,dev}
chmod 1777 "$rootfs/tmp"
strip --strip-unneeded -o "$rootfs/usr/bin/slurm-bridge" "$binary"
chmod 755 "$rootfs/usr/bin/slurm-bridge"

# The library closure: every path ldd resolves, plus the loader; copied to the same path
# (symlinks resolved), so the binary's interpreter and RUNPATH-free lookups find them.
libs=$(ldd "$binary" | awk '/=> \//{print $3} /^[[:space:]]*\/.*ld-linux/{print $1}' | sort -u)
ldd "$binary" | grep -q 'not found' && die "ldd: unresolved libraries: $(ldd "$binary" | grep 'not found')"
for l in $libs; do
  mkdir -p "$rootfs$(dirname "$l")"
  cp -L "$l" "$rootfs$l"
done
interp=$(readelf -l "$binary" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
if [ -n "$interp" ] && [ ! -e "$rootfs$interp" ]; then
  mkdir -p "$rootfs$(dirname "$interp")"
  cp -L "$interp" "$rootfs$interp"
fi
cp "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"

d="$work/layout"
mkdir -p "$d/blobs/sha256"
blob() { # FILE -> "digest size"; moves FILE into blobs/
  local dg sz
  dg=$(sha256sum "$1" | cut -d' ' -f1)
  sz=$(stat -c %s "$1")
  mv "$1" "$d/blobs/sha256/$dg"
  echo "$dg $sz"
}
# Every file owned by root (read-only to the user); fixed mtimes and order.
tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$rootfs" -cf "$d/layer" .
read -r layer_dg layer_sz <<<"$(blob "$d/layer")"

manifests='[]'
docker='[]'
add_image() { # NAME CMD_JSON
  local name=$1 cmd=$2 cfg_dg cfg_sz man_dg man_sz
  jq -cn --argjson cmd "$cmd" --arg diff "sha256:$layer_dg" --arg v "$version" '{
      created: "1970-01-01T00:00:00Z", architecture: "amd64", os: "linux",
      config: {User: "65532:65532", Entrypoint: ["/usr/bin/slurm-bridge"], Cmd: $cmd,
               Env: ["PATH=/usr/local/bin:/usr/bin:/bin"], WorkingDir: "/",
               Labels: {"org.opencontainers.image.title": "slurm-bridge",
                        "org.opencontainers.image.version": $v,
                        "org.opencontainers.image.licenses": "Apache-2.0"}},
      rootfs: {type: "layers", diff_ids: [$diff]},
      history: [{created: "1970-01-01T00:00:00Z", created_by: "scripts/build-image.sh"}]}' \
    >"$d/config"
  read -r cfg_dg cfg_sz <<<"$(blob "$d/config")"
  jq -cn --arg c "sha256:$cfg_dg" --argjson cs "$cfg_sz" --arg l "sha256:$layer_dg" \
    --argjson ls "$layer_sz" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $l, size: $ls}]}' \
    >"$d/manifest"
  read -r man_dg man_sz <<<"$(blob "$d/manifest")"
  manifests=$(jq -c --arg m "sha256:$man_dg" --argjson ms "$man_sz" --arg n "$name" '. + [{
      mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $ms,
      platform: {architecture: "amd64", os: "linux"},
      annotations: {"io.containerd.image.name": $n, "org.opencontainers.image.ref.name": $n}}]' \
    <<<"$manifests")
  docker=$(jq -c --arg c "blobs/sha256/$cfg_dg" --arg l "blobs/sha256/$layer_dg" --arg n "$name" \
    '. + [{Config: $c, RepoTags: [$n], Layers: [$l]}]' <<<"$docker")
}
add_image "$prefix/slurm-bridge:$version" '["--help"]'
for c in scheduler controllers admission; do
  add_image "$prefix/slurm-bridge-$c:$version" "[\"$c\"]"
done
jq -n --argjson m "$manifests" '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: $m}' \
  >"$d/index.json"
echo "$docker" | jq . >"$d/manifest.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
mkdir -p "$(dirname "$out")"
tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$d" \
  -cf "$out.tmp" oci-layout index.json manifest.json blobs
mv "$out.tmp" "$out"

nlibs=$(echo "$libs" | wc -w)
echo "build-image: $out"
echo "build-image: layer $(numfmt --to=iec "$layer_sz") uncompressed ($(gzip -c <"$d/blobs/sha256/$layer_dg" | wc -c | numfmt --to=iec) gzipped), $nlibs libraries, archive $(stat -c %s "$out" | numfmt --to=iec)"
jq -r '.manifests[].annotations["io.containerd.image.name"]' "$d/index.json" | sed 's/^/build-image:   /'
