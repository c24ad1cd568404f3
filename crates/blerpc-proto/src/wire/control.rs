//! The payloads of CONTROL containers. They are never encrypted or fragmented, and `seq` is 0.
//!
//! ```text
//! container: [tid][0x00][0xC0 | cmd << 2][payload_len][payload]
//!
//! cmd  name            dir  payload
//! 0x1  TIMEOUT         C→P  empty (any payload ignored)
//! 0x1  TIMEOUT         P→C  [timeout_ms u16 LE]                      e.g. 64 00 = 100 ms
//! 0x2  STREAM_END_C2P  C→P  empty
//! 0x3  STREAM_END_P2C  P→C  empty
//! 0x4  CAPABILITIES    C→P  empty (C central) or 6 bytes (others: zeros; blerpc-rs sets flags
//!                           bit 1 to announce large messages)
//! 0x4  CAPABILITIES    P→C  [max_request u16][max_response u16][flags u16]   (see capabilities)
//!                           + [max_request u32][max_response u32] with the large-message bit
//! 0x5  ERROR           P→C  [code u8]                                  (see error_code)
//! 0x6  KEY_EXCHANGE    both [step u8][...]                             (see key_exchange)
//! 0x2  STREAM_END_C2P  C→P  [stream u8] with the streams extension: ends the central's half of
//!                           the bidirectional stream opened by request `stream`
//! 0x8  CANCEL          C→P  [request tid u8]                           (cancel extension)
//! 0x9  CREDIT          both [stream u8][credits u16 LE]                (streams extension)
//! 0x0, 0x7, 0xA..=0xF  any  unassigned: reported as Unknown, never an error
//! ```
//!
//! TIMEOUT and CAPABILITIES mean a request or a response depending on the direction, so
//! [`ControlMessage::parse`] takes the [`Direction`] the container travelled in. Reference centrals
//! accept a TIMEOUT response only when it is exactly 2 bytes; this parser accepts 2 or more and
//! ignores the rest. Trailing bytes of ERROR and CAPABILITIES payloads are ignored too.

use super::capabilities::{CAPABILITIES_LEN, Capabilities};
use super::container::{Container, ControlCmd, HEADER_LEN, MAX_CHUNK_LEN};
use super::error_code::ErrorCode;
use super::{WireError, err_num, out_prefix, read_u8, read_u16};
use crate::Direction;

/// Length of a TIMEOUT response payload.
pub const TIMEOUT_RESPONSE_LEN: usize = 2;

/// A decoded CONTROL payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlMessage<'a> {
    /// The central asks for the peripheral's per-call timeout.
    TimeoutRequest,
    /// The peripheral's per-call timeout.
    TimeoutResponse {
        /// Milliseconds the central should wait for a response.
        timeout_ms: u16,
    },
    /// The central finished a C→P stream: a classic upload (an empty payload), or its half of
    /// the bidirectional stream opened by request `stream` (the streams extension).
    StreamEndC2P {
        /// The bidirectional stream's id (its open request's tid), if the payload names one.
        stream: Option<u8>,
    },
    /// The peripheral finished a P→C stream.
    StreamEndP2C,
    /// The central asks for the peripheral's capabilities.
    CapabilitiesRequest {
        /// The central's own values: `Some` when a 6-byte payload was sent (reference centrals send
        /// zeros), `None` for the empty request of the C central.
        advertised: Option<Capabilities>,
    },
    /// The peripheral's capabilities.
    CapabilitiesResponse(Capabilities),
    /// The peripheral reports an error for the transaction with this tid.
    Error(ErrorCode),
    /// One key-exchange step, undecoded (see [`crate::wire::key_exchange`]).
    KeyExchange(&'a [u8]),
    /// blerpc-rs extension (CAPABILITIES flag `CANCEL`): the central no longer wants the answer
    /// to the request with this tid.
    Cancel {
        /// The request's transaction id.
        tid: u8,
    },
    /// blerpc-rs extension (CAPABILITIES flag `STREAMS`): the receiver of this control may
    /// send `credits` more items of stream `stream` (the tid of the request that opened it).
    Credit {
        /// The stream's id: its open request's transaction id.
        stream: u8,
        /// Items granted, on top of those granted before.
        credits: u16,
    },
    /// Command `0x0`, `0x7` or `0xA..=0xF`: receivers skip it.
    Unknown {
        /// The 4-bit command.
        cmd: u8,
        /// The raw payload.
        payload: &'a [u8],
    },
}

impl<'a> ControlMessage<'a> {
    /// Decodes the payload of a CONTROL container with command `cmd` sent in direction `dir`.
    ///
    /// Fails only for a TIMEOUT response shorter than 2 bytes, a CAPABILITIES response shorter
    /// than 4 bytes, an empty ERROR or CANCEL payload, and a CREDIT payload shorter than 3
    /// bytes.
    pub fn parse(cmd: ControlCmd, payload: &'a [u8], dir: Direction) -> Result<Self, WireError> {
        use Direction::{CentralToPeripheral as C2P, PeripheralToCentral as P2C};
        Ok(match (cmd, dir) {
            (ControlCmd::Timeout, C2P) => ControlMessage::TimeoutRequest,
            (ControlCmd::Timeout, P2C) => ControlMessage::TimeoutResponse {
                timeout_ms: read_u16(payload, 0, "timeout_ms")?,
            },
            (ControlCmd::StreamEndC2P, _) => ControlMessage::StreamEndC2P {
                stream: payload.first().copied(),
            },
            (ControlCmd::StreamEndP2C, _) => ControlMessage::StreamEndP2C,
            (ControlCmd::Capabilities, C2P) => ControlMessage::CapabilitiesRequest {
                advertised: if payload.len() >= CAPABILITIES_LEN {
                    Some(Capabilities::parse_classic(payload)?)
                } else {
                    None
                },
            },
            (ControlCmd::Capabilities, P2C) => {
                ControlMessage::CapabilitiesResponse(Capabilities::parse(payload)?)
            }
            (ControlCmd::Error, _) => {
                ControlMessage::Error(ErrorCode::from_byte(read_u8(payload, 0, "error_code")?))
            }
            (ControlCmd::KeyExchange, _) => ControlMessage::KeyExchange(payload),
            (ControlCmd::Cancel, _) => ControlMessage::Cancel {
                tid: read_u8(payload, 0, "cancelled tid")?,
            },
            (ControlCmd::Credit, _) => ControlMessage::Credit {
                stream: read_u8(payload, 0, "stream")?,
                credits: read_u16(payload, 1, "credits")?,
            },
            (ControlCmd::Reserved0 | ControlCmd::Unknown(_), _) => ControlMessage::Unknown {
                cmd: cmd.bits(),
                payload,
            },
        })
    }

    /// Decodes a whole CONTROL container; `None` if `container` is not a CONTROL container.
    pub fn from_container(
        container: &Container<'a>,
        dir: Direction,
    ) -> Option<Result<Self, WireError>> {
        match container.kind {
            super::container::ContainerKind::Control(cmd) => {
                Some(Self::parse(cmd, container.payload, dir))
            }
            _ => None,
        }
    }

    /// The container command this message is sent with.
    pub fn cmd(&self) -> ControlCmd {
        match *self {
            ControlMessage::TimeoutRequest | ControlMessage::TimeoutResponse { .. } => {
                ControlCmd::Timeout
            }
            ControlMessage::StreamEndC2P { .. } => ControlCmd::StreamEndC2P,
            ControlMessage::StreamEndP2C => ControlCmd::StreamEndP2C,
            ControlMessage::CapabilitiesRequest { .. }
            | ControlMessage::CapabilitiesResponse(_) => ControlCmd::Capabilities,
            ControlMessage::Error(_) => ControlCmd::Error,
            ControlMessage::KeyExchange(_) => ControlCmd::KeyExchange,
            ControlMessage::Cancel { .. } => ControlCmd::Cancel,
            ControlMessage::Credit { .. } => ControlCmd::Credit,
            ControlMessage::Unknown { cmd, .. } => ControlCmd::from_bits(cmd),
        }
    }

    /// Length of the payload [`ControlMessage::emit_payload`] writes.
    pub fn payload_len(&self) -> usize {
        match *self {
            ControlMessage::TimeoutRequest
            | ControlMessage::StreamEndC2P { stream: None }
            | ControlMessage::StreamEndP2C
            | ControlMessage::CapabilitiesRequest { advertised: None } => 0,
            ControlMessage::StreamEndC2P { stream: Some(_) } => 1,
            ControlMessage::Credit { .. } => 3,
            ControlMessage::TimeoutResponse { .. } => TIMEOUT_RESPONSE_LEN,
            ControlMessage::CapabilitiesRequest {
                advertised: Some(caps),
            }
            | ControlMessage::CapabilitiesResponse(caps) => caps.encoded_len(),
            ControlMessage::Error(_) | ControlMessage::Cancel { .. } => 1,
            ControlMessage::KeyExchange(p) | ControlMessage::Unknown { payload: p, .. } => p.len(),
        }
    }

    /// Writes the payload to the start of `out` and returns its length.
    pub fn emit_payload(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let len = self.payload_len();
        let buf = out_prefix(out, len)?;
        match *self {
            ControlMessage::TimeoutResponse { timeout_ms } => {
                buf.copy_from_slice(&timeout_ms.to_le_bytes())
            }
            ControlMessage::CapabilitiesRequest {
                advertised: Some(caps),
            }
            | ControlMessage::CapabilitiesResponse(caps) => {
                caps.emit(buf)?;
            }
            ControlMessage::Error(code) => buf.copy_from_slice(&[code.to_byte()]),
            ControlMessage::Cancel { tid } => buf.copy_from_slice(&[tid]),
            ControlMessage::StreamEndC2P { stream: Some(s) } => buf.copy_from_slice(&[s]),
            ControlMessage::Credit { stream, credits } => {
                let [lo, hi] = credits.to_le_bytes();
                buf.copy_from_slice(&[stream, lo, hi]);
            }
            ControlMessage::KeyExchange(p) | ControlMessage::Unknown { payload: p, .. } => {
                buf.copy_from_slice(p)
            }
            ControlMessage::TimeoutRequest
            | ControlMessage::StreamEndC2P { stream: None }
            | ControlMessage::StreamEndP2C
            | ControlMessage::CapabilitiesRequest { advertised: None } => {}
        }
        Ok(len)
    }

    /// Writes the whole CONTROL container (seq 0) for transaction `tid` and returns its length.
    pub fn emit_container(&self, tid: u8, out: &mut [u8]) -> Result<usize, WireError> {
        let payload_len = self.payload_len();
        let pl = u8::try_from(payload_len).map_err(|_| WireError::TooLong {
            field: "payload",
            len: err_num(payload_len),
            max: err_num(MAX_CHUNK_LEN),
        })?;
        let len = HEADER_LEN + payload_len;
        let buf = out_prefix(out, len)?;
        let body = buf.get_mut(HEADER_LEN..).ok_or(WireError::BufferTooSmall {
            needed: err_num(len),
            available: 0,
        })?;
        self.emit_payload(body)?;
        let header = [tid, 0, Container::control(tid, self.cmd(), &[]).flags(), pl];
        for (dst, src) in buf.iter_mut().zip(header) {
            *dst = src;
        }
        Ok(len)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::wire::capabilities::CapabilityFlags;
    use crate::wire::container::ContainerKind;
    use Direction::{CentralToPeripheral as C2P, PeripheralToCentral as P2C};
    extern crate std;
    use std::vec::Vec;

    fn emit(msg: &ControlMessage<'_>, tid: u8) -> Vec<u8> {
        let mut out = [0u8; 300];
        let n = msg.emit_container(tid, &mut out).unwrap();
        out.get(..n).unwrap().to_vec()
    }

    /// Parses a whole container, checks it is CONTROL with seq 0.
    fn parse(bytes: &[u8], dir: Direction) -> (u8, Result<ControlMessage<'_>, WireError>) {
        let c = Container::parse(bytes).unwrap();
        assert_eq!(c.seq, 0);
        assert!(matches!(c.kind, ContainerKind::Control(_)));
        (c.tid, ControlMessage::from_container(&c, dir).unwrap())
    }

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    const NRF: Capabilities = Capabilities {
        max_request: 12288,
        max_response: 65535,
        flags: CapabilityFlags::ENCRYPTION_SUPPORTED,
        large: None,
    };

    #[test]
    fn reference_vectors() {
        let py = Capabilities {
            max_request: 65535,
            ..NRF
        };
        let vectors = [
            ("0000c400", 0, C2P, ControlMessage::TimeoutRequest),
            (
                "0000c4026400",
                0,
                P2C,
                ControlMessage::TimeoutResponse { timeout_ms: 100 },
            ),
            (
                "0100d006000000000000",
                1,
                C2P,
                ControlMessage::CapabilitiesRequest {
                    advertised: Some(Capabilities::default()),
                },
            ),
            (
                "0000d000",
                0,
                C2P,
                ControlMessage::CapabilitiesRequest { advertised: None },
            ),
            (
                "0100d0060030ffff0100",
                1,
                P2C,
                ControlMessage::CapabilitiesResponse(NRF),
            ),
            (
                "0100d006ffffffff0100",
                1,
                P2C,
                ControlMessage::CapabilitiesResponse(py),
            ),
            ("0500d40102", 5, P2C, ControlMessage::Error(ErrorCode::Busy)),
            (
                "0500d40101",
                5,
                P2C,
                ControlMessage::Error(ErrorCode::ResponseTooLarge),
            ),
            (
                "0900c800",
                9,
                C2P,
                ControlMessage::StreamEndC2P { stream: None },
            ),
            ("0900cc00", 9, P2C, ControlMessage::StreamEndP2C),
        ];
        for (h, tid, dir, msg) in vectors {
            let bytes = hex(h);
            assert_eq!(parse(&bytes, dir), (tid, Ok(msg)), "{h}");
            assert_eq!(emit(&msg, tid), bytes, "{h}");
        }
    }

    #[test]
    fn large_message_capabilities() {
        use crate::wire::capabilities::LargeLimits;
        // The central's announcement: the classic 6 bytes with flags bit 1.
        let req = ControlMessage::CapabilitiesRequest {
            advertised: Some(Capabilities {
                flags: CapabilityFlags::LARGE_MESSAGES,
                ..Capabilities::default()
            }),
        };
        assert_eq!(emit(&req, 1), hex("0100d006000000000200"));
        assert_eq!(parse(&hex("0100d006000000000200"), C2P), (1, Ok(req)));
        // Extension bytes after a request's sixth byte are ignored (requests never carry them).
        assert_eq!(
            parse(&hex("0100d00e00000000020001020304050607ff"), C2P).1,
            Ok(req)
        );
        // The peripheral's reply: 14 bytes, limits 65,536 / 16 MiB.
        let reply = ControlMessage::CapabilitiesResponse(Capabilities {
            max_request: 0xffff,
            max_response: 0xffff,
            flags: CapabilityFlags::ENCRYPTION_SUPPORTED | CapabilityFlags::LARGE_MESSAGES,
            large: Some(LargeLimits {
                max_request: 0x1_0000,
                max_response: 0x100_0000,
            }),
        });
        let bytes = hex("0100d00effffffff03000000010000000001");
        assert_eq!(emit(&reply, 1), bytes);
        assert_eq!(parse(&bytes, P2C), (1, Ok(reply)));
        // Truncated extension: the reply is malformed.
        assert!(matches!(
            parse(&hex("0100d00affffffff030000000100"), P2C).1,
            Err(WireError::Truncated {
                field: "max_response_ext",
                ..
            })
        ));
    }

    #[test]
    fn cancel_names_the_request_tid() {
        // CANCEL of request tid 2, sent under tid 9: `[09][00][0xc0 | 8 << 2 = 0xe0][01][02]`.
        let bytes = hex("0900e00102");
        let (tid, msg) = parse(&bytes, C2P);
        assert_eq!(tid, 9);
        let msg = msg.unwrap();
        assert_eq!(msg, ControlMessage::Cancel { tid: 2 });
        assert_eq!(msg.cmd(), ControlCmd::Cancel);
        assert_eq!(emit(&msg, 9), hex("0900e00102"));
        // Without the tid it names nothing: an error, not a guess.
        let empty = hex("0900e000");
        assert!(parse(&empty, C2P).1.is_err());
        // Extra bytes after it are ignored, as for every control.
        let longer = hex("0900e0020203");
        assert_eq!(
            parse(&longer, C2P).1.unwrap(),
            ControlMessage::Cancel { tid: 2 }
        );
    }

    #[test]
    fn key_exchange_step_is_passed_through() {
        let mut bytes = hex("0200d821");
        bytes.extend(hex(
            "018520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
        ));
        let (tid, msg) = parse(&bytes, C2P);
        assert_eq!(tid, 2);
        let msg = msg.unwrap();
        assert_eq!(msg, ControlMessage::KeyExchange(bytes.get(4..).unwrap()));
        assert_eq!(msg.payload_len(), 33);
        assert_eq!(emit(&msg, 2), bytes);
    }

    #[test]
    fn lenient_payloads() {
        // TIMEOUT request payload is ignored; response extra bytes ignored.
        assert_eq!(
            ControlMessage::parse(ControlCmd::Timeout, &[1, 2, 3], C2P),
            Ok(ControlMessage::TimeoutRequest)
        );
        assert_eq!(
            ControlMessage::parse(ControlCmd::Timeout, &[0x64, 0x00, 0xff], P2C),
            Ok(ControlMessage::TimeoutResponse { timeout_ms: 100 })
        );
        // CAPABILITIES request of any length; Some only from 6 bytes.
        assert_eq!(
            ControlMessage::parse(ControlCmd::Capabilities, &[0, 0, 0, 0], C2P),
            Ok(ControlMessage::CapabilitiesRequest { advertised: None })
        );
        // CAPABILITIES response: 4 bytes like the C central.
        assert_eq!(
            ControlMessage::parse(ControlCmd::Capabilities, &[0x00, 0x01, 0xff, 0xff], P2C),
            Ok(ControlMessage::CapabilitiesResponse(Capabilities {
                max_request: 256,
                max_response: 65535,
                flags: CapabilityFlags::EMPTY,
                large: None,
            }))
        );
        // ERROR: extra bytes ignored, unknown codes kept.
        assert_eq!(
            ControlMessage::parse(ControlCmd::Error, &[0x42, 0x00], P2C),
            Ok(ControlMessage::Error(ErrorCode::Unknown(0x42)))
        );
    }

    #[test]
    fn short_payloads_fail() {
        assert_eq!(
            ControlMessage::parse(ControlCmd::Timeout, &[0x64], P2C),
            Err(WireError::Truncated {
                field: "timeout_ms",
                offset: 0,
                needed: 2,
                available: 1
            })
        );
        assert_eq!(
            ControlMessage::parse(ControlCmd::Error, &[], P2C),
            Err(WireError::Truncated {
                field: "error_code",
                offset: 0,
                needed: 1,
                available: 0
            })
        );
        assert!(ControlMessage::parse(ControlCmd::Capabilities, &[0, 1, 2], P2C).is_err());
    }

    #[test]
    fn unknown_commands_are_not_errors() {
        for (bytes, cmd) in [
            (hex("0300c0017a"), 0u8),
            (hex("0300dc00"), 7),
            (hex("0300fc00"), 15),
        ] {
            let (_, msg) = parse(&bytes, P2C);
            let msg = msg.unwrap();
            assert!(matches!(msg, ControlMessage::Unknown { cmd: c, .. } if c == cmd));
            assert_eq!(msg.cmd().bits(), cmd);
            assert_eq!(emit(&msg, 3), bytes);
        }
    }

    #[test]
    fn emit_errors() {
        let big = [0u8; 256];
        assert_eq!(
            ControlMessage::KeyExchange(&big).emit_container(0, &mut [0; 300]),
            Err(WireError::TooLong {
                field: "payload",
                len: 256,
                max: 255
            })
        );
        assert_eq!(
            ControlMessage::CapabilitiesResponse(NRF).emit_container(0, &mut [0; 9]),
            Err(WireError::BufferTooSmall {
                needed: 10,
                available: 9
            })
        );
        assert_eq!(
            ControlMessage::Error(ErrorCode::Busy).emit_payload(&mut []),
            Err(WireError::BufferTooSmall {
                needed: 1,
                available: 0
            })
        );
        let mut out = [0u8; 2];
        assert_eq!(
            ControlMessage::TimeoutResponse { timeout_ms: 0x1234 }.emit_payload(&mut out),
            Ok(2)
        );
        assert_eq!(out, [0x34, 0x12]);
    }

    #[test]
    fn non_control_container_is_none() {
        let c = Container::first(0, 0, &[]);
        assert_eq!(ControlMessage::from_container(&c, C2P), None);
    }
}
