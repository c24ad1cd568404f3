//! BUSY: the peripheral's pending-request cap, and the central's retry with backoff.

use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind};
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

#[test]
fn busy_is_retried_with_exponential_backoff() {
    let mut p = Pair::new();
    p.connect();
    p.app.busy_first = 3;
    let start = p.now;
    assert_eq!(
        p.call("echo", &echo_req("retry")).unwrap(),
        echo_req("retry")
    );
    // Four attempts, backoff 20 + 40 + 80 ms, each leg 2 ms of link latency.
    let echo_requests = p
        .peripheral_requests
        .iter()
        .filter(|(_, n, _)| n == "echo")
        .count();
    assert_eq!(echo_requests, 4);
    assert_eq!(p.now - start, Duration::from_millis(20 + 40 + 80 + 4 * 2));
    // Every retry used a fresh tid (and a fresh encryption counter).
    let tids: Vec<u8> = p.peripheral_requests.iter().map(|(t, _, _)| *t).collect();
    assert_eq!(tids.len(), 4);
    assert!(tids.windows(2).all(|w| w[0] != w[1]));
}

#[test]
fn busy_beyond_the_retry_budget_fails_clearly() {
    let mut p = Pair::new();
    p.connect();
    p.app.busy_first = 100;
    assert_eq!(
        p.call("echo", &echo_req("x")),
        Err(CallError::Busy { attempts: 4 })
    );
}

#[test]
fn peripheral_answers_busy_beyond_its_pending_limit() {
    let mut b = PairBuilder::default();
    b.peripheral.max_pending_requests = 1;
    b.central.busy_retries = 0;
    let mut p = b.build();
    p.connect();
    p.app.handler_delay = Duration::from_millis(50);
    let a = p
        .start_call("echo", &echo_req("a"), CallKind::Unary)
        .unwrap();
    let c = p
        .start_call("echo", &echo_req("b"), CallKind::Unary)
        .unwrap();
    assert_eq!(p.wait_call(a).unwrap(), echo_req("a"));
    assert_eq!(p.wait_call(c), Err(CallError::Busy { attempts: 1 }));
    // With retries, the same situation succeeds.
    let mut b = PairBuilder::default();
    b.peripheral.max_pending_requests = 1;
    let mut p = b.build();
    p.connect();
    p.app.handler_delay = Duration::from_millis(30);
    let a = p
        .start_call("echo", &echo_req("a"), CallKind::Unary)
        .unwrap();
    let c = p
        .start_call("echo", &echo_req("b"), CallKind::Unary)
        .unwrap();
    assert_eq!(p.wait_call(a).unwrap(), echo_req("a"));
    assert_eq!(p.wait_call(c).unwrap(), echo_req("b"));
}

#[test]
fn calls_in_flight_are_capped_locally() {
    let mut p = Pair::new();
    p.connect();
    for i in 0..4 {
        p.start_call("echo", &echo_req(&i.to_string()), CallKind::Unary)
            .unwrap();
    }
    assert_eq!(
        p.start_call("echo", &[], CallKind::Unary),
        Err(CallError::TooManyCalls { limit: 4 })
    );
    let _ = ErrorCode::Busy;
}
