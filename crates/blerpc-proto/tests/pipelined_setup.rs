//! Pipelined setup (`CentralConfig::setup_pipelining`): which requests go out together, the round
//! trips each mode saves, and what happens when the peripheral does not answer, refuses, lacks
//! encryption or answers out of order.

use std::time::Duration;

use blerpc_proto::Instant;
use blerpc_proto::connection::{CloseReason, SetupPipelining, Warning};
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::harness::*;

const MODES: [SetupPipelining; 3] = [
    SetupPipelining::Off,
    SetupPipelining::Requests,
    SetupPipelining::KeyExchange,
];

fn builder(encrypted: bool, mode: SetupPipelining) -> PairBuilder {
    let mut b = PairBuilder::encrypted(encrypted);
    b.central.setup_pipelining = mode;
    b
}

/// Connects and returns the virtual time setup took (1 ms each way on the harness's link).
fn connect_time(p: &mut Pair) -> Duration {
    let start = p.now;
    p.connect();
    p.now - start
}

/// The control PDUs the central sent before its first data container.
fn setup_requests(p: &Pair) -> Vec<Vec<u8>> {
    p.sent_c2p
        .iter()
        .take_while(|pdu| pdu[2] & 0xc0 == 0xc0)
        .cloned()
        .collect()
}

/// Holds the first peripheral→central container with flags `first` and delivers it right after
/// the next one with flags `second`: the peripheral answering out of order.
fn swap_p2c(first: u8, second: u8) -> Interceptor {
    let mut held: Option<Vec<u8>> = None;
    Box::new(move |dir, pdu, _| {
        if dir != Dir::P2C {
            return Action::Deliver;
        }
        match pdu[2] {
            f if f == first && held.is_none() => {
                held = Some(pdu.to_vec());
                Action::Drop
            }
            f if f == second => match held.take() {
                Some(earlier) => Action::Sequence(vec![pdu.to_vec(), earlier]),
                None => Action::Deliver,
            },
            _ => Action::Deliver,
        }
    })
}

fn error_pdu(tid: u8, code: ErrorCode) -> Vec<u8> {
    vec![tid, 0x00, 0xd4, 0x01, code.into()]
}

#[test]
fn each_mode_saves_its_round_trips() {
    // Round trips of 2 ms: encrypted setup takes four in the reference order (TIMEOUT,
    // CAPABILITIES, step 1, step 3), three with the requests pipelined, two with step 1 too;
    // plaintext setup two, one, one.
    for (mode, encrypted, expected_ms) in [
        (SetupPipelining::Off, true, 8),
        (SetupPipelining::Requests, true, 6),
        (SetupPipelining::KeyExchange, true, 4),
        (SetupPipelining::Off, false, 4),
        (SetupPipelining::Requests, false, 2),
        (SetupPipelining::KeyExchange, false, 2),
    ] {
        let mut b = builder(encrypted, mode);
        b.peripheral.timeout_ms = 250;
        let mut p = b.build();
        let took = connect_time(&mut p);
        assert_eq!(
            took,
            Duration::from_millis(expected_ms),
            "{mode:?}, encrypted {encrypted}"
        );
        assert_eq!(p.central.is_encrypted(), encrypted, "{mode:?}");
        assert_eq!(p.central.peer_timeout_ms(), 250, "{mode:?}");
        assert_eq!(p.call("loop", b"hello").unwrap(), b"hello", "{mode:?}");
    }
}

#[test]
fn the_pipelined_requests_are_the_sequential_ones_in_one_flight() {
    let mut p = builder(true, SetupPipelining::KeyExchange).build();
    p.connect();
    let sent = setup_requests(&p);
    assert_eq!(sent.len(), 4, "TIMEOUT, CAPABILITIES, step 1, step 3");
    // TIMEOUT tid 0 and the 6-byte CAPABILITIES request tid 1, byte for byte as in the
    // reference order; step 1 with tid 2 (33 bytes: step byte, ephemeral X25519 key).
    assert_eq!(sent[0], [0x00, 0x00, 0xc4, 0x00]);
    assert_eq!(sent[1], [0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0, 0]);
    assert_eq!(sent[2][..5], [0x02, 0x00, 0xd8, 0x21, 0x01]);
    assert_eq!(sent[2].len(), 4 + 33);
    assert_eq!(sent[3][..5], [0x03, 0x00, 0xd8, 0x2d, 0x03]);
    // The first three left before any reply: the peripheral's replies come 1 ms later.
    let mut seq = builder(true, SetupPipelining::KeyExchange).build();
    seq.flush();
    assert_eq!(seq.sent_c2p.len(), 3);
    assert!(seq.sent_p2c.is_empty());
    // The sequential order sends the same first two requests, one at a time.
    let mut off = builder(true, SetupPipelining::Off).build();
    off.flush();
    assert_eq!(off.sent_c2p, vec![vec![0x00, 0x00, 0xc4, 0x00]]);
    off.connect();
    assert_eq!(setup_requests(&off)[..2], sent[..2]);
}

#[test]
fn step1_waits_for_capabilities_below_the_key_exchange_mtu() {
    // Step 2 needs ATT MTU 136: below it the key exchange never starts, pipelined or not.
    let mut b = builder(false, SetupPipelining::KeyExchange).mtu(100);
    b.peripheral.require_encryption = false;
    let mut p = b.build();
    assert_eq!(connect_time(&mut p), Duration::from_millis(2));
    assert!(setup_requests(&p).iter().all(|pdu| pdu[2] != 0xd8));
}

#[test]
fn an_unanswered_pipelined_timeout_keeps_100ms_without_waiting() {
    for mode in [SetupPipelining::Requests, SetupPipelining::KeyExchange] {
        let mut b = builder(true, mode);
        b.peripheral.timeout_ms = 250;
        let mut p = b.build();
        p.interceptor = Some(drop_p2c(0xc4));
        // No wait for the TIMEOUT reply (the sequential order waits its 1 s setup timeout).
        let took = connect_time(&mut p);
        assert!(took < Duration::from_millis(10), "{mode:?}: {took:?}");
        assert_eq!(p.central.peer_timeout_ms(), 100);
    }
}

#[test]
fn a_refused_pipelined_timeout_keeps_100ms() {
    let mut b = builder(true, SetupPipelining::Requests);
    b.peripheral.timeout_ms = 250;
    let mut p = b.build();
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir == Dir::P2C && pdu[2] == 0xc4 {
            Action::Replace(error_pdu(pdu[0], ErrorCode::UnknownCommand))
        } else {
            Action::Deliver
        }
    }));
    p.connect();
    assert_eq!(p.central.peer_timeout_ms(), 100);
    assert!(p.central.is_encrypted());
    assert!(
        !p.warnings()
            .iter()
            .any(|w| matches!(w, Warning::StaleError { .. })),
        "the refusal belongs to the setup: {:?}",
        p.warnings()
    );
}

#[test]
fn a_late_timeout_reply_is_ignored_once_capabilities_answered() {
    // A peripheral that answers TIMEOUT after CAPABILITIES (out of order): the central has
    // already settled on 100 ms and reports the reply.
    let mut b = builder(false, SetupPipelining::Requests);
    b.peripheral.timeout_ms = 250;
    let mut p = b.build();
    p.interceptor = Some(swap_p2c(0xc4, 0xd0));
    p.connect();
    p.drive_idle(Duration::from_millis(10));
    assert_eq!(p.central.peer_timeout_ms(), 100);
    assert!(
        p.warnings()
            .contains(&Warning::UnexpectedControl { tid: 0, cmd: 0x1 }),
        "{:?}",
        p.warnings()
    );
}

#[test]
fn a_peripheral_without_encryption_gets_what_the_policy_allows() {
    // The early step 1 reaches a peripheral without an identity: its CAPABILITIES reply does
    // not announce encryption, so the central goes on in plaintext (if allowed) and the later
    // ERROR to step 1 is only a warning.
    let mut b = builder(false, SetupPipelining::KeyExchange);
    b.central.require_encryption = false;
    let mut p = b.build();
    assert_eq!(connect_time(&mut p), Duration::from_millis(2));
    assert!(!p.central.is_encrypted());
    p.drive_idle(Duration::from_millis(10));
    assert!(p.warnings().contains(&Warning::StaleError {
        tid: 2,
        code: ErrorCode::KeyExchangeFailed
    }));
    assert_eq!(p.call("loop", b"plain").unwrap(), b"plain");

    // The same peripheral, a central that requires encryption: refused at the reply.
    let mut b = builder(false, SetupPipelining::KeyExchange);
    b.central.require_encryption = true;
    let mut p = b.build();
    p.drive_until(Duration::from_secs(5), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::EncryptionUnavailable))
    );
    assert_eq!(
        p.now - Instant::from_millis(1_000),
        Duration::from_millis(2)
    );
}

#[test]
fn an_early_step1_refused_before_capabilities_closes_once_encryption_is_announced() {
    // ERROR to step 1 delivered ahead of the CAPABILITIES reply, which announces encryption:
    // the same outcome as an ERROR to a sequential step 1.
    let mut p = builder(true, SetupPipelining::KeyExchange).build();
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir != Dir::P2C {
            return Action::Deliver;
        }
        match pdu[2] {
            0xd0 => Action::Sequence(vec![
                error_pdu(2, ErrorCode::KeyExchangeFailed),
                pdu.to_vec(),
            ]),
            0xd8 => Action::Drop,
            _ => Action::Deliver,
        }
    }));
    p.drive_until(Duration::from_secs(5), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::HandshakeRefused(
                ErrorCode::KeyExchangeFailed
            )))
    );
}

#[test]
fn an_early_step1_refused_by_a_plaintext_peripheral_is_harmless() {
    // The same early ERROR from a peripheral that does not announce encryption.
    let mut b = builder(false, SetupPipelining::KeyExchange);
    b.central.require_encryption = false;
    let mut p = b.build();
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir == Dir::P2C && pdu[2] == 0xd0 {
            Action::Sequence(vec![
                error_pdu(2, ErrorCode::KeyExchangeFailed),
                pdu.to_vec(),
            ])
        } else if dir == Dir::P2C && pdu[2] == 0xd4 && pdu[0] == 2 {
            // The peripheral's own ERROR to step 1: already delivered above.
            Action::Drop
        } else {
            Action::Deliver
        }
    }));
    p.connect();
    assert!(!p.central.is_encrypted());
    assert_eq!(p.call("loop", b"x").unwrap(), b"x");
}

#[test]
fn a_step2_before_capabilities_is_ignored_and_the_handshake_times_out() {
    // Out of order: step 2 ahead of the CAPABILITIES reply. The central does not act on a
    // handshake reply before it knows the peripheral offers encryption; the key exchange then
    // times out with a clear reason, never hangs.
    let mut p = builder(true, SetupPipelining::KeyExchange).build();
    p.interceptor = Some(swap_p2c(0xd0, 0xd8));
    let start = p.now;
    p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::HandshakeTimeout))
    );
    assert!(
        p.warnings()
            .contains(&Warning::UnexpectedControl { tid: 2, cmd: 0x6 })
    );
    // The step timeout (2 s) counts from the CAPABILITIES reply.
    assert_eq!(
        p.now - start,
        Duration::from_millis(2) + Duration::from_secs(2)
    );
}

#[test]
fn unanswered_capabilities_time_out_alike_in_every_mode() {
    for mode in MODES {
        let mut p = builder(true, mode).build();
        p.interceptor = Some(drop_p2c(0xd0));
        p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
        assert!(
            p.central_events
                .contains(&CEv::Closed(CloseReason::SetupTimeout)),
            "{mode:?}"
        );
    }
}

#[test]
fn pipelined_setup_survives_lost_and_duplicated_replies() {
    // Seeded faults on every PDU until setup ends, in the pipelined modes: setup either
    // completes and a call works, or closes with a setup reason; it never hangs.
    for mode in [SetupPipelining::Requests, SetupPipelining::KeyExchange] {
        for seed in 0..64u64 {
            let mut b = builder(true, mode);
            b.seed = seed;
            let mut p = b.build();
            p.interceptor = Some(Box::new(|_, pdu, rng| {
                use rand_chacha::rand_core::RngCore;
                match rng.next_u32() % 8 {
                    0 => Action::Drop,
                    1 => Action::Append(vec![pdu.to_vec()]),
                    _ => Action::Deliver,
                }
            }));
            p.drive_until(Duration::from_secs(30), |p| {
                p.central.is_ready() || p.central.is_closed()
            });
            if p.central.is_ready() {
                p.interceptor = None;
                assert_eq!(p.call("loop", b"ok").unwrap(), b"ok", "{mode:?} {seed}");
            } else {
                assert!(
                    p.central_events.iter().any(|e| matches!(
                        e,
                        CEv::Closed(
                            CloseReason::SetupTimeout
                                | CloseReason::HandshakeTimeout
                                | CloseReason::HandshakeRefused(_)
                                | CloseReason::Handshake(_)
                        )
                    )),
                    "{mode:?} {seed}: {:#?}",
                    p.central_events
                );
            }
        }
    }
}
