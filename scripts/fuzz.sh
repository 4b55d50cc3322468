#!/usr/bin/env bash
# Runs one of loadlab's fuzz targets (fuzz/fuzz_targets/) for MINUTES with libFuzzer, through
# cargo-fuzz on a nightly compiler (both installed here when missing), its corpus first seeded
# from the repository's own files (fuzz/seeds.py):
#
#   bash scripts/fuzz.sh TARGET MINUTES
#
# MINUTES 0 runs the corpus once instead, each input under the 1 s bound: after a run on a busy
# machine with a longer bound (LOADLAB_FUZZ_TIMEOUT=10: libFuzzer's bound is wall time, so a
# target that waits for the CPU reads as a hang), this tells a real hang from a wait.
#
# Targets: http1_response scenario experiment locust_messages run_dir lab_dir.
# It stops at the first crash, panic, input that takes over 1 s, or allocation over 1 GiB, and
# leaves that input in fuzz/artifacts/TARGET/; replay it with
# `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/FILE`. CI does not run this: a fixed
# finding becomes a test in the fast tier instead.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: bash scripts/fuzz.sh TARGET MINUTES"
target=${1:?$usage}
minutes=${2:?$usage}
case "$minutes" in
  '' | *[!0-9]*) echo "error: MINUTES must be a whole number; $usage" >&2; exit 2 ;;
esac

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked --version 0.13.2
fi

timeout=${LOADLAB_FUZZ_TIMEOUT:-1}
corpus=fuzz/corpus/$target
python3 fuzz/seeds.py "$target" "$corpus"
if [ "$minutes" = 0 ]; then
  length=(-runs=0)
  timeout=1
else
  length=(-max_total_time=$((minutes * 60)))
fi
# Built with optimizations, debug assertions, overflow checks and AddressSanitizer (cargo-fuzz's
# default). -timeout: an input that takes over 1 s is a hang; -malloc_limit_mb: one allocation
# over 1 GiB is a finding; -rss_limit_mb: the process as a whole may use 2 GiB.
cargo +nightly fuzz run "$target" "$corpus" -- \
  "${length[@]}" -timeout="$timeout" -malloc_limit_mb=1024 -rss_limit_mb=2048 \
  -print_final_stats=1
