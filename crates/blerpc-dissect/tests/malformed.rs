//! `dissect()` on malformed input: every error names the PDU, the layer, the field and its
//! offset, and the PDUs around it are still decoded.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed unwrap is a failed test

mod common;

use blerpc_dissect::Layer;
use common::*;

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
fn malformed_long_first_carrying_more_than_total_length() {
    // A LONG FIRST (u16 payload_len at bytes 5-6) of 300 bytes announcing a 256-byte message:
    // the error points at the start of the two-byte field.
    let pdu = format!("07000200012c01{}", "00".repeat(300));
    let r = default(&[&pdu]);
    let e = &r.errors[0];
    assert_eq!(
        (e.layer, e.field.as_deref(), e.offset),
        (Layer::Container, Some("payload_len"), Some(5))
    );
    assert_eq!(
        e.message,
        "field `payload_len` at byte 5 is 300 but total_length is 256: a FIRST container cannot carry more than the whole message"
    );
    assert!(r.messages.is_empty() && r.incomplete.is_empty());
}
