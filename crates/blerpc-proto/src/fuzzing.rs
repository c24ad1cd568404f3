//! Fuzz target bodies, one `pub fn name(data: &[u8])` per target (not a stable API).
//!
//! The cargo-fuzz crate in `fuzz/` calls these from `fuzz_target!`, and
//! `tests/fuzz_corpus.rs` runs every committed corpus file through the same functions on stable,
//! so a target cannot rot. Every function must return normally for any input; a panic is a bug,
//! either in the core or in the invariant the target asserts. Invariants are checked with
//! `assert!`, so they hold in release fuzz builds too.
//!
//! Structured inputs (operation sequences) are decoded with [`Cursor`], a tiny reader that yields
//! zeros once the input is exhausted, so every byte string is a valid program. [`Op`] can also
//! [`Op::encode`] itself, which is how the seed corpus is generated.
//!
//! | target | input |
//! |---|---|
//! | `container_parse`, `command_parse`, `key_exchange_parse`, `capabilities_parse` | raw bytes |
//! | `control_parse` | `[cmd][payload...]` |
//! | `assembler` | `[max_len u16][in_flight][mtu]` then `[len][container]...` |
//! | `handshake_central`, `handshake_peripheral` | `[mode]` then mutations or raw steps |
//! | `session_open` | `[role]` then session ops |
//! | `connection_central`, `connection_peripheral`, `two_party` | [`WorldConfig`] bytes then [`Op`]s |
#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    reason = "a fuzz harness: a panic is how it reports a broken invariant"
)]

use alloc::collections::{BTreeMap, VecDeque};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;

use crate::assemble::{AssembleError, Assembler, AssemblerConfig, Completed};
use crate::connection::{
    CallError, CallId, CallKind, Central, CentralConfig, CentralEvent, Peripheral,
    PeripheralConfig, PeripheralEvent, Pinning, SetupPipelining,
};
use crate::crypto::{CryptoProvider, IdentitySeed, RustCrypto, SessionKey, X25519Secret};
use crate::handshake::{CentralHandshake, PeripheralHandshake};
use crate::session::{COUNTER_LEN, SESSION_OVERHEAD, Session, SessionError};
use crate::wire::capabilities::Capabilities;
use crate::wire::command::Command;
use crate::wire::container::{
    Container, ContainerKind, ControlCmd, LONG_FLAG, MAX_CHUNK_LEN, MAX_LONG_CONTAINER_LEN,
};
use crate::wire::control::ControlMessage;
use crate::wire::error_code::ErrorCode;
use crate::wire::key_exchange::{KeyExchangeStep, STEP2_LEN, STEP4_LEN};
use crate::{Direction, Instant, Role};

/// The body of one target.
pub type TargetFn = fn(&[u8]);

/// Every target, by the name of its cargo-fuzz binary and corpus directory.
pub const TARGETS: &[(&str, TargetFn)] = &[
    ("container_parse", container_parse),
    ("control_parse", control_parse),
    ("command_parse", command_parse),
    ("key_exchange_parse", key_exchange_parse),
    ("capabilities_parse", capabilities_parse),
    ("assembler", assembler),
    ("handshake_central", handshake_central),
    ("handshake_peripheral", handshake_peripheral),
    ("session_open", session_open),
    ("connection_central", connection_central),
    ("connection_peripheral", connection_peripheral),
    ("two_party", two_party),
];

// ----- input decoding ---------------------------------------------------------------------------

/// Reads fuzz input front to back; past the end every read returns zeros / empty slices.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data }
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Up to `n` bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }
    /// A length-prefixed chunk: `[len]` (0..=254) or `[255][extra]` (255..=510), then the bytes.
    pub fn chunk(&mut self) -> &'a [u8] {
        let mut n = usize::from(self.u8());
        if n == 255 {
            n += usize::from(self.u8());
        }
        self.bytes(n)
    }
    pub fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.data)
    }
}

/// Writes a chunk the way [`Cursor::chunk`] reads it (at most 510 bytes are kept).
pub fn encode_chunk(bytes: &[u8], out: &mut Vec<u8>) {
    let bytes = &bytes[..bytes.len().min(510)];
    if bytes.len() >= 255 {
        out.push(255);
        out.push((bytes.len() - 255) as u8);
    } else {
        out.push(bytes.len() as u8);
    }
    out.extend_from_slice(bytes);
}

/// A deterministic RNG for the harness (SplitMix64). **Not cryptographic**: it only exists so
/// that fuzz runs are reproducible; the core treats it as the `CryptoRngCore` it asks for.
#[derive(Clone, Debug)]
pub struct FuzzRng(u64);

impl FuzzRng {
    pub fn new(seed: u64) -> Self {
        FuzzRng(seed)
    }
}

impl rand_core::RngCore for FuzzRng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for FuzzRng {}

// ----- fixed keys (wire.md §6.5, the same as testdata/vectors/key_exchange.json) ---------------

/// Central ephemeral X25519 private key (RFC 7748 Alice).
pub const CENTRAL_EPHEMERAL: [u8; 32] =
    hex32(b"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
/// Peripheral ephemeral X25519 private key (RFC 7748 Bob).
pub const PERIPHERAL_EPHEMERAL: [u8; 32] =
    hex32(b"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
/// Peripheral identity seed (RFC 8032 test 1).
pub const IDENTITY_SEED: [u8; 32] =
    hex32(b"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
/// The vectors' session key.
pub const SESSION_KEY: [u8; 16] = [
    0x12, 0xe6, 0x8d, 0x83, 0x0b, 0x38, 0x02, 0x89, 0x6b, 0x9f, 0x09, 0x48, 0xa4, 0xf5, 0xfe, 0x5a,
];
/// Central confirmation nonce of the vectors.
pub const CENTRAL_NONCE: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
/// Peripheral confirmation nonce of the vectors.
pub const PERIPHERAL_NONCE: [u8; 12] = [12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23];

const fn hex32(s: &[u8; 64]) -> [u8; 32] {
    const fn nibble(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("bad hex"),
        }
    }
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        out[i] = (nibble(s[2 * i]) << 4) | nibble(s[2 * i + 1]);
        i += 1;
    }
    out
}

fn identity() -> <RustCrypto as CryptoProvider>::Identity {
    RustCrypto
        .load_identity(&IdentitySeed::from_bytes(IDENTITY_SEED))
        .expect("identity seed loads")
}

// ----- 1..5: codecs -----------------------------------------------------------------------------

/// Container parse → emit → re-parse. The emitted bytes equal the parsed prefix of the input,
/// except the flag bits the parser ignores (reserved bits 1–0 where they mean nothing, and the
/// command bits 5–2 of non-CONTROL types).
pub fn container_parse(data: &[u8]) {
    let Ok(c) = Container::parse(data) else {
        return;
    };
    let len = c.emitted_len();
    assert!(len <= data.len(), "parsed {len} bytes from {}", data.len());
    let mut out = vec![0u8; len];
    assert_eq!(c.emit(&mut out), Ok(len));
    let mut expected = data[..len].to_vec();
    // Bit 1 of FIRST, LARGE FIRST and SUBSEQUENT marks a LONG container (kept exactly when the
    // payload is over 255 bytes: the parser rejects a non-canonical LONG header).
    let long = if c.is_long() { LONG_FLAG } else { 0 };
    expected[2] &= match c.kind {
        ContainerKind::Control(_) => 0xFC,
        // Bit 0 of a FIRST container selects LARGE FIRST.
        ContainerKind::LargeFirst { .. } => 0xC1 | long,
        _ => 0xC0 | long,
    };
    assert_eq!(out, expected, "emit is not the parsed prefix");
    assert_eq!(Container::parse(&out), Ok(c));
    // A short buffer is an error, never a panic or a partial write beyond it.
    let mut short = vec![0u8; len - 1];
    assert!(c.emit(&mut short).is_err());
}

/// ControlMessage parse (both directions) → emit_payload → re-parse, and the container form.
pub fn control_parse(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let cmd_bits = cur.u8();
    let payload = cur.rest();
    let cmd = ControlCmd::from_bits(cmd_bits);
    for dir in [
        Direction::CentralToPeripheral,
        Direction::PeripheralToCentral,
    ] {
        let parsed = ControlMessage::parse(cmd, payload, dir);
        let may_fail = match (cmd, dir) {
            (ControlCmd::Timeout, Direction::PeripheralToCentral) => payload.len() < 2,
            // A reply announcing the large-message extension must carry all 14 bytes.
            (ControlCmd::Capabilities, Direction::PeripheralToCentral) => {
                payload.len() < 4
                    || (payload.len() >= 6
                        && payload[4] & 0x02 != 0
                        && payload.len() < crate::wire::capabilities::CAPABILITIES_LARGE_LEN)
            }
            (ControlCmd::Error, _) => payload.is_empty(),
            _ => false,
        };
        let m = match parsed {
            Ok(m) => m,
            Err(e) => {
                assert!(may_fail, "{cmd:?} {dir:?} {payload:02x?} failed: {e:?}");
                continue;
            }
        };
        assert!(!may_fail, "{cmd:?} {dir:?} {payload:02x?} parsed");
        assert_eq!(m.cmd().bits(), cmd_bits & 0x0F);
        let mut out = vec![0u8; m.payload_len()];
        assert_eq!(m.emit_payload(&mut out), Ok(m.payload_len()));
        assert_eq!(ControlMessage::parse(m.cmd(), &out, dir), Ok(m));
        let mut frame = vec![0u8; 4 + m.payload_len()];
        match m.emit_container(7, &mut frame) {
            Ok(n) => {
                assert_eq!(n, frame.len());
                let c = Container::parse(&frame).expect("emitted container parses");
                assert_eq!((c.tid, c.seq), (7, 0));
                assert_eq!(ControlMessage::from_container(&c, dir), Some(Ok(m)));
            }
            Err(_) => assert!(m.payload_len() > 255),
        }
    }
}

/// Command parse → emit → re-parse; the emitted bytes are the parsed prefix (type byte masked).
/// The same for the large-message form ([`Command::parse_large`]).
pub fn command_parse(data: &[u8]) {
    command_parse_large(data);
    let Ok(c) = Command::parse(data) else { return };
    let len = c.emitted_len();
    assert!(len <= data.len());
    let mut out = vec![0u8; len];
    assert_eq!(c.emit(&mut out), Ok(len));
    let mut expected = data[..len].to_vec();
    expected[0] &= 0x80;
    assert_eq!(out, expected);
    assert_eq!(Command::parse(&out), Ok(c));
    let mut header = vec![0u8; Command::header_len(c.name.len())];
    assert_eq!(
        Command::emit_header(c.kind, c.name, c.data.len(), &mut header),
        Ok(header.len())
    );
    assert_eq!(header, out[..header.len()]);
}

fn command_parse_large(data: &[u8]) {
    use crate::wire::command::{LARGE_DATA_FLAG, MAX_DATA_LEN};
    let Ok(c) = Command::parse_large(data) else {
        return;
    };
    let large = data[0] & LARGE_DATA_FLAG != 0;
    // The extended header is accepted only where the classic one could not say the length.
    assert_eq!(
        large,
        c.data.len() > MAX_DATA_LEN,
        "non-canonical large command"
    );
    let len = c.emitted_len_large();
    assert!(len <= data.len());
    let mut out = vec![0u8; len];
    assert_eq!(c.emit_large(&mut out), Ok(len));
    let mut expected = data[..len].to_vec();
    expected[0] &= if large { 0x81 } else { 0x80 };
    assert_eq!(out, expected);
    assert_eq!(Command::parse_large(&out), Ok(c));
    assert_eq!(
        Command::header_len_large(c.name.len(), c.data.len()) + c.data.len(),
        len
    );
}

/// KeyExchangeStep parse → emit → re-parse; the emitted bytes are the parsed prefix.
pub fn key_exchange_parse(data: &[u8]) {
    match KeyExchangeStep::parse(data) {
        Ok(s) => {
            assert_eq!(Some(&s.step()), data.first());
            let len = s.emitted_len();
            assert!(len <= data.len());
            let mut out = vec![0u8; len];
            assert_eq!(s.emit(&mut out), Ok(len));
            assert_eq!(out, data[..len]);
            assert_eq!(KeyExchangeStep::parse(&out), Ok(s));
            assert!(s.emit(&mut out[..len - 1]).is_err());
        }
        Err(_) => {
            let min = match data.first() {
                Some(1) => 33,
                Some(2) => STEP2_LEN,
                Some(3 | 4) => STEP4_LEN,
                _ => usize::MAX,
            };
            assert!(data.len() < min, "valid step {data:02x?} rejected");
        }
    }
}

/// Capabilities parse → emit → re-parse, and as a CAPABILITIES request/response. A reply with the
/// large-message bit parses only with its 8 extension bytes, and re-emits them exactly.
pub fn capabilities_parse(data: &[u8]) {
    use crate::wire::capabilities::{CAPABILITIES_LARGE_LEN, CapabilityFlags};
    let large_bit = data.len() >= 6 && data[4] & 0x02 != 0;
    match Capabilities::parse(data) {
        Ok(c) => {
            assert!(data.len() >= 4);
            assert_eq!(c.large.is_some(), large_bit);
            assert_eq!(c.flags.contains(CapabilityFlags::LARGE_MESSAGES), large_bit);
            let bytes = c.to_bytes();
            assert_eq!(bytes[..4], data[..4]);
            if data.len() >= 6 {
                assert_eq!(bytes, data[..6]);
            } else {
                assert_eq!(c.flags.bits(), 0);
            }
            let n = c.encoded_len();
            let mut out = vec![0u8; n];
            assert_eq!(c.emit(&mut out), Ok(n));
            if large_bit {
                assert_eq!(out, data[..CAPABILITIES_LARGE_LEN]);
            }
            assert_eq!(Capabilities::parse(&out), Ok(c));
            let req = ControlMessage::parse(
                ControlCmd::Capabilities,
                data,
                Direction::CentralToPeripheral,
            );
            // A request never carries the extension: the bit alone is the announcement.
            let expect_adv = (data.len() >= 6).then_some(Capabilities { large: None, ..c });
            assert_eq!(
                req,
                Ok(ControlMessage::CapabilitiesRequest {
                    advertised: expect_adv
                })
            );
        }
        Err(_) => assert!(data.len() < 4 || (large_bit && data.len() < CAPABILITIES_LARGE_LEN)),
    }
}

// ----- 6: assembler -----------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct ModelTx {
    /// Containers taken (the next seq is this mod 256).
    received: u32,
    large: bool,
    total: usize,
    buf: Vec<u8>,
}

/// Feeds length-prefixed containers to an `Assembler<Vec<u8>, 4>` with small limits and checks
/// every outcome against a reference model of the documented rules; then splits a message at a
/// fuzz-chosen MTU and reassembles it.
pub fn assembler(data: &[u8]) {
    const SLOTS: usize = 4;
    let mut cur = Cursor::new(data);
    let max_message_len = usize::from(cur.u16() % 1024);
    let in_flight_byte = cur.u8();
    // Bit 7: the large-message extension is in force (LARGE FIRST accepted, seq wraps).
    let large = in_flight_byte & 0x80 != 0;
    // Bit 6: the long-container extension is in force (LONG containers up to 16 KiB).
    let long = in_flight_byte & 0x40 != 0;
    let max_in_flight = usize::from((in_flight_byte & 0x3F) % 5);
    let mtu = 10 + usize::from(cur.u8());
    let split_part = cur.chunk();
    let config = AssemblerConfig {
        max_message_len,
        max_in_flight,
        large_messages: large,
        long_containers: long,
    };
    let mut asm: Assembler<Vec<u8>, SLOTS> = Assembler::new(config);
    let max_in_flight = max_in_flight.min(SLOTS);
    assert_eq!(asm.config().max_in_flight, max_in_flight);

    // The model: transactions in progress, and completed messages not yet released.
    let mut receiving: BTreeMap<u8, ModelTx> = BTreeMap::new();
    let mut held: Vec<(Completed, Vec<u8>)> = Vec::new();

    while !cur.is_empty() {
        let release_bits = cur.u8();
        let pdu = cur.chunk();
        // Release some held messages first, as a connection would after handing them out.
        if release_bits & 0x80 != 0 && !held.is_empty() {
            let (done, bytes) = held.remove(usize::from(release_bits) % held.len());
            assert_eq!(asm.message(done), bytes.as_slice());
            asm.release(done);
            assert!(
                asm.message(done).is_empty(),
                "released message still readable"
            );
            asm.release(done); // idempotent
        }
        let Ok(c) = Container::parse(pdu) else {
            continue;
        };
        let result = asm.feed(&c);
        let in_flight = receiving.len() + held.len();
        let long_max = if long {
            MAX_LONG_CONTAINER_LEN - c.header_len()
        } else {
            MAX_CHUNK_LEN
        };
        let expected: Result<Option<Vec<u8>>, AssembleError> = match c.kind {
            _ if c.is_long() && c.payload.len() > long_max => {
                receiving.remove(&c.tid);
                Err(AssembleError::ContainerTooLong {
                    tid: c.tid,
                    payload_len: c.payload.len(),
                    max: long_max,
                })
            }
            ContainerKind::Control(_) | ContainerKind::Unknown => Ok(None),
            ContainerKind::LargeFirst { total_length } if !large => {
                receiving.remove(&c.tid);
                Err(AssembleError::LargeNotNegotiated {
                    tid: c.tid,
                    total_length: total_length as usize,
                })
            }
            ContainerKind::First { .. } | ContainerKind::LargeFirst { .. } => {
                let (total, is_large) = match c.kind {
                    ContainerKind::LargeFirst { total_length } => (total_length as usize, true),
                    ContainerKind::First { total_length } => (usize::from(total_length), false),
                    _ => unreachable!(),
                };
                receiving.remove(&c.tid);
                let in_flight = receiving.len() + held.len();
                if in_flight >= SLOTS || in_flight >= max_in_flight {
                    Err(AssembleError::NoFreeSlot { tid: c.tid })
                } else if total > max_message_len {
                    Err(AssembleError::TooLarge {
                        tid: c.tid,
                        total_length: total,
                        limit: max_message_len,
                    })
                } else {
                    let take = c.payload.len().min(total);
                    let buf = c.payload[..take].to_vec();
                    if buf.len() >= total {
                        Ok(Some(buf))
                    } else {
                        receiving.insert(
                            c.tid,
                            ModelTx {
                                received: 1,
                                large: is_large,
                                total,
                                buf,
                            },
                        );
                        Ok(None)
                    }
                }
            }
            ContainerKind::Subsequent => match receiving.get_mut(&c.tid) {
                None => Err(AssembleError::UnknownTransaction {
                    tid: c.tid,
                    seq: c.seq,
                }),
                Some(tx)
                    if c.seq != (tx.received % 256) as u8 || (!tx.large && tx.received >= 256) =>
                {
                    let expected = (tx.received % 256) as u8;
                    receiving.remove(&c.tid);
                    Err(AssembleError::SequenceGap {
                        tid: c.tid,
                        expected,
                        got: c.seq,
                    })
                }
                Some(tx) => {
                    tx.received += 1;
                    let need = tx.total - tx.buf.len();
                    tx.buf
                        .extend_from_slice(&c.payload[..c.payload.len().min(need)]);
                    if tx.buf.len() >= tx.total {
                        let tx = receiving.remove(&c.tid).expect("present");
                        Ok(Some(tx.buf))
                    } else {
                        Ok(None)
                    }
                }
            },
        };
        match (result, expected) {
            (Ok(None), Ok(None)) => {}
            (Ok(Some(done)), Ok(Some(bytes))) => {
                assert_eq!(done.tid, c.tid);
                assert_eq!(
                    asm.message(done),
                    bytes.as_slice(),
                    "completed message differs"
                );
                assert!(asm.message(done).len() <= max_message_len);
                held.push((done, bytes));
            }
            (Err(got), Err(want)) => assert_eq!(got, want),
            (got, want) => {
                panic!("feed({c:?}) = {got:?}, model expects {want:?} (in flight {in_flight})")
            }
        }
        assert_eq!(asm.in_flight(), receiving.len() + held.len());
        assert!(asm.in_flight() <= max_in_flight.max(held.len()));
        for tid in receiving.keys() {
            assert!(asm.is_receiving(*tid));
        }
        // Handles stay valid until released.
        for (done, bytes) in &held {
            assert_eq!(asm.message(*done), bytes.as_slice());
        }
        // Occasionally drop everything.
        if release_bits == 0x7F {
            asm.reset();
            receiving.clear();
            held.clear();
            assert_eq!(asm.in_flight(), 0);
        }
    }

    split_roundtrip(split_part, mtu, release_tid(data));
    split_roundtrip_large(split_part, mtu, release_tid(data));
    split_roundtrip_long(split_part, release_tid(data), large);
}

fn release_tid(data: &[u8]) -> u8 {
    data.iter().fold(0u8, |a, b| a.wrapping_add(*b))
}

/// Split `message` at `mtu`, check every container, reassemble it and compare.
fn split_roundtrip(message: &[u8], mtu: usize, tid: u8) {
    use crate::split::{Splitter, container_count, max_message_len, split_to_vec};
    // Stretch short inputs so that multi-container splits are common.
    let message: Vec<u8> = match message.split_first() {
        Some((&rep, rest)) if rep > 0xF0 => rest
            .iter()
            .cycle()
            .take(usize::from(rep) * 40)
            .copied()
            .collect(),
        _ => message.to_vec(),
    };
    let containers = match split_to_vec(tid, &message, mtu) {
        Ok(c) => c,
        Err(_) => {
            assert!(
                mtu < crate::split::SplitCursor::MIN_ATT_MTU
                    || message.len() > max_message_len(mtu)
            );
            return;
        }
    };
    assert_eq!(Ok(containers.len()), container_count(message.len(), mtu));
    let mut asm: Assembler<Vec<u8>, 1> = Assembler::new(AssemblerConfig::default());
    let mut completed = None;
    for (i, pdu) in containers.iter().enumerate() {
        assert!(
            pdu.len() <= mtu - 3,
            "container of {} bytes at MTU {mtu}",
            pdu.len()
        );
        let c = Container::parse(pdu).expect("split output parses");
        assert_eq!((c.tid, usize::from(c.seq)), (tid, i));
        assert!(completed.is_none(), "completed before the last container");
        completed = asm.feed(&c).expect("split output assembles");
    }
    let done = completed.expect("last container completes the message");
    assert_eq!(asm.message(done), message.as_slice());
    // The borrowing splitter with an exact-size buffer gives the same containers.
    let mut s = Splitter::new(tid, &message, mtu).expect("same plan");
    let mut buf = vec![0u8; mtu - 3];
    for pdu in &containers {
        let n = s.next_into(&mut buf).expect("another container");
        assert_eq!(&buf[..n], pdu.as_slice());
    }
    assert_eq!(s.next_into(&mut buf), None);
}

/// The large-message split ([`crate::split::SplitCursor::new_large`]) of the same (stretched)
/// message: classic when it fits, otherwise a LARGE FIRST and wrapping seqs; reassembles with
/// the extension in force, and is refused without it.
fn split_roundtrip_large(message: &[u8], mtu: usize, tid: u8) {
    use crate::split::{SplitCursor, max_message_len};
    let message: Vec<u8> = match message.split_first() {
        // Long enough to need a LARGE FIRST at small MTUs (and to wrap seq).
        Some((&rep, rest)) if rep > 0xE0 && !rest.is_empty() => rest
            .iter()
            .cycle()
            .take(usize::from(rep) * 64)
            .copied()
            .collect(),
        _ => message.to_vec(),
    };
    let Ok(mut cursor) = SplitCursor::new_large(tid, message.len(), mtu) else {
        assert!(mtu < SplitCursor::MIN_LARGE_ATT_MTU);
        return;
    };
    assert_eq!(cursor.is_large(), message.len() > max_message_len(mtu));
    let config = |large_messages| AssemblerConfig {
        max_message_len: message.len(),
        max_in_flight: 1,
        large_messages,
        long_containers: false,
    };
    let mut asm: Assembler<Vec<u8>, 1> = Assembler::new(config(true));
    let mut classic: Assembler<Vec<u8>, 1> = Assembler::new(config(false));
    let mut buf = vec![0u8; mtu - 3];
    let mut completed = None;
    let mut i = 0usize;
    while let Some(n) = cursor.emit_next(&message, &mut buf).expect("planned split") {
        let c = Container::parse(&buf[..n]).expect("split output parses");
        assert!(n <= mtu - 3 && c.payload.len() <= 255);
        assert_eq!((c.tid, c.seq), (tid, (i % 256) as u8));
        match (i, c.kind) {
            (0, ContainerKind::LargeFirst { total_length }) => {
                assert!(cursor.is_large());
                assert_eq!(total_length as usize, message.len());
                assert!(matches!(
                    classic.feed(&c),
                    Err(AssembleError::LargeNotNegotiated { .. })
                ));
            }
            (0, ContainerKind::First { .. }) => assert!(!cursor.is_large()),
            (0, k) => panic!("first container is {k:?}"),
            (_, k) => assert_eq!(k, ContainerKind::Subsequent),
        }
        assert!(completed.is_none(), "completed before the last container");
        completed = asm.feed(&c).expect("large split output assembles");
        i += 1;
    }
    let done = completed.expect("last container completes the message");
    assert_eq!(asm.message(done), message.as_slice());
}

/// The long-container split ([`crate::split::SplitCursor::new_long`]) of the same (stretched)
/// message, with and without the large-message extension: every container at most 16 KiB, LONG
/// exactly when its payload is above 255 bytes; reassembles with the extension in force, and a
/// LONG container is refused without it.
fn split_roundtrip_long(message: &[u8], tid: u8, large: bool) {
    use crate::split::SplitCursor;
    let message: Vec<u8> = match message.split_first() {
        // Stretched so that some splits need several LONG containers or a LARGE FIRST.
        Some((&rep, rest)) if rep > 0x80 && !rest.is_empty() => rest
            .iter()
            .cycle()
            .take(usize::from(rep) * 600)
            .copied()
            .collect(),
        _ => message.to_vec(),
    };
    let Ok(mut cursor) = SplitCursor::new_long(tid, message.len(), large) else {
        assert!(!large && message.len() > 65_535);
        return;
    };
    assert_eq!(cursor.is_large(), message.len() > 65_535);
    let config = |long_containers| AssemblerConfig {
        max_message_len: message.len(),
        max_in_flight: 1,
        large_messages: large,
        long_containers,
    };
    let mut asm: Assembler<Vec<u8>, 1> = Assembler::new(config(true));
    let mut classic: Assembler<Vec<u8>, 1> = Assembler::new(config(false));
    let mut buf = vec![0u8; MAX_LONG_CONTAINER_LEN];
    let mut completed = None;
    let mut i = 0usize;
    while let Some(n) = cursor.emit_next(&message, &mut buf).expect("planned split") {
        let c = Container::parse(&buf[..n]).expect("split output parses");
        assert_eq!(c.emitted_len(), n);
        assert!(n <= MAX_LONG_CONTAINER_LEN);
        assert_eq!(c.is_long(), c.payload.len() > MAX_CHUNK_LEN);
        assert_eq!(buf[2] & LONG_FLAG != 0, c.is_long());
        assert_eq!((c.tid, c.seq), (tid, (i % 256) as u8));
        if c.is_long() {
            assert!(matches!(
                classic.feed(&c),
                Err(AssembleError::ContainerTooLong { max: 255, .. })
            ));
        }
        assert!(completed.is_none(), "completed before the last container");
        completed = asm.feed(&c).expect("long split output assembles");
        i += 1;
    }
    let done = completed.expect("last container completes the message");
    assert_eq!(asm.message(done), message.as_slice());
}

// ----- 7, 8: handshakes -------------------------------------------------------------------------

/// Applies `[count][pos][xor]...` mutations to `bytes` (positions wrap) and appends
/// `[extra_len][extra...]` trailing bytes (which parsers must ignore).
fn mutate(cur: &mut Cursor<'_>, bytes: &mut Vec<u8>) {
    let count = cur.u8() % 4;
    for _ in 0..count {
        let pos = usize::from(cur.u8()) % bytes.len().max(1);
        let x = cur.u8();
        if let Some(b) = bytes.get_mut(pos) {
            *b ^= x;
        }
    }
    let extra = cur.u8() % 8;
    bytes.extend_from_slice(cur.bytes(usize::from(extra)));
}

fn genuine_session_check<A: crate::crypto::Aead, B: crate::crypto::Aead>(
    central: &mut Session<A>,
    peripheral: &mut Session<B>,
) {
    for (sender_is_central, msg) in [(true, b"ping".as_slice()), (false, b"pong".as_slice())] {
        let mut buf = vec![0u8; msg.len() + SESSION_OVERHEAD];
        buf[COUNTER_LEN..COUNTER_LEN + msg.len()].copy_from_slice(msg);
        let opened = if sender_is_central {
            central.seal_in_place(&mut buf).expect("seal");
            peripheral.open_in_place(&mut buf)
        } else {
            peripheral.seal_in_place(&mut buf).expect("seal");
            central.open_in_place(&mut buf)
        };
        let range = opened.expect("sessions of one handshake interoperate");
        assert_eq!(&buf[range], msg);
    }
}

/// Drives `CentralHandshake` with fuzz step 2 / step 4 payloads.
///
/// Mode bit 0 = 1: a genuine transcript (the vector keys) with fuzz mutations; any change to the
/// first 129 bytes of step 2 or 45 bytes of step 4 must be rejected, and an untouched transcript
/// (trailing bytes allowed) must give a working session. Mode bit 0 = 0: raw payloads, which must
/// never panic and whose success must be consistent.
pub fn handshake_central(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let mode = cur.u8();
    let p = RustCrypto;
    let (hs, step1) = CentralHandshake::start(p, X25519Secret::from_bytes(CENTRAL_EPHEMERAL));
    assert_eq!(hs.central_public()[..], step1[1..33]);
    if mode & 1 == 0 {
        let step2 = cur.chunk();
        let step4 = cur.rest();
        let Ok(verify) = hs.receive_step2(step2) else {
            return;
        };
        assert_eq!(verify.identity()[..], step2[97..129]);
        let (hs, step3) = verify.accept(CENTRAL_NONCE).expect("accept");
        assert_eq!(step3[0], 3);
        let _ = hs.receive_step4(step4);
        return;
    }
    let periph = PeripheralHandshake::new(p, identity());
    let (periph, step2) = periph
        .receive_step1(&step1, X25519Secret::from_bytes(PERIPHERAL_EPHEMERAL))
        .expect("genuine step 1");
    let mut m2 = step2.to_vec();
    mutate(&mut cur, &mut m2);
    let intact2 = m2[..STEP2_LEN] == step2[..];
    let verify = match hs.receive_step2(&m2) {
        Ok(v) => {
            assert!(intact2, "mutated step 2 accepted: {m2:02x?}");
            v
        }
        Err(e) => {
            assert!(!intact2, "genuine step 2 rejected: {e:?}");
            return;
        }
    };
    assert_eq!(verify.identity()[..], step2[97..129]);
    let (hs, step3) = verify.accept(CENTRAL_NONCE).expect("accept");
    let (mut p_session, step4) = periph
        .receive_step3(&step3, PERIPHERAL_NONCE)
        .expect("genuine step 3");
    let mut m4 = step4.to_vec();
    mutate(&mut cur, &mut m4);
    let intact4 = m4[..STEP4_LEN] == step4[..];
    match hs.receive_step4(&m4) {
        Ok(mut c_session) => {
            assert!(intact4, "mutated step 4 accepted: {m4:02x?}");
            assert_eq!(c_session.role(), Role::Central);
            genuine_session_check(&mut c_session, &mut p_session);
        }
        Err(e) => assert!(!intact4, "genuine step 4 rejected: {e:?}"),
    }
}

/// Drives `PeripheralHandshake` with fuzz step 1 / step 3 payloads (same modes as
/// [`handshake_central`]). A mutated step 1 must make the genuine central reject step 2.
pub fn handshake_peripheral(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let mode = cur.u8();
    let p = RustCrypto;
    let periph = PeripheralHandshake::new(p, identity());
    if mode & 1 == 0 {
        let step1 = cur.chunk();
        let step3 = cur.rest();
        let Ok((periph, step2)) =
            periph.receive_step1(step1, X25519Secret::from_bytes(PERIPHERAL_EPHEMERAL))
        else {
            return;
        };
        assert_eq!(step2[0], 2);
        assert_eq!(step2[97..129], p.identity_public(&identity()));
        // The signature covers the central key we were given and our ephemeral key.
        let msg = crate::wire::key_exchange::Step2::signed_message(
            &step1[1..33].try_into().unwrap(),
            &step2[1..33].try_into().unwrap(),
        );
        p.ed25519_verify(
            &step2[97..129].try_into().unwrap(),
            &msg,
            &step2[33..97].try_into().unwrap(),
        )
        .expect("our own signature verifies");
        if let Ok((session, step4)) = periph.receive_step3(step3, PERIPHERAL_NONCE) {
            assert_eq!(step4[0], 4);
            assert_eq!(session.role(), Role::Peripheral);
        }
        return;
    }
    let (central, step1) = CentralHandshake::start(p, X25519Secret::from_bytes(CENTRAL_EPHEMERAL));
    let mut m1 = step1.to_vec();
    mutate(&mut cur, &mut m1);
    let intact1 = m1[..33] == step1[..];
    let (periph, step2) =
        match periph.receive_step1(&m1, X25519Secret::from_bytes(PERIPHERAL_EPHEMERAL)) {
            Ok(x) => x,
            Err(e) => {
                assert!(!intact1, "genuine step 1 rejected: {e:?}");
                return;
            }
        };
    let verify = match central.receive_step2(&step2) {
        Ok(v) => {
            assert!(
                intact1,
                "central accepted step 2 signed over a mutated step 1"
            );
            v
        }
        Err(e) => {
            assert!(
                !intact1,
                "central rejected step 2 of a genuine exchange: {e:?}"
            );
            return;
        }
    };
    let (central, step3) = verify.accept(CENTRAL_NONCE).expect("accept");
    let mut m3 = step3.to_vec();
    mutate(&mut cur, &mut m3);
    let intact3 = m3[..45] == step3[..];
    match periph.receive_step3(&m3, PERIPHERAL_NONCE) {
        Ok((mut p_session, step4)) => {
            assert!(intact3, "mutated step 3 accepted: {m3:02x?}");
            let mut c_session = central.receive_step4(&step4).expect("genuine step 4");
            genuine_session_check(&mut c_session, &mut p_session);
        }
        Err(e) => assert!(!intact3, "genuine step 3 rejected: {e:?}"),
    }
}

// ----- 9: session -------------------------------------------------------------------------------

/// `Session::open_in_place` on a mix of genuine sealed frames, replays, mutations and raw bytes
/// under the vectors' key. Invariants: accepted counters strictly increase, a failed open leaves
/// `last_rx_counter` unchanged and zeroes the plaintext region, genuine fresh frames open to
/// their plaintext, and mutated frames never open.
pub fn session_open(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let p = RustCrypto;
    let key = SessionKey::from_bytes(SESSION_KEY);
    let rx_role = if cur.u8() & 1 == 0 {
        Role::Peripheral
    } else {
        Role::Central
    };
    let tx_role = match rx_role {
        Role::Peripheral => Role::Central,
        Role::Central => Role::Peripheral,
    };
    let mut rx = Session::new(p.aead(&key).expect("aead"), rx_role);
    let mut tx = Session::new(p.aead(&key).expect("aead"), tx_role);
    // Frames we sealed: (sealed bytes, plaintext).
    let mut sent: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut steps = 0;
    while !cur.is_empty() && steps < 256 {
        steps += 1;
        let op = cur.u8();
        let before = rx.last_rx_counter();
        let (mut frame, genuine): (Vec<u8>, Option<Vec<u8>>) = match op % 5 {
            0 => {
                let plain = cur.chunk().to_vec();
                let mut buf = vec![0u8; plain.len() + SESSION_OVERHEAD];
                buf[COUNTER_LEN..COUNTER_LEN + plain.len()].copy_from_slice(&plain);
                let counter = tx.tx_counter();
                match tx.seal_in_place(&mut buf) {
                    Ok(()) => {
                        assert_eq!(buf[..4], counter.to_le_bytes());
                        assert_eq!(tx.tx_counter(), counter + 1);
                        sent.push((buf.clone(), plain.clone()));
                        (buf, Some(plain))
                    }
                    Err(e) => {
                        assert_eq!(e, SessionError::CounterExhausted);
                        assert_eq!(counter, u32::MAX);
                        continue;
                    }
                }
            }
            1 if !sent.is_empty() => {
                // Replay (or late delivery) of an earlier frame.
                let (f, plain) = sent[usize::from(cur.u8()) % sent.len()].clone();
                (f, Some(plain))
            }
            2 if !sent.is_empty() => {
                let (mut f, _) = sent[usize::from(cur.u8()) % sent.len()].clone();
                let pos = usize::from(cur.u16()) % f.len();
                let bit = 1u8 << (cur.u8() % 8);
                f[pos] ^= bit;
                let before = rx.last_rx_counter();
                let mut g = f.clone();
                assert!(
                    rx.open_in_place(&mut g).is_err(),
                    "bit-flipped frame opened"
                );
                assert_eq!(rx.last_rx_counter(), before);
                continue;
            }
            3 => {
                // Move the sender's counter (gaps, and going backwards to test the replay rule).
                tx.set_tx_counter(cur.u32());
                continue;
            }
            _ => (cur.chunk().to_vec(), None),
        };
        let len = frame.len();
        let counter = frame
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
        match rx.open_in_place(&mut frame) {
            Ok(range) => {
                let counter = counter.expect("opened frames have a counter");
                assert_eq!(range, COUNTER_LEN..len - 16);
                if let Some(b) = before {
                    assert!(counter > b, "accepted counter {counter} after {b}");
                }
                assert_eq!(rx.last_rx_counter(), Some(counter));
                if let Some(plain) = genuine {
                    assert_eq!(&frame[range], plain.as_slice());
                }
            }
            Err(e) => {
                assert_eq!(
                    rx.last_rx_counter(),
                    before,
                    "failed open changed state: {e:?}"
                );
                if len >= SESSION_OVERHEAD {
                    assert!(
                        frame[COUNTER_LEN..len - 16].iter().all(|b| *b == 0),
                        "plaintext region not zeroed"
                    );
                } else {
                    assert_eq!(e, SessionError::TooShort { len });
                }
                if let (Some(_), Some(c)) = (&genuine, counter) {
                    // A genuine frame fails only by the replay rule.
                    assert!(
                        matches!(e, SessionError::Replay { .. }),
                        "genuine frame failed: {e:?}"
                    );
                    assert!(before.is_some_and(|b| c <= b));
                }
            }
        }
    }
}

// ----- 10..12: connections ----------------------------------------------------------------------

pub type FuzzCentral = Central<RustCrypto, FuzzRng, Vec<u8>, Vec<u8>, 4>;
pub type FuzzPeripheral = Peripheral<RustCrypto, FuzzRng, Vec<u8>, Vec<u8>, 4>;

/// The setup of a connection target, decoded from the first [`WorldConfig::LEN`] input bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldConfig {
    pub mtu: u8,
    pub central: u8,
    pub peripheral: u8,
    pub limits: u8,
    pub seed: u32,
}

impl WorldConfig {
    pub const LEN: usize = 8;
    /// ATT MTUs the targets run at: from the connection minimum (13) to 512.
    const MTUS: [usize; 16] = [
        23, 23, 27, 13, 14, 50, 100, 135, 136, 185, 247, 247, 251, 263, 300, 512,
    ];

    pub fn decode(cur: &mut Cursor<'_>) -> Self {
        WorldConfig {
            mtu: cur.u8(),
            central: cur.u8(),
            peripheral: cur.u8(),
            limits: cur.u8(),
            seed: cur.u32(),
        }
    }
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.mtu, self.central, self.peripheral, self.limits]);
        out.extend_from_slice(&self.seed.to_le_bytes());
    }
    /// An encrypted, auto-serving, TOFU (`Decide`) setup at MTU 247.
    pub const ENCRYPTED: WorldConfig = WorldConfig {
        mtu: 10,
        central: 0b1111_0001,
        peripheral: 0b0000_0011,
        limits: 0,
        seed: 1,
    };
    /// A plaintext setup (the peripheral offers no encryption) at MTU 23.
    pub const PLAINTEXT: WorldConfig = WorldConfig {
        mtu: 0,
        central: 0b1110_0010,
        peripheral: 0,
        limits: 0,
        seed: 2,
    };

    fn att_mtu(&self) -> usize {
        Self::MTUS[usize::from(self.mtu & 0x0F)]
    }
    fn auto_serve(&self) -> bool {
        self.central & 0x80 != 0
    }
    fn central_config(&self) -> CentralConfig {
        let c = self.central;
        let pinning = match (c >> 1) & 3 {
            0 => Pinning::Decide,
            1 => Pinning::Disabled,
            2 => Pinning::Expect(RustCrypto.identity_public(&identity())),
            _ => Pinning::Expect([0x42; 32]),
        };
        CentralConfig {
            att_mtu: self.att_mtu(),
            require_encryption: c & 1 != 0,
            pinning,
            skip_timeout_request: c & 0x08 != 0,
            capabilities_payload: c & 0x10 == 0,
            max_calls_in_flight: usize::from((c >> 5) & 3) + 1,
            busy_retries: self.limits & 3,
            max_response_len: [65_535, 300, 64, 20][usize::from((self.limits >> 2) & 3)],
            // (65,535 also caps large responses; bit 5 turns the extension on.)
            max_outbox_bytes: if self.limits & 0x10 != 0 {
                600
            } else {
                128 * 1024
            },
            large_messages: self.limits & 0x20 != 0,
            // Bits 4 and 5 of the MTU byte: the long-container extension on each side.
            long_containers: self.mtu & 0x10 != 0,
            // Bits 6 and 7 of the MTU byte: how the setup requests are pipelined.
            setup_pipelining: match self.mtu >> 6 {
                0 => SetupPipelining::Off,
                1 => SetupPipelining::Requests,
                _ => SetupPipelining::KeyExchange,
            },
            ..CentralConfig::default()
        }
    }
    fn peripheral_config(&self) -> (PeripheralConfig, bool) {
        let p = self.peripheral;
        let require = p & 1 != 0;
        let has_identity = require || p & 2 != 0;
        let config = PeripheralConfig {
            att_mtu: self.att_mtu(),
            require_encryption: require,
            max_pending_requests: usize::from((p >> 2) & 3) + 1,
            max_stream_items: [10_000, 1, 3, 10][usize::from((p >> 4) & 3)],
            max_outbox_bytes: if p & 0x40 != 0 { 700 } else { 128 * 1024 },
            max_request_len: if p & 0x80 != 0 { 100 } else { 12_288 },
            // Bit 7: a response limit between the classic and the stretched message sizes.
            max_response_len: if self.limits & 0x80 != 0 {
                5_000
            } else {
                64 * 1024
            },
            large_messages: self.limits & 0x40 != 0,
            long_containers: self.mtu & 0x20 != 0,
            ..PeripheralConfig::default()
        };
        (config, has_identity)
    }
}

/// What a channel operation does with the PDU at the head of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chan {
    Deliver,
    Drop,
    Duplicate,
    /// Move it to the back of the queue.
    Reorder,
    /// Flip one bit (position `pos` of the payload, past the container header, in `two_party`).
    Flip {
        pos: u8,
        bit: u8,
    },
    Truncate(u8),
}

/// One step of a connection target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Advance the clock by this many ms, then handle due timeouts.
    Advance(u16),
    /// Jump to the earliest deadline of either side and handle it.
    FireTimeout,
    /// Deliver everything in both directions until the link is quiet.
    Run,
    C2P(Chan),
    P2C(Chan),
    /// `kind % 3`: unary, server stream, client stream; `name` indexes [`NAMES`].
    StartCall {
        kind: u8,
        name: u8,
        data: Vec<u8>,
    },
    SendStreamItem {
        call: u8,
        data: Vec<u8>,
    },
    FinishStream {
        call: u8,
    },
    Cancel {
        call: u8,
    },
    AcceptIdentity,
    RejectIdentity,
    CloseCentral,
    /// The peripheral application handles its oldest unanswered request (see `World::serve`).
    Serve {
        choice: u8,
        arg: u8,
    },
    ClosePeripheral,
    /// A raw PDU straight into the central.
    InjectCentral(Vec<u8>),
    /// A raw PDU straight into the peripheral.
    InjectPeripheral(Vec<u8>),
    /// A peripheral user operation on an arbitrary transaction id.
    PeripheralRaw {
        what: u8,
        tid: u8,
        data: Vec<u8>,
    },
}

/// Command names the harness calls (the last ones are invalid or unknown).
pub const NAMES: [&str; 6] = [
    "echo",
    "counter_stream",
    "counter_upload",
    "flash_read",
    "",
    "x",
];

impl Op {
    const COUNT: u8 = 17;

    pub fn decode(cur: &mut Cursor<'_>) -> Op {
        fn chan(cur: &mut Cursor<'_>) -> Chan {
            match cur.u8() % 8 {
                0..=2 => Chan::Deliver,
                3 => Chan::Drop,
                4 => Chan::Duplicate,
                5 => Chan::Reorder,
                6 => Chan::Flip {
                    pos: cur.u8(),
                    bit: cur.u8(),
                },
                _ => Chan::Truncate(cur.u8()),
            }
        }
        match cur.u8() % Self::COUNT {
            0 => Op::Advance(cur.u16()),
            1 => Op::FireTimeout,
            2 => Op::Run,
            3 => Op::C2P(chan(cur)),
            4 => Op::P2C(chan(cur)),
            5 => Op::StartCall {
                kind: cur.u8(),
                name: cur.u8(),
                data: cur.chunk().to_vec(),
            },
            6 => Op::SendStreamItem {
                call: cur.u8(),
                data: cur.chunk().to_vec(),
            },
            7 => Op::FinishStream { call: cur.u8() },
            8 => Op::Cancel { call: cur.u8() },
            9 => Op::AcceptIdentity,
            10 => Op::RejectIdentity,
            11 => Op::CloseCentral,
            12 => Op::Serve {
                choice: cur.u8(),
                arg: cur.u8(),
            },
            13 => Op::ClosePeripheral,
            14 => Op::InjectCentral(cur.chunk().to_vec()),
            15 => Op::InjectPeripheral(cur.chunk().to_vec()),
            _ => Op::PeripheralRaw {
                what: cur.u8(),
                tid: cur.u8(),
                data: cur.chunk().to_vec(),
            },
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        fn chan(c: &Chan, out: &mut Vec<u8>) {
            match c {
                Chan::Deliver => out.push(0),
                Chan::Drop => out.push(3),
                Chan::Duplicate => out.push(4),
                Chan::Reorder => out.push(5),
                Chan::Flip { pos, bit } => out.extend_from_slice(&[6, *pos, *bit]),
                Chan::Truncate(n) => out.extend_from_slice(&[7, *n]),
            }
        }
        match self {
            Op::Advance(ms) => {
                out.push(0);
                out.extend_from_slice(&ms.to_le_bytes());
            }
            Op::FireTimeout => out.push(1),
            Op::Run => out.push(2),
            Op::C2P(c) => {
                out.push(3);
                chan(c, out);
            }
            Op::P2C(c) => {
                out.push(4);
                chan(c, out);
            }
            Op::StartCall { kind, name, data } => {
                out.extend_from_slice(&[5, *kind, *name]);
                encode_chunk(data, out);
            }
            Op::SendStreamItem { call, data } => {
                out.extend_from_slice(&[6, *call]);
                encode_chunk(data, out);
            }
            Op::FinishStream { call } => out.extend_from_slice(&[7, *call]),
            Op::Cancel { call } => out.extend_from_slice(&[8, *call]),
            Op::AcceptIdentity => out.push(9),
            Op::RejectIdentity => out.push(10),
            Op::CloseCentral => out.push(11),
            Op::Serve { choice, arg } => out.extend_from_slice(&[12, *choice, *arg]),
            Op::ClosePeripheral => out.push(13),
            Op::InjectCentral(d) => {
                out.push(14);
                encode_chunk(d, out);
            }
            Op::InjectPeripheral(d) => {
                out.push(15);
                encode_chunk(d, out);
            }
            Op::PeripheralRaw { what, tid, data } => {
                out.extend_from_slice(&[16, *what, *tid]);
                encode_chunk(data, out);
            }
        }
    }
}

/// Request data whose first byte is above 0xF0 is repeated to `first * 40` bytes (9,640 to
/// 10,200), so that messages beyond the classic limits of small MTUs (LARGE FIRST transactions at
/// MTU 23 or 27) and within the default request limit (12,288) are reachable.
fn stretch(data: Vec<u8>) -> Vec<u8> {
    match data.split_first() {
        Some((&rep, rest)) if rep > 0xF0 && !rest.is_empty() => rest
            .iter()
            .cycle()
            .take(usize::from(rep) * 40)
            .copied()
            .collect(),
        _ => data,
    }
}

/// Encodes a whole connection-target input.
pub fn encode_program(config: &WorldConfig, ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    config.encode(&mut out);
    for op in ops {
        op.encode(&mut out);
    }
    out
}

/// Which connection target is running: decides the allowed ops and the invariants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Central,
    Peripheral,
    TwoParty,
}

#[derive(Clone, Debug)]
struct CallRec {
    id: CallId,
    kind: CallKind,
    request: Vec<u8>,
    done: bool,
}

/// A Central and a Peripheral joined by two fuzz-controlled queues, on virtual time.
pub struct World {
    target: Target,
    now: Instant,
    central: FuzzCentral,
    periph: FuzzPeripheral,
    c2p: VecDeque<Vec<u8>>,
    p2c: VecDeque<Vec<u8>>,
    calls: Vec<CallRec>,
    /// Unanswered requests the peripheral application holds: (tid, name, data).
    requests: VecDeque<(u8, String, Vec<u8>)>,
    upload_seen: bool,
    auto_serve: bool,
    connected: bool,
    central_closed: bool,
    tid_ops: usize,
    /// Successful unary responses (for the smoke statistics of the corpus test).
    pub responses: usize,
}

/// The largest PDU buffer handed to `poll_transmit`: bigger than any MTU we configure and than a
/// LONG container, so an oversize PDU is caught by the assertion rather than hidden by a short
/// buffer.
const TX_BUF: usize = MAX_LONG_CONTAINER_LEN + 1024;
/// Bounds the loops of one op, so a livelock fails loudly instead of hanging.
const MAX_ROUNDS: usize = 10_000;

impl World {
    fn new(target: Target, cfg: WorldConfig) -> Option<World> {
        let now = Instant::from_millis(1_000);
        let ccfg = cfg.central_config();
        let (pcfg, has_identity) = cfg.peripheral_config();
        let seed = u64::from(cfg.seed);
        let central = Central::new(ccfg, RustCrypto, FuzzRng::new(seed ^ 0xC), now)
            .expect("valid central config");
        let id = has_identity.then(identity);
        let periph = Peripheral::new(pcfg, RustCrypto, id, FuzzRng::new(seed ^ 0xF))
            .expect("valid peripheral config");
        let mut w = World {
            target,
            now,
            central,
            periph,
            c2p: VecDeque::new(),
            p2c: VecDeque::new(),
            calls: Vec::new(),
            requests: VecDeque::new(),
            upload_seen: false,
            auto_serve: cfg.auto_serve(),
            connected: false,
            central_closed: false,
            tid_ops: 0,
            responses: 0,
        };
        w.settle();
        Some(w)
    }

    fn call(&self, sel: u8) -> CallId {
        match self.calls.len() {
            0 => CallId(u32::from(sel) + 1_000),
            n => self.calls[usize::from(sel) % n].id,
        }
    }

    fn rec(&mut self, id: CallId) -> &mut CallRec {
        let Some(r) = self.calls.iter_mut().find(|c| c.id == id) else {
            panic!("event for call {id:?} that was never started");
        };
        r
    }

    fn finish(&mut self, id: CallId, what: &str) {
        let r = self.rec(id);
        assert!(!r.done, "{what} for call {id:?} that already ended");
        r.done = true;
    }

    /// Drains the central's events and checks them.
    fn drain_central(&mut self) {
        enum Ev {
            Connected(bool),
            Response(CallId, Vec<u8>),
            StreamItem(CallId),
            StreamEnd(CallId),
            Failed(CallId),
            Closed,
            Other,
        }
        for _ in 0..MAX_ROUNDS {
            let ev = match self.central.poll_event() {
                None => return,
                Some(CentralEvent::Connected { encrypted }) => Ev::Connected(encrypted),
                Some(CentralEvent::Response { call, data }) => Ev::Response(call, data.to_vec()),
                Some(CentralEvent::StreamItem { call, .. }) => Ev::StreamItem(call),
                Some(CentralEvent::StreamEnd { call }) => Ev::StreamEnd(call),
                Some(CentralEvent::CallFailed { call, .. }) => Ev::Failed(call),
                Some(CentralEvent::Closed { .. }) => Ev::Closed,
                Some(_) => Ev::Other,
            };
            assert!(!self.central_closed, "event after Closed");
            match ev {
                Ev::Connected(encrypted) => {
                    assert!(!self.connected, "connected twice");
                    self.connected = true;
                    // A close drops the session's keys, so only an open central still has them.
                    assert!(
                        self.central.is_closed() || encrypted == self.central.is_encrypted(),
                        "Connected {{ encrypted: {encrypted} }} but is_encrypted() disagrees"
                    );
                }
                Ev::Response(call, data) => {
                    let r = self.rec(call);
                    assert!(
                        r.kind != CallKind::ServerStream,
                        "Response on a server stream"
                    );
                    let (kind, request) = (r.kind, r.request.clone());
                    assert!(data.len() <= self.central.config().max_response_len);
                    self.finish(call, "Response");
                    if self.target == Target::TwoParty && kind == CallKind::Unary {
                        assert_eq!(data, request, "call {call:?} got another call's data");
                        self.responses += 1;
                    }
                }
                Ev::StreamItem(call) => {
                    let r = self.rec(call);
                    assert_eq!(r.kind, CallKind::ServerStream, "stream item for {call:?}");
                    assert!(!r.done, "stream item after the end of {call:?}");
                }
                Ev::StreamEnd(call) => {
                    assert_eq!(self.rec(call).kind, CallKind::ServerStream);
                    self.finish(call, "StreamEnd");
                }
                Ev::Failed(call) => self.finish(call, "CallFailed"),
                Ev::Closed => {
                    assert!(self.central.is_closed());
                    self.central_closed = true;
                }
                Ev::Other => {}
            }
        }
        panic!("central event queue never empties");
    }

    /// Drains the peripheral's events into the application's request list.
    fn drain_peripheral(&mut self) {
        let max_req = self.periph.config().max_request_len;
        let mut n = 0;
        while let Some(ev) = self.periph.poll_event() {
            n += 1;
            assert!(n < MAX_ROUNDS, "peripheral event queue never empties");
            match ev {
                PeripheralEvent::Request { tid, name, data } => {
                    assert!(data.len() <= max_req, "request larger than max_request_len");
                    let (name, data) = (String::from(name), data.to_vec());
                    // Requests with odd tids are taken out of the assembler, as a runtime takes
                    // long ones; the buffer must hold exactly the event's data.
                    if tid & 1 == 1 {
                        let taken = self.periph.take_request();
                        let (buf, range) = taken.expect("the request just returned");
                        assert_eq!(buf.get(range), Some(&data[..]), "taken request data");
                        assert!(self.periph.take_request().is_none(), "taken twice");
                    }
                    self.requests.push_back((tid, name, data));
                }
                PeripheralEvent::StreamEndC2P { .. } => self.upload_seen = true,
                _ => {}
            }
        }
        assert!(self.requests.len() <= 4 * 256, "unbounded request list");
    }

    /// Drains events and moves every PDU both sides want to send into the queues.
    fn settle(&mut self) {
        for _ in 0..MAX_ROUNDS {
            self.drain_central();
            self.drain_peripheral();
            if self.auto_serve {
                while !self.requests.is_empty() {
                    self.serve(0, 0);
                    self.drain_peripheral();
                }
                if self.upload_seen {
                    self.upload_seen = false;
                    let _ = self
                        .periph
                        .respond_upload(self.now, "counter_upload", &[8, 1]);
                }
            }
            let mut buf = vec![0u8; TX_BUF];
            let mut progressed = false;
            let cmtu = self.central.config().att_mtu;
            // A LONG container only once both sides agreed; otherwise the MTU binds.
            let long = self.central.long_containers();
            let cmax = if long {
                MAX_LONG_CONTAINER_LEN
            } else {
                cmtu - 3
            };
            for _ in 0..MAX_ROUNDS * 100 {
                let Some(n) = self.central.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                assert!(n <= cmax, "central PDU of {n} bytes at ATT MTU {cmtu}");
                self.c2p.push_back(buf[..n].to_vec());
                progressed = true;
            }
            let pmtu = self.periph.config().att_mtu;
            let pmax = if self.periph.long_containers() {
                MAX_LONG_CONTAINER_LEN
            } else {
                pmtu - 3
            };
            for _ in 0..MAX_ROUNDS * 100 {
                let Some(n) = self.periph.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                assert!(
                    n <= pmax,
                    "peripheral PDU of {n} bytes at ATT MTU {pmtu}: {:02x?}",
                    &buf[..n.min(8)]
                );
                self.p2c.push_back(buf[..n].to_vec());
                progressed = true;
            }
            // Keep memory bounded on long inputs: a real link would apply backpressure.
            while self.c2p.len() > 2_000 {
                self.c2p.pop_front();
            }
            while self.p2c.len() > 2_000 {
                self.p2c.pop_front();
            }
            if !progressed {
                return;
            }
        }
        panic!("the connection keeps transmitting without input");
    }

    fn deliver_to_central(&mut self, pdu: &[u8]) {
        assert!(
            self.central.handle_input(self.now, pdu).is_ok(),
            "EventQueueFull with drained events"
        );
        self.settle();
    }

    fn deliver_to_peripheral(&mut self, pdu: &[u8]) {
        assert!(
            self.periph.handle_input(self.now, pdu).is_ok(),
            "EventQueueFull with drained events"
        );
        self.settle();
    }

    /// Handles due timeouts on both sides; a handled deadline must not come back unchanged.
    fn timeouts(&mut self) {
        let now = self.now;
        if self.central.poll_timeout().is_some_and(|t| t <= now) {
            self.central.handle_timeout(now);
            self.settle();
            let next = self.central.poll_timeout();
            assert!(
                next.is_none_or(|t| t > now),
                "central deadline {next:?} still due at {now:?}"
            );
        }
        if self.periph.poll_timeout().is_some_and(|t| t <= now) {
            self.periph.handle_timeout(now);
            self.settle();
            let next = self.periph.poll_timeout();
            assert!(
                next.is_none_or(|t| t > now),
                "peripheral deadline {next:?} still due at {now:?}"
            );
        }
    }

    fn channel(&mut self, c2p: bool, action: Chan) {
        let queue = if c2p { &mut self.c2p } else { &mut self.p2c };
        let Some(mut pdu) = queue.pop_front() else {
            return;
        };
        match action {
            Chan::Drop => return,
            Chan::Reorder => {
                queue.push_back(pdu);
                return;
            }
            Chan::Duplicate => queue.push_front(pdu.clone()),
            Chan::Deliver => {}
            Chan::Flip { pos, bit } => {
                let secure = self.central.is_encrypted() && self.periph.is_encrypted();
                let start = if self.target == Target::TwoParty {
                    // Headers and plaintext are not authenticated in bleRPC v1: corrupting them
                    // can legitimately misroute data, so the two-party target only flips
                    // payload bytes of an encrypted link.
                    if !secure {
                        return;
                    }
                    Container::parse(&pdu).map_or(pdu.len(), |c| c.header_len())
                } else {
                    0
                };
                if pdu.len() > start {
                    let i = start + usize::from(pos) % (pdu.len() - start);
                    pdu[i] ^= 1 << (bit % 8);
                }
            }
            Chan::Truncate(n) => pdu.truncate(usize::from(n) % pdu.len().max(1)),
        }
        if c2p {
            self.deliver_to_peripheral(&pdu);
        } else {
            self.deliver_to_central(&pdu);
        }
    }

    /// Delivers both queues until the link is quiet.
    fn run(&mut self) {
        for _ in 0..MAX_ROUNDS {
            if let Some(pdu) = self.c2p.pop_front() {
                self.deliver_to_peripheral(&pdu);
            } else if let Some(pdu) = self.p2c.pop_front() {
                self.deliver_to_central(&pdu);
            } else {
                return;
            }
        }
    }

    /// The peripheral application handles its oldest request. `choice` picks the answer: mostly
    /// the demo service (echo / streams / upload ack), sometimes BUSY, an error, or silence.
    fn serve(&mut self, choice: u8, arg: u8) {
        let Some((tid, name, data)) = self.requests.pop_front() else {
            return;
        };
        let now = self.now;
        let p = &mut self.periph;
        match choice % 8 {
            5 => {
                let _ = p.respond_error(now, tid, ErrorCode::Busy);
            }
            6 => {
                let _ = p.respond_error(now, tid, ErrorCode::from_byte(arg));
            }
            7 => {} // never answered
            _ => match name.as_str() {
                "counter_stream" => {
                    for i in 0..(arg % 5) {
                        if p.send_stream_item(now, tid, "counter_stream", &[8, i])
                            .is_err()
                        {
                            break;
                        }
                    }
                    let _ = p.end_stream(now, tid);
                }
                "counter_upload" => {
                    let _ = p.ack(tid);
                }
                _ => {
                    let _ = p.respond(now, tid, &name, &data);
                }
            },
        }
        self.settle();
    }

    fn apply(&mut self, op: Op) {
        let allowed = match (&op, self.target) {
            (Op::InjectPeripheral(_), Target::Central) => false,
            (Op::InjectCentral(_), Target::Peripheral) => false,
            (
                Op::InjectCentral(_) | Op::InjectPeripheral(_) | Op::PeripheralRaw { .. },
                Target::TwoParty,
            ) => false,
            (
                Op::StartCall { .. } | Op::SendStreamItem { .. } | Op::FinishStream { .. },
                Target::TwoParty,
            ) => {
                // Bound the transaction ids used so they never wrap (a wrapped tid can make a
                // held-back stale response look current, a known v1 limitation).
                self.tid_ops += 1;
                self.tid_ops <= 40
            }
            _ => true,
        };
        if !allowed {
            return;
        }
        let now = self.now;
        match op {
            Op::Advance(ms) => {
                self.now = now + Duration::from_millis(u64::from(ms));
                self.timeouts();
            }
            Op::FireTimeout => {
                let next = [self.central.poll_timeout(), self.periph.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                if let Some(t) = next {
                    self.now = self.now.max(t);
                    self.timeouts();
                }
            }
            Op::Run => self.run(),
            Op::C2P(c) => self.channel(true, c),
            Op::P2C(c) => self.channel(false, c),
            Op::StartCall { kind, name, data } => {
                let kind_bits = kind;
                let kind = match (kind % 3, self.target) {
                    (_, Target::TwoParty) => CallKind::Unary,
                    (0, _) => CallKind::Unary,
                    (1, _) => CallKind::ServerStream,
                    _ => CallKind::ClientStream,
                };
                let name = if self.target == Target::TwoParty {
                    "echo"
                } else {
                    NAMES[usize::from(name) % NAMES.len()]
                };
                // Client streams take no request data; keep one byte now and then to hit WrongCallKind.
                let data = if kind == CallKind::ClientStream && data.len() != 1 {
                    Vec::new()
                } else {
                    stretch(data)
                };
                let ready = self.central.is_ready();
                // Other bits of `kind`: start it framed (`start_call_framed`), and then now and
                // then from a buffer that is not one REQUEST command.
                let started = match kind_bits / 3 % 4 {
                    0 => self.central.start_call(now, name, &data, kind),
                    variant => {
                        let header_len = Command::header_len_large(name.len(), data.len());
                        let mut command = vec![0u8; header_len];
                        let emitted = Command::emit_header_large(
                            crate::wire::command::CommandType::Request,
                            name,
                            data.len(),
                            &mut command,
                        );
                        assert!(emitted.is_ok(), "{emitted:?}");
                        command.extend_from_slice(&data);
                        let malformed = variant == 3;
                        if malformed {
                            // A trailing byte: never exactly one command.
                            command.push(0);
                        }
                        let given = command.clone();
                        let result = self.central.start_call_framed(now, &mut command, kind);
                        match &result {
                            Ok(_) => assert!(command.is_empty(), "the call takes the buffer"),
                            Err(_) => assert_eq!(command, given, "refused: given back unchanged"),
                        }
                        if malformed {
                            assert_eq!(result, Err(CallError::MalformedCommand));
                        }
                        result
                    }
                };
                match started {
                    Ok(id) => {
                        assert!(ready, "call started before the connection was ready");
                        assert!(!self.calls.iter().any(|c| c.id == id), "call id reused");
                        self.calls.push(CallRec {
                            id,
                            kind,
                            request: data,
                            done: false,
                        });
                    }
                    Err(e) => {
                        if !ready {
                            assert!(
                                matches!(
                                    e,
                                    CallError::NotReady
                                        | CallError::Closed
                                        | CallError::MalformedCommand
                                ),
                                "{e:?}"
                            );
                        }
                    }
                }
                self.settle();
            }
            Op::SendStreamItem { call, data } => {
                let id = self.call(call);
                let _ = self.central.send_stream_item(now, id, &stretch(data));
                self.settle();
            }
            Op::FinishStream { call } => {
                let id = self.call(call);
                let _ = self.central.finish_stream(now, id);
                self.settle();
            }
            Op::Cancel { call } => {
                let id = self.call(call);
                if self.central.cancel(id).is_ok() {
                    self.finish(id, "cancel");
                }
                self.settle();
            }
            Op::AcceptIdentity => {
                self.central.accept_identity(now);
                self.settle();
            }
            Op::RejectIdentity => {
                self.central.reject_identity(now);
                self.settle();
            }
            Op::CloseCentral => {
                self.central.close(now);
                self.settle();
                assert!(self.central.is_closed());
                assert!(self.central.poll_timeout().is_none());
                assert!(
                    self.calls.iter().all(|c| c.done),
                    "close left a call without an outcome"
                );
            }
            Op::Serve { choice, arg } => self.serve(choice, arg),
            Op::ClosePeripheral => {
                self.periph.close(now);
                self.requests.clear();
                self.settle();
                assert!(self.periph.poll_timeout().is_none());
            }
            Op::InjectCentral(pdu) => self.deliver_to_central(&pdu),
            Op::InjectPeripheral(pdu) => self.deliver_to_peripheral(&pdu),
            Op::PeripheralRaw { what, tid, data } => {
                let p = &mut self.periph;
                let name = NAMES[usize::from(what >> 3) % NAMES.len()];
                let _ = match what % 7 {
                    0 => p.respond(now, tid, name, &data),
                    1 => p.respond_error(
                        now,
                        tid,
                        ErrorCode::from_byte(data.first().copied().unwrap_or(2)),
                    ),
                    2 => p.ack(tid),
                    3 => p.send_stream_item(now, tid, name, &data),
                    4 => p.end_stream(now, tid),
                    5 => p.respond_upload(now, name, &data),
                    _ => p.respond_with(now, tid, name, data.len(), |d| d.copy_from_slice(&data)),
                };
                self.settle();
            }
        }
    }

    fn run_program(target: Target, data: &[u8]) -> Option<World> {
        let mut cur = Cursor::new(data);
        let cfg = WorldConfig::decode(&mut cur);
        let mut w = World::new(target, cfg)?;
        let mut steps = 0;
        while !cur.is_empty() && steps < 2_000 {
            steps += 1;
            let op = Op::decode(&mut cur);
            w.apply(op);
        }
        // Whatever happened, the connection winds down: deliver, then let every deadline pass.
        w.run();
        for _ in 0..64 {
            let next = [w.central.poll_timeout(), w.periph.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next else { break };
            w.now = w.now.max(t);
            w.timeouts();
            w.run();
        }
        Some(w)
    }
}

/// A Central fed arbitrary PDUs and user operations, next to a genuine peripheral (so encrypted
/// states are reachable). Invariants: PDUs within the MTU, no `EventQueueFull` while events are
/// drained, deadlines make progress, call events are consistent (one outcome per call, none for
/// unknown calls, nothing after Closed).
pub fn connection_central(data: &[u8]) {
    let _ = World::run_program(Target::Central, data);
}

/// A Peripheral fed arbitrary PDUs and user operations (respond, errors, streams, upload), next
/// to a genuine central. Same invariants as [`connection_central`].
pub fn connection_peripheral(data: &[u8]) {
    let _ = World::run_program(Target::Peripheral, data);
}

/// A Central and an echo Peripheral through a lossy, duplicating, reordering channel (and, on an
/// encrypted link, payload bit flips). Every unary response must equal its own request.
pub fn two_party(data: &[u8]) {
    let _ = World::run_program(Target::TwoParty, data);
}

/// Runs a program and reports how many echo responses were checked (for the corpus generator).
pub fn two_party_responses(data: &[u8]) -> usize {
    World::run_program(Target::TwoParty, data).map_or(0, |w| w.responses)
}

/// The PDUs of an encrypted (or plaintext) session: setup, a few echo calls, a server stream and
/// an upload, as (c2p, p2c). Used to seed the corpora with real traffic.
pub fn capture_traffic(encrypted: bool) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let cfg = if encrypted {
        WorldConfig::ENCRYPTED
    } else {
        WorldConfig::PLAINTEXT
    };
    let mut w = World::new(Target::Central, cfg).expect("world");
    let (mut c2p, mut p2c) = (Vec::new(), Vec::new());
    let mut pump = |w: &mut World| {
        for _ in 0..MAX_ROUNDS {
            if let Some(pdu) = w.c2p.pop_front() {
                c2p.push(pdu.clone());
                w.deliver_to_peripheral(&pdu);
            } else if let Some(pdu) = w.p2c.pop_front() {
                p2c.push(pdu.clone());
                w.deliver_to_central(&pdu);
            } else {
                return;
            }
        }
    };
    pump(&mut w);
    w.apply(Op::AcceptIdentity);
    pump(&mut w);
    let big: Vec<u8> = (0..600u16).map(|i| i as u8).collect();
    for (kind, name, data) in [
        (0u8, 0u8, b"\x0a\x05hello".to_vec()),
        (0, 0, big),
        (1, 1, vec![8, 3]),
        (2, 2, vec![]),
    ] {
        w.apply(Op::StartCall { kind, name, data });
        if kind == 2 {
            let sel = w.calls.len().saturating_sub(1) as u8;
            w.apply(Op::SendStreamItem {
                call: sel,
                data: vec![8, 1],
            });
            w.apply(Op::FinishStream { call: sel });
        }
        pump(&mut w);
    }
    (c2p, p2c)
}
