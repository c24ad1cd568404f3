//! Transaction ids wrap from 255 to 0 on both sides without confusing calls or streams.

use std::time::Duration;

use blerpc_proto::connection::CallKind;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

#[test]
fn six_hundred_calls_wrap_the_central_tid_twice() {
    let mut p = Pair::new();
    p.connect();
    for i in 0..600u32 {
        let msg = format!("call {i}");
        assert_eq!(p.call("echo", &echo_req(&msg)).unwrap(), echo_req(&msg));
    }
    let tids: Vec<u8> = p.sent_c2p.iter().map(|c| c[0]).collect();
    assert!(tids.windows(2).any(|w| w[0] == 255 && w[1] == 0));
}

#[test]
fn peripheral_tids_wrap_inside_a_stream() {
    let mut p = Pair::new();
    p.connect();
    let id = p
        .start_call(
            "counter_stream",
            &counter_stream_req(700),
            CallKind::ServerStream,
        )
        .unwrap();
    p.drive_until(Duration::from_secs(30), |p| p.stream_outcome(id).is_some());
    assert_eq!(p.stream_outcome(id).unwrap().unwrap().len(), 700);
    let tids: Vec<u8> = p.sent_p2c.iter().map(|c| c[0]).collect();
    assert!(tids.windows(2).any(|w| w[0] == 255 && w[1] == 0));
}
