#!/usr/bin/env bash
# Reruns every benchmark suite and writes what docs/benchmarks/ publishes: the data (JSON), the
# charts (SVG) and each suite's printed tables (*.txt), all named by what they hold. Run it on an
# idle machine; it takes about 30 minutes here (2 cores), most of it the scale test.
#
#   bash tools/benchmarks.sh            # every suite
#   bash tools/benchmarks.sh codec ble  # only these
set -euo pipefail
cd "$(dirname "$0")/.."

out=docs/benchmarks
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
  suites=(suite ble codec handshake aead serial copy calls wakeup loopback scale gateway)
fi

BLERPC_VENV="$(bash tools/venv.sh)"
export BLERPC_VENV
cargo build --release --locked -p blerpc-bench
bench=target/release/blerpc-bench

run() {
  local name=$1
  shift
  printf '\n==> %s: blerpc-bench %s\n' "$name" "$*"
  local t0=$SECONDS
  "$bench" "$@" | tee "$out/$name.txt"
  printf '==> %s: %d s\n' "$name" $((SECONDS - t0))
}

for s in "${suites[@]}"; do
  case $s in
    suite) run suite --out target/bench-results ;;
    ble) run ble ble --json "$out/ble.json" --plot "$out/ble.svg" ;;
    codec) run codec codec --reps 5 --json "$out/codec.json" ;;
    handshake) run handshake handshake --reps 7 ;;
    aead) run aead aead --reps 7 --sizes 35,100,1024,8229,65536 ;;
    serial) run serial serial ;;
    copy) run copy copy --reps 5 ;;
    calls) run calls calls --reps 5 ;;
    wakeup) run wakeup wakeup --reps 6 ;;
    loopback)
      run loopback loopback --reps 3 --pin-cpus 0,1 \
        --json "$out/loopback.json" --svg "$out/loopback.svg"
      ;;
    scale) run scale scale --json "$out/scale.json" --svg "$out/scale.svg" ;;
    gateway) run gateway gateway --runs 3 --devices 100000 --json "$out/gateway.json" ;;
    *)
      echo "unknown suite $s (suite ble codec handshake aead serial copy calls wakeup loopback scale gateway)" >&2
      exit 2
      ;;
  esac
done
