//! The connection driver both roles' tasks run: the same loop around a sans-IO state machine
//! on every link.
//!
//! ```text
//!  loop {
//!      role: drain events, apply what is waiting
//!      drive_transmit   poll_transmit → LinkTx::queue_with, write at once while the link takes it
//!      drive_idle       buffers back after `idle_release` without traffic
//!      drive_timer      one timer: the protocol's next deadline, the link's or the idle check
//!      turn(work)       select { flush, recv (+ what is already buffered), timer, role's work }
//!  }
//! ```
//!
//! A role ([`Protocol`]) says how to move bytes through its state machine; its own work (the
//! client's commands, the server's handlers and streams) is the future it gives [`Driver::turn`].
//! The driver owns the link's halves, the clock, the timer and the transmit scratch buffer.

use std::future::Future;
use std::time::Duration;

use blerpc_proto::Instant;
use futures_util::FutureExt as _;

use crate::clock::{Clock, IdleRelease, Timer};
use crate::link::{LinkError, LinkRx, LinkTx};

/// Writes the driver makes at once per turn before it lets the other work have a turn.
const WRITE_ROUNDS: usize = 8;
/// PDUs already in the link's buffer handled in one turn after the one that woke the task.
const RECV_BATCH: usize = 64;
/// Bytes handled in one turn (a batch stops after this much, whole PDUs).
const RECV_BATCH_BYTES: usize = 16 * 1024;

/// What a role's state machine gives the driver.
pub(crate) trait Protocol {
    /// The output buffer the next PDU needs (`poll_transmit` of the core).
    fn transmit_len(&self) -> usize;
    /// The next PDU into `out`.
    fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize>;
    /// One PDU from the link; the role handles the events it caused.
    fn handle_input(&mut self, now: Instant, pdu: &[u8]);
    /// The protocol's next deadline.
    fn poll_timeout(&self) -> Option<Instant>;
    /// That deadline passed.
    fn handle_timeout(&mut self, now: Instant);
    /// Gives back the state machine's buffers (the connection is idle).
    fn release_memory(&mut self);
    /// The longest container the state machine accepts now, if it limits the link
    /// ([`LinkRx::set_max_container`]); the default `None` leaves the link's own limit.
    fn max_input_container_len(&self) -> Option<usize> {
        None
    }
}

/// What woke a [`Driver::turn`].
#[derive(Debug)]
pub(crate) enum Turn<'a, T> {
    /// A PDU arrived (hand it to the protocol, then [`Driver::recv_buffered`]).
    Input(&'a [u8], Instant),
    /// The timer fired: the protocol's deadline (or the idle check) is due.
    Timer(Instant),
    /// A write finished.
    Flushed,
    /// The peer closed the link.
    PeerClosed,
    /// The role's own work completed.
    Work(T),
}

/// One connection's link and timing (see the [module docs](self)).
pub(crate) struct Driver<Tx, Rx> {
    pub(crate) tx: Tx,
    pub(crate) rx: Rx,
    pub(crate) clock: Clock,
    timer: Timer,
    idle: IdleRelease,
    /// Scratch for links that build a PDU before queueing it (stream links write in place);
    /// given back while the connection is idle.
    buf: Vec<u8>,
    /// The clock read the last wake-up made, if nothing has waited since.
    fresh: Option<tokio::time::Instant>,
    /// The timer woke the last turn: the link checks its own deadline at the next
    /// [`Driver::drive_timer`].
    timer_fired: bool,
}

impl<Tx: LinkTx, Rx: LinkRx> Driver<Tx, Rx> {
    pub(crate) fn new(tx: Tx, rx: Rx, clock: Clock, idle_release: Duration) -> Self {
        Driver {
            tx,
            rx,
            clock,
            timer: Timer::new(),
            idle: IdleRelease::new(idle_release),
            buf: Vec::new(),
            fresh: None,
            timer_fired: false,
        }
    }

    /// The time for this turn of the loop: the clock read the last wake-up made (nothing has
    /// waited or run user code since), or a fresh one. One read per turn: a clock read is tens
    /// of nanoseconds, and a call took a dozen of them before.
    pub(crate) fn now(&self) -> (tokio::time::Instant, Instant) {
        let t = self.fresh.unwrap_or_else(tokio::time::Instant::now);
        (t, self.clock.at(t))
    }

    /// Moves what the protocol wants to send into the link's queue, each PDU written where the
    /// link queues it (no copy on stream links), and writes it at once rather than on the next
    /// turn: a stream link almost always takes the bytes straight away. While a write finishes
    /// at once, refills and writes again (at most [`WRITE_ROUNDS`] times); whatever is left
    /// stays queued for the cancel-safe flush of [`Driver::turn`].
    pub(crate) fn drive_transmit(
        &mut self,
        protocol: &mut impl Protocol,
        now: Instant,
    ) -> Result<(), LinkError> {
        let mut rounds = 0;
        loop {
            self.queue_all(protocol, now)?;
            if !self.tx.has_pending() || rounds == WRITE_ROUNDS {
                return Ok(());
            }
            rounds += 1;
            match self.tx.flush().now_or_never() {
                Some(Ok(())) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    }

    /// Queues PDUs while the link has room, without writing.
    pub(crate) fn queue_all(
        &mut self,
        protocol: &mut impl Protocol,
        now: Instant,
    ) -> Result<(), LinkError> {
        while !self.tx.is_full() {
            // Room for what is queued: a long container only when a long message waits.
            let len = protocol.transmit_len().max(4);
            let queued = self
                .tx
                .queue_with(len, &mut self.buf, |out| protocol.poll_transmit(now, out))?;
            if queued.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// Gives buffers back once the connection has been idle (`idle`: the role has nothing in
    /// progress) for the idle-release time.
    pub(crate) fn drive_idle(
        &mut self,
        protocol: &mut impl Protocol,
        idle: bool,
        t: tokio::time::Instant,
    ) {
        if self.idle.update(idle && !self.tx.has_pending(), t) {
            protocol.release_memory();
            self.rx.release_memory();
            self.tx.release_memory();
        }
        if self.idle.released() {
            self.buf = Vec::new();
        }
    }

    /// Arms the one timer for the protocol's next deadline, the link's own (a keepalive ping)
    /// or the idle check, whichever is first.
    /// When the timer woke the last turn, the link first handles its own deadline (a keepalive
    /// ping queued for the next flush, or the error of a peer that never answered one).
    pub(crate) fn drive_timer(&mut self, protocol: &impl Protocol) -> Result<(), LinkError> {
        if std::mem::take(&mut self.timer_fired) {
            let (t, _) = self.now();
            self.rx.handle_timeout(t)?;
        }
        let deadline = protocol.poll_timeout().map(|t| self.clock.to_tokio(t));
        let link = self.rx.poll_timeout();
        self.timer.set(
            [deadline, self.idle.deadline(), link]
                .into_iter()
                .flatten()
                .min(),
        );
        Ok(())
    }

    /// Waits for the next thing to do: a write finishing, a PDU arriving, the timer, or the
    /// future `work` makes (whose borrows end when this returns, so the role may then touch
    /// what it borrowed). `work` is called inside the wait, so its future lives in the wait's
    /// own state and nowhere else (an idle connection keeps this state for hours). `recv` and
    /// `flush` are cancel-safe, so no PDU is lost when another branch wins.
    pub(crate) async fn turn<T, W: Future<Output = T>>(
        &mut self,
        work: impl FnOnce() -> W,
    ) -> Result<Turn<'_, T>, LinkError> {
        let has_pending = self.tx.has_pending();
        let armed = self.timer.is_armed();
        let clock = self.clock;
        let fresh = &mut self.fresh;
        let timer_fired = &mut self.timer_fired;
        // The next clock read is the wake-up's.
        *fresh = None;
        tokio::select! {
            flushed = self.tx.flush(), if has_pending => flushed.map(|()| Turn::Flushed),
            pdu = self.rx.recv() => {
                let t = tokio::time::Instant::now();
                *fresh = Some(t);
                Ok(match pdu? {
                    Some(pdu) => Turn::Input(pdu, clock.at(t)),
                    None => Turn::PeerClosed,
                })
            }
            () = self.timer.fired(), if armed => {
                let t = tokio::time::Instant::now();
                *fresh = Some(t);
                *timer_fired = true;
                Ok(Turn::Timer(clock.at(t)))
            }
            out = work() => {
                *fresh = Some(tokio::time::Instant::now());
                Ok(Turn::Work(out))
            }
        }
    }

    /// After a [`Turn::Input`] of `first_len` bytes: hands the PDUs already in the link's
    /// buffer (the rest of a long message, more requests) to the protocol now rather than one
    /// turn of the loop each, up to [`RECV_BATCH`] PDUs and [`RECV_BATCH_BYTES`] bytes.
    /// `Ok(false)` when the peer closed the link meanwhile.
    pub(crate) fn recv_buffered(
        &mut self,
        protocol: &mut impl Protocol,
        now: Instant,
        first_len: usize,
    ) -> Result<bool, LinkError> {
        let mut bytes = first_len;
        for _ in 0..RECV_BATCH {
            if bytes >= RECV_BATCH_BYTES {
                break;
            }
            match self.rx.recv().now_or_never() {
                Some(Ok(Some(pdu))) => {
                    bytes += pdu.len();
                    protocol.handle_input(now, pdu);
                    self.limit_input(protocol);
                }
                Some(Ok(None)) => return Ok(false),
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        Ok(true)
    }

    /// Tells the link the longest container the protocol accepts now.
    pub(crate) fn limit_input(&mut self, protocol: &impl Protocol) {
        if let Some(max) = protocol.max_input_container_len() {
            self.rx.set_max_container(max);
        }
    }

    /// The transmit scratch buffer's length (0 on stream links, which write in place).
    pub(crate) fn scratch_len(&self) -> usize {
        self.buf.len()
    }

    /// Flushes and closes the link (errors are the peer's business by now).
    pub(crate) async fn close(&mut self) {
        let _ = self.tx.close().await;
    }

    /// Flushes and closes the link, giving up after `limit` (a peer that does not read must
    /// not hold a connection that is being closed).
    pub(crate) async fn close_within(&mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.tx.close()).await;
    }
}
