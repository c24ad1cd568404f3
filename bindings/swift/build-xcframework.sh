#!/usr/bin/env bash
# Builds the Swift package's binary part on a Mac (Xcode's command line tools, rustup):
# blerpc-ffi as a static library for iOS devices, the iOS simulator and macOS, the Swift code
# UniFFI generates (copied into Sources/Blerpc), and BlerpcFFI.xcframework (the libraries with
# the C header and its module map). Then `swift build` in this directory, or add the package
# to an Xcode project.
#
#   bash bindings/swift/build-xcframework.sh [--debug]
#
# Phones get the links `tcp://` and `ws://` and the pure-Rust crypto (`--no-default-features`:
# *ring* and rustls need a C cross compiler per target; Xcode has one, so drop that flag from
# FEATURES to build `tls://`/`wss://` in, untested). Never run where this repository is tested
# (no Xcode there); tools/bindings/swift.sh checks the generated code there instead.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
profile=release
[ "${1:-}" = "--debug" ] && profile=debug
FEATURES="${FEATURES:---no-default-features}"

[ "$(uname -s)" = Darwin ] || { echo "error: build-xcframework.sh needs macOS and Xcode" >&2; exit 1; }
command -v xcodebuild >/dev/null || { echo "error: no xcodebuild: install Xcode's command line tools" >&2; exit 1; }

device=aarch64-apple-ios
simulators=(aarch64-apple-ios-sim x86_64-apple-ios)
macs=(aarch64-apple-darwin x86_64-apple-darwin)
rustup target add "$device" "${simulators[@]}" "${macs[@]}"

cd "$repo"
release_flag=()
[ "$profile" = release ] && release_flag=(--release)
for t in "$device" "${simulators[@]}" "${macs[@]}"; do
  echo "cargo: blerpc-ffi for $t ($profile)"
  # shellcheck disable=SC2086
  cargo rustc --locked -p blerpc-ffi --lib --crate-type staticlib --target "$t" $FEATURES "${release_flag[@]}"
done

# The generated Swift file, its C header and module map (from the host's library).
bash tools/bindings/swift.sh --into-package
gen="$target/bindings/swift"

work="$target/bindings/swift-xcframework"
rm -rf "$work" "$here/BlerpcFFI.xcframework"
mkdir -p "$work/headers" "$work/simulator" "$work/macos"
cp "$gen/BlerpcFFI.h" "$work/headers/"
# Inside an XCFramework the module map must be named module.modulemap.
cp "$gen/BlerpcFFI.modulemap" "$work/headers/module.modulemap"
lib=libblerpc_ffi.a
# One library per platform: the simulator's and the Mac's architectures joined with lipo.
lipo -create "$target/${simulators[0]}/$profile/$lib" "$target/${simulators[1]}/$profile/$lib" \
  -output "$work/simulator/$lib"
lipo -create "$target/${macs[0]}/$profile/$lib" "$target/${macs[1]}/$profile/$lib" \
  -output "$work/macos/$lib"
xcodebuild -create-xcframework \
  -library "$target/$device/$profile/$lib" -headers "$work/headers" \
  -library "$work/simulator/$lib" -headers "$work/headers" \
  -library "$work/macos/$lib" -headers "$work/headers" \
  -output "$here/BlerpcFFI.xcframework"
echo "built $here/BlerpcFFI.xcframework and Sources/Blerpc/Blerpc.swift: cd bindings/swift && swift build"
