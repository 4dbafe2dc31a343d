#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs a command (scontrol, sinfo, squeue, sbatch, ...) inside the Slurm cluster of a running
# environment: in its mount namespace, chrooted, with its slurm.conf. Tests use it for what the
# REST API cannot do (for example `scontrol update nodename=n1 state=down`).
#
# Usage: exec.sh RUN_DIR COMMAND [ARGS...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"
[ $# -ge 2 ] || die "usage: exec.sh RUN_DIR COMMAND [ARGS...]"
S="$1/slurm"
shift
[ -f "$S/ready" ] || die "no running Slurm in $S"
sup=$(cat "$S/supervisor.pid")
exec nsenter -t "$sup" -m -u env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin chroot "$SB_CHROOT" "$@"
