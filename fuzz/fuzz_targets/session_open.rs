#![no_main]
//! See `blerpc_proto::fuzzing::session_open` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_proto::fuzzing::session_open(data));
