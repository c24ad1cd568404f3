//! `dissect()` on the wire.md §6 vectors, the large-message and long-container extensions, and
//! the JSON and text forms, checked field by field.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod common;

use blerpc_dissect::{ControlBody, ControlKind, Dir, Layer, Options};
use blerpc_proto::wire::container::ControlCmd;
use common::*;
use serde_json::json;

#[test]
fn timeout_request_and_response_inferred() {
    let r = default(&["0000c400", "0000c4026400"]);
    assert!(
        r.ok && r.errors.is_empty() && r.warnings.is_empty(),
        "{r:#?}"
    );
    assert_eq!(
        control(&r, 0),
        &ControlBody::Timeout {
            kind: ControlKind::Request,
            direction: Dir::C2p,
            inferred: true,
            timeout_ms: None
        }
    );
    assert_eq!(
        control(&r, 1),
        &ControlBody::Timeout {
            kind: ControlKind::Response,
            direction: Dir::P2c,
            inferred: true,
            timeout_ms: Some(100)
        }
    );
}

#[test]
fn timeout_with_explicit_direction() {
    let opts = Options {
        direction: Some(Dir::P2c),
        ..Options::default()
    };
    // An empty TIMEOUT sent P→C is a response without its timeout_ms: an error.
    let r = run(&["0000c400"], &opts);
    assert!(!r.ok);
    let e = &r.errors[0];
    assert_eq!(
        (e.layer, e.field.as_deref(), e.offset),
        (Layer::Control, Some("timeout_ms"), Some(4))
    );
    assert_eq!(r.pdus[0].error.as_ref(), Some(e));
}

#[test]
fn capabilities_request_and_responses() {
    let r = default(&[
        "0100d006000000000000",
        "0000d000",
        "0100d0060030ffff0100",
        "0100d006ffffffff0100",
    ]);
    assert!(r.ok, "{r:#?}");
    let ControlBody::Capabilities {
        kind, max_request, ..
    } = control(&r, 0)
    else {
        panic!()
    };
    assert_eq!((*kind, *max_request), (ControlKind::Request, Some(0)));
    let ControlBody::Capabilities {
        kind, max_request, ..
    } = control(&r, 1)
    else {
        panic!()
    };
    assert_eq!((*kind, *max_request), (ControlKind::Request, None));
    assert_eq!(
        control(&r, 2),
        &ControlBody::Capabilities {
            kind: ControlKind::Response,
            direction: Dir::P2c,
            inferred: true,
            max_request: Some(12288),
            max_response: Some(65535),
            flags: Some(1),
            flag_names: vec!["ENCRYPTION_SUPPORTED".into()],
            large_max_request: None,
            large_max_response: None,
        }
    );
    let ControlBody::Capabilities { max_request, .. } = control(&r, 3) else {
        panic!()
    };
    assert_eq!(*max_request, Some(65535));
}

#[test]
fn error_codes_and_stream_ends() {
    let r = default(&[
        "0500d40102",
        "0500d40101",
        "0500d40103",
        "0900c800",
        "0900cc00",
    ]);
    assert!(r.ok, "{r:#?}");
    assert_eq!(
        control(&r, 0),
        &ControlBody::Error {
            code: 2,
            name: "BUSY",
            description: "peripheral busy",
            reference_code: true
        }
    );
    let ControlBody::Error {
        name,
        reference_code,
        ..
    } = control(&r, 1)
    else {
        panic!()
    };
    assert_eq!((*name, *reference_code), ("RESPONSE_TOO_LARGE", true));
    let ControlBody::Error {
        name,
        reference_code,
        ..
    } = control(&r, 2)
    else {
        panic!()
    };
    assert_eq!((*name, *reference_code), ("UNKNOWN_COMMAND", false));
    assert_eq!(control(&r, 3), &ControlBody::StreamEnd);
    assert_eq!(cmd(&r, 3), ControlCmd::StreamEndC2P);
    assert_eq!(control(&r, 4), &ControlBody::StreamEnd);
    assert_eq!(cmd(&r, 4), ControlCmd::StreamEndP2C);
}

#[test]
fn unknown_control_cmd_is_a_warning() {
    let r = default(&["0300dc0101"]);
    assert!(r.ok);
    assert_eq!(
        control(&r, 0),
        &ControlBody::Unknown {
            cmd_value: 7,
            payload_hex: "01".into()
        }
    );
    assert_eq!(r.warnings.len(), 1);
    // --strict turns it into a failure.
    let strict = Options {
        strict: true,
        ..Options::default()
    };
    assert!(!run(&["0300dc0101"], &strict).ok);
}

#[test]
fn mtu_23_split_reassembles_to_request_echo() {
    let opts = Options {
        mtu: 23,
        ..Options::default()
    };
    let r = run(&SPLIT_23, &opts);
    assert!(r.ok && r.warnings.is_empty(), "{r:#?}");
    assert_eq!(r.messages.len(), 1);
    let m = &r.messages[0];
    assert_eq!(
        (m.tid, m.pdus.as_slice(), m.length),
        (0x2a, &[0, 1, 2][..], 40)
    );
    let cmd = m.command.as_ref().unwrap();
    assert_eq!(
        (cmd.kind, cmd.name.as_str(), cmd.data_len),
        ("REQUEST", "echo", 32)
    );
    assert_eq!(cmd.data_hex, format!("0a1e{}", "42".repeat(30)));
    assert_eq!(r.pdus[2].completes_message, Some(0));
    // Split roles at MTU 23: 14 + 16 + 10.
    let roles: Vec<_> = r
        .pdus
        .iter()
        .map(|p| {
            let s = p.split.as_ref().unwrap();
            (
                s.position,
                s.containers,
                s.expected_chunk,
                s.received,
                s.fits,
            )
        })
        .collect();
    assert_eq!(
        roles,
        vec![
            (Some(1), Some(3), Some(14), Some(14), true),
            (Some(2), Some(3), Some(16), Some(30), true),
            (Some(3), Some(3), Some(10), Some(40), true),
        ]
    );
}

#[test]
fn split_checked_against_a_larger_mtu_hints_at_the_senders() {
    let r = default(&SPLIT_23);
    assert!(r.ok);
    let s = r.pdus[0].split.as_ref().unwrap();
    assert_eq!(
        (s.containers, s.expected_chunk, s.sender_mtu_hint),
        (Some(1), Some(40), Some(23))
    );
}

#[test]
fn container_too_long_for_mtu_is_a_warning() {
    let opts = Options {
        mtu: 23,
        ..Options::default()
    };
    // REQUEST flash_read in one FIRST container: 23 bytes > 20.
    let pdu = "000000110011000a666c6173685f726561640300108040";
    let r = run(&[pdu], &opts);
    assert!(r.ok);
    assert_eq!(r.warnings.len(), 1, "{r:#?}");
    assert_eq!(r.messages[0].command.as_ref().unwrap().name, "flash_read");
    assert!(!r.pdus[0].split.as_ref().unwrap().fits);
    assert!(r.warnings.iter().any(|w| w.layer == Layer::Mtu));
    assert!(
        !run(
            &[pdu],
            &Options {
                strict: true,
                ..opts
            }
        )
        .ok
    );
}

#[test]
fn key_exchange_steps_by_field() {
    let r = run(
        &[
            &format!("0200d821{STEP1}"),
            &format!("0200d881{STEP2}"),
            &format!("0200d82d{STEP3}"),
        ],
        &Options {
            key: Some(key()),
            ..Options::default()
        },
    );
    assert!(r.ok && r.warnings.is_empty(), "{r:#?}");
    let ControlBody::KeyExchange(s1) = control(&r, 0) else {
        panic!()
    };
    assert_eq!((s1.step, s1.direction), (1, Dir::C2p));
    assert_eq!(s1.central_public.as_deref(), STEP1.get(2..));
    let ControlBody::KeyExchange(s2) = control(&r, 1) else {
        panic!()
    };
    assert_eq!(
        (s2.step, s2.direction, s2.signature_valid),
        (2, Dir::P2c, Some(true))
    );
    assert_eq!(
        s2.identity.as_deref(),
        Some("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    );
    assert_eq!(s2.signature.as_ref().map(String::len), Some(128));
    let ControlBody::KeyExchange(s3) = control(&r, 2) else {
        panic!()
    };
    assert_eq!(s3.nonce.as_deref(), Some("000102030405060708090a0b"));
    assert_eq!(s3.confirmation_valid, Some(true));
}

#[test]
fn key_exchange_bad_signature_and_short_step() {
    let mut bad = STEP2.to_owned();
    bad.replace_range(70..72, "00"); // inside the signature
    let r = default(&[&format!("0200d821{STEP1}"), &format!("0200d881{bad}")]);
    let ControlBody::KeyExchange(s2) = control(&r, 1) else {
        panic!()
    };
    assert_eq!(s2.signature_valid, Some(false));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.field.as_deref() == Some("signature"))
    );
    // Step 2 cut to 100 payload bytes: `identity` at payload byte 97 = PDU byte 101.
    let short = format!("0200d864{}", &STEP2[..200]);
    let r = default(&[&short]);
    let e = &r.errors[0];
    assert_eq!(
        (e.layer, e.field.as_deref(), e.offset),
        (Layer::KeyExchange, Some("identity"), Some(101))
    );
    assert!(
        e.message.contains("at byte 101 (payload byte 97)"),
        "{}",
        e.message
    );
}

#[test]
fn session_frame_decrypts_with_key() {
    let r = run(
        &[SEALED_FIRST],
        &Options {
            key: Some(key()),
            ..Options::default()
        },
    );
    assert!(r.ok && r.warnings.is_empty(), "{r:#?}");
    let m = &r.messages[0];
    let enc = m.encryption.as_ref().unwrap();
    assert_eq!(
        (
            enc.counter,
            enc.ciphertext_len,
            enc.decrypted,
            enc.direction
        ),
        (0, 15, true, Some(Dir::C2p))
    );
    let cmd = m.command.as_ref().unwrap();
    assert_eq!(
        (cmd.kind, cmd.name.as_str(), cmd.data_hex.as_str()),
        ("REQUEST", "echo", "0a0568656c6c6f")
    );
}

#[test]
fn session_frame_without_key_is_possibly_encrypted_not_an_error() {
    let r = default(&[SEALED_FIRST]);
    assert!(r.ok && r.errors.is_empty());
    let m = &r.messages[0];
    assert!(m.command.is_none());
    let enc = m.encryption.as_ref().unwrap();
    assert_eq!(
        (enc.counter, enc.ciphertext_len, enc.decrypted),
        (0, 15, false)
    );
    assert_eq!(enc.tag, "4473c7ea2df3ba26f3bc8c6fa37d7401");
    assert!(
        m.note
            .as_deref()
            .unwrap()
            .starts_with("possibly encrypted: counter=0")
    );
}

#[test]
fn session_frame_with_wrong_key_or_direction_is_an_error() {
    let r = run(
        &[SEALED_FIRST],
        &Options {
            key: Some(key()),
            direction: Some(Dir::P2c),
            ..Options::default()
        },
    );
    assert!(!r.ok);
    let e = &r.errors[0];
    assert_eq!(
        (e.layer, e.field.as_deref(), e.offset, e.tid),
        (Layer::Session, Some("tag"), Some(19), Some(3))
    );
    assert_eq!(e.message_index, Some(0));
}

#[test]
fn replayed_counter_is_flagged() {
    let r = run(
        &[SEALED_FIRST, SEALED_FIRST],
        &Options {
            key: Some(key()),
            ..Options::default()
        },
    );
    assert!(r.ok);
    assert_eq!(r.messages.len(), 2);
    let w = &r.warnings[0];
    assert_eq!(
        (w.layer, w.field.as_deref(), w.message_index),
        (Layer::Session, Some("counter"), Some(1))
    );
}

#[test]
fn json_shape() {
    let opts = Options {
        mtu: 23,
        ..Options::default()
    };
    let mut pdus = SPLIT_23.to_vec();
    pdus.push("0500d4");
    let v = serde_json::to_value(run(&pdus, &opts)).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["mtu"], 23);
    assert_eq!(v["direction"], json!(null));
    assert_eq!(
        v["pdus"][0]["container"],
        json!({"tid": 42, "seq": 0, "type": "FIRST", "flags": 0, "total_length": 40,
               "payload_len": 14, "payload_hex": "00046563686f20000a1e42424242", "trailing": 0})
    );
    assert_eq!(v["pdus"][2]["completes_message"], 0);
    assert_eq!(
        v["messages"][0]["command"],
        json!({"type": "REQUEST", "name": "echo", "data_len": 32,
               "data_hex": format!("0a1e{}", "42".repeat(30))})
    );
    assert_eq!(v["messages"][0]["pdus"], json!([0, 1, 2]));
    let err = json!({"pdu": 3, "layer": "container", "field": "payload_len", "offset": 3,
                     "message": "field `payload_len` at byte 3 is truncated: needs 1 byte, 0 available"});
    assert_eq!(v["pdus"][3]["error"], err);
    assert_eq!(v["errors"], json!([err]));
    assert!(v["pdus"][3].get("container").is_none());

    let v = serde_json::to_value(default(&[
        "0100d0060030ffff0100",
        &format!("0200d821{STEP1}"),
    ]))
    .unwrap();
    assert_eq!(
        v["pdus"][0]["control"],
        json!({"cmd": "CAPABILITIES", "kind": "response", "direction": "p2c", "inferred": true,
               "max_request": 12288, "max_response": 65535, "flags": 1,
               "flag_names": ["ENCRYPTION_SUPPORTED"]})
    );
    assert_eq!(
        v["pdus"][1]["control"],
        json!({"cmd": "KEY_EXCHANGE", "step": 1, "direction": "c2p",
               "central_public": &STEP1[2..]})
    );
}

#[test]
fn large_message_extension_is_dissected() {
    use blerpc_proto::split::SplitCursor;
    use blerpc_proto::wire::command::Command;
    // The negotiation: the central's announcement and the 14-byte reply.
    let r = default(&[
        "0100d006000000000200",
        "0100d00effffffff03000000000100000001",
    ]);
    // The extension's 8 bytes are the reply's payload, not trailing bytes.
    assert!(
        r.ok && r.errors.is_empty() && r.warnings.is_empty(),
        "{r:#?}"
    );
    let ControlBody::Capabilities {
        kind, flag_names, ..
    } = control(&r, 0)
    else {
        panic!()
    };
    assert_eq!(
        (*kind, flag_names.as_slice()),
        (ControlKind::Request, &["LARGE_MESSAGES".to_owned()][..])
    );
    let ControlBody::Capabilities {
        kind,
        flag_names,
        large_max_request,
        large_max_response,
        ..
    } = control(&r, 1)
    else {
        panic!()
    };
    assert_eq!(*kind, ControlKind::Response);
    assert_eq!(flag_names, &["ENCRYPTION_SUPPORTED", "LARGE_MESSAGES"]);
    assert_eq!(
        (*large_max_request, *large_max_response),
        (Some(16 << 20), Some(16 << 20))
    );
    // A 70,000-byte REQUEST split at MTU 247: LARGE FIRST, then 291 SUBSEQUENTs (seq wraps).
    let data: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
    let cmd = Command::request("echo", &data);
    let mut msg = vec![0u8; cmd.emitted_len_large()];
    cmd.emit_large(&mut msg).unwrap();
    let mut cursor = SplitCursor::new_large(0x2a, msg.len(), 247).unwrap();
    let mut pdus = Vec::new();
    let mut buf = [0u8; 244];
    while let Some(n) = cursor.emit_next(&msg, &mut buf).unwrap() {
        pdus.push(hex::encode(&buf[..n]));
    }
    let refs: Vec<&str> = pdus.iter().map(String::as_str).collect();
    let r = default(&refs);
    assert!(
        r.ok && r.errors.is_empty() && r.warnings.is_empty(),
        "{:#?}",
        (&r.errors, &r.warnings)
    );
    let first = r.pdus[0].container.as_ref().unwrap();
    assert_eq!(
        (
            first.kind,
            first.flags,
            first.total_length,
            first.payload_len
        ),
        ("LARGE_FIRST", 0x01, Some(70_010), 236)
    );
    let split = r.pdus[0].split.as_ref().unwrap();
    assert_eq!(split.containers, Some(292));
    assert_eq!(split.expected_chunk, Some(236));
    // Container 257 carries seq 0 (wrapped) and is still placed by count.
    assert_eq!(r.pdus[256].container.as_ref().unwrap().seq, 0);
    assert_eq!(r.pdus[256].split.as_ref().unwrap().position, Some(257));
    assert_eq!(r.messages.len(), 1);
    let command = r.messages[0].command.as_ref().unwrap();
    assert_eq!(
        (command.kind, command.name.as_str(), command.data_len),
        ("REQUEST", "echo", 70_000)
    );
    let text = blerpc_dissect::text::render(&r, false);
    assert!(
        text.contains("LARGE_FIRST") && text.contains("total_length=70010"),
        "{}",
        &text[..400.min(text.len())]
    );
}

#[test]
fn text_of_the_readme_examples() {
    let r = default(&["0000c4026400", "0100d0060030ffff0100"]);
    assert_eq!(
        blerpc_dissect::text::render(&r, false),
        "\
#0  CONTROL     tid=0x00 seq=0 cmd=TIMEOUT payload_len=2       (MTU 247: fits)
    TIMEOUT response (P→C, inferred): timeout_ms=100
#1  CONTROL     tid=0x01 seq=0 cmd=CAPABILITIES payload_len=6  (MTU 247: fits)
    CAPABILITIES response (P→C, inferred): max_request=12288 max_response=65535 flags=0x0001 [ENCRYPTION_SUPPORTED]

2 PDUs, 0 messages, 0 errors, 0 warnings
"
    );
    let r = run(
        &SPLIT_23,
        &Options {
            mtu: 23,
            ..Options::default()
        },
    );
    assert_eq!(
        blerpc_dissect::text::render(&r, false),
        "\
#0  FIRST       tid=0x2a seq=0 total_length=40 payload_len=14  (MTU 23: fits, container 1 of 3, 14/40 bytes)
#1  SUBSEQUENT  tid=0x2a seq=1 payload_len=16                  (MTU 23: fits, container 2 of 3, 30/40 bytes)
#2  SUBSEQUENT  tid=0x2a seq=2 payload_len=10                  (MTU 23: fits, container 3 of 3, 40/40 bytes)
    → reassembled 40 bytes from #0, #1, #2
    → REQUEST echo  data_len=32  data=0a1e424242424242424242424242424242424242424242424242424242424242

3 PDUs, 1 message, 0 errors, 0 warnings
"
    );
}

#[test]
fn long_containers_are_not_held_to_the_att_mtu() {
    // A LONG FIRST (flags bit 1, u16 payload_len 300) carrying a whole REQUEST echo: a
    // stream link's container, so neither its flags nor its length are suspicious.
    let data = [0x42u8; 292];
    let mut msg = vec![0x00, 0x04];
    msg.extend_from_slice(b"echo");
    msg.extend_from_slice(&(data.len() as u16).to_le_bytes());
    msg.extend_from_slice(&data);
    assert_eq!(msg.len(), 300);
    let pdu = format!("0700022c012c01{}", hex::encode(&msg));
    let r = default(&[&pdu]);
    assert!(
        r.ok && r.errors.is_empty() && r.warnings.is_empty(),
        "{:#?}",
        (&r.errors, &r.warnings)
    );
    let split = r.pdus[0].split.as_ref().unwrap();
    assert_eq!(
        (
            split.long,
            split.fits,
            split.max_container_len,
            split.containers
        ),
        (true, true, 16_384, Some(1))
    );
    let text = blerpc_dissect::text::render(&r, false);
    assert!(
        text.contains("(LONG container: fits, 1 container)"),
        "{text}"
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["pdus"][0]["split"]["long"], true);
    assert_eq!(r.messages[0].command.as_ref().unwrap().data_len, 292);
    // Reserved bits are still reported: bit 0 of a SUBSEQUENT.
    let r = default(&["01014103aabbcc"]);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.field.as_deref() == Some("flags") && w.message.contains("0b01")),
        "{:#?}",
        r.warnings
    );
}

#[test]
fn request_fields_of_the_deadline_and_streams_extensions() {
    // echo "hi" with 300 ms left; open bidirectional "chat" with a window of 8; an item of
    // stream 6 (each one FIRST container of a plaintext request).
    let r = default(&[
        "0500000e000e02046563686fac0204000a026869",
        "0600000a000a14046368617408000000",
        "0700000b000b0804636861740602000a00",
    ]);
    assert!(r.ok && r.warnings.is_empty(), "{r:#?}");
    let cmds: Vec<_> = r
        .messages
        .iter()
        .map(|m| m.command.as_ref().unwrap())
        .collect();
    assert_eq!(
        (
            cmds[0].name.as_str(),
            cmds[0].deadline_ms,
            cmds[0].data_hex.as_str()
        ),
        ("echo", Some(300), "0a026869")
    );
    assert_eq!(
        (
            cmds[1].name.as_str(),
            cmds[1].window,
            cmds[1].bidi,
            cmds[1].data_len
        ),
        ("chat", Some(8), true, 0)
    );
    assert_eq!(
        (cmds[2].stream, cmds[2].window, cmds[2].data_hex.as_str()),
        (Some(6), None, "0a00")
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["messages"][1]["command"]["window"], json!(8));
    assert_eq!(v["messages"][1]["command"]["bidi"], json!(true));
    assert_eq!(v["messages"][2]["command"]["stream"], json!(6));
    assert!(
        v["messages"][0]["command"].get("bidi").is_none(),
        "absent when false"
    );
    let text = blerpc_dissect::text::render(&r, false);
    for shown in ["deadline=300ms", "open=bidi window=8", "item_of=6"] {
        assert!(text.contains(shown), "{shown}: {text}");
    }
}
