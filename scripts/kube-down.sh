#!/usr/bin/env bash
# Stops the cluster scripts/kube-up.sh started in DIR and leaves nothing of it behind: its
# components stopped by the PIDs it recorded (the kubelet first), every container and pod
# sandbox removed from its containerd before that stops, its mounts and its containers'
# control groups gone. Its files stay in DIR (logs, the results volume) until DIR is removed.
#
#   scripts/kube-down.sh [DIR]
set -euo pipefail
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/loadlab/kube}"
if [ ! -d "$dir" ]; then
  echo "kube-down: no cluster in $dir" >&2
  exit 0
fi
dir="$(cd "$dir" && pwd)"
sock="$dir/containerd/containerd.sock"

# Stops the component named $1 by its recorded PID: SIGTERM, then SIGKILL after 10 s.
stop() {
  local pid
  pid="$(awk -v n="$1" '$2 == n { print $1 }' "$dir/pids" 2>/dev/null | tail -n 1)"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

for c in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do
  stop "$c"
done

# The pods' containers and sandboxes outlive the kubelet: containerd removes them.
if [ -S "$sock" ]; then
  ctr="ctr --address $sock -n k8s.io"
  for id in $($ctr tasks ls -q 2>/dev/null); do
    $ctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
  done
  for id in $($ctr containers ls -q 2>/dev/null); do
    for _ in $(seq 50); do
      $ctr tasks delete -f "$id" >/dev/null 2>&1 && break
      $ctr tasks ls -q 2>/dev/null | grep -qx "$id" || break
      sleep 0.1
    done
    $ctr containers delete "$id" >/dev/null 2>&1 || true
  done
fi
stop containerd

# Mounts under DIR (the pods' volumes, the containers' root filesystems), innermost first.
findmnt -rn -o TARGET | awk -v d="$dir/" 'index($0, d) == 1' | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
done
# The control groups containerd made for the pods (under k8s.io), once empty.
for hierarchy in /sys/fs/cgroup /sys/fs/cgroup/*; do
  [ -d "$hierarchy/k8s.io" ] || continue
  find "$hierarchy/k8s.io" -depth -type d -exec rmdir {} + 2>/dev/null || true
done
rm -f "$dir/pids"
echo "kube-down: the cluster in $dir is stopped" >&2
