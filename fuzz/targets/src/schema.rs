//! The schema's parser of user input: JSON ⇄ protobuf for the demo schema (`blerpc_schema`), as
//! `blerpc call` and the gateway use it.

use std::sync::OnceLock;

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
