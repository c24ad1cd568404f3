#!/usr/bin/env bash
# Builds the browser package into web/pkg/: crates/blerpc-web for wasm32-unknown-unknown
# (release), wasm-bindgen's glue (--target web), and the TypeScript API (ts/ → .js + .d.ts).
# With --codec-bench, also web/pkg-bench/: the codec benchmark's workloads in wasm (not shipped).
# Prints the bundle size (wasm + JS, raw and gzipped).
#
#   bash tools/web/build.sh [--codec-bench]
#
# Cargo's target directory: $CARGO_TARGET_DIR, else the repository's target/.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
step() { printf '\n==> web build: %s\n' "$*"; }
fail() { printf '\nerror: web build: %s\n' "$*" >&2; exit 1; }

# web-sys's Web Bluetooth bindings are unstable APIs: crates/blerpc-web/.cargo/config.toml sets
# --cfg=web_sys_unstable_apis for wasm32 builds run from that directory; a RUSTFLAGS from the
# environment overrides that file, so the cfg is appended to it for the wasm32 commands.
wasm() {
  if [ -n "${RUSTFLAGS:-}" ]; then RUSTFLAGS="$RUSTFLAGS --cfg=web_sys_unstable_apis" "$@"; else "$@"; fi
}
target_dir=${CARGO_TARGET_DIR:-$root/target}
wasm_file="$target_dir/wasm32-unknown-unknown/release/blerpc_web.wasm"
command -v wasm-bindgen >/dev/null || fail "wasm-bindgen is not installed: run tools/web/install.sh"
[ -x web/node_modules/.bin/tsc ] || fail "web/node_modules is missing: run tools/web/install.sh"

build() { # features, out dir
  step "cargo build --target wasm32-unknown-unknown --release ${1:+--features $1}"
  (cd crates/blerpc-web && wasm cargo build --release --locked -j 2 --target wasm32-unknown-unknown \
      --target-dir "$target_dir" ${1:+--features "$1"}) || fail "cargo build (wasm32) failed"
  step "wasm-bindgen --target web → $2"
  rm -rf "$2"
  # Function names (the name section, 100 KiB) and the producers section are not shipped.
  wasm-bindgen --target web --remove-name-section --remove-producers-section --out-dir "$2" \
    --out-name blerpc_web "$wasm_file" \
    || fail "wasm-bindgen failed"
}

if [ "${1:-}" = "--codec-bench" ]; then
  build codec-bench web/pkg-bench
fi
build "" web/pkg
step "TypeScript API (tsc) → web/pkg"
cp crates/blerpc-web/ts/web-bluetooth.d.ts web/pkg/
web/node_modules/.bin/tsc -p crates/blerpc-web/ts || fail "tsc failed"
# The .d.ts files name the Web Bluetooth types of web-bluetooth.d.ts, which ships beside them:
# point their references there (tsc writes the path back to the source tree), and give
# wasm-bindgen's .d.ts the same reference.
ref='/// <reference path="./web-bluetooth.d.ts" preserve="true" />'
for f in web/pkg/*.d.ts; do
  case "$f" in */web-bluetooth.d.ts) continue ;; esac
  sed -i '/^\/\/\/ <reference path=.*web-bluetooth\.d\.ts/d' "$f"
  case "$f" in */index.d.ts|*/connection.d.ts|*/blerpc_web.d.ts) sed -i "1i $ref" "$f" ;; esac
done
step "type check of a page's use of the package (web/test/types)"
web/node_modules/.bin/tsc -p web/test/types || fail "tsc -p web/test/types"

step "bundle size (what a page downloads)"
node web/harness/bundle-size.mjs web/pkg
