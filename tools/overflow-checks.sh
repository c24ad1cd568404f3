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
out=target/overflow-checks/runs
mkdir -p "$out"
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
declare -A bin=([off]=target/overflow-checks/release/blerpc-bench [on]=$on)
for r in $(seq "$reps"); do
  for v in off on; do
    echo "==> rep $r of $reps, overflow checks $v: codec"
    "${bin[$v]}" codec --no-python --reps 1 --json "$out/codec-$v-$r.json" > /dev/null
    echo "==> rep $r of $reps, overflow checks $v: loopback"
    "${bin[$v]}" loopback --reps 1 --messages 3000 --clients 0 --window 1 \
      --json "$out/loopback-$v-$r.json" > /dev/null
  done
done
python3 - "$out" "$reps" <<'EOF'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
def rows(kind, v):
    by = {}
    for r in range(1, reps + 1):
        d = json.load(open(f"{out}/{kind}-{v}-{r}.json"))
        for row in d["rows"]:
            if kind == "codec":
                key, val = f"codec {row['workload']} {row['provider']}", row["rust_median_ns"] / 1e3
            else:
                if not row["variant"].startswith("blerpc") or row["clients"] != 1:
                    continue
                key = f"loopback {row['transport']} {row['variant']} {row['payload']} B"
                val = row["median"]["p50_ms"] * 1e3
            by.setdefault(key, []).append(val)
    return {k: statistics.median(v) for k, v in by.items()}
ratios = []
print(f"{'row':44} {'off µs':>10} {'on µs':>10} {'on/off':>7}")
for kind in ("codec", "loopback"):
    off, on = rows(kind, "off"), rows(kind, "on")
    for k in off:
        if k in on and off[k] > 0:
            ratio = on[k] / off[k]
            ratios.append(ratio)
            print(f"{k:44} {off[k]:10.3f} {on[k]:10.3f} {ratio:7.3f}")
print(f"median on/off over {len(ratios)} rows: {statistics.median(ratios):.3f}; "
      f"max {max(ratios):.3f} (medians of {reps} alternating runs each)")
EOF
