#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Makes the directory from which the test environment's slurmd nodes run `slurm-bridge epilog`
# as their Epilog. slurmd runs in the Debian sid chroot while the binary is built on the host
# against the host's shared libraries, so the directory carries the binary (stripped), its
# library closure (ldd) and the host's dynamic loader, and epilog.sh runs the binary through
# that loader: <dir>/ld-linux-x86-64.so.2 --library-path <dir>/lib <dir>/slurm-bridge epilog.
# supervise.sh bind-mounts the directory read-only at /run/sb-epilog inside its private mount
# namespace (its /run is a private tmpfs), so the chroot on disk is never changed; up.sh adds
# the kubeconfig (kubeconfig, ca.crt, token) once kube-apiserver is up. Until then an epilog
# finds no kubeconfig and exits 0 at once. Each run appends to
# /var/log/slurm/epilog-<node>.log, that is $S/log/epilog-<node>.log on the host.
#
# Usage: epilog-dir.sh BINARY DIR MAX_WAIT
set -euo pipefail
binary=$1 dir=$2 max_wait=$3
die() { echo "epilog-dir: $*" >&2; exit 1; }
[ -x "$binary" ] || die "$binary: no such executable (build the slurm-bridge target first)"
ldd "$binary" | grep -q 'not found' && die "ldd $binary: unresolved libraries"
mkdir -p "$dir/lib"
strip --strip-unneeded -o "$dir/slurm-bridge" "$binary"
chmod 755 "$dir/slurm-bridge"
for l in $(ldd "$binary" | awk '/=> \//{print $3}' | sort -u); do
  cp -L "$l" "$dir/lib/"
done
interp=$(readelf -l "$binary" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[ -n "$interp" ] || die "$binary has no program interpreter"
cp -L "$interp" "$dir/ld.so"
# slurmd runs it with SLURM_JOB_ID and SLURMD_NODENAME set (and little else).
cat >"$dir/epilog.sh" <<SH
#!/bin/sh
# Written by testenv/slurm/epilog-dir.sh: slurmd's Epilog (slurm.conf Epilog=).
d=/run/sb-epilog
exec "\$d/ld.so" --library-path "\$d/lib" "\$d/slurm-bridge" epilog \\
  --kubeconfig "\$d/kubeconfig" --max-wait $max_wait --log-level debug \\
  2>>"/var/log/slurm/epilog-\${SLURMD_NODENAME:-unknown}.log" >&2
SH
chmod 755 "$dir/epilog.sh"
