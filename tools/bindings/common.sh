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

# Builds the wheel of bindings/python with maturin (dev profile, in the target directory) and
# installs it into the venv $1 (which has maturin: tools/venv.sh). maturin runs the
# `uniffi-bindgen` it finds on PATH (none is a workspace member) to generate the Python module
# from the built library.
install_wheel() {
  local venv="$1" bindgen bindgen_dir wheels wheel
  bindgen="$(uniffi_bindgen)"
  bindgen_dir="$(mktemp -d)"
  ln -s "$bindgen" "$bindgen_dir/uniffi-bindgen"
  wheels="$target/wheels"
  rm -f "$wheels"/blerpc-*.whl
  # bindings/python/pyproject.toml names the crate (crates/blerpc-ffi).
  (cd "$repo/bindings/python" && PATH="$bindgen_dir:$PATH" "$venv/bin/maturin" build --quiet --locked --profile dev --out "$wheels") >&2 \
    || { rm -rf "$bindgen_dir"; echo "error: maturin could not build the blerpc wheel" >&2; return 1; }
  rm -rf "$bindgen_dir"
  wheel=$(ls "$wheels"/blerpc-*.whl)
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel" \
    || { echo "error: pip could not install $wheel" >&2; return 1; }
  echo "installed $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) into $venv"
}
