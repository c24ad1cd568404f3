//! The streams extension on the two-peer harness over the BLE model: a bidirectional `chat`
//! stream echoing every item in order (with packet loss), a server stream held at its window
//! while the reader makes no room, a peripheral that consumes nothing stopping the central's
//! items at its window, and without the extension the classic bytes.
#![allow(clippy::expect_used)] // a failed expect is a failed test

use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind};
use blerpc_sim::ble::params::LinkParams;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

const WINDOW: u16 = 4;

fn pair(params: LinkParams, hold_items: bool) -> Pair<BleWire> {
    let mut b = PairBuilder::default();
    b.central.streams = true;
    b.central.stream_window = WINDOW;
    b.peripheral.streams = true;
    b.peripheral.stream_window = WINDOW;
    b.app.hold_items = hold_items;
    let mut p = b.build_ble(params).expect("link parameters");
    p.connect();
    p
}

/// Items of `id` the central has received so far.
fn received(p: &Pair<BleWire>, id: blerpc_proto::connection::CallId) -> Vec<Vec<u8>> {
    p.central_events
        .iter()
        .filter_map(|e| match e {
            CEv::StreamItem { call, data } if *call == id => Some(data.clone()),
            _ => None,
        })
        .collect()
}

/// Sends `n` chat items as credits allow, granting the peripheral room for every echo taken,
/// then finishes; returns the echoes.
fn chat(p: &mut Pair<BleWire>, n: u8) -> Vec<Vec<u8>> {
    let id = p
        .start_call(chat::NAME, b"", CallKind::BidiStream)
        .expect("open");
    let mut sent = 0u8;
    for _ in 0..10_000 {
        if sent < n {
            let now = p.now;
            match p.central.send_stream_item(now, id, &[0x0a, 1, sent]) {
                Ok(()) => sent += 1,
                Err(CallError::NoCredit) => {}
                Err(e) => panic!("item {sent}: {e}"),
            }
        } else if sent == n {
            let now = p.now;
            if p.central.finish_stream(now, id).is_ok() {
                sent += 1;
            }
        }
        // The reader takes every echo at once: room for the whole window.
        let now = p.now;
        let _ = p.central.grant(now, id, usize::from(WINDOW));
        // Until nothing moves within a few connection events (the test acts again then).
        p.drive_idle(Duration::from_millis(50));
        if let Some(outcome) = p.stream_outcome(id) {
            return outcome.expect("the chat ends cleanly");
        }
    }
    panic!(
        "the chat never ended: sent {sent}, echoes {}, peripheral got {}, credits {:?}, warnings {:?}",
        received(p, id).len(),
        p.chat_received(),
        p.central.stream_credits(id),
        p.warnings(),
    );
}

#[test]
fn a_chat_echoes_every_item_in_order_with_loss() {
    for seed in 1..=4 {
        let params = LinkParams {
            loss: 0.1,
            seed,
            ..LinkParams::default()
        };
        let mut p = pair(params, false);
        let echoes = chat(&mut p, 40);
        let expected: Vec<Vec<u8>> = (0..40u8).map(|i| vec![0x0a, 1, i]).collect();
        assert_eq!(echoes, expected, "seed {seed}");
        assert_eq!(p.chat_received(), 40);
        // The connection is still usable.
        assert_eq!(p.call("echo", &echo_req("after")).map(|r| r.len()), Ok(7));
    }
}

#[test]
fn a_server_stream_stops_at_the_window_until_the_reader_makes_room() {
    let mut p = pair(LinkParams::default(), false);
    let id = p
        .start_call(
            "counter_stream",
            &counter_stream_req(20),
            CallKind::ServerStream,
        )
        .expect("start");
    let mut seen = 0;
    for round in 0..10 {
        p.drive_idle(Duration::from_millis(300));
        let now = received(&p, id).len();
        // Credits at zero: at most the window beyond what the reader took.
        assert!(
            now <= seen + usize::from(WINDOW),
            "round {round}: {now} after {seen}"
        );
        if p.stream_outcome(id).is_some() {
            break;
        }
        assert_eq!(
            now,
            seen + usize::from(WINDOW),
            "round {round}: the window is used"
        );
        seen = now;
        // The reader took them all.
        let t = p.now;
        p.central.grant(t, id, usize::from(WINDOW)).expect("grant");
    }
    let items = p.stream_outcome(id).expect("ended").expect("cleanly");
    assert_eq!(items.len(), 20);
}

#[test]
fn a_peripheral_that_consumes_nothing_stops_the_central_at_its_window() {
    let mut p = pair(LinkParams::default(), true);
    let id = p
        .start_call(chat::NAME, b"", CallKind::BidiStream)
        .expect("open");
    p.drive_idle(Duration::from_millis(200));
    assert_eq!(p.central.stream_credits(id), Some(u32::from(WINDOW)));
    let mut sent = 0;
    for i in 0..10u8 {
        let t = p.now;
        match p.central.send_stream_item(t, id, &[i]) {
            Ok(()) => sent += 1,
            Err(e) => assert_eq!(e, CallError::NoCredit),
        }
        p.drive_idle(Duration::from_millis(100));
    }
    assert_eq!(sent, WINDOW, "the central stops at the peripheral's window");
    assert_eq!(p.chat_unconsumed(), usize::from(WINDOW));
    assert_eq!(p.central.stream_credits(id), Some(0));
}

#[test]
fn without_the_extension_a_bidi_stream_is_refused_and_streams_are_classic() {
    let mut b = PairBuilder::default();
    b.central.streams = true;
    let mut p = b.build_ble(LinkParams::default()).expect("link parameters");
    p.connect();
    assert_eq!(
        p.start_call(chat::NAME, b"", CallKind::BidiStream),
        Err(CallError::NotNegotiated)
    );
    let id = p
        .start_call(
            "counter_stream",
            &counter_stream_req(50),
            CallKind::ServerStream,
        )
        .expect("start");
    p.drive_until(Duration::from_secs(10), |p| p.stream_outcome(id).is_some());
    assert_eq!(
        p.stream_outcome(id).map(|r| r.map(|i| i.len())),
        Some(Ok(50))
    );
}
