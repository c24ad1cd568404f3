//! One connection: the core's [`Central`] driven by the browser's event loop.
//!
//! The same steps as the host runtime's connection driver (`crates/blerpc/src/driver.rs`) and
//! client task (`client/task.rs`), with callbacks in place of `select!`:
//!
//! ```text
//!  link message / notification ─┐
//!  setTimeout fired ────────────┼─► core input ─► drive():  drain_events   events → promises
//!  write finished / link room ──┤                          retry_blocked  calls waiting for room
//!  a call from JavaScript ──────┘                          drive_transmit poll_transmit → link
//!                                                          drive_timer    one setTimeout
//! ```
//!
//! Every JavaScript-facing operation (start a call, wait for its response or next stream item,
//! send an upload item, cancel) is a *ticket*: the core's call once it has started, the
//! promise waiting on it, and what arrived before anyone asked. Nothing here knows the
//! protocol: setup, the key exchange, splitting, deadlines and BUSY retries are the core's.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use blerpc_proto::Instant;
use blerpc_proto::connection::{Central, CentralConfig, Pinning};
use blerpc_proto::crypto::RustCrypto;
use blerpc_proto::handshake::{TofuError, TofuOutcome, tofu_verify};
use js_sys::{Promise, Uint8Array};
use rand_core::OsRng;

use crate::clock::{Clock, Timer, now_ms};
use crate::error::{Code, Error};
use crate::link::Link;
use crate::pinning::{PinPolicy, to_hex};

mod calls;

use calls::{Blocked, Ticket, Waiter, promise};

/// Calls in flight on one connection at most (the central's reassembly slots).
pub const MAX_CALLS_IN_FLIGHT: usize = 4;

/// The central as the browser runs it: pure-Rust crypto, the browser's CSPRNG
/// (`crypto.getRandomValues`), heap buffers.
pub type WebCentral = Central<RustCrypto, OsRng, Vec<u8>, Vec<u8>, MAX_CALLS_IN_FLIGHT>;

/// A connection shared by the JavaScript handle and (weakly) by the link's and timer's callbacks.
pub type Shared = Rc<RefCell<Conn>>;

/// A link with no room retries this much later (a WebSocket has no "drained" event).
const LINK_RETRY_MS: f64 = 5.0;
/// Buffers go back to the allocator after this long without a call in flight.
const IDLE_RELEASE_MS: f64 = 1000.0;

/// What the page asked for, beyond the core's configuration.
pub struct Settings {
    /// The core's configuration (pinning already set from `pin`).
    pub central: CentralConfig,
    /// How the identity is decided.
    pub pin: PinPolicy,
    /// The id pins are stored under.
    pub device_id: String,
    /// Server-stream items held before the page reads them.
    pub stream_buffer: usize,
}

/// One connection's state (see the [module docs](self)).
pub struct Conn {
    central: WebCentral,
    clock: Clock,
    link: Link,
    timer: Option<Timer>,
    tickets: Vec<Ticket>,
    next_ticket: u32,
    blocked: VecDeque<Blocked>,
    /// The connect promise, until setup ends.
    setup: Option<Waiter>,
    pin: PinPolicy,
    device_id: String,
    pinned: Option<TofuOutcome>,
    identity_error: Option<Error>,
    /// Why the connection closed, once it has.
    closed: Option<Error>,
    /// Resolved when the connection closes.
    on_close: Vec<Waiter>,
    /// The core's own reason for closing, kept until the driver sees it closed.
    closed_reason_hint: Option<Error>,
    stream_buffer: usize,
    tx_buf: Vec<u8>,
    rx_buf: Vec<u8>,
    /// The link had no room while the core had more to send.
    link_full: bool,
    /// When the last call finished (idle since), and whether buffers were released since.
    idle_since: Option<f64>,
}

impl Conn {
    /// A connection over an open link: the core starts its setup at once. `setup` is settled
    /// when setup ends (connected, refused, or the link lost).
    pub fn start(settings: Settings, link: Link) -> Result<(Shared, Promise), Error> {
        let clock = Clock::new();
        let central = WebCentral::new(settings.central, RustCrypto, OsRng, clock.now())
            .map_err(Error::config)?;
        let (ready, waiter) = promise();
        let conn = Rc::new(RefCell::new(Conn {
            central,
            clock,
            link,
            timer: None,
            tickets: Vec::new(),
            next_ticket: 0,
            blocked: VecDeque::new(),
            setup: Some(waiter),
            pin: settings.pin,
            device_id: settings.device_id,
            pinned: None,
            identity_error: None,
            closed: None,
            on_close: Vec::new(),
            closed_reason_hint: None,
            stream_buffer: settings.stream_buffer.max(1),
            tx_buf: Vec::new(),
            rx_buf: Vec::new(),
            link_full: false,
            idle_since: None,
        }));
        let weak = Rc::downgrade(&conn);
        {
            let mut c = conn.borrow_mut();
            let timer_conn = weak.clone();
            c.timer = Some(Timer::new(move || on_timer(&timer_conn)));
            c.link.attach(&weak);
            c.drive(&weak);
        }
        Ok((conn, ready))
    }

    // ----- what the page reads -------------------------------------------------------------

    /// The core, for the connection info.
    pub fn central(&self) -> &WebCentral {
        &self.central
    }
    /// The link.
    pub fn link(&self) -> &Link {
        &self.link
    }
    /// What the known-keys store said of the identity (trust on first use only).
    pub fn pinned(&self) -> Option<TofuOutcome> {
        self.pinned
    }
    /// The id pins are stored under.
    pub fn device_id(&self) -> &str {
        &self.device_id
    }
    /// Why the connection closed, if it has.
    pub fn closed(&self) -> Option<&Error> {
        self.closed.as_ref()
    }

    // ----- inputs from the link and the timer ------------------------------------------------

    /// One PDU from the link (a WebSocket message, a notification), in a JavaScript array.
    pub fn input(&mut self, weak: &Weak<RefCell<Conn>>, pdu: &Uint8Array) {
        if self.closed.is_some() {
            return;
        }
        let len = pdu.length() as usize;
        let max = self.link.max_input(self.central.max_container_len());
        if len > max {
            let e = Error::new(
                Code::Framing,
                format!(
                    "the peer sent a {len}-byte message, longer than a container can be ({max})"
                ),
            );
            self.link_lost(e);
            return;
        }
        self.rx_buf.resize(len, 0);
        pdu.copy_to(&mut self.rx_buf);
        let now = self.clock.now();
        // Events are drained after every input, so the queue has room.
        let _ = self.central.handle_input(now, &self.rx_buf);
        self.drive(weak);
    }

    /// The link is gone (or broke its framing): every call fails with `error`.
    pub fn link_lost(&mut self, error: Error) {
        if self.closed.is_some() {
            return;
        }
        self.link.close();
        self.finish_closed(error);
    }

    /// The link has room again (a write finished).
    pub fn writable(&mut self, weak: &Weak<RefCell<Conn>>) {
        self.drive(weak);
    }

    fn on_timer(&mut self, weak: &Weak<RefCell<Conn>>) {
        if let Some(t) = self.timer.as_mut() {
            t.fired();
        }
        if self.closed.is_some() {
            return;
        }
        let now = self.clock.now();
        if self.central.poll_timeout().is_some_and(|t| t <= now) {
            self.central.handle_timeout(now);
        }
        self.expire_blocked(now);
        self.link_full = false;
        self.drive(weak);
    }

    // ----- the driver's steps ----------------------------------------------------------------

    /// Events, waiting operations, transmit, timer: after every input and operation.
    fn drive(&mut self, weak: &Weak<RefCell<Conn>>) {
        if self.closed.is_some() {
            return;
        }
        self.drain_events();
        self.retry_blocked();
        self.drain_events();
        if let Err(e) = self.drive_transmit(weak) {
            self.link_lost(e);
            return;
        }
        if self.central.is_closed() && self.closed.is_none() {
            // Closed by the core (setup failed, identity refused) or by the page.
            let reason = Error::new(Code::Closed, "the connection is closed");
            self.link.close();
            self.finish_closed(reason);
            return;
        }
        self.drive_idle();
        self.drive_timer();
    }

    /// Moves what the core wants to send into the link while the link has room.
    fn drive_transmit(&mut self, weak: &Weak<RefCell<Conn>>) -> Result<(), Error> {
        let now = self.clock.now();
        self.link_full = false;
        loop {
            if !self.link.ready() {
                // More may wait in the core: come back when the link has room (a BLE write
                // reports back itself; a WebSocket is polled).
                self.link_full = self.link.needs_polling();
                return Ok(());
            }
            let len = self.central.transmit_len().max(4);
            self.tx_buf.resize(len, 0);
            let Some(n) = self.central.poll_transmit(now, &mut self.tx_buf) else {
                return Ok(());
            };
            let pdu = self.tx_buf.get(..n).unwrap_or(&[]);
            self.link.send(pdu, weak)?;
        }
    }

    /// Gives the core's buffers back after a second without calls.
    fn drive_idle(&mut self) {
        let busy = !self.tickets.is_empty() || !self.blocked.is_empty();
        if busy {
            self.idle_since = None;
            return;
        }
        let now = now_ms();
        match self.idle_since {
            None => self.idle_since = Some(now),
            Some(t) if now - t >= IDLE_RELEASE_MS => {
                self.central.release_memory();
                self.tx_buf = Vec::new();
                self.rx_buf = Vec::new();
                self.idle_since = Some(f64::INFINITY);
            }
            Some(_) => {}
        }
    }

    /// Arms the one timer: the core's next deadline, a blocked call's deadline, the link
    /// retry, or the idle release.
    fn drive_timer(&mut self) {
        let mut deadline = self.central.poll_timeout();
        let mut earliest = |t: Option<Instant>| {
            if let Some(t) = t {
                deadline = Some(deadline.map_or(t, |d| d.min(t)));
            }
        };
        for b in &self.blocked {
            if let Blocked::Start { ticket, .. } = b {
                earliest(
                    self.tickets
                        .iter()
                        .find(|t| t.id == *ticket)
                        .and_then(|t| t.deadline),
                );
            }
        }
        if self.link_full {
            earliest(Some(self.clock.at(now_ms() + LINK_RETRY_MS)));
        }
        if let Some(t) = self.idle_since
            && t.is_finite()
        {
            earliest(Some(self.clock.at(t + IDLE_RELEASE_MS)));
        }
        let clock = self.clock;
        if let Some(timer) = self.timer.as_mut() {
            timer.set(&clock, deadline);
        }
    }

    /// The connection is over: every waiting promise rejects with `error`.
    fn finish_closed(&mut self, error: Error) {
        let error = self.closed_reason_hint.take().map_or(error, |hint| hint);
        self.closed = Some(error.clone());
        if !self.central.is_closed() {
            let now = self.clock.now();
            self.central.close(now);
            while self.central.poll_event().is_some() {}
        }
        if let Some(w) = self.setup.take() {
            w.reject(&error);
        }
        for b in self.blocked.drain(..) {
            match b {
                Blocked::Item { waiter, .. } | Blocked::Finish { waiter, .. } => {
                    waiter.reject(&error);
                }
                Blocked::Start { .. } => {}
            }
        }
        for t in core::mem::take(&mut self.tickets) {
            if let Some(w) = t.waiter {
                w.reject(&error);
            }
        }
        for w in self.on_close.drain(..) {
            w.resolve(&error.to_js());
        }
        if let Some(timer) = self.timer.as_mut() {
            timer.cancel();
        }
        self.tx_buf = Vec::new();
        self.rx_buf = Vec::new();
    }

    fn decide_identity(&mut self, key: [u8; 32]) {
        let now = self.clock.now();
        let PinPolicy::Tofu(store) = &mut self.pin else {
            // The core decides for Trust and None; nothing else reaches here.
            self.central.reject_identity(now);
            return;
        };
        match tofu_verify(store, &self.device_id, &key) {
            Ok(outcome) => {
                self.pinned = Some(outcome);
                self.central.accept_identity(now);
            }
            Err(TofuError::Mismatch { pinned, presented }) => {
                self.identity_error = Some(Error::new(
                    Code::IdentityChanged,
                    format!(
                        "{} presented key {} but {} is pinned for it in {}: the device was re-keyed, or this is not the device (a man in the middle). Forget the pin (forgetKey) only if you know why it changed",
                        self.device_id,
                        to_hex(&presented),
                        to_hex(&pinned),
                        store.describe()
                    ),
                ));
                self.central.reject_identity(now);
            }
            Err(TofuError::Store(e)) => {
                self.identity_error = Some(Error::new(
                    Code::KeyStore,
                    format!("cannot use the known-keys store: {e}"),
                ));
                self.central.reject_identity(now);
            }
            Err(_) => self.central.reject_identity(now),
        }
    }
}

/// The pinning the core applies itself for a policy.
pub fn core_pinning(pin: &PinPolicy) -> Pinning {
    match pin {
        PinPolicy::Tofu(_) => Pinning::Decide,
        PinPolicy::Trust(key) => Pinning::Expect(*key),
        PinPolicy::None => Pinning::Disabled,
    }
}

// ----- entry points of the callbacks (they hold the connection weakly) ---------------------------

fn on_timer(weak: &Weak<RefCell<Conn>>) {
    if let Some(conn) = weak.upgrade() {
        conn.borrow_mut().on_timer(weak);
    }
}

/// A PDU arrived on the link.
pub fn input(weak: &Weak<RefCell<Conn>>, pdu: &Uint8Array) {
    if let Some(conn) = weak.upgrade() {
        conn.borrow_mut().input(weak, pdu);
    }
}

/// The link is gone.
pub fn link_lost(weak: &Weak<RefCell<Conn>>, error: Error) {
    if let Some(conn) = weak.upgrade() {
        conn.borrow_mut().link_lost(error);
    }
}

/// The link can take more.
pub fn writable(weak: &Weak<RefCell<Conn>>) {
    if let Some(conn) = weak.upgrade() {
        conn.borrow_mut().writable(weak);
    }
}

/// A Web Bluetooth write settled.
pub fn write_done(weak: &Weak<RefCell<Conn>>, result: Result<(), String>) {
    if let Some(conn) = weak.upgrade() {
        let mut c = conn.borrow_mut();
        if c.closed.is_some() {
            return;
        }
        match c.link.write_done(result, weak) {
            Ok(()) => c.drive(weak),
            Err(e) => c.link_lost(e),
        }
    }
}

/// Time to write the failed container again.
pub fn retry_write(weak: &Weak<RefCell<Conn>>) {
    if let Some(conn) = weak.upgrade() {
        let mut c = conn.borrow_mut();
        if c.closed.is_some() {
            return;
        }
        if let Err(e) = c.link.retry(weak) {
            c.link_lost(e);
        }
    }
}
