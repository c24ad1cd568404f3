//! Unary calls end to end on the two-peer harness: setup, handshake, echo and friends.

use std::time::Duration;

use blerpc_proto::connection::{CallKind, CloseReason};
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

#[test]
fn setup_uses_the_reference_tids_and_encrypts() {
    let mut p = Pair::new();
    p.connect();
    assert!(p.central.is_encrypted());
    assert!(p.peripheral.is_encrypted());
    assert_eq!(p.central.peer_timeout_ms(), 100);
    // TIMEOUT tid 0, CAPABILITIES tid 1, KX tids 2 and 3 — as the reference centrals.
    let tids: Vec<(u8, u8)> = p.sent_c2p.iter().map(|c| (c[0], c[2])).collect();
    assert_eq!(tids, vec![(0, 0xc4), (1, 0xd0), (2, 0xd8), (3, 0xd8)]);
    assert_eq!(p.sent_c2p[1], [0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0]);
    // The first call uses tid 4.
    let id = p
        .start_call("echo", &echo_req("hello"), CallKind::Unary)
        .unwrap();
    p.flush();
    assert_eq!(p.sent_c2p.last().unwrap()[0], 4);
    assert_eq!(p.wait_call(id).unwrap(), echo_req("hello"));
}

#[test]
fn echo_basic_empty_and_max_length() {
    let mut p = Pair::new();
    p.connect();
    assert_eq!(
        p.call("echo", &echo_req("hello")).unwrap(),
        echo_req("hello")
    );
    assert_eq!(p.call("echo", &echo_req("")).unwrap(), Vec::<u8>::new());
    let long = "A".repeat(256);
    assert_eq!(p.call("echo", &echo_req(&long)).unwrap(), echo_req(&long));
    let multi = "B".repeat(250);
    assert_eq!(p.call("echo", &echo_req(&multi)).unwrap(), echo_req(&multi));
}

#[test]
fn flash_read_8kb_and_data_write() {
    let mut p = Pair::new();
    p.connect();
    let req = flash_read_req(0, 8192);
    let resp = p.call("flash_read", &req).unwrap();
    let (_, data) = flash_read_reply_of(&resp).unwrap();
    assert_eq!(data.len(), 8192);
    assert!(data.iter().enumerate().all(|(i, b)| *b == i as u8));
    let payload: Vec<u8> = (0..=255u8).cycle().take(8192).collect();
    let resp = p.call("data_write", &data_write_req(&payload)).unwrap();
    assert_eq!(data_write_reply_of(&resp), Some(8192));
}

#[test]
fn plaintext_connection_when_neither_side_encrypts() {
    let mut p = PairBuilder::plaintext().build();
    p.connect();
    assert!(!p.central.is_encrypted());
    assert!(
        p.central_events
            .contains(&CEv::Connected { encrypted: false })
    );
    // Without KX the first call uses tid 2.
    let id = p
        .start_call("echo", &echo_req("x"), CallKind::Unary)
        .unwrap();
    p.flush();
    assert_eq!(p.sent_c2p.last().unwrap()[0], 2);
    assert_eq!(p.wait_call(id).unwrap(), echo_req("x"));
}

#[test]
fn central_requiring_encryption_refuses_a_plaintext_peripheral() {
    let mut b = PairBuilder::plaintext();
    b.central.require_encryption = true;
    let mut p = b.build();
    p.drive_until(Duration::from_secs(5), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::EncryptionUnavailable))
    );
}

#[test]
fn concurrent_unary_calls_are_bound_by_tid() {
    let mut p = Pair::new();
    p.connect();
    let a = p
        .start_call("echo", &echo_req("first"), CallKind::Unary)
        .unwrap();
    let b = p
        .start_call("echo", &echo_req("second"), CallKind::Unary)
        .unwrap();
    assert_eq!(p.wait_call(a).unwrap(), echo_req("first"));
    assert_eq!(p.wait_call(b).unwrap(), echo_req("second"));
}
