#!/usr/bin/env bash
# The Python bindings over a GATT link on Bumble (bindings/python/tests/test_bumble.py): Bumble
# as the app's BLE stack on its virtual controllers, against the firmware's Linux peripheral
# FIRMWARE_BIN (firmware/target/release/blerpc-fw-linux). Builds and installs the wheel as
# tools/bindings/python.sh does (in the workspace's target directory, whatever
# CARGO_TARGET_DIR the caller has: the bumble step of tools/firmware/check.sh runs this after
# building the firmware once).
#
#   bash tools/bindings/bumble.sh FIRMWARE_BIN [PYTEST ARGS...]
set -euo pipefail
fw="${1:?usage: tools/bindings/bumble.sh FIRMWARE_BIN [PYTEST ARGS...]}"
shift
fw="$(cd "$(dirname "$fw")" && pwd)/$(basename "$fw")"
[ -x "$fw" ] || { echo "error: no firmware binary at $fw" >&2; exit 1; }
unset CARGO_TARGET_DIR
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$repo"
VENV="${BLERPC_VENV:-$(bash tools/venv.sh)}"
"$VENV/bin/python" -c "import bumble" || { echo "error: Bumble missing from $VENV (tools/venv.sh)" >&2; exit 1; }
install_wheel "$VENV"
cd bindings/python
BLERPC_FW_LINUX="$fw" timeout 600 "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/test_bumble.py "$@"
