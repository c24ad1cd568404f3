//! The CLI's parsers of user and captured input: JSON ⇄ protobuf for the demo schema
//! (`blerpc_schema`) and the dissector (`blerpc_cli::decode`).

use std::sync::OnceLock;

use blerpc::blerpc_proto::wire::container::Container;
use blerpc_cli::decode::{DecodeOptions, Dir, Layer, PduInput, decode, parse_hex, text};
use blerpc_schema::{Method, Schema};

use crate::input::Cursor;

/// The demo service's methods, in declaration order (decoding the descriptors once).
fn methods() -> &'static [Method] {
    static METHODS: OnceLock<Vec<Method>> = OnceLock::new();
    METHODS.get_or_init(|| {
        let schema = Schema::demo();
        schema
            .commands()
            .iter()
            .map(|c| schema.method(c).unwrap())
            .collect()
    })
}

/// JSON ⇄ protobuf for the demo schema: `[selector]` then the JSON text (as lossy UTF-8) or the
/// protobuf bytes. `selector % 5` picks the method; bit 7 picks the direction: clear, JSON →
/// request bytes (what `blerpc call` sends); set, response bytes → JSON (what it prints).
///
/// - JSON → bytes: when [`Method::encode_request`] accepts the text, the bytes decode
///   ([`Method::decode_request`]) to JSON that encodes to the same bytes again, and that JSON
///   is a fixed point (decode → encode → decode gives it back).
/// - bytes → JSON: when [`Method::decode_response`] accepts the bytes, its JSON is accepted by
///   [`Method::encode_response`], and the re-encoded bytes decode to the same JSON (unknown
///   fields are dropped on the way; known ones survive exactly).
/// - Either way, an error is one line of text (unless the input's own escapes put a newline in).
pub fn json_protobuf(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let selector = cur.u8();
    let methods = methods();
    let method = &methods[usize::from(selector) % methods.len()];
    let rest = cur.rest();
    if selector & 0x80 == 0 {
        let json = String::from_utf8_lossy(rest);
        match method.encode_request(&json) {
            Ok(bytes) => {
                let shown = method
                    .decode_request(&bytes)
                    .unwrap_or_else(|e| panic!("our own encoding does not decode: {e:#}"));
                let again = method
                    .encode_request(&shown)
                    .unwrap_or_else(|e| panic!("our own JSON {shown} does not encode: {e:#}"));
                assert_eq!(again, bytes, "JSON {shown} encodes differently");
                assert_eq!(method.decode_request(&again).unwrap(), shown);
            }
            Err(e) => one_line(&e, rest),
        }
    } else {
        match method.decode_response(rest) {
            Ok(shown) => {
                assert!(!shown.contains('\n'), "{shown}");
                let bytes = method
                    .encode_response(&shown)
                    .unwrap_or_else(|e| panic!("our own JSON {shown} does not encode: {e:#}"));
                assert_eq!(method.decode_response(&bytes).unwrap(), shown);
                assert_eq!(method.encode_response(&shown).unwrap(), bytes);
            }
            Err(e) => one_line(&e, b""),
        }
    }
}

/// The message `blerpc` prints for `e` (`{:#}`: the chain) is one line, unless the input itself
/// supplied the line break (an escaped `\n` in a JSON string, echoed as a field name or value).
fn one_line(e: &dyn std::fmt::Display, input: &[u8]) {
    let msg = format!("{e:#}");
    assert!(!msg.is_empty());
    if !input.contains(&b'\\') {
        assert!(!msg.contains('\n'), "a multi-line error: {msg}");
    }
}

/// The ATT MTUs the dissector target picks from.
const MTUS: [usize; 8] = [10, 23, 27, 64, 185, 247, 251, 512];

/// The session key of `testdata/vectors/key_exchange.json` (what the CLI tests decrypt with).
const KEY: [u8; 16] = [
    0x12, 0xe6, 0x8d, 0x83, 0x0b, 0x38, 0x02, 0x89, 0x6b, 0x9f, 0x09, 0x48, 0xa4, 0xf5, 0xfe, 0x5a,
];

/// The dissector (`blerpc decode`): `[options]` then the PDUs. Options: bits 2–0 the MTU (from
/// 10 to 512), bits 4–3 the direction (none, C→P, P→C, none), bit 5 the vectors' session key,
/// bit 6 `--strict`, bit 7 text mode. In text mode the rest is a capture file (lossy UTF-8, one
/// hex PDU per line, `#` comments); otherwise it is binary PDUs as [`Cursor::chunk`]s, given to
/// the dissector as hex arguments.
///
/// Invariants: one PDU report per input, in order, with its bytes when the hex decodes
/// ([`parse_hex`]) and a `hex` layer error when it does not; a header exactly when the core's
/// `Container::parse` accepts the bytes, with the same tid, seq and payload; every PDU's error
/// listed in `errors`; `ok` exactly when there are no errors (and, with `--strict`, no
/// warnings); message and PDU cross-references in range, a message's length its bytes; and the
/// report serialises to JSON and renders as text, both without panicking.
pub fn dissector(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let flags = cur.u8();
    let opts = DecodeOptions {
        mtu: MTUS[usize::from(flags & 7)],
        direction: match (flags >> 3) & 3 {
            1 => Some(Dir::C2p),
            2 => Some(Dir::P2c),
            _ => None,
        },
        key: (flags & 0x20 != 0).then_some(KEY),
        strict: flags & 0x40 != 0,
    };
    let inputs = if flags & 0x80 != 0 {
        PduInput::lines("fuzz", &String::from_utf8_lossy(cur.rest()))
    } else {
        let mut inputs = Vec::new();
        while !cur.is_empty() && inputs.len() < 64 {
            inputs.push(PduInput::arg(inputs.len() + 1, hex::encode(cur.chunk())));
        }
        inputs
    };
    let report = decode(&inputs, &opts);

    assert_eq!(report.pdus.len(), inputs.len());
    assert_eq!(report.mtu, opts.mtu);
    assert_eq!(report.direction, opts.direction);
    for (i, (pdu, input)) in report.pdus.iter().zip(&inputs).enumerate() {
        assert_eq!(pdu.index, i);
        assert_eq!(pdu.source, input.source);
        match parse_hex(&input.text) {
            Ok(bytes) => {
                assert_eq!(pdu.hex, hex::encode(&bytes), "PDU {i}");
                assert_eq!(pdu.len, bytes.len(), "PDU {i}");
                match Container::parse(&bytes) {
                    Ok(c) => {
                        let r = pdu.container.as_ref().expect("a header for a container");
                        assert_eq!((r.tid, r.seq), (c.tid, c.seq), "PDU {i}");
                        assert_eq!(r.payload_hex, hex::encode(c.payload), "PDU {i}");
                        assert_eq!(r.payload_len, c.payload.len(), "PDU {i}");
                        assert!(pdu.split.is_some(), "PDU {i}");
                    }
                    Err(_) => {
                        assert!(pdu.container.is_none(), "PDU {i}");
                        let e = pdu.error.as_ref().expect("an error for a bad header");
                        assert_eq!(e.layer, Layer::Container, "PDU {i}");
                    }
                }
            }
            Err(_) => {
                assert!(pdu.hex.is_empty() && pdu.container.is_none(), "PDU {i}");
                let e = pdu.error.as_ref().expect("an error for bad hex");
                assert_eq!(e.layer, Layer::Hex, "PDU {i}");
            }
        }
        if let Some(e) = &pdu.error {
            assert!(report.errors.contains(e), "PDU {i}'s error is not listed");
        }
        if let Some(m) = pdu.completes_message {
            assert!(m < report.messages.len(), "PDU {i} completes message {m}");
            assert!(report.messages[m].pdus.contains(&i));
        }
    }
    for (m, message) in report.messages.iter().enumerate() {
        assert!(!message.pdus.is_empty(), "message {m} has no PDU");
        assert!(
            message.pdus.iter().all(|&p| p < inputs.len()),
            "message {m}"
        );
        assert_eq!(message.hex.len(), 2 * message.length, "message {m}");
    }
    for t in &report.incomplete {
        assert!(t.pdus.iter().all(|&p| p < inputs.len()));
    }
    for d in report.errors.iter().chain(&report.warnings) {
        assert!(d.pdu.is_none_or(|p| p < inputs.len()), "{d:?}");
        assert!(
            d.message_index.is_none_or(|m| m < report.messages.len()),
            "{d:?}"
        );
    }
    let expect_ok = report.errors.is_empty() && (!opts.strict || report.warnings.is_empty());
    assert_eq!(report.ok, expect_ok);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["ok"], report.ok);
    let _ = text::render(&report, flags & 1 != 0);
}
