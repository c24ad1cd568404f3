#![no_main]
//! See `blerpc_fuzz::codecs::command_parse` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::codecs::command_parse(data));
