//! # blerpc-fuzz: the fuzz targets of blerpc-rs
//!
//! One `pub fn name(data: &[u8])` per target. The cargo-fuzz crate in `fuzz/` wraps each in
//! `fuzz_target!` (`fuzz/fuzz_targets/<name>.rs`), and `tests/corpus.rs` runs every committed
//! input of `fuzz/corpus/<name>/` and `fuzz/regressions/<name>/` through the same function on
//! stable, so a target cannot rot. A target must return normally for any input; a panic is a
//! bug, in the code under test or in the invariant the target asserts (invariants are `assert!`,
//! so they hold in release fuzz builds too).
//!
//! | target | input | module |
//! |---|---|---|
//! | `container_parse`, `command_parse`, `key_exchange_parse`, `capabilities_parse`, `diagnostics_parse` | raw bytes | [`codecs`] |
//! | `control_parse` | `[cmd][payload...]` | [`codecs`] |
//! | `assembler` | `[max_len u16][in_flight][mtu]` then `[len][container]...` | [`assembler`] |
//! | `handshake_central`, `handshake_peripheral` | `[mode]` then mutations or raw steps | [`handshake`] |
//! | `session_open` | `[role]` then session ops | [`session`] |
//! | `connection_central`, `connection_peripheral`, `two_party` | [`connection::WorldConfig`] bytes then [`connection::Op`]s, on blerpc-sim's two-peer harness | [`connection`] |
//! | `known_keys_file`, `identity_file` | a file's contents | [`files`] |
//! | `json_protobuf` | `[method and direction]` then JSON text or protobuf bytes | [`schema`] |
//! | `dissector` | `[options]` then a capture file or binary PDUs | [`dissector`] |
//! | `stream_framing` | `[mtu][flags][max][4 read steps]` then a byte stream | [`stream`] |
//! | `ws_receive` | `[mtu][flags][max][4 read steps]` then a WebSocket client's bytes | [`stream`] |
//! | `connection_runtime_limits` | as `connection_peripheral`, the peripheral configured as `blerpc serve` configures it | [`connection`] |
//! | `serial_deframer` | `[max_pdu u16][read size][mode]` then a line or a program that builds one | [`serial`] |
//! | `call_table` | `[flags][seed]` then ops: calls, upload items, cancels, time, PDUs both ways | [`table`] |
//! | `nats_envelope` | `[mode]` then a NATS message's headers, one a line | [`fleet`] |
//! | `nats_pipe` | `[bound u16][window]` then ops: frames arriving, taken by a body's reader, credits spent | [`fleet`] |
//! | `nats_records` | `[kind]` then a presence, gateway or call record (after its key) from a fleet bucket | [`fleet`] |
//! | `gateway_inputs` | `[mode][max_line][4 chunk sizes]` then an NDJSON body, or workers' metrics texts or device lists | [`gateway`] |
//!
//! ```
//! // Any bytes are a valid input; a well-formed one runs a whole encrypted session.
//! let (c2p, _) = blerpc_fuzz::connection::capture_traffic(true);
//! for pdu in &c2p {
//!     blerpc_fuzz::codecs::container_parse(pdu);
//! }
//! blerpc_fuzz::connection::two_party(b"\x0a\xf1\x03\x00\x01\x00\x00\x00\x02");
//! ```
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "fuzz targets: a panic is how they report a broken invariant"
)]

pub mod assembler;
pub mod codecs;
pub mod connection;
pub mod dissector;
pub mod files;
pub mod fleet;
pub mod gateway;
pub mod handshake;
pub mod input;
pub mod keys;
pub mod schema;
pub mod serial;
pub mod session;
pub mod stream;
pub mod table;

/// The body of one target.
pub type TargetFn = fn(&[u8]);

/// Every target, by the name of its cargo-fuzz binary and corpus directory.
pub const TARGETS: &[(&str, TargetFn)] = &[
    ("container_parse", codecs::container_parse),
    ("control_parse", codecs::control_parse),
    ("command_parse", codecs::command_parse),
    ("key_exchange_parse", codecs::key_exchange_parse),
    ("capabilities_parse", codecs::capabilities_parse),
    ("diagnostics_parse", codecs::diagnostics_parse),
    ("assembler", assembler::assembler),
    ("handshake_central", handshake::handshake_central),
    ("handshake_peripheral", handshake::handshake_peripheral),
    ("session_open", session::session_open),
    ("connection_central", connection::connection_central),
    ("connection_peripheral", connection::connection_peripheral),
    (
        "connection_runtime_limits",
        connection::connection_runtime_limits,
    ),
    ("stream_framing", stream::stream_framing),
    ("ws_receive", stream::ws_receive),
    ("two_party", connection::two_party),
    ("known_keys_file", files::known_keys_file),
    ("identity_file", files::identity_file),
    ("json_protobuf", schema::json_protobuf),
    ("dissector", dissector::dissector),
    ("serial_deframer", serial::serial_deframer),
    ("gateway_inputs", gateway::gateway_inputs),
    ("call_table", table::call_table),
    ("nats_envelope", fleet::nats_envelope),
    ("nats_pipe", fleet::nats_pipe),
    ("nats_records", fleet::nats_records),
];
