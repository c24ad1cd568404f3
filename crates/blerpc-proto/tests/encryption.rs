//! The key exchange, identity pinning (fail-closed), and encryption requirements on both sides.

use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind, CloseReason, Pinning};
use blerpc_proto::handshake::HandshakeError;
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

#[test]
fn a_wrong_pinned_key_is_refused() {
    let mut b = PairBuilder::default();
    b.central.pinning = Pinning::Expect([7; 32]);
    let mut p = b.build();
    p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::IdentityRejected))
    );
    // No step 3 was sent: the session key never left the central.
    assert!(
        !p.sent_c2p
            .iter()
            .any(|c| c[2] == 0xd8 && c.get(4) == Some(&3))
    );
}

#[test]
fn decide_accept_and_reject() {
    let mut b = PairBuilder::default();
    b.central.pinning = Pinning::Decide;
    let mut p = b.build();
    p.drive_until(Duration::from_secs(10), |p| {
        p.central_events
            .iter()
            .any(|e| matches!(e, CEv::Identity(_)))
    });
    assert!(p.central_events.contains(&CEv::Identity(identity_public())));
    p.central.accept_identity(p.now);
    p.connect();
    assert!(p.central.is_encrypted());

    let mut b = PairBuilder::default();
    b.central.pinning = Pinning::Decide;
    let mut p = b.build();
    p.drive_until(Duration::from_secs(10), |p| {
        p.central_events
            .iter()
            .any(|e| matches!(e, CEv::Identity(_)))
    });
    p.central.reject_identity(p.now);
    p.drive_idle(Duration::from_secs(1));
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::IdentityRejected))
    );
}

#[test]
fn an_unanswered_identity_decision_fails_closed() {
    let mut b = PairBuilder::default();
    b.central.pinning = Pinning::Decide;
    let mut p = b.build();
    p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::HandshakeTimeout))
    );
}

#[test]
fn pinning_disabled_is_an_explicit_opt_out() {
    let mut b = PairBuilder::default();
    b.central.pinning = Pinning::Disabled;
    let mut p = b.build();
    p.connect();
    assert_eq!(p.central.peer_identity(), Some(identity_public()));
}

#[test]
fn a_central_that_skips_the_key_exchange_is_refused() {
    // The central runs without encryption although the peripheral requires it.
    let mut b = PairBuilder::default();
    b.central.require_encryption = false;
    b.central.att_mtu = 100; // too small for KX: the central goes on in plaintext
    b.peripheral.att_mtu = 100;
    let mut p = b.build();
    p.connect();
    assert!(!p.central.is_encrypted());
    assert_eq!(
        p.call("echo", &echo_req("x")),
        Err(CallError::Peer(ErrorCode::EncryptionRequired))
    );
}

#[test]
fn encryption_needs_mtu_136() {
    let mut p = PairBuilder::default().mtu(135).build();
    p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::MtuTooSmallForKeyExchange {
                att_mtu: 135
            }))
    );
    let mut p = PairBuilder::default().mtu(136).build();
    p.connect();
    assert!(p.central.is_encrypted());
}

#[test]
fn a_forged_signature_closes_the_connection() {
    let mut p = Pair::new();
    p.interceptor = Some(Box::new(|dir, pdu, _| {
        if dir == Dir::P2C && pdu.len() > 100 && pdu[2] == 0xd8 {
            let mut forged = pdu.to_vec();
            forged[40] ^= 1; // inside the signature
            return Action::Replace(forged);
        }
        Action::Deliver
    }));
    p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
    assert!(matches!(
        p.central_events.last(),
        Some(CEv::Closed(CloseReason::Handshake(HandshakeError::Crypto(
            _
        ))))
    ));
}

#[test]
fn a_tampered_confirmation_is_refused_and_the_peripheral_allows_a_new_handshake() {
    let mut p = Pair::new();
    let mut tampered = false;
    p.interceptor = Some(Box::new(move |dir, pdu, _| {
        if !tampered && dir == Dir::C2P && pdu[2] == 0xd8 && pdu.get(4) == Some(&3) {
            tampered = true;
            let mut bad = pdu.to_vec();
            let last = bad.len() - 1;
            bad[last] ^= 0x80;
            return Action::Replace(bad);
        }
        Action::Deliver
    }));
    p.drive_until(Duration::from_secs(10), |p| p.central.is_closed());
    // The peripheral answered ERROR KEY_EXCHANGE_FAILED instead of staying silent.
    assert!(
        p.central_events
            .contains(&CEv::Closed(CloseReason::HandshakeRefused(
                ErrorCode::KeyExchangeFailed
            )))
    );
    // A new central on the same peripheral connection can start over (the reference needs a
    // reconnect).
    let fresh = TestCentral::new(
        *p.central.config(),
        blerpc_proto::crypto::RustCrypto,
        rand_chacha::ChaCha20Rng::seed_from_u64(9),
        p.now,
    )
    .unwrap();
    p.replace_central(fresh);
    p.interceptor = None;
    p.connect();
    assert!(p.peripheral.is_encrypted());
    assert_eq!(
        p.call("echo", &echo_req("again")).unwrap(),
        echo_req("again")
    );
}

use rand_chacha::rand_core::SeedableRng;

#[test]
fn encrypted_and_plaintext_traffic_are_byte_identical_per_seed() {
    // Determinism: the same seed gives the same bytes on the wire, encryption included.
    let run = || {
        let mut p = Pair::new();
        p.connect();
        let id = p
            .start_call("echo", &echo_req("det"), CallKind::Unary)
            .unwrap();
        p.wait_call(id).unwrap();
        (p.sent_c2p.clone(), p.sent_p2c.clone())
    };
    assert_eq!(run(), run());
}

#[test]
fn closing_drops_the_session_on_both_sides() {
    let mut p = Pair::new();
    p.connect();
    assert!(p.central.is_encrypted() && p.peripheral.is_encrypted());
    let now = p.now;
    p.central.close(now);
    p.peripheral.close(now);
    assert!(p.central.is_closed());
    assert!(!p.central.is_encrypted());
    assert!(!p.peripheral.is_encrypted());
}

#[test]
fn a_duplicated_step1_still_completes_the_handshake() {
    // A link that delivers the central's step 1 twice before the peripheral can answer: the
    // peripheral's handshake moves on to the second copy (a new ephemeral key), so only the
    // step 2 that answers it may go out. The step 2 of the first copy, still waiting in the
    // control queue, is replaced in place instead of sent ahead of it.
    let mut p = Pair::new();
    let mut duplicated = false;
    p.interceptor = Some(Box::new(move |dir, pdu, _| {
        if !duplicated && dir == Dir::C2P && pdu[2] == 0xd8 && pdu.get(4) == Some(&1) {
            duplicated = true;
            return Action::Append(vec![pdu.to_vec()]);
        }
        Action::Deliver
    }));
    p.connect();
    assert!(p.central.is_encrypted() && p.peripheral.is_encrypted());
    let step2s = p
        .sent_p2c
        .iter()
        .filter(|c| c[2] == 0xd8 && c.get(4) == Some(&2))
        .count();
    assert_eq!(step2s, 1);
    assert_eq!(p.call("echo", &echo_req("once")).unwrap(), echo_req("once"));
}
