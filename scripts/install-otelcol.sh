#!/usr/bin/env bash
# Builds the OpenTelemetry Collector the export tests run (tools/otelcol: the OTLP receiver and
# the file exporter, collector modules pinned at v0.161.0 in its go.mod) once per machine, into
# loadlab's cache; prints the binary's path. Needs Go (1.26 or later, as tools/otelcol/go.mod says) and the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v0.161.0
dir="${XDG_CACHE_HOME:-$HOME/.cache}/loadlab/otelcol-$version"
bin="$dir/otelcol-loadlab"
# What the binary is built from, by content (a fresh checkout's files are all newer than the
# cache, so their times would rebuild it on every clone).
inputs="$(cat tools/otelcol/go.mod tools/otelcol/go.sum tools/otelcol/main.go | sha256sum)"
if [ ! -x "$bin" ] || [ "$(cat "$bin.inputs" 2>/dev/null)" != "$inputs" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "error: go is missing; the OTLP tests need it to build their collector: install Go 1.26 or later" >&2
    exit 1
  fi
  mkdir -p "$dir"
  echo "install-otelcol: building the OpenTelemetry Collector $version into $dir (once per machine)" >&2
  (cd tools/otelcol && go build -trimpath -mod=readonly -o "$bin.tmp" . && mv "$bin.tmp" "$bin")
  echo "$inputs" > "$bin.inputs"
fi
echo "$bin"
