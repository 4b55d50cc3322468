#!/usr/bin/env bash
# Builds Jaeger v1.76.0's `jaeger` program with only what the trace test runs (the OTLP receiver,
# in-memory storage and the query API: tools/jaeger/components.go, put in place of the
# program's own list of components) once per machine, into loadlab's cache, from the module's
# source as the Go module proxy serves it; prints the binary's path. Built inside a copy of the
# module, not with `go install`, which refuses a module whose go.mod has replace directives.
# Needs Go 1.25 or later and the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v1.76.0
dir="${XDG_CACHE_HOME:-$HOME/.cache}/loadlab/jaeger-$version"
bin="$dir/jaeger-loadlab"
components="$PWD/tools/jaeger/components.go"
# What the binary is built from, by content (a fresh checkout's files are all newer than the
# cache, so their times would rebuild it on every clone).
inputs="$(sha256sum < "$components")"
if [ ! -x "$bin" ] || [ "$(cat "$bin.inputs" 2>/dev/null)" != "$inputs" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "error: go is missing; the trace tests need it to build Jaeger: install Go 1.25 or later" >&2
    exit 1
  fi
  mkdir -p "$dir"
  echo "install-jaeger: building Jaeger $version into $dir (once per machine)" >&2
  src="$(go mod download -json "github.com/jaegertracing/jaeger@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
  cp -r "$src/." "$work/" && chmod -R u+w "$work"
  cp "$components" "$work/cmd/jaeger/internal/components.go"
  (cd "$work" && go build -trimpath -o "$bin.tmp" ./cmd/jaeger && mv "$bin.tmp" "$bin")
  echo "$inputs" > "$bin.inputs"
fi
echo "$bin"
