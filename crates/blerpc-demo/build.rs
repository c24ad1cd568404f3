//! Generates the demo service from the shared schema and its side file.

fn main() -> Result<(), blerpc_build::Error> {
    blerpc_build::configure()
        .side_file("../../proto/streaming.txt")
        .compile(&["../../proto/blerpc.proto"], &["../../proto"])
}
