#!/usr/bin/env bash
# What the release profile's overflow checks cost: blerpc-bench built twice, as the workspace's
# release profile is ("on": the workspace's own crates checked, dependencies not) and with
# CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=false into target/overflow-checks ("off": nothing checked),
# then the codec workloads (every provider) and the loopback bleRPC rows (TCP and TLS, 0 B to
# 64 KiB, one call at a time) run alternately, REPS times each; the table compares the medians.
# Run it on an idle machine (~20 minutes with both builds). WHOLE=1 checks the dependencies too
# in the "on" build (into target/overflow-checks-whole).
#
#   bash tools/overflow-checks.sh [REPS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
on=target/release/blerpc-bench
if [ "${WHOLE:-0}" = 1 ]; then
  echo "==> building blerpc-bench with every crate checked (target/overflow-checks-whole)"
  CARGO_TARGET_DIR=target/overflow-checks-whole cargo build --release --locked -p blerpc-bench \
    --config 'profile.release.package."*".overflow-checks=true'
  on=target/overflow-checks-whole/release/blerpc-bench
else
  echo "==> building blerpc-bench (release as configured)"
  cargo build --release --locked -p blerpc-bench
fi
echo "==> building blerpc-bench without overflow checks (target/overflow-checks)"
CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=false CARGO_TARGET_DIR=target/overflow-checks \
  cargo build --release --locked -p blerpc-bench
# The two builds run alternately, codec and loopback, through the same comparison.
exec bash tools/bench-ab.sh --bins off target/overflow-checks/release/blerpc-bench on "$on" "$reps"
