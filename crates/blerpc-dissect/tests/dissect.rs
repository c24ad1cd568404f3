//! `decode()` on the wire.md §6 vectors and on malformed input, checked field by field.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

use blerpc_cli::decode::{
    ControlKind, ControlReport, DecodeOptions, Dir, Layer, PduInput, Report, decode,
};
use serde_json::json;

const KEY: &str = "12e68d830b3802896b9f0948a4f5fe5a";
const STEP1: &str = "018520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
const STEP2: &str = concat!(
    "02de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f",
    "21e1fd6899395fcddad2e8c47c1559d360962fd6aea958a705e887a3063acf94",
    "507d3b284813b1a8a2b5e7e570dd44686941f768604fa72ea6b10d5c369a6703",
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
);
const STEP3: &str =
    "03000102030405060708090a0bdeab3e3f1abac538d48c34b53f5dfbf9a10f3b100a97271990fc4feb34984228";
/// encrypt(K, ctr 0, C→P, REQUEST echo "hello") as a FIRST container, tid 3.
const SEALED_FIRST: &str =
    "030000230023000000009cf7d7150c42a6bf48b246912998ab4473c7ea2df3ba26f3bc8c6fa37d7401";
/// The MTU 23 split of REQUEST echo {message: "B"*30}, tid 0x2a.
const SPLIT_23: [&str; 3] = [
    "2a000028000e00046563686f20000a1e42424242",
    "2a01401042424242424242424242424242424242",
    "2a02400a42424242424242424242",
];

fn run(pdus: &[&str], opts: &DecodeOptions) -> Report {
    let inputs: Vec<PduInput> = pdus
        .iter()
        .enumerate()
        .map(|(i, p)| PduInput::arg(i + 1, *p))
        .collect();
    decode(&inputs, opts)
}

fn default(pdus: &[&str]) -> Report {
    run(pdus, &DecodeOptions::default())
}

fn key() -> [u8; 16] {
    blerpc_cli::decode::parse_hex_array::<16>(KEY).unwrap()
}

fn control(r: &Report, i: usize) -> &ControlReport {
    r.pdus[i].control.as_ref().expect("control payload")
}

#[test]
fn timeout_request_and_response_inferred() {
    let r = default(&["0000c400", "0000c4026400"]);
    assert!(
        r.ok && r.errors.is_empty() && r.warnings.is_empty(),
        "{r:#?}"
    );
    assert_eq!(
        control(&r, 0),
        &ControlReport::Timeout {
            kind: ControlKind::Request,
            direction: Dir::C2p,
            inferred: true,
            timeout_ms: None
        }
    );
    assert_eq!(
        control(&r, 1),
        &ControlReport::Timeout {
            kind: ControlKind::Response,
            direction: Dir::P2c,
            inferred: true,
            timeout_ms: Some(100)
        }
    );
}

#[test]
fn timeout_with_explicit_direction() {
    let opts = DecodeOptions {
        direction: Some(Dir::P2c),
        ..DecodeOptions::default()
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
    let ControlReport::Capabilities {
        kind, max_request, ..
    } = control(&r, 0)
    else {
        panic!()
    };
    assert_eq!((*kind, *max_request), (ControlKind::Request, Some(0)));
    let ControlReport::Capabilities {
        kind, max_request, ..
    } = control(&r, 1)
    else {
        panic!()
    };
    assert_eq!((*kind, *max_request), (ControlKind::Request, None));
    assert_eq!(
        control(&r, 2),
        &ControlReport::Capabilities {
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
    let ControlReport::Capabilities { max_request, .. } = control(&r, 3) else {
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
        &ControlReport::Error {
            code: 2,
            name: "BUSY",
            description: "peripheral busy",
            reference_code: true
        }
    );
    let ControlReport::Error {
        name,
        reference_code,
        ..
    } = control(&r, 1)
    else {
        panic!()
    };
    assert_eq!((*name, *reference_code), ("RESPONSE_TOO_LARGE", true));
    let ControlReport::Error {
        name,
        reference_code,
        ..
    } = control(&r, 2)
    else {
        panic!()
    };
    assert_eq!((*name, *reference_code), ("UNKNOWN_COMMAND", false));
    assert_eq!(control(&r, 3), &ControlReport::StreamEndC2p);
    assert_eq!(control(&r, 4), &ControlReport::StreamEndP2c);
}

#[test]
fn unknown_control_cmd_is_a_warning() {
    let r = default(&["0300dc0101"]);
    assert!(r.ok);
    assert_eq!(
        control(&r, 0),
        &ControlReport::Unknown {
            cmd_value: 7,
            payload_hex: "01".into()
        }
    );
    assert_eq!(r.warnings.len(), 1);
    // --strict turns it into a failure.
    let strict = DecodeOptions {
        strict: true,
        ..DecodeOptions::default()
    };
    assert!(!run(&["0300dc0101"], &strict).ok);
}

#[test]
fn mtu_23_split_reassembles_to_request_echo() {
    let opts = DecodeOptions {
        mtu: 23,
        ..DecodeOptions::default()
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
    let opts = DecodeOptions {
        mtu: 23,
        ..DecodeOptions::default()
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
            &DecodeOptions {
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
        &DecodeOptions {
            key: Some(key()),
            ..DecodeOptions::default()
        },
    );
    assert!(r.ok && r.warnings.is_empty(), "{r:#?}");
    let ControlReport::KeyExchange(s1) = control(&r, 0) else {
        panic!()
    };
    assert_eq!((s1.step, s1.direction), (1, Dir::C2p));
    assert_eq!(s1.central_public.as_deref(), STEP1.get(2..));
    let ControlReport::KeyExchange(s2) = control(&r, 1) else {
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
    let ControlReport::KeyExchange(s3) = control(&r, 2) else {
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
    let ControlReport::KeyExchange(s2) = control(&r, 1) else {
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
        &DecodeOptions {
            key: Some(key()),
            ..DecodeOptions::default()
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
        &DecodeOptions {
            key: Some(key()),
            direction: Some(Dir::P2c),
            ..DecodeOptions::default()
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
        &DecodeOptions {
            key: Some(key()),
            ..DecodeOptions::default()
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
fn malformed_truncated_payload() {
    let r = default(&["0000c4026400", "2a01400342"]);
    assert!(!r.ok);
    assert_eq!(r.errors.len(), 1);
    let e = &r.errors[0];
    assert_eq!(
        (e.pdu, e.layer, e.field.as_deref(), e.offset),
        (Some(1), Layer::Container, Some("payload"), Some(4))
    );
    assert_eq!(
        e.to_string(),
        "PDU 1: field `payload` at byte 4 is truncated: needs 3 bytes, 1 available"
    );
    // The good PDU before it is still decoded.
    assert!(r.pdus[0].control.is_some());
}

#[test]
fn malformed_truncated_header() {
    let r = default(&["0000001100"]);
    let e = &r.errors[0];
    assert_eq!(
        (e.field.as_deref(), e.offset),
        (Some("payload_len"), Some(5))
    );
    assert_eq!(
        e.message,
        "field `payload_len` at byte 5 is truncated: needs 1 byte, 0 available"
    );
}

#[test]
fn malformed_hex_names_argument_and_character() {
    let r = default(&["0000c400", "00:00:c4:0g"]);
    assert!(!r.ok);
    let e = &r.errors[0];
    assert_eq!((e.pdu, e.layer, e.offset), (Some(1), Layer::Hex, Some(10)));
    assert_eq!(
        e.to_string(),
        "PDU 1: argument 2: invalid hex digit 'g' at char 10"
    );
    assert_eq!(r.pdus[1].hex, "");
}

#[test]
fn malformed_subsequent_seq_gap() {
    let r = default(&[SPLIT_23[0], SPLIT_23[2]]);
    assert!(!r.ok);
    let e = &r.errors[0];
    assert_eq!(
        (e.pdu, e.tid, e.layer, e.field.as_deref(), e.offset),
        (Some(1), Some(0x2a), Layer::Assembly, Some("seq"), Some(1))
    );
    assert_eq!(
        e.message,
        "field `seq` at byte 1 is 2, expected 1: transaction 0x2a dropped"
    );
    assert!(r.messages.is_empty() && r.incomplete.is_empty());
}

#[test]
fn malformed_first_with_zero_total_and_payload() {
    let r = default(&["0000000000020102"]);
    assert!(!r.ok);
    let e = &r.errors[0];
    assert_eq!(
        (e.pdu, e.layer, e.field.as_deref(), e.offset),
        (Some(0), Layer::Container, Some("payload_len"), Some(5))
    );
    assert!(r.messages.is_empty());
    // Without payload it is the valid empty message.
    let r = default(&["070000000000"]);
    assert!(r.ok && r.messages[0].length == 0 && r.messages[0].command.is_none());
}

#[test]
fn malformed_subsequent_overrunning_total_length() {
    let r = default(&["2a0000050003aabbcc", "2a01400311223344"]);
    let e = &r.errors[0];
    assert_eq!(
        (e.pdu, e.field.as_deref(), e.offset),
        (Some(1), Some("payload_len"), Some(3))
    );
}

#[test]
fn malformed_command_in_a_short_message() {
    // data_len 5 with 2 data bytes: the reference silently slices; we report the field.
    let r = default(&["0100000700070001610500787900"[..26].as_ref()]);
    let e = &r.errors[0];
    assert_eq!(
        (e.layer, e.field.as_deref(), e.offset, e.message_index),
        (Layer::Command, Some("data"), Some(5), Some(0))
    );
    assert_eq!(
        e.to_string(),
        "tid 0x01: field `data` at byte 5 of the message is truncated: needs 5 bytes, 2 available"
    );
}

#[test]
fn subsequent_without_first_and_incomplete_are_warnings() {
    let r = default(&[SPLIT_23[1], SPLIT_23[0]]);
    assert!(r.ok);
    assert_eq!(r.incomplete.len(), 1);
    assert_eq!(
        (r.incomplete[0].received, r.incomplete[0].next_seq),
        (14, 1)
    );
    assert_eq!(r.warnings.len(), 2);
}

#[test]
fn json_shape() {
    let opts = DecodeOptions {
        mtu: 23,
        ..DecodeOptions::default()
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
    assert!(r.ok && r.errors.is_empty(), "{r:#?}");
    let ControlReport::Capabilities {
        kind, flag_names, ..
    } = control(&r, 0)
    else {
        panic!()
    };
    assert_eq!(
        (*kind, flag_names.as_slice()),
        (ControlKind::Request, &["LARGE_MESSAGES".to_owned()][..])
    );
    let ControlReport::Capabilities {
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
    let text = blerpc_cli::decode::text::render(&r, false);
    assert!(
        text.contains("LARGE_FIRST") && text.contains("total_length=70010"),
        "{}",
        &text[..400.min(text.len())]
    );
}
