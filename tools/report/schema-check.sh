#!/usr/bin/env bash
# Checks field reports against their JSON Schema (docs/report.schema.json, draft 2020-12, with
# jsonschema-rs from PyPI, which schemathesis brings: tools/gateway/requirements.txt): the
# examples kept in docs/examples/ and one written now on the simulated BLE link
# (`cargo run -p blerpc-report --example sim_report`, virtual time: about a second).
#
#   bash tools/report/schema-check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${BLERPC_VENV:-$(bash tools/venv.sh)}"
if ! "$VENV/bin/python" -c 'import jsonschema_rs' 2>/dev/null; then
  "$VENV/bin/pip" install -q -r tools/gateway/requirements.txt || {
    echo "error: cannot install jsonschema-rs into $VENV (tools/gateway/requirements.txt)" >&2
    exit 1
  }
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cargo run -q -p blerpc-report --example sim_report --locked -- "$work/fresh" >/dev/null
"$VENV/bin/python" - docs/report.schema.json docs/examples/report-*/report.json "$work/fresh/report.json" <<'PY'
import json, sys
import jsonschema_rs

schema = json.load(open(sys.argv[1]))
validator = jsonschema_rs.validator_for(schema)
failed = 0
for path in sys.argv[2:]:
    errors = list(validator.iter_errors(json.load(open(path))))
    for e in errors[:5]:
        print(f"{path}: {e.message} at {'/'.join(map(str, e.instance_path))}", file=sys.stderr)
    failed += bool(errors)
    print(f"{'FAIL' if errors else 'ok  '} {path}")
if failed:
    sys.exit(f"error: {failed} report(s) do not match docs/report.schema.json")
PY
