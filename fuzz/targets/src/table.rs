//! Target `call_table`: the core's call table ([`CallTable`]) against a real [`Peripheral`],
//! driven by a program the fuzzer writes: calls of every kind started, upload items and
//! finishes, cancellations, abandoned callers reaped, time moving on, PDUs delivered, dropped,
//! corrupted or injected both ways, the link lost, the connection closed.
//!
//! The invariants, checked at every step (a panic names the broken one):
//! - every call has one outcome at most, and nothing reaches its sink after it;
//! - every upload item and finish is answered exactly once, and by the end of the program
//!   (after a final close) every call had its outcome and every operation its answer: nothing
//!   is lost, whatever the peer did;
//! - a PDU never exceeds the buffer [`CallTable::transmit_len`] asked for;
//! - a handled deadline does not come back due unchanged (no busy loop);
//! - tickets are never reused.
//!
//! Input: `[flags][seed]`, then ops until the input ends (see [`call_table`]'s body for the bytes
//! of each).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

use blerpc_proto::Instant;
use blerpc_proto::connection::{
    CallKind, CentralConfig, Peripheral, PeripheralConfig, PeripheralEvent, SetupPipelining,
};
use blerpc_proto::crypto::{CryptoProvider as _, IdentitySeed, RustCrypto};
use blerpc_proto::table::{
    CallSink, CallTable, CentralError, Delivery, LinkFailure, LinkFailureKind, OpReply, Request,
    Shell, Ticket, Trust,
};
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::SeedableRng;

use crate::input::Cursor;

/// What happened to each call and operation, shared by every sink and reply of one run.
#[derive(Default)]
struct Book {
    /// Calls that had their outcome.
    over: HashMap<u64, &'static str>,
    /// Calls that were started (their sink exists).
    started: Vec<u64>,
    /// Operations answered, by their number.
    answered: HashMap<u64, bool>,
    /// Operations made.
    ops: u64,
    /// Stream readers that left.
    gone: Vec<u64>,
}

type Shared = Rc<RefCell<Book>>;

struct Sink {
    tag: u64,
    book: Shared,
    items: usize,
    limit: usize,
}

impl Sink {
    fn outcome(&self, what: &'static str) {
        let mut book = self.book.borrow_mut();
        if let Some(first) = book.over.insert(self.tag, what) {
            panic!(
                "call {} had a second outcome ({what} after {first})",
                self.tag
            );
        }
    }
    fn live(&self) {
        if let Some(first) = self.book.borrow().over.get(&self.tag) {
            panic!("call {} got an item after its outcome ({first})", self.tag);
        }
    }
}

impl CallSink for Sink {
    fn started(&mut self, ticket: Ticket) {
        assert_eq!(ticket.0, self.tag, "a sink started under another ticket");
        self.live();
    }
    fn response(self, _: &[u8]) {
        self.outcome("response");
    }
    fn item(&mut self, _: &[u8]) -> Delivery {
        self.live();
        if self.book.borrow().gone.contains(&self.tag) {
            return Delivery::Gone;
        }
        if self.items == self.limit {
            return Delivery::Full { limit: self.limit };
        }
        self.items += 1;
        Delivery::Taken
    }
    fn end(self) {
        self.outcome("end");
    }
    fn fail(self, error: CentralError) {
        // Every error has a code and a text.
        assert!(!error.code().is_empty() && !error.to_string().is_empty());
        self.outcome(error.code());
    }
    fn is_abandoned(&self) -> bool {
        self.book.borrow().gone.contains(&self.tag)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // A sink dropped without an outcome must be one whose reader left (Delivery::Gone, or a
        // reaped call): nothing else may vanish silently.
        let mut book = self.book.borrow_mut();
        if !book.over.contains_key(&self.tag) {
            assert!(
                book.gone.contains(&self.tag) || std::thread::panicking(),
                "call {} was dropped without an outcome",
                self.tag
            );
            book.over.insert(self.tag, "gone");
        }
    }
}

struct Reply {
    op: u64,
    book: Shared,
}

impl OpReply for Reply {
    fn done(self, _: Result<(), CentralError>) {
        let mut book = self.book.borrow_mut();
        assert!(
            book.answered.insert(self.op, true).is_none(),
            "operation {} answered twice",
            self.op
        );
    }
}

struct Fuzz;
impl Shell for Fuzz {
    type Sink = Sink;
    type Reply = Reply;
    type Store = BTreeMap<String, [u8; 32]>;
}

type Table = CallTable<RustCrypto, ChaCha20Rng, Fuzz, 4>;
type Pc = Peripheral<RustCrypto, ChaCha20Rng, Vec<u8>, Vec<u8>, 4>;

const NAMES: [&str; 4] = ["echo", "counter_stream", "counter_upload", "x"];
const KINDS: [CallKind; 3] = [
    CallKind::Unary,
    CallKind::ServerStream,
    CallKind::ClientStream,
];

/// The `call_table` target (see the [module docs](self)).
pub fn call_table(data: &[u8]) {
    run(data);
}

/// Runs a program; the outcome of each call, for the seeds' own test.
fn run(data: &[u8]) -> HashMap<u64, &'static str> {
    let mut cur = Cursor::new(data);
    let flags = cur.u8();
    let seed = u64::from(cur.u8());
    let encrypted = flags & 1 != 0;
    let mut now = Instant::from_millis(1_000);
    let identity = RustCrypto
        .load_identity(&IdentitySeed::from_bytes([7; 32]))
        .expect("a fixed seed loads");
    let key = RustCrypto.identity_public(&identity);
    let mut peripheral = Pc::new(
        PeripheralConfig {
            require_encryption: encrypted,
            ..PeripheralConfig::default()
        },
        RustCrypto,
        encrypted.then_some(identity),
        ChaCha20Rng::seed_from_u64(seed),
    )
    .expect("a valid peripheral configuration");
    let trust = match flags >> 1 & 3 {
        0 => Trust::Anyone,
        1 => Trust::Key(key),
        2 => Trust::Key([9; 32]),
        _ => Trust::FirstUse {
            store: BTreeMap::new(),
            device_id: "fuzz".to_owned(),
        },
    };
    let config = CentralConfig {
        require_encryption: encrypted,
        max_outbox_bytes: if flags & 8 != 0 { 300 } else { 128 * 1024 },
        setup_pipelining: if flags & 16 != 0 {
            SetupPipelining::KeyExchange
        } else {
            SetupPipelining::Off
        },
        ..CentralConfig::default()
    };
    let mut table = Table::new(
        config,
        RustCrypto,
        ChaCha20Rng::seed_from_u64(seed + 1),
        now,
        trust,
    )
    .expect("a valid central configuration");
    let book: Shared = Rc::default();
    let mut next_ticket = 0u64;
    let mut to_peripheral: Vec<Vec<u8>> = Vec::new();
    let mut to_central: Vec<Vec<u8>> = Vec::new();
    let mut requests: Vec<(u8, String, Vec<u8>)> = Vec::new();

    let mut steps = 0;
    while !cur.is_empty() && steps < 2_000 {
        steps += 1;
        let op = cur.u8();
        match op % 12 {
            0 | 1 => {
                // Start a call: [kind][name][data len], data is the op's own bytes.
                let kind = KINDS[usize::from(cur.u8()) % 3];
                let name = NAMES[usize::from(cur.u8()) % 4];
                let len = usize::from(cur.u8());
                let data = if kind == CallKind::ClientStream {
                    Vec::new()
                } else {
                    vec![0x0a; len]
                };
                let deadline =
                    (op & 0x80 != 0).then(|| now + Duration::from_millis(u64::from(cur.u8()) * 10));
                let sink = Sink {
                    tag: next_ticket,
                    book: book.clone(),
                    items: 0,
                    limit: usize::from(op >> 4 & 7),
                };
                let request = if op & 0x40 != 0 {
                    frame(name, &data).map_or(Request::Data(data), Request::Framed)
                } else {
                    Request::Data(data)
                };
                match table.start(now, name, request, kind, deadline, sink) {
                    Ok(ticket) => {
                        assert_eq!(ticket.0, next_ticket, "tickets are never reused");
                        book.borrow_mut().started.push(ticket.0);
                        next_ticket += 1;
                    }
                    Err((_, mut sink)) => {
                        // Refused outright: the sink comes back unused and its ticket is not
                        // taken; it goes under a tag of its own (the next call gets this one).
                        sink.tag = u64::MAX - steps as u64;
                        book.borrow_mut().gone.push(sink.tag);
                    }
                }
            }
            2 => {
                let ticket = pick(&mut cur, next_ticket);
                let n = reply(&book);
                table.send_item(now, Ticket(ticket), vec![8; usize::from(cur.u8())], n);
            }
            3 => {
                let ticket = pick(&mut cur, next_ticket);
                let n = reply(&book);
                table.finish(now, Ticket(ticket), n);
            }
            4 => table.cancel(Ticket(pick(&mut cur, next_ticket))),
            5 => {
                let ticket = pick(&mut cur, next_ticket);
                book.borrow_mut().gone.push(ticket);
                table.reap();
            }
            6 => {
                now = now + Duration::from_millis(u64::from(cur.u8()) * 20);
                if let Some(due) = table.poll_timeout().filter(|t| *t <= now) {
                    table.handle_timeout(now);
                    assert!(
                        table.poll_timeout() != Some(due) || table.is_closed(),
                        "a handled deadline came back due unchanged"
                    );
                }
            }
            7 => transmit(&mut table, now, &mut to_peripheral, usize::from(cur.u8())),
            8 => {
                // Deliver (or corrupt, or drop) what each side sent.
                let mode = cur.u8();
                for mut pdu in to_peripheral.drain(..) {
                    if mode & 1 != 0 && !pdu.is_empty() {
                        let at = usize::from(mode >> 1) % pdu.len();
                        pdu[at] ^= 0x5a;
                    }
                    if mode & 0x80 == 0 {
                        let _ = peripheral.handle_input(now, &pdu);
                    }
                    serve(&mut peripheral, &mut requests);
                }
                while let Some(pdu) = out(&mut peripheral, now) {
                    to_central.push(pdu);
                }
                for pdu in to_central.drain(..) {
                    table.handle_input(now, &pdu);
                }
            }
            9 => {
                // The application answers what it holds: an echo, a few stream items, an ERROR.
                let how = cur.u8();
                for (tid, name, data) in requests.drain(..) {
                    let _ = match how % 3 {
                        0 => peripheral.respond(now, tid, &name, &data),
                        1 => peripheral
                            .send_stream_item(now, tid, &name, &data)
                            .and_then(|()| peripheral.end_stream(now, tid)),
                        _ => peripheral.respond_error(
                            now,
                            tid,
                            blerpc_proto::wire::error_code::ErrorCode::HandlerFailed,
                        ),
                    };
                }
            }
            10 => {
                // A raw PDU from the "peripheral".
                let len = usize::from(cur.u8() % 64);
                let pdu = cur.bytes(len).to_vec();
                table.handle_input(now, &pdu);
            }
            _ => {
                if op & 0x10 != 0 {
                    table.handle_link_lost(now, LinkFailure::new(LinkFailureKind::Closed, "cut"));
                } else {
                    table.close(now);
                }
            }
        }
        while table.poll_event().is_some() {}
    }

    // The end: close; every call had its outcome, every operation its answer.
    table.close(now);
    transmit(&mut table, now, &mut to_peripheral, 255);
    while table.poll_event().is_some() {}
    let book = book.borrow();
    for ticket in &book.started {
        assert!(
            book.over.contains_key(ticket),
            "call {ticket} has no outcome after close"
        );
    }
    for op in 0..book.ops {
        assert!(
            book.answered.contains_key(&op),
            "operation {op} was never answered"
        );
    }
    assert!(table.is_idle(), "a closed table still holds calls");
    book.over.clone()
}

/// A ticket from the input: one of those made so far, or one past them.
fn pick(cur: &mut Cursor<'_>, next: u64) -> u64 {
    u64::from(cur.u8()) % (next + 1)
}

fn reply(book: &Shared) -> Reply {
    let mut b = book.borrow_mut();
    let op = b.ops;
    b.ops += 1;
    Reply {
        op,
        book: book.clone(),
    }
}

/// `data` framed behind a REQUEST header for `name`, as `Request::Framed` takes it.
fn frame(name: &str, data: &[u8]) -> Option<Vec<u8>> {
    use blerpc_proto::wire::command::{Command, CommandType};
    let header_len = Command::header_len_large(name.len(), data.len());
    let mut command = vec![0; header_len];
    Command::emit_header_large(CommandType::Request, name, data.len(), &mut command).ok()?;
    command.extend_from_slice(data);
    Some(command)
}

/// Everything the table sends (at most `limit` PDUs), each within the buffer it asked for.
fn transmit(table: &mut Table, now: Instant, to: &mut Vec<Vec<u8>>, limit: usize) {
    let mut buf = Vec::new();
    for _ in 0..limit.max(1) {
        let len = table.transmit_len().max(4);
        buf.resize(len, 0);
        let Some(n) = table.poll_transmit(now, &mut buf) else {
            return;
        };
        assert!(n <= len, "a {n}-byte PDU in a {len}-byte buffer");
        to.push(buf[..n].to_vec());
    }
}

/// The peripheral's events: requests kept for the application.
fn serve(p: &mut Pc, requests: &mut Vec<(u8, String, Vec<u8>)>) {
    while let Some(event) = p.poll_event() {
        if let PeripheralEvent::Request {
            tid, name, data, ..
        } = event
            && requests.len() < 16
        {
            requests.push((tid, name.to_owned(), data.to_vec()));
        }
    }
}

fn out(p: &mut Pc, now: Instant) -> Option<Vec<u8>> {
    let mut buf = [0u8; 244];
    p.poll_transmit(now, &mut buf).map(|n| buf[..n].to_vec())
}

/// Programs for the `call_table` corpus: setup and one call of each kind, plaintext and
/// encrypted with trust on first use; calls waiting for a small outbox; a deadline; the link
/// lost mid-call.
pub fn seed_programs() -> Vec<(&'static str, Vec<u8>)> {
    // Send everything, deliver both ways: enough rounds for setup with the key exchange.
    let pump = |rounds: usize| [7u8, 255, 8, 0].repeat(rounds);
    let calls = {
        let mut p = pump(6);
        p.extend([0x00, 0, 0, 4]); // unary echo, 4 bytes
        p.extend(pump(1));
        p.extend([9, 0]); // echoed
        p.extend(pump(1));
        p.extend([0x30, 1, 1, 2]); // server stream, buffer 3
        p.extend(pump(1));
        p.extend([9, 1]); // one item and the end
        p.extend(pump(1));
        p.extend([0x30, 2, 2, 0, 2, 2, 3, 3, 2]); // upload, one item, finish
        p.extend(pump(2));
        p.extend([9, 0]);
        p.extend(pump(1));
        p
    };
    let program = |flags: u8, body: &[u8]| {
        let mut p = vec![flags, 1];
        p.extend_from_slice(body);
        p
    };
    let waiting = {
        let mut p = pump(6);
        for _ in 0..3 {
            p.extend([0x00, 0, 0, 200]); // three 200-byte echoes into a 300-byte outbox
        }
        for _ in 0..3 {
            // What went out is answered (the peripheral holds two requests at a time and
            // answers a third BUSY: 100 ms pass for the retry).
            p.extend([7, 255, 8, 0, 9, 0, 6, 5]);
            p.extend(pump(1));
        }
        p
    };
    let deadline = {
        let mut p = pump(6);
        p.extend([0x84, 0, 0, 4, 5, 7, 255, 6, 10]); // 50 ms deadline, then 200 ms pass
        p
    };
    let link_lost = {
        let mut p = pump(6);
        p.extend([0x00, 0, 0, 4, 0x30, 1, 1, 2, 7, 255, 23, 2, 0, 1, 3, 0]);
        p
    };
    vec![
        ("plaintext_calls", program(0, &calls)),
        ("encrypted_first_use", program(0b0111, &calls)),
        ("encrypted_wrong_key", program(0b0101, &calls)),
        ("pipelined_trusted", program(0b1_0011, &calls)),
        ("small_outbox_waiting", program(0b1000, &waiting)),
        ("deadline_while_waiting", program(0b1000, &deadline)),
        ("link_lost_mid_call", program(0, &link_lost)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds reach what they are named for: answered calls of every kind, a refused key, a
    /// deadline, the link lost.
    #[test]
    fn the_seeds_exercise_the_table() {
        let seeds: HashMap<_, _> = seed_programs().into_iter().collect();
        let outcomes = |name: &str| {
            let mut o: Vec<&str> = run(&seeds[name]).into_values().collect();
            o.sort_unstable();
            o
        };
        for name in [
            "plaintext_calls",
            "encrypted_first_use",
            "pipelined_trusted",
        ] {
            assert_eq!(outcomes(name), ["end", "response", "response"], "{name}");
        }
        // Refused at setup: every start gives its sink back.
        let refused = outcomes("encrypted_wrong_key");
        assert!(
            refused.len() == 3 && refused.iter().all(|o| *o == "gone"),
            "{refused:?}"
        );
        assert_eq!(
            outcomes("small_outbox_waiting"),
            ["response", "response", "response"]
        );
        assert_eq!(outcomes("deadline_while_waiting"), ["TIMEOUT"]);
        assert_eq!(
            outcomes("link_lost_mid_call"),
            ["LINK_CLOSED", "LINK_CLOSED"]
        );
    }
}
