#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Makes the artefacts a release publishes, into OUT (default build/release/):
#   slurm-bridge-VERSION.tgz              the Helm chart (`helm package helm/slurm-bridge`, with
#                                         the pinned Helm of testenv/helm/ensure-helm.sh)
#   slurm-bridge-image-VERSION.tar        the image as an OCI archive (scripts/build-image.sh:
#                                         four names under REPO_PREFIX, org.opencontainers.image.*
#                                         labels), checked by scripts/check-image.sh --no-run
#   slurm-bridge-image-VERSION.spdx.json  an SPDX 2.3 JSON SBOM of everything in the image: one
#                                         package per Debian package it records (version, purl
#                                         pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=debian-N,
#                                         licence from its copyright file where every licence there
#                                         has an SPDX id, else NOASSERTION), the slurm-bridge
#                                         package with its files and their checksums, the image
#   SHA256SUMS                            of the three (sha256sum -c SHA256SUMS)
# VERSION is the project's (CMakeLists.txt); the chart's version and appVersion must equal it and
# BINARY must print it. It refuses a tree with uncommitted changes (git status) unless
# --allow-dirty: a release is made from a commit, which the image's revision label names.
#
# Usage: scripts/release.sh [--allow-dirty] [--out DIR] [--binary BINARY]
#   (BINARY default build/slurm-bridge; build it with cmake --build build --target slurm-bridge)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "release: $*" >&2; exit 1; }
out=$root/build/release
binary=$root/build/slurm-bridge
allow_dirty=0
while [ $# -gt 0 ]; do
  case $1 in
    --allow-dirty) allow_dirty=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --binary) binary=${2:?--binary needs a path}; shift ;;
    -h | --help) sed -n '3,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (usage: scripts/release.sh [--allow-dirty] [--out DIR] [--binary BINARY])" ;;
  esac
  shift
done
for t in git jq python3 sha256sum; do command -v $t >/dev/null || die "$t missing"; done

cd "$root"
git rev-parse --git-dir >/dev/null 2>&1 || die "$root is not a git checkout: a release is made from a commit"
if [ -n "$(git status --porcelain)" ]; then
  [ $allow_dirty = 1 ] || die "the tree has uncommitted changes (git status): commit them, or pass --allow-dirty for a trial release"
  echo "release: warning: uncommitted changes; the image's revision label names HEAD, which lacks them" >&2
fi
version=$(scripts/version.sh) || die "no project VERSION in CMakeLists.txt"
chart_version=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' helm/slurm-bridge/Chart.yaml)
chart_app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' helm/slurm-bridge/Chart.yaml)
[ "$chart_version" = "$version" ] && [ "$chart_app" = "$version" ] ||
  die "helm/slurm-bridge/Chart.yaml has version '$chart_version' and appVersion '$chart_app', CMakeLists.txt VERSION $version: set all three to one version"
[ -x "$binary" ] || die "$binary: no such executable (cmake --build build --target slurm-bridge, or --binary)"
got=$("$binary" version 2>/dev/null) || die "$binary version failed"
[ "$got" = "slurm-bridge $version" ] ||
  die "$binary prints '$got', not 'slurm-bridge $version': rebuild it (cmake --build build --target slurm-bridge)"

mkdir -p "$out"
chart=$out/slurm-bridge-$version.tgz
image=$out/slurm-bridge-image-$version.tar
sbom=$out/slurm-bridge-image-$version.spdx.json
rm -f "$chart" "$image" "$sbom" "$out/SHA256SUMS"

helm=$("$root/testenv/helm/ensure-helm.sh") || die "no Helm (testenv/helm/ensure-helm.sh failed)"
"$helm" package helm/slurm-bridge --destination "$out" >/dev/null || die "helm package failed"
[ -f "$chart" ] || die "helm package did not write $chart"
echo "release: $chart"

"$root/scripts/build-image.sh" "$binary" "$image" | sed 's/^/release: /'
"$root/scripts/check-image.sh" --no-run "$image" | sed 's/^/release: /'

python3 - "$image" "$sbom" "$version" <<'EOF'
# The SBOM, read from the image archive itself: what it records is what it holds.
import hashlib, io, json, re, sys, tarfile, urllib.parse
archive, sbom_path, version = sys.argv[1:]
HOME = "https://github.com/slurm-bridge-cpp/slurm-bridge"
OWN = ["usr/bin/slurm-bridge", "etc/passwd", "etc/group", "etc/nsswitch.conf", "var/lib/dpkg/status"]
# Debian's short licence names (copyright-format 1.0) and their SPDX ids; a name not here makes
# the package's licence NOASSERTION.
SPDX = {"apache-2.0": "Apache-2.0", "artistic-2.0": "Artistic-2.0", "bsd-2-clause": "BSD-2-Clause",
        "bsd-3-clause": "BSD-3-Clause", "bsd-4-clause": "BSD-4-Clause", "bsl-1.0": "BSL-1.0",
        "cc0-1.0": "CC0-1.0", "expat": "MIT", "mit": "MIT", "isc": "ISC", "zlib": "Zlib",
        "mpl-1.1": "MPL-1.1", "mpl-2.0": "MPL-2.0", "curl": "curl", "x11": "X11",
        "openssl": "OpenSSL", "ssleay": "SSLeay", "unicode-dfs-2016": "Unicode-DFS-2016",
        "gpl-1+": "GPL-1.0-or-later"}
for v in ("2", "3"):
    SPDX[f"gpl-{v}"], SPDX[f"gpl-{v}+"] = f"GPL-{v}.0-only", f"GPL-{v}.0-or-later"
    SPDX[f"lgpl-{v}"], SPDX[f"lgpl-{v}+"] = f"LGPL-{v}.0-only", f"LGPL-{v}.0-or-later"
    SPDX[f"agpl-{v}"], SPDX[f"agpl-{v}+"] = f"AGPL-{v}.0-only", f"AGPL-{v}.0-or-later"
SPDX["lgpl-2.1"], SPDX["lgpl-2.1+"] = "LGPL-2.1-only", "LGPL-2.1-or-later"
SPDX["python"] = "Python-2.0"
for k, v in list(SPDX.items()):  # GPL-2.0+, LGPL-2.1-or-later: the SPDX spellings too
    SPDX[v.lower()] = v
    if v.endswith("-or-later"):
        SPDX[v[:-len("-or-later")].lower() + "+"] = v

def licence(text):
    """(SPDX expression or NOASSERTION, the copyright file's licence names)"""
    if not text.startswith("Format:"):
        return "NOASSERTION", []
    names = sorted({m.strip() for m in re.findall(r"^License: *(\S.*)$", text, re.M)})
    ids = set()
    for n in names:  # "A or B", "A and B"; anything else (an exception, a name of its own) is unknown
        words = re.split(r"\s+(or|and)\s+", n, flags=re.I)
        mapped = [SPDX.get(w.strip().lower()) for w in words[::2]]
        if not all(mapped):
            return "NOASSERTION", names
        expr = mapped[0]
        for op, m in zip(words[1::2], mapped[1:]):
            expr += f" {op.upper()} {m}"
        ids.add(expr if len(mapped) == 1 else f"({expr})")
    return (" AND ".join(sorted(ids)) if ids else "NOASSERTION"), names

with tarfile.open(archive) as t:
    index = json.load(t.extractfile("index.json"))
    blob = lambda dg: t.extractfile("blobs/sha256/" + dg.split(":")[1]).read()
    first = index["manifests"][0]
    man = json.loads(blob(first["digest"]))
    layer = tarfile.open(fileobj=io.BytesIO(blob(man["layers"][0]["digest"])))
labels = index["annotations"]
members = {m.name[2:] if m.name.startswith("./") else m.name: m for m in layer.getmembers()}
read = lambda p: layer.extractfile(members[p]).read()
osr = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', read("usr/lib/os-release").decode(), re.M))
distro = f"{osr.get('ID', 'debian')}-{osr.get('VERSION_ID', '')}".rstrip("-")
revision = labels["org.opencontainers.image.revision"]

doc = {"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
       "name": f"slurm-bridge-image-{version}",
       "documentNamespace": f"{HOME}/spdx/slurm-bridge-image-{version}-{revision}-{first['digest'][7:19]}",
       "creationInfo": {"created": labels["org.opencontainers.image.created"],
                        "creators": [f"Tool: slurm-bridge-release.sh-{version}",
                                     "Organization: slurm-bridge-cpp"],
                        "comment": "Made by scripts/release.sh from the image archive: its dpkg "
                                   "records and its own files."},
       "packages": [], "files": [], "relationships": []}
rel = lambda a, t, b: doc["relationships"].append(
    {"spdxElementId": a, "relationshipType": t, "relatedSpdxElement": b})
image_ref = first["annotations"]["org.opencontainers.image.ref.name"]
repo = image_ref.rsplit(":", 1)[0]
doc["packages"].append({
    "SPDXID": "SPDXRef-Image", "name": repo, "versionInfo": version,
    "primaryPackagePurpose": "CONTAINER", "downloadLocation": "NOASSERTION", "filesAnalyzed": False,
    "licenseConcluded": "NOASSERTION", "licenseDeclared": "NOASSERTION", "copyrightText": "NOASSERTION",
    "comment": "The image's one layer; the names " + ", ".join(
        m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]),
    "checksums": [{"algorithm": "SHA256", "checksumValue": man["layers"][0]["digest"][7:]}],
    "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                      "referenceLocator": f"pkg:oci/{repo.rsplit('/', 1)[1]}@"
                      + urllib.parse.quote(first["digest"], safe="")
                      + "?repository_url=" + urllib.parse.quote(repo, safe="") + f"&tag={version}"}]})
rel("SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image")

# The project's own package and files.
own = sorted([p for p in members if p in OWN or re.fullmatch(r"var/lib/dpkg/info/.*\.(list|md5sums)", p)])
sha1s = []
for i, p in enumerate(own):
    data = read(p)
    s1, s256 = hashlib.sha1(data).hexdigest(), hashlib.sha256(data).hexdigest()
    sha1s.append(s1)
    fid = f"SPDXRef-File-{i}"
    doc["files"].append({"SPDXID": fid, "fileName": "./" + p,
                         "fileTypes": ["BINARY"] if p == "usr/bin/slurm-bridge" else ["TEXT"],
                         "checksums": [{"algorithm": "SHA1", "checksumValue": s1},
                                       {"algorithm": "SHA256", "checksumValue": s256}],
                         "licenseConcluded": "NOASSERTION", "copyrightText": "NOASSERTION"})
    rel("SPDXRef-Package-slurm-bridge", "CONTAINS", fid)
doc["packages"].append({
    "SPDXID": "SPDXRef-Package-slurm-bridge", "name": "slurm-bridge", "versionInfo": version,
    "primaryPackagePurpose": "APPLICATION", "supplier": "Organization: slurm-bridge-cpp",
    "downloadLocation": f"git+{HOME}.git@{revision}", "homepage": HOME, "filesAnalyzed": True,
    "packageVerificationCode": {"packageVerificationCodeValue":
                                hashlib.sha1("".join(sorted(sha1s)).encode()).hexdigest()},
    "licenseConcluded": "Apache-2.0", "licenseDeclared": "Apache-2.0",
    "copyrightText": "NOASSERTION",
    "comment": "The binary, the image's users and name service settings, and the dpkg records of "
               "the Debian packages below.",
    "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                      "referenceLocator": f"pkg:github/slurm-bridge-cpp/slurm-bridge@{version}"}]})
rel("SPDXRef-Image", "CONTAINS", "SPDXRef-Package-slurm-bridge")

# One package per Debian package of var/lib/dpkg/status.
for i, stanza in enumerate(s for s in read("var/lib/dpkg/status").decode().split("\n\n") if s.strip()):
    f = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", stanza, re.M))
    name, ver, arch = f["Package"], f["Version"], f["Architecture"]
    doc_dir = members.get(f"usr/share/doc/{name}")  # a symlink to another package's notice?
    if doc_dir is not None and doc_dir.issym():
        cp = f"usr/share/doc/{doc_dir.linkname.rstrip('/').rsplit('/', 1)[-1]}/copyright"
    else:
        cp = f"usr/share/doc/{name}/copyright"
    lic, names = licence(read(cp).decode("utf-8", "replace")) if cp in members else ("NOASSERTION", [])
    m = re.fullmatch(r"(.*?)\s*<(.*)>", f.get("Maintainer", ""))
    src = f.get("Source", name).split(" ")[0]
    pid = f"SPDXRef-Package-deb-{i}-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)
    doc["packages"].append({
        "SPDXID": pid, "name": name, "versionInfo": ver,
        "supplier": f"Organization: {m.group(1)} ({m.group(2)})" if m else "NOASSERTION",
        "downloadLocation": "NOASSERTION", "filesAnalyzed": False,
        "sourceInfo": f"built from the Debian source package {src}",
        "licenseConcluded": "NOASSERTION", "licenseDeclared": lic, "copyrightText": "NOASSERTION",
        **({"licenseComments": f"from {cp}: License fields " + "; ".join(names)} if names else {}),
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": f"pkg:deb/debian/{name}@"
                          + urllib.parse.quote(ver, safe=".-_~") + f"?arch={arch}&distro={distro}"}]})
    rel("SPDXRef-Image", "CONTAINS", pid)
json.dump(doc, open(sbom_path, "w"), indent=1, sort_keys=True)
print(f"release: {sbom_path}: {len(doc['packages']) - 2} Debian packages, slurm-bridge with "
      f"{len(doc['files'])} files")
EOF

(cd "$out" && sha256sum "$(basename "$chart")" "$(basename "$image")" "$(basename "$sbom")" >SHA256SUMS)
echo "release: $out/SHA256SUMS"
cat "$out/SHA256SUMS" | sed 's/^/release:   /'
