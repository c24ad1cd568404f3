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

# wasm-bindgen-cli must be exactly the version of the wasm-bindgen crate in the lock file.
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' \
  crates/blerpc-web/Cargo.lock)
[ -n "$want" ] || fail "reading the wasm-bindgen version from crates/blerpc-web/Cargo.lock"
have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
  step "cargo install wasm-bindgen-cli $want (have: ${have:-none}; a few minutes)"
  # --locked first (the crate's own lock file); if the registry lacks a version that lock names
  # (seen here: webpki-roots 1.0.11 of ureq), resolve afresh, loudly.
  if ! cargo install wasm-bindgen-cli --version "$want" --locked -j 2; then
    printf '\n!!! web install: cargo install --locked failed; retrying without --locked\n' >&2
    cargo install wasm-bindgen-cli --version "$want" -j 2 || fail "cargo install wasm-bindgen-cli $want"
  fi
fi

step "npm ci (web/: playwright-core, typescript)"
(cd web && npm ci --no-audit --no-fund) || fail "npm ci in web/"
step "done"
