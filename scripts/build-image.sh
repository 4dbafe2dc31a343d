#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the slurm-bridge container image offline, from the built binary and this machine's
# Debian packages: no registry, no base image, no container engine. The image holds only
#   /usr/bin/slurm-bridge (stripped), its shared-library closure (ldd) and the dynamic loader,
#   /etc/ssl/certs/ca-certificates.crt (TLS to slurmrestd and kube-apiserver),
#   /etc/os-release and /etc/debian_version (base-files: scanners read the distribution there),
#   /usr/share/doc/PACKAGE/copyright of every package a file comes from,
#   /var/lib/dpkg/status and /var/lib/dpkg/info/PACKAGE.{list,md5sums}: the Debian packages the
#     files come from, as dpkg records them (see "Scanners" below),
#   /etc/passwd and /etc/group with a non-root user nonroot (uid and gid 65532, distroless'),
#   /etc/nsswitch.conf (hosts: files dns), and the mount points the chart uses.
# It runs as 65532:65532 with ENTRYPOINT ["/usr/bin/slurm-bridge"].
#
# Scanners (Trivy, Grype/Syft): every file taken from the host is copied to the path its Debian
# package lists (`dpkg-query -S`; a symlink stays a symlink, its target comes too), and the
# package is recorded as dpkg does on any Debian system: its `dpkg-query -s` stanza in the one
# /var/lib/dpkg/status, and info/PACKAGE.list and .md5sums naming the files of it that the image
# holds. Trivy and Syft both read that form (the distroless form, status.d/PACKAGE, is read by
# both too, but Trivy takes the installed files only from info/*.list). The one generated file,
# /etc/ssl/certs/ca-certificates.crt (update-ca-certificates' bundle of ca-certificates' certs),
# is listed under ca-certificates. Everything else is the project's own: the binary, passwd,
# group, nsswitch.conf, the dpkg records and the mount points. tests/cli/image_files_test.sh
# checks that no file is unaccounted for (scripts/check-image.sh --files).
#
# Output: an OCI image layout packed in a tar (OUT, default build/slurm-bridge-image-VERSION.tar),
# with one layer and four image names, each with its default command (the chart sets its own):
#   ghcr.io/slurm-bridge-cpp/slurm-bridge:VERSION              CMD ["--help"]
#   ghcr.io/slurm-bridge-cpp/slurm-bridge-scheduler:VERSION    CMD ["scheduler"]
#   ghcr.io/slurm-bridge-cpp/slurm-bridge-controllers:VERSION  CMD ["controllers"]
#   ghcr.io/slurm-bridge-cpp/slurm-bridge-admission:VERSION    CMD ["admission"]
# (the chart's default images; REPO_PREFIX changes ghcr.io/slurm-bridge-cpp, e.g. to upstream's
# ghcr.io/slinkyproject). VERSION is the project's (CMakeLists.txt). The image config's Labels,
# each manifest's and the index's annotations carry org.opencontainers.image.{title,
# description,version,revision,source,url,licenses,created}: revision is the git commit of this
# tree (SB_IMAGE_REVISION overrides it; "unknown" without git), created is SOURCE_DATE_EPOCH or
# else that commit's date (1970 without git).
# The tar also holds a docker-style manifest.json (as `docker save` since 25 writes), so both
#   ctr -n k8s.io images import OUT        and        podman load -i OUT / docker load -i OUT
# accept it. Reproducible: fixed owners, mtimes and order; the same binary, commit and host
# packages give the same digests.
#
# Usage: scripts/build-image.sh [BINARY [OUT]]      (BINARY default build/slurm-bridge)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binary=${1:-$root/build/slurm-bridge}
version=$("$root/scripts/version.sh")
out=${2:-$root/build/slurm-bridge-image-$version.tar}
prefix=${REPO_PREFIX:-ghcr.io/slurm-bridge-cpp}
home=https://github.com/slurm-bridge-cpp/slurm-bridge
die() { echo "build-image: $*" >&2; exit 1; }
[ -x "$binary" ] || die "$binary: no such executable (build it first: cmake --build build --target slurm-bridge)"
for t in jq ldd readelf strip sha256sum tar dpkg-query; do
  command -v $t >/dev/null || die "$t missing (scripts/install-deps.sh installs what the build needs)"
done
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || die "$ca missing (apt-get install ca-certificates)"

git_head() { [ -e "$root/.git" ] && git -C "$root" "$@" 2>/dev/null; }
revision=${SB_IMAGE_REVISION:-$(git_head rev-parse HEAD || echo unknown)}
epoch=${SOURCE_DATE_EPOCH:-$(git_head log -1 --format=%ct || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ) || die "SOURCE_DATE_EPOCH=$epoch is not a number of seconds"

work=$(mktemp -d "${TMPDIR:-/tmp}/sb-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
mkdir -p "$rootfs"/{usr/bin,etc/ssl/certs,tmp/k8s-webhook-server/serving-certs,etc/slurm-bridge} \
  "$rootfs"/{var/run/secrets/slurm,home/nonroot,proc,sys,dev,var/lib/dpkg/info}
chmod 1777 "$rootfs/tmp"
strip --strip-unneeded -o "$rootfs/usr/bin/slurm-bridge" "$binary"
chmod 755 "$rootfs/usr/bin/slurm-bridge"

# --- Files from Debian packages ------------------------------------------------------------
# Each path is looked up with `dpkg-query -S` (one call per round of paths), also on the other
# side of the /usr merge (ldd names /lib/x86_64-linux-gnu/libstdc++.so.6, libstdc++6 lists
# /usr/lib/x86_64-linux-gnu/libstdc++.so.6), and copied to the path its package lists; a
# symlink stays a symlink and its target is taken in the next round. A package seen for the
# first time brings its copyright notice (its doc directory may be a symlink to another
# package's, e.g. libstdc++6 -> gcc-12-base: then that one comes too). Package names are
# dpkg's (libc6:amd64 when Multi-Arch: same).
declare -A files_of=() # package -> newline-separated listed paths in the image
declare -A placed=()
candidates() {
  echo "$1"
  case $1 in
    /usr/bin/* | /usr/sbin/* | /usr/lib/* | /usr/lib32/* | /usr/lib64/* | /usr/libx32/*) echo "${1#/usr}" ;;
    /bin/* | /sbin/* | /lib/* | /lib32/* | /lib64/* | /libx32/*) echo "/usr$1" ;;
  esac
}
doc_of() { # PACKAGE: the path that brings its copyright notice
  local name=${1%%:*}
  if [ -L "/usr/share/doc/$name" ]; then echo "/usr/share/doc/$name"
  elif [ -f "/usr/share/doc/$name/copyright" ]; then echo "/usr/share/doc/$name/copyright"
  else echo "build-image: warning: /usr/share/doc/$name/copyright missing on this host" >&2
  fi
}
take() { # PATH...: copies them and everything they bring
  local pending=("$@") next p c pkg o dst t
  local -A owner
  while [ ${#pending[@]} -gt 0 ]; do
    owner=()
    while read -r pkg p; do owner[$p]=${pkg%:}; done < <(
      for p in "${pending[@]}"; do candidates "$p"; done | sort -u | xargs -d '\n' dpkg-query -S -- 2>/dev/null |
        awk '{i = index($0, ": "); if (i && substr($0, i + 2) ~ /^\// && substr($0, 1, i - 1) !~ /[ ,]/)
              print substr($0, 1, i), substr($0, i + 2)}' || true)
    next=()
    for p in "${pending[@]}"; do
      o=
      while read -r c; do [ -z "${owner[$c]:-}" ] || { o=$c; break; }; done < <(candidates "$p")
      [ -n "$o" ] || die "$p: no Debian package lists it (dpkg-query -S); the image takes only packaged files"
      pkg=${owner[$o]}
      [ -z "${placed[$o]:-}" ] || continue
      placed[$o]=1
      if [ -z "${files_of[$pkg]:-}" ]; then
        c=$(doc_of "$pkg") && next+=("$c")
      fi
      files_of[$pkg]+="$o"$'\n'
      dst="$rootfs$o"
      mkdir -p "$(dirname "$dst")"
      if [ -L "$o" ]; then
        t=$(readlink "$o")
        ln -s "$t" "$dst"
        case $t in /*) ;; *) t="$(dirname "$o")/$t" ;; esac
        t=$(realpath -ms "$t")
        if [ -d "$t" ]; then # a directory's symlink: a doc directory brings its target's notice
          [[ $o != /usr/share/doc/* ]] || [ ! -f "$t/copyright" ] || next+=("$t/copyright")
        else
          next+=("$t")
        fi
      else
        cp --preserve=mode "$o" "$dst"
      fi
    done
    pending=("${next[@]}")
  done
}

ldd "$binary" | grep -q 'not found' && die "ldd: unresolved libraries: $(ldd "$binary" | grep 'not found')"
libs=$(ldd "$binary" | awk '/=> \//{print $3} /^[[:space:]]*\/.*ld-linux/{print $1}' | sort -u)
interp=$(readelf -l "$binary" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
# update-ca-certificates' bundle: no package lists it; it is made of ca-certificates' certs.
dpkg-query -W -f='${Status}' ca-certificates 2>/dev/null | grep -q ' installed$' ||
  die "ca-certificates is not installed (apt-get install ca-certificates)"
cp "$ca" "$rootfs$ca"
chmod 644 "$rootfs$ca"
# shellcheck disable=SC2086
take $libs $interp /etc/os-release /etc/debian_version "$(doc_of ca-certificates)"
files_of[ca-certificates]+="$ca"$'\n'
# The loader must be at the binary's interpreter path. Where its package lists it on the other
# side of the /usr merge (Debian 13: /usr/lib64/ld-linux-x86-64.so.2), the host's aliasing
# symlink comes too (/lib64 -> usr/lib64, which base-files lists there).
if [ -n "$interp" ] && [ ! -e "$rootfs$interp" ]; then
  p=
  IFS=/ read -r -a parts <<<"${interp#/}"
  for c in "${parts[@]}"; do
    p=$p/$c
    if [ -L "$p" ] && [ ! -e "$rootfs$p" ] && [ ! -L "$rootfs$p" ]; then take "$p"; break; fi
  done
fi
[ -z "$interp" ] || [ -e "$rootfs$interp" ] || die "the loader $interp is not at its path in the image"

# The records: status (one stanza per package, dpkg's order: by name), info/PKG.list and
# .md5sums (the host's lines for the files the image holds).
pkgs=$(printf '%s\n' "${!files_of[@]}" | LC_ALL=C sort)
for pkg in $pkgs; do
  dpkg-query -s "$pkg" | sed -e '$a\'
  echo
done >"$rootfs/var/lib/dpkg/status"
for pkg in $pkgs; do
  printf '%s' "${files_of[$pkg]}" | LC_ALL=C sort -u >"$rootfs/var/lib/dpkg/info/$pkg.list"
  md5=/var/lib/dpkg/info/$pkg.md5sums
  if [ -f "$md5" ]; then
    sed 's|^/||' "$rootfs/var/lib/dpkg/info/$pkg.list" |
      awk 'NR == FNR {want[$0] = 1; next} (substr($0, 35) in want)' - "$md5" \
        >"$rootfs/var/lib/dpkg/info/$pkg.md5sums"
  fi
done
chmod -R u=rwX,go=rX "$rootfs/var/lib/dpkg" "$rootfs/usr/share/doc" 2>/dev/null || true

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

labels=$(jq -cn --arg v "$version" --arg r "$revision" --arg c "$created" --arg h "$home" '{
    "org.opencontainers.image.title": "slurm-bridge",
    "org.opencontainers.image.description": "Slurm as a Kubernetes scheduler: the slurm-bridge scheduler, controllers and admission webhook in one binary",
    "org.opencontainers.image.version": $v,
    "org.opencontainers.image.revision": $r,
    "org.opencontainers.image.source": $h,
    "org.opencontainers.image.url": $h,
    "org.opencontainers.image.licenses": "Apache-2.0",
    "org.opencontainers.image.created": $c}')
manifests='[]'
docker='[]'
add_image() { # NAME CMD_JSON
  local name=$1 cmd=$2 cfg_dg cfg_sz man_dg man_sz
  jq -cn --argjson cmd "$cmd" --arg diff "sha256:$layer_dg" --arg c "$created" --argjson l "$labels" '{
      created: $c, architecture: "amd64", os: "linux",
      config: {User: "65532:65532", Entrypoint: ["/usr/bin/slurm-bridge"], Cmd: $cmd,
               Env: ["PATH=/usr/local/bin:/usr/bin:/bin"], WorkingDir: "/", Labels: $l},
      rootfs: {type: "layers", diff_ids: [$diff]},
      history: [{created: $c, created_by: "scripts/build-image.sh"}]}' \
    >"$d/config"
  read -r cfg_dg cfg_sz <<<"$(blob "$d/config")"
  jq -cn --arg c "sha256:$cfg_dg" --argjson cs "$cfg_sz" --arg l "sha256:$layer_dg" \
    --argjson ls "$layer_sz" --argjson a "$labels" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $l, size: $ls}],
      annotations: $a}' \
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
jq -n --argjson m "$manifests" --argjson a "$labels" \
  '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: $m, annotations: $a}' \
  >"$d/index.json"
echo "$docker" | jq . >"$d/manifest.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
mkdir -p "$(dirname "$out")"
tar --numeric-owner --owner=0 --group=0 --mtime=@0 --sort=name -C "$d" \
  -cf "$out.tmp" oci-layout index.json manifest.json blobs
mv "$out.tmp" "$out"

nlibs=$(echo "$libs" | wc -w)
echo "build-image: $out"
echo "build-image: layer $(numfmt --to=iec "$layer_sz") uncompressed ($(gzip -c <"$d/blobs/sha256/$layer_dg" | wc -c | numfmt --to=iec) gzipped), $nlibs libraries from $(echo "$pkgs" | wc -w) Debian packages, archive $(stat -c %s "$out" | numfmt --to=iec)"
jq -r '.manifests[].annotations["io.containerd.image.name"]' "$d/index.json" | sed 's/^/build-image:   /'
