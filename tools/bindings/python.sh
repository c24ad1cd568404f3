#!/usr/bin/env bash
# The Python bindings' check: builds UniFFI's generator (crates/uniffi-bindgen, out of the
# workspace) and the wheel of bindings/python with maturin (dev profile, both in the
# workspace's own target directory, sharing its dependency builds), installs the wheel into
# the project venv (tools/venv.sh, which has maturin, pytest and pytest-asyncio) and runs its
# pytest suite against real `blerpc serve` processes ($BLERPC_BIN, default
# target/debug/blerpc: `cargo build -p blerpc-cli` makes it). The Bumble GATT test
# (tests/test_bumble.py) needs the firmware's Linux build: tools/bindings/bumble.sh runs it, from
# the bumble step of tools/firmware/check.sh (which builds that binary); here it is skipped.
#
#   bash tools/bindings/python.sh [PYTEST ARGS...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$repo"
VENV="${BLERPC_VENV:-$(bash tools/venv.sh)}"
export BLERPC_BIN="${BLERPC_BIN:-$target/debug/blerpc}"
[ -x "$BLERPC_BIN" ] || { echo "error: no blerpc binary at $BLERPC_BIN: run cargo build -p blerpc-cli" >&2; exit 1; }

install_wheel "$VENV"
cd bindings/python
timeout 600 "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
