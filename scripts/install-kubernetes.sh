#!/usr/bin/env bash
# Builds a single-node Kubernetes from upstream source once per machine, into loadlab's cache,
# and prints the directory that holds it: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, the kubelet and kubectl, at pinned versions, from the modules the Go module proxy
# serves. Installs the container runtime from Debian (containerd, runc, the CNI plugins) when
# run as root; says what to install otherwise. `scripts/kube-up.sh` starts the cluster.
#
# The k8s.io/kubernetes module's go.mod points its k8s.io/* dependencies into staging/, which
# the module's zip leaves out: they are pointed at the same code as published (k8s.io/api
# v0.37.2 and so on). etcd's server module points at its sibling modules by path likewise.
# The first build takes a few minutes of both cores (the API server is the biggest); later calls
# find the binaries and return at once.
# Needs Go 1.25 or later and the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."

kubernetes=v1.37.2
staging=v0.37.2
etcd=v3.6.16
dir="${XDG_CACHE_HOME:-$HOME/.cache}/loadlab/kubernetes-$kubernetes"
components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

# The container runtime, from Debian's packages.
runtime_packages=()
command -v containerd >/dev/null 2>&1 || runtime_packages+=(containerd)
command -v runc >/dev/null 2>&1 || runtime_packages+=(runc)
[ -x /usr/lib/cni/loopback ] || runtime_packages+=(containernetworking-plugins)
if [ "${#runtime_packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${runtime_packages[@]}" >&2
    # loadlab starts its own containerd (scripts/kube-up.sh), never the system's service.
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
      systemctl disable --now containerd >/dev/null 2>&1 || true
    fi
  else
    echo "error: the cluster needs ${runtime_packages[*]}: sudo apt-get install ${runtime_packages[*]}" >&2
    exit 1
  fi
fi

# Whether the binaries named are built, at these versions.
built() {
  [ "$(cat "$dir/bin/.versions" 2>/dev/null)" = "$kubernetes $etcd" ] || return 1
  for c in "$@"; do
    [ -x "$dir/bin/$c" ] || return 1
  done
}

if ! built "${components[@]}" etcd; then
  if ! command -v go >/dev/null 2>&1; then
    echo "error: go is missing; the cluster is built from source: install Go 1.25 or later" >&2
    exit 1
  fi
  [ "$(cat "$dir/bin/.versions" 2>/dev/null)" = "$kubernetes $etcd" ] || rm -rf "$dir/bin"
  mkdir -p "$dir/bin"
  echo "$kubernetes $etcd" > "$dir/bin/.versions"
  echo "install-kubernetes: building Kubernetes $kubernetes and etcd $etcd into $dir (once per machine)" >&2
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
  # A module's source as the proxy serves it, in a writable copy.
  fetch() {
    local src
    src="$(go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    mkdir -p "$3"
    cp -r "$src/." "$3/" && chmod -R u+w "$3"
  }
  # Replace directives that point into the module's own tree (`=> ./staging/src/k8s.io/api`,
  # `=> ../api`) point at the published module of version $2 instead.
  # (etcd's guards against its own root module, `=> ./FORBIDDEN_DEPENDENCY`, stay.)
  published() {
    sed -E -i "s#^([[:space:]]*(replace[[:space:]]+)?)([^[:space:]]+)([[:space:]]+v[^[:space:]]+)?[[:space:]]+=>[[:space:]]+(\.\./|\./staging/)[^[:space:]]+[[:space:]]*\$#\\1\\3 => \\3 $2#" "$1"
  }

  # What `kubectl version` and the kubelet report (the source zip has no git to read it from).
  pkg=k8s.io/component-base/version
  minor="${kubernetes#v1.}"
  minor="${minor%%.*}"
  ldflags="-s -w -X $pkg.gitVersion=$kubernetes -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$kubernetes"
  missing=()
  for c in "${components[@]}"; do
    [ -x "$dir/bin/$c" ] || missing+=("./cmd/$c")
  done
  # In the modules' trees: the published modules' sums are added from the proxy (the go.sum
  # shipped has none), and the workspace file the module ships is ignored.
  in_tree() {
    (cd "$1" && shift && GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 "$@")
  }
  # The go command fetches GOMAXPROCS modules at a time, two on two cores: the modules both
  # builds need (some hundreds) are fetched first, 32 at a time, for both at once. A fetch waits
  # on the network, not the CPU.
  pids=()
  if [ "${#missing[@]}" -gt 0 ]; then
    fetch k8s.io/kubernetes "$kubernetes" "$work/kubernetes"
    published "$work/kubernetes/go.mod" "$staging"
    in_tree "$work/kubernetes" env GONOSUMDB=k8s.io GOMAXPROCS=32 go list -deps "${missing[@]}" >/dev/null &
    pids+=($!)
  fi
  if ! built etcd; then
    fetch go.etcd.io/etcd/server/v3 "$etcd" "$work/etcd"
    published "$work/etcd/go.mod" "$etcd"
    in_tree "$work/etcd" env GONOSUMDB=go.etcd.io GOMAXPROCS=32 go list -deps . >/dev/null &
    pids+=($!)
  fi
  for pid in "${pids[@]}"; do
    wait "$pid"
  done
  # One build of every component missing, so the compiler's and the linker's work for them
  # share both cores throughout, then etcd.
  if [ "${#missing[@]}" -gt 0 ]; then
    mkdir -p "$work/bin"
    in_tree "$work/kubernetes" env GONOSUMDB=k8s.io \
      go build -trimpath -ldflags "$ldflags" -o "$work/bin/" "${missing[@]}"
    for m in "${missing[@]}"; do
      mv "$work/bin/${m#./cmd/}" "$dir/bin/${m#./cmd/}"
    done
  fi
  if ! built etcd; then
    in_tree "$work/etcd" env GONOSUMDB=go.etcd.io go build -trimpath -ldflags "-s -w" -o "$work/bin/etcd" .
    mv "$work/bin/etcd" "$dir/bin/etcd"
  fi
fi
echo "$dir"
