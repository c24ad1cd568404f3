//! The wire codecs, parse → emit → re-parse.

use blerpc_proto::Direction;
use blerpc_proto::wire::capabilities::Capabilities;
use blerpc_proto::wire::command::Command;
use blerpc_proto::wire::container::{Container, ContainerKind, ControlCmd, LONG_FLAG};
use blerpc_proto::wire::control::ControlMessage;
use blerpc_proto::wire::diagnostics::{Diagnostics, List};
use blerpc_proto::wire::key_exchange::{KeyExchangeStep, STEP2_LEN, STEP4_LEN};

use crate::input::Cursor;

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
                        && payload.len() < blerpc_proto::wire::capabilities::CAPABILITIES_LARGE_LEN)
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
    command_parse_extended(data);
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

/// A request with the deadline and streams extensions' fields (the deadline's varint, a
/// stream's window and id), with and without the large-message extension: what parses is the
/// stored command with its fields inserted (`with_fields`, as the central sends it), byte for
/// byte after the type byte, and parses back to the same (one encoding per request: a longer
/// varint than its value needs does not parse).
fn command_parse_extended(data: &[u8]) {
    use blerpc_proto::wire::command::{MAX_FIELDS_LEN, REQUEST_FLAGS, with_fields};
    for large in [false, true] {
        let Ok(e) = Command::parse_extended(data, large, REQUEST_FLAGS) else {
            continue;
        };
        let len = if large {
            e.command.emitted_len_large()
        } else {
            e.command.emitted_len()
        };
        let mut stored = vec![0u8; len];
        let emitted = if large {
            e.command.emit_large(&mut stored)
        } else {
            e.command.emit(&mut stored)
        };
        assert_eq!(emitted, Ok(len));
        let (mut type_byte, mut scratch) = ([0u8], [0u8; MAX_FIELDS_LEN]);
        let sent: Vec<u8> = with_fields(&stored, &e.fields, &mut type_byte, &mut scratch)
            .expect("a stored command holds its header")
            .concat();
        assert_eq!(sent.len(), e.header_len + e.command.data.len());
        assert_eq!(sent[1..], data[1..sent.len()]);
        let again = Command::parse_extended(&sent, large, REQUEST_FLAGS).expect("re-parses");
        assert_eq!((again.command, again.fields), (e.command, e.fields));
    }
}

fn command_parse_large(data: &[u8]) {
    use blerpc_proto::wire::command::{LARGE_DATA_FLAG, MAX_DATA_LEN};
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
    use blerpc_proto::wire::capabilities::{CAPABILITIES_LARGE_LEN, CapabilityFlags};
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

/// Diagnostics parse → emit → re-parse: every field and list entry survives (unknown fields
/// and repeated scalars' earlier values do not, by design), and a buffer one byte short of the
/// emitted length is an error, not a panic.
pub fn diagnostics_parse(data: &[u8]) {
    let Ok(d) = Diagnostics::parse(data) else {
        return;
    };
    let errors: Vec<_> = d.errors().collect();
    let unavailable: Vec<_> = d.unavailable().collect();
    let mut out = vec![0u8; 2 * data.len() + 16];
    let n = d.emit(&mut out).expect("room for twice the input");
    let again = Diagnostics::parse(&out[..n]).expect("what we emit parses");
    assert!(again.errors().eq(errors.iter().copied()));
    assert!(again.unavailable().eq(unavailable.iter().copied()));
    fn with_lists(x: Diagnostics<'_>) -> Diagnostics<'_> {
        Diagnostics {
            errors: List::Items(&[]),
            unavailable: List::Items(&[]),
            ..x
        }
    }
    assert_eq!(with_lists(again), with_lists(d));
    if n > 0 {
        assert!(d.emit(&mut out[..n - 1]).is_err());
    }
}
