//! Generates the demo service from the shared schema and its side file.
//!
//! The bulk `bytes` fields (flash reads, data writes) are `Bytes`, as recommended for large
//! payloads: a received message's field then shares the request buffer instead of being copied
//! out of it, and a caller can send one buffer many times without copying it.

fn main() -> Result<(), blerpc_build::Error> {
    let mut config = prost_build::Config::new();
    config.bytes([
        ".blerpc.FlashReadResponse.data",
        ".blerpc.DataWriteRequest.data",
    ]);
    blerpc_build::configure()
        .side_file("proto/streaming.txt")
        .compile_with_config(config, &["proto/blerpc.proto"], &["proto"])
}
