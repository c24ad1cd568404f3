//! Generates the thermostat service and the bleRPC demo service.

fn main() -> Result<(), blerpc_build::Error> {
    // A service of our own: unary commands and both stream directions in a `service` block.
    blerpc_build::compile(&["proto/thermostat.proto"], &["proto"])?;

    // No service block: commands from message pairs, directions from the side file. The
    // service is named after the package (`Legacy`).
    blerpc_build::configure()
        .side_file("proto/legacy_streaming.txt")
        .compile(&["proto/legacy.proto"], &["proto"])?;

    // The demo schema shared with the reference implementations, with its side file.
    blerpc_build::configure()
        .side_file("../../proto/streaming.txt")
        .compile(&["../../proto/blerpc.proto"], &["../../proto"])
}
