#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The converged nodes' contract (testenv/up.sh --kubelets, testenv/kube/node.sh): each Slurm
# node's kubelet registers the Node of the same name, Ready, with Slurm's GPUs, plus one node
# under another name with the slinky.slurm.net/slurm-nodename label; a pod really runs; host
# sysctls stay as they were; stopping a kubelet makes its Node NotReady (node lifecycle
# controller) and starting it again gives back its GPUs. A start that fails half-way, and a stop
# after a daemon was killed, leave no process, mount or cgroup behind.
# Starts its own environments (needs only the cached artifacts).
set -uo pipefail
here=$(cd "$(dirname "$0")/../../testenv" && pwd)
. "$here/lib.sh"
fails=0
check() {
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
base=$(mktemp -d "${TMPDIR:-/tmp}/sb-kubelets.XXXXXX")
trap '"$here/down.sh" "$base/a" >/dev/null 2>&1; "$here/down.sh" "$base/b" >/dev/null 2>&1; rm -rf "$base"' EXIT
sysctls() { cat /proc/sys/vm/overcommit_memory /proc/sys/vm/panic_on_oom /proc/sys/kernel/panic /proc/sys/kernel/panic_on_oops | paste -sd' '; }
sysctls_before=$(sysctls)

# What an environment in run dir $1 may leave behind: processes started from it (by command
# line or working directory), its nodes' cgroups, mounts that mention it.
cg_prefix() { printf 'sb-%s-' "$(printf '%s' "$(cd "$1" && pwd -P)" | sha256sum | cut -c1-10)"; }
leftover_procs() {
  local p n=0 d
  d=$(cd "$1" && pwd -P)
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = $$ ] && continue
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF "$d/" || [[ "$(readlink "$p/cwd" 2>/dev/null)" == "$d"/* ]]; then
      [ "$(awk '{print $3}' "$p/stat" 2>/dev/null)" = Z ] || n=$((n + 1))
    fi
  done
  echo $n
}
leftover_cgroups() { ls -d /sys/fs/cgroup/*/"$(cg_prefix "$1")"* 2>/dev/null | wc -l; }
leftover_mounts() { grep -cF "$(cd "$1" && pwd -P)/" /proc/self/mountinfo; }
nothing_left() { [ "$(leftover_procs "$1")" = 0 ] && [ "$(leftover_cgroups "$1")" = 0 ] && [ "$(leftover_mounts "$1")" = 0 ]; }

# 1. A start that fails in the kubelets: a bad kubelet flag.
mkdir -p "$base/a"
SB_KUBELET_EXTRA_ARGS=--no-such-flag SB_NODE_READY_TIMEOUT=60 \
  "$here/up.sh" --kubelets --nodes 1 --run-dir "$base/a" >/dev/null 2>"$base/a.err"
rc=$?
check "failed start exits non-zero" [ $rc != 0 ]
check "failed start names the kubelet" grep -q "kubelet of .* exited" "$base/a.err"
check "failed start left no process, cgroup or mount" nothing_left "$base/a"
check "failed start kept the kubelet's log" grep -q -- "no-such-flag" "$base/a/nodes/n1/log/kubelet.log"

# 2. A working environment: 1 Slurm node with its kubelet, plus n2 as kube-n2.
"$here/up.sh" --kubelets --nodes 1 --run-dir "$base/b" >/dev/null 2>"$base/b.err" || cat "$base/b.err"
set -a; . "$base/b/env"; set +a
k() { kubectl "$@" 2>/dev/null; }
check "the leftover checks see a running environment" [ "$(leftover_procs "$base/b")" -gt 0 ] && [ "$(leftover_cgroups "$base/b")" -gt 0 ]
check "env lists the nodes" [ "$KUBE_SLURM_NODES" = "n1=n1,kube-n2=n2" ]
for n in n1 kube-n2; do
  check "$n Ready" [ "$(k get node $n -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
  check "$n has Slurm's 4 GPUs" [ "$(k get node $n -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 4 ]
done
check "kube-n2 maps to Slurm's n2" [ "$(k get node kube-n2 -o jsonpath='{.metadata.labels.slinky\.slurm\.net/slurm-nodename}')" = n2 ]
check "n1 has no mapping label" [ -z "$(k get node n1 -o jsonpath='{.metadata.labels.slinky\.slurm\.net/slurm-nodename}')" ]
k apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  nodeName: kube-n2
  restartPolicy: Never
  containers:
  - name: c
    image: localhost/busybox:1
    imagePullPolicy: Never
    command: [sh, -c, 'echo hello from $(cat /etc/hostname); ip -o link | wc -l']
YAML
for _ in $(seq 600); do
  phase=$(k get pod hello -o jsonpath='{.status.phase}')
  [ "$phase" = Succeeded ] || [ "$phase" = Failed ] && break
  sleep 0.2
done
check "a pod runs to Succeeded" [ "$phase" = Succeeded ]
logs=$(k logs hello)
check "kubectl logs reaches the kubelet" grep -q "^hello from hello$" <<<"$logs"
check "the pod's network has only lo" [ "$(sed -n 2p <<<"$logs")" = 1 ]
# A hostNetwork pod shares its node's UTS namespace: the node's name, not the machine's.
k run hostnet --image localhost/busybox:1 --image-pull-policy Never --restart Never \
  --overrides '{"spec":{"nodeName":"n1","hostNetwork":true}}' -- hostname >/dev/null
for _ in $(seq 300); do
  [ "$(k get pod hostnet -o jsonpath='{.status.phase}')" = Succeeded ] && break
  sleep 0.2
done
check "a hostNetwork pod sees its node's hostname" [ "$(k logs hostnet)" = n1 ]
check "host sysctls untouched" [ "$(sysctls)" = "$sysctls_before" ]
check "no node listens off loopback" [ -z "$(ss -Htlnp | awk '$4 !~ /^(127\.0\.0\.1|\[::1\]):/' | grep -E 'kubelet|containerd')" ]

# The node lifecycle controller: a stopped kubelet's Node goes NotReady (grace 40 s).
"$here/kube/node.sh" stop-kubelet "$base/b" n1
for _ in $(seq 600); do
  r=$(k get node n1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
  [ "$r" = Unknown ] && break
  sleep 0.2
done
check "a stopped kubelet's node becomes NotReady (Unknown)" [ "$r" = Unknown ]
"$here/kube/node.sh" start-kubelet "$base/b" n1 2>"$base/restart.err" || cat "$base/restart.err"
check "a restarted kubelet's node is Ready again" [ "$(k get node n1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
check "and has its GPUs again" [ "$(k get node n1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 4 ]

# 3. Kill a daemon under a running pod, then stop: nothing left.
k run sleeper --image localhost/busybox:1 --image-pull-policy Never --restart Never \
  --overrides '{"spec":{"nodeName":"n1"}}' -- sleep 600 >/dev/null
for _ in $(seq 300); do
  [ "$(k get pod sleeper -o jsonpath='{.status.phase}')" = Running ] && break
  sleep 0.2
done
check "a long pod runs" [ "$(k get pod sleeper -o jsonpath='{.status.phase}')" = Running ]
sleeper_cgroups() {
  local p
  for p in $(pgrep -x sleep); do
    tr '\0' ' ' <"/proc/$p/cmdline" | grep -q '^sleep 600 $' && cat "/proc/$p/cgroup"
  done
}
check "its container runs in its node's cgroup subtree" grep -q ":pids:/$(cg_prefix "$base/b")n1/kubepods/" <<<"$(sleeper_cgroups)"
kill -KILL "$(awk '$1=="containerd"{print $2}' "$base/b/nodes/n1/pids")"
"$here/down.sh" "$base/b" 2>/dev/null
check "stop after a killed containerd left no process, cgroup or mount" nothing_left "$base/b"
check "host sysctls still untouched" [ "$(sysctls)" = "$sysctls_before" ]
echo "$fails failed"
[ $fails = 0 ]
