#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The image's file accounting (ctest cli.image_files, label unit: no daemons, no root). Builds
# the image from BINARY with scripts/build-image.sh (twice: the same binary and commit give the
# same archive) and checks it with scripts/check-image.sh --no-run: every file in the layer is
# the project's own or listed by a Debian package the image records at the host's version, the
# OCI labels are right. Then it tampers with copies of the image (an extra library, a changed
# package version, a changed library, a wrong label) and expects the check to fail naming each.
#
# Usage: tests/cli/image_files_test.sh BINARY
set -euo pipefail
bin=${1:?usage: image_files_test.sh BINARY}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/sb-image-files.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

export SOURCE_DATE_EPOCH=1767225600 # 2026-01-01T00:00:00Z
git_head() { if [ -e "$root/.git" ]; then git -C "$root" rev-parse HEAD; else echo unknown; fi; } # git archive: no .git
head_before=$(git_head)
"$root/scripts/build-image.sh" "$bin" "$dir/a.tar" >"$dir/build.log" 2>&1 || { cat "$dir/build.log"; exit 1; }
"$root/scripts/build-image.sh" "$bin" "$dir/b.tar" >/dev/null 2>&1
head_after=$(git_head)
if cmp -s "$dir/a.tar" "$dir/b.tar"; then ok "two builds give the same archive"; else bad "two builds differ"; fi

if out=$("$root/scripts/check-image.sh" --no-run "$dir/a.tar" 2>&1); then
  ok "check-image: $(echo "$out" | tail -n1)"
else
  bad "check-image refused the built image:"; echo "$out"
fi

mkdir "$dir/layout"
tar -xf "$dir/a.tar" -C "$dir/layout"
labels=$(jq -c .annotations "$dir/layout/index.json")
got=$(jq -r '."org.opencontainers.image.created"' <<<"$labels")
[ "$got" = 2026-01-01T00:00:00Z ] && ok "created is SOURCE_DATE_EPOCH" || bad "created is $got"
got=$(jq -r '."org.opencontainers.image.revision"' <<<"$labels")
[ "$got" = "$head_before" ] || [ "$got" = "$head_after" ] && ok "revision is HEAD ($got)" ||
  bad "revision is $got, HEAD is $head_after"
for n in "" -scheduler -controllers -admission; do
  jq -e --arg n "ghcr.io/slurm-bridge-cpp/slurm-bridge$n:" \
    'any(.manifests[]; .annotations["org.opencontainers.image.ref.name"] | startswith($n))' \
    "$dir/layout/index.json" >/dev/null && ok "image slurm-bridge$n under ghcr.io/slurm-bridge-cpp" ||
    bad "no image slurm-bridge$n under ghcr.io/slurm-bridge-cpp"
done
# The layer's names (regular files and symlinks); each library the binary loads is among them.
python3 - "$dir/layout" >"$dir/names" <<'EOF'
import json, sys, tarfile
d = sys.argv[1]
i = json.load(open(f"{d}/index.json"))
m = json.load(open(f"{d}/blobs/sha256/" + i["manifests"][0]["digest"][7:]))
for x in tarfile.open(f"{d}/blobs/sha256/" + m["layers"][0]["digest"][7:]):
    if x.isfile() or x.issym():
        print(x.name[2:], "file" if x.isfile() else "symlink")
EOF
for l in $(ldd "$bin" | awk '/=> \//{print $1}'); do
  grep -q "/$l " "$dir/names" || bad "the image lacks $l (ldd $bin)"
done
ok "the image holds the $(ldd "$bin" | grep -c '=> /') libraries ldd names"

# tamper LAYOUT OUT MODE ARGS: a copy of the image with one thing changed, digests made right
# again (layer, configs, manifests, index), so that only the accounting or labels can object.
tamper() {
  python3 - "$dir/layout" "$@" <<'EOF'
import hashlib, io, json, os, sys, tarfile
d, out, mode, *args = sys.argv[1:]
B = os.path.join(d, "blobs", "sha256")
rd = lambda dg: open(os.path.join(B, dg.split(":")[1]), "rb").read()
def put(data):
    dg = hashlib.sha256(data).hexdigest()
    open(os.path.join(B, dg), "wb").write(data)
    return "sha256:" + dg, len(data)
index = json.load(open(os.path.join(d, "index.json")))
man0 = json.loads(rd(index["manifests"][0]["digest"]))
src = tarfile.open(fileobj=io.BytesIO(rd(man0["layers"][0]["digest"])))
buf = io.BytesIO()
dst = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
def add(name, data):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode = len(data), 0o644
    dst.addfile(ti, io.BytesIO(data))
for m in src.getmembers():
    data = src.extractfile(m).read() if m.isfile() else None
    if mode == "version" and m.name == "./var/lib/dpkg/status":
        s = data.decode()
        i = s.index(f"Package: {args[0]}\n")
        j = s.index("\nVersion: ", i) + len("\nVersion: ")
        data = (s[:j] + args[1] + s[s.index("\n", j):]).encode()
    if mode == "corrupt" and m.name == "./" + args[0]:
        data = data + b"\0"
    if data is not None:
        m.size = len(data)
        dst.addfile(m, io.BytesIO(data))
    else:
        dst.addfile(m)
if mode == "add":
    add("./" + args[0], b"not from any package\n")
dst.close()
layer, lsz = put(buf.getvalue())
docker = []
for m in index["manifests"]:
    man = json.loads(rd(m["digest"]))
    cfg = json.loads(rd(man["config"]["digest"]))
    cfg["rootfs"]["diff_ids"] = [layer]
    if mode == "label":
        cfg["config"]["Labels"][args[0]] = args[1]
        man["annotations"][args[0]] = args[1]
    man["config"]["digest"], man["config"]["size"] = put(json.dumps(cfg).encode())
    man["layers"][0]["digest"], man["layers"][0]["size"] = layer, lsz
    m["digest"], m["size"] = put(json.dumps(man).encode())
    docker.append({"Config": "blobs/sha256/" + man["config"]["digest"][7:],
                   "RepoTags": [m["annotations"]["org.opencontainers.image.ref.name"]],
                   "Layers": ["blobs/sha256/" + layer[7:]]})
json.dump(docker, open(os.path.join(d, "manifest.json"), "w"))
if mode == "label":
    index["annotations"][args[0]] = args[1]
json.dump(index, open(os.path.join(d, "index.json"), "w"))
with tarfile.open(out, "w") as t:
    for f in ("oci-layout", "index.json", "manifest.json", "blobs"):
        t.add(os.path.join(d, f), f)
EOF
}
# The control: a copy rewritten with nothing changed passes, so each refusal below is its change's.
tamper "$dir/t.tar" none
if out=$("$root/scripts/check-image.sh" --no-run "$dir/t.tar" 2>&1); then ok "a rewritten, unchanged copy passes"
else bad "a rewritten, unchanged copy is refused:"; echo "$out"; fi
# expect_refused WHAT WANT MODE ARGS: the tampered image fails the check with WANT in its output.
expect_refused() {
  local what=$1 want=$2 out
  shift 2
  rm -rf "$dir/layout"; mkdir "$dir/layout"; tar -xf "$dir/a.tar" -C "$dir/layout"
  tamper "$dir/t.tar" "$@"
  if out=$("$root/scripts/check-image.sh" --no-run "$dir/t.tar" 2>&1); then
    bad "$what: the check passed"
  elif grep -qF -- "$want" <<<"$out"; then
    ok "$what: refused ($(grep -F -- "$want" <<<"$out" | head -n1))"
  else
    bad "$what: refused without naming '$want':"; echo "$out"
  fi
}
expect_refused "an extra library" "usr/lib/x86_64-linux-gnu/libextra.so.1: unaccounted for" \
  add usr/lib/x86_64-linux-gnu/libextra.so.1
expect_refused "a package version the host does not have" "package libc6:amd64: the image records 0.0-0" \
  version libc6 0.0-0
libc=$(awk '/\/libc\.so\.6 file$/ {print $1}' "$dir/names")
[ -n "$libc" ] || bad "no libc.so.6 in the image"
expect_refused "a changed library" "$libc: md5" corrupt "$libc"
expect_refused "a wrong licence label" "label org.opencontainers.image.licenses is 'MIT'" \
  label org.opencontainers.image.licenses MIT
exit $fail
