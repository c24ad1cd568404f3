//! Timeouts: setup replies, call deadlines, and late responses after a timeout.

use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind, CloseReason, Warning};
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

#[test]
fn an_unanswered_timeout_request_keeps_100ms_and_goes_on() {
    let mut b = PairBuilder::default();
    b.peripheral.timeout_ms = 250;
    let mut p = b.build();
    p.interceptor = Some(drop_p2c(0xc4));
    p.connect();
    assert_eq!(p.central.peer_timeout_ms(), 100);
}

#[test]
fn the_peripheral_timeout_value_is_stored() {
    let mut b = PairBuilder::default();
    b.peripheral.timeout_ms = 250;
    let mut p = b.build();
    p.connect();
    assert_eq!(p.central.peer_timeout_ms(), 250);
}

#[test]
fn unanswered_capabilities_close_when_encryption_is_required() {
    let mut p = Pair::new();
    p.interceptor = Some(drop_p2c(0xd0));
    let start = p.now;
    p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::SetupTimeout))
    );
    assert_eq!(
        p.now - start,
        Duration::from_secs(1) + Duration::from_millis(1) * 2
    );
}

#[test]
fn an_unanswered_key_exchange_times_out() {
    let mut p = Pair::new();
    p.interceptor = Some(drop_p2c(0xd8));
    p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::HandshakeTimeout))
    );
}

#[test]
fn a_call_times_out_at_its_deadline() {
    let mut p = Pair::new();
    p.connect();
    p.app.ignore = Some("echo");
    let id = p
        .start_call("echo", &echo_req("x"), CallKind::Unary)
        .unwrap();
    let start = p.now;
    assert_eq!(p.wait_call(id), Err(CallError::Timeout));
    assert_eq!(p.now - start, Duration::from_secs(5));
    // A custom deadline is honoured too.
    let id = p
        .start_call("echo", &echo_req("y"), CallKind::Unary)
        .unwrap();
    let start = p.now;
    p.central
        .set_call_deadline(id, p.now + Duration::from_millis(300))
        .unwrap();
    assert_eq!(p.wait_call(id), Err(CallError::Timeout));
    assert_eq!(p.now - start, Duration::from_millis(300));
}

#[test]
fn a_late_response_is_dropped_and_never_answers_the_next_call() {
    let mut b = PairBuilder::default();
    b.central.call_timeout = Duration::from_millis(500);
    let mut p = b.build();
    p.connect();
    // The handler answers after 800 ms: after the first call's deadline.
    p.app.handler_delay = Duration::from_millis(800);
    let req = flash_read_req(0, 16);
    let first = p.start_call("flash_read", &req, CallKind::Unary).unwrap();
    assert_eq!(p.wait_call(first), Err(CallError::Timeout));
    // Same command name, another address: the reference would take the stale answer.
    // It answers the second call after 400 ms, so the stale answer to the first arrives while
    // the second is waiting.
    p.app.handler_delay = Duration::from_millis(400);
    let req2 = flash_read_req(100, 16);
    let second = p.start_call("flash_read", &req2, CallKind::Unary).unwrap();
    let resp = p.wait_call(second).unwrap();
    assert_eq!(
        flash_read_reply_of(&resp).map(|(address, _)| address),
        Some(100),
        "the second call got the first call's data"
    );
    assert!(
        p.warnings()
            .iter()
            .any(|w| matches!(w, Warning::StaleResponse { .. }))
    );
}

#[test]
fn close_fails_every_call() {
    let mut p = Pair::new();
    p.connect();
    p.app.ignore = Some("echo");
    let a = p
        .start_call("echo", &echo_req("a"), CallKind::Unary)
        .unwrap();
    p.central.close(p.now);
    p.drain_central();
    assert_eq!(p.call_outcome(a), Some(Err(CallError::Closed)));
    assert!(p.central_events.contains(&CEv::Closed(CloseReason::Local)));
    assert_eq!(
        p.start_call("echo", &[], CallKind::Unary),
        Err(CallError::Closed)
    );
}
