#![no_main]
//! See `blerpc_fuzz::files::known_keys_file` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::files::known_keys_file(data));
