#!/usr/bin/env bash
# Runs every test of loadlab in two tiers, so it works on a fresh machine:
#  1. the fast tier (`cargo test --workspace`): unit tests and in-process tests, with only the
#     Rust toolchain, a C compiler and basic shell tools; no other program, no lab, no figure
#     of the machine's clock or CPU;
#  2. the system tier (the `system` test targets): real programs (installed here first, pinned),
#     labs and measurements, then the browser suite.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo is not installed; install Rust with rustup first" >&2
  exit 1
fi
for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
    rustup component add "$component"
  fi
done

# Each part's wall time, printed to stderr as it ends, so a slow part shows in CI's log.
start=$SECONDS
mark=$SECONDS
took() {
  echo "== $1: $((SECONDS - mark)) s (total $((SECONDS - start)) s)" >&2
  mark=$SECONDS
}

# The browser tests' virtualenv.
venv="${XDG_CACHE_HOME:-$HOME/.cache}/loadlab/browser-venv"

# The system tier's programs, installed (pinned, once per machine or checkout) while the Rust
# code is checked and built: the installs wait on the network and the disk, the compiler on the
# CPU. The programs' paths go to the file $1 as NAME=PATH lines.
install_system_tier() {
  # Installs Debian package $3 unless program $1 (or the file $2) is there; without root, says
  # what to run instead.
  need_program() {
    if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "$2" ]; then
      if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$3"
      else
        echo "error: $1 is missing; install it with: sudo apt-get install $3" >&2
        exit 1
      fi
    fi
  }

  # The topology tests run the real nginx (never the system service: loadlab starts its own).
  need_program nginx /usr/sbin/nginx nginx-light
  # The store tests run the real redis-server (loadlab starts its own on a free port).
  need_program redis-server /usr/bin/redis-server redis-server
  # The profile tests sample the service with perf (where the machine forbids it, they check
  # the one-line message instead).
  need_program perf /usr/bin/perf linux-perf
  # The export tests write to the real Prometheus (Debian's 2.42, its remote-write receiver on;
  # loadlab's tests start their own on a free port, never the system service).
  need_program prometheus /usr/bin/prometheus prometheus

  # py-spy samples Python services for --profile; the shard tests read HdrHistogram logs with
  # HdrHistogram's Python implementation and validate the Kubernetes objects `loadlab k8s job`
  # prints against Kubernetes' schemas (offline). Pinned, in a virtualenv of the tests' own.
  tools=target/tools-venv
  if [ ! -x "$tools/bin/py-spy" ] || [ ! -x "$tools/bin/kubernetes-validate" ] \
    || ! "$tools/bin/python" -c 'import hdrh' 2>/dev/null; then
    [ -x "$tools/bin/python" ] || python3 -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check \
      py-spy==0.4.1 hdrhistogram==0.10.8 kubernetes-validate==1.37.0
  fi

  # The browser tests open the HTML report and the live dashboard in Debian's Chromium, driven by
  # Playwright from a virtualenv of their own (no browser download), kept in loadlab's cache so a
  # fresh checkout does not install it again.
  if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
    else
      echo "error: chromium is missing; install it with: sudo apt-get install chromium" >&2
      exit 1
    fi
  fi
  if ! cmp -s tests/browser/requirements.txt "$venv/.loadlab-installed"; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r tests/browser/requirements.txt
    cp tests/browser/requirements.txt "$venv/.loadlab-installed"
  fi

  # The conformance suite serves the reference service on Node and Python too: their pinned
  # dependencies go into targets/ (node_modules, a venv), never anywhere global.
  bash scripts/install-runtimes.sh
  # The OTLP export tests send to a real OpenTelemetry Collector, built once per machine.
  loadlab_otelcol="$(bash scripts/install-otelcol.sh)"
  printf 'LOADLAB_OTELCOL=%q\n' "$loadlab_otelcol" >>"$1"
  # The trace test finds a request's spans in a real Jaeger, built once per machine.
  loadlab_jaeger="$(bash scripts/install-jaeger.sh)"
  printf 'LOADLAB_JAEGER=%q\n' "$loadlab_jaeger" >>"$1"
  # The gRPC tests call gRPC's own interop server (grpc-go's), built once per machine.
  loadlab_grpc_interop="$(bash scripts/install-grpc-interop.sh)"
  printf 'LOADLAB_GRPC_INTEROP=%q\n' "$loadlab_grpc_interop" >>"$1"
  # The Kubernetes test starts a single-node cluster (scripts/kube-up.sh) of components built
  # here from upstream source once per machine, on Debian's containerd.
  bash scripts/install-kubernetes.sh >/dev/null
}

installs_log="$(mktemp)"
installs_env="$(mktemp)"
install_system_tier "$installs_env" >"$installs_log" 2>&1 &
installs=$!
# Should a check fail first, the installs still finish (an apt or pip stopped midway would leave
# a broken install behind) before the script exits.
trap 'wait "$installs" 2>/dev/null; rm -f "$installs_log" "$installs_env"' EXIT

# Formatting.
cargo fmt --all -- --check
took "formatting"

# The fast tier, built first; its tests then run while clippy lints the code, the system
# tier's targets included (`--all-targets` leaves out the targets `cargo test` does not run
# by default), in a target directory of its own so neither waits for the other's lock: the
# tests mostly wait on the time their services wait, clippy on the CPU.
cargo test --workspace --locked --no-run
mkdir -p target
took "fast tier's build"
(
  export CARGO_TARGET_DIR=target/clippy
  cargo clippy --workspace --all-targets --locked -- -D warnings
  cargo clippy --workspace --test system --locked -- -D warnings
) >target/clippy.log 2>&1 &
lints=$!
if ! cargo test --workspace --locked; then
  wait "$lints" || cat target/clippy.log >&2
  exit 1
fi
took "fast tier (cargo test --workspace)"
if ! wait "$lints"; then
  cat target/clippy.log >&2
  echo "error: clippy found problems (above)" >&2
  exit 1
fi
took "lints (clippy, beside the fast tier's tests)"

# The scripts' own checks: the module graph has no cycle, and the seeds' rules (bench/seeds.py)
# can say no, either way.
python3 -B -m unittest -q scripts/test_module_cycles.py
python3 scripts/module-cycles.py
python3 -B -m unittest -q bench/test_seeds.py
# The declared rust-version holds: no resolved dependency asks for a newer Rust (clippy above
# checks our own use of the standard library against it).
python3 -B -m unittest -q scripts/test_check_msrv.py
python3 scripts/check-msrv.py
took "the scripts' checks"

# The system tier: its programs installed.
if ! wait "$installs"; then
  cat "$installs_log" >&2
  echo "error: installing the system tier's programs failed (its output is above)" >&2
  exit 1
fi
cat "$installs_log" >&2
set -a
# shellcheck disable=SC1090
. "$installs_env"
set +a
rm -f "$installs_log" "$installs_env"
took "the system tier's programs installed (the wait after the fast tier)"

# loadlab's system tests take their claims on the machine (crates/cli/tests/support: alone,
# quiet or shared), so that harness runs them all at once, a thread each, and the claims run
# the tests alone first, then the quiet ones, then the shared ones (libtest prints "has been
# running for over 60 seconds" for tests still waiting for their claim); the locust package's
# unit tests run among them (python_suites.rs). The other crates' system tests run as libtest
# runs them, and the browser tests last, alone.
cargo test -p loadlab --locked --test system -- --test-threads=256
cargo test --workspace --exclude loadlab --locked --test system
took "system tier (cargo test --test system)"
LOADLAB_BIN=target/debug/loadlab CHROMIUM="$(command -v chromium)" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/browser
took "browser tests"
