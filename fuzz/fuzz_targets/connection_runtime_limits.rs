#![no_main]
//! See `blerpc_fuzz::connection::connection_runtime_limits` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::connection::connection_runtime_limits(data));
