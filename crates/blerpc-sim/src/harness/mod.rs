//! The two-peer harness: one sans-IO [`Central`](blerpc_proto::connection::Central) and one [`Peripheral`](blerpc_proto::connection::Peripheral) of blerpc-proto, joined
//! by a [`Wire`] on virtual time, with the demo application on the peripheral (the demo service
//! the firmware runs, behind fault injection: [`AppConfig`]) and the
//! invariants every test relies on checked at every step.
//!
//! ```text
//!  Pair ── central ── poll_transmit ─> interceptor ─> Wire ─> poll_arrival ─> handle_input ── peripheral
//!    |        ^  events logged (central_events)        (Latency, Scripted, BleWire)    events ─> app
//!    '── now: virtual time; drive_until / drive_idle jump from wake-up to wake-up
//! ```
//!
//! Everything is seeded; the seed is printed when a test panics, so a failure can be replayed
//! with `BLERPC_SEED=<seed>`. The invariants (a panic names the broken one):
//!
//! - every PDU fits the link: at most `att_mtu − 3` bytes, or a long container once that
//!   extension is in force;
//! - `handle_input` never reports a full event queue while the harness drains events;
//! - a deadline handled by `handle_timeout` never comes back due unchanged;
//! - a call has one outcome at most, no event follows it, none follows `Closed`, and the
//!   connection is set up once;
//! - with [`Pair::check_echo`], every unary response equals its own request (the echo service
//!   must never answer one call with another's data).
//!
//! ```
//! use blerpc_sim::harness::{Pair, msg};
//!
//! let mut p = Pair::new(); // encrypted, identity pinned, 1 ms each way
//! p.connect();
//! assert!(p.central.is_encrypted());
//! let reply = p.call("echo", &msg::echo_req("hi")).unwrap();
//! assert_eq!(reply, msg::echo_req("hi"));
//! ```

mod app;
mod builder;
pub mod chat;
mod events;
pub mod msg;
mod wire;

use std::time::Duration;

use blerpc_proto::Instant;
use blerpc_proto::connection::{CallError, CallId, CallKind, PeripheralCloseReason, Warning};
use blerpc_proto::wire::container::MAX_LONG_CONTAINER_LEN;
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::RngCore;

pub use crate::Dir;
pub use app::{Answer, AppConfig, FLASH, Request, big_response};
pub use builder::{
    IDENTITY_SEED, PairBuilder, SeedGuard, TestCentral, TestPeripheral, identity_public, seed,
};
pub use events::CEv;
pub use wire::{BleWire, Latency, Scripted, Wire};

use app::Service;
use events::CallRec;

/// What the interceptor does with a PDU on its way to the wire.
#[derive(Debug)]
pub enum Action {
    /// Send it.
    Deliver,
    /// Lose it.
    Drop,
    /// Send this instead.
    Replace(Vec<u8>),
    /// Send it, then these extra PDUs.
    Append(Vec<Vec<u8>>),
    /// Send these PDUs instead, in this order (none: drop).
    Sequence(Vec<Vec<u8>>),
}

/// Sees every PDU a side sends (with the harness's RNG) and decides what reaches the wire.
pub type Interceptor = Box<dyn FnMut(Dir, &[u8], &mut ChaCha20Rng) -> Action>;

/// Drops every peripheral→central container whose flags byte is `flags` (e.g. `0xc4`, the
/// TIMEOUT reply).
pub fn drop_p2c(flags: u8) -> Interceptor {
    Box::new(move |dir, pdu, _| {
        if dir == Dir::P2C && pdu.get(2) == Some(&flags) {
            Action::Drop
        } else {
            Action::Deliver
        }
    })
}

/// Upper bound on the steps of one drive, so a livelock fails instead of hanging.
const MAX_STEPS: usize = 2_000_000;
/// Upper bound on the rounds of one flush and the events of one drain.
const MAX_ROUNDS: usize = 100_000;

/// A central and a peripheral on a wire (see the [module docs](self)).
pub struct Pair<W: Wire = Latency> {
    /// The seed everything was derived from.
    pub seed: u64,
    /// The interceptor's RNG.
    pub rng: ChaCha20Rng,
    /// Virtual time.
    pub now: Instant,
    /// The central.
    pub central: TestCentral,
    /// The peripheral.
    pub peripheral: TestPeripheral,
    /// What carries the PDUs.
    pub wire: W,
    /// Sees every PDU on its way to the wire.
    pub interceptor: Option<Interceptor>,
    /// The demo application's behaviour (changeable between steps).
    pub app: AppConfig,
    /// Check that every unary response equals its own request (on an echo-only workload).
    pub check_echo: bool,
    /// Keep every PDU sent in `sent_c2p` / `sent_p2c` (default `true`).
    pub log_pdus: bool,
    /// An event for a call not started through [`Pair::start_call`] or [`Pair::register`]
    /// is a failure (default `false`: such a call is taken as started on `central` directly).
    pub strict_calls: bool,
    /// Every central event, owned.
    pub central_events: Vec<CEv>,
    /// The peripheral's warnings.
    pub peripheral_warnings: Vec<Warning>,
    /// How many CANCELs the peripheral handed the application
    /// ([`PeripheralEvent::Cancelled`](blerpc_proto::connection::PeripheralEvent::Cancelled)).
    pub peripheral_cancels: usize,
    /// Why the peripheral closed the connection, once it has
    /// ([`PeripheralEvent::Closed`](blerpc_proto::connection::PeripheralEvent::Closed)).
    pub peripheral_closed: Option<PeripheralCloseReason>,
    /// Every request the peripheral handed out: (tid, name, data); STREAM_END_C2P as
    /// `(0, "", [])`.
    pub peripheral_requests: Vec<(u8, String, Vec<u8>)>,
    /// Every PDU the central sent (after the interceptor), with `log_pdus`.
    pub sent_c2p: Vec<Vec<u8>>,
    /// Every PDU the peripheral sent (after the interceptor), with `log_pdus`.
    pub sent_p2c: Vec<Vec<u8>>,
    /// Requests taken out of the peripheral ([`AppConfig::take_requests`]).
    pub requests_taken: u32,
    /// Unary responses the echo check compared.
    pub responses_checked: usize,
    svc: Service,
    chat: chat::Chat,
    calls: Vec<CallRec>,
    connected: bool,
    central_closed: bool,
    _guard: SeedGuard,
}

impl<W: Wire + std::fmt::Debug> std::fmt::Debug for Pair<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair")
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("central", &self.central)
            .field("peripheral", &self.peripheral)
            .field("wire", &self.wire)
            .finish_non_exhaustive()
    }
}

impl Pair {
    /// The default pair: encrypted, pinned, 1 ms each way.
    pub fn new() -> Pair {
        PairBuilder::default().build()
    }
}

impl Default for Pair {
    fn default() -> Self {
        Pair::new()
    }
}

impl<W: Wire> Pair<W> {
    // ----- driving ----------------------------------------------------------------------------

    /// Runs until `done` holds, or fails after `limit` of virtual time.
    pub fn drive_until(&mut self, limit: Duration, mut done: impl FnMut(&Pair<W>) -> bool) {
        let end = self.now + limit;
        for _ in 0..MAX_STEPS {
            self.flush();
            if done(self) {
                return;
            }
            let Some(next) = self.next_wake() else {
                panic!(
                    "idle before condition held (t={:?}); events: {:#?}",
                    self.now, self.central_events
                );
            };
            if next > end {
                panic!(
                    "condition not met within {limit:?}; events: {:#?}",
                    self.central_events
                );
            }
            self.now = self.now.max(next);
            self.deliver_due();
        }
        panic!("too many steps");
    }

    /// Runs until nothing is left to do or `limit` of virtual time passes.
    pub fn drive_idle(&mut self, limit: Duration) {
        let end = self.now + limit;
        for _ in 0..MAX_STEPS {
            self.flush();
            match self.next_wake() {
                Some(next) if next <= end => {
                    self.now = self.now.max(next);
                    self.deliver_due();
                }
                _ => return,
            }
        }
        panic!("too many steps");
    }

    /// Connects (setup and key exchange) and asserts success.
    pub fn connect(&mut self) {
        self.drive_until(Duration::from_secs(10), |p| {
            p.central_events
                .iter()
                .any(|e| matches!(e, CEv::Connected { .. } | CEv::Closed(_)))
        });
        assert!(
            self.central.is_ready(),
            "not connected: {:#?}",
            self.central_events
        );
    }

    /// Starts a call (registered for the invariants).
    pub fn start_call(
        &mut self,
        name: &str,
        data: &[u8],
        kind: CallKind,
    ) -> Result<CallId, CallError> {
        let id = self.central.start_call(self.now, name, data, kind)?;
        self.register(id, kind, name, data);
        Ok(id)
    }

    /// Registers a call started on `central` directly, for the invariants.
    pub fn register(&mut self, id: CallId, kind: CallKind, name: &str, data: &[u8]) {
        assert!(
            !self.calls.iter().any(|c| c.id == id),
            "call id {id:?} reused"
        );
        self.calls.push(CallRec {
            id,
            kind: Some(kind),
            request: data.to_vec(),
            name: name.to_string(),
            done: false,
        });
    }

    /// Cancels a call; once cancelled, no event may name it.
    pub fn cancel(&mut self, id: CallId) -> Result<(), CallError> {
        self.central.cancel(id)?;
        if let Some(r) = self.calls.iter_mut().find(|c| c.id == id) {
            assert!(!r.done, "cancelled a call that had ended");
            r.done = true;
        }
        self.flush();
        Ok(())
    }

    /// Starts a unary call and drives until it completes; returns the response data or the
    /// error.
    pub fn call(&mut self, name: &str, data: &[u8]) -> Result<Vec<u8>, CallError> {
        let id = self.start_call(name, data, CallKind::Unary)?;
        self.wait_call(id)
    }

    /// Drives until call `id` completes (at most a minute of virtual time).
    pub fn wait_call(&mut self, id: CallId) -> Result<Vec<u8>, CallError> {
        self.drive_until(Duration::from_secs(60), |p| p.call_outcome(id).is_some());
        match self.call_outcome(id) {
            Some(outcome) => outcome,
            None => unreachable!("drive_until returned with the outcome"),
        }
    }

    /// A unary call's response (Ok) or failure (Err), once known.
    pub fn call_outcome(&self, id: CallId) -> Option<Result<Vec<u8>, CallError>> {
        self.central_events.iter().find_map(|e| match e {
            CEv::Response { call, data } if *call == id => Some(Ok(data.clone())),
            CEv::Failed { call, error } if *call == id => Some(Err(*error)),
            _ => None,
        })
    }

    /// Items of a server stream and its end (Ok) or failure (Err), once known.
    pub fn stream_outcome(&self, id: CallId) -> Option<Result<Vec<Vec<u8>>, CallError>> {
        let items: Vec<Vec<u8>> = self
            .central_events
            .iter()
            .filter_map(|e| match e {
                CEv::StreamItem { call, data } if *call == id => Some(data.clone()),
                _ => None,
            })
            .collect();
        self.central_events.iter().find_map(|e| match e {
            CEv::StreamEnd { call } if *call == id => Some(Ok(items.clone())),
            CEv::Failed { call, error } if *call == id => Some(Err(*error)),
            _ => None,
        })
    }

    /// The central's warnings so far.
    pub fn warnings(&self) -> Vec<Warning> {
        self.central_events
            .iter()
            .filter_map(|e| match e {
                CEv::Warning(w) => Some(*w),
                _ => None,
            })
            .collect()
    }

    /// Answers the oldest held request ([`AppConfig::hold`]); `false` if none is held.
    pub fn serve(&mut self, answer: Answer) -> bool {
        let served = self
            .svc
            .serve_held(&self.app, &mut self.peripheral, self.now, answer);
        self.flush();
        served
    }

    /// Items of the open `chat` stream the peripheral received and did not consume yet
    /// ([`AppConfig::hold_items`]).
    pub fn chat_unconsumed(&self) -> usize {
        self.chat.held()
    }

    /// Items of `chat` streams the peripheral received, in all.
    pub fn chat_received(&self) -> u32 {
        self.chat.received()
    }

    /// Requests the application holds.
    pub fn held(&self) -> usize {
        self.svc.held.len()
    }

    /// Closes the central and checks every call got an outcome.
    pub fn close_central(&mut self) {
        self.central.close(self.now);
        self.flush();
        assert!(self.central.is_closed());
        assert!(
            self.central.poll_timeout().is_none(),
            "a closed central has deadlines"
        );
        assert!(
            self.calls.iter().all(|c| c.done),
            "close left a call without an outcome"
        );
    }

    /// Closes the peripheral; the requests the application held are gone with it.
    pub fn close_peripheral(&mut self) {
        self.peripheral.close(self.now);
        self.svc.held.clear();
        self.flush();
        assert!(
            self.peripheral.poll_timeout().is_none(),
            "a closed peripheral has deadlines"
        );
    }

    /// Advances virtual time by `d` and handles the deadlines due by then (the wire delivers
    /// nothing by itself here: [`Pair::drive_idle`] does).
    pub fn advance(&mut self, d: Duration) {
        self.now = self.now + d;
        self.timeouts();
    }

    /// Jumps to the earliest deadline of either side and handles it.
    pub fn fire_next_timeout(&mut self) -> bool {
        let next = [self.central.poll_timeout(), self.peripheral.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { return false };
        self.now = self.now.max(t);
        self.timeouts();
        true
    }

    /// Hands `pdu` straight to the peripheral (past the wire, as a stranger's bytes), lets both
    /// sides answer, and returns what the peripheral sent meanwhile (with `log_pdus`).
    pub fn poke(&mut self, pdu: &[u8]) -> Vec<Vec<u8>> {
        let before = self.sent_p2c.len();
        let full = self.peripheral.handle_input(self.now, pdu).is_err();
        assert!(!full, "EventQueueFull with drained events");
        self.flush();
        self.sent_p2c.get(before..).unwrap_or(&[]).to_vec()
    }

    /// Hands `pdu` to the side `dir` points at, now, as the link would deliver it, and lets
    /// both sides answer.
    pub fn deliver(&mut self, dir: Dir, pdu: &[u8]) {
        self.receive(dir, pdu);
        self.flush();
    }

    /// Hands `pdu` to its side and handles the events it caused, without transmitting: PDUs
    /// that arrive at the same instant are all received before either side answers, as a
    /// runtime reads what the link holds before it writes.
    fn receive(&mut self, dir: Dir, pdu: &[u8]) {
        let now = self.now;
        let full = match dir {
            Dir::C2P => self.peripheral.handle_input(now, pdu).is_err(),
            Dir::P2C => self.central.handle_input(now, pdu).is_err(),
        };
        assert!(!full, "EventQueueFull with drained events ({dir:?})");
        match dir {
            Dir::C2P => self.drain_peripheral(),
            Dir::P2C => self.drain_central(),
        }
    }

    /// Puts a new central on the same peripheral connection (after the old one closed): the
    /// invariants start over for it.
    pub fn replace_central(&mut self, central: TestCentral) {
        self.central = central;
        self.central_events.clear();
        self.calls.clear();
        self.connected = false;
        self.central_closed = false;
        self.flush();
    }

    /// Handles the deadlines due now on both sides; a handled deadline must not stay due.
    pub fn timeouts(&mut self) {
        let now = self.now;
        if self.central.poll_timeout().is_some_and(|t| t <= now) {
            self.central.handle_timeout(now);
            self.flush();
            let next = self.central.poll_timeout();
            assert!(
                next.is_none_or(|t| t > now),
                "central deadline {next:?} still due at {now:?}"
            );
        }
        if self.peripheral.poll_timeout().is_some_and(|t| t <= now) {
            self.peripheral.handle_timeout(now);
            self.flush();
            let next = self.peripheral.poll_timeout();
            assert!(
                next.is_none_or(|t| t > now),
                "peripheral deadline {next:?} still due at {now:?}"
            );
        }
    }

    /// Moves everything both sides want to send onto the wire and handles every event, until
    /// nothing moves.
    pub fn flush(&mut self) {
        for _ in 0..MAX_ROUNDS {
            self.drain_central();
            self.drain_peripheral();
            self.svc
                .pump_streams(&self.app, &mut self.peripheral, self.now);
            let pumped = self
                .chat
                .pump(self.now, &mut self.peripheral, self.app.hold_items);
            self.app.check(pumped, "echo a chat item");
            let mut progressed = false;
            let mut buf = vec![0u8; MAX_LONG_CONTAINER_LEN + 1024];
            let cmax = Self::max_pdu(
                self.central.config().att_mtu,
                self.central.long_containers(),
            );
            for _ in 0..MAX_ROUNDS {
                let Some(n) = self.central.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                assert!(
                    n <= cmax,
                    "central PDU of {n} bytes, at most {cmax} allowed"
                );
                self.send(Dir::C2P, buf[..n].to_vec());
                progressed = true;
            }
            let pmax = Self::max_pdu(
                self.peripheral.config().att_mtu,
                self.peripheral.long_containers(),
            );
            for _ in 0..MAX_ROUNDS {
                let Some(n) = self.peripheral.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                assert!(
                    n <= pmax,
                    "peripheral PDU of {n} bytes, at most {pmax} allowed: {:02x?}",
                    &buf[..n.min(8)]
                );
                self.send(Dir::P2C, buf[..n].to_vec());
                progressed = true;
            }
            if !progressed {
                return;
            }
        }
        panic!("the connection keeps transmitting without input");
    }

    fn max_pdu(att_mtu: usize, long: bool) -> usize {
        if long {
            MAX_LONG_CONTAINER_LEN
        } else {
            att_mtu - 3
        }
    }

    fn send(&mut self, dir: Dir, pdu: Vec<u8>) {
        let action = match self.interceptor.as_mut() {
            Some(f) => f(dir, &pdu, &mut self.rng),
            None => Action::Deliver,
        };
        let pdus = match action {
            Action::Deliver => vec![pdu],
            Action::Drop => vec![],
            Action::Replace(p) => vec![p],
            Action::Append(mut extra) => {
                extra.insert(0, pdu);
                extra
            }
            Action::Sequence(pdus) => pdus,
        };
        for p in pdus {
            if self.log_pdus {
                match dir {
                    Dir::C2P => self.sent_c2p.push(p.clone()),
                    Dir::P2C => self.sent_p2c.push(p.clone()),
                }
            }
            self.wire.send(self.now, dir, p);
        }
    }

    fn next_wake(&mut self) -> Option<Instant> {
        [
            self.wire.next_wake(self.now),
            self.central.poll_timeout(),
            self.peripheral.poll_timeout(),
            self.svc.next_due(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn deliver_due(&mut self) {
        let now = self.now;
        while let Some((dir, pdu)) = self.wire.poll_arrival(now) {
            self.receive(dir, &pdu);
        }
        self.timeouts();
        self.svc.run_due(&self.app, &mut self.peripheral, now);
    }

    // ----- events and invariants ------------------------------------------------------------
}

impl Pair<BleWire> {
    /// The BLE model's counters.
    pub fn link_stats(&self) -> &crate::ble::LinkStats {
        self.wire.stats()
    }
}

/// The ERROR control a peripheral sends under `tid` with `code`.
pub fn error_reply(tid: u8, code: blerpc_proto::wire::error_code::ErrorCode) -> Vec<u8> {
    vec![tid, 0x00, 0xd4, 0x01, code.to_byte()]
}

/// Random bytes from the harness's RNG.
pub fn random_bytes(rng: &mut ChaCha20Rng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::LinkParams;

    #[test]
    fn a_call_on_the_ble_model_takes_two_connection_events() {
        let mut p = PairBuilder::default()
            .build_ble(LinkParams::default())
            .unwrap();
        p.connect();
        let t0 = p.now;
        let reply = p.call("echo", &msg::echo_req("hi")).unwrap();
        assert_eq!(reply, msg::echo_req("hi"));
        let took = p.now.saturating_duration_since(t0);
        // The request goes in one event, the answer in the next: 15 to 30 ms at CI 15 ms.
        assert!(
            took > Duration::from_millis(15) && took <= Duration::from_millis(31),
            "{took:?}"
        );
        assert!(p.link_stats().events >= 2);
    }

    #[test]
    fn echo_responses_are_checked_against_their_requests() {
        let mut p = PairBuilder::plaintext().build();
        p.check_echo = true;
        p.connect();
        p.call("echo", &msg::echo_req("a")).unwrap();
        assert_eq!(p.responses_checked, 1);
    }

    #[test]
    #[should_panic(expected = "got another call's data")]
    fn the_echo_check_catches_swapped_responses() {
        let mut p = PairBuilder::plaintext().build();
        p.check_echo = true;
        p.connect();
        // Two echo calls in flight (tids 2 and 3); their responses swap transaction ids on
        // the way back (plaintext headers are not authenticated in bleRPC v1).
        p.interceptor = Some(Box::new(|dir, pdu, _| match (dir, pdu.first()) {
            (Dir::P2C, Some(2)) => Action::Replace([&[3], &pdu[1..]].concat()),
            (Dir::P2C, Some(3)) => Action::Replace([&[2], &pdu[1..]].concat()),
            _ => Action::Deliver,
        }));
        let a = p
            .start_call("echo", &msg::echo_req("a"), CallKind::Unary)
            .unwrap();
        let b = p
            .start_call("echo", &msg::echo_req("b"), CallKind::Unary)
            .unwrap();
        let _ = (p.wait_call(a), p.wait_call(b));
    }
}
