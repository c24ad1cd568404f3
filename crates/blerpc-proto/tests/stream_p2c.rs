//! Peripheral→central streams (counter_stream): items in order, the end marker, limits, idle
//! timeouts, and a stream running beside unary calls.
#![allow(clippy::expect_used)]

use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind};
use blerpc_sim::ble::params::LinkParams;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

fn run_stream<W: Wire>(p: &mut Pair<W>, count: u32) -> Result<Vec<Vec<u8>>, CallError> {
    let id = p.start_call(
        "counter_stream",
        &counter_stream_req(count),
        CallKind::ServerStream,
    )?;
    p.drive_until(Duration::from_secs(120), |p| p.stream_outcome(id).is_some());
    p.stream_outcome(id)
        .expect("drive_until guarantees an outcome")
}

fn check_items(items: &[Vec<u8>], count: usize) {
    assert_eq!(items.len(), count);
    for (i, item) in items.iter().enumerate() {
        assert_eq!(
            counter_item_of(item),
            Some((i as u32, i as i32 * 10)),
            "item {i}"
        );
    }
}

#[test]
fn counter_stream_5_and_20() {
    let mut p = Pair::new();
    p.connect();
    check_items(&run_stream(&mut p, 5).unwrap(), 5);
    check_items(&run_stream(&mut p, 20).unwrap(), 20);
}

#[test]
fn empty_stream_ends_immediately() {
    let mut p = Pair::new();
    p.connect();
    assert!(run_stream(&mut p, 0).unwrap().is_empty());
}

#[test]
fn stream_of_10000_items_plaintext_and_encrypted() {
    for mut p in [Pair::new(), PairBuilder::plaintext().build()] {
        p.connect();
        check_items(&run_stream(&mut p, 10_000).unwrap(), 10_000);
    }
}

#[test]
fn unary_calls_run_beside_a_stream() {
    let mut p = Pair::new();
    p.connect();
    let s = p
        .start_call(
            "counter_stream",
            &counter_stream_req(50),
            CallKind::ServerStream,
        )
        .unwrap();
    let e = p
        .start_call("echo", &echo_req("beside"), CallKind::Unary)
        .unwrap();
    assert_eq!(p.wait_call(e).unwrap(), echo_req("beside"));
    p.drive_until(Duration::from_secs(10), |p| p.stream_outcome(s).is_some());
    check_items(&p.stream_outcome(s).unwrap().unwrap(), 50);
}

#[test]
fn a_second_stream_is_refused_while_one_is_active() {
    let mut p = Pair::new();
    p.connect();
    p.start_call(
        "counter_stream",
        &counter_stream_req(3),
        CallKind::ServerStream,
    )
    .unwrap();
    assert_eq!(
        p.start_call(
            "counter_stream",
            &counter_stream_req(3),
            CallKind::ServerStream
        ),
        Err(CallError::StreamActive)
    );
}

#[test]
fn peripheral_stream_limit_is_enforced() {
    let mut b = PairBuilder::default();
    b.peripheral.max_stream_items = 3;
    let mut p = b.build();
    p.connect();
    // The harness handler asks for 5 items; the 4th is refused by the core's limit.
    let id = p
        .start_call(
            "counter_stream",
            &counter_stream_req(5),
            CallKind::ServerStream,
        )
        .unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        p.drive_until(Duration::from_secs(10), |p| p.stream_outcome(id).is_some())
    }));
    let msg = outcome
        .err()
        .and_then(|e| e.downcast::<String>().ok())
        .unwrap();
    assert!(msg.contains("stream item limit"), "{msg}");
}

#[test]
fn a_stalled_stream_fails_with_timeout() {
    let mut p = Pair::new();
    p.connect();
    p.app.ignore = Some("counter_stream");
    let id = p
        .start_call(
            "counter_stream",
            &counter_stream_req(5),
            CallKind::ServerStream,
        )
        .unwrap();
    let start = p.now;
    p.drive_until(Duration::from_secs(30), |p| p.stream_outcome(id).is_some());
    assert_eq!(p.stream_outcome(id).unwrap(), Err(CallError::Timeout));
    assert_eq!(p.now - start, p.central.config().call_timeout);
}

/// Items received so far on stream `id`.
fn items_so_far<W: Wire>(p: &Pair<W>, id: blerpc_proto::connection::CallId) -> usize {
    p.central_events
        .iter()
        .filter(|e| matches!(e, CEv::StreamItem { call, .. } if *call == id))
        .count()
}

#[test]
fn a_stream_cancelled_mid_way_never_feeds_the_next_one() {
    // Encrypted and plaintext, cancelled after 1 and after 30 items of 200: the peripheral goes
    // on sending (it never hears the cancel), and the next stream of the command, started at
    // once, still gets exactly its own items.
    for (encrypted, after) in [(true, 1), (false, 30)] {
        // On a BLE link (15 ms connection interval): a stream takes many connection events.
        let mut p = PairBuilder::encrypted(encrypted)
            .build_ble(LinkParams::default())
            .unwrap();
        p.connect();
        let first = p
            .start_call(
                "counter_stream",
                &counter_stream_req(200),
                CallKind::ServerStream,
            )
            .unwrap();
        p.drive_until(Duration::from_secs(10), |p| items_so_far(p, first) >= after);
        assert_eq!(
            p.stream_outcome(first).map(|r| r.map(|i| i.len())),
            None,
            "encrypted {encrypted}"
        );
        p.cancel(first).unwrap();
        check_items(&run_stream(&mut p, 5).unwrap(), 5);
        // And a stream past its caller's deadline drains the same way.
        let late = p
            .start_call(
                "counter_stream",
                &counter_stream_req(200),
                CallKind::ServerStream,
            )
            .unwrap();
        p.drive_until(Duration::from_secs(10), |p| items_so_far(p, late) >= after);
        let now = p.now;
        p.central.set_call_deadline(late, now).unwrap();
        p.advance(Duration::ZERO);
        p.flush();
        assert_eq!(
            p.stream_outcome(late),
            Some(Err(CallError::Timeout)),
            "encrypted {encrypted}"
        );
        check_items(&run_stream(&mut p, 7).unwrap(), 7);
        // Nothing of the abandoned streams surfaced as a stale response.
        assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    }
}
