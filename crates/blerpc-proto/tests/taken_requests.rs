//! `Peripheral::take_request`: a runtime takes a request's reassembled buffer instead of copying
//! the data out of the event; the buffer holds exactly the event's data (decrypted), each request
//! is taken at most once, and the connection goes on as before.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use blerpc_proto::connection::CallKind;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

#[test]
fn taken_requests_hold_the_data_plaintext_and_encrypted() {
    for encrypted in [false, true] {
        let mut p = PairBuilder::encrypted(encrypted).build();
        p.connect();
        p.app.take_requests = true;
        for len in [0usize, 10, 1_000, 30_000] {
            let data = data_write_req(&vec![0xA5; len]);
            assert_eq!(p.call("loop", &data).unwrap(), data, "{len}");
        }
        // Several in flight at once, each taken from its own slot.
        let ids: Vec<_> = (0..4)
            .map(|i| {
                p.start_call("echo", &echo_req(&i.to_string()), CallKind::Unary)
                    .unwrap()
            })
            .collect();
        for (i, id) in ids.into_iter().enumerate() {
            assert_eq!(p.wait_call(id).unwrap(), echo_req(&i.to_string()));
        }
        assert_eq!(p.requests_taken, 8);
    }
}

#[test]
fn a_large_request_is_taken_whole() {
    let mut b = PairBuilder::default();
    b.central.large_messages = true;
    b.peripheral.large_messages = true;
    b.peripheral.max_request_len = 16 << 20;
    let mut p = b.build();
    p.connect();
    p.app.take_requests = true;
    let data = data_write_req(&vec![0x3C; 120_000]);
    assert_eq!(p.call("loop", &data).unwrap(), data);
    assert_eq!(p.requests_taken, 1);
}

#[test]
fn nothing_to_take_without_a_request() {
    let mut p = Pair::new();
    assert!(p.peripheral.take_request().is_none(), "before any event");
    p.connect();
    // Setup produced events (Secured) but no request.
    assert!(p.peripheral.take_request().is_none());
    p.app.take_requests = true;
    assert_eq!(p.call("echo", &echo_req("a")).unwrap(), echo_req("a"));
    // Taken inside the harness; nothing left for anyone else.
    assert!(p.peripheral.take_request().is_none());
}
