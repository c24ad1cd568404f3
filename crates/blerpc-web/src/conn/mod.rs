//! One connection: the core's call table driven by the browser's event loop.
//!
//! The core's [`CallTable`] owns the protocol (a `Central`) and every call's bookkeeping, the
//! same as the tokio client's and the bindings'; this shell delivers the browser's events to it,
//! with callbacks in place of `select!`:
//!
//! ```text
//!  link message / notification ─┐
//!  setTimeout fired ────────────┼─► table input ─► drive():  poll_events    setup, close → promises
//!  write finished / link room ──┤                           drive_transmit poll_transmit → link
//!  a call from JavaScript ──────┘                           drive_idle     buffers back when idle
//!                                                           drive_timer    one setTimeout
//! ```
//!
//! A call's results land in its *inbox* (`calls.rs`) until the page reads them.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use blerpc_proto::Instant;
use blerpc_proto::connection::CentralConfig;
use blerpc_proto::crypto::RustCrypto;
use blerpc_proto::handshake::TofuOutcome;
use blerpc_proto::table::{CallTable, Shell, TableEvent, Ticket, Trust};
use js_sys::Promise;
use rand_core::OsRng;

use crate::clock::{Clock, Timer, now_ms};
use crate::error::{Error, code};
use crate::link::Link;
use crate::pinning::Store;

mod calls;

pub use calls::{Reply, Sink};
use calls::{SharedInbox, Waiter, promise};

/// Calls in flight on one connection at most (the central's reassembly slots).
pub const MAX_CALLS_IN_FLIGHT: usize = 4;

/// The browser shell's types for the call table.
pub struct Browser;

impl Shell for Browser {
    type Sink = Sink;
    type Reply = Reply;
    type Store = Store;
}

/// The call table as the browser runs it: pure-Rust crypto, the browser's CSPRNG
/// (`crypto.getRandomValues`), heap buffers.
pub type WebTable = CallTable<RustCrypto, OsRng, Browser, MAX_CALLS_IN_FLIGHT>;

/// A connection shared by the JavaScript handle and (weakly) by the link's and timer's callbacks.
pub type Shared = Rc<RefCell<Conn>>;

/// A link with no room retries this much later (a WebSocket has no "drained" event).
const LINK_RETRY_MS: f64 = 5.0;
/// Buffers go back to the allocator after this long without a call in flight.
const IDLE_RELEASE_MS: f64 = 1000.0;

/// What the page asked for, beyond the core's configuration.
pub struct Settings {
    /// The core's configuration (its pinning is set from `trust`).
    pub central: CentralConfig,
    /// How the identity is decided.
    pub trust: Trust<Store>,
    /// The id pins are stored under (shown in the connection info).
    pub device_id: String,
    /// Server-stream items held before the page reads them.
    pub stream_buffer: usize,
}

/// One connection's state (see the [module docs](self)).
pub struct Conn {
    table: WebTable,
    clock: Clock,
    link: Link,
    timer: Option<Timer>,
    /// Each call's inbox, until the page has read its outcome.
    inboxes: Vec<(Ticket, SharedInbox)>,
    /// The connect promise, until setup ends.
    setup: Option<Waiter>,
    device_id: String,
    /// Why the connection closed, once it has.
    closed: Option<Error>,
    /// Resolved when the connection closes.
    on_close: Vec<Waiter>,
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
        let table = WebTable::new(
            settings.central,
            RustCrypto,
            OsRng,
            clock.now(),
            settings.trust,
        )
        .map_err(Error::config)?;
        let (ready, waiter) = promise();
        let conn = Rc::new(RefCell::new(Conn {
            table,
            clock,
            link,
            timer: None,
            inboxes: Vec::new(),
            setup: Some(waiter),
            device_id: settings.device_id,
            closed: None,
            on_close: Vec::new(),
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

    /// The call table, for the connection info.
    pub fn table(&self) -> &WebTable {
        &self.table
    }
    /// The link.
    pub fn link(&self) -> &Link {
        &self.link
    }
    /// What the known-keys store said of the identity (trust on first use only).
    pub fn pinned(&self) -> Option<TofuOutcome> {
        self.table.pinned()
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
    pub fn input(&mut self, weak: &Weak<RefCell<Conn>>, pdu: &js_sys::Uint8Array) {
        if self.closed.is_some() {
            return;
        }
        let len = pdu.length() as usize;
        let max = self
            .link
            .max_input(self.table.central().max_container_len());
        if len > max {
            let e = Error::new(
                code::FRAMING,
                format!(
                    "the peer sent a {len}-byte message, longer than a container can be ({max})"
                ),
            );
            self.link_lost(weak, e);
            return;
        }
        self.rx_buf.resize(len, 0);
        pdu.copy_to(&mut self.rx_buf);
        let now = self.clock.now();
        self.table.handle_input(now, &self.rx_buf);
        self.drive(weak);
    }

    /// The link is gone (or broke its framing): every call fails with `error`.
    pub fn link_lost(&mut self, weak: &Weak<RefCell<Conn>>, error: Error) {
        if self.closed.is_some() {
            return;
        }
        self.link.close();
        let now = self.clock.now();
        self.table.handle_link_lost(now, error.to_link_failure());
        self.drive(weak);
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
        self.table.handle_timeout(now);
        self.link_full = false;
        self.drive(weak);
    }

    // ----- the driver's steps ----------------------------------------------------------------

    /// Connection events, transmit, idle, timer: after every input and operation (a read too:
    /// the room it made is granted to the peripheral, the streams extension).
    pub(crate) fn drive(&mut self, weak: &Weak<RefCell<Conn>>) {
        if self.closed.is_some() {
            return;
        }
        self.poll_events();
        if let Err(e) = self.drive_transmit(weak) {
            let now = self.clock.now();
            self.table.handle_link_lost(now, e.to_link_failure());
        }
        if self.table.is_closed() {
            // Closed by the core (setup failed, identity refused), by the page, or with the link.
            self.poll_events();
            let why = self.table.closed_error().cloned().map_or_else(
                || Error::new(code::CLOSED, "the connection is closed"),
                Error::from,
            );
            self.finish_closed(why);
            return;
        }
        self.drive_idle();
        self.drive_timer();
    }

    /// The table's connection events: the connect promise settles.
    fn poll_events(&mut self) {
        while let Some(event) = self.table.poll_event() {
            match event {
                TableEvent::Connected { .. } => {
                    if let Some(w) = self.setup.take() {
                        w.resolve(&wasm_bindgen::JsValue::UNDEFINED);
                    }
                }
                TableEvent::SetupFailed(e) => {
                    if let Some(w) = self.setup.take() {
                        w.reject(&Error::from(e));
                    }
                }
                _ => {}
            }
        }
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
            let len = self.table.transmit_len().max(4);
            self.tx_buf.resize(len, 0);
            let Some(n) = self.table.poll_transmit(now, &mut self.tx_buf) else {
                return Ok(());
            };
            let pdu = self.tx_buf.get(..n).unwrap_or(&[]);
            self.link.send(pdu, weak)?;
        }
    }

    /// Gives the core's buffers back after a second without calls.
    fn drive_idle(&mut self) {
        if !self.table.is_idle() {
            self.idle_since = None;
            return;
        }
        let now = now_ms();
        match self.idle_since {
            None => self.idle_since = Some(now),
            Some(t) if now - t >= IDLE_RELEASE_MS => {
                self.table.release_memory();
                self.tx_buf = Vec::new();
                self.rx_buf = Vec::new();
                self.idle_since = Some(f64::INFINITY);
            }
            Some(_) => {}
        }
    }

    /// Arms the one timer: the table's next deadline, the link retry, or the idle release.
    fn drive_timer(&mut self) {
        let mut deadline = self.table.poll_timeout();
        let mut earliest = |t: Instant| {
            deadline = Some(deadline.map_or(t, |d| d.min(t)));
        };
        if self.link_full {
            earliest(self.clock.at(now_ms() + LINK_RETRY_MS));
        }
        if let Some(t) = self.idle_since
            && t.is_finite()
        {
            earliest(self.clock.at(t + IDLE_RELEASE_MS));
        }
        let clock = self.clock;
        if let Some(timer) = self.timer.as_mut() {
            timer.set(&clock, deadline);
        }
    }

    /// The connection is over: the promises still waiting settle with `error`.
    fn finish_closed(&mut self, error: Error) {
        self.closed = Some(error.clone());
        self.link.close();
        if let Some(w) = self.setup.take() {
            w.reject(&error);
        }
        self.drop_finished_inboxes();
        for w in self.on_close.drain(..) {
            w.resolve(&error.to_js());
        }
        if let Some(timer) = self.timer.as_mut() {
            timer.cancel();
        }
        self.tx_buf = Vec::new();
        self.rx_buf = Vec::new();
    }
}

// ----- entry points of the callbacks (they hold the connection weakly) ---------------------------

fn on_timer(weak: &Weak<RefCell<Conn>>) {
    if let Some(conn) = weak.upgrade() {
        conn.borrow_mut().on_timer(weak);
    }
}

/// A PDU arrived on the link.
pub fn input(weak: &Weak<RefCell<Conn>>, pdu: &js_sys::Uint8Array) {
    if let Some(conn) = weak.upgrade() {
        conn.borrow_mut().input(weak, pdu);
    }
}

/// The link is gone.
pub fn link_lost(weak: &Weak<RefCell<Conn>>, error: Error) {
    if let Some(conn) = weak.upgrade() {
        conn.borrow_mut().link_lost(weak, error);
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
            Err(e) => c.link_lost(weak, e),
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
            c.link_lost(weak, e);
        }
    }
}
