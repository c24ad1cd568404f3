#![no_main]
//! See `blerpc_fuzz::connection::two_party` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::connection::two_party(data));
