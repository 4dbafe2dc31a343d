#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds, offline and once, the container images the kubelets' nodes need, as OCI image-layout
# archives in the cache (SB_IMAGES_DIR), which testenv/kubelet/node.sh imports into each node's
# containerd at node start (there is no registry; nothing is ever pulled):
#   pause.tar     localhost/pause:3.4              the sandbox image: a static build of
#                                                  testenv/kube/pause.c
#   busybox.tar   localhost/busybox:1              busybox-static with its applet links
#   demo.tar      localhost/slurm-bridge-demo:1    busybox plus /bin/demo-workload: an offline
#                                                  stand-in for the seed's YOLO image (that one
#                                                  needs PyTorch and a GPU); it prints what it got
#                                                  (node, Slurm job, GPUs) and runs a short CPU
#                                                  benchmark, and says that it is a stand-in
# Does nothing when the cache was built from the same scripts (stamp SB_IMAGES_STAMP holds their hash).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

inputs=$(cat "$0" "$here/kube/demo-workload.sh" "$here/kube/pause.c" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$SB_IMAGES_DIR/$SB_IMAGES_STAMP" 2>/dev/null)" = "$inputs" ]; then
  log "images ready: $SB_IMAGES_DIR"
  exit 0
fi
command -v jq >/dev/null || die "jq missing: run scripts/install-deps.sh"
busybox=/bin/busybox
file -b "$busybox" 2>/dev/null | grep -q 'statically linked' ||
  ldd "$busybox" 2>&1 | grep -q 'not a dynamic executable' ||
  die "$busybox is not static: run scripts/install-deps.sh (busybox-static)"
start=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/sb-images.XXXXXX")
trap 'rm -rf "$work"' EXIT
out="$work/out"
mkdir -p "$out"

# oci_archive ROOTFS OUT_TAR TAG ENTRYPOINT_JSON CMD_JSON: packs ROOTFS as a one-layer image in an
# OCI image layout, tagged TAG (`ctr images import --base-name REPO` names it REPO:TAG).
# Reproducible: fixed owners and mtimes, sorted entries.
oci_archive() {
  local rootfs=$1 tar_out=$2 tag=$3 entrypoint=$4 cmd=$5
  local d="$work/layout"
  rm -rf "$d"
  mkdir -p "$d/blobs/sha256"
  tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$rootfs" -cf "$d/layer" .
  blob() { # file -> prints "digest size", moves it into blobs/
    local dg sz
    dg=$(sha256sum "$1" | cut -d' ' -f1)
    sz=$(stat -c %s "$1")
    mv "$1" "$d/blobs/sha256/$dg"
    echo "$dg $sz"
  }
  local layer config manifest
  read -r -a layer <<<"$(blob "$d/layer")"
  jq -cn --argjson ep "$entrypoint" --argjson cmd "$cmd" --arg diff "sha256:${layer[0]}" '{
      architecture: "amd64", os: "linux",
      config: {Entrypoint: $ep, Cmd: $cmd, Env: ["PATH=/bin:/sbin:/usr/bin:/usr/sbin"], WorkingDir: "/"},
      rootfs: {type: "layers", diff_ids: [$diff]},
      history: [{created_by: "testenv/kube/build-images.sh"}]}' >"$d/config"
  read -r -a config <<<"$(blob "$d/config")"
  jq -cn --arg c "sha256:${config[0]}" --argjson cs "${config[1]}" --arg l "sha256:${layer[0]}" \
    --argjson ls "${layer[1]}" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $l, size: $ls}]}' >"$d/manifest"
  read -r -a manifest <<<"$(blob "$d/manifest")"
  jq -cn --arg m "sha256:${manifest[0]}" --argjson ms "${manifest[1]}" --arg tag "$tag" '{
      schemaVersion: 2,
      manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $ms,
        platform: {architecture: "amd64", os: "linux"},
        annotations: {"org.opencontainers.image.ref.name": $tag}}]}' >"$d/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
  tar --numeric-owner --owner=0 --group=0 --mtime=@0 -C "$d" -cf "$tar_out" oci-layout index.json blobs
}

# pause: testenv/kube/pause.c, linked statically (the image has nothing else).
mkdir -p "$work/pause"/{dev,proc,sys}
gcc -Os -Wall -Werror -static -o "$work/pause/pause" "$here/kube/pause.c"
strip "$work/pause/pause"
oci_archive "$work/pause" "$out/pause.tar" 3.4 '["/pause"]' 'null'

# busybox: one static binary, its applets as symlinks, a root user.
bb="$work/busybox"
mkdir -p "$bb"/{bin,dev,etc,proc,sys,tmp,root}
cp "$busybox" "$bb/bin/busybox"
for a in $("$busybox" --list); do
  [ "$a" = busybox ] || ln -sf busybox "$bb/bin/$a"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$bb/etc/passwd"
echo 'root:x:0:' >"$bb/etc/group"
chmod 1777 "$bb/tmp"
oci_archive "$bb" "$out/busybox.tar" 1 'null' '["sh"]'

# The demo's stand-in workload: busybox plus a script.
cp "$here/kube/demo-workload.sh" "$bb/bin/demo-workload"
chmod 755 "$bb/bin/demo-workload"
oci_archive "$bb" "$out/demo.tar" 1 'null' '["/bin/demo-workload"]'

rm -rf "$SB_IMAGES_DIR"
mkdir -p "$(dirname "$SB_IMAGES_DIR")"
mv "$out" "$SB_IMAGES_DIR"
# name file: what node.sh imports, as "ARCHIVE REPO" lines (REPO:TAG comes from the archive).
printf '%s\n' "pause.tar localhost/pause" "busybox.tar localhost/busybox" \
  "demo.tar localhost/slurm-bridge-demo" >"$SB_IMAGES_DIR/images"
echo "$inputs" >"$SB_IMAGES_DIR/$SB_IMAGES_STAMP"
log "images ready in $((SECONDS - start)) s: $SB_IMAGES_DIR ($(du -sh "$SB_IMAGES_DIR" | cut -f1))"
