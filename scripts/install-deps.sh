#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs every build and test dependency from Debian 12's archive. Idempotent: when everything
# is installed already it does nothing (no apt-get update), so warm runs cost well under a second.
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake ninja-build pkg-config clang-format ccache
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libssl-dev
  libsimdjson-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev
  prometheus-cpp-dev libexpected-dev libgtest-dev libgmock-dev libbenchmark-dev
  # the allocator the slurm-bridge binary links (issue #13: malloc/free were a fifth of its CPU)
  libjemalloc-dev
  # the ASan/UBSan build and the fuzz targets (scripts/sanitize.sh, scripts/fuzz.sh): clang 14
  # with its sanitizer and libFuzzer runtimes
  clang-14 libclang-rt-14-dev
  # the test environment: the Slurm chroot, and the tools the scripts and tests call. Kubernetes
  # 1.36 (its Go 1.26, etcd 3.5 and kubectl) is built and unpacked into the cache by
  # testenv/kube/build.sh, not installed; Go 1.19 builds the chart tests' renderer.
  debootstrap golang-1.19-go
  # the chart tests' renderer (testenv/helm-render): sprig v3 and yaml.v3, as Helm uses
  golang-github-masterminds-sprig-dev golang-gopkg-yaml.v3-dev python3-yaml
  # and gojsonschema, with which Helm checks values.schema.json
  golang-github-xeipuuv-gojsonschema-dev
  curl jq openssl ca-certificates util-linux procps psmisc iproute2 xz-utils
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
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "install-deps: run as root to install: ${missing[*]}" >&2; exit 1; }
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
