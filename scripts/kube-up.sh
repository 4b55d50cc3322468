#!/usr/bin/env bash
# Starts a single-node Kubernetes on loopback, for trying `loadlab k8s` without a cluster and for
# the system tier's tests: containerd, etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and a kubelet, each a process of its own started here and recorded by PID, all
# state in DIR (default: loadlab's cache). Prints the kubeconfig's path once the node is Ready.
# Stop it with `scripts/kube-down.sh DIR`.
#
#   scripts/kube-up.sh [DIR]
#
# The binaries come from scripts/install-kubernetes.sh (built once per machine). Needs root
# (containerd and the kubelet mount, make control groups and namespaces). Every address is
# 127.0.0.1; pods that send load run on the host's network and send it to 127.0.0.1 only. The
# node's pause image and loadlab's image are built here and imported: nothing is pulled.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/loadlab/kube}"

if [ "$(id -u)" != 0 ]; then
  echo "error: the cluster's containerd and kubelet need root: run scripts/kube-up.sh with sudo" >&2
  exit 1
fi
if [ -s "$dir/pids" ]; then
  echo "error: a cluster already runs in $dir (scripts/kube-down.sh $dir stops it)" >&2
  exit 1
fi
k8s="$(bash "$root/scripts/install-kubernetes.sh")"
bin="$k8s/bin"
mkdir -p "$dir"/{logs,pki,cni,containerd,kubelet,etcd,volumes}
dir="$(cd "$dir" && pwd)"
started=$SECONDS

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
etcd_port="$(free_port)"
peer_port="$(free_port)"
api_port="$(free_port)"
kubelet_port="$(free_port)"
healthz_port="$(free_port)"
scheduler_port="$(free_port)"
controllers_port="$(free_port)"

# Runs a component in the background, its output in logs/NAME.log, its PID in pids.
start() {
  local name="$1"
  shift
  setsid "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
  echo "$! $name" >>"$dir/pids"
}

# Waits up to $2 seconds for command $3… to succeed; on timeout, shows component $1's log.
wait_for() {
  local name="$1" limit="$2"
  shift 2
  local until=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$until" ]; then
      echo "error: $name did not come up within ${limit}s; the end of its log ($dir/logs/$name.log):" >&2
      tail -n 20 "$dir/logs/$name.log" >&2
      exit 1
    fi
    sleep 0.2
  done
}

# Keys and certificates: a CA for the API server's serving certificate, the service accounts'
# signing key, and an administrator's token (system:masters) every component uses.
pki="$dir/pki"
openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=loadlab-kube-ca" \
  -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
  -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n' \
  >"$pki/apiserver.ext"
openssl x509 -req -days 30 -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
  -CAcreateserial -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
token="$(openssl rand -hex 24)"
printf '%s,admin,admin,"system:masters"\n' "$token" >"$pki/tokens.csv"
chmod 600 "$pki"/*.key "$pki/tokens.csv"

cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: loadlab
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: loadlab
  context:
    cluster: loadlab
    user: admin
current-context: loadlab
EOF
chmod 600 "$dir/kubeconfig"

# containerd of its own (never the system's service), with the CRI plugin the kubelet talks to;
# its CNI configuration has the loopback plugin only: pods here run on the host's network.
cat >"$dir/cni/10-loopback.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "loadlab", "plugins": [{"type": "loopback"}]}
EOF
sock="$dir/containerd/containerd.sock"
# CAP_SYS_RESOURCE is bit 24 of the effective capabilities.
if (( (16#$(awk '/^CapEff/ { print $2 }' /proc/self/status) >> 24) & 1 )); then
  restrict_oom=false
else
  restrict_oom=true
fi
cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "loadlab.local/pause:1"
  # Kubernetes lowers its sandboxes' OOM score (-998), which needs CAP_SYS_RESOURCE; a root
  # without it (in a container, some VMs) gets containerd's own score instead.
  restrict_oom_score_adj = $restrict_oom
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
EOF
start containerd containerd --config "$dir/containerd/config.toml"
wait_for containerd 30 ctr --address "$sock" version

# The pod sandbox's image and loadlab's, built here and imported (nothing is pulled).
gcc -static -Os -o "$dir/pause" "$root/tools/kube/pause.c"
python3 "$root/scripts/oci-image.py" --name loadlab.local/pause:1 --out "$dir/pause.tar" \
  --add "$dir/pause:/pause" --entrypoint /pause >/dev/null
ctr --address "$sock" -n k8s.io images import "$dir/pause.tar" >/dev/null

start etcd "$bin/etcd" --name default --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "default=http://127.0.0.1:$peer_port" \
  --unsafe-no-fsync
wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_port/health"

# The API server advertises 127.0.0.1, which it refuses to put in the kubernetes Service's
# endpoints: nothing here reaches it that way (the pods use the host's network).
start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --endpoint-reconciler-type none \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
  --authorization-mode Node,RBAC \
  --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/24 \
  --kubelet-preferred-address-types InternalIP \
  --allow-privileged
wait_for kube-apiserver 90 curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" \
  "https://127.0.0.1:$api_port/readyz"

start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$dir/kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port "$controllers_port" \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --use-service-account-credentials=false
start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$dir/kubeconfig" \
  --leader-elect=false --bind-address 127.0.0.1 --secure-port "$scheduler_port"

# The kubelet: on 127.0.0.1, cgroupfs without per-QoS groups (cgroup v1 or v2: on v1 it must
# be told not to refuse it), no eviction for the disk a test machine has left.
cat >"$dir/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kubelet_port
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
readOnlyPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
resolvConf: /etc/resolv.conf
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
EOF
# The node is named by its address, 127.0.0.1: the kubelet refuses a loopback --node-ip, but
# takes an address given as the node's name for its InternalIP (where the API server reaches
# it for the pods' logs).
start kubelet "$bin/kubelet" --config "$dir/kubelet/config.yaml" --kubeconfig "$dir/kubeconfig" \
  --root-dir "$dir/kubelet/root" --hostname-override 127.0.0.1

kubectl_get() {
  curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" "https://127.0.0.1:$api_port$1"
}
node_ready() {
  kubectl_get /api/v1/nodes/127.0.0.1 | python3 -c '
import json, sys
node = json.load(sys.stdin)
ready = [c for c in node["status"].get("conditions", []) if c["type"] == "Ready"]
sys.exit(0 if ready and ready[0]["status"] == "True" else 1)'
}
wait_for kubelet 90 node_ready

# Volumes of the node's disk for the runs' results (ReadWriteMany: one node shares each),
# writable by the image's user (a hostPath volume takes no fsGroup). A run's claim binds one,
# which stays Released when the run's objects are deleted: the cluster has room for 20
# runs, and a new cluster for more.
kubectl_post() {
  curl -sf --cacert "$pki/ca.crt" -H "Authorization: Bearer $token" \
    -H "Content-Type: application/json" -X POST --data-binary @- "https://127.0.0.1:$api_port$1" >/dev/null
}
volumes=20
for i in $(seq -w 1 "$volumes"); do
  mkdir -p "$dir/volumes/$i"
  chmod 1777 "$dir/volumes/$i"
  kubectl_post /api/v1/persistentvolumes <<EOF
{"apiVersion": "v1", "kind": "PersistentVolume",
 "metadata": {"name": "loadlab-results-$i"},
 "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
          "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
          "hostPath": {"path": "$dir/volumes/$i", "type": "Directory"}}}
EOF
done

echo "kube-up: the node is Ready after $((SECONDS - started)) s; KUBECONFIG=$dir/kubeconfig" >&2
echo "$dir/kubeconfig"
