#![no_main]
//! See `blerpc_fuzz::codecs::diagnostics_parse` for the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::codecs::diagnostics_parse(data));
