#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The README's demo command, so that it cannot rot: scripts/demo.sh (setup skipped: the test
# command has installed, prepared and built) in an environment of its own, and the seed's flow in
# its output: the bridge installed by its chart with real Helm (`helm install`) and running as
# pods, the Slurm job, the kubelet starting the container, the container's own report of its
# Slurm job and GPUs, and the job ended after the pod completed.
# Usage: demo_test.sh SLURM_BRIDGE_BINARY
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: demo_test.sh SLURM_BRIDGE_BINARY}
dir=$(mktemp -d "${TMPDIR:-/tmp}/sb-demo-test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
out="$dir/out"
SB_DEMO_SKIP_SETUP=1 SB_BINARY="$bin" SB_DEMO_DIR="$dir/env" "$root/scripts/demo.sh" >"$out" 2>&1
rc=$?
fails=0
check() {
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
check "demo exits 0" [ $rc = 0 ]
job=$(sed -n 's/^== the Slurm job for the pod: \([0-9][0-9]*\)$/\1/p' "$out")
check "a Slurm job for the pod" [ -n "$job" ]
check "bound by the bridge" grep -q "Scheduled .*slurm-bridge-scheduler .*(Slurm job $job)" "$out"
check "the kubelet started the container" grep -qE "Started .*kubelet .*(Started container yolo|Container started)" "$out"
check "the container knows its Slurm job" grep -qE "SLURM_JOB_ID: +$job\$" "$out"
check "the container knows its GPUs" grep -qE "SLURM_JOB_GPUS: +[0-9]" "$out"
check "the benchmark ran" grep -qE "rate: +[0-9]+ rounds/s" "$out"
# After the pod: the job's state read once the pod completed, and its end no earlier than the
# container's (test audit N13: a JobState=CANCELLED anywhere in the output proved neither).
after=$(sed -n '/^== the Slurm job after the pod completed/,/^== /p' "$out")
check "the job ended after the pod" grep -q "JobState=CANCELLED" <<<"$after"
read -r finished ended < <(sed -n 's/^== the container finished at \([0-9]*\), the Slurm job ended at \([0-9]*\)$/\1 \2/p' "$out")
check "the container's end is known" [ "${finished:-0}" -gt 0 ]
check "the job's end is known" [ "${ended:-0}" -gt 0 ]
check "the job did not end before the container" [ "${ended:-0}" -ge "${finished:-1}" ]
check "installed by helm install" grep -qE "^ +STATUS: deployed$" "$out"
check "the bridge ran as pods (helm chart)" grep -qE "slurm-bridge-scheduler-[a-z0-9-]+ +1/1 +Running" "$out"
check "the seed's pod in the managed namespace" grep -q "pod/yolo-benchmark-slurm-bridge created" "$out"
[ $fails = 0 ] || cat "$out"
echo "$fails failed"
[ $fails = 0 ]
