#!/usr/bin/env bash
# The codec benchmark's workloads in wasm in headless Chromium beside the native figures
# (blerpc-bench codec, with the reference Python library), in one interleaved run.
#
#   bash tools/web/codec.sh [--reps 5] [--samples 10] [--sample-ms 20] [--json FILE]
#
# Builds web/pkg-bench and a release blerpc-bench (the workspace's fat-LTO release profile:
# several minutes the first time). The Python reference runs from $BLERPC_VENV (else .venv;
# tools/venv.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
target_dir=${CARGO_TARGET_DIR:-$root/target}
fail() { printf '\n!!! error: web codec: %s\n' "$*" >&2; exit 1; }
printf '==> web codec: package with the codec workloads\n'
bash tools/web/build.sh --codec-bench || fail "tools/web/build.sh --codec-bench"
printf '==> web codec: cargo build --release -p blerpc-bench\n'
cargo build --release --locked -j 2 -p blerpc-bench --target-dir "$target_dir" || fail "cargo build --release -p blerpc-bench"
if [ -z "${BLERPC_VENV:-}" ] && [ ! -x .venv/bin/python ]; then
  BLERPC_VENV="$(bash tools/venv.sh)" || fail "tools/venv.sh (the reference Python library)"
  export BLERPC_VENV
fi
BLERPC_BENCH_BIN="$target_dir/release/blerpc-bench" node web/bench/codec.mjs "$@"
