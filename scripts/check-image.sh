#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Checks an image archive from scripts/build-image.sh, on the machine that built it:
#   1. the OCI layout: every blob's sha256 and size match its descriptors, each config's
#      diff_ids match the layers, the docker-style manifest.json names existing blobs;
#   2. the org.opencontainers.image.* labels: the same in every config, manifest and the index;
#      title, version (CMakeLists.txt), source, url, licenses (Apache-2.0), a description, a
#      revision that is a commit of this repository ("unknown" in a tree without git), created
#      in RFC 3339;
#   3. every file accounted for: each regular file or symlink in the layer is the project's own
#      (the binary, /etc/passwd, /etc/group, /etc/nsswitch.conf, the dpkg records) or listed by a
#      Debian package recorded in /var/lib/dpkg/status (its info/PKG.list in the image, which the
#      host's /var/lib/dpkg/info/PKG.list lists too; the CA bundle that update-ca-certificates
#      makes is ca-certificates'); each package's stanza and version are the host's
#      (`dpkg-query -s`), each file's md5 the package's; an unaccounted file is named;
#   4. with containerd and runc installed and root: a private containerd (its own socket, root
#      and state under a temporary directory; the native snapshotter) imports the archive
#      (`ctr images import`), lists the four names, and runs `slurm-bridge --version` in the
#      image as its user (65532), which proves the library closure is complete.
# Usage: scripts/check-image.sh [--no-run] ARCHIVE [COMMAND...]
#   (COMMAND default: /usr/bin/slurm-bridge --version; --no-run: checks 1-3 only, no containerd)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
run=1
[ "${1:-}" != --no-run ] || { run=0; shift; }
archive=${1:?usage: check-image.sh [--no-run] ARCHIVE [COMMAND...]}
[ -f "$archive" ] || { echo "check-image: $archive: no such file (scripts/build-image.sh makes it)" >&2; exit 2; }
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
python3 - "$work/layout" "$root" <<'EOF'
import hashlib, json, os, re, subprocess, sys, tarfile
d, root = sys.argv[1], sys.argv[2]
problems = []
def blob(desc):
    algo, hexd = desc["digest"].split(":")
    p = os.path.join(d, "blobs", algo, hexd)
    data = open(p, "rb").read()
    assert hashlib.sha256(data).hexdigest() == hexd, f"{p}: digest mismatch"
    assert len(data) == desc["size"], f"{p}: size {len(data)} != {desc['size']}"
    return p, data
assert json.load(open(os.path.join(d, "oci-layout")))["imageLayoutVersion"] == "1.0.0"
index = json.load(open(os.path.join(d, "index.json")))
names, layers = [], {}
labels = index.get("annotations", {})
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
        layers[p] = True
    assert cfg["rootfs"]["diff_ids"] == diff_ids, "diff_ids do not match the layers"
    assert cfg["config"]["User"] == "65532:65532", cfg["config"]["User"]
    name = m["annotations"]["org.opencontainers.image.ref.name"]
    names.append(name)
    if cfg["config"].get("Labels") != labels:
        problems.append(f"{name}: the config's Labels differ from the index's annotations")
    if man.get("annotations") != labels:
        problems.append(f"{name}: the manifest's annotations differ from the index's")
    if cfg.get("created") != labels.get("org.opencontainers.image.created"):
        problems.append(f"{name}: config created {cfg.get('created')} is not the label's")
for e in json.load(open(os.path.join(d, "manifest.json"))):
    for p in [e["Config"], *e["Layers"]]:
        assert os.path.exists(os.path.join(d, p)), f"manifest.json names a missing {p}"

# --- The OCI labels ---------------------------------------------------------------------------
cmake = open(os.path.join(root, "CMakeLists.txt")).read()
version = re.search(r"^project\(slurm-bridge VERSION ([0-9.]+)", cmake, re.M).group(1)
want = {"org.opencontainers.image.title": "slurm-bridge",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.source": "https://github.com/slurm-bridge-cpp/slurm-bridge",
        "org.opencontainers.image.url": "https://github.com/slurm-bridge-cpp/slurm-bridge",
        "org.opencontainers.image.licenses": "Apache-2.0"}
for k, v in want.items():
    if labels.get(k) != v:
        problems.append(f"label {k} is {labels.get(k)!r}, want {v!r}")
if not labels.get("org.opencontainers.image.description"):
    problems.append("label org.opencontainers.image.description missing")
if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels.get("org.opencontainers.image.created", "")):
    problems.append(f"label org.opencontainers.image.created {labels.get('org.opencontainers.image.created')!r} is not RFC 3339 UTC")
rev = labels.get("org.opencontainers.image.revision", "")
git = os.path.exists(os.path.join(root, ".git"))  # a source tree without git (git archive): "unknown"
if not git and rev == "unknown":
    pass
elif not re.fullmatch(r"[0-9a-f]{40}", rev):
    problems.append(f"label org.opencontainers.image.revision {rev!r} is not a git commit")
elif git and subprocess.run(
        ["git", "-C", root, "cat-file", "-e", rev + "^{commit}"], capture_output=True).returncode:
    problems.append(f"label org.opencontainers.image.revision {rev} is no commit of this repository")

# --- Every file accounted for ---------------------------------------------------------------
# Each regular file or symlink is the project's own, or listed by a Debian package the image
# records (var/lib/dpkg/status, info/PKG.list), whose host list names it too (the one
# generated file excepted), with the host's version, stanza and md5sums.
OWN = {"usr/bin/slurm-bridge", "etc/passwd", "etc/group", "etc/nsswitch.conf", "var/lib/dpkg/status"}
GENERATED = {"etc/ssl/certs/ca-certificates.crt": "ca-certificates"}  # update-ca-certificates
HOST = "/var/lib/dpkg/info"
def host_lines(path):
    try:
        return open(path, encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        return None
for lp in layers:
    with tarfile.open(lp) as t:
        members = {x.name[2:] if x.name.startswith("./") else x.name: x for x in t.getmembers()}
        content = lambda n: t.extractfile(members[n]).read()
        files = {n for n, x in members.items() if x.isfile() or x.issym()}
        for f in ("usr/bin/slurm-bridge", "etc/passwd", "etc/ssl/certs/ca-certificates.crt",
                  "var/lib/dpkg/status", "etc/os-release", "etc/debian_version"):
            if f not in files:
                problems.append(f"layer lacks {f}")
        stanzas = [s for s in content("var/lib/dpkg/status").decode().split("\n\n") if s.strip()] \
            if "var/lib/dpkg/status" in files else []
        accounted = set(OWN)
        for s in stanzas:
            fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", s, re.M))
            name, arch, ver = fields.get("Package"), fields.get("Architecture"), fields.get("Version")
            dname = f"{name}:{arch}" if f"var/lib/dpkg/info/{name}:{arch}.list" in files else name
            host = subprocess.run(["dpkg-query", "-s", dname], capture_output=True, text=True)
            hver = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", dname],
                                  capture_output=True, text=True).stdout
            if host.returncode:
                problems.append(f"package {dname} {ver}: not installed on this host")
            elif hver != ver:
                problems.append(f"package {dname}: the image records {ver}, the host has {hver}")
            elif host.stdout.strip() != s.strip():
                problems.append(f"package {dname}: its status stanza differs from dpkg-query -s")
            il, im = f"var/lib/dpkg/info/{dname}.list", f"var/lib/dpkg/info/{dname}.md5sums"
            if il not in files:
                problems.append(f"package {dname}: no {il} in the image")
                continue
            accounted |= {il, im}
            hl = set(host_lines(f"{HOST}/{dname}.list") or [])
            hm = {l[34:]: l[:32] for l in host_lines(f"{HOST}/{dname}.md5sums") or []}
            im_lines = content(im).decode().splitlines() if im in files else []
            mine = {l[34:]: l[:32] for l in im_lines}
            for entry in content(il).decode().splitlines():
                rel = entry.lstrip("/")
                if entry not in hl and GENERATED.get(rel) != name:
                    problems.append(f"{rel}: listed under {dname} in the image, but the host's {dname}.list has no {entry}")
                if rel not in files:
                    problems.append(f"{rel}: listed under {dname}, not in the image")
                    continue
                accounted.add(rel)
                if members[rel].isfile() and rel in hm:
                    md5 = hashlib.md5(content(rel)).hexdigest()
                    if mine.get(rel) != hm[rel]:
                        problems.append(f"{rel}: {im} does not carry the host's md5sum")
                    if md5 != hm[rel]:
                        problems.append(f"{rel}: md5 {md5} differs from {dname}'s {hm[rel]}")
        for f in sorted(files - accounted):
            problems.append(f"{f}: unaccounted for (no recorded package lists it, not one of the project's own files)")
        npk = len(stanzas)
if problems:
    for p in problems:
        print("check-image: FAIL", p)
    sys.exit(1)
print("layout ok:", ", ".join(names))
print(f"files ok: {len(files)} files and symlinks, {npk} Debian packages at the host's versions, labels ok")
EOF

[ $run = 1 ] || exit 0
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
