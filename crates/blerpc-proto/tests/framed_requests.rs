//! `Central::start_call_framed`: a request command framed by the caller (header, then the
//! protobuf data encoded behind it) is taken without a copy, behaves exactly like
//! `start_call`, and is given back untouched whenever the call cannot start.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind};
use blerpc_proto::wire::command::{Command, CommandType};
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

/// `name`'s REQUEST command with `data`, framed the way `start_call` stores it.
fn framed(name: &str, data: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; Command::header_len_large(name.len(), data.len())];
    Command::emit_header_large(CommandType::Request, name, data.len(), &mut out).unwrap();
    out.extend_from_slice(data);
    out
}

#[test]
fn a_framed_call_is_taken_without_a_copy_and_answered_like_start_call() {
    for encrypted in [false, true] {
        let mut p = PairBuilder::encrypted(encrypted).build();
        p.connect();
        let mut command = framed("echo", &echo_req("framed"));
        let id = p
            .central
            .start_call_framed(p.now, &mut command, CallKind::Unary)
            .unwrap();
        assert!(command.is_empty(), "the call took the buffer");
        assert_eq!(p.wait_call(id).unwrap(), echo_req("framed"));
        // The same bytes on the wire as start_call (same tid pattern, same containers).
        let sent_framed = p.sent_c2p.len();
        assert_eq!(
            p.call("echo", &echo_req("framed")).unwrap(),
            echo_req("framed")
        );
        let a = p.sent_c2p.get(sent_framed - 1).unwrap().clone();
        let b = p.sent_c2p.last().unwrap().clone();
        if !encrypted {
            // tid differs by one; everything after it is identical.
            assert_eq!(a.get(1..), b.get(1..));
            assert_eq!(b[0], a[0].wrapping_add(1));
        } else {
            assert_eq!(a.len(), b.len());
        }
        let requests: Vec<_> = p
            .peripheral_requests
            .iter()
            .map(|(_, n, d)| (n, d))
            .collect();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0], requests[1]);
    }
}

#[test]
fn a_framed_request_is_kept_for_busy_retries() {
    let mut p = Pair::new();
    p.connect();
    p.app.busy_first = 2;
    let mut command = framed("echo", &echo_req("again"));
    let id = p
        .central
        .start_call_framed(p.now, &mut command, CallKind::Unary)
        .unwrap();
    assert_eq!(p.wait_call(id).unwrap(), echo_req("again"));
    let echoes: Vec<_> = p
        .peripheral_requests
        .iter()
        .filter(|(_, n, _)| n == "echo")
        .map(|(_, _, d)| d.clone())
        .collect();
    assert_eq!(echoes, vec![echo_req("again"); 3]);
}

#[test]
fn a_framed_large_request_uses_the_extended_header() {
    let mut b = PairBuilder::plaintext();
    b.central.large_messages = true;
    b.peripheral.large_messages = true;
    b.peripheral.max_request_len = 16 << 20;
    let mut p = b.build();
    p.connect();
    let data = data_write_req(&vec![0x5A; 100_000]);
    let mut command = framed("loop", &data);
    assert_eq!(command.len(), 2 + 4 + 4 + data.len(), "u32 data_len");
    let id = p
        .central
        .start_call_framed(p.now, &mut command, CallKind::Unary)
        .unwrap();
    assert_eq!(p.wait_call(id).unwrap(), data);
}

#[test]
fn a_framed_client_stream_carries_the_name_alone() {
    let mut p = Pair::new();
    p.connect();
    let mut with_data = framed("counter_upload", &[1, 2, 3]);
    assert_eq!(
        p.central
            .start_call_framed(p.now, &mut with_data, CallKind::ClientStream),
        Err(CallError::WrongCallKind)
    );
    assert_eq!(
        with_data,
        framed("counter_upload", &[1, 2, 3]),
        "given back"
    );
    let mut name_only = framed("counter_upload", &[]);
    let id = p
        .central
        .start_call_framed(p.now, &mut name_only, CallKind::ClientStream)
        .unwrap();
    assert!(name_only.is_empty());
    for i in 0..3 {
        p.central
            .send_stream_item(p.now, id, &counter_item(i, 0))
            .unwrap();
        p.flush();
    }
    p.central.finish_stream(p.now, id).unwrap();
    let response = p.wait_call(id).unwrap();
    assert_eq!(upload_reply_of(&response), Some(3), "three items counted");
}

#[test]
fn buffers_that_are_not_one_request_command_are_refused_and_given_back() {
    let mut p = Pair::new();
    p.connect();
    let good = framed("echo", &echo_req("x"));
    let mut response = good.clone();
    response[0] = CommandType::Response as u8;
    let mut trailing = good.clone();
    trailing.push(0);
    let mut truncated = good.clone();
    truncated.pop();
    // The extended header announcing a length the classic header carries (not canonical).
    let mut non_canonical = vec![0u8; Command::header_len_large(4, 70_000)];
    Command::emit_header_large(CommandType::Request, "echo", 70_000, &mut non_canonical).unwrap();
    let at = non_canonical.len() - 4;
    non_canonical[at..].copy_from_slice(&3u32.to_le_bytes());
    non_canonical.extend_from_slice(&[1, 2, 3]);
    let cases = [
        ("empty", Vec::new()),
        ("response", response),
        ("trailing byte", trailing),
        ("truncated", truncated),
        ("non-canonical u32 length", non_canonical),
        ("invalid UTF-8 name", {
            let mut v = good.clone();
            v[2] = 0xFF;
            v
        }),
    ];
    for (what, case) in cases {
        let mut command = case.clone();
        assert_eq!(
            p.central
                .start_call_framed(p.now, &mut command, CallKind::Unary),
            Err(CallError::MalformedCommand),
            "{what}"
        );
        assert_eq!(command, case, "{what}: given back unchanged");
    }
    // Nothing was sent and the connection still works.
    assert_eq!(p.call("echo", &echo_req("ok")).unwrap(), echo_req("ok"));
}

#[test]
fn every_start_call_check_applies_and_gives_the_buffer_back() {
    // Not ready: before setup.
    let mut p = Pair::new();
    let mut command = framed("echo", &echo_req("early"));
    assert_eq!(
        p.central
            .start_call_framed(p.now, &mut command, CallKind::Unary),
        Err(CallError::NotReady)
    );
    assert_eq!(command, framed("echo", &echo_req("early")));
    p.connect();

    // Larger than the peripheral accepts.
    let big = framed("echo", &vec![0u8; 70_000]);
    let mut command = big.clone();
    assert!(matches!(
        p.central
            .start_call_framed(p.now, &mut command, CallKind::Unary),
        Err(CallError::RequestTooLarge { .. })
    ));
    assert_eq!(command, big);

    // Too many calls in flight (the test central has 4 slots).
    p.app.handler_delay = Duration::from_millis(50);
    let mut ids = Vec::new();
    for i in 0..4 {
        let mut c = framed("echo", &echo_req(&i.to_string()));
        ids.push(
            p.central
                .start_call_framed(p.now, &mut c, CallKind::Unary)
                .unwrap(),
        );
    }
    let fifth = framed("echo", &echo_req("5"));
    let mut command = fifth.clone();
    assert!(matches!(
        p.central
            .start_call_framed(p.now, &mut command, CallKind::Unary),
        Err(CallError::TooManyCalls { .. })
    ));
    assert_eq!(command, fifth);
    for (i, id) in ids.into_iter().enumerate() {
        assert_eq!(p.wait_call(id).unwrap(), echo_req(&i.to_string()));
    }
    // Given back, it starts once there is room.
    let id = p
        .central
        .start_call_framed(p.now, &mut command, CallKind::Unary)
        .unwrap();
    assert_eq!(p.wait_call(id).unwrap(), echo_req("5"));
}

#[test]
fn a_full_outbox_gives_the_buffer_back_for_a_later_retry() {
    let mut b = PairBuilder::plaintext();
    b.central.max_outbox_bytes = 2_000;
    let mut p = b.build();
    p.connect();
    let first = framed("loop", &[1; 1_500]);
    let second = framed("loop", &[2; 1_500]);
    let (mut a, mut c) = (first.clone(), second.clone());
    let id_a = p
        .central
        .start_call_framed(p.now, &mut a, CallKind::Unary)
        .unwrap();
    assert!(matches!(
        p.central.start_call_framed(p.now, &mut c, CallKind::Unary),
        Err(CallError::OutboxFull { .. })
    ));
    assert_eq!(c, second, "given back after the outbox refused it");
    assert_eq!(p.wait_call(id_a).unwrap(), [1; 1_500]);
    let id_c = p
        .central
        .start_call_framed(p.now, &mut c, CallKind::Unary)
        .unwrap();
    assert_eq!(p.wait_call(id_c).unwrap(), [2; 1_500]);
}
