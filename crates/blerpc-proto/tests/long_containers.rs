//! The long-container extension (CAPABILITIES flags bit 2): negotiated both ways, containers of
//! up to 16 KiB whatever the ATT MTU, alone and with the large-message extension; a side without
//! it sees the classic bytes; a LONG container the receiver never agreed to ends in a typed error
//! or an ERROR reply, never in a misparse.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use blerpc_proto::assemble::AssembleError;
use blerpc_proto::connection::{CallError, CallKind, Warning};
use blerpc_proto::wire::WireError;
use blerpc_proto::wire::container::{Container, ContainerKind, MAX_LONG_CONTAINER_LEN};
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

fn builder(central: bool, peripheral: bool, encrypted: bool) -> PairBuilder {
    let mut b = PairBuilder::encrypted(encrypted);
    b.central.long_containers = central;
    b.peripheral.long_containers = peripheral;
    b
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 253) as u8).collect()
}

/// The data containers (FIRST, LARGE FIRST, SUBSEQUENT) sent after `from`.
fn data_containers(sent: &[Vec<u8>], from: usize) -> Vec<Vec<u8>> {
    sent.iter()
        .skip(from)
        .filter(|c| c[2] >> 6 <= 1)
        .cloned()
        .collect()
}

#[test]
fn negotiated_both_ways_carries_a_message_in_a_few_containers() {
    for encrypted in [false, true] {
        let mut p = builder(true, true, encrypted).build();
        p.connect();
        assert!(p.central.long_containers());
        assert!(p.peripheral.long_containers());
        // The announcement (flags 0x0004 in the 6-byte request) and the classic-length reply
        // with bit 2 added to what the peripheral offers.
        assert_eq!(p.sent_c2p[1], hex::decode("0100d006000000000400").unwrap());
        let reply = p.sent_p2c.iter().find(|c| c[2] == 0xd0).unwrap();
        let offer = if encrypted { "05" } else { "04" };
        assert_eq!(hex::encode(reply), format!("0100d006ffffffff{offer}00"));
        let (c2p, p2c) = (p.sent_c2p.len(), p.sent_p2c.len());
        let data = pattern(60_000);
        assert_eq!(p.call("loop", &data).unwrap(), data);
        // 60,000 data bytes + command header (+ session overhead): 4 containers each way, the
        // first three LONG and at most 16 KiB, instead of ~250 at MTU 247.
        for sent in [
            data_containers(&p.sent_c2p, c2p),
            data_containers(&p.sent_p2c, p2c),
        ] {
            assert_eq!(sent.len(), 4, "encrypted {encrypted}");
            assert_eq!(sent[0][2], 0x02, "LONG FIRST");
            assert_eq!(sent[1][2], 0x42, "LONG SUBSEQUENT");
            assert!(sent.iter().all(|c| c.len() <= MAX_LONG_CONTAINER_LEN));
            assert_eq!(sent[0].len(), MAX_LONG_CONTAINER_LEN);
            for c in &sent {
                let parsed = Container::parse(c).unwrap();
                assert_eq!(parsed.emitted_len(), c.len());
            }
        }
        // Small messages keep the classic header, byte for byte.
        let (c2p, _) = (p.sent_c2p.len(), p.sent_p2c.len());
        assert_eq!(p.call("loop", &echo_req("hi")).unwrap(), echo_req("hi"));
        let small = data_containers(&p.sent_c2p, c2p);
        assert_eq!(small.len(), 1);
        assert_eq!(small[0][2], 0x00);
    }
}

#[test]
fn at_mtu_23_a_long_container_link_still_sends_16_kib() {
    // Plaintext: the key exchange's 133-byte control never fits MTU 23 (controls stay classic).
    let mut p = builder(true, true, false).mtu(23).build();
    p.connect();
    assert!(p.central.long_containers());
    // The classic limit at MTU 23 is 4,094 bytes; with long containers it is 65,535.
    let data = pattern(30_000);
    let from = p.sent_c2p.len();
    assert_eq!(p.call("loop", &data).unwrap(), data);
    assert_eq!(data_containers(&p.sent_c2p, from).len(), 2);
}

#[test]
fn with_large_messages_a_large_first_is_long_too() {
    let mut b = builder(true, true, true);
    b.central.large_messages = true;
    b.peripheral.large_messages = true;
    b.peripheral.max_request_len = 1 << 20;
    let mut p = b.build();
    p.connect();
    // Both bits in the request.
    assert_eq!(p.sent_c2p[1], hex::decode("0100d006000000000600").unwrap());
    assert!(p.central.large_messages().is_some() && p.central.long_containers());
    let from = p.sent_c2p.len();
    let data = pattern(100_000);
    assert_eq!(p.call("loop", &data).unwrap(), data);
    let sent = data_containers(&p.sent_c2p, from);
    // 100,000 + 10 + 20 bytes: one 16,375-byte LARGE FIRST and 6 SUBSEQUENT.
    assert_eq!(sent.len(), 7);
    assert_eq!(sent[0][2], 0x03, "LONG LARGE FIRST");
    assert_eq!(sent[0].len(), MAX_LONG_CONTAINER_LEN);
    match Container::parse(&sent[0]).unwrap().kind {
        ContainerKind::LargeFirst { total_length } => assert_eq!(total_length, 100_030),
        k => panic!("{k:?}"),
    }
    let resp = p.call("big", &120_000u32.to_le_bytes()).unwrap();
    assert_eq!(resp, big_response(120_000));
}

#[test]
fn without_large_messages_the_classic_total_still_binds() {
    let mut p = builder(true, true, false).build();
    p.connect();
    let err = p
        .start_call("loop", &vec![0; 65_536], CallKind::Unary)
        .unwrap_err();
    assert!(
        matches!(err, CallError::RequestTooLarge { max: 65_535, .. }),
        "{err:?}"
    );
    let data = vec![9u8; p.central.max_request_data(4)];
    assert_eq!(data.len(), 65_535 - 8);
    assert_eq!(p.call("loop", &data).unwrap(), data);
}

#[test]
fn one_side_without_it_stays_classic() {
    // Peripheral without: it answers the classic reply (bit 2 clear) and every container stays
    // within the MTU.
    let mut p = builder(true, false, true).build();
    p.connect();
    assert_eq!(p.sent_c2p[1], hex::decode("0100d006000000000400").unwrap());
    let reply = p.sent_p2c.iter().find(|c| c[2] == 0xd0).unwrap();
    assert_eq!(hex::encode(reply), "0100d006ffffffff0100");
    assert!(!p.central.long_containers() && !p.peripheral.long_containers());
    let data = pattern(20_000);
    assert_eq!(p.call("loop", &data).unwrap(), data);
    assert!(p.sent_c2p.iter().chain(&p.sent_p2c).all(|c| c.len() <= 244));
    // Central without: the reference request bytes, the classic reply.
    let mut p = builder(false, true, true).build();
    p.connect();
    assert_eq!(p.sent_c2p[1], hex::decode("0100d006000000000000").unwrap());
    let reply = p.sent_p2c.iter().find(|c| c[2] == 0xd0).unwrap();
    assert_eq!(hex::encode(reply), "0100d006ffffffff0100");
    assert_eq!(p.call("loop", &data).unwrap(), data);
    assert!(p.sent_c2p.iter().chain(&p.sent_p2c).all(|c| c.len() <= 244));
}

#[test]
fn stripped_bit_in_the_reply_keeps_the_central_classic() {
    let mut p = builder(true, true, false).build();
    // An on-path attacker clears bit 2 in the reply: the central stays classic, and the
    // peripheral's LONG responses are refused with a typed error instead of misparsed.
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir == Dir::P2C && pdu.len() == 10 && pdu[2] == 0xd0 {
            let mut p = pdu.to_vec();
            p[8] &= !0x04;
            Action::Replace(p)
        } else {
            Action::Deliver
        }
    }));
    p.connect();
    assert!(!p.central.long_containers());
    assert!(p.peripheral.long_containers());
    let data = pattern(5_000);
    // The response (5,000 data bytes + an 8-byte command header) comes as one LONG FIRST.
    let err = p.call("loop", &data).unwrap_err();
    assert_eq!(
        err,
        CallError::ResponseTooLarge {
            len: 5_008,
            max: 255
        }
    );
    // Requests small enough for one classic container still work.
    assert_eq!(p.call("loop", &echo_req("ok")).unwrap(), echo_req("ok"));
}

#[test]
fn long_container_without_negotiation_gets_an_error_reply() {
    let mut p = builder(false, true, false).build();
    p.connect();
    // A hostile central sends a LONG FIRST (300-byte chunk) it never announced.
    let mut pdu = vec![0x33, 0, 0x02, 0x2c, 0x01, 0x2c, 0x01];
    pdu.extend_from_slice(&[0xab; 300]);
    p.peripheral.handle_input(p.now, &pdu).unwrap();
    p.flush();
    assert_eq!(p.sent_p2c.last().unwrap(), &[0x33, 0x00, 0xd4, 0x01, 0x07]);
    assert!(p.peripheral_warnings.iter().any(|w| matches!(
        w,
        Warning::Assembly(AssembleError::ContainerTooLong {
            tid: 0x33,
            payload_len: 300,
            max: 255
        })
    )));
    // A non-canonical LONG header (announcing 3 bytes) is a malformed container, not a misparse.
    let _ = p
        .peripheral
        .handle_input(p.now, &[0x34, 0, 0x02, 3, 0, 3, 0, 1, 2, 3]);
    p.flush();
    assert!(p.peripheral_warnings.iter().any(|w| matches!(
        w,
        Warning::MalformedContainer(WireError::InvalidValue {
            field: "payload_len",
            value: 3,
            ..
        })
    )));
    // The connection keeps working.
    assert_eq!(p.call("loop", &echo_req("ok")).unwrap(), echo_req("ok"));
}

#[test]
fn over_16_kib_is_refused_even_when_negotiated() {
    let mut p = builder(true, true, false).build();
    p.connect();
    // 16,380 payload bytes in a LONG FIRST: 16,387 bytes, over the 16,384 maximum.
    let mut pdu = vec![0x35, 0, 0x02, 0xfc, 0x3f, 0xfc, 0x3f];
    pdu.extend_from_slice(&vec![0u8; 16_380]);
    p.peripheral.handle_input(p.now, &pdu).unwrap();
    p.flush();
    assert_eq!(p.sent_p2c.last().unwrap(), &[0x35, 0x00, 0xd4, 0x01, 0x07]);
    assert!(p.peripheral_warnings.iter().any(|w| matches!(
        w,
        Warning::Assembly(AssembleError::ContainerTooLong {
            payload_len: 16_380,
            max: 16_377,
            ..
        })
    )));
    assert_eq!(p.call("loop", &echo_req("ok")).unwrap(), echo_req("ok"));
}
