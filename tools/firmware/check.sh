#!/usr/bin/env bash
# The firmware's CI check (after tools/firmware/install.sh):
#   1. formatting, clippy, the docs, and the host tests of the firmware crates (the demo service's codecs,
#      the QEMU checks run natively, the Linux build's helpers); clippy on the MCU targets;
#   2. the Cortex-M33 test image built and run under QEMU (mps2-an505, semihosting): the
#      reference vectors both ways and an encrypted session in memory on the MCU's own code;
#   3. both boards' release images (nRF54L15 DK, nRF52840 DK), encrypted and plaintext, and their
#      flash and RAM split by component (tools/firmware/sizes.py);
#   4. the Linux build over Bumble's virtual controllers: the 12 functional tests both ways
#      (tools/firmware/bumble_run.py), and the Python bindings' GATT link on Bumble against its
#      peripheral (tools/bindings/bumble.sh).
# Each step is timed; any failure stops the script with a message naming the step.
#
#   bash tools/firmware/check.sh              # everything
#   bash tools/firmware/check.sh qemu sizes   # some steps: host lint qemu sizes bumble
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fw="$repo/firmware"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$fw/target}"
jobs="${CARGO_BUILD_JOBS:-2}"
steps="${*:-host lint qemu sizes bumble}"

fail() {
  echo "!! FIRMWARE CHECK FAILED: $1" >&2
  exit 1
}
run_step() {
  local name="$1"
  shift
  case " $steps " in *" $name "*) ;; *) echo "== firmware check: $name (not selected)" >&2; return 0 ;; esac
  local t0=$SECONDS
  echo "== firmware check: $name" >&2
  "$@" || fail "$name"
  echo "== firmware check: $name done in $((SECONDS - t0)) s" >&2
}

include="$(bash "$repo/tools/firmware/clang-include.sh")" || fail "clang include directory (run tools/firmware/install.sh)"
export BINDGEN_EXTRA_CLANG_ARGS="-I$include"
cargo_fw() { (cd "$fw" && cargo "$1" --locked -j "$jobs" "${@:2}"); }

host_packages=(-p blerpc-fw-service -p blerpc-fw-qemu-test -p blerpc-fw-app -p blerpc-fw-linux)

host() {
  # The firmware packages only (`--all` would reach the main workspace's crates, its path
  # dependencies).
  (cd "$fw" && cargo fmt --check "${host_packages[@]}" -p blerpc-fw-nrf52840 -p blerpc-fw-nrf54l15) || return 1
  # Release, so the bumble step's build reuses these dependencies.
  cargo_fw clippy --release "${host_packages[@]}" --all-targets -- -D warnings || return 1
  cargo_fw test --release -p blerpc-fw-service -p blerpc-fw-qemu-test -p blerpc-fw-linux || return 1
  RUSTDOCFLAGS=-Dwarnings cargo_fw doc --release --no-deps -p blerpc-fw-service -p blerpc-fw-app -p blerpc-fw-qemu-test
}

# Clippy on the microcontroller targets (the boards in both variants, the QEMU image).
lint() {
  cargo_fw clippy --release -p blerpc-fw-qemu-test --target thumbv8m.main-none-eabihf -- -D warnings || return 1
  cargo_fw clippy --release -p blerpc-fw-nrf54l15 --target thumbv8m.main-none-eabihf -- -D warnings || return 1
  cargo_fw clippy --release -p blerpc-fw-nrf52840 --target thumbv7em-none-eabihf -- -D warnings || return 1
  cargo_fw clippy --release -p blerpc-fw-nrf52840 --target thumbv7em-none-eabihf --features plaintext -- -D warnings
}

qemu() {
  local target=thumbv8m.main-none-eabihf
  cargo_fw build --release -p blerpc-fw-qemu-test --target "$target" || return 1
  local elf="$CARGO_TARGET_DIR/$target/release/blerpc-fw-qemu-test"
  echo "   running $elf on qemu-system-arm -M mps2-an505 (Cortex-M33)" >&2
  timeout 600 qemu-system-arm -M mps2-an505 -nographic -monitor none -serial none \
    -semihosting-config enable=on,target=native -kernel "$elf" | tee "$CARGO_TARGET_DIR/qemu-test.out"
  [ "${PIPESTATUS[0]}" = 0 ]
}

# The firmware connection's size_of on 32-bit ARM, as the QEMU image printed it (for the split
# of the main task's static future in the size report).
connection_bytes() {
  sed -n "s/^  $1: \([0-9]*\) bytes$/\1/p" "$CARGO_TARGET_DIR/qemu-test.out" 2>/dev/null | head -1
}

sizes() {
  local out="$CARGO_TARGET_DIR/firmware-sizes"
  mkdir -p "$out"
  local images=()
  for board in nrf54l15:thumbv8m.main-none-eabihf nrf52840:thumbv7em-none-eabihf; do
    local name="${board%%:*}" target="${board##*:}"
    for variant in encrypted plaintext; do
      local features=()
      [ "$variant" = plaintext ] && features=(--features plaintext)
      cargo_fw build --release -p "blerpc-fw-$name" --target "$target" "${features[@]}" || return 1
      cp "$CARGO_TARGET_DIR/$target/release/blerpc-fw-$name" "$out/$name-$variant.elf"
      images+=("$name $variant=$out/$name-$variant.elf")
    done
  done
  local split=()
  local enc plain
  enc="$(connection_bytes "firmware connection (core + demo service)")"
  plain="$(connection_bytes "firmware connection, plaintext build")"
  [ -n "$enc" ] && split+=(--connection-bytes "$enc")
  [ -n "$plain" ] && split+=(--connection-bytes-plaintext "$plain")
  [ -z "$enc" ] && echo "   (run the qemu step first to split the main task's RAM: no QEMU output yet)" >&2
  python3 "$repo/tools/firmware/sizes.py" --json "$out/sizes.json" "${split[@]}" "${images[@]}"
}

bumble() {
  cargo_fw build --release -p blerpc-fw-linux || return 1
  local venv
  venv="$(bash "$repo/tools/venv.sh")" || return 1
  "$venv/bin/python" -c "import bumble" || { echo "Bumble missing: run tools/firmware/install.sh" >&2; return 1; }
  local logs="$CARGO_TARGET_DIR/bumble-logs"
  mkdir -p "$logs"
  timeout 900 "$venv/bin/python" "$repo/tools/firmware/bumble_run.py" \
    --linux-bin "$CARGO_TARGET_DIR/release/blerpc-fw-linux" --logs "$logs" || return 1
  # The Python bindings' GATT link on Bumble against the same peripheral binary (built once,
  # here; the bindings' own step runs before the firmware's and skips this test).
  BLERPC_VENV="$venv" bash "$repo/tools/bindings/bumble.sh" "$CARGO_TARGET_DIR/release/blerpc-fw-linux"
}

run_step host host
run_step lint lint
run_step qemu qemu
run_step sizes sizes
run_step bumble bumble
echo "firmware check: all selected steps passed" >&2
