#!/usr/bin/env bash
# The test command (README): formatting, lints, tests, docs, the sans-IO and no_std checks, the
# reference-vector regeneration check, the Python, Kotlin and Swift bindings and the phone
# targets, the gateway's browser and OpenAPI checks, the browser central and the firmware (whose
# Bumble step also runs the Python bindings over a GATT link). Works on a fresh clone: its first
# step installs what is missing (tools/install.sh; apt needs root), loudly.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step() { printf '\n==> [%d s] %s\n' "$((SECONDS - started))" "$*"; }

step "prerequisites: install what is missing (tools/install.sh)"
bash tools/install.sh

step "reference implementation venv (blerpc-protocol 0.8.0, for vectors, interop and benchmarks)"
BLERPC_VENV="$(bash tools/venv.sh)"
export BLERPC_VENV

step "rustfmt"
cargo fmt --all --check

step "clippy (workspace, all targets, all features: every crypto provider and link)"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

step "sans-IO check: the core never reads a clock, an RNG, a socket or a file"
if grep -rnE 'std::time::(Instant|SystemTime)|thread_rng|OsRng|getrandom|std::net|std::fs|tokio|async fn' \
    crates/blerpc-proto/src --include='*.rs' | grep -v '^\S*:[0-9]*:\s*//' ; then
  echo "error: I/O, clock or global RNG use in the sans-IO core (above)" >&2
  exit 1
fi

step "tests (workspace, all features)"
cargo test --workspace --all-features --locked

step "docs (warnings are errors)"
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --all-features --no-deps --locked

step "no_std: the core without default features, and a #![no_std] staticlib linked into C"
cargo build -p blerpc-proto --no-default-features --locked
bash nostd-check/run.sh

step "packaging: the published crates compile from their packages alone (one check of the unpacked .crate files)"
bash tools/packaging/check.sh

step "reference vectors regenerate identically (blerpc-protocol 0.8.0 from PyPI)"
bash tools/vectors/check.sh

# The browser and gateway checks start the `blerpc` binary the tests above built.
export BLERPC_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/blerpc"

step "field reports: the examples and a fresh report against docs/report.schema.json (jsonschema-rs)"
bash tools/report/schema-check.sh

step "Python bindings: the wheel (maturin, dev profile, this target dir) and pytest against blerpc serve"
bash tools/bindings/python.sh

step "Kotlin bindings: kotlinc (npm kotlin-compiler 2.4.20) and JNA, tests on the JVM against blerpc serve and a fake GATT"
bash tools/bindings/kotlin.sh

step "Swift bindings: generated from blerpc-ffi, the declarations the Swift layer uses checked (no Swift compiler here)"
bash tools/bindings/swift.sh

step "phones: blerpc-ffi checked for Android (aarch64, armv7, x86_64) and aarch64-apple-ios (no NDK or Xcode here)"
bash tools/bindings/phones.sh

step "device gateway: the dashboard in headless Chromium, the OpenAPI file against a running gateway (schemathesis)"
bash tools/gateway/dashboard.sh
bash tools/gateway/openapi.sh

step "browser central: wasm32 lint and build, headless-Chromium tests (WebSocket, wss, Bluetooth emulation)"
bash tools/web/check.sh

step "firmware: fmt, clippy, docs and tests on the host and the MCU targets, the Cortex-M33 QEMU image, both boards' sizes, the Bumble functional tests both ways"
bash tools/firmware/check.sh

printf '\nall checks passed in %d s\n' "$((SECONDS - started))"
