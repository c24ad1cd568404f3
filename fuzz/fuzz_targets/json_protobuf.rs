#![no_main]
//! See `blerpc_fuzz::schema::json_protobuf` for the input format and the invariants.
libfuzzer_sys::fuzz_target!(|data: &[u8]| blerpc_fuzz::schema::json_protobuf(data));
