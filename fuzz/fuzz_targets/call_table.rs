#![no_main]
//! See `blerpc_fuzz::table::call_table` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::table::call_table(data));
