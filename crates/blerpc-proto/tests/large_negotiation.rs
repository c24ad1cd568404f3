//! Negotiating the large-message extension: one side without it falls back to the classic
//! bytes and limits; truncated, garbled, stripped or unsolicited extension bytes, and LARGE FIRST
//! containers the peer never agreed to, end in a typed error or an ERROR reply, never in a
//! misparse.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use blerpc_proto::assemble::AssembleError;
use blerpc_proto::connection::{CallError, CallKind, CloseReason, Warning};
use blerpc_proto::wire::WireError;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;
use rand_chacha::rand_core::SeedableRng;

fn builder(central: bool, peripheral: bool, encrypted: bool) -> PairBuilder {
    let mut b = PairBuilder::encrypted(encrypted);
    b.central.large_messages = central;
    b.peripheral.large_messages = peripheral;
    if peripheral {
        b.peripheral.max_request_len = 16 << 20;
    }
    b
}

/// The CAPABILITIES reply the peripheral sent during setup.
fn caps_reply(p: &Pair) -> Vec<u8> {
    p.sent_p2c
        .iter()
        .find(|c| c[2] == 0xd0)
        .cloned()
        .expect("a CAPABILITIES reply")
}

#[test]
fn peripheral_without_the_extension_falls_back_to_classic() {
    let mut p = builder(true, false, true).build();
    p.connect();
    // The central announced, the peripheral answered classically (its exact classic bytes).
    assert_eq!(p.sent_c2p[1][8], 0x02);
    assert_eq!(caps_reply(&p), hex::decode("0100d006ffffffff0100").unwrap());
    assert_eq!(p.central.large_messages(), None);
    // A 64 KiB request fails locally with the classic limit, and nothing is sent.
    let sent = p.sent_c2p.len();
    let err = p
        .start_call("loop", &vec![0; 65_536], CallKind::Unary)
        .unwrap_err();
    assert_eq!(
        err,
        CallError::RequestTooLarge {
            len: 65_536 + 10 + 20,
            max: 61_438
        }
    );
    assert_eq!(
        err.to_string(),
        "request is 65566 bytes on the wire, peripheral accepts at most 61438"
    );
    p.flush();
    assert_eq!(p.sent_c2p.len(), sent);
    // Everything up to the classic limit still works.
    let data = vec![5u8; p.central.max_request_data(4)];
    assert_eq!(p.call("loop", &data).unwrap(), data);
}

#[test]
fn central_without_the_extension_sees_reference_bytes() {
    // A peripheral with the extension answers a reference-style request exactly as before.
    let mut with = builder(false, true, true).build();
    with.connect();
    let mut without = builder(false, false, true).build();
    without.connect();
    assert_eq!(
        with.sent_c2p[1],
        hex::decode("0100d006000000000000").unwrap()
    );
    assert_eq!(caps_reply(&with), caps_reply(&without));
    assert!(!with.peripheral.large_messages());
    // The C central's empty request gets the classic reply too.
    let mut b = builder(false, true, false);
    b.central.capabilities_payload = false;
    let mut c = b.build();
    c.connect();
    assert_eq!(c.sent_c2p[1], hex::decode("0100d000").unwrap());
    assert_eq!(caps_reply(&c), hex::decode("0100d006ffffffff0000").unwrap());
    // A response too large for the classic wire fails on the peripheral, not on the link.
    let err = without.call("big", &70_000u32.to_le_bytes()).unwrap_err();
    assert_eq!(
        err,
        CallError::Peer(blerpc_proto::wire::error_code::ErrorCode::ResponseTooLarge)
    );
}

#[test]
fn mtu_too_small_for_the_extended_reply_declines() {
    // 4 + 14 bytes need ATT MTU >= 21; at 20 the peripheral answers classically.
    for (mtu, agreed) in [(20, false), (21, true)] {
        let mut p = builder(true, true, false).mtu(mtu).build();
        p.connect();
        assert_eq!(p.central.large_messages().is_some(), agreed, "MTU {mtu}");
        assert_eq!(p.peripheral.large_messages(), agreed);
        let data = vec![1u8; 70_000];
        let r = p.call("loop", &data);
        if agreed {
            assert_eq!(r.unwrap(), data);
        } else {
            assert!(matches!(r, Err(CallError::RequestTooLarge { .. })));
        }
    }
}

#[test]
fn truncated_extension_in_the_reply_is_malformed() {
    // The reply keeps the LARGE bit but loses bytes of its u32 limits.
    for keep in [6usize, 9, 13] {
        let mut p = builder(true, true, false).build();
        p.interceptor = Some(Box::new(move |dir, pdu, _| {
            if dir == Dir::P2C && pdu[2] == 0xd0 {
                let mut short = pdu[..4 + keep].to_vec();
                short[3] = keep as u8;
                Action::Replace(short)
            } else {
                Action::Deliver
            }
        }));
        p.connect();
        assert!(
            p.warnings()
                .iter()
                .any(|w| matches!(w, Warning::MalformedControl(WireError::Truncated { .. }))),
            "{keep}: {:?}",
            p.warnings()
        );
        // Without a valid reply the central goes on with the classic defaults (plaintext
        // allowed here) and never assumes the extension.
        assert_eq!(p.central.large_messages(), None);
    }
    // With encryption required, a connection without a valid reply closes.
    let mut p = builder(true, true, true).build();
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir == Dir::P2C && pdu[2] == 0xd0 {
            Action::Replace(pdu[..14].to_vec())
        } else {
            Action::Deliver
        }
    }));
    p.drive_until(Duration::from_secs(5), |p| {
        p.central_events.iter().any(|e| matches!(e, CEv::Closed(_)))
    });
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::SetupTimeout))
    );
}

#[test]
fn stripped_bit_downgrades_to_classic_with_clear_errors() {
    // An on-path attacker clears the LARGE bit of the request: both sides stay classic, and a
    // large request fails locally instead of being misread.
    let mut p = builder(true, true, true).build();
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir == Dir::C2P && pdu[2] == 0xd0 {
            let mut p = pdu.to_vec();
            p[8] = 0;
            Action::Replace(p)
        } else {
            Action::Deliver
        }
    }));
    p.connect();
    assert_eq!(caps_reply(&p).len(), 10);
    assert!(!p.peripheral.large_messages());
    assert_eq!(p.central.large_messages(), None);
    assert!(matches!(
        p.call("loop", &vec![0; 65_536]),
        Err(CallError::RequestTooLarge { max: 61_438, .. })
    ));
}

#[test]
fn unsolicited_extension_is_ignored_by_the_central() {
    // A peripheral (or attacker) adds the extension to a central that did not announce it: the
    // central stays classic and refuses LARGE FIRST responses.
    let mut p = builder(false, false, false).build();
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir == Dir::P2C && pdu[2] == 0xd0 {
            Action::Replace(hex::decode("0100d00effffffff020000000001000000000001").unwrap())
        } else {
            Action::Deliver
        }
    }));
    p.connect();
    assert_eq!(p.central.large_messages(), None);
    // A LARGE FIRST answering a call is refused with a typed error, not misparsed.
    let id = p
        .start_call("loop", &echo_req("x"), CallKind::Unary)
        .unwrap();
    p.flush();
    let tid = p.sent_c2p.last().unwrap()[0];
    p.peripheral_requests.clear();
    p.central
        .handle_input(p.now, &[tid, 0, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x80])
        .unwrap();
    p.drain_central();
    assert_eq!(
        p.call_outcome(id),
        Some(Err(CallError::ResponseTooLarge {
            len: 65_536,
            max: 65_535
        }))
    );
    assert!(
        p.warnings()
            .contains(&Warning::Assembly(AssembleError::LargeNotNegotiated {
                tid,
                total_length: 65_536
            }))
    );
}

#[test]
fn large_first_without_negotiation_gets_an_error_reply() {
    let mut p = builder(false, true, false).build();
    p.connect();
    // A hostile central sends a LARGE FIRST although it never announced the extension.
    p.peripheral
        .handle_input(
            p.now,
            &[0x33, 0, 0x01, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00, 0x04],
        )
        .unwrap();
    p.flush();
    assert_eq!(p.sent_p2c.last().unwrap(), &[0x33, 0x00, 0xd4, 0x01, 0x07]);
    assert!(p.peripheral_warnings.iter().any(|w| matches!(
        w,
        Warning::Assembly(AssembleError::LargeNotNegotiated { tid: 0x33, .. })
    )));
    // Its SUBSEQUENT containers are ignored, and the connection keeps working.
    p.peripheral
        .handle_input(p.now, &[0x33, 1, 0x40, 0x02, 0xaa, 0xbb])
        .unwrap();
    p.flush();
    assert_eq!(p.call("loop", &echo_req("ok")).unwrap(), echo_req("ok"));
}

#[test]
fn over_limit_and_garbled_large_headers_from_a_hostile_central() {
    let mut b = builder(true, true, false);
    b.peripheral.max_request_len = 1 << 20;
    // Room for the abandoned 1 MiB transaction below and the next one (the budget's own
    // refusals are tested in tests/hostile.rs).
    b.peripheral.max_reassembly_bytes = 2 << 20;
    let mut p = b.build();
    p.connect();
    assert!(p.peripheral.large_messages());
    // 4 GiB - 1 announced in 8 bytes: refused at the header with REQUEST_TOO_LARGE, and the
    // peripheral commits no memory for it.
    p.peripheral
        .handle_input(p.now, &[0x40, 0, 0x01, 0xff, 0xff, 0xff, 0xff, 0x00])
        .unwrap();
    p.flush();
    assert_eq!(p.sent_p2c.last().unwrap(), &[0x40, 0x00, 0xd4, 0x01, 0x07]);
    // One byte over the limit, the same; exactly at it, accepted (then abandoned).
    let over = ((1u32 << 20) + 1).to_le_bytes();
    p.peripheral
        .handle_input(
            p.now,
            &[0x41, 0, 0x01, over[0], over[1], over[2], over[3], 0x00],
        )
        .unwrap();
    p.flush();
    assert_eq!(p.sent_p2c.last().unwrap(), &[0x41, 0x00, 0xd4, 0x01, 0x07]);
    let replies = p.sent_p2c.len();
    let at = (1u32 << 20).to_le_bytes();
    p.peripheral
        .handle_input(p.now, &[0x42, 0, 0x01, at[0], at[1], at[2], at[3], 0x00])
        .unwrap();
    p.flush();
    assert_eq!(p.sent_p2c.len(), replies, "accepted: no reply yet");
    // Truncated LARGE FIRST headers: malformed containers, no reply, no state.
    for bad in [
        &[0x43, 0, 0x01][..],
        &[0x43, 0, 0x01, 0x10, 0x00],
        &[0x43, 0, 0x01, 0x10, 0x00, 0x00, 0x00],
        &[0x43, 0, 0x01, 0x10, 0x00, 0x00, 0x00, 0x05, 0xaa],
    ] {
        let before = p.peripheral_warnings.len();
        p.peripheral.handle_input(p.now, bad).unwrap();
        p.flush();
        assert!(
            matches!(
                p.peripheral_warnings.get(before),
                Some(Warning::MalformedContainer(WireError::Truncated { .. }))
            ),
            "{bad:02x?}: {:?}",
            &p.peripheral_warnings[before..]
        );
    }
    assert_eq!(p.sent_p2c.len(), replies);
    // A seq gap after the wrap point is still detected.
    p.peripheral
        .handle_input(p.now, &[0x44, 0, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00])
        .unwrap();
    for seq in 1..=255u8 {
        p.peripheral
            .handle_input(p.now, &[0x44, seq, 0x40, 0x00])
            .unwrap();
    }
    p.peripheral
        .handle_input(p.now, &[0x44, 0x01, 0x40, 0x00])
        .unwrap();
    p.flush();
    assert_eq!(p.sent_p2c.last().unwrap(), &[0x44, 0x00, 0xd4, 0x01, 0x08]);
    // Abandoned transactions are reclaimed by the reassembly timeout; the link still works.
    p.drive_idle(Duration::from_secs(11));
    let data = vec![9u8; 100_000];
    assert_eq!(p.call("loop", &data).unwrap(), data);
}

#[test]
fn config_limits_are_checked() {
    use blerpc_proto::connection::ConfigError;
    let mut b = builder(true, true, false);
    b.central.max_response_len = usize::MAX;
    let r = TestCentral::new(
        b.central,
        blerpc_proto::crypto::RustCrypto,
        rand_chacha::ChaCha20Rng::seed_from_u64(1),
        blerpc_proto::Instant::from_millis(0),
    );
    assert!(matches!(
        r.map(|_| ()),
        Err(ConfigError::Limit {
            field: "max_response_len"
        })
    ));
    let mut b = builder(true, true, false);
    b.peripheral.max_request_len = 1 << 32;
    let r = TestPeripheral::new(
        b.peripheral,
        blerpc_proto::crypto::RustCrypto,
        None,
        rand_chacha::ChaCha20Rng::seed_from_u64(1),
    );
    assert!(matches!(
        r.map(|_| ()),
        Err(ConfigError::Limit {
            field: "max_request_len"
        })
    ));
    // Without the extension a large limit is fine: the classic wire never reaches it.
    let mut b = builder(false, false, false);
    b.peripheral.max_request_len = 1 << 32;
    assert!(
        TestPeripheral::new(
            b.peripheral,
            blerpc_proto::crypto::RustCrypto,
            None,
            rand_chacha::ChaCha20Rng::seed_from_u64(1),
        )
        .is_ok()
    );
}
