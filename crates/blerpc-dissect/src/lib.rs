//! # blerpc-dissect: a dissector for captured bleRPC link PDUs
//!
//! [`dissect`] takes captured PDUs, each one GATT write (central → peripheral) or notification
//! (peripheral → central), i.e. one container, written in hex as people paste them
//! ([`PduInput`], [`parse_hex`]), and returns a [`Report`]: no I/O, no printing, no exit code.
//! Per PDU the report holds:
//!
//! - the container header ([`ContainerReport`]) and its fit within the ATT MTU and its place in
//!   its message's split ([`SplitReport`], with a guess at the sender's MTU when the chunk sizes
//!   point at another one);
//! - a CONTROL payload by field ([`ControlReport`]): TIMEOUT, CAPABILITIES (flags by name,
//!   the large-message extension), ERROR (code, name, description), STREAM_END_*, the four
//!   KEY_EXCHANGE steps (step 2's signature checked against a step 1 seen earlier, steps 3 and 4
//!   decrypted with the session key when [`Options::key`] is given);
//! - for FIRST and SUBSEQUENT containers, reassembly by tid with the core's `Assembler`; each
//!   completed message ([`MessageReport`]) is decrypted with the session key when it can be,
//!   checked for replayed counters, and parsed as a command ([`CommandReport`]).
//!
//! Decoding never stops at the first problem: malformed input is an error ([`Report::errors`]),
//! suspicious input a warning ([`Report::warnings`]), each a [`Diagnostic`] naming the PDU, the
//! [`Layer`], the wire field and its offset.
//!
//! Every protocol name in a report (container types, control commands, error codes, capability
//! flags, command types) is the core's (`blerpc_proto::wire`: `ContainerKind::as_str`,
//! `ControlCmd::as_str`, `ErrorCode::as_str`, `CapabilityFlags::iter`, `CommandType::as_str`);
//! this crate has no name table of its own.
//!
//! The report serialises with serde: that is the JSON document of `blerpc decode --json` (its
//! `--help` lists the keys). [`text::render`] is the human-readable form `blerpc decode` prints.
//!
//! ```
//! use blerpc_dissect::{Options, PduInput, dissect, text};
//!
//! // A TIMEOUT response and the nRF firmware's CAPABILITIES response (wire.md §6.1).
//! let inputs = [
//!     PduInput::arg(1, "0000c4026400"),
//!     PduInput::arg(2, "0100d0060030ffff0100"),
//! ];
//! let report = dissect(&inputs, &Options::default());
//! assert!(report.ok);
//! let json = serde_json::to_value(&report).unwrap();
//! assert_eq!(json["pdus"][0]["control"]["cmd"], "TIMEOUT");
//! assert_eq!(json["pdus"][0]["control"]["timeout_ms"], 100);
//! assert_eq!(json["pdus"][1]["control"]["flag_names"][0], "ENCRYPTION_SUPPORTED");
//! let text = text::render(&report, false);
//! assert!(text.contains("TIMEOUT response (P→C, inferred): timeout_ms=100"));
//! ```

mod control;
mod dissect;
mod input;
mod message;
mod report;
pub mod text;

pub use dissect::{DEFAULT_MTU, Options, dissect};
pub use input::{HexError, PduInput, parse_hex};
pub use report::{
    CommandReport, ContainerReport, ControlBody, ControlKind, ControlReport, Diagnostic, Dir,
    EncryptionReport, IncompleteReport, KeyExchangeReport, Layer, MessageReport, PduReport, Report,
    SplitReport,
};
