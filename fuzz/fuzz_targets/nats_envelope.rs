#![no_main]
//! See `blerpc_fuzz::fleet::nats_envelope` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::fleet::nats_envelope(data));
