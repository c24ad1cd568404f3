//! Hostile and malformed input (wire.md §5): every failure the reference leaves silent gets an
//! ERROR reply with a documented code, unauthenticated controls cannot confuse calls, and no
//! input panics, hangs, or hands one call another call's data.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind, CloseReason, Warning};
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;
use rand_chacha::rand_core::RngCore;

#[test]
fn empty_and_six_byte_capabilities_requests_are_both_answered() {
    let mut p = Pair::new();
    let want = vec![0x07, 0x00, 0xd0, 0x06, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00];
    assert_eq!(p.poke(&[0x07, 0x00, 0xd0, 0x00]), vec![want.clone()]);
    assert_eq!(
        p.poke(&[0x07, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0]),
        vec![want]
    );
}

#[test]
fn unknown_types_and_control_commands_are_ignored() {
    let mut p = Pair::new();
    for pdu in [
        vec![0x01, 0x00, 0x80, 0x02, b'c', b'd'], // type 0b10
        vec![0x01, 0x00, 0xc0, 0x00],             // CONTROL cmd 0
        vec![0x01, 0x00, 0xdc, 0x00],             // cmd 7
        vec![0x01, 0x00, 0xfc, 0x01, 0xaa],       // cmd 15
    ] {
        assert!(p.poke(&pdu).is_empty(), "{pdu:02x?}");
    }
    // ...and the connection still works afterwards.
    p.connect();
    assert_eq!(p.call("echo", &echo_req("ok")).unwrap(), echo_req("ok"));
}

#[test]
fn trailing_bytes_after_a_container_are_tolerated() {
    let mut p = Pair::new();
    assert_eq!(
        p.poke(&[0x00, 0x00, 0xc4, 0x00, 0xde, 0xad]),
        vec![vec![0, 0, 0xc4, 2, 100, 0]]
    );
}

#[test]
fn plaintext_and_malformed_requests_get_error_codes() {
    // Encryption required: a plaintext REQUEST echo "hello" (wire.md §6.2).
    let mut p = Pair::new();
    let req = hex::decode("0900000f000f00046563686f07000a0568656c6c6f").unwrap();
    assert_eq!(
        p.poke(&req),
        vec![error_reply(9, ErrorCode::EncryptionRequired)]
    );
    // Without encryption: a message that is not a command packet (data_len runs past the end).
    let mut p = PairBuilder::plaintext().build();
    let bad = hex::decode("0a0000050005000165ff00").unwrap();
    assert_eq!(p.poke(&bad), vec![error_reply(10, ErrorCode::DecodeFailed)]);
    // A RESPONSE sent to the peripheral.
    let resp = hex::decode("0b00000f000f80046563686f07000a0568656c6c6f").unwrap();
    assert_eq!(
        p.poke(&resp),
        vec![error_reply(11, ErrorCode::DecodeFailed)]
    );
}

#[test]
fn oversize_requests_and_sequence_gaps_get_error_codes() {
    let mut b = PairBuilder::plaintext();
    b.peripheral.max_request_len = 1000;
    let mut p = b.build();
    // FIRST announcing 1001 bytes.
    assert_eq!(
        p.poke(&[0x05, 0x00, 0x00, 0xe9, 0x03, 0x01, 0x00]),
        vec![error_reply(5, ErrorCode::RequestTooLarge)]
    );
    // FIRST of 500 bytes, then seq 2 instead of 1.
    let mut first = vec![0x06, 0x00, 0x00, 0xf4, 0x01, 0x0a];
    first.extend([0u8; 10]);
    assert!(p.poke(&first).is_empty());
    assert_eq!(
        p.poke(&[0x06, 0x02, 0x40, 0x02, 0, 0]),
        vec![error_reply(6, ErrorCode::SequenceGap)]
    );
    // The rest of that transaction is ignored without duplicate errors.
    assert!(p.poke(&[0x06, 0x03, 0x40, 0x02, 0, 0]).is_empty());
}

#[test]
fn a_lost_container_fails_the_call_fast_instead_of_timing_out() {
    let mut p = Pair::new();
    p.connect();
    let mut dropped = false;
    p.interceptor = Some(Box::new(move |dir, pdu, _| {
        // Drop the second container (seq 1) of the first multi-container request.
        if !dropped && dir == Dir::C2P && pdu[1] == 1 && pdu[2] == 0x40 {
            dropped = true;
            return Action::Drop;
        }
        Action::Deliver
    }));
    let start = p.now;
    let big = "Z".repeat(600);
    assert_eq!(
        p.call("loop", &echo_req(&big)),
        Err(CallError::Peer(ErrorCode::SequenceGap))
    );
    assert!(p.now - start < Duration::from_millis(10));
    assert_eq!(p.call("loop", &echo_req(&big)).unwrap(), echo_req(&big));
}

#[test]
fn a_replayed_request_is_refused_and_not_handled_twice() {
    let mut p = Pair::new();
    p.connect();
    assert_eq!(p.call("echo", &echo_req("once")).unwrap(), echo_req("once"));
    let captured = p.sent_c2p.last().unwrap().clone();
    let handled = p.peripheral_requests.len();
    let replies = p.poke(&captured);
    assert_eq!(
        replies,
        vec![error_reply(captured[0], ErrorCode::DecryptFailed)]
    );
    assert_eq!(p.peripheral_requests.len(), handled);
}

#[test]
fn corrupted_ciphertext_fails_the_call_with_decrypt_failed() {
    let mut p = Pair::new();
    p.connect();
    let mut armed = true;
    p.interceptor = Some(Box::new(move |dir, pdu, _| {
        if armed && dir == Dir::C2P && pdu[2] == 0x00 {
            armed = false;
            let mut bad = pdu.to_vec();
            let i = bad.len() - 3;
            bad[i] ^= 1;
            return Action::Replace(bad);
        }
        Action::Deliver
    }));
    assert_eq!(
        p.call("echo", &echo_req("x")),
        Err(CallError::Peer(ErrorCode::DecryptFailed))
    );
    assert_eq!(p.call("echo", &echo_req("y")).unwrap(), echo_req("y"));
}

#[test]
fn forged_controls_cannot_hijack_calls() {
    let mut p = Pair::new();
    p.connect();
    // After setup: a forged TIMEOUT (65535 ms) and CAPABILITIES with max_request 0, and ERROR
    // controls with tids of no outstanding call, arrive before the real response.
    p.app.handler_delay = Duration::from_millis(20);
    let id = p
        .start_call("echo", &echo_req("mine"), CallKind::Unary)
        .unwrap();
    p.flush();
    let call_tid = p.sent_c2p.last().unwrap()[0];
    for forged in [
        vec![0x00, 0x00, 0xc4, 0x02, 0xff, 0xff],
        vec![0x01, 0x00, 0xd0, 0x06, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00],
        vec![call_tid.wrapping_add(7), 0x00, 0xd4, 0x01, 0x02],
        vec![call_tid.wrapping_add(9), 0x00, 0xd4, 0x01, 0x01],
    ] {
        p.central.handle_input(p.now, &forged).unwrap();
    }
    assert_eq!(p.wait_call(id).unwrap(), echo_req("mine"));
    let w = p.warnings();
    assert!(
        w.iter()
            .filter(|w| matches!(w, Warning::UnexpectedControl { .. }))
            .count()
            >= 2,
        "{w:?}"
    );
    assert!(
        w.iter()
            .filter(|w| matches!(w, Warning::StaleError { .. }))
            .count()
            >= 2,
        "{w:?}"
    );
    assert_eq!(p.central.peer_timeout_ms(), 100);
    assert_eq!(p.call("echo", &echo_req("next")).unwrap(), echo_req("next"));
}

#[test]
fn a_capability_downgrade_is_refused_not_followed() {
    let mut p = Pair::new();
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir == Dir::P2C && pdu[2] == 0xd0 {
            let mut stripped = pdu.to_vec();
            stripped[8] = 0; // clear ENCRYPTION_SUPPORTED
            return Action::Replace(stripped);
        }
        Action::Deliver
    }));
    p.drive_until(Duration::from_secs(5), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::EncryptionUnavailable))
    );
}

#[test]
fn responses_with_the_wrong_tid_or_name_are_stale() {
    let mut p = PairBuilder::plaintext().build();
    p.connect();
    p.app.handler_delay = Duration::from_millis(20);
    let id = p
        .start_call("echo", &echo_req("real"), CallKind::Unary)
        .unwrap();
    p.flush();
    let tid = p.sent_c2p.last().unwrap()[0];
    // RESPONSE echo "fake" under another tid, and RESPONSE flash_read under the right tid.
    let fake = hex::decode("0000000e000e80046563686f06000a0466616b65").unwrap();
    let mut fake_other_tid = fake.clone();
    fake_other_tid[0] = tid.wrapping_add(1);
    let mut wrong_name = hex::decode("000000110011800a666c6173685f726561640300108040").unwrap();
    wrong_name[0] = tid;
    p.central.handle_input(p.now, &fake_other_tid).unwrap();
    p.central.handle_input(p.now, &wrong_name).unwrap();
    // A REQUEST sent to the central.
    let mut req = fake.clone();
    req[0] = tid;
    req[6] = 0x00;
    p.central.handle_input(p.now, &req).unwrap();
    assert_eq!(p.wait_call(id).unwrap(), echo_req("real"));
    let w = p.warnings();
    assert_eq!(
        w.iter()
            .filter(|w| matches!(w, Warning::StaleResponse { .. }))
            .count(),
        2,
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|w| matches!(w, Warning::WrongCommandType { .. })),
        "{w:?}"
    );
}

#[test]
fn an_injected_stream_end_cannot_leak_items_into_later_calls() {
    // STREAM_END_P2C is unauthenticated in bleRPC v1 and may end a stream early (a protocol
    // limitation, wire.md §5.3); what must hold is that late items are dropped, not delivered
    // to another call.
    let mut p = Pair::new();
    p.connect();
    let mut injected = false;
    p.interceptor = Some(Box::new(move |dir, pdu, _| {
        if !injected && dir == Dir::P2C && pdu[2] == 0x00 {
            injected = true;
            return Action::Replace(vec![0x77, 0x00, 0xcc, 0x00]);
        }
        Action::Deliver
    }));
    let s = p
        .start_call(
            "counter_stream",
            &counter_stream_req(10),
            CallKind::ServerStream,
        )
        .unwrap();
    p.drive_idle(Duration::from_secs(5));
    assert_eq!(p.stream_outcome(s).unwrap().unwrap().len(), 0);
    assert!(
        p.warnings()
            .iter()
            .filter(|w| matches!(w, Warning::StaleResponse { .. }))
            .count()
            >= 9
    );
    assert_eq!(
        p.call("echo", &echo_req("after")).unwrap(),
        echo_req("after")
    );
}

#[test]
fn abandoned_partial_requests_free_their_slots() {
    let mut b = PairBuilder::plaintext();
    b.peripheral.reassembly_timeout = Duration::from_secs(2);
    let mut p = b.build();
    // Four FIRSTs that never complete occupy all four reassembly slots...
    for tid in 0..4u8 {
        assert!(
            p.poke(&[tid, 0x00, 0x00, 0xe8, 0x03, 0x01, 0x00])
                .is_empty()
        );
    }
    // ...so a fifth transaction is refused with BUSY, not silently lost.
    assert_eq!(
        p.poke(&[9, 0x00, 0x00, 0xe8, 0x03, 0x01, 0x00]),
        vec![error_reply(9, ErrorCode::Busy)]
    );
    // After the reassembly timeout the slots are free again.
    p.drive_idle(Duration::from_secs(3));
    p.connect();
    assert_eq!(p.call("echo", &echo_req("free")).unwrap(), echo_req("free"));
}

#[test]
fn random_garbage_never_breaks_a_connection() {
    let mut p = Pair::new();
    p.connect();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(p.seed);
    for round in 0..300 {
        for _ in 0..4 {
            let len = (rng.next_u32() % 40) as usize;
            let mut junk = random_bytes(&mut rng, len);
            // Bias towards plausible headers.
            if let Some(b) = junk.get_mut(2) {
                *b &= [0x00, 0x40, 0xc0, 0xff][(rng.next_u32() % 4) as usize] | 0x3c;
            }
            p.central.handle_input(p.now, &junk).unwrap();
            p.peripheral.handle_input(p.now, &junk).unwrap();
            p.drain_central();
        }
        let msg = format!("round {round}");
        match p.call("echo", &echo_req(&msg)) {
            Ok(resp) => assert_eq!(resp, echo_req(&msg), "round {round}"),
            Err(e) => assert!(
                matches!(
                    e,
                    CallError::Peer(_) | CallError::Timeout | CallError::Busy { .. }
                ),
                "round {round}: {e:?}"
            ),
        }
    }
    assert!(p.central.is_ready());
}

use rand_chacha::rand_core::SeedableRng;
