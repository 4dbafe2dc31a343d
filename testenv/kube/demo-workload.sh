#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# /bin/demo-workload in localhost/slurm-bridge-demo:1 (testenv/kube/build-images.sh): the offline
# stand-in for the seed's YOLO benchmark image. It reports what the container received from
# Kubernetes and Slurm, runs a short CPU benchmark (integer arithmetic in busybox awk, nothing
# like YOLO inference), and prints its rate. DEMO_ROUNDS sets the benchmark's size.
echo "=== slurm-bridge demo workload (stand-in for the seed's YOLO image: no PyTorch, no GPU) ==="
echo "node:                   ${NODE_NAME:-unknown (NODE_NAME unset)}"
echo "pod:                    ${POD_NAME:-$(hostname)}"
echo "SLURM_JOB_ID:           ${SLURM_JOB_ID:-unset}"
echo "SLURM_JOB_GPUS:         ${SLURM_JOB_GPUS:-unset}"
echo "NVIDIA_VISIBLE_DEVICES: ${NVIDIA_VISIBLE_DEVICES:-unset}"
rounds=${DEMO_ROUNDS:-300}
uptime_cs() { awk '{ split($1, t, "."); print t[1] * 100 + t[2] }' /proc/uptime; }
t0=$(uptime_cs)
sum=$(awk -v rounds="$rounds" 'BEGIN {
  s = 0
  for (r = 0; r < rounds; r++) for (i = 1; i <= 10000; i++) s = (s * 31 + i * r) % 1000003
  print s }')
t1=$(uptime_cs)
cs=$((t1 - t0))
[ "$cs" -gt 0 ] || cs=1
echo "cpu benchmark:          $rounds rounds of 10000 steps in $((cs / 100)).$(printf '%02d' $((cs % 100))) s (checksum $sum)"
echo "rate:                   $((rounds * 100 / cs)) rounds/s"
