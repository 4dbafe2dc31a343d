#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/release.sh, smoke (ctest release.smoke, label chart: needs the cached Helm, no daemons,
# no root). In a clone of HEAD: a tree with uncommitted changes is refused without
# --allow-dirty, a chart version other than the project's is refused. In this tree: it makes the
# four artefacts, SHA256SUMS verifies, the packaged chart's Chart.yaml has the project's version,
# and the SBOM holds SPDX 2.3's required fields and lists every Debian package the image records
# at its version, and the slurm-bridge package with the image's own files and their checksums.
#
# Usage: tests/cli/release_test.sh BINARY
set -euo pipefail
bin=${1:?usage: release_test.sh BINARY}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/sb-release-test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
version=$("$root/scripts/version.sh")

# refused NAME WANT ARGS: release.sh in the clone exits non-zero, WANT in its message.
refused() {
  local what=$1 want=$2 out
  shift 2
  if out=$("$dir/clone/scripts/release.sh" --out "$dir/none" --binary "$bin" "$@" 2>&1); then
    bad "$what: release.sh ran"
  elif grep -qF -- "$want" <<<"$out"; then ok "$what: refused ($out)"
  else bad "$what: refused without '$want': $out"; fi
}
git clone -q --depth 1 "file://$root" "$dir/clone"
echo "# a change" >>"$dir/clone/README.md"
refused "uncommitted changes" "pass --allow-dirty"
sed -i "s/^version: .*/version: 9.9.9/" "$dir/clone/helm/slurm-bridge/Chart.yaml"
refused "chart version 9.9.9" "has version '9.9.9' and appVersion '$version', CMakeLists.txt VERSION $version" --allow-dirty
[ ! -e "$dir/none" ] || bad "a refused release wrote $dir/none"

out=$dir/release
if ! "$root/scripts/release.sh" --allow-dirty --out "$out" --binary "$bin" >"$dir/log" 2>&1; then
  cat "$dir/log"; echo "FAIL: release.sh failed"; exit 1
fi
for f in "slurm-bridge-$version.tgz" "slurm-bridge-image-$version.tar" \
  "slurm-bridge-image-$version.spdx.json" SHA256SUMS; do
  [ -s "$out/$f" ] && ok "$f" || bad "no $f"
done
(cd "$out" && sha256sum --quiet -c SHA256SUMS) && [ "$(wc -l <"$out/SHA256SUMS")" = 3 ] &&
  ok "SHA256SUMS verifies its 3 files" || bad "SHA256SUMS does not verify"
chart=$(tar -xzOf "$out/slurm-bridge-$version.tgz" slurm-bridge/Chart.yaml)
grep -qx "version: $version" <<<"$chart" && grep -qx "appVersion: \"\{0,1\}$version\"\{0,1\}" <<<"$chart" &&
  ok "the packaged Chart.yaml has version and appVersion $version" || bad "packaged Chart.yaml: $chart"

python3 - "$out/slurm-bridge-image-$version.tar" "$out/slurm-bridge-image-$version.spdx.json" "$version" <<'EOF' || fail=1
import hashlib, io, json, re, sys, tarfile
archive, sbom, version = sys.argv[1:]
doc = json.load(open(sbom))
bad = []
def need(cond, msg):
    if not cond:
        bad.append(msg)
for k in ("spdxVersion", "dataLicense", "SPDXID", "name", "documentNamespace", "creationInfo"):
    need(doc.get(k), f"document lacks {k}")
need(doc["spdxVersion"] == "SPDX-2.3" and doc["dataLicense"] == "CC0-1.0"
     and doc["SPDXID"] == "SPDXRef-DOCUMENT", "document header")
need(doc["creationInfo"].get("creators") and re.fullmatch(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["creationInfo"].get("created", "")), "creationInfo")
ids = [x["SPDXID"] for x in doc["packages"] + doc["files"]] + ["SPDXRef-DOCUMENT"]
need(len(ids) == len(set(ids)), "SPDXIDs are not unique")
need(all(re.fullmatch(r"SPDXRef-[A-Za-z0-9.-]+", i) for i in ids), "an SPDXID of other characters")
for p in doc["packages"]:
    need(p.get("name") and p.get("downloadLocation") and "filesAnalyzed" in p, f"package {p['SPDXID']} lacks a required field")
    if p.get("filesAnalyzed", True):
        need("packageVerificationCode" in p, f"{p['SPDXID']}: files analyzed without a verification code")
for f in doc["files"]:
    need(f.get("fileName") and any(c["algorithm"] == "SHA1" for c in f.get("checksums", [])),
         f"file {f['SPDXID']} lacks its name or SHA1")
for r in doc["relationships"]:
    need(r["spdxElementId"] in ids and r["relatedSpdxElement"] in ids, f"relationship to nowhere: {r}")
need(any(r["relationshipType"] == "DESCRIBES" for r in doc["relationships"]), "no DESCRIBES")

with tarfile.open(archive) as t:
    index = json.load(t.extractfile("index.json"))
    blob = lambda dg: t.extractfile("blobs/sha256/" + dg[7:]).read()
    man = json.loads(blob(index["manifests"][0]["digest"]))
    layer = tarfile.open(fileobj=io.BytesIO(blob(man["layers"][0]["digest"])))
members = {m.name[2:]: m for m in layer.getmembers()}
rev = index["annotations"]["org.opencontainers.image.revision"]
need(version in doc["documentNamespace"] and rev in doc["documentNamespace"],
     f"documentNamespace {doc['documentNamespace']} names neither the version nor the commit")
status = layer.extractfile(members["var/lib/dpkg/status"]).read().decode()
recorded = dict(re.findall(r"^Package: (\S+)\n(?:.*\n)*?Version: (\S+)$", status, re.M))
debs = {p["name"]: p for p in doc["packages"] if p["SPDXID"].startswith("SPDXRef-Package-deb-")}
need(recorded and set(debs) == set(recorded), f"SBOM packages {sorted(debs)} != recorded {sorted(recorded)}")
for name, ver in recorded.items():
    p = debs.get(name, {})
    need(p.get("versionInfo") == ver, f"{name}: SBOM version {p.get('versionInfo')} != {ver}")
    purl = next((e["referenceLocator"] for e in p.get("externalRefs", []) if e["referenceType"] == "purl"), "")
    need(re.fullmatch(rf"pkg:deb/debian/{re.escape(name)}@[^?]+\?arch=(amd64|all)(&distro=debian-\d+)?", purl),
         f"{name}: purl {purl!r}")
    need(re.fullmatch(r"NOASSERTION|[A-Za-z0-9.+()-]+( (AND|OR) [A-Za-z0-9.+()-]+)*", p.get("licenseDeclared", "")),
         f"{name}: licenseDeclared {p.get('licenseDeclared')!r}")
sb = next((p for p in doc["packages"] if p["name"] == "slurm-bridge"), None)
need(sb and sb.get("versionInfo") == version, "no slurm-bridge package at the project's version")
files = {f["fileName"][2:]: f for f in doc["files"]}
need("usr/bin/slurm-bridge" in files and "var/lib/dpkg/status" in files, "slurm-bridge's files lack the binary or the status")
sha1s = []
for name, f in files.items():
    data = layer.extractfile(members[name]).read()
    sums = {c["algorithm"]: c["checksumValue"] for c in f["checksums"]}
    need(sums.get("SHA1") == hashlib.sha1(data).hexdigest() and sums.get("SHA256") == hashlib.sha256(data).hexdigest(),
         f"{name}: checksums differ from the image's file")
    sha1s.append(sums.get("SHA1", ""))
if sb:
    need(sb["packageVerificationCode"]["packageVerificationCodeValue"]
         == hashlib.sha1("".join(sorted(sha1s)).encode()).hexdigest(), "slurm-bridge's verification code")
for b in bad:
    print("FAIL: SBOM:", b)
if not bad:
    print(f"ok: SBOM: SPDX 2.3, {len(recorded)} Debian packages at the recorded versions, "
          f"slurm-bridge {version} with {len(files)} files and their checksums")
sys.exit(1 if bad else 0)
EOF
exit $fail
