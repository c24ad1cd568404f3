#![no_main]
//! See `blerpc_fuzz::serial::serial_deframer` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::serial::serial_deframer(data));
