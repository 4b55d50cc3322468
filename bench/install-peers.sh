#!/usr/bin/env bash
# Installs nginx and the peer load generators the benchmark compares against, into
# bench/tools (ignored by git). Each step is skipped when the tool is already there.
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p tools/bin
export GOBIN="$PWD/tools/bin"

need() { ! command -v "$1" >/dev/null 2>&1 && [ ! -x "tools/bin/$1" ]; }

if need nginx || need wrk || need h2load || need tcpdump || [ ! -x /usr/bin/time ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light wrk time nghttp2-client tcpdump
fi
need vegeta && go install github.com/tsenart/vegeta/v12@v12.13.0
need k6 && go install go.k6.io/k6@latest
need hey && go install github.com/rakyll/hey@latest
# ghz: the peer of bench/grpc.py (gRPC unary calls), pinned.
need ghz && go install github.com/bojand/ghz/cmd/ghz@v0.121.0
need oha && cargo install --locked oha --version 1.16.0 --root "$PWD/tools"
[ -x tools/node/node_modules/.bin/autocannon ] || npm install --prefix "$PWD/tools/node" autocannon@8
# Artillery: the peer of bench/hooks.py and bench/artillery-diff.py, at the version the
# compatibility tables name. Its Playwright engine would download a browser at install;
# HTTP scripts need none. (Artillery 2.0.34 asks for Node.js 22.18; it runs on 20 with a
# warning.)
[ -x tools/node/node_modules/.bin/artillery ] ||
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$PWD/tools/node" artillery@2.0.34
# Locust: the peer of bench/locust.py and bench/locust-diff.py, pinned, in a virtualenv of
# its own (pip from the package registry) so it never meets loadlab's locust package.
[ -x tools/locust-venv/bin/locust ] ||
  { python3 -m venv tools/locust-venv && tools/locust-venv/bin/pip install -q locust==2.47.0; }
echo "peers: $(ls tools/bin | tr '\n' ' ') autocannon artillery locust"
