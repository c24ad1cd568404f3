#!/usr/bin/env bash
# CI check: the committed vectors (testdata/vectors/*.json) are exactly what tools/vectors/gen.py
# produces from the pinned reference (blerpc-protocol 0.8.0, tools/vectors/requirements.txt),
# large_messages.json exactly what tools/vectors/large.py builds from the documented layout of
# the large-message extension, and long_containers.json what tools/vectors/long.py builds from
# the layout of the long-container extension (the reference has neither extension).
#
# Uses the venv at $BLERPC_VENV (default: .venv at the repository root), creating it if needed, and
# installs the pinned requirements into it. Exits non-zero if anything differs (gen.py prints the
# differing files with a short diff) or if the venv cannot be set up.
#
#   bash tools/vectors/check.sh                      # from anywhere in a fresh clone
#   BLERPC_VENV=/tmp/refvenv bash tools/vectors/check.sh
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${BLERPC_VENV:-$repo/.venv}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "creating venv $venv" >&2
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$repo/tools/vectors/requirements.txt"
"$venv/bin/python" "$repo/tools/vectors/gen.py" --check --out "$repo/testdata/vectors"
# Our extensions (no reference exists): built from the documented layouts.
"$venv/bin/python" "$repo/tools/vectors/large.py" --check --out "$repo/testdata/vectors"
exec "$venv/bin/python" "$repo/tools/vectors/long.py" --check --out "$repo/testdata/vectors"
