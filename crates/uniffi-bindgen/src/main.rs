//! UniFFI's `uniffi-bindgen` at blerpc-ffi's UniFFI version (the generator must match the
//! scaffolding the library was built with). tools/bindings/common.sh builds it: python.sh puts
//! it on PATH, where maturin finds it, and kotlin.sh runs it with `--language kotlin`; by hand: `cargo run --manifest-path
//! crates/uniffi-bindgen/Cargo.toml -- generate --library target/debug/libblerpc_ffi.so
//! --language python --out-dir out`.

fn main() {
    uniffi::uniffi_bindgen_main()
}
