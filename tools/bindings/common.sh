# What the bindings' checks share (sourced by tools/bindings/python.sh and kotlin.sh): the
# workspace's target directory and UniFFI's generator built in it.

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"

# Builds crates/uniffi-bindgen (out of the workspace, its own lock file) into the workspace's
# target directory and prints the binary's path.
uniffi_bindgen() {
  cargo build --quiet --locked --manifest-path "$repo/crates/uniffi-bindgen/Cargo.toml" --target-dir "$target" >&2 \
    || { echo "error: cannot build crates/uniffi-bindgen" >&2; return 1; }
  echo "$target/debug/uniffi-bindgen"
}
