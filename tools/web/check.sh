#!/usr/bin/env bash
# The browser central's checks: rustfmt, clippy for wasm32 (-D warnings), the crate's unit
# tests and docs, the package build (wasm + TypeScript, with its bundle size), then the
# browser tests in headless Chromium against a real `blerpc serve` (over WebSocket, and over
# Chromium's Bluetooth emulation). Run tools/web/install.sh once first.
#
#   bash tools/web/check.sh
#
# Cargo's target directory: $CARGO_TARGET_DIR, else the repository's target/ (where CI's test
# command has already built the workspace, and so the blerpc binary the tests start; set
# BLERPC_BIN to use another binary without building one).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
step() { printf '\n==> web check: %s\n' "$*"; }
fail() { printf '\n!!! error: web check: %s\n' "$*" >&2; exit 1; }

# web-sys's Web Bluetooth bindings are unstable APIs: crates/blerpc-web/.cargo/config.toml sets
# --cfg=web_sys_unstable_apis for wasm32 builds run from that directory; a RUSTFLAGS from the
# environment overrides that file, so the cfg is appended to it for the wasm32 commands.
wasm() {
  if [ -n "${RUSTFLAGS:-}" ]; then RUSTFLAGS="$RUSTFLAGS --cfg=web_sys_unstable_apis" "$@"; else "$@"; fi
}
target_dir=${CARGO_TARGET_DIR:-$root/target}
crate=(--locked --target-dir "$target_dir" -j 2)

step "rustfmt (crates/blerpc-web)"
(cd crates/blerpc-web && cargo fmt --check) || fail "rustfmt: run cargo fmt in crates/blerpc-web"

step "clippy for wasm32-unknown-unknown, every feature, warnings are errors"
(cd crates/blerpc-web && wasm cargo clippy "${crate[@]}" --target wasm32-unknown-unknown --all-targets \
  --all-features -- -D warnings) || fail "clippy (wasm32)"

step "unit tests (host: error codes, pins, URLs; the Web Bluetooth link is wasm32-only)"
(cd crates/blerpc-web && cargo test "${crate[@]}" --all-features) || fail "cargo test (crates/blerpc-web)"

step "docs (wasm32, warnings are errors)"
(cd crates/blerpc-web && RUSTDOCFLAGS="-Dwarnings --cfg=web_sys_unstable_apis" wasm cargo doc "${crate[@]}" --no-deps \
  --target wasm32-unknown-unknown --all-features) || fail "cargo doc (crates/blerpc-web)"

if [ -n "${BLERPC_BIN:-}" ]; then
  step "the blerpc binary the tests start: $BLERPC_BIN (BLERPC_BIN)"
  [ -x "$BLERPC_BIN" ] || fail "BLERPC_BIN=$BLERPC_BIN is not an executable"
else
  step "the blerpc binary the tests start (cargo build -p blerpc-cli)"
  cargo build -p blerpc-cli --locked --target-dir "$target_dir" -j 2 || fail "cargo build -p blerpc-cli"
  export BLERPC_BIN="$target_dir/debug/blerpc"
fi

step "package: wasm + TypeScript (tools/web/build.sh)"
bash tools/web/build.sh || fail "tools/web/build.sh"

step "browser tests: headless Chromium (web/test/)"
(cd web && node --experimental-websocket --test --test-concurrency=1 test/) || fail "browser tests"
printf '\nweb checks passed\n'
