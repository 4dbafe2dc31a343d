#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the Debian sid chroot that holds Slurm 26.05 (slurmctld, the multiple-slurmd emulator
# build of slurmd, slurmrestd, the JWT plugin, and for `up.sh --accounting` slurmdbd with its
# MySQL plugin and MariaDB) into the cache, once. Does nothing when a complete chroot is already
# there. The chroot is built under a temporary name and renamed at the end, so an interrupted
# build never looks complete. Every mount it needs lives in a private mount namespace and
# vanishes with it, even when a step fails.
#
# A chroot built before accounting was added (stamp SB_CHROOT_STAMP without
# SB_CHROOT_ACCOUNTING_STAMP) is not rebuilt: slurmdbd and MariaDB are installed into it (about
# 30 s), at the version of the Slurm already there.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"

# A complete chroot needs nothing, and no root: the stamps appear only once it is built (the
# build renames it into place), so this check needs no lock either.
if [ -f "$SB_CHROOT/$SB_CHROOT_STAMP" ] && [ -f "$SB_CHROOT/$SB_CHROOT_ACCOUNTING_STAMP" ]; then
  log "slurm chroot ready: $SB_CHROOT"
  exit 0
fi
need_root

mkdir -p "$SB_CACHE_DIR"
# One build at a time (two checkouts, or two sessions, preparing at once would both debootstrap
# into the same temporary directory); the second finds the first's chroot ready.
exec 9>"$SB_CACHE_DIR/slurm-chroot.lock"
flock 9

# Slurm's accounting (up.sh --accounting): slurmdbd must be slurmctld's version.
accounting_packages=(slurmdbd slurm-wlm-mysql-plugin mariadb-server)
# Every Slurm package of the full build, for when the archive no longer has the chroot's version.
slurm_packages=(slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin slurm-wlm-emulator)

# stamp_accounting DIR: checks what add_accounting (or the full build) installed and writes the
# accounting stamp.
stamp_accounting() {
  local ctld dbd
  # (slurmdbd -V wants a slurmdbd.conf: the packages' versions instead.)
  ctld=$(chroot "$1" dpkg-query -W -f '${Version}' slurmctld)
  dbd=$(chroot "$1" dpkg-query -W -f '${Version}' slurmdbd)
  [ "$ctld" = "$dbd" ] || die "slurmdbd ($dbd) is not slurmctld's version ($ctld)"
  [ -x "$1/usr/sbin/mariadbd" ] && [ -x "$1/usr/bin/mariadb-install-db" ] || die "MariaDB missing in $1"
  { echo "slurmdbd $dbd"; chroot "$1" /usr/sbin/mariadbd --version; } >"$1/$SB_CHROOT_ACCOUNTING_STAMP"
}

# add_accounting DIR: installs the accounting packages into a finished chroot, in a private
# mount namespace. The chroot resolves no name (pitfall 2: resolv.conf says 127.0.0.1 and
# nsswitch.conf `hosts: files`), so apt gets the host's resolver: both files are bound over the
# chroot's in that namespace only and vanish with it. The files on disk never change, and
# environments running from the chroot meanwhile never see a resolver. Installs the chroot's
# Slurm version; when the archive has moved on (sid), the whole Slurm stack to the archive's.
add_accounting() {
  local dir=$1 ver t p rc=0 pinned=() latest=()
  ver=$(chroot "$dir" dpkg-query -W -f '${Version}' slurmctld)
  for p in "${accounting_packages[@]}"; do
    case "$p" in slurm*) pinned+=("$p=$ver") ;; *) pinned+=("$p") ;; esac
  done
  latest=("${accounting_packages[@]}" "${slurm_packages[@]}")
  t=$(mktemp -d)
  cp -L /etc/resolv.conf "$t/resolv.conf"
  printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' >"$t/nsswitch.conf"
  unshare --mount --fork sh -c '
    set -e
    d=$1 t=$2 ver=$3 pinned=$4 latest=$5
    mount -t proc proc "$d/proc"
    mount --bind "$t/resolv.conf" "$d/etc/resolv.conf"
    mount --bind "$t/nsswitch.conf" "$d/etc/nsswitch.conf"
    chroot "$d" apt-get -q -o Acquire::Check-Valid-Until=false update
    export DEBIAN_FRONTEND=noninteractive
    chroot "$d" dpkg --configure -a
    if ! chroot "$d" apt-get -q install -y --no-install-recommends $pinned; then
      echo "build-chroot: Slurm $ver is no longer in the archive: installing the archive'"'"'s"
      chroot "$d" apt-get -q install -y --no-install-recommends $latest
    fi
    chroot "$d" apt-get clean
  ' - "$dir" "$t" "$ver" "${pinned[*]}" "${latest[*]}" \
    >"$SB_CACHE_DIR/chroot-accounting-apt.log" 2>&1 || rc=$?
  rm -rf "$t"
  [ $rc = 0 ] || { tail -20 "$SB_CACHE_DIR/chroot-accounting-apt.log" >&2
    die "apt in chroot failed (log: $SB_CACHE_DIR/chroot-accounting-apt.log)"; }
}

if [ -f "$SB_CHROOT/$SB_CHROOT_STAMP" ]; then
  if [ ! -f "$SB_CHROOT/$SB_CHROOT_ACCOUNTING_STAMP" ]; then
    start=$SECONDS
    log "adding slurmdbd and MariaDB to the slurm chroot $SB_CHROOT"
    add_accounting "$SB_CHROOT"
    stamp_accounting "$SB_CHROOT"
    # The version the chroot's Slurm has now (the same unless the archive had moved on).
    chroot "$SB_CHROOT" /usr/sbin/slurmctld -V >"$SB_CHROOT/$SB_CHROOT_STAMP"
    log "accounting added in $((SECONDS - start)) s: $(paste -sd' ' "$SB_CHROOT/$SB_CHROOT_ACCOUNTING_STAMP")"
  fi
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
    slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin slurm-wlm-emulator curl jq \
    slurmdbd slurm-wlm-mysql-plugin mariadb-server
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
stamp_accounting "$tmp"
chroot "$tmp" /usr/sbin/slurmctld -V >"$tmp/$SB_CHROOT_STAMP"
mv "$tmp" "$SB_CHROOT"
log "slurm chroot ready in $((SECONDS - start)) s: $(cat "$SB_CHROOT/$SB_CHROOT_STAMP")"
