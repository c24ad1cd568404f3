#![no_main]
//! See `blerpc_fuzz::session::session_open` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::session::session_open(data));
