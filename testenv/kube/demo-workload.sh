#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# /bin/demo-workload in localhost/slurm-bridge-demo:1 (testenv/kube/build-images.sh): the offline
# stand-in for the seed's YOLO benchmark image. It reports what the container received from
# Kubernetes and Slurm, runs a short CPU benchmark (integer arithmetic in busybox awk, nothing
# like YOLO inference), and prints its rate. DEMO_ROUNDS sets the benchmark's size.
# Times are read in microseconds through adjtimex(2) (read-only; busybox `date` has no %N), so
# that scripts/bench-workload.sh gets the container's start in ms and a precise rate; where that
# fails, /proc/uptime (centiseconds) times the benchmark and the start is "unknown". The
# benchmark's CPU time (this shell's reaped children, in 10 ms ticks) gives a second rate, per
# CPU second, that other processes competing for the CPU do not lower.
now_ms() {
  adjtimex 2>/dev/null | awk '$1 == "time.tv_sec:" { s = $2 } $1 == "time.tv_usec:" { u = $2 }
    END { if (s != "") printf "%.0f\n", s * 1000 + int(u / 1000) }'
}
started=$(now_ms)
echo "=== slurm-bridge demo workload (stand-in for the seed's YOLO image: no PyTorch, no GPU) ==="
echo "node:                   ${NODE_NAME:-unknown (NODE_NAME unset)}"
echo "pod:                    ${POD_NAME:-$(hostname)}"
echo "SLURM_JOB_ID:           ${SLURM_JOB_ID:-unset}"
echo "SLURM_JOB_GPUS:         ${SLURM_JOB_GPUS:-unset}"
echo "NVIDIA_VISIBLE_DEVICES: ${NVIDIA_VISIBLE_DEVICES:-unset}"
echo "started:                ${started:-unknown} (ms since the epoch)"
rounds=${DEMO_ROUNDS:-300}
uptime_ms() { awk '{ split($1, t, "."); print (t[1] * 100 + t[2]) * 10 }' /proc/uptime; }
clock=now_ms
[ -n "$started" ] || clock=uptime_ms
cpu_ticks() { awk '{ print $16 + $17 }' "/proc/$$/stat"; }
t0=$($clock)
c0=$(cpu_ticks)
sum=$(awk -v rounds="$rounds" 'BEGIN {
  s = 0
  for (r = 0; r < rounds; r++) for (i = 1; i <= 10000; i++) s = (s * 31 + i * r) % 1000003
  print s }')
t1=$($clock)
c1=$(cpu_ticks)
ms=$((t1 - t0))
[ "$ms" -gt 0 ] || ms=1
cpu=$((c1 - c0))
[ "$cpu" -gt 0 ] || cpu=1
echo "cpu benchmark:          $rounds rounds of 10000 steps in $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s (checksum $sum)"
echo "rate:                   $(awk -v r="$rounds" -v ms="$ms" 'BEGIN { printf "%.0f rounds/s (%.2f)", r * 1000 / ms, r * 1000 / ms }')"
echo "cpu time:               $((cpu / 100)).$(printf '%02d' $((cpu % 100))) s"
echo "rate per CPU second:    $(awk -v r="$rounds" -v cs="$cpu" 'BEGIN { printf "%.2f", r * 100 / cs }') rounds/s"
