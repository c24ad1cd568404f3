#!/usr/bin/env bash
# Two builds of blerpc-bench side by side in one run: the codec workloads (every provider) and the
# loopback bleRPC rows (TCP and TLS, 0 B to 64 KiB, one call at a time) run alternately, REPS
# times each; the table compares the medians, and for loopback also each build's ratio over the
# bare TCP/TLS echo measured in the same repetition. Run it on an idle machine.
#
#   bash tools/bench-ab.sh --rev REV [REPS=3]     # REV (built in a worktree under target/ab/)
#                                                  # against this tree (target/release)
#   bash tools/bench-ab.sh --bins A_NAME A_BIN B_NAME B_BIN [REPS=3]
#
# Results: target/ab/runs/*.json; the table on stdout. tools/overflow-checks.sh uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/ab/runs
case "${1:-}" in
  --rev)
    rev=$(git rev-parse --short "${2:?usage: bench-ab.sh --rev REV [REPS]}")
    reps=${3:-3}
    base="$PWD/target/ab/$rev"
    if [ ! -x "$base/target/release/blerpc-bench" ]; then
      echo "==> building blerpc-bench at $rev (worktree $base)" >&2
      [ -d "$base/src" ] || git worktree add --detach "$base/src" "$rev" >&2
      (cd "$base/src" && CARGO_TARGET_DIR="$base/target" cargo build --release --locked -p blerpc-bench)
    fi
    echo "==> building blerpc-bench from this tree" >&2
    cargo build --release --locked -p blerpc-bench
    names=("$rev" "this")
    bins=("$base/target/release/blerpc-bench" "$PWD/target/release/blerpc-bench")
    ;;
  --bins)
    names=("$2" "$4")
    bins=("$3" "$5")
    reps=${6:-3}
    ;;
  *)
    sed -n '2,12p' "$0" >&2
    exit 2
    ;;
esac
rm -rf "$out"
mkdir -p "$out"
for r in $(seq "$reps"); do
  for v in 0 1; do
    echo "==> rep $r of $reps, ${names[$v]}: codec" >&2
    "${bins[$v]}" codec --no-python --reps 1 --json "$out/codec-$v-$r.json" > /dev/null
    echo "==> rep $r of $reps, ${names[$v]}: loopback" >&2
    "${bins[$v]}" loopback --reps 1 --messages 3000 --clients 0 --window 1 \
      --json "$out/loopback-$v-$r.json" > /dev/null
  done
done
python3 - "$out" "$reps" "${names[0]}" "${names[1]}" <<'EOF'
import json, statistics, sys
out, reps, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def rows(kind, v):
    by, bare = {}, {}
    for r in range(1, reps + 1):
        d = json.load(open(f"{out}/{kind}-{v}-{r}.json"))
        for row in d["rows"]:
            if kind == "codec":
                key, val = f"codec {row['workload']} {row['provider']}", row["rust_median_ns"] / 1e3
            else:
                if row["clients"] != 1:
                    continue
                val = row["median"]["p50_ms"] * 1e3
                if not row["variant"].startswith("blerpc"):
                    bare.setdefault((row["transport"], row["payload"], r), []).append(val)
                    continue
                key = f"loopback {row['transport']} {row['variant']} {row['payload']} B"
                by.setdefault(key + " ×bare", []).append((row["transport"], row["payload"], r, val))
            by.setdefault(key, []).append(val)
    med = {}
    for k, vals in by.items():
        if k.endswith("×bare"):
            ratios = [val / min(bare[(t, p, r)]) for t, p, r, val in vals if (t, p, r) in bare]
            if ratios:
                med[k] = statistics.median(ratios)
        else:
            med[k] = statistics.median(vals)
    return med
print(f"{'row':52} {a:>10} {b:>10} {b + '/' + a:>10}")
ratios = []
for kind in ("codec", "loopback"):
    x, y = rows(kind, 0), rows(kind, 1)
    for k in x:
        if k in y and x[k] > 0:
            ratio = y[k] / x[k]
            if not k.endswith("×bare"):
                ratios.append(ratio)
            print(f"{k:52} {x[k]:10.3f} {y[k]:10.3f} {ratio:10.3f}")
print(f"median {b}/{a} over {len(ratios)} timed rows: {statistics.median(ratios):.3f}; "
      f"min {min(ratios):.3f}, max {max(ratios):.3f} (medians of {reps} alternating runs each; "
      f"×bare rows: each build's p50 over the bare echo of the same repetition)")
EOF
