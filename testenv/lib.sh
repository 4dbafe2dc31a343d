# SPDX-License-Identifier: Apache-2.0
#
# Shared helpers for the test-environment scripts. Sourced, never run.

# Where built artifacts (the Slurm chroot, the Kubernetes binaries) are cached, outside the clone.
SB_CACHE_DIR="${SB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-bridge}"
SB_CHROOT="${SB_CHROOT:-$SB_CACHE_DIR/slurm-sid-chroot}"
SB_KUBE_DIR="${SB_KUBE_DIR:-$SB_CACHE_DIR/kube-1.20.2}"
# Bumped when the chroot's content changes, so old caches are rebuilt.
SB_CHROOT_STAMP=".slurm-bridge-chroot-v1"
SB_KUBE_STAMP=".slurm-bridge-kube-v4"
SB_KUBELET_STAMP=".slurm-bridge-kubelet-v1"
# The container images of the kubelets' nodes (testenv/kube/build-images.sh).
SB_IMAGES_DIR="${SB_IMAGES_DIR:-$SB_CACHE_DIR/images}"
SB_IMAGES_STAMP=".slurm-bridge-images-v1"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot, namespaces)"; }

# Prints a TCP port that nothing listens on now, from a random start in 20000-59999, skipping
# those already handed out by this shell (SB_TAKEN_PORTS).
SB_TAKEN_PORTS=" "
free_port() {
  local p tries=0
  while :; do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    tries=$((tries + 1))
    [ $tries -lt 500 ] || die "no free port found"
    case "$SB_TAKEN_PORTS" in *" $p "*) continue ;; esac
    if ! ss -Htan "( sport = :$p )" 2>/dev/null | grep -q .; then
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
