//! The call table: the bookkeeping every central runtime does around a [`Central`], written
//! once.
//!
//! A [`Central`] runs the protocol: setup, the key exchange, splitting, deadlines and BUSY
//! retries. What a runtime adds to it is the same everywhere: calls in flight and where their
//! results go, the operations that wait for room in the outbox (in order), per-call deadlines,
//! cancellation, trust on first use against a known-keys store, a stream whose reader falls
//! behind, and the errors a caller sees. [`CallTable`] owns all of it, sans-IO like the core:
//! bytes and `now` in, bytes, deliveries and events out. The tokio client, the browser central
//! and the bindings are thin shells that deliver bytes, time and their callers' operations to it
//! (as `quinn` drives `quinn-proto`).
//!
//! ```text
//!  shell: link PDU ──► handle_input ─┐                 ┌─► CallSink: response / item / end / fail
//!         timer ─────► handle_timeout ├─► CallTable ───┼─► OpReply: an item or a finish went out
//!         caller ────► start / send_item / finish / cancel / reap / close
//!         link room ◄─ poll_transmit  ┘  (Central)     └─► poll_event: Connected, SetupFailed, Closed, …
//! ```
//!
//! Where a result goes is the shell's: a [`CallSink`] per call (a channel, a promise, a foreign
//! callback) and an [`OpReply`] per upload operation. The table calls them as soon as the core
//! has something for them; they must not block.
//!
//! | file | holds |
//! |---|---|
//! | this file | [`CallTable`], its inputs and outputs, [`Shell`], [`CallSink`], [`OpReply`], [`Trust`] |
//! | `ops.rs` | starting calls, upload items and finishes, cancellation, the queue waiting for outbox room, per-call deadlines |
//! | `deliver.rs` | the core's events turned into deliveries, and the identity decision |
//! | `error.rs` | [`CentralError`], [`IdentityError`], [`LinkFailure`]: the texts and codes every central reports |
//!
//! # Example
//!
//! A table over a plaintext peripheral, driven by hand with byte literals: setup, one call, its
//! response delivered to the call's sink.
//!
//! ```
//! use std::cell::RefCell;
//! use std::collections::BTreeMap;
//! use std::rc::Rc;
//!
//! use blerpc_proto::Instant;
//! use blerpc_proto::connection::{CallKind, CentralConfig};
//! use blerpc_proto::crypto::RustCrypto;
//! use blerpc_proto::table::{
//!     CallSink, CallTable, CentralError, Delivery, OpReply, Request, Shell, TableEvent, Ticket,
//!     Trust,
//! };
//! use rand_chacha::ChaCha20Rng;
//! use rand_chacha::rand_core::SeedableRng as _;
//!
//! /// Where a call's result goes: here, a shared cell the test reads.
//! struct Slot(Rc<RefCell<Option<Result<Vec<u8>, CentralError>>>>);
//! impl CallSink for Slot {
//!     fn response(self, data: &[u8]) { *self.0.borrow_mut() = Some(Ok(data.to_vec())); }
//!     fn item(&mut self, _: &[u8]) -> Delivery { Delivery::Gone }
//!     fn end(self) {}
//!     fn fail(self, e: CentralError) { *self.0.borrow_mut() = Some(Err(e)); }
//! }
//! struct Ignore;
//! impl OpReply for Ignore {
//!     fn done(self, _: Result<(), CentralError>) {}
//! }
//! struct Test;
//! impl Shell for Test {
//!     type Sink = Slot;
//!     type Reply = Ignore;
//!     type Store = BTreeMap<String, [u8; 32]>;
//! }
//!
//! let now = Instant::from_millis(0);
//! let config = CentralConfig { require_encryption: false, ..CentralConfig::default() };
//! let mut table = CallTable::<_, _, Test, 4>::new(
//!     config, RustCrypto, ChaCha20Rng::seed_from_u64(1), now, Trust::Anyone,
//! )?;
//! let mut pdu = [0u8; 244];
//! // TIMEOUT (tid 0) goes out; the peripheral answers 100 ms. Then CAPABILITIES (tid 1):
//! // 12,288-byte limits, no encryption.
//! assert_eq!(table.poll_transmit(now, &mut pdu), Some(4));
//! table.handle_input(now, &[0x00, 0x00, 0xc4, 0x02, 0x64, 0x00]);
//! assert_eq!(table.poll_transmit(now, &mut pdu), Some(10));
//! table.handle_input(now, &[0x01, 0x00, 0xd0, 0x06, 0x00, 0x30, 0x00, 0x30, 0, 0]);
//! assert_eq!(table.poll_event(), Some(TableEvent::Connected { encrypted: false }));
//!
//! // echo("hi"): one FIRST container, tid 2.
//! let result = Rc::new(RefCell::new(None));
//! let request = Request::Data(b"\x0a\x02hi".to_vec());
//! let sink = Slot(result.clone());
//! let _ticket: Ticket = table
//!     .start(now, "echo", request, CallKind::Unary, None, sink)
//!     .map_err(|(e, _)| e)?;
//! let n = table.poll_transmit(now, &mut pdu).unwrap();
//! assert_eq!(&pdu[..n], b"\x02\x00\x00\x0c\x00\x0c\x00\x04echo\x04\x00\x0a\x02hi");
//! // The peripheral's RESPONSE, same tid and name.
//! table.handle_input(now, b"\x02\x00\x00\x0c\x00\x0c\x80\x04echo\x04\x00\x0a\x02hi");
//! assert_eq!(*result.borrow(), Some(Ok(b"\x0a\x02hi".to_vec())));
//! assert!(table.is_idle());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod deliver;
mod error;
mod ops;

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use rand_core::CryptoRngCore;

pub use error::{CentralError, IdentityError, LinkFailure, LinkFailureKind, code};

use crate::Instant;
use crate::connection::{CallId, CallKind, Central, CentralConfig, ConfigError, Pinning, Warning};
use crate::crypto::CryptoProvider;
use crate::handshake::{KnownKeys, TofuOutcome};

/// The types a runtime delivers into (see the [module docs](self)).
pub trait Shell {
    /// Where one call's results go.
    type Sink: CallSink;
    /// Where the outcome of one upload item or finish goes.
    type Reply: OpReply;
    /// The known-keys store of trust on first use ([`Trust::FirstUse`]); its errors become
    /// [`IdentityError::Store`]'s text.
    type Store: KnownKeys<Error: fmt::Display>;
}

/// Where one call's results go: the runtime's channel, promise or callback. The table calls it
/// as soon as the core has something; it must not block.
pub trait CallSink {
    /// The core took the call (its request is queued for the link): the ticket is live. A call
    /// that had to wait for outbox room is started later than [`CallTable::start`] returned.
    fn started(&mut self, ticket: Ticket) {
        let _ = ticket;
    }
    /// The response of a unary call, or the final response of an upload. Nothing follows.
    fn response(self, data: &[u8]);
    /// One item of a peripheral→central stream.
    fn item(&mut self, data: &[u8]) -> Delivery;
    /// The peripheral→central stream ended. Nothing follows.
    fn end(self);
    /// The call failed (or never started). Nothing follows.
    fn fail(self, error: CentralError);
    /// `true` when nobody waits for the result any more (a dropped future): the next
    /// [`CallTable::reap`] cancels the call.
    fn is_abandoned(&self) -> bool {
        false
    }
    /// Stream items the reader has room for now (the streams extension grants the peripheral
    /// that many): `None`, the default, for a sink that holds whatever it is given, whose
    /// stream is credited as fast as items arrive.
    fn room(&self) -> Option<usize> {
        None
    }
}

/// What a [`CallSink`] made of a stream item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Delivered (or buffered for the reader).
    Taken,
    /// The reader's buffer of `limit` items is full: the table cancels the call and fails it
    /// with [`CentralError::StreamOverflow`].
    Full {
        /// The buffer's size in items.
        limit: usize,
    },
    /// Nobody reads the stream any more: the table cancels the call quietly.
    Gone,
}

/// Where the outcome of one upload item ([`CallTable::send_item`]) or finish
/// ([`CallTable::finish`]) goes.
pub trait OpReply {
    /// `Ok` once the item or the end of the stream is queued for the link.
    fn done(self, result: Result<(), CentralError>);
}

/// How the table decides to trust the peripheral's identity key.
pub enum Trust<K> {
    /// Trust on first use: the first key seen for `device_id` is pinned in `store`, a different
    /// one later is refused ([`IdentityError::Changed`]).
    FirstUse {
        /// The known-keys store.
        store: K,
        /// The id pins are stored under (a link's peer id, a BLE address, a URL).
        device_id: String,
    },
    /// Accept only this Ed25519 key.
    Key([u8; 32]),
    /// Accept any key: an explicit opt-out, open to a man in the middle.
    Anyone,
}

impl<K> Trust<K> {
    /// What the core decides by itself under this policy.
    pub fn pinning(&self) -> Pinning {
        match self {
            Trust::FirstUse { .. } => Pinning::Decide,
            Trust::Key(key) => Pinning::Expect(*key),
            Trust::Anyone => Pinning::Disabled,
        }
    }
}

impl<K> fmt::Debug for Trust<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trust::FirstUse { device_id, .. } => f
                .debug_struct("FirstUse")
                .field("device_id", device_id)
                .finish_non_exhaustive(),
            Trust::Key(key) => write!(f, "Key({})", error::Hex(key)),
            Trust::Anyone => f.write_str("Anyone"),
        }
    }
}

/// A call's request.
#[derive(Debug)]
pub enum Request {
    /// The protobuf data; the core frames it behind the command header (one copy).
    Data(Vec<u8>),
    /// The whole REQUEST command, framed as
    /// [`Command::emit_header_large`](crate::wire::command::Command::emit_header_large) writes
    /// it and followed by exactly its data: the core takes the buffer as it is
    /// ([`Central::start_call_framed`]). The name given with it is not used.
    Framed(Vec<u8>),
}

/// A call in the table: the handle its caller uses for every later operation. Tickets are never
/// reused on one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// What happened to the connection (calls report through their [`CallSink`]s).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableEvent {
    /// Setup finished; calls may start.
    Connected {
        /// `true` when calls are end-to-end encrypted.
        encrypted: bool,
    },
    /// Trust on first use accepted the peripheral's key: it was pinned now
    /// ([`TofuOutcome::FirstUse`]) or found pinned ([`TofuOutcome::Matched`]).
    IdentityAccepted {
        /// The peripheral's Ed25519 key.
        identity: [u8; 32],
        /// What the store said.
        outcome: TofuOutcome,
    },
    /// Setup failed; the connection is closed.
    SetupFailed(CentralError),
    /// The connection closed after setup (every call has failed).
    Closed(CentralError),
    /// Something was dropped or ignored (diagnostics only).
    Warning(Warning),
}

/// A call and where its results go.
struct Entry<S> {
    ticket: Ticket,
    kind: CallKind,
    /// The core's call, once it started.
    call: Option<CallId>,
    /// The caller's deadline for the whole call, if it gave one.
    deadline: Option<Instant>,
    sink: S,
}

/// An operation waiting for room in the core's outbox. Operations go to the core in the order
/// they were made.
enum Op<Q> {
    Start {
        ticket: Ticket,
        name: String,
        request: Request,
    },
    Item {
        ticket: Ticket,
        data: Vec<u8>,
        reply: Q,
    },
    Finish {
        ticket: Ticket,
        reply: Q,
    },
}

impl<Q> Op<Q> {
    fn ticket(&self) -> Ticket {
        match self {
            Op::Start { ticket, .. } | Op::Item { ticket, .. } | Op::Finish { ticket, .. } => {
                *ticket
            }
        }
    }
}

/// A [`Central`] and the calls made on it (see the [module docs](self)).
pub struct CallTable<P: CryptoProvider, R, H: Shell, const SLOTS: usize> {
    central: Central<P, R, Vec<u8>, Vec<u8>, SLOTS>,
    calls: Vec<Entry<H::Sink>>,
    waiting: VecDeque<Op<H::Reply>>,
    /// Outbox bytes the front waiting operation found missing (0: try it).
    waiting_needs: usize,
    /// A bidirectional stream's items (and finish) waiting for the peripheral's credit, in
    /// order: apart from `waiting`, so a slow reader on the peripheral holds up no other call.
    held: VecDeque<Op<H::Reply>>,
    next_ticket: u64,
    trust: Trust<H::Store>,
    /// Why trust on first use refused the key, until the core reports the close.
    identity_error: Option<IdentityError>,
    pinned: Option<TofuOutcome>,
    events: VecDeque<TableEvent>,
    connected: bool,
    /// Why the connection is closed, once it is: what later operations fail with.
    closed: Option<CentralError>,
}

impl<P, R, H, const SLOTS: usize> CallTable<P, R, H, SLOTS>
where
    P: CryptoProvider,
    R: CryptoRngCore,
    H: Shell,
{
    /// A table over a new [`Central`] for a link that has just connected: setup starts at once
    /// (poll [`CallTable::poll_transmit`]). `config.pinning` is set from `trust`.
    pub fn new(
        mut config: CentralConfig,
        provider: P,
        rng: R,
        now: Instant,
        trust: Trust<H::Store>,
    ) -> Result<Self, ConfigError> {
        config.pinning = trust.pinning();
        let central = Central::new(config, provider, rng, now)?;
        Ok(CallTable {
            central,
            calls: Vec::new(),
            waiting: VecDeque::new(),
            waiting_needs: 0,
            held: VecDeque::new(),
            next_ticket: 0,
            trust,
            identity_error: None,
            pinned: None,
            events: VecDeque::new(),
            connected: false,
            closed: None,
        })
    }

    // ----- accessors -------------------------------------------------------------------------

    /// The core, for what setup established (capabilities, identity, limits).
    pub fn central(&self) -> &Central<P, R, Vec<u8>, Vec<u8>, SLOTS> {
        &self.central
    }
    /// What trust on first use said of the peripheral's key (`None` under the other policies,
    /// or before the key exchange).
    pub fn pinned(&self) -> Option<TofuOutcome> {
        self.pinned
    }
    /// `true` once setup finished and until the connection closes.
    pub fn is_connected(&self) -> bool {
        self.connected && self.closed.is_none()
    }
    /// `true` once the connection closed (by either side, by setup, or with the link).
    pub fn is_closed(&self) -> bool {
        self.closed.is_some() || self.central.is_closed()
    }
    /// Why the connection closed, once it has.
    pub fn closed_error(&self) -> Option<&CentralError> {
        self.closed.as_ref()
    }
    /// `true` when no call is in the table and no operation waits: the connection is idle.
    pub fn is_idle(&self) -> bool {
        self.calls.is_empty() && self.waiting.is_empty()
    }
    /// `true` while operations wait for room in the outbox. A runtime with its own queue of
    /// operations (a command channel) can hold them back meanwhile, which bounds the table's
    /// queue by its own.
    pub fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }
    /// Calls in the table (started, or waiting to start).
    pub fn calls(&self) -> usize {
        self.calls.len()
    }

    // ----- inputs ----------------------------------------------------------------------------

    /// One PDU from the link; what it completes is delivered at once.
    pub fn handle_input(&mut self, now: Instant, pdu: &[u8]) {
        // The table drains every event after every input, so the core's queue has room.
        let _ = self.central.handle_input(now, pdu);
        self.drain(now);
    }

    /// The instant [`CallTable::poll_timeout`] returned has passed: the core's deadlines, and
    /// calls still waiting to start whose own deadline passed (they fail with
    /// [`CallError::Timeout`](crate::connection::CallError::Timeout)).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.central.poll_timeout().is_some_and(|t| t <= now) {
            self.central.handle_timeout(now);
            self.drain(now);
        }
        self.expire_waiting(now);
    }

    /// The link is gone: the connection closes and every call and waiting operation fails with
    /// `failure` (as [`CentralError::Link`]).
    pub fn handle_link_lost(&mut self, now: Instant, failure: LinkFailure) {
        if self.closed.is_some() {
            return;
        }
        self.closed = Some(CentralError::Link(failure));
        self.central.close(now);
        self.drain(now);
    }

    /// Closes the connection: every call and waiting operation fails with
    /// [`CentralError::Closed`].
    pub fn close(&mut self, now: Instant) {
        if self.is_closed() {
            return;
        }
        self.central.close(now);
        self.drain(now);
    }

    /// Gives back the core's buffers (the runtime saw the connection idle for a while).
    pub fn release_memory(&mut self) {
        self.central.release_memory();
        if self.calls.is_empty() {
            self.calls = Vec::new();
        }
        if self.waiting.is_empty() {
            self.waiting = VecDeque::new();
        }
        if self.held.is_empty() {
            self.held = VecDeque::new();
        }
    }

    // ----- outputs ---------------------------------------------------------------------------

    /// The output buffer the next [`CallTable::poll_transmit`] needs (see
    /// [`Central::transmit_len`]); the longest container when an operation waits for room, since
    /// it may go out next.
    pub fn transmit_len(&self) -> usize {
        if self.waiting.is_empty() {
            self.central.transmit_len()
        } else {
            self.central.max_container_len()
        }
    }

    /// The next PDU for the link into `out`. Operations waiting for outbox room are retried
    /// first, in order, since each PDU taken out makes room.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        self.grant_room(now);
        self.retry_waiting(now);
        self.central.poll_transmit(now, out)
    }

    /// When [`CallTable::handle_timeout`] should next be called: the core's next deadline or
    /// a waiting call's own.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let waiting = self
            .calls
            .iter()
            .filter(|e| e.call.is_none())
            .filter_map(|e| e.deadline)
            .min();
        match (self.central.poll_timeout(), waiting) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next connection event.
    pub fn poll_event(&mut self) -> Option<TableEvent> {
        self.events.pop_front()
    }

    // ----- internals -------------------------------------------------------------------------

    fn position(&self, ticket: Ticket) -> Option<usize> {
        self.calls.iter().position(|e| e.ticket == ticket)
    }

    /// What an operation the core refused fails with: why the connection closed, once it has.
    fn refused(&self, e: crate::connection::CallError) -> CentralError {
        match &self.closed {
            Some(why) => why.clone(),
            None if self.central.is_closed() => CentralError::Closed,
            None => CentralError::Call(e),
        }
    }
}

impl<P: CryptoProvider, R, H: Shell, const SLOTS: usize> fmt::Debug for CallTable<P, R, H, SLOTS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallTable")
            .field("central", &self.central)
            .field("calls", &self.calls.len())
            .field("waiting", &self.waiting.len())
            .field("trust", &self.trust)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
