#!/usr/bin/env bash
# Installs what the browser checks need (tools/web/check.sh): Debian's chromium (and openssl,
# nodejs, npm if missing), the Rust
# wasm32 target, wasm-bindgen-cli at the lock file's wasm-bindgen version, and web/'s npm
# packages (playwright-core, typescript) from web/package-lock.json. Idempotent; needs root for
# apt. Never downloads a browser of its own: Playwright drives /usr/bin/chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."
step() { printf '\n==> web install: %s\n' "$*"; }
fail() { printf '\n!!! error: web install: %s failed\n' "$*" >&2; exit 1; }

if ! command -v chromium >/dev/null; then
  step "apt: chromium"
  apt-get update -qq || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium || fail "apt-get install chromium"
fi
# openssl makes the wss:// test's self-signed certificate.
if ! command -v openssl >/dev/null; then
  step "apt: openssl"
  apt-get update -qq || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl || fail "apt-get install openssl"
fi
command -v node >/dev/null && command -v npm >/dev/null || {
  step "apt: nodejs npm"
  apt-get update -qq || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm || fail "apt-get install nodejs npm"
}

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown || fail "rustup target add wasm32-unknown-unknown"
fi

# wasm-bindgen-cli must be exactly the version of the wasm-bindgen crate in the lock file, and
# built from a pinned dependency set: the crate's own published lock names a webpki-roots
# (1.0.11) the registry no longer serves, and an unlocked install would pick whatever resolves
# that day. tools/web/wasm-bindgen-cli-<version>.lock is that lock with webpki-roots at 1.0.10
# (nothing else changed); the crate's source is fetched through cargo and built with it.
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' \
  crates/blerpc-web/Cargo.lock)
[ -n "$want" ] || fail "reading the wasm-bindgen version from crates/blerpc-web/Cargo.lock"
have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
  lock="$PWD/tools/web/wasm-bindgen-cli-$want.lock"
  [ -f "$lock" ] || fail "no pinned lock file $lock for wasm-bindgen-cli $want (make one: the crate's Cargo.lock, updated until it resolves)"
  step "cargo install wasm-bindgen-cli $want from its pinned lock (have: ${have:-none}; a few minutes)"
  tmp=$(mktemp -d)
  mkdir -p "$tmp/fetch/src"
  printf '[package]\nname = "fetch-wasm-bindgen-cli"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\nwasm-bindgen-cli = "=%s"\n' \
    "$want" > "$tmp/fetch/Cargo.toml"
  : > "$tmp/fetch/src/lib.rs"
  (cd "$tmp/fetch" && cargo fetch -q) || fail "cargo fetch wasm-bindgen-cli $want"
  crate=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/"wasm-bindgen-cli-$want.crate" 2>/dev/null | head -1)
  [ -n "$crate" ] || fail "finding wasm-bindgen-cli-$want.crate in cargo's registry cache"
  tar xzf "$crate" -C "$tmp" || fail "unpacking $crate"
  cp "$lock" "$tmp/wasm-bindgen-cli-$want/Cargo.lock"
  cargo install --locked --path "$tmp/wasm-bindgen-cli-$want" -j 2 \
    || fail "cargo install --locked wasm-bindgen-cli $want"
  rm -rf "$tmp"
fi

step "npm ci (web/: playwright-core, typescript)"
(cd web && npm ci --no-audit --no-fund) || fail "npm ci in web/"
step "done"
