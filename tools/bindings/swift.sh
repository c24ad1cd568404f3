#!/usr/bin/env bash
# The Swift bindings' check: no Swift compiler runs here, so this generates the Swift code
# from crates/blerpc-ffi (UniFFI's generator, crates/uniffi-bindgen; module `Blerpc` from
# crates/blerpc-ffi/uniffi.toml) into target/bindings/swift and checks that it declares every
# name the hand-written layer (bindings/swift/Sources/Blerpc/Blerpc+Async.swift) uses: a Rust
# method renamed or removed fails here, not first on a Mac.
#
#   bash tools/bindings/swift.sh                 # generate and check
#   bash tools/bindings/swift.sh --into-package  # also copy the generated Swift file into
#                                                # bindings/swift/Sources/Blerpc (git-ignored)
#
# bindings/swift/build-xcframework.sh (on a Mac) runs this, then builds the XCFramework.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$repo"
fail() {
  printf '\n!!! error: Swift bindings: %s\n' "$*" >&2
  exit 1
}
into_package=false
for arg in "$@"; do
  case "$arg" in
    --into-package) into_package=true ;;
    *) fail "unknown argument $arg (usage: swift.sh [--into-package])" ;;
  esac
done

# The host's build of the library: the generator reads the exported API from its metadata
# (the same on every target).
cargo build --quiet --locked -p blerpc-ffi || fail "cannot build crates/blerpc-ffi"
case "$(uname -s)" in
  Darwin) lib="$target/debug/libblerpc_ffi.dylib" ;;
  *) lib="$target/debug/libblerpc_ffi.so" ;;
esac
bindgen="$(uniffi_bindgen)" || fail "cannot build crates/uniffi-bindgen"

out="$target/bindings/swift"
rm -rf "$out"
mkdir -p "$out"
"$bindgen" generate --library "$lib" --language swift --no-format --out-dir "$out" >/dev/null \
  || fail "uniffi-bindgen could not generate the Swift code"
swift="$out/Blerpc.swift"
for f in "$swift" "$out/BlerpcFFI.h" "$out/BlerpcFFI.modulemap"; do
  [ -s "$f" ] || fail "the generator made no $f (is [bindings.swift] module_name still Blerpc?)"
done

# Every declaration of the generated API that Blerpc+Async.swift and the CoreBluetooth adapter in
# docs/bindings.md rely on, as the generator writes it. Compared with comments and whitespace
# removed on both sides (the generator puts doc comments between parameters). Update it with the
# layer.
expected=(
  'public func connectCancellable(url: String, options: ConnectOptions, cancel: CancelToken) async throws -> Connection'
  'open class Connection: ConnectionProtocol, @unchecked Sendable'
  'open func callCancellable(command: String, request: Data, deadlineMs: UInt32?, cancel: CancelToken) async throws -> Data'
  'open func serverStreamCancellable(command: String, request: Data, cancel: CancelToken) async throws -> ResponseStream'
  'open func clientStreamCancellable(command: String, cancel: CancelToken) async throws -> Upload'
  'open func bidiStreamCancellable(command: String, cancel: CancelToken) async throws -> BidiStream'
  'open class BidiStream: BidiStreamProtocol, @unchecked Sendable'
  'open func finish() async throws'
  'open func info() -> ConnectionInfo'
  'open func isClosed() -> Bool'
  'open func disconnect() async'
  'open func waitClosed() async'
  'open class ResponseStream: ResponseStreamProtocol, @unchecked Sendable'
  'open func next() async throws -> Data?'
  'open class Upload: UploadProtocol, @unchecked Sendable'
  'open func send(item: Data) async throws'
  'open func finish() async throws -> Data'
  'open func cancel() async'
  'open class CancelToken: CancelTokenProtocol, @unchecked Sendable'
  'public convenience init() {'
  'open func cancel() {'
  'open func isCancelled() -> Bool'
  'public struct ConnectOptions {'
  'public func connectGatt(link: GattLink, inbox: GattInbox, options: ConnectOptions) async throws -> Connection'
  'public protocol GattLink: AnyObject, Sendable'
  'open class GattInbox: GattInboxProtocol, @unchecked Sendable'
  'public protocol KeyStore: AnyObject, Sendable'
  'public init(trustKey: String? = nil,'
  'public struct ConnectionInfo: Equatable, Hashable'
  'public enum BlerpcError: Swift.Error'
  'case Setup(code: String, detail: String)'
  'case Call(code: String, detail: String, peerCode: UInt8?)'
  'case Connection(code: String, detail: String)'
  'case InvalidArgument(code: String, detail: String)'
)
missing="$(printf '%s\n' "${expected[@]}" | python3 -c '
import re, sys
def bare(text):  # no comments, no whitespace
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"\s+", "", text)
generated = bare(open(sys.argv[1]).read())
for decl in sys.stdin.read().splitlines():
    if bare(decl) not in generated:
        print(decl)
' "$swift")"
if [ -n "$missing" ]; then
  printf 'missing from the generated Swift: %s\n' "$missing" >&2
  fail "$(wc -l <<<"$missing") declaration(s) the Swift layer uses are not generated (see above): the Rust API changed; update bindings/swift/Sources/Blerpc/Blerpc+Async.swift and this list"
fi

if $into_package; then
  cp "$swift" bindings/swift/Sources/Blerpc/Blerpc.swift
fi
echo "Swift bindings generated in $out: $(wc -l <"$swift") lines, ${#expected[@]} declarations checked (no Swift compiler here: bindings/swift/build-xcframework.sh builds them on a Mac)"
