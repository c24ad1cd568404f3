#!/usr/bin/env bash
# The gateway dashboard's browser test: headless Debian Chromium (playwright-core from web/'s
# package-lock) against a real `blerpc gateway` and real devices. Needs the `blerpc` binary
# built (target/debug/blerpc, or $BLERPC_BIN) and /usr/bin/chromium (.ci/run installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x /usr/bin/chromium ] && [ -z "${CHROMIUM:-}" ]; then
  echo "error: the dashboard test needs Chromium: apt-get install chromium (or set CHROMIUM)" >&2
  exit 1
fi
if [ ! -d web/node_modules/playwright-core ]; then
  (cd web && npm ci --no-audit --no-fund) || {
    echo "error: cannot install playwright-core (npm ci in web/)" >&2
    exit 1
  }
fi
export BLERPC_BIN="${BLERPC_BIN:-$PWD/target/debug/blerpc}"
node --test crates/blerpc-gateway/tests/dashboard/
