#!/usr/bin/env bash
# down.sh: tear down the cluster up.sh brought up and leave the machine
# clean: every pod's containers and sandbox (through the kubelet, so that
# CNI releases its addresses), then the node, the control plane and etcd,
# the processes up.sh started (by the PIDs it recorded), the iptables
# chains the kubelet and kube-proxy added, the bridge, mounts, empty
# kubepods cgroups and the state folders. Safe to run twice, or after a
# failed up.sh.
set -uo pipefail
export PATH=/usr/sbin:/sbin:$PATH
D=${BATCHTUNE_K8S_DIR:-/var/lib/batchtune-k8s}
RUN=${BATCHTUNE_K8S_RUN:-/run/batchtune-k8s}
NET=batchtune-k8s
BRIDGE=btk8s0
t0=$(date +%s)
say() { echo "down.sh [$(( $(date +%s) - t0 ))s]: $*" >&2; }

[ -d "$D" ] || [ -d "$RUN" ] || { say "nothing to tear down ($D absent)"; exit 0; }
sock=$RUN/containerd.sock
bin=$(sed -n 's/^BATCHTUNE_K8S_BIN=//p' "$D/env" 2>/dev/null)
kc=$D/admin.kubeconfig

pidof_() { local f=$D/pids/$1.pid; [ -s "$f" ] && cat "$f"; }
alive() { local p; p=$(pidof_ "$1") && kill -0 "$p" 2>/dev/null; }
# stop NAME GRACE: SIGTERM, SIGKILL after GRACE seconds.
stop() {
  local name=$1 grace=$2 p
  p=$(pidof_ "$name") || return 0
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 1 $(( grace * 5 ))); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null; say "$name killed after ${grace}s"; fi
    for _ in $(seq 1 25); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$D/pids/$name.pid"
}
ctr() { command ctr -a "$sock" -n k8s.io "$@"; }
tasks() { ctr tasks ls -q 2>/dev/null; }

# 1. No new pods, then every pod deleted through the kubelet.
stop kube-controller-manager 10
stop kube-scheduler 10
if [ -n "$bin" ] && alive kube-apiserver && alive kubelet; then
  "$bin/kubectl" --kubeconfig="$kc" delete pods --all -A --grace-period=0 --force --wait=false >/dev/null 2>&1
  for _ in $(seq 1 120); do [ -z "$(tasks)" ] && break; sleep 0.5; done
  [ -z "$(tasks)" ] && say "pods gone" || say "tasks left after 60s: $(tasks | wc -l)"
fi
stop kubelet 15
stop kube-proxy 10
[ -n "$bin" ] && "$bin/kube-proxy" --cleanup >/dev/null 2>&1

# 2. Anything the kubelet did not stop: kill its tasks; release the pods'
# network namespaces (a sandbox's netns is gone once unmounted and empty).
if alive containerd; then
  for t in $(tasks); do ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
  sleep 1
  for t in $(tasks); do ctr tasks delete -f "$t" >/dev/null 2>&1; done
  for c in $(ctr containers ls -q 2>/dev/null); do
    ns=$(ctr containers info "$c" 2>/dev/null | sed -n 's|.*"path": "\(/var/run/netns/cni-[^"]*\)".*|\1|p;s|.*"path": "\(/run/netns/cni-[^"]*\)".*|\1|p' | head -1)
    [ -n "$ns" ] && { umount "$ns" 2>/dev/null; rm -f "$ns"; }
    ctr containers rm "$c" >/dev/null 2>&1
  done
fi
stop containerd 15
# The runc shims outlive containerd; those of this cluster name its socket.
for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done

# 3. Control plane: the apiserver before etcd (the other way round it
# hangs retrying etcd).
stop kube-apiserver 30
stop etcd 15
for n in $(ls "$D/pids" 2>/dev/null); do stop "${n%.pid}" 5; done

# 4. iptables: the chains named KUBE-* in every table (kubelet: KUBE-FIREWALL,
# which drops non-loopback traffic to 127/8, KUBE-KUBELET-CANARY,
# KUBE-IPTABLES-HINT; kube-proxy's if --cleanup missed any), and the jumps to
# them; CNI's hostport chains when no other CNI user holds them.
for ipt in iptables ip6tables; do
  command -v $ipt >/dev/null || continue
  for table in filter nat mangle raw; do
    $ipt -t $table -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j KUBE-' | grep -vE '^-A KUBE-' | sed 's/^-A/-D/' |
      while read -r rule; do eval "$ipt -t $table $rule" 2>/dev/null; done
    for chain in $($ipt -t $table -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
      $ipt -t $table -F "$chain" 2>/dev/null
    done
    for chain in $($ipt -t $table -S 2>/dev/null | sed -n 's/^-N \(KUBE-[^ ]*\)$/\1/p'); do
      $ipt -t $table -X "$chain" 2>/dev/null
    done
  done
done

# 5. Network, mounts, cgroups, files.
ip link del "$BRIDGE" 2>/dev/null
rm -rf "/var/lib/cni/networks/$NET" "/var/lib/cni/results/$NET"-* 2>/dev/null
for m in $(findmnt -rn -o TARGET | grep -E "^($D|$RUN)(/|$)" | sort -r); do umount "$m" 2>/dev/null || umount -l "$m"; done
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$d" ] || continue
  find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
done
for l in /var/log/containers/*; do
  [ -L "$l" ] && case "$(readlink "$l")" in "$D"/*) rm -f "$l";; esac
done
rm -rf "$D" "$RUN"
say "done"
