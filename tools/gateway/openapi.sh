#!/usr/bin/env bash
# Checks crates/blerpc-gateway/openapi.yaml against a running gateway with schemathesis (PyPI):
# a real `blerpc gateway` with a real device dialled in; every operation but the event stream
# (which never ends) is called with generated requests (examples, coverage and fuzzing phases),
# and every response must be documented: status, content type, headers and body schema, and no
# server error. Needs the `blerpc` binary (target/debug/blerpc, or $BLERPC_BIN).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${BLERPC_BIN:-$PWD/target/debug/blerpc}"
VENV="${BLERPC_VENV:-$(bash tools/venv.sh)}"
if ! "$VENV/bin/python" -c 'import schemathesis' 2>/dev/null; then
  "$VENV/bin/pip" install -q -r tools/gateway/requirements.txt || {
    echo "error: cannot install schemathesis into $VENV (tools/gateway/requirements.txt)" >&2
    exit 1
  }
fi
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
export XDG_CONFIG_HOME="$work"
token="openapi-check-token-0123456789"
echo "$token" > "$work/tokens"
"$BIN" gateway --devices tcp://127.0.0.1:0 --http 127.0.0.1:0 --enroll \
  --known-devices "$work/devices.json" --tokens "$work/tokens" > "$work/gateway.out" 2> "$work/gateway.err" &
pids+=($!)
for _ in $(seq 100); do [ "$(wc -l < "$work/gateway.out")" -ge 2 ] && break; sleep 0.1; done
devices=$(sed -n 's/^devices //p' "$work/gateway.out")
http=$(sed -n 's/^http //p' "$work/gateway.out")
[ -n "$http" ] || { echo "error: the gateway did not start: $(cat "$work/gateway.err")" >&2; exit 1; }
"$BIN" keygen --out "$work/device.key" > /dev/null
"$BIN" serve --dial "$devices" --identity "$work/device.key" > "$work/device.out" 2> "$work/device.err" &
pids+=($!)
for _ in $(seq 100); do grep -q . "$work/device.out" && break; sleep 0.1; done
echo "gateway $http, device $(cut -d' ' -f4 "$work/device.out")"
"$VENV/bin/schemathesis" run crates/blerpc-gateway/openapi.yaml \
  --url "$http" \
  --header "Authorization: Bearer $token" \
  --checks all \
  --exclude-checks ignored_auth,positive_data_acceptance,use_after_free,ensure_resource_availability \
  --exclude-path /v1/events \
  --phases examples,coverage,fuzzing \
  --max-examples 60 \
  --workers 1 \
  --suppress-health-check all \
  --no-color
