#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs every build and test dependency from Debian's archive: Debian 12 (bookworm) or Debian
# 13 (trixie), read from /etc/os-release (VERSION_CODENAME, else VERSION_ID); SB_DEBIAN_RELEASE
# (bookworm or trixie) overrides it, e.g. on a derivative whose packages match one of them.
# Idempotent: when everything is installed already it does nothing (no apt-get update), so warm
# runs cost well under a second. Usage: scripts/install-deps.sh (as root when something is
# missing). scripts/check-trixie.sh builds and unit-tests the project in a fresh trixie chroot.
set -euo pipefail

release=${SB_DEBIAN_RELEASE:-}
from=SB_DEBIAN_RELEASE
if [ -z "$release" ] && [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  release=$(. /etc/os-release && echo "${ID:-}:${VERSION_CODENAME:-${VERSION_ID:-}}")
  from=/etc/os-release
  # Debian only: another distribution's codename or version number means other packages.
  case "$release" in debian:*) release=${release#debian:} ;; esac
fi
case "$release" in
  bookworm | 12) release=bookworm ;;
  trixie | 13) release=trixie ;;
  *)
    echo "install-deps: unsupported release '${release:-unknown}' (from $from):" \
      "supported are Debian 12 (bookworm) and Debian 13 (trixie). On a system whose packages" \
      "match one of them, set SB_DEBIAN_RELEASE=bookworm or SB_DEBIAN_RELEASE=trixie." >&2
    exit 2
    ;;
esac

# The packages whose names differ between releases: Boost (with Boost.JSON and Boost.URL), the
# clang of the ASan/UBSan build and the fuzz targets (scripts/sanitize.sh, scripts/fuzz.sh) with
# its sanitizer and libFuzzer runtimes.
case "$release" in
  bookworm)
    boost=(libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev)
    clang=(clang-14 libclang-rt-14-dev)
    ;;
  trixie)
    boost=(libboost1.83-dev libboost-json1.83-dev libboost-url1.83-dev)
    clang=(clang-19 libclang-rt-19-dev)
    ;;
esac

PACKAGES=(
  # build; clang-format 19 on both releases (bookworm's archive has it too), so that
  # scripts/check-format.sh judges the same on either
  build-essential cmake ninja-build pkg-config clang-format-19 ccache
  # the linker (CMakeLists.txt SB_LINKER): lld links the debug-info-heavy test binaries six times
  # faster than ld.bfd
  lld
  "${boost[@]}" libssl-dev
  libsimdjson-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev
  prometheus-cpp-dev libexpected-dev libgtest-dev libgmock-dev libbenchmark-dev
  # the allocator the slurm-bridge binary links (issue #13: malloc/free were a fifth of its CPU)
  libjemalloc-dev
  # the ASan/UBSan build and the fuzz targets
  "${clang[@]}"
  # the test environment: the Slurm chroot, and the tools the scripts and tests call. Kubernetes
  # 1.36 (its Go 1.26, etcd 3.5 and kubectl) is built and unpacked into the cache by
  # testenv/kube/build.sh, not installed.
  debootstrap python3-yaml
  curl jq openssl ca-certificates util-linux procps psmisc iproute2 xz-utils
  # the in-cluster chart test's TLS-terminating proxy in front of slurmrestd (a private CA)
  socat
  # the kubelets' nodes (testenv/up.sh --kubelets): a containerd per node, runc, the CNI
  # loopback plugin, and busybox for the test images (built offline, statically linked)
  containerd runc containernetworking-plugins busybox-static
  # the test DRA driver the kubelets' nodes run (testing/dra-driver: the kubelet's gRPC APIs)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present ($release)"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "install-deps: run as root to install: ${missing[*]}" >&2; exit 1; }
echo "install-deps: installing ($release) ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
