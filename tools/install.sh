#!/usr/bin/env bash
# Installs what the test command (tools/test.sh) needs and is missing, on Debian or Ubuntu, and
# says what it installs: gcc, the D-Bus headers and pkg-config (the BLE links), Python's venv,
# iproute2 (the fleet's tests put hosts in network namespaces), rustfmt and clippy; then the browser toolchain (tools/web/install.sh: Chromium, Node.js, the
# wasm32 target, wasm-bindgen-cli from its pinned lock, web/'s npm packages) and the firmware's
# (tools/firmware/install.sh: the two MCU targets, libclang, llvm, QEMU, Bumble), and the Kotlin
# bindings' (a JRE, Debian's JNA, the Kotlin compiler from npm). Each step that
# cannot be done stops the run with a message naming it; apt steps need root (run as root, or
# install the packages named). Idempotent: with everything present it only checks.
#
#   bash tools/install.sh
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '==> install: %s\n' "$*" >&2; }
fail() {
  printf '\n!!! INSTALL STEP FAILED: %s\n' "$*" >&2
  exit 1
}

need_apt=()
command -v gcc >/dev/null || need_apt+=(gcc)
dpkg -s libdbus-1-dev >/dev/null 2>&1 || need_apt+=(libdbus-1-dev)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
command -v ip >/dev/null || need_apt+=(iproute2)
# The Kotlin bindings (tools/bindings/kotlin.sh): a JRE for kotlinc and the tests, JNA.
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
dpkg -s libjna-java >/dev/null 2>&1 || need_apt+=(libjna-java)
if [ ${#need_apt[@]} -gt 0 ]; then
  step "apt: ${need_apt[*]}"
  [ "$(id -u)" = 0 ] || fail "apt-get install ${need_apt[*]} needs root: install them, or run this as root"
  apt-get update -qq || fail "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" \
    || fail "apt-get install ${need_apt[*]}"
fi

for component in rustfmt clippy; do
  tool=$([ "$component" = rustfmt ] && echo fmt || echo clippy)
  if ! cargo "$tool" --version >/dev/null 2>&1; then
    step "rustup component add $component"
    rustup component add "$component" || fail "rustup component add $component"
  fi
done

# Each of these says what it does and stops with a message naming a step that fails.
bash tools/web/install.sh || fail "the browser toolchain (tools/web/install.sh)"
bash tools/firmware/install.sh || fail "the firmware toolchain (tools/firmware/install.sh)"
# The Kotlin compiler (with kotlinx-coroutines and kotlin-test in its lib/) from npm: its
# package only puts kotlinc-js on PATH; tools/bindings/kotlin.sh runs its bin/kotlinc.
kotlin_version=2.4.20
kotlin_pkg="$(npm root -g)/kotlin-compiler/package.json"
have=$(node -p "require('$kotlin_pkg').version" 2>/dev/null || true)
if [ "$have" != "$kotlin_version" ]; then
  step "npm install -g kotlin-compiler@$kotlin_version (the Kotlin bindings; have: ${have:-none})"
  npm install -g --no-audit --no-fund "kotlin-compiler@$kotlin_version" \
    || fail "npm install -g kotlin-compiler@$kotlin_version"
fi
# The fleet's tests create network namespaces (crates/blerpc-cli/tests/fleet_hosts.rs).
if [ "$(id -u)" != 0 ]; then
  fail "the fleet's tests create network namespaces (ip netns): run the tests as root"
fi
step "everything the tests need is here"
