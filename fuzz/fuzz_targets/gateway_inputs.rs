#![no_main]
//! See `blerpc_fuzz::gateway::gateway_inputs` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::gateway::gateway_inputs(data));
