//! The call table driven by hand with byte literals (plaintext), and against a real
//! [`Peripheral`] in memory where the key exchange is needed (trust on first use).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::time::Duration;

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;

use super::*;
use crate::connection::{CallError, CloseReason, Peripheral, PeripheralConfig, PeripheralEvent};
use crate::crypto::{IdentitySeed, RustCrypto};
use crate::handshake::TofuOutcome;

/// What a sink or a reply saw, in order, for every call of a test.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Started(u64),
    Response(u64, Vec<u8>),
    Item(u64, Vec<u8>),
    End(u64),
    Failed(u64, &'static str),
    Done(u64, Result<(), &'static str>),
}

type Log = Rc<RefCell<Vec<Seen>>>;

/// A sink that logs, with a stream buffer of `limit` items and a switch for "abandoned".
struct Sink {
    tag: u64,
    log: Log,
    items: usize,
    limit: usize,
    gone: Rc<RefCell<bool>>,
}

impl CallSink for Sink {
    fn started(&mut self, ticket: Ticket) {
        assert_eq!(
            ticket.0, self.tag,
            "tickets count from 0 in the order calls were made"
        );
        self.log.borrow_mut().push(Seen::Started(self.tag));
    }
    fn response(self, data: &[u8]) {
        self.log
            .borrow_mut()
            .push(Seen::Response(self.tag, data.to_vec()));
    }
    fn item(&mut self, data: &[u8]) -> Delivery {
        if *self.gone.borrow() {
            return Delivery::Gone;
        }
        if self.items == self.limit {
            return Delivery::Full { limit: self.limit };
        }
        self.items += 1;
        self.log
            .borrow_mut()
            .push(Seen::Item(self.tag, data.to_vec()));
        Delivery::Taken
    }
    fn end(self) {
        self.log.borrow_mut().push(Seen::End(self.tag));
    }
    fn fail(self, error: CentralError) {
        self.log
            .borrow_mut()
            .push(Seen::Failed(self.tag, error.code()));
    }
    fn is_abandoned(&self) -> bool {
        *self.gone.borrow()
    }
}

struct Reply {
    tag: u64,
    log: Log,
}

impl OpReply for Reply {
    fn done(self, result: Result<(), CentralError>) {
        self.log
            .borrow_mut()
            .push(Seen::Done(self.tag, result.map_err(|e| e.code())));
    }
}

/// A store that fails, for the fail-closed test.
struct BrokenStore;

impl KnownKeys for BrokenStore {
    type Error = &'static str;
    fn get(&self, _: &str) -> Result<Option<[u8; 32]>, &'static str> {
        Err("disk on fire")
    }
    fn put(&mut self, _: &str, _: &[u8; 32]) -> Result<(), &'static str> {
        Err("disk on fire")
    }
}

struct Test;
impl Shell for Test {
    type Sink = Sink;
    type Reply = Reply;
    type Store = BTreeMap<String, [u8; 32]>;
}

struct Broken;
impl Shell for Broken {
    type Sink = Sink;
    type Reply = Reply;
    type Store = BrokenStore;
}

type Table = CallTable<RustCrypto, ChaCha20Rng, Test, 4>;

const T0: Instant = Instant::from_millis(1_000);

/// TIMEOUT reply: 100 ms.
const TIMEOUT_REPLY: [u8; 6] = [0x00, 0x00, 0xc4, 0x02, 0x64, 0x00];
/// CAPABILITIES reply: max_request 12,288, max_response 12,288, no encryption.
const CAPABILITIES_PLAIN: [u8; 10] = [0x01, 0x00, 0xd0, 0x06, 0x00, 0x30, 0x00, 0x30, 0, 0];

struct Fixture {
    table: Table,
    log: Log,
    gone: Rc<RefCell<bool>>,
}

impl Fixture {
    /// A plaintext table through setup, tuned by `tune`.
    fn ready(tune: impl FnOnce(&mut CentralConfig)) -> Fixture {
        let mut config = CentralConfig {
            require_encryption: false,
            ..CentralConfig::default()
        };
        tune(&mut config);
        let mut table = Table::new(
            config,
            RustCrypto,
            ChaCha20Rng::seed_from_u64(1),
            T0,
            Trust::Anyone,
        )
        .unwrap();
        let mut f = Fixture {
            table,
            log: Rc::default(),
            gone: Rc::default(),
        };
        f.sent();
        f.table.handle_input(T0, &TIMEOUT_REPLY);
        f.sent();
        f.table.handle_input(T0, &CAPABILITIES_PLAIN);
        assert_eq!(
            f.table.poll_event(),
            Some(TableEvent::Connected { encrypted: false })
        );
        table = f.table;
        Fixture { table, ..f }
    }

    fn sink(&self, tag: u64, limit: usize) -> Sink {
        Sink {
            tag,
            log: self.log.clone(),
            items: 0,
            limit,
            gone: self.gone.clone(),
        }
    }

    fn reply(&self, tag: u64) -> Reply {
        Reply {
            tag,
            log: self.log.clone(),
        }
    }

    fn start(&mut self, name: &str, data: &[u8], kind: CallKind, tag: u64) -> Ticket {
        let sink = self.sink(tag, 2);
        let ticket = self
            .table
            .start(T0, name, Request::Data(data.to_vec()), kind, None, sink)
            .map_err(|(e, _)| e)
            .unwrap();
        assert_eq!(ticket, Ticket(tag));
        ticket
    }

    /// A call the table refuses outright: its error.
    fn refused(&mut self, name: &str, tag: u64) -> CentralError {
        let sink = self.sink(tag, 2);
        let request = Request::Data(Vec::new());
        match self
            .table
            .start(T0, name, request, CallKind::Unary, None, sink)
        {
            Err((e, _)) => e,
            Ok(ticket) => panic!("{name} was started as {ticket:?}"),
        }
    }

    /// Everything the table sends now.
    fn sent(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 512];
        loop {
            buf.resize(self.table.transmit_len().max(4), 0);
            match self.table.poll_transmit(T0, &mut buf) {
                Some(n) => out.push(buf[..n].to_vec()),
                None => return out,
            }
        }
    }

    fn seen(&self) -> Vec<Seen> {
        core::mem::take(&mut *self.log.borrow_mut())
    }
}

/// A one-container RESPONSE (plaintext) to `name` under `tid`.
fn response(tid: u8, name: &str, data: &[u8]) -> Vec<u8> {
    let mut command = vec![0x80, name.len() as u8];
    command.extend_from_slice(name.as_bytes());
    command.extend_from_slice(&(data.len() as u16).to_le_bytes());
    command.extend_from_slice(data);
    let mut pdu = vec![tid, 0x00, 0x00];
    pdu.extend_from_slice(&(command.len() as u16).to_le_bytes());
    pdu.push(command.len() as u8);
    pdu.extend_from_slice(&command);
    pdu
}

#[test]
fn a_unary_call_gets_its_response_and_the_table_empties() {
    let mut f = Fixture::ready(|_| {});
    f.start("echo", b"\x0a\x02hi", CallKind::Unary, 0);
    assert_eq!(
        f.sent(),
        [b"\x02\x00\x00\x0c\x00\x0c\x00\x04echo\x04\x00\x0a\x02hi".to_vec()]
    );
    assert!(!f.table.is_idle());
    f.table
        .handle_input(T0, &response(2, "echo", b"\x0a\x02hi"));
    assert_eq!(
        f.seen(),
        [Seen::Started(0), Seen::Response(0, b"\x0a\x02hi".to_vec())]
    );
    assert!(f.table.is_idle());
}

#[test]
fn a_call_waits_for_outbox_room_in_order_and_starts_when_a_pdu_leaves() {
    // Room for one 150-byte request at a time.
    let mut f = Fixture::ready(|c| c.max_outbox_bytes = 256);
    let data = [0x55u8; 150];
    f.start("echo", &data, CallKind::Unary, 0);
    f.start("echo", &data, CallKind::Unary, 1);
    assert!(f.table.has_waiting());
    assert_eq!(f.seen(), [Seen::Started(0)]);
    // An upload's item made now waits behind the second call.
    f.start("counter_upload", b"", CallKind::ClientStream, 2);
    f.table
        .send_item(T0, Ticket(2), b"\x08\x01".to_vec(), f.reply(2));
    assert_eq!(f.seen(), []);
    // The first request leaves, then the second goes in, then the upload and its item.
    let sent = f.sent();
    assert_eq!(sent.len(), 3, "{sent:02x?}");
    assert_eq!(&sent[0][..3], &[0x02, 0x00, 0x00]);
    assert_eq!(
        &sent[1][..3],
        &[0x03, 0x00, 0x00],
        "the waiting call: tid 3"
    );
    assert_eq!(
        &sent[2][..3],
        &[0x04, 0x00, 0x00],
        "the upload's item: tid 4"
    );
    assert_eq!(
        f.seen(),
        [Seen::Started(1), Seen::Started(2), Seen::Done(2, Ok(()))]
    );
    assert!(!f.table.has_waiting());
}

#[test]
fn a_waiting_call_past_its_deadline_fails_with_timeout() {
    let mut f = Fixture::ready(|c| c.max_outbox_bytes = 256);
    let data = [0x55u8; 150];
    f.start("echo", &data, CallKind::Unary, 0);
    let deadline = T0 + Duration::from_millis(50);
    let sink = f.sink(1, 2);
    f.table
        .start(
            T0,
            "echo",
            Request::Data(data.to_vec()),
            CallKind::Unary,
            Some(deadline),
            sink,
        )
        .map_err(|(e, _)| e)
        .unwrap();
    // The core's call timeout (2 s) is later: the waiting call's deadline is the next one.
    assert_eq!(f.table.poll_timeout(), Some(deadline));
    f.table.handle_timeout(deadline);
    assert_eq!(f.seen(), [Seen::Started(0), Seen::Failed(1, "TIMEOUT")]);
    assert!(!f.table.has_waiting());
}

#[test]
fn a_deadline_given_at_start_bounds_the_call_in_the_core() {
    let mut f = Fixture::ready(|_| {});
    let deadline = T0 + Duration::from_millis(300);
    let sink = f.sink(0, 2);
    f.table
        .start(
            T0,
            "echo",
            Request::Data(b"\x0a\x00".to_vec()),
            CallKind::Unary,
            Some(deadline),
            sink,
        )
        .map_err(|(e, _)| e)
        .unwrap();
    f.sent();
    assert_eq!(f.table.poll_timeout(), Some(deadline));
    f.table.handle_timeout(deadline);
    assert_eq!(f.seen(), [Seen::Started(0), Seen::Failed(0, "TIMEOUT")]);
    assert!(f.table.is_idle());
}

#[test]
fn cancelling_fails_the_call_and_its_waiting_operations_and_drops_late_answers() {
    let mut f = Fixture::ready(|c| c.max_outbox_bytes = 256);
    f.start("echo", &[0x55u8; 150], CallKind::Unary, 0);
    f.start("counter_upload", b"", CallKind::ClientStream, 1);
    // The item does not fit behind the first request: it waits, and the finish behind it.
    f.table
        .send_item(T0, Ticket(1), vec![0x55; 150], f.reply(1));
    f.table.finish(T0, Ticket(1), f.reply(1));
    f.table.cancel(Ticket(1));
    f.table.cancel(Ticket(0));
    assert_eq!(
        f.seen(),
        [
            Seen::Started(0),
            Seen::Started(1),
            Seen::Done(1, Err("CANCELLED")),
            Seen::Done(1, Err("CANCELLED")),
            Seen::Failed(1, "CANCELLED"),
            Seen::Failed(0, "CANCELLED"),
        ]
    );
    assert!(f.table.is_idle());
    // The peripheral answers the cancelled call anyway: dropped, with a warning.
    f.sent();
    f.table.handle_input(T0, &response(2, "echo", b""));
    assert_eq!(f.seen(), []);
    assert!(matches!(f.table.poll_event(), Some(TableEvent::Warning(_))));
    // Cancelling twice, or an unknown ticket, changes nothing.
    f.table.cancel(Ticket(1));
    f.table.cancel(Ticket(99));
    assert_eq!(f.seen(), []);
}

#[test]
fn reap_cancels_the_calls_nobody_waits_for() {
    let mut f = Fixture::ready(|_| {});
    f.start("echo", b"", CallKind::Unary, 0);
    f.table.reap();
    assert_eq!(f.seen(), [Seen::Started(0)], "still wanted");
    *f.gone.borrow_mut() = true;
    f.table.reap();
    assert_eq!(f.seen(), [Seen::Failed(0, "CANCELLED")]);
    assert!(f.table.is_idle());
}

/// A plaintext stream item (a RESPONSE command) under `tid`.
fn item(tid: u8, n: u8) -> Vec<u8> {
    response(tid, "counter_stream", &[0x08, n])
}

#[test]
fn a_stream_reader_that_falls_behind_ends_its_call_with_stream_overflow() {
    let mut f = Fixture::ready(|_| {});
    f.start("counter_stream", b"\x08\x05", CallKind::ServerStream, 0);
    f.sent();
    for n in 0..3 {
        f.table.handle_input(T0, &item(2 + n, n));
    }
    assert_eq!(
        f.seen(),
        [
            Seen::Started(0),
            Seen::Item(0, vec![0x08, 0]),
            Seen::Item(0, vec![0x08, 1]),
            Seen::Failed(0, "STREAM_OVERFLOW"),
        ]
    );
    assert!(f.table.is_idle());
    // The peripheral is still sending: its last items are dropped, and a new stream of the
    // same command waits for the end, or it would receive them.
    f.table.handle_input(T0, &item(5, 3));
    assert_eq!(f.seen(), []);
    f.start("counter_stream", b"\x08\x01", CallKind::ServerStream, 1);
    assert_eq!(f.seen(), [Seen::Started(1)]);
    assert!(f.sent().is_empty(), "held while the first stream drains");
    f.table.handle_input(T0, &item(6, 4));
    // STREAM_END_P2C: CONTROL 0x3, `[tid][seq][0xc0 | 0x3 << 2][payload_len 0]`.
    f.table.handle_input(T0, &[0x07, 0x00, 0xcc, 0x00]);
    assert_eq!(f.seen(), [], "the first stream's end is nobody's");
    assert_eq!(f.sent().len(), 1, "the second stream's request goes out");
}

#[test]
fn a_deadline_bounds_a_stream_whose_items_keep_coming() {
    let mut f = Fixture::ready(|_| {});
    let deadline = T0 + Duration::from_millis(300);
    let sink = f.sink(0, 10);
    f.table
        .start(
            T0,
            "counter_stream",
            Request::Data(b"\x08\x05".to_vec()),
            CallKind::ServerStream,
            Some(deadline),
            sink,
        )
        .map_err(|(e, _)| e)
        .unwrap();
    f.sent();
    // Each item restarts the stream's idle timer, never beyond the caller's deadline.
    for n in 0..2 {
        let at = T0 + Duration::from_millis(100 * (u64::from(n) + 1));
        f.table.handle_input(at, &item(2 + n, n));
        assert_eq!(f.table.poll_timeout(), Some(deadline));
    }
    f.table.handle_timeout(deadline);
    assert_eq!(
        f.seen(),
        [
            Seen::Started(0),
            Seen::Item(0, vec![0x08, 0]),
            Seen::Item(0, vec![0x08, 1]),
            Seen::Failed(0, "TIMEOUT"),
        ]
    );
    assert!(f.table.is_idle());
}

#[test]
fn a_stream_nobody_reads_is_cancelled_quietly_and_an_ended_one_says_so() {
    let mut f = Fixture::ready(|_| {});
    f.start("counter_stream", b"\x08\x05", CallKind::ServerStream, 0);
    f.sent();
    f.table.handle_input(T0, &item(2, 0));
    *f.gone.borrow_mut() = true;
    f.table.handle_input(T0, &item(3, 1));
    assert_eq!(
        f.seen(),
        [Seen::Started(0), Seen::Item(0, vec![0x08, 0])],
        "no failure for a reader that left"
    );
    assert!(f.table.is_idle());
    *f.gone.borrow_mut() = false;
    // The next stream of the command waits until the peripheral ends the first: its items
    // carry only the command's name.
    f.start("counter_stream", b"\x08\x01", CallKind::ServerStream, 1);
    assert!(f.sent().is_empty(), "held while the first stream drains");
    for n in 2..5 {
        f.table.handle_input(T0, &item(2 + n, n));
    }
    // STREAM_END_P2C: CONTROL 0x3, `[tid][seq][0xc0 | 0x3 << 2][payload_len 0]`.
    f.table.handle_input(T0, &[0x07, 0x00, 0xcc, 0x00]);
    assert_eq!(
        f.seen(),
        [Seen::Started(1)],
        "the first stream's rest is nobody's"
    );
    assert_eq!(f.sent().len(), 1, "the second stream's request goes out");
    f.table.handle_input(T0, &item(9, 0));
    f.table.handle_input(T0, &[0x0a, 0x00, 0xcc, 0x00]);
    assert_eq!(f.seen(), [Seen::Item(1, vec![0x08, 0]), Seen::End(1)]);
    assert!(f.table.is_idle());
}

#[test]
fn an_upload_sends_items_and_finishes_then_gets_its_response() {
    let mut f = Fixture::ready(|_| {});
    f.start("counter_upload", b"", CallKind::ClientStream, 0);
    f.table
        .send_item(T0, Ticket(0), b"\x08\x00".to_vec(), f.reply(0));
    f.table
        .send_item(T0, Ticket(0), b"\x08\x01".to_vec(), f.reply(0));
    f.table.finish(T0, Ticket(0), f.reply(0));
    let sent = f.sent();
    assert_eq!(sent.len(), 3, "two items and STREAM_END_C2P: {sent:02x?}");
    f.table
        .handle_input(T0, &response(4, "counter_upload", b"\x08\x02"));
    assert_eq!(
        f.seen(),
        [
            Seen::Started(0),
            Seen::Done(0, Ok(())),
            Seen::Done(0, Ok(())),
            Seen::Done(0, Ok(())),
            Seen::Response(0, b"\x08\x02".to_vec()),
        ]
    );
    // An item on an upload that is over: the call is unknown.
    f.table
        .send_item(T0, Ticket(0), b"\x08\x03".to_vec(), f.reply(0));
    assert_eq!(f.seen(), [Seen::Done(0, Err("INVALID_ARGUMENT"))]);
}

#[test]
fn a_call_the_core_refuses_gives_its_sink_back_with_the_error() {
    let mut f = Fixture::ready(|c| c.max_calls_in_flight = 1);
    f.start("echo", b"", CallKind::Unary, 0);
    let e = f.refused("echo", 1);
    assert_eq!(e, CentralError::Call(CallError::TooManyCalls { limit: 1 }));
    let e = f.refused("", 2);
    assert_eq!(e.code(), "INVALID_ARGUMENT");
}

#[test]
fn losing_the_link_fails_every_call_and_later_operation_with_the_links_reason() {
    let mut f = Fixture::ready(|c| c.max_outbox_bytes = 256);
    f.start("echo", &[0x55u8; 150], CallKind::Unary, 0);
    f.start("echo", &[0x55u8; 150], CallKind::Unary, 1);
    f.table.handle_link_lost(
        T0,
        LinkFailure::new(LinkFailureKind::Closed, "the peer closed the connection"),
    );
    let mut seen = f.seen();
    seen.sort_by_key(order);
    assert_eq!(
        seen,
        [
            Seen::Started(0),
            Seen::Failed(0, "LINK_CLOSED"),
            Seen::Failed(1, "LINK_CLOSED"),
        ]
    );
    assert!(f.table.is_closed() && f.table.is_idle());
    assert_eq!(
        f.table.poll_event(),
        Some(TableEvent::Closed(CentralError::Link(LinkFailure::new(
            LinkFailureKind::Closed,
            "the peer closed the connection"
        ))))
    );
    let e = f.refused("echo", 2);
    assert_eq!(e.code(), "LINK_CLOSED");
    f.table.finish(T0, Ticket(0), f.reply(0));
    assert_eq!(f.seen(), [Seen::Done(0, Err("LINK_CLOSED"))]);
    assert_eq!(f.sent(), Vec::<Vec<u8>>::new(), "nothing more for the link");
}

/// Sorts what calls saw by call, start first.
fn order(s: &Seen) -> (u64, u8) {
    match s {
        Seen::Started(t) => (*t, 0),
        Seen::Failed(t, _) => (*t, 1),
        Seen::Response(t, _) | Seen::Item(t, _) | Seen::End(t) | Seen::Done(t, _) => (*t, 2),
    }
}

#[test]
fn closing_fails_every_call_with_closed() {
    let mut f = Fixture::ready(|_| {});
    f.start("echo", b"", CallKind::Unary, 0);
    f.table.close(T0);
    assert_eq!(f.seen(), [Seen::Started(0), Seen::Failed(0, "CLOSED")]);
    assert_eq!(
        f.table.poll_event(),
        Some(TableEvent::Closed(CentralError::Closed))
    );
    assert!(f.table.is_closed());
}

#[test]
fn setup_failure_is_an_event_with_the_reason() {
    let mut table = Table::new(
        CentralConfig::default(),
        RustCrypto,
        ChaCha20Rng::seed_from_u64(1),
        T0,
        Trust::Anyone,
    )
    .unwrap();
    let mut buf = [0u8; 244];
    while table.poll_transmit(T0, &mut buf).is_some() {}
    table.handle_input(T0, &TIMEOUT_REPLY);
    while table.poll_transmit(T0, &mut buf).is_some() {}
    // Encryption is required; the peripheral offers none.
    table.handle_input(T0, &CAPABILITIES_PLAIN);
    assert_eq!(
        table.poll_event(),
        Some(TableEvent::SetupFailed(CentralError::Setup(
            CloseReason::EncryptionUnavailable
        )))
    );
    assert_eq!(
        table.closed_error().map(CentralError::code),
        Some("ENCRYPTION_UNAVAILABLE")
    );
}

// ----- trust on first use, against a real peripheral in memory --------------------------------

type TestPeripheral = Peripheral<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;

fn peripheral(seed: u8) -> (TestPeripheral, [u8; 32]) {
    let identity = RustCrypto
        .load_identity(&IdentitySeed::from_bytes([seed; 32]))
        .unwrap();
    let key = RustCrypto.identity_public(&identity);
    let p = Peripheral::new(
        PeripheralConfig::default(),
        RustCrypto,
        Some(identity),
        ChaCha20Rng::seed_from_u64(u64::from(seed)),
    )
    .unwrap();
    (p, key)
}

/// Runs setup between `table` and `peripheral` until neither has anything to send.
fn pump<H: Shell>(table: &mut CallTable<RustCrypto, ChaCha20Rng, H, 4>, p: &mut TestPeripheral) {
    let mut buf = [0u8; 244];
    for _ in 0..32 {
        let mut moved = false;
        while let Some(n) = table.poll_transmit(T0, &mut buf) {
            p.handle_input(T0, &buf[..n]).unwrap();
            moved = true;
        }
        while let Some(ev) = p.poll_event() {
            assert!(!matches!(ev, PeripheralEvent::Request { .. }));
        }
        while let Some(n) = p.poll_transmit(T0, &mut buf) {
            table.handle_input(T0, &buf[..n]);
            moved = true;
        }
        if !moved {
            return;
        }
    }
    panic!("setup did not settle");
}

fn tofu_table<H: Shell>(store: H::Store) -> CallTable<RustCrypto, ChaCha20Rng, H, 4> {
    CallTable::new(
        CentralConfig::default(),
        RustCrypto,
        ChaCha20Rng::seed_from_u64(9),
        T0,
        Trust::FirstUse {
            store,
            device_id: "tcp://device:1".to_string(),
        },
    )
    .unwrap()
}

#[test]
fn trust_on_first_use_pins_then_matches_then_refuses_another_key() {
    let (mut p, key) = peripheral(7);
    let mut table = tofu_table::<Test>(BTreeMap::new());
    pump(&mut table, &mut p);
    assert_eq!(
        table.poll_event(),
        Some(TableEvent::IdentityAccepted {
            identity: key,
            outcome: TofuOutcome::FirstUse
        })
    );
    assert_eq!(
        table.poll_event(),
        Some(TableEvent::Connected { encrypted: true })
    );
    assert_eq!(table.pinned(), Some(TofuOutcome::FirstUse));

    // The same device again: matched.
    let mut store = BTreeMap::new();
    store.insert("tcp://device:1".to_string(), key);
    let (mut p, _) = peripheral(7);
    let mut table = tofu_table::<Test>(store.clone());
    pump(&mut table, &mut p);
    assert_eq!(table.pinned(), Some(TofuOutcome::Matched));
    assert!(table.is_connected());

    // Another key under the same id: refused, and the error says which keys and where.
    let (mut p, other) = peripheral(8);
    let mut table = tofu_table::<Test>(store);
    pump(&mut table, &mut p);
    let Some(TableEvent::SetupFailed(e)) = table.poll_event() else {
        panic!("setup should fail");
    };
    assert_eq!(
        e,
        CentralError::Identity(IdentityError::Changed {
            device: "tcp://device:1".to_string(),
            presented: other,
            pinned: key,
            store: "the known-keys store".to_string(),
        })
    );
    assert!(table.is_closed());
}

#[test]
fn a_store_that_fails_refuses_the_connection() {
    let (mut p, _) = peripheral(7);
    let mut table = tofu_table::<Broken>(BrokenStore);
    pump(&mut table, &mut p);
    assert_eq!(
        table.poll_event(),
        Some(TableEvent::SetupFailed(CentralError::Identity(
            IdentityError::Store("disk on fire".to_string())
        )))
    );
}
