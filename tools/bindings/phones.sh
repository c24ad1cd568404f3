#!/usr/bin/env bash
# blerpc-ffi for the phones' targets, without their SDKs: no NDK linker and no Xcode here, so
# the library is checked (or built as a static library, which needs no linker) for each.
#
#   bash tools/bindings/phones.sh              # CI: cargo check per target (the cheapest proof)
#   bash tools/bindings/phones.sh --staticlib  # a debug static library per target instead
#   bash tools/bindings/phones.sh --sizes [--out docs/benchmarks/bindings-sizes]
#        # release static libraries, and for Android a size proxy of the linked .so; prints a
#        # table, and with --out writes OUT.txt and OUT.json
#
# Phone builds use `--no-default-features`: the links tcp:// and ws:// and the pure-Rust
# crypto. The default features (*ring*, and rustls for tls:// and wss://) compile C, which
# needs each target's C compiler (the NDK's clang, Xcode's): an app build has them, this
# machine does not. Every target is added with rustup first (a new machine has none).
# aarch64-apple-ios-sim and x86_64-apple-ios are tried too: this machine's rustup mirror
# answers 404 for them, so they are reported as not installable here and skipped (a Mac
# builds them: bindings/swift/build-xcframework.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$repo"
mode=check
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --staticlib) mode=staticlib ;;
    --sizes) mode=sizes ;;
    --out) out="$2"; shift ;;
    *) echo "usage: phones.sh [--staticlib | --sizes [--out PATH]]" >&2; exit 2 ;;
  esac
  shift
done

android=(aarch64-linux-android armv7-linux-androideabi x86_64-linux-android)
ios=(aarch64-apple-ios)
optional=(aarch64-apple-ios-sim x86_64-apple-ios)
features=(--no-default-features)

targets=()
for t in "${android[@]}" "${ios[@]}"; do
  rustup target add "$t" >/dev/null 2>&1 || { echo "error: rustup target add $t failed" >&2; exit 1; }
  targets+=("$t")
done
for t in "${optional[@]}"; do
  if rustup target add "$t" >/dev/null 2>&1; then
    targets+=("$t")
  else
    echo "note: rustup target add $t failed (not on this machine's mirror): skipped"
  fi
done

# Seconds since $1 (date +%s.%N), to one decimal.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

case "$mode" in
  check | staticlib)
    for t in "${targets[@]}"; do
      start=$(date +%s.%N)
      if [ "$mode" = check ]; then
        cargo check --quiet --locked -p blerpc-ffi --lib --target "$t" "${features[@]}" \
          || { echo "error: blerpc-ffi does not build for $t" >&2; exit 1; }
        echo "blerpc-ffi checks for $t ($(since "$start") s)"
      else
        cargo rustc --quiet --locked -p blerpc-ffi --lib --crate-type staticlib --target "$t" "${features[@]}" \
          || { echo "error: blerpc-ffi does not build for $t" >&2; exit 1; }
        lib="$target/$t/debug/libblerpc_ffi.a"
        echo "blerpc-ffi builds for $t: $lib, $(du -m "$lib" | cut -f1) MB debug ($(since "$start") s)"
      fi
    done
    ;;
  sizes)
    # The Android size proxy: the cdylib linked by rustup's rust-lld against empty stand-ins
    # for the NDK's system libraries, undefined symbols ignored, symbols stripped. It cannot
    # load; its size is what the code and data of a real libblerpc_ffi.so come to.
    lld="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/rust-lld"
    [ -x "$lld" ] || { echo "error: no rust-lld at $lld (rustup component llvm-tools is not needed: it comes with rustc)" >&2; exit 1; }
    stubs="$target/phones/stubs"
    mkdir -p "$stubs"
    for l in c dl log m unwind gcc; do ar rc "$stubs/lib$l.a"; done
    rows=()
    for t in "${targets[@]}"; do
      start=$(date +%s.%N)
      cargo rustc --quiet --locked --release -p blerpc-ffi --lib --crate-type staticlib --target "$t" "${features[@]}" \
        || { echo "error: blerpc-ffi does not build for $t" >&2; exit 1; }
      a="$target/$t/release/libblerpc_ffi.a"
      a_bytes=$(stat -c %s "$a")
      so_bytes=null
      if [[ "$t" == *android* ]]; then
        # A target dir of its own: these flags must not touch the staticlib's build.
        CARGO_TARGET_DIR="$target/phones/so" RUSTFLAGS="-C linker=$lld -C linker-flavor=ld.lld -C strip=symbols -L native=$stubs -C link-arg=--unresolved-symbols=ignore-all" \
          cargo rustc --quiet --locked --release -p blerpc-ffi --lib --crate-type cdylib --target "$t" "${features[@]}" \
          || { echo "error: the size proxy of libblerpc_ffi.so does not link for $t" >&2; exit 1; }
        so_bytes=$(stat -c %s "$target/phones/so/$t/release/libblerpc_ffi.so")
      fi
      echo "$t: release staticlib $a_bytes bytes, .so proxy $so_bytes bytes ($(since "$start") s)" >&2
      rows+=("$t $a_bytes $so_bytes")
    done
    printf '%s\n' "${rows[@]}" | python3 -c '
import json, sys, time
rows = [l.split() for l in sys.stdin.read().splitlines()]
mb = lambda b: "-" if b == "null" else f"{int(b) / 1e6:.2f} MB"
lines = [
    "blerpc-ffi per phone target (release, --no-default-features: tcp://, ws://, pure-Rust crypto)",
    "command: bash tools/bindings/phones.sh --sizes" + (" --out " + sys.argv[1] if sys.argv[1] else ""),
    "",
    "{:<26} {:>15} {:>36}".format("target", "static library", "linked .so (size proxy, stripped)"),
]
lines += [f"{t:<26} {mb(a):>15} {mb(s):>36}" for t, a, s in rows]
lines += [
    "",
    "The static library holds every object of every dependency (an app links only what it uses).",
    "The .so proxy: the cdylib linked by rust-lld against empty stand-ins for the NDK libraries,",
    "-C strip=symbols (not loadable; the size of a real libblerpc_ffi.so, within the NDK stubs).",
]
text = "\n".join(lines)
print(text)
if sys.argv[1]:
    open(sys.argv[1] + ".txt", "w").write(text + "\n")
    data = {"command": lines[1].removeprefix("command: "), "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "features": "--no-default-features", "profile": "release",
            "targets": {t: {"staticlib_bytes": int(a), "so_proxy_bytes": None if s == "null" else int(s)} for t, a, s in rows}}
    open(sys.argv[1] + ".json", "w").write(json.dumps(data, indent=2) + "\n")
' "$out"
    ;;
esac
