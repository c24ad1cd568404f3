//! The structured result of a dissection. Serialised with serde it is the JSON document of
//! `blerpc decode --json`; [`crate::text::render`] walks it for the text form.

use std::fmt;

use blerpc_proto::wire::container::ControlCmd;
use serde::{Serialize, Serializer};

/// A link direction, as [`crate::Options::direction`] takes it and reports show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Dir {
    /// Central (client) to peripheral (server): GATT writes.
    C2p,
    /// Peripheral (server) to central (client): GATT notifications.
    P2c,
}

impl Dir {
    /// The core's direction.
    pub fn to_proto(self) -> blerpc_proto::Direction {
        match self {
            Dir::C2p => blerpc_proto::Direction::CentralToPeripheral,
            Dir::P2c => blerpc_proto::Direction::PeripheralToCentral,
        }
    }

    /// Index for per-direction tables.
    pub(crate) fn index(self) -> usize {
        match self {
            Dir::C2p => 0,
            Dir::P2c => 1,
        }
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dir::C2p => "C→P",
            Dir::P2c => "P→C",
        })
    }
}

/// Everything the dissector found, in input order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// `false` if there are errors (or, with `--strict`, warnings); the exit code is 1 then.
    pub ok: bool,
    /// The ATT MTU the containers were checked against.
    pub mtu: usize,
    /// The direction given ([`crate::Options::direction`]), `null` when inferred per PDU.
    pub direction: Option<Dir>,
    /// One entry per input PDU.
    pub pdus: Vec<PduReport>,
    /// Messages reassembled from FIRST/SUBSEQUENT containers, in completion order.
    pub messages: Vec<MessageReport>,
    /// Transactions still waiting for containers at the end of the input.
    pub incomplete: Vec<IncompleteReport>,
    /// Malformed input: every entry also makes the exit code 1.
    pub errors: Vec<Diagnostic>,
    /// Suspicious but decodable input (errors only with `--strict`).
    pub warnings: Vec<Diagnostic>,
}

/// One captured PDU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PduReport {
    /// 0-based position in the input (`#0`, `#1`, ...).
    pub index: usize,
    /// Where it came from (`argument 1`, `line 3 of capture.txt`).
    pub source: String,
    /// The bytes, lowercase and gapless (empty if the hex did not decode).
    pub hex: String,
    /// Length in bytes.
    pub len: usize,
    /// The parsed container header, absent if it did not parse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerReport>,
    /// MTU fit and position within the split, absent if the container did not parse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitReport>,
    /// The decoded payload of a CONTROL container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlReport>,
    /// Index into [`Report::messages`] of the message this PDU completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completes_message: Option<usize>,
    /// The error that stopped decoding this PDU (also listed in [`Report::errors`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Diagnostic>,
}

/// A container header.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContainerReport {
    /// Transaction id.
    pub tid: u8,
    /// Sequence number.
    pub seq: u8,
    /// The type's name (`ContainerKind::as_str`): `FIRST`, `LARGE_FIRST` (large-message
    /// extension), `SUBSEQUENT`, `CONTROL` or `UNKNOWN` (the undefined type `0b10`).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The raw flags byte.
    pub flags: u8,
    /// The control command's name ([`ControlCmd::as_str`]), for CONTROL containers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_cmd: Option<&'static str>,
    /// `total_length`, for FIRST and LARGE_FIRST containers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_length: Option<u32>,
    /// `payload_len`.
    pub payload_len: usize,
    /// The payload bytes.
    pub payload_hex: String,
    /// Bytes after the payload (ignored by receivers).
    pub trailing: usize,
}

/// How the container relates to the MTU and to the split of its message.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitReport {
    /// Bytes in the PDU.
    pub container_len: usize,
    /// The most a container may have: `mtu - 3`, or 16,384 for a LONG one.
    pub max_container_len: usize,
    /// A LONG container (long-container extension, `u16` `payload_len`): it travels only on
    /// links without an ATT MTU, so it is held to 16,384 bytes instead (only present when
    /// `true`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub long: bool,
    /// `container_len <= max_container_len`.
    pub fits: bool,
    /// 1-based container number within its message (`seq + 1`), for FIRST and SUBSEQUENT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// Containers a splitter at this MTU uses for the whole message (when `total_length` is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containers: Option<usize>,
    /// The chunk a splitter at this MTU puts in this container (when the transaction is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_chunk: Option<usize>,
    /// Message bytes received for this transaction including this container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<usize>,
    /// The transaction's `total_length`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_length: Option<usize>,
    /// When the chunk is not what a splitter at `--mtu` sends but fills the container at another
    /// ATT MTU: that MTU (the sender's, probably).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_mtu_hint: Option<usize>,
}

/// Whether a TIMEOUT or CAPABILITIES container is the request or the response; in JSON
/// [`ControlKind::as_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlKind {
    /// Central → peripheral.
    Request,
    /// Peripheral → central.
    Response,
}

impl ControlKind {
    /// `request` or `response`.
    pub fn as_str(self) -> &'static str {
        match self {
            ControlKind::Request => "request",
            ControlKind::Response => "response",
        }
    }
}

impl Serialize for ControlKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A decoded CONTROL payload: its command, then the payload's fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ControlReport {
    /// The container's command; in JSON its name ([`ControlCmd::as_str`]).
    #[serde(serialize_with = "control_cmd_name")]
    pub cmd: ControlCmd,
    /// The payload's fields (in JSON, beside `cmd`).
    #[serde(flatten)]
    pub body: ControlBody,
}

/// Serialises a control command by its protocol name.
fn control_cmd_name<S: Serializer>(cmd: &ControlCmd, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(cmd.as_str())
}

/// The fields of a CONTROL payload, by command ([`ControlReport::cmd`] says which).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ControlBody {
    /// TIMEOUT (`0x1`): empty request or `timeout_ms` response.
    Timeout {
        /// Request or response.
        kind: ControlKind,
        /// The direction it was decoded for.
        direction: Dir,
        /// `true` if the direction was inferred from the payload rather than given.
        inferred: bool,
        /// The peripheral's per-call timeout (responses only).
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u16>,
    },
    /// STREAM_END_C2P (`0x2`, the central ended its stream) or STREAM_END_P2C (`0x3`, the
    /// peripheral ended its stream): no fields.
    StreamEnd,
    /// CREDIT (`0x9`, the streams extension): the receiver may send `credits` more items of
    /// stream `stream`.
    Credit {
        /// The stream's id (the tid of the request that opened it).
        stream: u8,
        /// Items granted.
        credits: u16,
    },
    /// CAPABILITIES (`0x4`): request or response.
    Capabilities {
        /// Request or response.
        kind: ControlKind,
        /// The direction it was decoded for.
        direction: Dir,
        /// `true` if the direction was inferred from the payload rather than given.
        inferred: bool,
        /// Largest request the peripheral accepts (absent for an empty request).
        #[serde(skip_serializing_if = "Option::is_none")]
        max_request: Option<u16>,
        /// Largest response the peripheral sends.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_response: Option<u16>,
        /// The flag bits.
        #[serde(skip_serializing_if = "Option::is_none")]
        flags: Option<u16>,
        /// Names of the set flag bits, lowest first (`CapabilityFlags::iter`: the protocol's
        /// names, `BIT_n` for a bit the core does not define).
        flag_names: Vec<String>,
        /// The large-message extension's `u32` `max_request` (a reply with `LARGE_MESSAGES`).
        #[serde(skip_serializing_if = "Option::is_none")]
        large_max_request: Option<u32>,
        /// The large-message extension's `u32` `max_response`.
        #[serde(skip_serializing_if = "Option::is_none")]
        large_max_response: Option<u32>,
    },
    /// ERROR (`0x5`): a one-byte error code.
    Error {
        /// The code byte.
        code: u8,
        /// Its protocol name (`ErrorCode::as_str`: `BUSY`, `RESPONSE_TOO_LARGE`, ...,
        /// `UNKNOWN`).
        name: &'static str,
        /// A short description (`ErrorCode::description`).
        description: &'static str,
        /// `true` for the reference's codes (`0x01`, `0x02`); others are blerpc-rs additions
        /// that reference centrals treat as a generic error.
        reference_code: bool,
    },
    /// KEY_EXCHANGE (`0x6`): one handshake step.
    KeyExchange(KeyExchangeReport),
    /// CANCEL (`0x8`, blerpc-rs's cancel extension): the central no longer wants the answer to
    /// a request.
    Cancel {
        /// The cancelled request's transaction id.
        request_tid: u8,
    },
    /// NONE (`0x0`) or UNKNOWN (`0x7..=0xF`): unassigned, receivers skip it.
    Unknown {
        /// The 4-bit command.
        cmd_value: u8,
        /// The raw payload.
        payload_hex: String,
    },
}

/// A KEY_EXCHANGE step, by field. Keys and signatures are hex.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KeyExchangeReport {
    /// 1..=4.
    pub step: u8,
    /// The direction this step travels in (steps 1 and 3 C→P, 2 and 4 P→C).
    pub direction: Dir,
    /// Step 1: the central's ephemeral X25519 key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub central_public: Option<String>,
    /// Step 2: the peripheral's ephemeral X25519 key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peripheral_public: Option<String>,
    /// Step 2: Ed25519 signature over `central_public ‖ peripheral_public`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Step 2: the peripheral's long-term Ed25519 identity key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// Step 2: whether the signature verifies against the step 1 key seen earlier in the input
    /// (absent when no step 1 was seen).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature_valid: Option<bool>,
    /// Steps 3 and 4: the confirmation nonce.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// Steps 3 and 4: the encrypted confirmation label (16 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ciphertext: Option<String>,
    /// Steps 3 and 4: the AES-GCM tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Steps 3 and 4 with `--key`: whether it decrypts to `BLERPC_CONFIRM_C` / `_P`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmation_valid: Option<bool>,
}

/// A message reassembled from one or more containers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MessageReport {
    /// Transaction id.
    pub tid: u8,
    /// Indices of the PDUs that carried it, FIRST first.
    pub pdus: Vec<usize>,
    /// Reassembled length (`total_length`).
    pub length: usize,
    /// The reassembled bytes.
    pub hex: String,
    /// The session-layer view, when the message is (or may be) encrypted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionReport>,
    /// The command, when the (decrypted) message parses as one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandReport>,
    /// What else there is to know, e.g. why `command` is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The session frame `counter u32 ‖ ciphertext ‖ tag16`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EncryptionReport {
    /// The sender's counter.
    pub counter: u32,
    /// Ciphertext bytes (the plaintext command's length).
    pub ciphertext_len: usize,
    /// The AES-GCM tag.
    pub tag: String,
    /// `true` if it authenticated and decrypted with `--key`.
    pub decrypted: bool,
    /// The direction whose nonce authenticated it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<Dir>,
}

/// A command packet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandReport {
    /// `REQUEST` or `RESPONSE` (`CommandType::as_str`).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The command (RPC) name.
    pub name: String,
    /// Length of the protobuf data.
    pub data_len: usize,
    /// The protobuf data.
    pub data_hex: String,
    /// A request's deadline in milliseconds (the deadline extension), when it carried one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u32>,
    /// The window of a request that opens a stream (the streams extension).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u16>,
    /// The stream opened is bidirectional (the streams extension).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub bidi: bool,
    /// The bidirectional stream a request is an item of (the streams extension).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<u8>,
}

/// A transaction that did not complete within the input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IncompleteReport {
    /// Transaction id.
    pub tid: u8,
    /// Bytes received.
    pub received: usize,
    /// `total_length` announced by the FIRST container.
    pub total_length: usize,
    /// The seq the next container must carry.
    pub next_seq: u16,
    /// Indices of the PDUs received so far.
    pub pdus: Vec<usize>,
}

/// Which layer a diagnostic is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The hex text; `offset` is a character position.
    Hex,
    /// The container header; `offset` is a byte in the PDU.
    Container,
    /// Fit within the ATT MTU.
    Mtu,
    /// A CONTROL payload; `offset` is a byte in the PDU.
    Control,
    /// A KEY_EXCHANGE payload; `offset` is a byte in the PDU.
    KeyExchange,
    /// Reassembly across containers; `offset` is a byte in the PDU.
    Assembly,
    /// The session (encryption) layer; `offset` is a byte in the reassembled message.
    Session,
    /// The command packet; `offset` is a byte in the reassembled (decrypted) message.
    Command,
}

/// An error or warning, pointing at a field where it can.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The PDU it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pdu: Option<usize>,
    /// The transaction it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<u8>,
    /// Index into [`Report::messages`] of the reassembled message it is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_index: Option<usize>,
    /// The layer.
    pub layer: Layer,
    /// The wire field (as in the spec's layout diagrams).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Where: see [`Layer`] for what the offset counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// The full human-readable message (without the `PDU n:` prefix).
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.pdu, self.tid) {
            (Some(pdu), _) => write!(f, "PDU {pdu}: {}", self.message),
            (None, Some(tid)) => write!(f, "tid {tid:#04x}: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}
