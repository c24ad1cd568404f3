#![no_main]
//! See `blerpc_fuzz::files::identity_file` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::files::identity_file(data));
