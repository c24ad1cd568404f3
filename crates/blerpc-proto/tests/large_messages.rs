//! Large messages end to end on the two-peer harness: with the extension negotiated by both
//! sides, 64 KiB and multi-MiB unary calls, streams both ways, encrypted and plaintext, and the
//! exact size limits on either side.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use blerpc_proto::connection::{CallError, CallKind, DEFAULT_MAX_LARGE_MESSAGE_LEN};
use blerpc_proto::session::SESSION_OVERHEAD;
use blerpc_proto::wire::capabilities::LargeLimits;
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

/// Both sides announce the extension, with the runtime's limits: 16 MiB messages both ways
/// (outboxes that hold one).
fn with_large(mut b: PairBuilder) -> PairBuilder {
    b.central.large_messages = true;
    b.peripheral.large_messages = true;
    b.peripheral.max_request_len = DEFAULT_MAX_LARGE_MESSAGE_LEN;
    b.central.max_outbox_bytes = DEFAULT_MAX_LARGE_MESSAGE_LEN + 128 * 1024;
    b.peripheral.max_outbox_bytes = DEFAULT_MAX_LARGE_MESSAGE_LEN + 128 * 1024;
    b
}

fn large() -> PairBuilder {
    with_large(PairBuilder::default())
}

fn large_plaintext() -> PairBuilder {
    with_large(PairBuilder::plaintext())
}

/// `len` bytes of a fixed pattern.
fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}

/// The containers of the transaction that starts with a LARGE FIRST for this many bytes.
fn large_firsts(sent: &[Vec<u8>]) -> Vec<u32> {
    sent.iter()
        .filter(|c| c.len() >= 8 && c[2] == 0x01)
        .map(|c| u32::from_le_bytes(c[3..7].try_into().unwrap()))
        .collect()
}

#[test]
fn negotiation_bytes_and_limits() {
    let mut p = large().build();
    p.connect();
    // The central's request: the classic 6 bytes, flags bit 1 set, nothing else.
    assert_eq!(
        p.sent_c2p[1],
        [0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0x02, 0x00]
    );
    // The peripheral's reply: 16 MiB saturates the u16 fields; flags enc | large; two u32s.
    assert_eq!(
        p.sent_p2c[1],
        [
            0x01, 0x00, 0xd0, 0x0e, 0xff, 0xff, 0xff, 0xff, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01,
            0x00, 0x00, 0x00, 0x01
        ]
    );
    let limit = DEFAULT_MAX_LARGE_MESSAGE_LEN as u32;
    assert_eq!(
        p.central.large_messages(),
        Some(LargeLimits {
            max_request: limit,
            max_response: limit
        })
    );
    assert!(p.peripheral.large_messages());
    assert!(p.central.is_encrypted());
    // Small calls look exactly as they do without the extension.
    assert_eq!(p.call("loop", &echo_req("hi")).unwrap(), echo_req("hi"));
    assert!(large_firsts(&p.sent_c2p).is_empty());
    assert!(p.sent_c2p.last().unwrap()[2] == 0x00 || p.sent_c2p.last().unwrap()[2] == 0x40);
}

#[test]
fn unary_64_kib_both_ways_encrypted() {
    let mut p = large().build();
    p.connect();
    let data = pattern(65_536, 7);
    assert_eq!(p.call("loop", &data).unwrap(), data);
    // Request and response each start with a LARGE FIRST: 65,536 data bytes + "loop" header
    // (u32 data_len: 10 bytes) + 20 bytes of session overhead.
    let wire = (65_536 + 10 + SESSION_OVERHEAD) as u32;
    assert_eq!(large_firsts(&p.sent_c2p), [wire]);
    assert_eq!(large_firsts(&p.sent_p2c), [wire]);
    // One byte below the classic limit of 65,535 data bytes: classic FIRST at MTU 512 would not
    // carry it either (> 256 containers at MTU 247), so it is LARGE too; the u16 form is used
    // whenever it fits.
    let just_classic = pattern(60_000, 1);
    assert_eq!(p.call("loop", &just_classic).unwrap(), just_classic);
    assert_eq!(large_firsts(&p.sent_c2p).len(), 1);
}

#[test]
fn unary_multi_mib_both_ways() {
    // (The key exchange needs MTU >= 136: MTU 23 runs in plaintext.)
    for (mtu, len, builder) in [
        (247, 3 * 1024 * 1024 + 17, large()),
        (512, 5 * 1024 * 1024, large()),
        (23, 300_000, large_plaintext()),
    ] {
        let mut p = builder.mtu(mtu).build();
        p.connect();
        let data = pattern(len, mtu as u8);
        assert_eq!(
            p.call("loop", &data).unwrap(),
            data,
            "MTU {mtu}, {len} bytes"
        );
        assert!(
            p.sent_c2p.iter().all(|c| c.len() <= mtu - 3),
            "containers stay MTU-sized"
        );
        // The response direction alone: a 4 MiB-ish response to a tiny request.
        let want = len / 2 + 3;
        let resp = p.call("big", &(want as u32).to_le_bytes()).unwrap();
        assert_eq!(resp, big_response(want));
    }
}

#[test]
fn unary_large_plaintext() {
    let mut p = large_plaintext().build();
    p.connect();
    assert!(!p.central.is_encrypted());
    assert!(p.central.large_messages().is_some());
    let data = pattern(1024 * 1024, 3);
    assert_eq!(p.call("loop", &data).unwrap(), data);
    assert_eq!(
        large_firsts(&p.sent_c2p),
        [(1024 * 1024 + 10) as u32],
        "plaintext: no session overhead"
    );
}

#[test]
fn server_stream_of_large_items() {
    let mut p = large().build();
    p.connect();
    let mut req = vec![3u8];
    req.extend(100_000u32.to_le_bytes());
    let id = p
        .start_call("big_stream", &req, CallKind::ServerStream)
        .unwrap();
    p.drive_until(std::time::Duration::from_secs(60), |p| {
        p.stream_outcome(id).is_some()
    });
    let items = p.stream_outcome(id).unwrap().unwrap();
    assert_eq!(items.len(), 3);
    for (i, item) in items.iter().enumerate() {
        assert_eq!(item, &vec![i as u8; 100_000]);
    }
}

#[test]
fn client_stream_of_large_items() {
    let mut p = large().build();
    p.connect();
    let id = p
        .start_call("counter_upload", &[], CallKind::ClientStream)
        .unwrap();
    // Items of 70 KB the demo service still counts: a `bytes` field 1 where the item's `seq` is
    // a varint, which protobuf decoders skip as an unknown field.
    let items: Vec<Vec<u8>> = (0..3u8)
        .map(|i| data_write_req(&vec![i; 70_000 + usize::from(i)]))
        .collect();
    for item in &items {
        p.central.send_stream_item(p.now, id, item).unwrap();
        p.flush();
    }
    p.central.finish_stream(p.now, id).unwrap();
    let resp = p.wait_call(id).unwrap();
    assert_eq!(upload_reply_of(&resp), Some(3));
    let sizes: Vec<usize> = p
        .peripheral_requests
        .iter()
        .filter(|(_, n, _)| n == "counter_upload")
        .map(|(_, _, d)| d.len())
        .collect();
    assert_eq!(sizes, items.iter().map(Vec::len).collect::<Vec<_>>());
    assert_eq!(sizes[0], 70_000 + 4);
}

#[test]
fn request_over_the_peripherals_limit_fails_locally() {
    let mut b = large();
    b.peripheral.max_request_len = 100_000;
    let mut p = b.build();
    p.connect();
    assert_eq!(
        p.central.large_messages().map(|l| l.max_request),
        Some(100_000)
    );
    // Wire length = data + 10 (header) + 20 (session): exactly at the limit passes.
    let max_data = 100_000 - 10 - SESSION_OVERHEAD;
    assert_eq!(p.central.max_request_data(4), max_data);
    let ok = pattern(max_data, 0);
    assert_eq!(p.call("loop", &ok).unwrap(), ok);
    let sent = p.sent_c2p.len();
    assert_eq!(
        p.start_call("loop", &pattern(max_data + 1, 0), CallKind::Unary),
        Err(CallError::RequestTooLarge {
            len: 100_001,
            max: 100_000
        })
    );
    p.flush();
    assert_eq!(p.sent_c2p.len(), sent, "nothing was sent");
    // A client-stream item is checked the same way.
    let id = p
        .start_call("counter_upload", &[], CallKind::ClientStream)
        .unwrap();
    // ("counter_upload" is 10 bytes longer than "loop".)
    assert_eq!(
        p.central
            .send_stream_item(p.now, id, &pattern(max_data - 9, 0)),
        Err(CallError::RequestTooLarge {
            len: 100_001,
            max: 100_000
        })
    );
}

#[test]
fn request_over_the_centrals_outbox_fails_locally() {
    // A request must fit the central's outbox (less its 6-byte entry header).
    let mut b = large();
    b.central.max_outbox_bytes = 80_000;
    let mut p = b.build();
    p.connect();
    assert!(matches!(
        p.start_call("loop", &pattern(80_000, 0), CallKind::Unary),
        Err(CallError::RequestTooLarge { max: 79_994, .. })
    ));
    let fits = pattern(79_994 - 10 - SESSION_OVERHEAD, 0);
    assert_eq!(p.call("loop", &fits).unwrap(), fits);
}

#[test]
fn response_over_the_centrals_limit_is_refused_at_its_first_container() {
    let mut b = large();
    b.central.max_response_len = 100_000;
    let mut p = b.build();
    p.connect();
    let err = p.call("big", &200_000u32.to_le_bytes()).unwrap_err();
    assert_eq!(
        err,
        CallError::ResponseTooLarge {
            len: 200_000 + 9 + SESSION_OVERHEAD,
            max: 100_000
        }
    );
    // The rest of that response is dropped; the connection goes on.
    p.drive_idle(std::time::Duration::from_secs(1));
    assert_eq!(
        p.call("big", &90_000u32.to_le_bytes()).unwrap(),
        big_response(90_000)
    );
}

#[test]
fn response_over_the_peripherals_limit_becomes_an_error_reply() {
    let mut b = large();
    b.peripheral.max_response_len = 100_000;
    let mut p = b.build();
    p.connect();
    assert_eq!(
        p.central.large_messages().map(|l| l.max_response),
        Some(100_000)
    );
    assert_eq!(
        p.call("big", &200_000u32.to_le_bytes()),
        Err(CallError::Peer(ErrorCode::ResponseTooLarge))
    );
    assert!(large_firsts(&p.sent_p2c).is_empty());
}
