#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the project and runs its unit tests in a fresh Debian 13 (trixie) chroot, to check that
# scripts/install-deps.sh names trixie's packages right and that the tree builds with trixie's
# compiler (g++ 14, -Werror as scripts/build.sh sets it) and libraries. Stages, each timed:
#   debootstrap   a minbase trixie into DIR (from DEBIAN_MIRROR)
#   source        `git archive` of SB_TRIXIE_REV (default HEAD) into DIR/src/slurm-bridge: only
#                 committed work is checked
#   install-deps  scripts/install-deps.sh inside the chroot (the trixie branch of its list)
#   build         scripts/build.sh inside the chroot (SB_CCACHE=0: a cold build, every target)
#   unit          ctest -L unit inside the chroot
#   format        clang-format-19 on the C++ files, as scripts/check-format.sh runs it
# and prints each stage's result and time, the compiler and library versions, and the unit tests'
# count. Not run in CI (a cold build of everything takes 15-25 minutes on 2 cores): run it by hand
# after changing dependencies or before declaring a new compiler supported.
#
# Usage: scripts/check-trixie.sh [--keep] [--reuse] [DIR]
#   DIR      the chroot (also SB_TRIXIE_DIR; default $SB_CACHE_DIR/trixie-check, i.e.
#            ~/.cache/slurm-bridge/trixie-check). Created by this script; a DIR left by an earlier
#            run is replaced, any other existing DIR is refused.
#   --keep   leave DIR in place afterwards (enter it with `chroot DIR`; the tree is in
#            /src/slurm-bridge); by default it is removed.
#   --reuse  take the packages of a DIR kept by an earlier run (skips debootstrap; install-deps
#            then installs only what is new); the source and the build are fresh all the same.
# Stage logs: DIR.logs/<stage>.log. On a shared machine run it as
# `nice -n 19 scripts/check-trixie.sh`.
# Needs root (debootstrap, chroot, mounts), Debian's archive over the network, and about 8 GB of
# disk. Every mount (proc, sys, dev) lives in a private mount namespace of this script and is
# unmounted on exit, also when a stage fails or the run is interrupted; nothing is mounted on the
# host.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=testenv/lib.sh
. "$root/testenv/lib.sh"
need_root

keep=0 reuse=0 dir=${SB_TRIXIE_DIR:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --reuse) reuse=1 ;;
    -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (usage: check-trixie.sh [--keep] [--reuse] [DIR])" ;;
    *) dir=$1 ;;
  esac
  shift
done
dir=${dir:-$SB_CACHE_DIR/trixie-check}
case "$dir" in /*) ;; *) dir=$PWD/$dir ;; esac
dir=${dir%/}
[ -n "$dir" ] || die "DIR must not be /"
rev=${SB_TRIXIE_REV:-HEAD}
marker=.slurm-bridge-check-trixie
ready=.slurm-bridge-check-trixie-ready

# Everything below runs in a private mount namespace: the chroot's mounts are never seen by the
# host and vanish with this process whatever happens; the EXIT trap unmounts them before DIR is
# removed.
if [ "${SB_TRIXIE_NAMESPACE:-}" != "$$" ]; then
  command -v debootstrap >/dev/null || die "debootstrap missing: run scripts/install-deps.sh"
  command -v unshare >/dev/null || die "unshare missing (util-linux)"
  # The commit itself, so that a commit made meanwhile changes nothing.
  rev=$(git -C "$root" rev-parse --verify -q "$rev^{commit}") ||
    die "SB_TRIXIE_REV=${SB_TRIXIE_REV:-HEAD} is not a commit of $root"
  export SB_TRIXIE_REV=$rev
  args=()
  [ $keep = 1 ] && args+=(--keep)
  [ $reuse = 1 ] && args+=(--reuse)
  # exec keeps the process id, which is how the re-executed script knows it is inside.
  SB_TRIXIE_NAMESPACE=$$ exec unshare --mount --propagation private "$0" "${args[@]}" "$dir"
fi

logs=$dir.logs
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
flock -n 9 || die "another check-trixie.sh runs on $dir"

# mounted_under DIR: true while anything is mounted at or below DIR (in this namespace).
mounted_under() {
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo
}
unmount_all() {
  local m
  for m in dev/pts dev sys proc; do
    if mountpoint -q "$dir/$m" 2>/dev/null; then
      umount -R "$dir/$m" || umount -R -l "$dir/$m" || true
    fi
  done
}
# remove_dir: removes DIR, only when this script made it (its marker is there) and nothing is
# mounted below it.
remove_dir() {
  [ -e "$dir" ] || return 0
  [ -f "$dir/$marker" ] || { log "error: $dir has no $marker; not removing it"; return 1; }
  if mounted_under "$dir"; then
    log "error: $dir still has mounts; not removing it"
    return 1
  fi
  rm -rf --one-file-system "$dir"
}

names=() secs=() results=() versions="" failed=""
total_start=$SECONDS
summary() {
  local i
  echo "check-trixie: Debian 13 (trixie) in $dir, source $(git -C "$root" rev-parse --short "$rev")"
  for i in "${!names[@]}"; do
    printf 'check-trixie: %-13s %6s s  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
  done
  [ -z "$versions" ] || echo "check-trixie: $versions"
  echo "check-trixie: total $((SECONDS - total_start)) s; stage logs in $logs"
}
on_exit() {
  local rc=$?
  trap - EXIT INT TERM
  unmount_all
  if [ $keep = 0 ]; then remove_dir || rc=1; fi
  summary
  if [ $rc = 0 ]; then
    echo "check-trixie: PASS"
  else
    echo "check-trixie: FAIL${failed:+ ($failed)}"
  fi
  exit $rc
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# stage NAME COMMAND...: runs COMMAND in a subshell with its output in $logs/NAME.log and records
# its time; a failure shows the log's end and ends the run. (Not `|| rc=$?`: that would switch
# errexit off inside COMMAND.)
stage() {
  local name=$1 start=$SECONDS rc
  shift
  log "$name (log: $logs/$name.log)"
  set +e
  (
    set -e
    "$@"
  ) >"$logs/$name.log" 2>&1
  rc=$?
  set -e
  names+=("$name")
  secs+=($((SECONDS - start)))
  if [ $rc != 0 ]; then
    results+=("FAILED (exit $rc)")
    failed=$name
    tail -40 "$logs/$name.log" >&2
    exit 1
  fi
  results+=(ok)
}

# in_chroot SCRIPT: runs a bash script in the chroot's tree, with a clean environment.
in_chroot() {
  chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -euo pipefail -c "cd /src/slurm-bridge && $1"
}

mount_chroot() {
  mount -t proc proc "$dir/proc"
  mount -t sysfs -o ro sysfs "$dir/sys"
  mount --rbind /dev "$dir/dev"
}

debootstrap_trixie() {
  remove_dir
  mkdir -p "$dir"
  touch "$dir/$marker"
  debootstrap --variant=minbase trixie "$dir" "$DEBIAN_MIRROR"
}

copy_source() {
  rm -rf "$dir/src"
  mkdir -p "$dir/src/slurm-bridge"
  git -C "$root" archive --format=tar "$rev" | tar -x -C "$dir/src/slurm-bridge"
}

install_deps() {
  # The name server of the host (debootstrap copies it too; again, for a reused chroot), and no
  # service started by a package's postinst (containerd).
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
  printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
  chmod +x "$dir/usr/sbin/policy-rc.d"
  in_chroot 'scripts/install-deps.sh && apt-get clean'
}

# versions: the compiler's and the libraries' versions in the chroot, on one line.
versions() {
  # shellcheck disable=SC2016 # expanded in the chroot
  in_chroot 'printf "g++ %s, cmake %s, " "$(g++ -dumpfullversion)" \
      "$(cmake --version | sed -n "1s/.* //p")"
    dpkg-query -W -f "\${Package} \${Version}\n" libboost1.83-dev libyaml-cpp-dev libfmt-dev \
      libspdlog-dev libsimdjson-dev libcli11-dev libgtest-dev libssl-dev clang-format-19 |
      paste -sd, - | sed "s/,/, /g"'
}

build() {
  in_chroot 'SB_CCACHE=0 scripts/build.sh'
}

unit_tests() {
  in_chroot 'ctest --test-dir build -L unit --output-on-failure --timeout 300 --parallel 2'
}

# format: scripts/check-format.sh's check with trixie's clang-format (the archive has no .git to
# list the files from: the list comes from the revision).
format() {
  local files
  files=$(git -C "$root" ls-tree -r --name-only "$rev" | grep -E '\.(h|cc|h\.in)$' | tr '\n' ' ')
  [ -n "$files" ] || die "no C++ files in $rev"
  in_chroot "clang-format-19 --version && clang-format-19 --dry-run -Werror $files &&
    echo \"clang-format: $(wc -w <<<"$files") files clean\"" || {
    echo "clang-format: $(grep -c 'error: code should be clang-formatted' "$logs/format.log")" \
      "places in $(grep 'error: code should be clang-formatted' "$logs/format.log" |
        cut -d: -f1 | sort -u | wc -l) files differ from trixie's clang-format"
    return 1
  }
}

if [ -e "$dir" ] && [ ! -f "$dir/$marker" ]; then
  keep=1
  die "$dir exists and was not made by check-trixie.sh: name another DIR"
fi
mkdir -p "$logs"
rm -f "$logs"/*.log
echo "check-trixie: DIR $dir; source $(git -C "$root" log -1 --format='%h %s' "$rev" | cut -c1-80)"
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no)" ]; then
  echo "check-trixie: note: uncommitted changes in the checkout are not part of the check"
fi
if [ $reuse = 1 ] && [ -f "$dir/$ready" ]; then
  names+=(debootstrap) secs+=(0) results+=("reused $dir")
else
  [ $reuse = 1 ] && log "no chroot kept in $dir: making a fresh one"
  stage debootstrap debootstrap_trixie
fi
grep -q '^VERSION_CODENAME=trixie$' "$dir/etc/os-release" || die "$dir is not Debian trixie"
stage source copy_source
mount_chroot
stage install-deps install_deps
touch "$dir/$ready"
versions=$(versions 2>&1 | tail -1) || versions="versions unknown"
stage build build
stage unit unit_tests
# ctest's summary line: "100% tests passed, 0 tests failed out of N"
summary_line=$(grep -E 'tests passed, [0-9]+ tests failed out of' "$logs/unit.log" | tail -1) ||
  summary_line="(no ctest summary in the log)"
results[${#results[@]} - 1]="ok: $summary_line"
stage format format
results[${#results[@]} - 1]="ok: $(tail -n 1 "$logs/format.log")"
