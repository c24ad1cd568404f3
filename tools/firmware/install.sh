#!/usr/bin/env bash
# Installs what the firmware build and its checks need, on Debian/Ubuntu as root (CI's .ci/run):
#   - the two Cortex-M targets (rustup),
#   - Debian's libclang-dev (nrf-mpsl-sys / nrf-sdc-sys run bindgen), llvm (llvm-size, llvm-nm
#     for the size report) and qemu-system-arm (the Cortex-M33 test image),
#   - the reference venv (tools/venv.sh) with Google's Bumble added (tools/firmware/requirements.txt).
# Each step says what it does; a step that fails stops the script with a message naming it, and
# the script exits non-zero: nothing is skipped silently.
#
#   bash tools/firmware/install.sh
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

step() {
  local name="$1"
  shift
  echo "== firmware install: $name" >&2
  if ! "$@"; then
    echo "!! FIRMWARE INSTALL STEP FAILED: $name (command: $*)" >&2
    echo "!! the firmware images, the QEMU test and the Bumble tests cannot run without it" >&2
    exit 1
  fi
}

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "need root to apt-get install ${missing[*]}" >&2
    return 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

clang_include() {
  local dir
  dir="$(bash "$repo/tools/firmware/clang-include.sh")" || return 1
  echo "   bindgen include directory: $dir" >&2
}

bumble() {
  local venv
  venv="$(bash "$repo/tools/venv.sh")" || return 1
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$repo/tools/firmware/requirements.txt" >&2 &&
    "$venv/bin/python" -c "import bumble, blerpc_protocol" 
}

step "rustup targets thumbv8m.main-none-eabihf thumbv7em-none-eabihf" \
  rustup target add thumbv8m.main-none-eabihf thumbv7em-none-eabihf
step "Debian packages libclang-dev llvm qemu-system-arm" apt_install libclang-dev llvm qemu-system-arm
step "clang's own include directory for bindgen (from libclang-dev)" clang_include
step "llvm-size and llvm-nm on the PATH or under /usr/lib/llvm-*/bin" \
  bash -c 'compgen -G "/usr/lib/llvm-*/bin/llvm-size" >/dev/null || command -v llvm-size >/dev/null'
step "qemu-system-arm with the mps2-an505 machine" \
  bash -c 'qemu-system-arm -machine help | grep -q mps2-an505'
step "the reference venv with Bumble (tools/firmware/requirements.txt)" bumble
echo "firmware install: done" >&2
