#!/usr/bin/env bash
# Builds blerpc-proto without default features, then the no_std staticlib, links it into a C
# program with gcc and runs it.
set -euo pipefail
cd "$(dirname "$0")"
cargo build --locked -p blerpc-proto --no-default-features --manifest-path ../Cargo.toml
cargo build --release --locked
target_dir="${CARGO_TARGET_DIR:-target}"
gcc -O2 -o "$target_dir/nostd-check" main.c "$target_dir/release/libblerpc_nostd_check.a"
"$target_dir/nostd-check"
