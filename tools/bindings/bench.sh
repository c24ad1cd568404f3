#!/usr/bin/env bash
# The bindings' figures (docs/benchmarks/bindings.txt, .json): per-call overhead of the Python
# and Kotlin bindings against the Rust client, and the Python binding against the reference
# Python library (blerpc-protocol 0.8.0), all on one `blerpc serve` over loopback TCP, every
# piece a release build. tools/bindings/bench/bench.py runs the rounds (its docstring has the
# method); this builds what it runs:
#
#   target/release/blerpc                          the server
#   target/release/examples/call_latency           the Rust baseline (crates/blerpc-ffi/examples)
#   target/bindings/bench/python/blerpc            the release wheel, unpacked (not installed
#                                                  into the venv)
#   target/bindings/bench/blerpc-kotlin-bench.jar  generated Kotlin + dev.blerpc + Bench.kt
#
#   bash tools/bindings/bench.sh [--out docs/benchmarks/bindings] [bench.py options...]
#
# The Kotlin rows need kotlinc (npm kotlin-compiler, as tools/bindings/kotlin.sh) and JNA; without
# them they are left out. On a shared machine set BUILD_LOCK=/path/to/lock: the builds (only)
# run under `flock` on it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$repo"
VENV="${BLERPC_VENV:-$(bash tools/venv.sh)}"
out="$target/bindings/bench"
mkdir -p "$out"
progress() { echo "[bench] $*" >&2; }
locked() {
  if [ -n "${BUILD_LOCK:-}" ]; then flock "$BUILD_LOCK" "$@"; else "$@"; fi
}

progress "building the server, blerpc-ffi and the Rust baseline (release)"
locked cargo build --quiet --locked --release -p blerpc-cli --bin blerpc -p blerpc-ffi --lib --example call_latency
lib="$target/release/libblerpc_ffi.so"
bindgen="$(locked bash -c "source tools/bindings/common.sh && uniffi_bindgen")"

progress "building the Python wheel (release)"
bindgen_dir="$(mktemp -d)"
trap 'rm -rf "$bindgen_dir"' EXIT
ln -s "$bindgen" "$bindgen_dir/uniffi-bindgen"
rm -f "$out"/wheels/blerpc-*.whl
(cd bindings/python && PATH="$bindgen_dir:$PATH" locked "$VENV/bin/maturin" build --quiet --locked --release --out "$out/wheels") >&2
rm -rf "$out/python"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$out/python" "$out"/wheels/blerpc-*.whl

kotlin=()
kotlin_home="${KOTLIN_HOME:-$(npm root -g 2>/dev/null || true)/kotlin-compiler}"
jna="${JNA_JAR:-/usr/share/java/jna.jar}"
if [ -x "$kotlin_home/bin/kotlinc" ] && [ -f "$jna" ] && command -v java >/dev/null; then
  klib="$kotlin_home/lib"
  deps="$jna:$klib/kotlinx-coroutines-core-jvm.jar"
  jar="$out/blerpc-kotlin-bench.jar"
  gen="$out/kotlin-gen"
  rm -rf "$gen"
  "$bindgen" generate --library "$lib" --language kotlin --no-format --out-dir "$gen" >/dev/null
  if [ ! -f "$jar" ] || [ -n "$(find "$gen" bindings/kotlin/src tools/bindings/bench/Bench.kt -newer "$jar" -name '*.kt' -print -quit)" ]; then
    progress "compiling the Kotlin driver (kotlinc)"
    "$kotlin_home/bin/kotlinc" -cp "$deps" "$gen" bindings/kotlin/src tools/bindings/bench/Bench.kt -d "$jar" 2>/dev/null
  fi
  kotlin=(--kotlin "java -Djna.library.path=$(dirname "$lib") -cp $jar:$deps:$klib/kotlin-stdlib.jar dev.blerpc.bench.BenchKt")
else
  progress "no kotlinc, JNA or java: the Kotlin rows are left out"
fi

# The known-keys file and identity of the runs live under a temporary $XDG_CONFIG_HOME.
config="$(mktemp -d)"
trap 'rm -rf "$bindgen_dir" "$config"' EXIT
XDG_CONFIG_HOME="$config" PYTHONPATH="$out/python" "$VENV/bin/python" tools/bindings/bench/bench.py \
  --server "$target/release/blerpc" --rust "$target/release/examples/call_latency" \
  --python "$VENV/bin/python" "${kotlin[@]}" --command "bash tools/bindings/bench.sh $*" "$@"
