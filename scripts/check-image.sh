#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Checks an image archive from scripts/build-image.sh:
#   1. the OCI layout: every blob's sha256 and size match its descriptors, each config's
#      diff_ids match the layers, the docker-style manifest.json names existing blobs;
#   2. with containerd and runc installed and root: a private containerd (its own socket, root
#      and state under a temporary directory; the native snapshotter) imports the archive
#      (`ctr images import`), lists the four names, and runs `slurm-bridge --version` in the
#      image as its user (65532), which proves the library closure is complete.
# Usage: scripts/check-image.sh ARCHIVE [COMMAND...]   (COMMAND default: /usr/bin/slurm-bridge --version)
set -euo pipefail
archive=${1:?usage: check-image.sh ARCHIVE [COMMAND...]}
shift
cmd=("$@")
[ ${#cmd[@]} -gt 0 ] || cmd=(/usr/bin/slurm-bridge --version)
work=$(mktemp -d "${TMPDIR:-/tmp}/sb-image-check.XXXXXX")
ctd_pid=
cleanup() {
  if [ -n "$ctd_pid" ]; then
    kill "$ctd_pid" 2>/dev/null || true
    wait "$ctd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/layout"
tar -xf "$archive" -C "$work/layout"
python3 - "$work/layout" <<'EOF'
import hashlib, json, os, sys, tarfile
d = sys.argv[1]
def blob(desc):
    algo, hexd = desc["digest"].split(":")
    p = os.path.join(d, "blobs", algo, hexd)
    data = open(p, "rb").read()
    assert hashlib.sha256(data).hexdigest() == hexd, f"{p}: digest mismatch"
    assert len(data) == desc["size"], f"{p}: size {len(data)} != {desc['size']}"
    return p, data
assert json.load(open(os.path.join(d, "oci-layout")))["imageLayoutVersion"] == "1.0.0"
index = json.load(open(os.path.join(d, "index.json")))
names = []
for m in index["manifests"]:
    _, raw = blob(m)
    man = json.loads(raw)
    assert man["mediaType"] == m["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    _, craw = blob(man["config"])
    cfg = json.loads(craw)
    diff_ids = []
    for layer in man["layers"]:
        p, _ = blob(layer)
        assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar"
        diff_ids.append("sha256:" + hashlib.sha256(open(p, "rb").read()).hexdigest())
        with tarfile.open(p) as t:
            members = {x.name.lstrip("./"): x for x in t.getmembers()}
        for f in ("usr/bin/slurm-bridge", "etc/passwd", "etc/ssl/certs/ca-certificates.crt"):
            assert f in members, f"layer lacks {f}"
    assert cfg["rootfs"]["diff_ids"] == diff_ids, "diff_ids do not match the layers"
    assert cfg["config"]["User"] == "65532:65532", cfg["config"]["User"]
    names.append(m["annotations"]["org.opencontainers.image.ref.name"])
for e in json.load(open(os.path.join(d, "manifest.json"))):
    for p in [e["Config"], *e["Layers"]]:
        assert os.path.exists(os.path.join(d, p)), f"manifest.json names a missing {p}"
print("layout ok:", ", ".join(names))
EOF

if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || [ "$(id -u)" != 0 ]; then
  echo "check-image: no containerd/runc or not root: import and run skipped"
  exit 0
fi
sock="$work/ctd.sock"
cat >"$work/config.toml" <<EOF
version = 2
root = "$work/root"
state = "$work/state"
[grpc]
  address = "$sock"
EOF
containerd --config "$work/config.toml" >"$work/containerd.log" 2>&1 &
ctd_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { cat "$work/containerd.log"; echo "check-image: containerd did not start" >&2; exit 1; }
ctr -a "$sock" images import --snapshotter native "$archive" >/dev/null
ctr -a "$sock" images ls
first=$(ctr -a "$sock" images ls -q | head -n1)
echo "check-image: running ${cmd[*]} in $first"
timeout 60 ctr -a "$sock" run --rm --snapshotter native "$first" "sb-check-$$" "${cmd[@]}"
echo "check-image: ok"
