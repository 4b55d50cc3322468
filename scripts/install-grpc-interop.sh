#!/usr/bin/env bash
# Builds gRPC's own interop test server once per machine into loadlab's cache, and prints the
# directory that holds it: `interop-server` is google.golang.org/grpc/interop/server itself;
# `interop-reflect` (tools/grpc-interop/main.go) serves the same TestService implementation on
# 127.0.0.1 with grpc-go's server reflection, and writes the service's descriptors with
# -protoset. grpc-go is pinned at v1.85.0 in tools/grpc-interop/go.mod, checked against its
# go.sum. The gRPC tests run them as servers nobody here wrote. Needs Go (1.26 or later) and the
# Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."

version=v1.85.0
dir="${XDG_CACHE_HOME:-$HOME/.cache}/loadlab/grpc-interop-$version"
# What the binaries are built from, by content (a fresh checkout's files are all newer than the
# cache, so their times would rebuild them on every clone).
inputs="$(cat tools/grpc-interop/go.mod tools/grpc-interop/go.sum tools/grpc-interop/main.go | sha256sum)"
if [ ! -x "$dir/interop-server" ] || [ ! -x "$dir/interop-reflect" ] \
  || [ "$(cat "$dir/inputs" 2>/dev/null)" != "$inputs" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "error: go is missing; the gRPC interop tests need it to build gRPC's interop server: install Go 1.26 or later" >&2
    exit 1
  fi
  mkdir -p "$dir"
  echo "install-grpc-interop: building grpc-go $version's interop server into $dir (once per machine)" >&2
  (
    cd tools/grpc-interop
    go build -trimpath -mod=readonly -o "$dir/interop-server.tmp" google.golang.org/grpc/interop/server
    go build -trimpath -mod=readonly -o "$dir/interop-reflect.tmp" .
    mv "$dir/interop-server.tmp" "$dir/interop-server"
    mv "$dir/interop-reflect.tmp" "$dir/interop-reflect"
  )
  echo "$inputs" > "$dir/inputs"
fi
echo "$dir"
