//! The cancel extension on the two-peer harness over the BLE model: a CANCEL racing the
//! response it names, at every point of the response's way (before it is sent, mid-way, after
//! its last container left), with and without packet loss. Whatever arrives first, the call
//! ends once, the peripheral holds nothing, nothing of the dropped response surfaces (what was
//! already on the air when the CANCEL left, a whole response or the rest of one, is dropped
//! without a warning), and the next call gets exactly its own answer.
#![allow(clippy::expect_used)] // a failed expect is a failed test

use std::time::Duration;

use blerpc_proto::connection::CallKind;
use blerpc_sim::ble::params::LinkParams;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

/// An encrypted pair on the BLE model with the cancel extension agreed, the application
/// holding each request until [`Pair::serve`].
fn pair(params: LinkParams) -> Pair<BleWire> {
    let mut b = PairBuilder::default();
    b.central.cancel = true;
    b.peripheral.cancel = true;
    b.app.hold = true;
    let mut p = b.build_ble(params).expect("link parameters");
    p.connect();
    p
}

/// The next call on `p` answers, with its own data.
fn next_call_answers(p: &mut Pair<BleWire>) {
    let id = p
        .start_call("flash_read", &flash_read_req(0, 512), CallKind::Unary)
        .expect("start");
    p.drive_until(Duration::from_secs(5), |p| p.held() == 1);
    assert!(p.serve(Answer::Serve));
    let reply = p.wait_call(id).expect("the next call");
    let (_, data) = flash_read_reply_of(&reply).expect("a flash_read reply");
    assert_eq!(data.len(), 512);
    assert!(data.iter().enumerate().all(|(i, b)| *b == i as u8));
}

/// An 8 KB read (35 containers: several connection events) whose response is released, then
/// the call cancelled `after` later. Returns whether the response won the race.
fn race(p: &mut Pair<BleWire>, after: Duration) -> bool {
    let cancels_before = p.peripheral_cancels;
    let id = p
        .start_call("flash_read", &flash_read_req(0, 8192), CallKind::Unary)
        .expect("start");
    p.drive_until(Duration::from_secs(5), |p| p.held() == 1);
    assert!(p.serve(Answer::Serve));
    p.drive_idle(after);
    let won = p.call_outcome(id).is_some();
    if won {
        let reply = p
            .call_outcome(id)
            .and_then(Result::ok)
            .expect("the read's answer");
        assert_eq!(
            flash_read_reply_of(&reply).map(|(_, d)| d.len()),
            Some(8192)
        );
    } else {
        p.cancel(id).expect("a call in flight cancels");
    }
    p.drive_idle(Duration::from_secs(3));
    assert_eq!(p.peripheral.pending_requests(), 0, "after {after:?}");
    assert_eq!(p.held(), 0, "after {after:?}");
    if won {
        assert_eq!(
            p.peripheral_cancels, cancels_before,
            "no CANCEL for a finished call"
        );
    }
    won
}

#[test]
fn a_cancel_racing_its_response_leaves_both_sides_clean() {
    // Every 2 ms across the response's 7 connection events (CI 15 ms) and beyond.
    let mut p = pair(LinkParams::default());
    let mut outcomes = (0, 0);
    for step in 0..60u64 {
        if race(&mut p, Duration::from_millis(2 * step)) {
            outcomes.0 += 1;
        } else {
            outcomes.1 += 1;
        }
        assert!(p.warnings().is_empty(), "step {step}: {:?}", p.warnings());
        assert!(
            p.peripheral_warnings.is_empty(),
            "step {step}: {:?}",
            p.peripheral_warnings
        );
        next_call_answers(&mut p);
    }
    // Both sides of the race were run.
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
    p.close_central();
}

#[test]
fn a_cancel_before_the_answer_stops_the_application() {
    let mut p = pair(LinkParams::default());
    let id = p
        .start_call("echo", &echo_req("held"), CallKind::Unary)
        .expect("start");
    p.drive_until(Duration::from_secs(5), |p| p.held() == 1);
    p.cancel(id).expect("cancel");
    p.drive_idle(Duration::from_secs(1));
    // The application heard it (its held request dropped) and nothing is pending.
    assert_eq!((p.peripheral_cancels, p.held()), (1, 0));
    assert_eq!(p.peripheral.pending_requests(), 0);
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    next_call_answers(&mut p);
    p.close_central();
}

#[test]
fn under_packet_loss_the_race_stays_clean() {
    // 20 % of packets lost on air (retransmitted in later events): the containers and the
    // CANCEL arrive late, never out of order.
    for seed in 1..=4 {
        let mut p = pair(LinkParams {
            loss: 0.2,
            seed,
            ..LinkParams::default()
        });
        for step in 0..12u64 {
            race(&mut p, Duration::from_millis(5 * step));
            assert!(p.warnings().is_empty(), "seed {seed}: {:?}", p.warnings());
            assert!(
                p.peripheral_warnings.is_empty(),
                "seed {seed}: {:?}",
                p.peripheral_warnings
            );
            next_call_answers(&mut p);
        }
        p.close_central();
    }
}
