//! Every protocol name a dissection shows comes from the core, and every one is covered: each
//! capability flag, error code and control command, from its wire bytes to the report, the
//! JSON and the text.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod common;

use blerpc_dissect::{ControlBody, ControlKind};
use blerpc_proto::wire::container::ControlCmd;
use common::*;
use serde_json::json;

#[test]
fn every_capability_flag_is_named() {
    // A peripheral's reply per flag (flags u16 LE at payload bytes 4-5), then all four with two
    // reserved bits: the core's names, `BIT_n` for the bits it does not define.
    let cases: [(&str, &[&str]); 10] = [
        ("0100d0060000ffff0100", &["ENCRYPTION_SUPPORTED"]),
        ("0100d0060000ffff0200", &["LARGE_MESSAGES"]),
        ("0100d0060000ffff0400", &["LONG_CONTAINERS"]),
        ("0100d0060000ffff0800", &["RELAY"]),
        (
            "0100d0060000ffff0f80",
            &[
                "ENCRYPTION_SUPPORTED",
                "LARGE_MESSAGES",
                "LONG_CONTAINERS",
                "RELAY",
                "BIT_15",
            ],
        ),
        ("0100d0060000ffff1000", &["CANCEL"]),
        ("0100d0060000ffff2000", &["DEADLINE"]),
        ("0100d0060000ffff4000", &["STREAMS"]),
        ("0100d0060000ffff8000", &["DIAGNOSTICS"]),
        ("0100d0060000ffff0001", &["BIT_8"]),
    ];
    for (pdu, names) in cases {
        // LARGE_MESSAGES in a reply needs the 8 extension bytes.
        let pdu = if names.contains(&"LARGE_MESSAGES") {
            format!("0100d00e{}0000010000000001", &pdu[8..])
        } else {
            pdu.to_owned()
        };
        let r = default(&[&pdu]);
        assert!(
            r.ok && r.warnings.is_empty(),
            "{pdu}: {:#?}",
            (&r.errors, &r.warnings)
        );
        let ControlBody::Capabilities {
            kind, flag_names, ..
        } = control(&r, 0)
        else {
            panic!("{pdu}")
        };
        assert_eq!(*kind, ControlKind::Response, "{pdu}");
        assert_eq!(flag_names, names, "{pdu}");
        let text = blerpc_dissect::text::render(&r, false);
        assert!(text.contains(&format!("[{}]", names.join(", "))), "{text}");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["pdus"][0]["control"]["flag_names"], json!(names), "{pdu}");
    }
    // A blerpc-rs central's request announcing LONG_CONTAINERS (and LARGE_MESSAGES).
    let r = default(&["0100d006000000000600"]);
    let ControlBody::Capabilities {
        kind, flag_names, ..
    } = control(&r, 0)
    else {
        panic!()
    };
    assert_eq!(
        (*kind, flag_names.as_slice()),
        (
            ControlKind::Request,
            &["LARGE_MESSAGES".to_owned(), "LONG_CONTAINERS".to_owned()][..]
        )
    );
}

#[test]
fn every_error_code_is_named() {
    use blerpc_proto::wire::error_code::ErrorCode;
    // Every code the core names, written out, then bytes it does not know.
    let codes: [(u8, &str, &str, bool); 13] = [
        (0x01, "RESPONSE_TOO_LARGE", "response too large", true),
        (0x02, "BUSY", "peripheral busy", true),
        (0x03, "UNKNOWN_COMMAND", "unknown command", false),
        (0x04, "DECODE_FAILED", "request failed to decode", false),
        (0x05, "DECRYPT_FAILED", "message failed to decrypt", false),
        (0x06, "ENCRYPTION_REQUIRED", "encryption required", false),
        (0x07, "REQUEST_TOO_LARGE", "request too large", false),
        (0x08, "SEQUENCE_GAP", "container sequence gap", false),
        (0x09, "KEY_EXCHANGE_FAILED", "key exchange failed", false),
        (0x0a, "HANDLER_FAILED", "handler failed", false),
        (0x0b, "STREAM_LIMIT", "stream limit exceeded", false),
        (0x0c, "CANCELLED", "cancelled by the central", false),
        (
            0x0d,
            "DEADLINE_EXCEEDED",
            "the request's deadline passed",
            false,
        ),
    ];
    assert_eq!(codes.len(), ErrorCode::NAMED.len(), "a code without a test");
    let unknown = [
        (0x00, "UNKNOWN", "peripheral error", false),
        (0x0e, "UNKNOWN", "peripheral error", false),
        (0xff, "UNKNOWN", "peripheral error", false),
    ];
    for (code, name, description, reference_code) in codes.into_iter().chain(unknown) {
        let pdu = format!("0500d401{code:02x}");
        let r = default(&[&pdu]);
        assert!(r.ok && r.warnings.is_empty(), "{pdu}: {r:#?}");
        assert_eq!(cmd(&r, 0), ControlCmd::Error);
        assert_eq!(
            control(&r, 0),
            &ControlBody::Error {
                code,
                name,
                description,
                reference_code
            },
            "{pdu}"
        );
        let text = blerpc_dissect::text::render(&r, false);
        assert!(
            text.contains(&format!(
                "    ERROR code={code:#04x} {name}: {description} ("
            )),
            "{text}"
        );
    }
}

#[test]
fn every_control_command_is_named() {
    // One well-formed container per command (payloads from wire.md §6.1 and §6.5), with the
    // name the container header and the control payload carry, and the body it decodes to.
    let cases: [(&str, ControlCmd, &str); 12] = [
        ("0300c000", ControlCmd::Reserved0, "NONE"),
        ("0000c4026400", ControlCmd::Timeout, "TIMEOUT"),
        ("0900c800", ControlCmd::StreamEndC2P, "STREAM_END_C2P"),
        ("0900cc00", ControlCmd::StreamEndP2C, "STREAM_END_P2C"),
        (
            "0100d0060030ffff0100",
            ControlCmd::Capabilities,
            "CAPABILITIES",
        ),
        ("0500d40102", ControlCmd::Error, "ERROR"),
        (
            "0200d821018520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
            ControlCmd::KeyExchange,
            "KEY_EXCHANGE",
        ),
        ("0300dc00", ControlCmd::Unknown(7), "UNKNOWN"),
        ("0300e00102", ControlCmd::Cancel, "CANCEL"),
        ("0300e403050800", ControlCmd::Credit, "CREDIT"),
        ("0300e800", ControlCmd::Unknown(10), "UNKNOWN"),
        ("0300fc00", ControlCmd::Unknown(15), "UNKNOWN"),
    ];
    // Every named command has a case (the rest are the unassigned ones).
    let named = cases
        .iter()
        .filter(|(_, c, _)| !matches!(c, ControlCmd::Unknown(_)))
        .count();
    assert_eq!(named, ControlCmd::NAMED.len(), "a command without a test");
    for (pdu, command, name) in cases {
        let r = default(&[pdu]);
        assert!(r.ok, "{pdu}: {r:#?}");
        assert_eq!(
            r.pdus[0].container.as_ref().unwrap().control_cmd,
            Some(name),
            "{pdu}"
        );
        assert_eq!(cmd(&r, 0), command, "{pdu}");
        let body_ok = match command {
            ControlCmd::Timeout => matches!(control(&r, 0), ControlBody::Timeout { .. }),
            ControlCmd::StreamEndC2P | ControlCmd::StreamEndP2C => {
                control(&r, 0) == &ControlBody::StreamEnd
            }
            ControlCmd::Capabilities => {
                matches!(control(&r, 0), ControlBody::Capabilities { .. })
            }
            ControlCmd::Error => matches!(control(&r, 0), ControlBody::Error { .. }),
            ControlCmd::KeyExchange => matches!(control(&r, 0), ControlBody::KeyExchange(_)),
            ControlCmd::Cancel => control(&r, 0) == &ControlBody::Cancel { request_tid: 2 },
            ControlCmd::Credit => {
                control(&r, 0)
                    == &ControlBody::Credit {
                        stream: 5,
                        credits: 8,
                    }
            }
            ControlCmd::Reserved0 | ControlCmd::Unknown(_) => {
                matches!(control(&r, 0), ControlBody::Unknown { cmd_value, .. } if *cmd_value == command.bits())
            }
        };
        assert!(body_ok, "{pdu}: {:?}", control(&r, 0));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["pdus"][0]["container"]["control_cmd"], name, "{pdu}");
        assert_eq!(v["pdus"][0]["control"]["cmd"], name, "{pdu}");
        let text = blerpc_dissect::text::render(&r, false);
        assert!(text.contains(&format!(" cmd={name} ")), "{text}");
    }
}

#[test]
fn every_container_type_is_named() {
    // FIRST, LARGE FIRST (flags bit 0), SUBSEQUENT, CONTROL and the undefined type 0b10, which
    // the reference names UNKNOWN.
    let cases = [
        ("070000000000", "FIRST", 0x00),
        ("0700010000000000", "LARGE_FIRST", 0x01),
        ("07014001aa", "SUBSEQUENT", 0x40),
        ("0000c400", "CONTROL", 0xc4),
        ("01018200", "UNKNOWN", 0x82),
    ];
    for (pdu, name, flags) in cases {
        let r = default(&[pdu]);
        let c = r.pdus[0].container.as_ref().unwrap();
        assert_eq!((c.kind, c.flags), (name, flags), "{pdu}");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["pdus"][0]["container"]["type"], name, "{pdu}");
        let text = blerpc_dissect::text::render(&r, false);
        assert!(text.starts_with(&format!("#0  {name:<11} tid=")), "{text}");
    }
    // The undefined type is shown with its flags and a warning.
    let r = default(&["01018200"]);
    assert!(
        blerpc_dissect::text::render(&r, false).contains("UNKNOWN     tid=0x01 seq=1 flags=0x82")
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| w.message == "undefined container type 0b10; receivers ignore it")
    );
}
