#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the Debian sid chroot that holds Slurm 26.05 (slurmctld, the multiple-slurmd emulator
# build of slurmd, slurmrestd, the JWT plugin) into the cache, once. Does nothing when a complete
# chroot is already there. The chroot is built under a temporary name and renamed at the end, so
# an interrupted build never looks complete. Every mount it needs lives in a private mount
# namespace and vanishes with it, even when a step fails.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"
need_root

mkdir -p "$SB_CACHE_DIR"
# One build at a time (two checkouts, or two sessions, preparing at once would both debootstrap
# into the same temporary directory); the second finds the first's chroot ready.
exec 9>"$SB_CACHE_DIR/slurm-chroot.lock"
flock 9
if [ -f "$SB_CHROOT/$SB_CHROOT_STAMP" ]; then
  log "slurm chroot ready: $SB_CHROOT"
  exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap missing: run scripts/install-deps.sh"
mkdir -p "$SB_CACHE_DIR"
tmp="$SB_CHROOT.tmp"
# A leftover from an interrupted build. Its mounts were private to a namespace that is gone,
# but be careful anyway: never rm -rf through a mount.
if [ -e "$tmp" ]; then
  if grep -q " $tmp/" /proc/self/mountinfo; then die "$tmp has mounts; unmount them first"; fi
  rm -rf "$tmp"
fi
rm -rf "$SB_CHROOT"

start=$SECONDS
log "debootstrap sid into $tmp"
unshare --mount --fork debootstrap --variant=minbase sid "$tmp" "$DEBIAN_MIRROR" >"$SB_CACHE_DIR/debootstrap.log" 2>&1 ||
  { tail -20 "$SB_CACHE_DIR/debootstrap.log" >&2; die "debootstrap failed (log: $SB_CACHE_DIR/debootstrap.log)"; }
log "debootstrap done in $((SECONDS - start)) s"

printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
chmod +x "$tmp/usr/sbin/policy-rc.d"
log "installing Slurm into the chroot"
unshare --mount --fork sh -c '
  set -e
  mount -t proc proc "$1/proc"
  chroot "$1" apt-get -q -o Acquire::Check-Valid-Until=false update
  DEBIAN_FRONTEND=noninteractive chroot "$1" apt-get -q install -y --no-install-recommends \
    slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin slurm-wlm-emulator curl jq
  chroot "$1" apt-get clean
' - "$tmp" >"$SB_CACHE_DIR/chroot-apt.log" 2>&1 ||
  { tail -20 "$SB_CACHE_DIR/chroot-apt.log" >&2; die "apt in chroot failed (log: $SB_CACHE_DIR/chroot-apt.log)"; }

# Pitfall 2 (DNS): from here on no Slurm tool may look anything up outside the machine (apt above
# still needed the host's resolver, which debootstrap copied in).
echo "nameserver 127.0.0.1" >"$tmp/etc/resolv.conf"
cat >"$tmp/etc/nsswitch.conf" <<'NSS'
passwd: files
group: files
shadow: files
hosts: files
networks: files
NSS
cat >"$tmp/etc/hosts" <<'HOSTS'
127.0.0.1 localhost slurmlab
HOSTS

# slurmrestd refuses to run as root or SlurmUser; "k8s" owns ordinary jobs (uid 2000).
chroot "$tmp" sh -c 'id slurmrest >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin slurmrest'
chroot "$tmp" sh -c 'id k8s >/dev/null 2>&1 || useradd -u 2000 -M -s /bin/sh k8s'
# Mount points the environment binds its per-run directories onto.
mkdir -p "$tmp/etc/slurm" "$tmp/var/spool/slurmctld" "$tmp/var/spool/slurmd" "$tmp/var/log/slurm"
# Fake GPUs (pitfall 7): character devices, made from outside (mknod fails inside the chroot).
mkdir -p "$tmp/var/lib/fakegpu"
for i in 0 1 2 3 4 5 6 7; do
  [ -e "$tmp/var/lib/fakegpu/nvidia$i" ] || mknod "$tmp/var/lib/fakegpu/nvidia$i" c 1 3
done
chroot "$tmp" /usr/sbin/slurmctld -V >"$tmp/$SB_CHROOT_STAMP"
mv "$tmp" "$SB_CHROOT"
log "slurm chroot ready in $((SECONDS - start)) s: $(cat "$SB_CHROOT/$SB_CHROOT_STAMP")"
