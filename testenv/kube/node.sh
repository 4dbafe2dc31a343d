#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# One converged node of the test environment: a containerd and a kubelet (SB_KUBE_VERSION) beside the
# environment's slurmd, isolated from the other nodes and from the host:
#   - its own mount and UTS namespace (hostname = the node's Kubernetes name). Every mount of the
#     node (the kubelet's, containerd's, the containers' rootfs) lives only there and goes away
#     with its last process. Inside it, private copies of the paths the kubelet and containerd
#     hardcode whatever their flags say: /run/containerd, /var/lib/kubelet (device-plugin
#     socket), /var/log/pods and /var/log/containers, /etc/hosts (the kubelet resolves its own
#     name on every status update: answered from the file, no DNS packet), and the four
#     /proc/sys files the kubelet would otherwise rewrite host-wide at start;
#   - its own containerd (one per node: a kubelet kills every pod sandbox in its containerd that
#     it does not know, so two kubelets on one containerd kill each other's pods): containerd 1.7
#     from the cache (ensure_containerd in lib.sh; up.sh fetches it) with CDI on, its spec
#     directory RUN_DIR/nodes/NAME/cdi; the machine's containerd (1.6, no CDI) when the cache has
#     none;
#   - with SB_DRA_DRIVER_BINARY set (the ctest fixture testenv-kubelets sets it), the test DRA
#     driver (testing/dra-driver: gpu.example.com with the node's GPUS fake GPUs, dra.cpu with
#     SB_DRA_CPUS CPUs, default 8), which registers with the kubelet, publishes the node's
#     ResourceSlices and writes CDI specs into the node's CDI directory. Its log:
#     RUN_DIR/nodes/NAME/log/dra-driver.log. Stopped (SIGTERM: it deletes its slices) first on
#     `down`;
#   - its own cgroup subtree CGROUP (in every cgroup v1 hierarchy): CGROUP/daemons holds
#     containerd, the shims and the kubelet, the kubelet puts the pods under CGROUP/kubepods.
#     Stopping the node kills everything in the subtree;
#   - loopback only: every listener on 127.0.0.1 with a free port, pods get a network namespace
#     with only `lo` (CNI plugin kube/cni/lo-eth0), and the kubelet's EC2 metadata probe is off.
# The node's files are in RUN_DIR/nodes/NAME; up.sh writes NAME's kubeconfig (a system:node
# token) to RUN_DIR/kube/kubeconfig.NAME first. Inside the node's namespace that directory is
# also bound at NODE_DIR (/run/sb-node), and every Unix socket of the node (containerd's, the
# kubelet's plugin registry and DRA sockets under its --root-dir) is made through that short
# path: a socket path has at most 107 characters, and RUN_DIR lies wherever the checkout does.
# From outside the namespace the same sockets are at RUN_DIR/nodes/NAME/... (ctr -a).
#
# Usage: node.sh up RUN_DIR NAME [SLURM_NAME [GPUS]]  start (stopping a stale node of that name
#                                                    first); returns before the node is Ready
#        node.sh ready RUN_DIR NAME        wait until the kubelet started last is Ready, then
#                                          set the Node's nvidia.com/gpu capacity to GPUS
#        node.sh down RUN_DIR NAME         stop; leaves no process, mount or cgroup
#        node.sh stop-kubelet RUN_DIR NAME   stop only the kubelet (containerd, pods stay)
#        node.sh start-kubelet RUN_DIR NAME  start the kubelet again (same directories), then
#                                            `ready`
#        node.sh inner RUN_DIR NAME        (internal: runs in the node's namespaces)
# SLURM_NAME, when it differs from NAME, becomes the label slinky.slurm.net/slurm-nodename.
# GPUS (default 0) is the node's GPU count in Slurm. A kubelet has no device plugin here, and a
# kubelet that registers again sets every extended resource it does not serve to 0, so `ready`
# patches the capacity in after every kubelet start.
# Environment: SB_KUBELET_STATUS_FREQ (default 2s), SB_KUBELET_EXTRA_ARGS (extra kubelet flags).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"
need_root

cmd=${1:-}
run_dir=${2:-}
name=${3:-}
[ -n "$cmd" ] && [ -n "$run_dir" ] && [ -n "$name" ] || die "usage: node.sh up|ready|down|stop-kubelet|start-kubelet RUN_DIR NAME"
run_dir=$(cd "$run_dir" && pwd -P)
N="$run_dir/nodes/$name"
# The node's directory as its own processes see it (bound in `inner`): the short path of its
# sockets.
NODE_DIR=/run/sb-node
K="$run_dir/kube"
B="$SB_KUBE_DIR/bin"
# Unique per environment and node: several environments run side by side.
cgroup="sb-$(printf '%s' "$run_dir" | sha256sum | cut -c1-10)-$name"

# The cgroup v1 hierarchies (not the cgroup2 `unified` mount of hybrid mode), each once.
hierarchies() {
  local h
  for h in /sys/fs/cgroup/*; do
    [ -d "$h" ] && [ ! -L "$h" ] && [ "$(stat -fc %T "$h/")" = cgroupfs ] && echo "$h"
  done
  return 0
}

# Moves process $1 into the node's daemons cgroup in every hierarchy.
join_cgroup() {
  local h
  for h in $(hierarchies); do echo "$1" >"$h/$cgroup/daemons/cgroup.procs"; done
}

# Every process of the node: in its cgroup subtree, plus its unshare process while it is one.
node_pids() {
  {
    local h u
    for h in /sys/fs/cgroup/*/; do
      [ -d "$h$cgroup" ] && find "$h$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null
    done
    u=$(cat "$N/unshare.pid" 2>/dev/null || true)
    [ -n "$u" ] && [ "$(cat "/proc/$u/comm" 2>/dev/null)" = unshare ] && echo "$u"
    true
  } | sort -un
}

# The DRA driver's name in the pids file and in /proc/PID/comm (15 characters).
DRA_DRIVER=sb-test-dra-driver

# The recorded pid of daemon $1 (containerd, kubelet or $DRA_DRIVER) while it still runs that
# program.
daemon_pid() {
  local p
  p=$(awk -v d="$1" '$1 == d { print $2 }' "$N/pids" 2>/dev/null | tail -n1)
  # (a zombie is gone: its parent may be an init that reaps late)
  [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "${1:0:15}" ] &&
    [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && echo "$p"
  return 0
}

node_down() {
  local p round h i
  set +e # best effort throughout: a step that fails must not skip the next
  # The DRA driver first, while the apiserver runs: on TERM it deletes its ResourceSlices.
  p=$(daemon_pid $DRA_DRIVER)
  if [ -n "$p" ]; then
    kill -TERM "$p" 2>/dev/null
    for i in $(seq 50); do [ -n "$(daemon_pid $DRA_DRIVER)" ] || break; sleep 0.1; done
  fi
  # Politely first: the kubelet and containerd get TERM (running pods are killed below).
  for d in kubelet containerd; do
    p=$(daemon_pid $d)
    [ -n "$p" ] && kill -TERM "$p" 2>/dev/null
  done
  for i in $(seq 20); do [ -z "$(node_pids)" ] && break; sleep 0.1; done
  # Then everything in the subtree: frozen, so that nothing forks or restarts between the listing
  # and the kill, killed, thawed (frozen tasks die on thaw). Until nothing is left.
  local freezer="/sys/fs/cgroup/freezer/$cgroup"
  for round in $(seq 100); do
    p=$(node_pids)
    [ -n "$p" ] || break
    [ -d "$freezer" ] && echo FROZEN >"$freezer/freezer.state" 2>/dev/null
    kill -KILL $p 2>/dev/null
    [ -d "$freezer" ] && echo THAWED >"$freezer/freezer.state" 2>/dev/null
    sleep 0.05
  done
  [ -z "$(node_pids)" ] || log "warning: node $name: processes left: $(node_pids | tr '\n' ' ')"
  # The subtree, depth first, in every hierarchy (runc also creates directories in `unified`).
  for h in /sys/fs/cgroup/*/; do
    [ -d "$h$cgroup" ] || continue
    for i in $(seq 50); do
      find "$h$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
      [ -d "$h$cgroup" ] || break
      sleep 0.1
    done
    [ ! -d "$h$cgroup" ] || log "warning: node $name: cgroup $h$cgroup not removed"
  done
  rm -f "$N/pids" "$N/unshare.pid"
  set -e
}

write_config() {
  local slurm_name=$1
  mkdir -p "$N"/{log,cni,cdi,kubelet,var-lib-kubelet,var-log-pods,var-log-containers,volume-plugins,sysctl,opt} \
    "$N/containerd"/{root,state}
  # containerd 1.7 from the cache, with CDI (the DRA driver's specs); else the machine's.
  local cdi=""
  if [ -f "$SB_CONTAINERD_DIR/$SB_CONTAINERD_STAMP" ]; then
    echo "$SB_CONTAINERD_DIR/bin" >"$N/containerd.bin"
    cdi="enable_cdi = true
  cdi_spec_dirs = [\"$N/cdi\"]"
  else
    dirname "$(command -v containerd)" >"$N/containerd.bin"
  fi
  cat >"$N/containerd.toml" <<CONF
version = 2
root = "$N/containerd/root"
state = "$N/containerd/state"
[grpc]
  address = "$NODE_DIR/containerd/containerd.sock"
[ttrpc]
  address = "$NODE_DIR/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$N/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:3.4"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  # Without CAP_SYS_RESOURCE (containers, some VMs) runc cannot lower oom_score_adj to the
  # sandbox's -998 and every sandbox fails ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  $cdi
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$N/cni-bin"
    conf_dir = "$N/cni"
CONF
  # The CRI always sets up `lo` itself with the `loopback` plugin from bin_dir, then the
  # configured network.
  mkdir -p "$N/cni-bin"
  ln -s /usr/lib/cni/loopback "$N/cni-bin/loopback"
  ln -s "$here/kube/cni/lo-eth0" "$N/cni-bin/lo-eth0"
  echo '{"cniVersion": "0.4.0", "name": "loopback-only", "plugins": [{"type": "lo-eth0"}]}' \
    >"$N/cni/10-loopback-only.conflist"
  # The values the kubelet wants; shadowing them keeps the host's own.
  echo 1 >"$N/sysctl/vm.overcommit_memory"
  echo 0 >"$N/sysctl/vm.panic_on_oom"
  echo 10 >"$N/sysctl/kernel.panic"
  echo 1 >"$N/sysctl/kernel.panic_on_oops"
  local port healthz labels=""
  port=$(free_port)
  healthz=$(free_port)
  [ -n "$slurm_name" ] && [ "$slurm_name" != "$name" ] && labels="--node-labels=slinky.slurm.net/slurm-nodename=$slurm_name"
  echo "$port" >"$N/kubelet.port"
  # One flag a line; the kubelet still takes these as flags (a config file would not save anything
  # here). The sandbox image is containerd's sandbox_image. --fail-cgroupv1=false: since 1.35 the
  # kubelet refuses a cgroup v1 host without it (1.34 defaults to false).
  # The node's status is posted at every update (as 1.20 did when the update frequency was set):
  # without it a kubelet posts an unchanged status only every 5 minutes, and a restarted kubelet's
  # Ready heartbeat would not be seen newer than its start (node_ready).
  cat >"$N/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
nodeStatusReportFrequency: ${SB_KUBELET_STATUS_FREQ:-2s}
YAML
  cat >"$N/kubelet.args" <<ARGS
--config=$N/kubelet.yaml
--kubeconfig=$K/kubeconfig.$name
--hostname-override=$name
$labels
--container-runtime-endpoint=unix://$NODE_DIR/containerd/containerd.sock
--fail-cgroupv1=false
--root-dir=$NODE_DIR/kubelet
--volume-plugin-dir=$N/volume-plugins
--cgroup-driver=cgroupfs
--cgroup-root=/$cgroup
--cgroups-per-qos=true
--enforce-node-allocatable=pods
--fail-swap-on=false
--address=127.0.0.1
--port=$port
--read-only-port=0
--healthz-bind-address=127.0.0.1
--healthz-port=$healthz
--anonymous-auth=true
--authorization-mode=AlwaysAllow
--serialize-image-pulls=false
--image-gc-high-threshold=100
--image-gc-low-threshold=99
--node-status-update-frequency=${SB_KUBELET_STATUS_FREQ:-2s}
--v=2
ARGS
  for a in ${SB_KUBELET_EXTRA_ARGS:-}; do echo "$a" >>"$N/kubelet.args"; done
}

# Waits until the Node has a Ready heartbeat from the kubelet started last, then patches its
# nvidia.com/gpu capacity and waits for the kubelet to report the same allocatable.
node_ready() {
  local url ca token started gpus node t0=$SECONDS
  url=$(sed -n 's/^KUBE_APISERVER_URL=//p' "$run_dir/env")
  ca="$K/certs/apiserver.crt"
  token=$(cat "$K/token")
  gpus=$(cat "$N/gpus" 2>/dev/null || echo 0)
  api() { curl -sf --cacert "$ca" -H "Authorization: Bearer $token" "$@"; }
  local deadline=$((SECONDS + ${SB_NODE_READY_TIMEOUT:-180}))
  # containerd first (and the images imported), then the kubelet is started.
  until grep -q '^kubelet ' "$N/pids" 2>/dev/null; do
    [ -n "$(node_pids)" ] || die "node $name exited before its kubelet started (log: $N/log/node.log)"
    [ $SECONDS -lt $deadline ] || die "node $name: no kubelet started after ${SB_NODE_READY_TIMEOUT:-180} s (log: $N/log/node.log)"
    sleep 0.1
  done
  started=$(cat "$N/kubelet.started")
  while :; do
    [ -n "$(daemon_pid kubelet)" ] || die "the kubelet of $name exited (log: $N/log/kubelet.log)"
    node=$(api "$url/api/v1/nodes/$name" 2>/dev/null || true)
    [ -n "$node" ] && jq -e --arg t "$started" '.status.conditions[]? |
      select(.type == "Ready" and .status == "True" and .lastHeartbeatTime > $t)' <<<"$node" >/dev/null && break
    [ $SECONDS -lt $deadline ] || die "node $name not Ready after ${SB_NODE_READY_TIMEOUT:-180} s (log: $N/log/kubelet.log)"
    sleep 0.2
  done
  api -X PATCH -H 'Content-Type: application/json-patch+json' "$url/api/v1/nodes/$name/status" \
    -d "[{\"op\": \"add\", \"path\": \"/status/capacity/nvidia.com~1gpu\", \"value\": \"$gpus\"}]" >/dev/null ||
    die "patching the GPU capacity of $name failed"
  until api "$url/api/v1/nodes/$name" | jq -e --arg g "$gpus" '.status.allocatable["nvidia.com/gpu"] == $g' >/dev/null; do
    [ $SECONDS -lt $deadline ] || die "node $name: allocatable nvidia.com/gpu not $gpus after ${SB_NODE_READY_TIMEOUT:-180} s"
    sleep 0.2
  done
  log "node $name Ready with $gpus GPUs ($((SECONDS - t0)) s)"
}

# Starts the kubelet in the background from the node's namespaces (the caller is in them).
start_kubelet_here() {
  local args=() a
  while IFS= read -r a; do [ -n "$a" ] && args+=("$a"); done <"$N/kubelet.args"
  date -u +%FT%TZ >"$N/kubelet.started"
  # The kubelet's built-in ECR credential provider would probe the EC2 metadata address.
  AWS_EC2_METADATA_DISABLED=true setsid "$B/kubelet" "${args[@]}" >>"$N/log/kubelet.log" 2>&1 </dev/null &
  local p=$! i
  echo "kubelet $p" >>"$N/pids"
  # Until the child has exec'd the kubelet: before that its comm is the shell's or setsid's, and
  # daemon_pid (which checks the comm against pid reuse) took it for a kubelet that had exited
  # (KubeletE2e.StoppedKubeletReleasesTheJobOnlyAfterTheGracePeriod failed so on a loaded CI).
  for ((i = 0; i < 100; i++)); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = kubelet ] && return 0
    kill -0 "$p" 2>/dev/null || return 0 # it died: node_ready says so with the log
    sleep 0.05
  done
}

case "$cmd" in
  up)
    slurm_name=${4:-}
    [ -x "$B/kubelet" ] || die "no kubelet at $B: run testenv/kube/build.sh"
    [ -f "$SB_IMAGES_DIR/$SB_IMAGES_STAMP" ] || die "no images at $SB_IMAGES_DIR: run testenv/kube/build-images.sh"
    [ -f "$K/kubeconfig.$name" ] || die "no $K/kubeconfig.$name"
    { [ -f "$SB_CONTAINERD_DIR/$SB_CONTAINERD_STAMP" ] || command -v containerd >/dev/null; } &&
      command -v runc >/dev/null && [ -x /usr/lib/cni/loopback ] ||
      die "containerd, runc or the CNI plugins missing: run scripts/install-deps.sh"
    [ -z "${SB_DRA_DRIVER_BINARY:-}" ] || [ -x "$SB_DRA_DRIVER_BINARY" ] ||
      die "SB_DRA_DRIVER_BINARY=$SB_DRA_DRIVER_BINARY: no such executable"
    node_down
    rm -rf "$N"
    write_config "$slurm_name"
    echo "${5:-0}" >"$N/gpus"
    for h in $(hierarchies); do
      mkdir -p "$h/$cgroup/daemons"
      if [ -f "$h/cpuset.cpus" ]; then # a new cpuset cgroup starts empty
        for d in "$h/$cgroup" "$h/$cgroup/daemons"; do
          cat "$h/cpuset.cpus" >"$d/cpuset.cpus"
          cat "$h/cpuset.mems" >"$d/cpuset.mems"
        done
      fi
    done
    # Mount points only: the node's mounts over them are private to its namespace.
    mkdir -p /run/containerd /var/lib/kubelet /var/log/pods /var/log/containers "$NODE_DIR"
    setsid unshare --mount --uts --propagation private --fork -- "$here/kube/node.sh" inner "$run_dir" "$name" \
      >"$N/log/node.log" 2>&1 </dev/null &
    echo $! >"$N/unshare.pid"
    ;;
  inner)
    join_cgroup $$
    hostname "$name"
    mount -t tmpfs -o mode=711 tmpfs /run/containerd
    mount --bind "$N" "$NODE_DIR"
    mount --bind "$N/var-lib-kubelet" /var/lib/kubelet
    mount --bind "$N/var-log-pods" /var/log/pods
    mount --bind "$N/var-log-containers" /var/log/containers
    printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$name" >"$N/hosts"
    mount --bind "$N/hosts" /etc/hosts
    for f in "$N"/sysctl/*; do
      k=$(basename "$f")
      mount --bind "$f" "/proc/sys/${k//.//}"
    done
    # The chosen containerd, its shim (looked up on PATH) and ctr come first.
    PATH="$(cat "$N/containerd.bin"):$PATH"
    containerd --config "$N/containerd.toml" >"$N/log/containerd.log" 2>&1 </dev/null &
    containerd_pid=$!
    echo "containerd $containerd_pid" >>"$N/pids"
    sock="$NODE_DIR/containerd/containerd.sock"
    wait_for 60 ctr -a "$sock" version || die "containerd of $name not up (log: $N/log/containerd.log)"
    while read -r archive repo; do
      ctr -a "$sock" -n k8s.io images import --base-name "$repo" "$SB_IMAGES_DIR/$archive" >/dev/null ||
        die "importing $archive into $name failed"
    done <"$SB_IMAGES_DIR/images"
    echo ready >"$N/containerd.ready"
    start_kubelet_here
    # After the kubelet, which deletes its node's ResourceSlices when it starts (the driver
    # publishes them again anyway).
    if [ -n "${SB_DRA_DRIVER_BINARY:-}" ]; then
      setsid "$SB_DRA_DRIVER_BINARY" serve --node-name "$name" --kubeconfig "$K/kubeconfig" \
        --kubelet-root-dir "$NODE_DIR/kubelet" --cdi-dir "$N/cdi" --gpus "$(cat "$N/gpus")" \
        --cpus "${SB_DRA_CPUS:-8}" >>"$N/log/dra-driver.log" 2>&1 </dev/null &
      echo "$DRA_DRIVER $!" >>"$N/pids"
    fi
    # Stays while containerd runs, so that the namespace has a process that is not a daemon.
    wait "$containerd_pid" || true
    log "containerd of $name exited"
    ;;
  ready)
    node_ready
    ;;
  down)
    node_down
    ;;
  stop-kubelet)
    p=$(daemon_pid kubelet)
    if [ -n "$p" ]; then
      kill -TERM "$p"
      wait_for 30 sh -c "[ \"\$(awk '{print \$3}' /proc/$p/stat 2>/dev/null)\" = Z ] || ! kill -0 $p" ||
        kill -KILL "$p" 2>/dev/null || true
    fi
    ;;
  start-kubelet)
    [ -z "$(daemon_pid kubelet)" ] || die "the kubelet of $name runs already"
    c=$(daemon_pid containerd)
    [ -n "$c" ] || die "containerd of $name is not running: use node.sh up"
    # Into containerd's namespaces and cgroup, then the same start as at node start.
    join_cgroup $$
    nsenter -t "$c" -m -u -- "$here/kube/node.sh" start-kubelet-inner "$run_dir" "$name"
    # This shell leaves the node's cgroup, so that `down` does not count it.
    for h in $(hierarchies); do echo $$ >"$h/cgroup.procs"; done
    node_ready
    ;;
  start-kubelet-inner)
    start_kubelet_here
    ;;
  *) die "unknown command: $cmd" ;;
esac
