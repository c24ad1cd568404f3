//! Central→peripheral streams (counter_upload): items, STREAM_END_C2P, the final response.

use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind};
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

fn upload(p: &mut Pair, n: u32) -> Result<Vec<u8>, CallError> {
    let id = p.start_call("counter_upload", &[], CallKind::ClientStream)?;
    for i in 0..n {
        let item = counter_item(i, i as i32 * 10);
        p.central.send_stream_item(p.now, id, &item)?;
        p.flush();
    }
    p.central.finish_stream(p.now, id)?;
    p.wait_call(id)
}

#[test]
fn counter_upload_5_and_20() {
    let mut p = Pair::new();
    p.connect();
    assert_eq!(upload_reply_of(&upload(&mut p, 5).unwrap()), Some(5));
    assert_eq!(upload_reply_of(&upload(&mut p, 20).unwrap()), Some(20));
    // Every item arrived as its own REQUEST named counter_upload, with a fresh tid.
    let tids: Vec<u8> = p
        .peripheral_requests
        .iter()
        .filter(|(_, n, _)| n == "counter_upload")
        .map(|(t, _, _)| *t)
        .collect();
    assert_eq!(tids.len(), 25);
    assert!(
        tids.windows(2)
            .all(|w| w[1] == w[0].wrapping_add(1) || w[1] == w[0].wrapping_add(2))
    );
}

#[test]
fn empty_upload_gets_a_zero_count() {
    let mut p = Pair::new();
    p.connect();
    assert_eq!(upload_reply_of(&upload(&mut p, 0).unwrap()), Some(0));
}

#[test]
fn upload_in_plaintext() {
    let mut p = PairBuilder::plaintext().build();
    p.connect();
    assert_eq!(upload_reply_of(&upload(&mut p, 20).unwrap()), Some(20));
}

#[test]
fn items_on_a_unary_call_and_double_finish_are_refused() {
    let mut p = Pair::new();
    p.connect();
    let unary = p
        .start_call("echo", &echo_req("x"), CallKind::Unary)
        .unwrap();
    assert_eq!(
        p.central.send_stream_item(p.now, unary, b""),
        Err(CallError::WrongCallKind)
    );
    p.wait_call(unary).unwrap();
    let up = p
        .start_call("counter_upload", &[], CallKind::ClientStream)
        .unwrap();
    p.central.finish_stream(p.now, up).unwrap();
    assert_eq!(
        p.central.finish_stream(p.now, up),
        Err(CallError::WrongCallKind)
    );
    assert_eq!(
        p.central.send_stream_item(p.now, up, b""),
        Err(CallError::WrongCallKind)
    );
}

#[test]
fn an_error_on_an_upload_item_fails_the_upload() {
    let mut p = Pair::new();
    p.connect();
    p.app.busy_first = 1;
    // The first item is answered BUSY (as the reference, an upload is not retried item by item).
    let id = p
        .start_call("counter_upload", &[], CallKind::ClientStream)
        .unwrap();
    p.central
        .send_stream_item(p.now, id, &counter_item(1, 0))
        .unwrap();
    p.drive_until(Duration::from_secs(5), |p| p.call_outcome(id).is_some());
    assert_eq!(
        p.call_outcome(id).unwrap(),
        Err(CallError::Peer(ErrorCode::Busy))
    );
}
