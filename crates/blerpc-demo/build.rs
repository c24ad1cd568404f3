//! Generates the demo messages from the shared schema and its side file: always the no-alloc
//! messages of the service (`blerpc.noalloc.rs`); with feature `std` also prost's types, the
//! typed client and the handler trait (`blerpc.rs`).
//!
//! The bulk `bytes` fields (flash reads, data writes) are `Bytes` in prost's types, as
//! recommended for large payloads: a received message's field then shares the request buffer
//! instead of being copied out of it, and a caller can send one buffer many times without
//! copying it.

fn main() -> Result<(), blerpc_build::Error> {
    let build = || blerpc_build::configure().side_file("proto/streaming.txt");
    build().compile_no_alloc(&["proto/blerpc.proto"], &["proto"])?;
    if std::env::var_os("CARGO_FEATURE_STD").is_some() {
        let mut config = prost_build::Config::new();
        config.bytes([
            ".blerpc.FlashReadResponse.data",
            ".blerpc.DataWriteRequest.data",
        ]);
        build().compile_with_config(config, &["proto/blerpc.proto"], &["proto"])?;
    }
    Ok(())
}
