//! The container: the unit carried by exactly one link PDU (one GATT write or notification).
//!
//! ```text
//! FIRST      (type 0b00): [tid u8][seq u8][flags u8][total_length u16 LE][payload_len u8][payload]  header 6
//! LARGE FIRST (type 0b00, flags bit 0 set; large-message extension only):
//!                         [tid u8][seq u8][0x01][total_length u32 LE][payload_len u8][payload]       header 8
//! SUBSEQUENT (type 0b01): [tid u8][seq u8][flags u8][payload_len u8][payload]                        header 4
//! LONG (flags bit 1 set on FIRST, LARGE FIRST or SUBSEQUENT; long-container extension only):
//!                         the same header with payload_len a u16 LE (headers 7, 9 and 5 bytes),
//!                         used exactly when the payload is longer than 255 bytes
//! CONTROL    (type 0b11): [tid u8][seq u8][flags u8][payload_len u8][payload]                        header 4
//! undefined  (type 0b10): parsed with the 4-byte header and reported as ContainerKind::Unknown
//!
//! flags:   bit 7 6 | 5 4 3 2     | 1 0
//!          type    | control_cmd | reserved (0 on emit, ignored on parse), except bit 0 of a
//!                                  FIRST container: LARGE (u32 total_length, seq wraps mod 256),
//!                                  and bit 1 of FIRST and SUBSEQUENT: LONG (u16 payload_len)
//! ```
//!
//! The LARGE FIRST variant belongs to the negotiated large-message extension (`docs/protocol.md`):
//! a sender emits it only when both peers announced the extension in CAPABILITIES and the message
//! does not fit a classic transaction (more than 65,535 bytes or 256 containers). The SUBSEQUENT
//! containers of such a transaction are unchanged; their seq counts 1, 2, ..., 255, 0, 1, ...
//!
//! The LONG variants belong to the negotiated long-container extension (`docs/protocol.md`), for
//! links without an ATT MTU (TCP, TLS, WebSocket): a container then carries up to
//! [`MAX_LONG_CONTAINER_LEN`] bytes. A payload of at most 255 bytes always uses the classic
//! one-byte `payload_len`, so every container has exactly one encoding: a LONG header announcing
//! 255 bytes or fewer is rejected ([`WireError::InvalidValue`]).
//!
//! Flag bytes on the wire: FIRST `0x00`, SUBSEQUENT `0x40`, CONTROL `0xC0 | cmd << 2` (`0xC4`
//! TIMEOUT, `0xC8` STREAM_END_C2P, `0xCC` STREAM_END_P2C, `0xD0` CAPABILITIES, `0xD4` ERROR,
//! `0xD8` KEY_EXCHANGE).
//!
//! Parsing follows the C reference: the `payload_len` bytes must be present, and bytes after them
//! are tolerated and ignored. Unlike the reference's Python, TypeScript and Kotlin decoders, an
//! undefined type or control command is never an error: it is reported as `Unknown` so the caller
//! can skip it.

use super::{WireError, err_num, out_prefix, read_slice, read_u8, read_u16, read_u32};

/// Bytes the ATT layer takes from the MTU (opcode + handle); a container fits in `mtu - 3`.
pub const ATT_OVERHEAD: usize = 3;
/// Header length of a FIRST container.
pub const FIRST_HEADER_LEN: usize = 6;
/// Header length of a LARGE FIRST container (large-message extension).
pub const LARGE_FIRST_HEADER_LEN: usize = 8;
/// The flags bit (bit 0) marking a FIRST container as LARGE FIRST.
pub const LARGE_FIRST_FLAG: u8 = 0x01;
/// Header length of SUBSEQUENT, CONTROL and undefined-type (`0b10`) containers.
pub const HEADER_LEN: usize = 4;
/// The largest payload one container carries (`payload_len` is a `u8`).
pub const MAX_CHUNK_LEN: usize = 255;
/// The flags bit (bit 1) marking a FIRST, LARGE FIRST or SUBSEQUENT container as LONG: its
/// `payload_len` is a `u16` (long-container extension).
pub const LONG_FLAG: u8 = 0x02;
/// The largest container (header included) a peer that announced long containers must accept,
/// and the largest one blerpc-rs sends: 16 KiB, one TLS record.
pub const MAX_LONG_CONTAINER_LEN: usize = 16_384;

const TYPE_FIRST: u8 = 0b00;
const TYPE_SUBSEQUENT: u8 = 0b01;
const TYPE_UNKNOWN: u8 = 0b10;
const TYPE_CONTROL: u8 = 0b11;

/// The 4-bit command of a CONTROL container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlCmd {
    /// `0x0`: unassigned; every implementation parses and skips it.
    Reserved0,
    /// `0x1`: TIMEOUT request (C→P) / response (P→C).
    Timeout,
    /// `0x2`: the central finished a C→P stream.
    StreamEndC2P,
    /// `0x3`: the peripheral finished a P→C stream.
    StreamEndP2C,
    /// `0x4`: CAPABILITIES request (C→P) / response (P→C).
    Capabilities,
    /// `0x5`: ERROR with a one-byte code (P→C).
    Error,
    /// `0x6`: one step of the key exchange.
    KeyExchange,
    /// `0x8` (blerpc-rs extension, sent only where `CANCEL` is in force): the central no longer
    /// wants the answer to the request whose tid is the one-byte payload (C→P). `0x7` stays
    /// unassigned (the reference vectors name it).
    Cancel,
    /// `0x9` (blerpc-rs extension, sent only where `STREAMS` is in force): the sender may
    /// receive `credits` more items of stream `stream` (payload `[stream u8][credits u16 LE]`,
    /// both directions).
    Credit,
    /// `0x7` and `0xA..=0xF`: not assigned. [`ControlCmd::from_bits`] never produces the
    /// named values here.
    Unknown(u8),
}

impl ControlCmd {
    /// Decodes the 4-bit command (only the low 4 bits of `cmd4` are used).
    pub const fn from_bits(cmd4: u8) -> Self {
        match cmd4 & 0x0F {
            0x0 => ControlCmd::Reserved0,
            0x1 => ControlCmd::Timeout,
            0x2 => ControlCmd::StreamEndC2P,
            0x3 => ControlCmd::StreamEndP2C,
            0x4 => ControlCmd::Capabilities,
            0x5 => ControlCmd::Error,
            0x6 => ControlCmd::KeyExchange,
            0x8 => ControlCmd::Cancel,
            0x9 => ControlCmd::Credit,
            other => ControlCmd::Unknown(other),
        }
    }

    /// The 4-bit command value (`Unknown` values are masked to 4 bits).
    pub const fn bits(self) -> u8 {
        match self {
            ControlCmd::Reserved0 => 0x0,
            ControlCmd::Timeout => 0x1,
            ControlCmd::StreamEndC2P => 0x2,
            ControlCmd::StreamEndP2C => 0x3,
            ControlCmd::Capabilities => 0x4,
            ControlCmd::Error => 0x5,
            ControlCmd::KeyExchange => 0x6,
            ControlCmd::Cancel => 0x8,
            ControlCmd::Credit => 0x9,
            ControlCmd::Unknown(b) => b & 0x0F,
        }
    }

    /// Every command this crate names, in wire order (`0x0..=0x6`, `0x8`, `0x9`).
    /// [`ControlCmd::from_bits`] decodes exactly these values to a named command and `0x7`,
    /// `0xA..=0xF` to [`ControlCmd::Unknown`].
    pub const NAMED: [ControlCmd; 9] = [
        ControlCmd::Reserved0,
        ControlCmd::Timeout,
        ControlCmd::StreamEndC2P,
        ControlCmd::StreamEndP2C,
        ControlCmd::Capabilities,
        ControlCmd::Error,
        ControlCmd::KeyExchange,
        ControlCmd::Cancel,
        ControlCmd::Credit,
    ];

    /// The command's protocol name, as the reference's `ControlCmd` spells it: `NONE` (`0x0`),
    /// `TIMEOUT`, `STREAM_END_C2P`, `STREAM_END_P2C`, `CAPABILITIES`, `ERROR`, `KEY_EXCHANGE`,
    /// blerpc-rs's `CANCEL` (`0x8`) and `CREDIT` (`0x9`), and `UNKNOWN` for `0x7` and
    /// `0xA..=0xF`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ControlCmd::Reserved0 => "NONE",
            ControlCmd::Timeout => "TIMEOUT",
            ControlCmd::StreamEndC2P => "STREAM_END_C2P",
            ControlCmd::StreamEndP2C => "STREAM_END_P2C",
            ControlCmd::Capabilities => "CAPABILITIES",
            ControlCmd::Error => "ERROR",
            ControlCmd::KeyExchange => "KEY_EXCHANGE",
            ControlCmd::Cancel => "CANCEL",
            ControlCmd::Credit => "CREDIT",
            ControlCmd::Unknown(_) => "UNKNOWN",
        }
    }
}

/// The protocol name ([`ControlCmd::as_str`]); an unassigned command shows its value too:
/// `TIMEOUT`, `UNKNOWN(0x7)`.
impl core::fmt::Display for ControlCmd {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ControlCmd::Unknown(_) => write!(f, "{}({:#x})", self.as_str(), self.bits()),
            _ => f.write_str(self.as_str()),
        }
    }
}

/// What a container is, from its flags byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerKind {
    /// The first (often only) container of a message; `seq` is 0.
    First {
        /// Length of the whole message the containers of this transaction carry.
        total_length: u16,
    },
    /// The first container of a large-message transaction (flags `0x01`, 8-byte header); only
    /// valid where the large-message extension is in force.
    LargeFirst {
        /// Length of the whole message (u32).
        total_length: u32,
    },
    /// A continuation of the message started by the FIRST container with the same tid.
    Subsequent,
    /// A control message; the payload is decoded by [`crate::wire::control`].
    Control(ControlCmd),
    /// The undefined type `0b10`, parsed with a 4-byte header. Receivers ignore it.
    Unknown,
}

impl ContainerKind {
    /// The container type's name, as the reference's `ContainerType` spells it: `FIRST`,
    /// `SUBSEQUENT`, `CONTROL`, `UNKNOWN` for the undefined type `0b10`, and `LARGE_FIRST` for
    /// the large-message extension's FIRST.
    pub const fn as_str(&self) -> &'static str {
        match self {
            ContainerKind::First { .. } => "FIRST",
            ContainerKind::LargeFirst { .. } => "LARGE_FIRST",
            ContainerKind::Subsequent => "SUBSEQUENT",
            ContainerKind::Control(_) => "CONTROL",
            ContainerKind::Unknown => "UNKNOWN",
        }
    }

    /// The message length a FIRST or LARGE FIRST container announces; `None` for the others.
    pub fn total_length(&self) -> Option<usize> {
        match *self {
            ContainerKind::First { total_length } => Some(usize::from(total_length)),
            ContainerKind::LargeFirst { total_length } => usize::try_from(total_length).ok(),
            _ => None,
        }
    }
}

/// Where a container's `payload_len` sits (FIRST 5, LARGE FIRST 7, every other type 3) and
/// whether it is a `u16` (LONG: flags bit 1 on FIRST, LARGE FIRST and SUBSEQUENT), from its flags
/// byte.
#[inline(always)]
const fn payload_len_field(flags: u8) -> (usize, bool) {
    let kind = flags >> 6;
    let offset = match kind {
        TYPE_FIRST if flags & LARGE_FIRST_FLAG != 0 => LARGE_FIRST_HEADER_LEN - 1,
        TYPE_FIRST => FIRST_HEADER_LEN - 1,
        _ => HEADER_LEN - 1,
    };
    (offset, kind <= TYPE_SUBSEQUENT && flags & LONG_FLAG != 0)
}

/// One container, borrowing its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Container<'a> {
    /// Transaction id: all containers of one message share it.
    pub tid: u8,
    /// Sequence number within the transaction: 0 for FIRST, then 1, 2, ... (0 for CONTROL).
    pub seq: u8,
    /// The container type (and control command).
    pub kind: ContainerKind,
    /// The payload (`payload_len` bytes).
    pub payload: &'a [u8],
}

impl<'a> Container<'a> {
    /// Parses one PDU. The declared payload must be present; trailing bytes are ignored.
    ///
    /// Always inlined: it runs once per PDU, and inlined, the container it returns is built in
    /// the caller's own variable instead of being copied out of a returned `Result`.
    #[inline(always)]
    pub fn parse(pdu: &'a [u8]) -> Result<Container<'a>, WireError> {
        let tid = read_u8(pdu, 0, "tid")?;
        let seq = read_u8(pdu, 1, "seq")?;
        let flags = read_u8(pdu, 2, "flags")?;
        let (len_offset, long) = payload_len_field(flags);
        let kind = match flags >> 6 {
            TYPE_FIRST if flags & LARGE_FIRST_FLAG != 0 => ContainerKind::LargeFirst {
                total_length: read_u32(pdu, 3, "total_length")?,
            },
            TYPE_FIRST => ContainerKind::First {
                total_length: read_u16(pdu, 3, "total_length")?,
            },
            TYPE_SUBSEQUENT => ContainerKind::Subsequent,
            TYPE_CONTROL => ContainerKind::Control(ControlCmd::from_bits(flags >> 2)),
            _ => ContainerKind::Unknown,
        };
        let (payload_len, payload_at) = if long {
            let n = read_u16(pdu, len_offset, "payload_len")?;
            if usize::from(n) <= MAX_CHUNK_LEN {
                // Not the canonical encoding: short payloads use the one-byte length.
                return Err(WireError::InvalidValue {
                    field: "payload_len",
                    offset: err_num(len_offset),
                    value: u32::from(n),
                });
            }
            (usize::from(n), len_offset + 2)
        } else {
            (
                usize::from(read_u8(pdu, len_offset, "payload_len")?),
                len_offset + 1,
            )
        };
        let payload = read_slice(pdu, payload_at, payload_len, "payload")?;
        Ok(Container {
            tid,
            seq,
            kind,
            payload,
        })
    }

    /// The length of the container that starts `buf` (header plus payload), read from its
    /// header alone, or `None` while the header is incomplete. Bytes after the header are not
    /// looked at, so a stream link learns from the first bytes how many to wait for.
    ///
    /// ```text
    /// FIRST        [tid][seq][0b00......][total_length u16][payload_len]     6 + payload_len
    /// LARGE FIRST  [tid][seq][0b00.....1][total_length u32][payload_len]     8 + payload_len
    /// SUBSEQUENT, CONTROL, undefined type: [tid][seq][flags][payload_len]    4 + payload_len
    /// LONG (flags bit 1, FIRST / LARGE FIRST / SUBSEQUENT): payload_len a u16, one byte more
    /// ```
    ///
    /// The length is the one [`Container::parse`] reads; whether the header is otherwise valid
    /// (a LONG length above 255) is left to it.
    ///
    /// ```
    /// use blerpc_proto::wire::container::Container;
    ///
    /// assert_eq!(Container::peek_len(&[0x00, 0x00, 0xc4, 0x02]), Some(6)); // TIMEOUT response
    /// assert_eq!(Container::peek_len(&[0x00, 0x00, 0x00, 0x28, 0x00]), None); // FIRST, 5 bytes
    /// ```
    pub fn peek_len(buf: &[u8]) -> Option<usize> {
        let (len_at, long) = payload_len_field(*buf.get(2)?);
        if long {
            let n = u16::from_le_bytes([*buf.get(len_at)?, *buf.get(len_at + 1)?]);
            Some(len_at + 2 + usize::from(n))
        } else {
            Some(len_at + 1 + usize::from(*buf.get(len_at)?))
        }
    }

    /// A FIRST container (seq 0).
    pub const fn first(tid: u8, total_length: u16, payload: &'a [u8]) -> Self {
        Container {
            tid,
            seq: 0,
            kind: ContainerKind::First { total_length },
            payload,
        }
    }

    /// A LARGE FIRST container (seq 0; large-message extension).
    pub const fn large_first(tid: u8, total_length: u32, payload: &'a [u8]) -> Self {
        Container {
            tid,
            seq: 0,
            kind: ContainerKind::LargeFirst { total_length },
            payload,
        }
    }

    /// A SUBSEQUENT container.
    pub const fn subsequent(tid: u8, seq: u8, payload: &'a [u8]) -> Self {
        Container {
            tid,
            seq,
            kind: ContainerKind::Subsequent,
            payload,
        }
    }

    /// A CONTROL container (seq 0).
    pub const fn control(tid: u8, cmd: ControlCmd, payload: &'a [u8]) -> Self {
        Container {
            tid,
            seq: 0,
            kind: ContainerKind::Control(cmd),
            payload,
        }
    }

    /// `true` for a LONG container: a FIRST, LARGE FIRST or SUBSEQUENT one whose payload is
    /// longer than [`MAX_CHUNK_LEN`] (long-container extension; `u16` `payload_len`).
    pub const fn is_long(&self) -> bool {
        self.payload.len() > MAX_CHUNK_LEN
            && matches!(
                self.kind,
                ContainerKind::First { .. }
                    | ContainerKind::LargeFirst { .. }
                    | ContainerKind::Subsequent
            )
    }

    /// The flags byte this container is emitted with.
    pub const fn flags(&self) -> u8 {
        let long = if self.is_long() { LONG_FLAG } else { 0 };
        match self.kind {
            ContainerKind::First { .. } => (TYPE_FIRST << 6) | long,
            ContainerKind::LargeFirst { .. } => (TYPE_FIRST << 6) | LARGE_FIRST_FLAG | long,
            ContainerKind::Subsequent => (TYPE_SUBSEQUENT << 6) | long,
            ContainerKind::Control(cmd) => (TYPE_CONTROL << 6) | (cmd.bits() << 2),
            ContainerKind::Unknown => TYPE_UNKNOWN << 6,
        }
    }

    /// Header length: [`FIRST_HEADER_LEN`] for FIRST, [`LARGE_FIRST_HEADER_LEN`] for LARGE
    /// FIRST, [`HEADER_LEN`] otherwise; one more for a LONG container ([`Container::is_long`]).
    pub fn header_len(&self) -> usize {
        let base = match self.kind {
            ContainerKind::First { .. } => FIRST_HEADER_LEN,
            ContainerKind::LargeFirst { .. } => LARGE_FIRST_HEADER_LEN,
            _ => HEADER_LEN,
        };
        base + usize::from(self.is_long())
    }

    /// Header plus payload: the bytes [`Container::emit`] writes.
    pub fn emitted_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Writes the container to the start of `out` and returns its length.
    ///
    /// Payloads above [`MAX_CHUNK_LEN`] are written as LONG containers (FIRST, LARGE FIRST and
    /// SUBSEQUENT only; the sender must have the long-container extension in force). Fails with
    /// [`WireError::TooLong`] when the payload exceeds [`MAX_CHUNK_LEN`] (CONTROL, undefined
    /// type) or `u16::MAX`, and with [`WireError::BufferTooSmall`] when `out` is shorter than
    /// [`Container::emitted_len`].
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let max = if matches!(
            self.kind,
            ContainerKind::Control(_) | ContainerKind::Unknown
        ) {
            MAX_CHUNK_LEN
        } else {
            usize::from(u16::MAX)
        };
        let payload_len = u16::try_from(self.payload.len())
            .ok()
            .filter(|&n| usize::from(n) <= max)
            .ok_or(WireError::TooLong {
                field: "payload",
                len: err_num(self.payload.len()),
                max: err_num(max),
            })?;
        let len = self.emitted_len();
        let buf = out_prefix(out, len)?;
        let [tid, seq, flags] = [self.tid, self.seq, self.flags()];
        let [n0, n1] = payload_len.to_le_bytes();
        let header = match self.kind {
            ContainerKind::First { total_length } => {
                let [t0, t1] = total_length.to_le_bytes();
                [tid, seq, flags, t0, t1, n0, n1, 0, 0]
            }
            ContainerKind::LargeFirst { total_length } => {
                let [t0, t1, t2, t3] = total_length.to_le_bytes();
                [tid, seq, flags, t0, t1, t2, t3, n0, n1]
            }
            _ => [tid, seq, flags, n0, n1, 0, 0, 0, 0],
        };
        let header_len = self.header_len();
        let (head, body) = buf.split_at_mut(header_len);
        if let Some(h) = header.get(..header_len) {
            head.copy_from_slice(h);
        }
        // Up to a 16 KiB payload (long containers): the copy that can hit the slow `rep movsb`
        // case.
        let _ = crate::buf::copy_bytes(body, self.payload);
        Ok(len)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;

    fn emit_vec(c: &Container<'_>) -> std::vec::Vec<u8> {
        let mut out = std::vec![0u8; c.emitted_len()];
        assert_eq!(c.emit(&mut out), Ok(c.emitted_len()));
        out
    }

    extern crate std;

    #[test]
    fn first_containers_announce_their_total_length() {
        // FIRST of 6 bytes, LARGE FIRST of 1 MiB, SUBSEQUENT and CONTROL announce none.
        let first = Container::parse(&[0x03, 0x00, 0x00, 0x06, 0x00, 0x04, 1, 2, 3, 4]).unwrap();
        assert_eq!(first.kind.total_length(), Some(6));
        let large = Container::parse(&[0x04, 0x00, 0x01, 0x00, 0x00, 0x10, 0x00, 0x00]).unwrap();
        assert_eq!(large.kind.total_length(), Some(1 << 20));
        let sub = Container::parse(&[0x03, 0x01, 0x40, 0x01, 5]).unwrap();
        assert_eq!(sub.kind.total_length(), None);
        let control = Container::parse(&[0x00, 0x00, 0xc4, 0x00]).unwrap();
        assert_eq!(control.kind.total_length(), None);
    }

    #[test]
    fn control_vectors_parse_and_emit() {
        let vectors: &[(&[u8], Container<'_>)] = &[
            (
                &[0x00, 0x00, 0xc4, 0x00],
                Container::control(0, ControlCmd::Timeout, &[]),
            ),
            (
                &[0x00, 0x00, 0xc4, 0x02, 0x64, 0x00],
                Container::control(0, ControlCmd::Timeout, &[0x64, 0x00]),
            ),
            (
                &[0x01, 0x00, 0xd0, 0x06, 0x00, 0x30, 0xff, 0xff, 0x01, 0x00],
                Container::control(1, ControlCmd::Capabilities, &[0x00, 0x30, 0xff, 0xff, 1, 0]),
            ),
            (
                &[0x00, 0x00, 0xd0, 0x00],
                Container::control(0, ControlCmd::Capabilities, &[]),
            ),
            (
                &[0x05, 0x00, 0xd4, 0x01, 0x02],
                Container::control(5, ControlCmd::Error, &[0x02]),
            ),
            (
                &[0x09, 0x00, 0xc8, 0x00],
                Container::control(9, ControlCmd::StreamEndC2P, &[]),
            ),
            (
                &[0x09, 0x00, 0xcc, 0x00],
                Container::control(9, ControlCmd::StreamEndP2C, &[]),
            ),
        ];
        for (bytes, container) in vectors {
            assert_eq!(
                Container::parse(bytes).as_ref(),
                Ok(container),
                "{bytes:02x?}"
            );
            assert_eq!(emit_vec(container), *bytes);
        }
    }

    #[test]
    fn first_container_vector() {
        // REQUEST flash_read as a FIRST container, tid 0 (wire.md 6.2).
        let bytes = [
            0x00, 0x00, 0x00, 0x11, 0x00, 0x11, 0x00, 0x0a, 0x66, 0x6c, 0x61, 0x73, 0x68, 0x5f,
            0x72, 0x65, 0x61, 0x64, 0x03, 0x00, 0x10, 0x80, 0x40,
        ];
        let c = Container::parse(&bytes).unwrap();
        assert_eq!(c.kind, ContainerKind::First { total_length: 17 });
        assert_eq!(c.payload.len(), 17);
        assert_eq!(c.header_len(), FIRST_HEADER_LEN);
        assert_eq!(emit_vec(&c), bytes);
        // Empty message, tid 7.
        let empty = [0x07, 0x00, 0x00, 0x00, 0x00, 0x00];
        assert_eq!(Container::parse(&empty), Ok(Container::first(7, 0, &[])));
        assert_eq!(emit_vec(&Container::first(7, 0, &[])), empty);
    }

    #[test]
    fn subsequent_vector() {
        let bytes = [0x2a, 0x02, 0x40, 0x03, 0x42, 0x42, 0x42];
        let c = Container::subsequent(0x2a, 2, &[0x42; 3]);
        assert_eq!(Container::parse(&bytes), Ok(c));
        assert_eq!(emit_vec(&c), bytes);
    }

    #[test]
    fn truncated_payload_rejected_trailing_bytes_ignored() {
        assert_eq!(
            Container::parse(&[0x2a, 0x01, 0x40, 0x03, 0x42, 0x42]),
            Err(WireError::Truncated {
                field: "payload",
                offset: 4,
                needed: 3,
                available: 2
            })
        );
        assert_eq!(
            Container::parse(&[0x00, 0x00, 0x00, 0x11]),
            Err(WireError::Truncated {
                field: "total_length",
                offset: 3,
                needed: 2,
                available: 1
            })
        );
        assert!(matches!(
            Container::parse(&[0x00, 0x00, 0xc4]),
            Err(WireError::Truncated {
                field: "payload_len",
                ..
            })
        ));
        assert!(Container::parse(&[]).is_err());
        assert_eq!(
            Container::parse(&[0x05, 0x00, 0xd4, 0x01, 0x02, 0xff, 0xff]),
            Ok(Container::control(5, ControlCmd::Error, &[0x02]))
        );
    }

    #[test]
    fn reserved_bits_unknown_type_and_cmd() {
        // Reserved flag bits 1..0 are ignored on CONTROL, bit 0 on SUBSEQUENT.
        assert_eq!(
            Container::parse(&[0x00, 0x00, 0xc7, 0x00]),
            Ok(Container::control(0, ControlCmd::Timeout, &[]))
        );
        assert_eq!(
            Container::parse(&[1, 1, 0x41, 0]),
            Ok(Container::subsequent(1, 1, &[]))
        );
        // Bit 1 of the undefined type is ignored too (no LONG form there).
        assert_eq!(
            Container::parse(&[1, 1, 0x82, 0]).map(|c| c.kind),
            Ok(ContainerKind::Unknown)
        );
        // Type 0b10 parses with a 4-byte header.
        let c = Container::parse(&[0x01, 0x01, 0x80, 0x02, 0x63, 0x64]).unwrap();
        assert_eq!(c.kind, ContainerKind::Unknown);
        assert_eq!(c.payload, b"cd");
        assert_eq!(emit_vec(&c), [0x01, 0x01, 0x80, 0x02, 0x63, 0x64]);
        // Control cmd 0x0, 0x7 and 0xF.
        for (flags, cmd) in [
            (0xc0, ControlCmd::Reserved0),
            (0xdc, ControlCmd::Unknown(7)),
            (0xfc, ControlCmd::Unknown(15)),
        ] {
            let bytes = [3, 0, flags, 0];
            let c = Container::parse(&bytes).unwrap();
            assert_eq!(c.kind, ContainerKind::Control(cmd));
            assert_eq!(emit_vec(&c), [3, 0, flags, 0]);
        }
    }

    #[test]
    fn peek_len_reads_the_header() {
        // FIRST: 6 + payload_len (byte 5).
        assert_eq!(Container::peek_len(&[1, 0, 0x00, 5, 0, 5]), Some(11));
        assert_eq!(Container::peek_len(&[1, 0, 0x00, 5, 0]), None);
        // LARGE FIRST (flags bit 0): 8 + payload_len (byte 7).
        assert_eq!(
            Container::peek_len(&[1, 0, 0x01, 0, 0, 1, 0, 236]),
            Some(244)
        );
        assert_eq!(Container::peek_len(&[1, 0, 0x01, 0, 0, 1, 0]), None);
        // LONG (flags bit 1): a u16 payload_len at bytes 5-6 (FIRST), 7-8 (LARGE FIRST) or
        // 3-4 (SUBSEQUENT).
        assert_eq!(
            Container::peek_len(&[1, 0, 0x02, 0, 1, 0x00, 0x01]),
            Some(7 + 256)
        );
        assert_eq!(Container::peek_len(&[1, 0, 0x02, 0, 1, 0x00]), None);
        assert_eq!(
            Container::peek_len(&[1, 0, 0x03, 0, 0, 1, 0, 0xf7, 0x3f]),
            Some(16_384)
        );
        assert_eq!(Container::peek_len(&[1, 0, 0x03, 0, 0, 1, 0, 0xf7]), None);
        assert_eq!(Container::peek_len(&[1, 3, 0x42, 0xfb, 0x3f]), Some(16_384));
        assert_eq!(Container::peek_len(&[1, 3, 0x42, 0xfb]), None);
        // SUBSEQUENT, CONTROL, undefined type: 4 + payload_len (byte 3); reserved bits ignored
        // (bit 1 of CONTROL and of the undefined type is not LONG).
        assert_eq!(Container::peek_len(&[1, 1, 0x40, 240]), Some(244));
        assert_eq!(Container::peek_len(&[1, 1, 0x41, 240]), Some(244));
        assert_eq!(Container::peek_len(&[1, 0, 0xD4, 1]), Some(5));
        assert_eq!(Container::peek_len(&[1, 0, 0xD6, 1]), Some(5));
        assert_eq!(Container::peek_len(&[1, 0, 0x83, 0]), Some(4));
        assert_eq!(Container::peek_len(&[1, 0]), None);
        assert_eq!(Container::peek_len(&[]), None);
    }

    #[test]
    fn peek_len_agrees_with_parse() {
        // Every header shape, emitted: the peek from the first bytes is the emitted length.
        let long = [0x5au8; 300];
        let containers = [
            Container::first(1, 3, b"abc"),
            Container::first(1, 300, &long),
            Container::large_first(2, 70_000, b"ab"),
            Container::large_first(2, 70_000, &long),
            Container::subsequent(3, 4, b"abcd"),
            Container::subsequent(3, 4, &long),
            Container::control(4, ControlCmd::Error, &[0x02]),
            Container::control(4, ControlCmd::Unknown(9), &[]),
        ];
        for c in containers {
            let bytes = emit_vec(&c);
            assert_eq!(Container::peek_len(&bytes), Some(bytes.len()), "{c:?}");
            assert_eq!(
                Container::parse(&bytes).map(|p| p.emitted_len()),
                Ok(bytes.len())
            );
            // Header bytes alone are enough; one fewer is not.
            let header = c.header_len();
            assert_eq!(
                Container::peek_len(bytes.get(..header).unwrap()),
                Some(bytes.len())
            );
            assert_eq!(Container::peek_len(bytes.get(..header - 1).unwrap()), None);
        }
    }

    #[test]
    fn every_control_cmd_has_its_name() {
        // The flags byte and the name of every named command, written out (wire.md 1.2): a
        // command added to the enum without a name fails `as_str`'s exhaustive match, and one
        // left out of `NAMED` fails the count below.
        let expected: [(u8, &str); 9] = [
            (0xc0, "NONE"),
            (0xc4, "TIMEOUT"),
            (0xc8, "STREAM_END_C2P"),
            (0xcc, "STREAM_END_P2C"),
            (0xd0, "CAPABILITIES"),
            (0xd4, "ERROR"),
            (0xd8, "KEY_EXCHANGE"),
            (0xe0, "CANCEL"),
            (0xe4, "CREDIT"),
        ];
        assert_eq!(ControlCmd::NAMED.len(), expected.len());
        for (cmd, (flags, name)) in ControlCmd::NAMED.iter().zip(expected) {
            let bytes = [0, 0, flags, 0];
            let c = Container::parse(&bytes).unwrap();
            assert_eq!(c.kind, ContainerKind::Control(*cmd));
            assert_eq!(cmd.as_str(), name);
            assert_eq!(std::format!("{cmd}"), name);
        }
        let named = (0..16u8)
            .filter(|&b| !matches!(ControlCmd::from_bits(b), ControlCmd::Unknown(_)))
            .count();
        assert_eq!(named, ControlCmd::NAMED.len());
        // 0x7 and 0xA..=0xF: one name, the value in Display.
        let c = Container::parse(&[0, 0, 0xdc, 0]).unwrap();
        let ContainerKind::Control(cmd) = c.kind else {
            panic!("{c:?}")
        };
        assert_eq!(cmd.as_str(), "UNKNOWN");
        assert_eq!(std::format!("{cmd}"), "UNKNOWN(0x7)");
        assert_eq!(
            std::format!("{}", ControlCmd::from_bits(0xf)),
            "UNKNOWN(0xf)"
        );
    }

    #[test]
    fn container_kinds_are_named() {
        let cases: [(&[u8], &str); 5] = [
            (&[0, 0, 0x00, 0, 0, 0], "FIRST"),
            (&[0, 0, 0x01, 0, 0, 0, 0, 0], "LARGE_FIRST"),
            (&[0, 1, 0x40, 0], "SUBSEQUENT"),
            (&[0, 0, 0xc4, 0], "CONTROL"),
            (&[0, 0, 0x80, 0], "UNKNOWN"),
        ];
        for (bytes, name) in cases {
            assert_eq!(Container::parse(bytes).unwrap().kind.as_str(), name);
        }
    }

    #[test]
    fn control_cmd_bits_roundtrip() {
        for b in 0..16u8 {
            assert_eq!(ControlCmd::from_bits(b).bits(), b);
        }
        assert_eq!(ControlCmd::from_bits(0xf6), ControlCmd::KeyExchange);
        assert_eq!(ControlCmd::KeyExchange.bits() << 2 | 0xc0, 0xd8);
    }

    #[test]
    fn emit_errors() {
        let big = [0u8; 256];
        assert_eq!(
            Container::control(0, ControlCmd::Error, &big).emit(&mut [0; 300]),
            Err(WireError::TooLong {
                field: "payload",
                len: 256,
                max: 255
            })
        );
        let huge = std::vec![0u8; 65_536];
        assert_eq!(
            Container::subsequent(0, 1, &huge).emit(&mut std::vec![0; 70_000]),
            Err(WireError::TooLong {
                field: "payload",
                len: 65_536,
                max: 65_535
            })
        );
        assert_eq!(
            Container::first(0, 3, b"abc").emit(&mut [0; 8]),
            Err(WireError::BufferTooSmall {
                needed: 9,
                available: 8
            })
        );
        let max = [0x11u8; 255];
        let mut out = [0u8; 261];
        assert_eq!(Container::first(1, 255, &max).emit(&mut out), Ok(261));
        assert_eq!(out.get(..6), Some(&[1, 0, 0, 0xff, 0, 0xff][..]));
    }

    #[test]
    fn large_first_vector() {
        // tid 0x2a, total 65,536 (00 00 01 00), payload_len 3.
        let bytes = [
            0x2a, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x03, 0xaa, 0xbb, 0xcc,
        ];
        let c = Container::parse(&bytes).unwrap();
        assert_eq!(c, Container::large_first(0x2a, 65_536, &[0xaa, 0xbb, 0xcc]));
        assert_eq!(c.header_len(), LARGE_FIRST_HEADER_LEN);
        assert_eq!(c.flags(), 0x01);
        assert_eq!(emit_vec(&c), bytes);
        // 16 MiB, empty payload; trailing bytes ignored.
        let bytes = [0x07, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0xee];
        assert_eq!(
            Container::parse(&bytes),
            Ok(Container::large_first(7, 0x0100_0000, &[]))
        );
        // Bit 0 alone selects the variant; bit 1 (LONG) changes only the length field.
        assert_eq!(
            Container::parse(&[1, 0, 0x00, 4, 0, 0]).map(|c| c.kind),
            Ok(ContainerKind::First { total_length: 4 })
        );
    }

    #[test]
    fn long_container_vectors() {
        // SUBSEQUENT, tid 0x2a, seq 3, 256 bytes of 0x5a: [2a 03 42 00 01] + payload.
        let payload = [0x5au8; 256];
        let mut bytes = std::vec![0x2a, 0x03, 0x42, 0x00, 0x01];
        bytes.extend_from_slice(&payload);
        let c = Container::subsequent(0x2a, 3, &payload);
        assert!(c.is_long());
        assert_eq!(c.flags(), 0x42);
        assert_eq!(c.header_len(), 5);
        assert_eq!(Container::parse(&bytes), Ok(c));
        assert_eq!(emit_vec(&c), bytes);
        // FIRST, total 1,000, 300-byte chunk: [07 00 02 e8 03 2c 01].
        let payload = [0x11u8; 300];
        let mut bytes = std::vec![0x07, 0x00, 0x02, 0xe8, 0x03, 0x2c, 0x01];
        bytes.extend_from_slice(&payload);
        let c = Container::first(7, 1000, &payload);
        assert_eq!(c.header_len(), 7);
        assert_eq!(Container::parse(&bytes), Ok(c));
        assert_eq!(emit_vec(&c), bytes);
        // LARGE FIRST, total 100,000 (a0 86 01 00), 16,375-byte chunk (f7 3f): header 9.
        let payload = std::vec![0x22u8; 16_375];
        let mut bytes = std::vec![0x01, 0x00, 0x03, 0xa0, 0x86, 0x01, 0x00, 0xf7, 0x3f];
        bytes.extend_from_slice(&payload);
        let c = Container::large_first(1, 100_000, &payload);
        assert_eq!(c.flags(), 0x03);
        assert_eq!(c.emitted_len(), MAX_LONG_CONTAINER_LEN);
        assert_eq!(Container::parse(&bytes), Ok(c));
        assert_eq!(emit_vec(&c), bytes);
        // 255 bytes or fewer: always the classic header, whatever the link.
        let c = Container::subsequent(1, 1, &[0u8; 255]);
        assert!(!c.is_long());
        assert_eq!(c.header_len(), HEADER_LEN);
        assert_eq!(emit_vec(&c).get(..4), Some(&[1, 1, 0x40, 0xff][..]));
        // CONTROL never has a LONG form: bit 1 is reserved and ignored there.
        assert!(!Container::control(0, ControlCmd::Error, &[0; 3]).is_long());
    }

    #[test]
    fn long_container_rejects_short_lengths_and_truncation() {
        // A LONG header announcing 255 bytes: not canonical.
        let mut bytes = std::vec![0x2a, 0x01, 0x42, 0xff, 0x00];
        bytes.extend_from_slice(&[0; 255]);
        assert_eq!(
            Container::parse(&bytes),
            Err(WireError::InvalidValue {
                field: "payload_len",
                offset: 3,
                value: 255
            })
        );
        // ... or 0 (FIRST, LARGE FIRST).
        assert_eq!(
            Container::parse(&[0, 0, 0x02, 0, 0, 0, 0]),
            Err(WireError::InvalidValue {
                field: "payload_len",
                offset: 5,
                value: 0
            })
        );
        assert_eq!(
            Container::parse(&[0, 0, 0x03, 0, 0, 0, 0, 0, 0]),
            Err(WireError::InvalidValue {
                field: "payload_len",
                offset: 7,
                value: 0
            })
        );
        // Half a length, and a payload shorter than announced.
        assert_eq!(
            Container::parse(&[0x2a, 0x01, 0x42, 0x00]),
            Err(WireError::Truncated {
                field: "payload_len",
                offset: 3,
                needed: 2,
                available: 1
            })
        );
        assert_eq!(
            Container::parse(&[0x2a, 0x01, 0x42, 0x00, 0x01, 0xaa]),
            Err(WireError::Truncated {
                field: "payload",
                offset: 5,
                needed: 256,
                available: 1
            })
        );
    }

    #[test]
    fn large_first_truncated_headers() {
        assert_eq!(
            Container::parse(&[0x2a, 0x00, 0x01, 0x00, 0x00, 0x01]),
            Err(WireError::Truncated {
                field: "total_length",
                offset: 3,
                needed: 4,
                available: 3
            })
        );
        assert_eq!(
            Container::parse(&[0x2a, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00]),
            Err(WireError::Truncated {
                field: "payload_len",
                offset: 7,
                needed: 1,
                available: 0
            })
        );
        assert_eq!(
            Container::parse(&[0x2a, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x02, 0xaa]),
            Err(WireError::Truncated {
                field: "payload",
                offset: 8,
                needed: 2,
                available: 1
            })
        );
    }
}
