#!/usr/bin/env bash
# The Python bindings' check: builds the wheel of bindings/python with maturin (dev profile, in
# the workspace's own target directory, so it shares the workspace's dependency builds),
# installs it into the project venv (tools/venv.sh, which has maturin, pytest and
# pytest-asyncio) and runs its pytest suite against real `blerpc serve` processes
# ($BLERPC_BIN, default target/debug/blerpc: `cargo build -p blerpc-cli` makes it).
#
#   bash tools/bindings/python.sh [PYTEST ARGS...]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
VENV="${BLERPC_VENV:-$(bash tools/venv.sh)}"
export BLERPC_BIN="${BLERPC_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/blerpc}"
[ -x "$BLERPC_BIN" ] || { echo "error: no blerpc binary at $BLERPC_BIN: run cargo build -p blerpc-cli" >&2; exit 1; }

wheels="${CARGO_TARGET_DIR:-$repo/target}/wheels"
rm -f "$wheels"/blerpc-*.whl
# bindings/python/pyproject.toml names the crate (crates/blerpc-ffi); maturin also builds and
# runs the workspace's uniffi-bindgen to generate the Python module.
(cd bindings/python && "$VENV/bin/maturin" build --quiet --locked --profile dev --out "$wheels") >&2 \
  || { echo "error: maturin could not build the blerpc wheel" >&2; exit 1; }
wheel=$(ls "$wheels"/blerpc-*.whl)
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel" \
  || { echo "error: pip could not install $wheel" >&2; exit 1; }
echo "installed $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) into $VENV"
cd bindings/python
exec timeout 600 "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
