#!/usr/bin/env bash
# The Python bindings' check: builds UniFFI's generator (crates/uniffi-bindgen, out of the
# workspace) and the wheel of bindings/python with maturin (dev profile, both in the
# workspace's own target directory, sharing its dependency builds), installs the wheel into
# the project venv (tools/venv.sh, which has maturin, pytest and pytest-asyncio) and runs its
# pytest suite against real `blerpc serve` processes ($BLERPC_BIN, default
# target/debug/blerpc: `cargo build -p blerpc-cli` makes it).
#
#   bash tools/bindings/python.sh [PYTEST ARGS...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$repo"
VENV="${BLERPC_VENV:-$(bash tools/venv.sh)}"
export BLERPC_BIN="${BLERPC_BIN:-$target/debug/blerpc}"
[ -x "$BLERPC_BIN" ] || { echo "error: no blerpc binary at $BLERPC_BIN: run cargo build -p blerpc-cli" >&2; exit 1; }

# maturin runs the `uniffi-bindgen` it finds on PATH (none is a workspace member) to generate
# the Python module from the built library.
bindgen="$(uniffi_bindgen)"
bindgen_dir="$(mktemp -d)"
trap 'rm -rf "$bindgen_dir"' EXIT
ln -s "$bindgen" "$bindgen_dir/uniffi-bindgen"
export PATH="$bindgen_dir:$PATH"

wheels="$target/wheels"
rm -f "$wheels"/blerpc-*.whl
# bindings/python/pyproject.toml names the crate (crates/blerpc-ffi).
(cd bindings/python && "$VENV/bin/maturin" build --quiet --locked --profile dev --out "$wheels") >&2 \
  || { echo "error: maturin could not build the blerpc wheel" >&2; exit 1; }
wheel=$(ls "$wheels"/blerpc-*.whl)
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel" \
  || { echo "error: pip could not install $wheel" >&2; exit 1; }
echo "installed $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) into $VENV"
cd bindings/python
timeout 600 "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
