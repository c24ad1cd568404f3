//! UniFFI's `uniffi-bindgen` at the workspace's UniFFI version (the generator must match the
//! scaffolding blerpc-ffi was built with). maturin runs it as `cargo run --bin uniffi-bindgen`;
//! by hand: `cargo run -p uniffi-bindgen -- generate --library target/debug/libblerpc_ffi.so
//! --language python --out-dir out`.

fn main() {
    uniffi::uniffi_bindgen_main()
}
