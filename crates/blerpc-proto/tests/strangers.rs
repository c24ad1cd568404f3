//! A peripheral safe to expose: a stranger (no session yet where encryption is required) gets
//! no reassembly memory and small containers only, must establish the connection within the
//! setup deadline, and may start only so many key exchanges; an established peer's partial
//! requests live within a budget and a deadline set by their FIRST container.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use blerpc_proto::connection::{PeripheralCloseReason, Warning};
use blerpc_proto::wire::container::MAX_LONG_CONTAINER_LEN;
use blerpc_proto::wire::error_code::ErrorCode;
use blerpc_sim::harness::msg::*;
use blerpc_sim::harness::*;

/// A FIRST container of `tid` announcing `total` bytes and carrying `chunk` of them.
fn first(tid: u8, total: u16, chunk: &[u8]) -> Vec<u8> {
    let [lo, hi] = total.to_le_bytes();
    let mut pdu = vec![tid, 0x00, 0x00, lo, hi, chunk.len() as u8];
    pdu.extend_from_slice(chunk);
    pdu
}

/// A peripheral whose central never speaks: its PDUs stay on a scripted wire, so the
/// peripheral sees only what a test pokes into it (a stranger's bytes).
fn stranger(b: PairBuilder) -> Pair<Scripted> {
    b.build_with(|_| Scripted::default())
}

/// A SUBSEQUENT container of `tid`.
fn subsequent(tid: u8, seq: u8, chunk: &[u8]) -> Vec<u8> {
    let mut pdu = vec![tid, seq, 0x40, chunk.len() as u8];
    pdu.extend_from_slice(chunk);
    pdu
}

/// Key-exchange step 1 with an arbitrary X25519 public key.
fn step1(tid: u8) -> Vec<u8> {
    let mut pdu = vec![tid, 0x00, 0xd8, 33, 0x01];
    pdu.extend_from_slice(&[9u8; 32]);
    pdu
}

#[test]
fn before_the_session_a_request_is_refused_at_its_first_container_and_nothing_is_buffered() {
    let mut b = PairBuilder::encrypted(true);
    b.peripheral.long_containers = true;
    let mut p = stranger(b);
    // CAPABILITIES with both extensions announced (flags 0x0006), no key exchange.
    p.poke(&[0x01, 0x00, 0xd0, 0x06, 0, 0, 0, 0, 0x06, 0x00]);
    assert!(p.peripheral.long_containers());
    // A 1,000-byte request's FIRST: ENCRYPTION_REQUIRED at once, no byte held.
    assert_eq!(
        p.poke(&first(0x10, 1000, &[0xaa; 100])),
        vec![error_reply(0x10, ErrorCode::EncryptionRequired)]
    );
    assert_eq!(p.peripheral.reassembly_claimed(), 0);
    // Its SUBSEQUENT containers are dropped without a reply.
    assert!(p.poke(&subsequent(0x10, 1, &[0xbb; 100])).is_empty());
    assert_eq!(p.peripheral.reassembly_claimed(), 0);
    // A LARGE FIRST announcing 16 MiB: refused the same way, before anything is reserved.
    let big = (16u32 << 20).to_le_bytes();
    assert_eq!(
        p.poke(&[0x11, 0, 0x01, big[0], big[1], big[2], big[3], 0x00]),
        vec![error_reply(0x11, ErrorCode::EncryptionRequired)]
    );
    assert!(
        p.peripheral_warnings
            .contains(&Warning::PlaintextRejected { tid: 0x11 })
    );
    // Long containers are agreed, but a stranger may send only classic ones.
    assert_eq!(p.peripheral.max_input_container_len(), 247 - 3);
}

#[test]
fn a_stranger_that_keeps_sending_requests_is_closed() {
    let mut b = PairBuilder::encrypted(true);
    b.peripheral.max_containers_before_session = 3;
    let mut p = stranger(b);
    for tid in 0..3 {
        assert_eq!(
            p.poke(&first(tid, 10, &[0; 10])),
            vec![error_reply(tid, ErrorCode::EncryptionRequired)]
        );
    }
    assert_eq!(p.peripheral_closed, None);
    assert!(p.poke(&first(3, 10, &[0; 10])).is_empty());
    assert_eq!(
        p.peripheral_closed,
        Some(PeripheralCloseReason::DataBeforeSession)
    );
}

#[test]
fn long_containers_are_accepted_once_the_session_exists() {
    let mut b = PairBuilder::encrypted(true);
    b.central.long_containers = true;
    b.peripheral.long_containers = true;
    let mut p = b.build();
    p.connect();
    assert!(p.peripheral.is_encrypted() && p.peripheral.long_containers());
    assert_eq!(
        p.peripheral.max_input_container_len(),
        MAX_LONG_CONTAINER_LEN
    );
    assert_eq!(p.call("echo", &echo_req("ok")).unwrap(), echo_req("ok"));
}

#[test]
fn a_connection_that_does_not_prove_itself_in_time_is_closed() {
    let mut p = stranger(PairBuilder::encrypted(true));
    p.peripheral.open(p.now);
    // TIMEOUT and CAPABILITIES are answered, but without the key exchange the connection is not
    // established (encryption is required).
    assert_eq!(p.poke(&[0x00, 0x00, 0xc4, 0x00]).len(), 1);
    assert!(!p.peripheral.is_established());
    assert_eq!(
        p.peripheral.poll_timeout(),
        Some(p.now + Duration::from_secs(10))
    );
    p.drive_idle(Duration::from_secs(11));
    assert_eq!(
        p.peripheral_closed,
        Some(PeripheralCloseReason::SetupTimeout)
    );
    assert!(p.peripheral.is_closed());
    // Input after the close is ignored.
    assert!(p.poke(&[0x00, 0x00, 0xc4, 0x00]).is_empty());
}

#[test]
fn an_established_connection_has_no_setup_deadline() {
    let mut p = Pair::new();
    p.peripheral.open(p.now);
    p.connect();
    assert!(p.peripheral.is_established());
    // Idle for an hour: still open, and no timer pending for the setup deadline.
    p.drive_idle(Duration::from_secs(3600));
    assert_eq!(p.peripheral_closed, None);
    assert_eq!(p.peripheral.poll_timeout(), None);
    assert_eq!(p.call("echo", &echo_req("ok")).unwrap(), echo_req("ok"));
}

#[test]
fn a_plaintext_connection_is_established_by_its_capabilities_request() {
    let mut p = stranger(PairBuilder::plaintext());
    p.peripheral.open(p.now);
    assert!(!p.peripheral.is_established());
    p.poke(&[0x01, 0x00, 0xd0, 0x00]);
    assert!(p.peripheral.is_established());
    p.drive_idle(Duration::from_secs(60));
    assert_eq!(p.peripheral_closed, None);
}

#[test]
fn key_exchanges_beyond_the_cap_close_the_connection() {
    let mut b = PairBuilder::encrypted(true);
    b.peripheral.max_key_exchange_attempts = 3;
    let mut p = stranger(b);
    for tid in 0..3 {
        let reply = p.poke(&step1(tid));
        assert_eq!(reply.len(), 1, "step 1 #{tid} answered");
        assert_eq!(reply[0][2], 0xd8, "a KEY_EXCHANGE reply, not an ERROR");
    }
    assert_eq!(p.peripheral_closed, None);
    // The fourth: ERROR KEY_EXCHANGE_FAILED, and the connection closes.
    assert_eq!(
        p.poke(&step1(3)),
        vec![error_reply(3, ErrorCode::KeyExchangeFailed)]
    );
    assert_eq!(
        p.peripheral_closed,
        Some(PeripheralCloseReason::KeyExchangeAttempts { attempts: 4 })
    );
    assert!(p.poke(&step1(4)).is_empty());
}

/// A plaintext pair whose peripheral takes requests of up to 4,000 bytes, `budget` bytes of
/// partial requests together and `pending` requests at once.
fn budgeted(budget: usize, pending: usize) -> Pair {
    let mut b = PairBuilder::plaintext();
    b.peripheral.max_request_len = 4000;
    b.peripheral.max_reassembly_bytes = budget;
    b.peripheral.max_pending_requests = pending;
    let mut p = b.build();
    p.connect();
    p
}

#[test]
fn partial_requests_beyond_the_reassembly_budget_get_busy_before_they_are_buffered() {
    let mut p = budgeted(6000, 4);
    assert!(p.poke(&first(0x20, 4000, &[1; 50])).is_empty());
    assert_eq!(p.peripheral.reassembly_claimed(), 4000);
    // 4,000 + 3,000 > 6,000: BUSY, and nothing claimed for it.
    assert_eq!(
        p.poke(&first(0x21, 3000, &[2; 50])),
        vec![error_reply(0x21, ErrorCode::Busy)]
    );
    assert_eq!(p.peripheral.reassembly_claimed(), 4000);
    assert!(p.peripheral_warnings.contains(&Warning::ReassemblyBudget {
        tid: 0x21,
        claimed: 4000,
        requested: 3000
    }));
    // 2,000 fits.
    assert!(p.poke(&first(0x22, 2000, &[3; 50])).is_empty());
    assert_eq!(p.peripheral.reassembly_claimed(), 6000);
    // A request complete in its FIRST needs no budget.
    assert_eq!(p.call("echo", &echo_req("ok")).unwrap(), echo_req("ok"));
    // A runtime's shared budget lowers it further: nothing more fits now.
    p.peripheral.set_reassembly_budget(0);
    assert_eq!(
        p.poke(&first(0x23, 100, &[4; 50])),
        vec![error_reply(0x23, ErrorCode::Busy)]
    );
}

#[test]
fn partial_requests_count_towards_busy() {
    let mut p = budgeted(1 << 20, 1);
    assert!(p.poke(&first(0x30, 1000, &[1; 50])).is_empty());
    // One partial request already reaches max_pending_requests = 1.
    assert_eq!(
        p.poke(&first(0x31, 1000, &[2; 50])),
        vec![error_reply(0x31, ErrorCode::Busy)]
    );
}

#[test]
fn the_reassembly_deadline_runs_from_the_first_container() {
    let mut b = PairBuilder::plaintext();
    b.peripheral.reassembly_min_rate = 0;
    let mut p = b.build();
    p.connect();
    let start = p.now;
    assert!(p.poke(&first(0x40, 2000, &[1; 50])).is_empty());
    // One container every 4 s: each would have refreshed an idle timeout; the deadline holds.
    for seq in 1..=2u8 {
        p.advance(Duration::from_secs(4));
        p.timeouts();
        assert!(p.poke(&subsequent(0x40, seq, &[seq; 50])).is_empty());
    }
    assert_eq!(p.peripheral.reassembly_claimed(), 2000);
    assert_eq!(
        p.peripheral.poll_timeout(),
        Some(start + Duration::from_secs(10))
    );
    p.advance(Duration::from_secs(2));
    p.timeouts();
    assert_eq!(p.peripheral.reassembly_claimed(), 0);
    assert!(
        p.peripheral_warnings
            .contains(&Warning::ReassemblyTimeout { tid: 0x40 })
    );
    // The next request works.
    assert_eq!(p.call("echo", &echo_req("ok")).unwrap(), echo_req("ok"));
}

#[test]
fn a_long_request_gets_time_for_its_length() {
    let mut b = PairBuilder::plaintext();
    b.peripheral.reassembly_min_rate = 100;
    b.peripheral.max_request_len = 4000;
    let mut p = b.build();
    p.connect();
    let start = p.now;
    assert!(p.poke(&first(0x41, 2000, &[1; 50])).is_empty());
    // 10 s, plus 2,000 bytes at 100 B/s.
    assert_eq!(
        p.peripheral.poll_timeout(),
        Some(start + Duration::from_secs(30))
    );
}
