//! One server connection's task: the [`Peripheral`] on the shared [`Driver`], the handlers as
//! futures inside the task, at most one peripheral→central stream pulled while the outbox has
//! room, and uploads fed to their handler through a bounded channel.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use blerpc_proto::Instant as CoreInstant;
use blerpc_proto::connection::{PeripheralEvent, SendError, Warning};
use blerpc_proto::wire::diagnostics::DIAGNOSTICS_COMMAND;
use blerpc_proto::wire::error_code::ErrorCode;
use futures_util::future::{AbortHandle, Aborted};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt as _, StreamExt};
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;
use tokio::sync::{mpsc, watch};

use super::admission::Ticket;
use super::{
    BoxFuture, BoxStream, Bytes, CallKind, Dispatch, HostPeripheral, ServerError, Status,
    TAKE_REQUEST_MIN, copy_to_bytes,
};
use crate::metrics::Reason;

/// How long a connection closed for cause may take to send its last ERROR.
const SHUT_FLUSH: Duration = Duration::from_secs(1);
use crate::clock::Clock;
use crate::driver::{Driver, Protocol, Turn};
use crate::link::{LinkRx, LinkTx};
#[cfg(doc)]
use blerpc_proto::connection::Peripheral;

/// A completed handler.
pub(super) enum Done {
    Unary {
        tid: u8,
        name: String,
        result: Result<Vec<u8>, Status>,
    },
    /// A unary handler dropped because the central cancelled its request.
    Cancelled,
    Upload {
        name: String,
        end_tid: Option<u8>,
        result: Result<Vec<u8>, Status>,
    },
}

/// Output waiting for outbox room.
pub(super) enum Ready {
    Response {
        tid: u8,
        name: String,
        data: Vec<u8>,
    },
    Upload {
        name: String,
        data: Vec<u8>,
    },
    StreamItem {
        tid: u8,
        name: String,
        data: Vec<u8>,
    },
    StreamEnd {
        tid: u8,
    },
}

pub(super) struct ActiveStream {
    tid: u8,
    name: String,
    items: BoxStream<Result<Vec<u8>, Status>>,
}

/// The central→peripheral half of the open bidirectional stream (the streams extension).
pub(super) struct BidiIn {
    /// The stream's id: its open request's tid.
    stream: u8,
    /// The handler's input; `None` once the central ended its half.
    items: Option<mpsc::Sender<Bytes>>,
    /// What the handler took, shared with its input.
    room: Arc<Room>,
}

/// Items a bidirectional stream's handler took since the core was last told (it credits the
/// central for them), and the connection task's waker. A waker, not a `Notify`: the task's
/// wait on it is a `poll_fn` of one pointer, where a `Notify`'s future would make every
/// connection's future larger.
#[derive(Default)]
pub(super) struct Room {
    taken: AtomicU32,
    waker: AtomicWaker,
}

impl Room {
    /// The handler took `n` items.
    fn took(&self, n: u32) {
        self.taken.fetch_add(n, Ordering::Relaxed);
        self.waker.wake();
    }

    /// Ready once the handler took something since the last [`Room::take`].
    fn poll_taken(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.taken.load(Ordering::Relaxed) > 0 {
            return Poll::Ready(());
        }
        self.waker.register(cx.waker());
        if self.taken.load(Ordering::Relaxed) > 0 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// What was taken since the last call.
    fn take(&self) -> u32 {
        self.taken.swap(0, Ordering::Relaxed)
    }
}

pub(super) struct Upload {
    /// `None` once the handler has failed: later items are dropped and STREAM_END_C2P is
    /// answered with `failed`.
    items: Option<mpsc::Sender<Bytes>>,
    failed: Option<ErrorCode>,
    /// Shared with the handler's completion so the final reply can use the STREAM_END tid.
    end_tid: Arc<std::sync::Mutex<Option<u8>>>,
}

/// The handlers that did not finish at once. The set is made with its first such handler and
/// given back while the connection is idle: an empty `FuturesUnordered` holds two allocations
/// (its ready queue and a stub task), 144 B of every idle connection.
#[derive(Default)]
pub(super) struct Handlers(Option<FuturesUnordered<BoxFuture<Done>>>);

impl Handlers {
    fn push(&mut self, handler: BoxFuture<Done>) {
        self.0
            .get_or_insert_with(FuturesUnordered::new)
            .push(handler);
    }

    fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(FuturesUnordered::is_empty)
    }

    /// The next handler to finish (`None` when there is none).
    async fn next(&mut self) -> Option<Done> {
        match &mut self.0 {
            Some(set) => set.next().await,
            None => None,
        }
    }

    fn release_memory(&mut self) {
        if self.is_empty() {
            self.0 = None;
        }
    }
}

/// One connection's task state.
pub(super) struct Connection {
    /// Its place in the server's connection table (cap, eviction, shared budget).
    pub(super) ticket: Ticket,
    /// The peripheral closed the connection for cause: send what is queued, then close.
    pub(super) shut: bool,
    /// Shared with the task's own log line (one allocation, not a copy each).
    pub(super) peer: Arc<str>,
    /// Boxed: the connection moves into its task's future by value, and an async fn keeps its
    /// arguments twice; a 3 KB peripheral inline would cost an idle connection 3 KB more.
    pub(super) peripheral: Box<HostPeripheral>,
    pub(super) dispatch: Arc<dyn Dispatch>,
    pub(super) clock: Clock,
    pub(super) pending: Handlers,
    /// The unary handlers in `pending` by request tid, to drop one the central cancels.
    pub(super) cancels: Vec<(u8, AbortHandle)>,
    pub(super) stream: Option<ActiveStream>,
    /// The open bidirectional stream's input side (its output is `stream`).
    pub(super) bidi: Option<BidiIn>,
    /// A stream item the central has granted no credit for yet: sent once it does, while other
    /// answers go on.
    pub(super) uncredited: Option<Ready>,
    pub(super) uploads: HashMap<String, Upload>,
    pub(super) upload_buffer: usize,
    pub(super) ready: VecDeque<Ready>,
    pub(super) idle_release: Duration,
    /// The server is shutting down: new requests get BUSY, the task ends once idle.
    pub(super) draining: bool,
    /// The core's `now` for what this turn of the loop does: read once at the top of the loop
    /// and once when a `select!` branch wakes, not by every step (a clock read is tens of
    /// nanoseconds, and a call took a dozen of them).
    pub(super) now: CoreInstant,
    /// What the diagnostics answer says of the server.
    pub(super) facts: Arc<super::diagnostics::Facts>,
    /// The link's parameters now, if it is a BLE link.
    pub(super) link: Option<crate::link::LinkProbe>,
}

/// What the connection's own work gave a turn of its loop.
enum Work {
    /// A handler finished.
    Done(Done),
    /// The active stream produced an item, or ended (`None`).
    Item(Option<Result<Vec<u8>, Status>>),
    /// The bidirectional stream's handler took items: the central is credited for them.
    Room,
    /// The server is shutting down.
    Stop,
    /// The server evicted this connection (unproven, at the connection cap).
    Evict,
}

impl Protocol for Connection {
    fn transmit_len(&self) -> usize {
        self.peripheral.transmit_len()
    }
    fn poll_transmit(&mut self, now: CoreInstant, out: &mut [u8]) -> Option<usize> {
        self.peripheral.poll_transmit(now, out)
    }
    fn handle_input(&mut self, now: CoreInstant, pdu: &[u8]) {
        self.now = now;
        self.peripheral
            .set_reassembly_budget(self.ticket.reassembly_share());
        // Events are drained after every input, so the queue has room.
        let _ = self.peripheral.handle_input(now, pdu);
        self.ticket
            .set_claimed(self.peripheral.reassembly_claimed());
        if !self.ticket.is_proven() && self.peripheral.is_established() {
            self.ticket.prove();
        }
        self.drain_events();
    }
    fn poll_timeout(&self) -> Option<CoreInstant> {
        self.peripheral.poll_timeout()
    }
    fn handle_timeout(&mut self, now: CoreInstant) {
        self.now = now;
        self.peripheral.handle_timeout(now);
        self.ticket
            .set_claimed(self.peripheral.reassembly_claimed());
    }
    fn release_memory(&mut self) {
        self.peripheral.release_memory();
        self.pending.release_memory();
        if self.cancels.is_empty() {
            self.cancels = Vec::new();
        }
    }
    fn max_input_container_len(&self) -> Option<usize> {
        Some(self.peripheral.max_input_container_len())
    }
}

impl Connection {
    /// The connection's future. Not an async fn: an async fn keeps its moved arguments twice in
    /// its future (the argument and the local it is moved into), which held the connection,
    /// the link's halves and the stop receiver twice in every idle connection's task; an
    /// `async move` block uses its captures in place.
    pub(super) fn run<Tx: LinkTx, Rx: LinkRx>(
        mut self,
        tx: Tx,
        rx: Rx,
        mut stop: watch::Receiver<bool>,
    ) -> impl Future<Output = Result<(), ServerError>> + Send + 'static {
        // Built outside the async block, which then holds it once (moving the link's halves in
        // there would keep their slots too).
        let mut d = Driver::new(tx, rx, self.clock, self.idle_release);
        async move {
            let classic_len = self.peripheral.config().att_mtu.max(4);
            // The setup deadline runs from now; a stranger gets classic containers only.
            self.peripheral.open(d.now().1);
            d.limit_input(&self);
            // One future for the whole connection (not a new waiter on the channel every turn).
            let mut stopped = Box::pin(async move {
                while stop.changed().await.is_ok() {
                    if *stop.borrow() {
                        return;
                    }
                }
            });
            loop {
                let (t, now) = d.now();
                self.now = now;
                self.drain_events();
                self.report_taken();
                self.flush_ready();
                self.add_counters();
                d.drive_transmit(&mut self, now)?;
                let busy = !self.pending.is_empty()
                    || self.stream.is_some()
                    || !self.uploads.is_empty()
                    || !self.ready.is_empty()
                    || self.uncredited.is_some()
                    || self.peripheral.pending_requests() > 0;
                if self.draining && !busy && !d.tx.has_pending() && self.peripheral.is_idle() {
                    d.close().await;
                    return Ok(());
                }
                if self.shut && !d.tx.has_pending() && self.peripheral.is_idle() {
                    d.close_within(SHUT_FLUSH).await;
                    return Ok(());
                }
                d.drive_idle(&mut self, !busy, t);
                d.drive_timer(&self)?;
                // Pull the next stream item only while the outbox can take it.
                let container = classic_len
                    .max(d.scratch_len())
                    .max(self.peripheral.transmit_len());
                let want_item = self.ready.is_empty()
                    && self.uncredited.is_none()
                    && self.peripheral.outbox_free() > container * 2;
                let (pending, stream, draining) =
                    (&mut self.pending, &mut self.stream, self.draining);
                let room = self.bidi.as_ref().map(|b| b.room.clone());
                let stopped = &mut stopped;
                // Unproven: the admission table keeps this task's waker for an eviction.
                let (ticket, evictable) = (&self.ticket, self.ticket.can_be_evicted());
                let work = move || async move {
                    tokio::select! {
                        Some(done) = pending.next(), if !pending.is_empty() => Work::Done(done),
                        item = next_item(stream), if want_item && stream.is_some() => {
                            Work::Item(item)
                        }
                        () = std::future::poll_fn(|cx| match room.as_deref() {
                            Some(room) => room.poll_taken(cx),
                            None => Poll::Pending,
                        }), if room.is_some() => Work::Room,
                        () = stopped, if !draining => Work::Stop,
                        () = std::future::poll_fn(|cx| ticket.poll_evicted(cx)), if evictable => {
                            Work::Evict
                        }
                    }
                };
                match d.turn(work).await? {
                    Turn::Flushed => {}
                    Turn::Input(pdu, now) => {
                        let len = pdu.len();
                        self.handle_input(now, pdu);
                        d.limit_input(&self);
                        if !d.recv_buffered(&mut self, now, len)? {
                            return Ok(());
                        }
                    }
                    Turn::PeerClosed => return Ok(()),
                    Turn::Timer(now) => self.handle_timeout(now),
                    Turn::Work(work) => {
                        self.now = d.now().1;
                        match work {
                            Work::Done(done) => self.on_done(done),
                            Work::Item(item) => self.on_stream_item(item),
                            Work::Room => {}
                            Work::Stop => self.draining = true,
                            // The table already counted and logged it.
                            Work::Evict => return Ok(()),
                        }
                    }
                }
            }
        }
    }

    fn drain_events(&mut self) {
        while let Some(event) = self.peripheral.poll_event() {
            match event {
                PeripheralEvent::Request {
                    tid,
                    name,
                    data,
                    deadline,
                } => {
                    let name = name.to_string();
                    // On the runtime's clock: the same time left as on the core's.
                    let deadline = deadline.map(|d| {
                        tokio::time::Instant::now() + d.saturating_duration_since(self.now)
                    });
                    // Short requests are copied (the assembler keeps its buffer for the next
                    // one); long ones leave with their buffer, without a copy.
                    let copied = (data.len() < TAKE_REQUEST_MIN).then(|| copy_to_bytes(data));
                    let data = match copied {
                        Some(data) => data,
                        None => self.take_request(),
                    };
                    self.on_request(tid, name, data, deadline);
                }
                PeripheralEvent::StreamEndC2P { tid } => self.on_stream_end(tid),
                PeripheralEvent::StreamItem { stream, data, .. } => {
                    let data = copy_to_bytes(data);
                    self.on_bidi_item(stream, data);
                }
                PeripheralEvent::ItemsEnd { stream } => {
                    if let Some(b) = self.bidi.as_mut().filter(|b| b.stream == stream) {
                        // The handler's input ends.
                        b.items = None;
                    }
                }
                PeripheralEvent::Cancelled { tid } => self.on_cancelled(tid),
                PeripheralEvent::Secured => tracing::debug!(peer = %self.peer, "session secured"),
                PeripheralEvent::Warning(w @ Warning::ReassemblyBudget { .. }) => {
                    tracing::debug!(peer = %self.peer, "refused: {w:?}");
                    self.ticket.closed(Reason::ReassemblyBudget, &self.peer);
                }
                PeripheralEvent::Warning(w) => tracing::debug!(peer = %self.peer, "dropped: {w:?}"),
                PeripheralEvent::Closed(why) => {
                    self.ticket.closed(Reason::from(why), &self.peer);
                    self.shut = true;
                }
                _ => {}
            }
        }
    }

    /// STREAM_END_C2P carries no command name: it ends every open upload (one at a time in
    /// practice), or runs the service's sole upload command when the upload sent no item.
    fn on_stream_end(&mut self, tid: u8) {
        let now = self.now;
        if self.uploads.is_empty() {
            match self.dispatch.sole_upload() {
                Some(name) => {
                    self.start_upload(name.to_string());
                }
                None => {
                    let _ = self
                        .peripheral
                        .report_error(now, tid, ErrorCode::UnknownCommand);
                    return;
                }
            }
        }
        for (_, upload) in self.uploads.drain() {
            if let Some(code) = upload.failed {
                let _ = self.peripheral.report_error(now, tid, code);
            } else if let Ok(mut t) = upload.end_tid.lock() {
                *t = Some(tid);
            }
        }
    }

    /// Opens bidirectional stream `tid`: its handler's input is a channel of the core's window
    /// (the central never has more unconsumed), its output pulled as a server stream's is.
    fn open_bidi(&mut self, tid: u8, name: String, deadline: Option<tokio::time::Instant>) {
        let window = usize::from(self.peripheral.config().stream_window.max(1));
        let (items_tx, items_rx) = mpsc::channel::<Bytes>(window);
        let room = Arc::new(Room::default());
        let input: BoxStream<Bytes> = Box::pin(futures_util::stream::unfold(
            (items_rx, room.clone()),
            |(mut rx, room)| async move {
                let item = rx.recv().await?;
                room.took(1);
                Some((item, (rx, room)))
            },
        ));
        let items = self.dispatch.bidi_stream(&name, input);
        let items = match deadline {
            Some(at) => Box::pin(super::deadline::BoundedStream::new(at, items)),
            None => items,
        };
        self.stream = Some(ActiveStream { tid, name, items });
        self.bidi = Some(BidiIn {
            stream: tid,
            items: Some(items_tx),
            room,
        });
    }

    /// An item of the bidirectional stream: to its handler. The core let it through only
    /// within the window, so the channel has room; a handler that dropped its input drops it
    /// (and it counts as taken, so the central is not starved of credit).
    fn on_bidi_item(&mut self, stream: u8, data: Bytes) {
        let Some(b) = self.bidi.as_mut().filter(|b| b.stream == stream) else {
            return;
        };
        let delivered = b.items.as_ref().is_some_and(|tx| tx.try_send(data).is_ok());
        if !delivered {
            b.room.took(1);
        }
    }

    /// Tells the core what the bidirectional stream's handler took (it credits the central).
    fn report_taken(&mut self) {
        let Some(b) = self.bidi.as_ref() else {
            return;
        };
        let n = b.room.take();
        if n > 0 && self.peripheral.consumed(self.now, b.stream, n).is_err() {
            // A full outbox: told again on the next turn.
            b.room.took(n);
        }
    }

    /// The stream opened by `tid` is over: its input side goes.
    fn stream_over(&mut self, tid: u8) {
        if self.bidi.as_ref().is_some_and(|b| b.stream == tid) {
            self.bidi = None;
        }
        if matches!(&self.uncredited, Some(Ready::StreamItem { tid: t, .. }) if *t == tid) {
            self.uncredited = None;
        }
    }

    /// Starts the handler of upload `name`; its items go through the returned entry.
    fn start_upload(&mut self, name: String) -> &mut Upload {
        let (items_tx, items_rx) = mpsc::channel(self.upload_buffer);
        let end_tid = Arc::new(std::sync::Mutex::new(None));
        let items: BoxStream<Bytes> = Box::pin(futures_util::stream::unfold(
            items_rx,
            |mut rx| async move { rx.recv().await.map(|item| (item, rx)) },
        ));
        let fut = self.dispatch.client_stream(&name, items);
        let (n, t) = (name.clone(), end_tid.clone());
        self.pending.push(Box::pin(async move {
            let result = fut.await;
            let end_tid = t.lock().ok().and_then(|g| *g);
            Done::Upload {
                name: n,
                end_tid,
                result,
            }
        }));
        self.uploads.entry(name).or_insert(Upload {
            items: Some(items_tx),
            failed: None,
            end_tid,
        })
    }

    /// The request the last event carried, taken out of the assembler: its data as a slice of
    /// the reassembled buffer.
    fn take_request(&mut self) -> Bytes {
        match self.peripheral.take_request() {
            Some((buf, range)) if range.start <= range.end && range.end <= buf.len() => {
                Bytes::from(buf).slice(range)
            }
            _ => Bytes::new(),
        }
    }

    fn on_request(
        &mut self,
        tid: u8,
        name: String,
        data: Bytes,
        deadline: Option<tokio::time::Instant>,
    ) {
        let now = self.now;
        let refuse = |p: &mut HostPeripheral, code| {
            let _ = p.respond_error(now, tid, code);
        };
        if self.draining {
            refuse(&mut self.peripheral, ErrorCode::Busy);
            return;
        }
        if name == DIAGNOSTICS_COMMAND && self.peripheral.config().diagnostics {
            self.add_counters();
            let answer = self.diagnostics();
            if self.peripheral.respond(now, tid, &name, &answer).is_err() {
                refuse(&mut self.peripheral, ErrorCode::Busy);
            }
            return;
        }
        let kind = self.dispatch.kind(&name);
        let bidi = kind == Some(CallKind::BidiStream);
        if kind.is_some() && bidi != self.peripheral.is_bidi_open(tid) {
            // The request's shape is not the command's: a stream both ways opened on another
            // command, or a bidirectional command called without the streams extension.
            refuse(&mut self.peripheral, ErrorCode::UnknownCommand);
            return;
        }
        match kind {
            None => refuse(&mut self.peripheral, ErrorCode::UnknownCommand),
            Some(CallKind::Unary) => {
                let mut fut = self.dispatch.unary(&name, data);
                // Most handlers finish without waiting: answer those now, without a turn
                // through `pending` (and the loop), and without boxing a second future. With
                // a deadline the handler sees it (`server::deadline()`) from its first poll.
                let first = match deadline {
                    Some(at) => super::deadline::first_poll(at, &mut fut),
                    None => (&mut fut).now_or_never(),
                };
                match first {
                    Some(result) => self.on_done(Done::Unary { tid, name, result }),
                    None => {
                        // One that waits is stopped when its deadline passes.
                        let fut = match deadline {
                            Some(at) => Box::pin(super::deadline::bounded(at, fut)),
                            None => fut,
                        };
                        let (fut, abort) = futures_util::future::abortable(fut);
                        self.cancels.push((tid, abort));
                        self.pending.push(Box::pin(async move {
                            match fut.await {
                                Ok(result) => Done::Unary { tid, name, result },
                                Err(Aborted) => Done::Cancelled,
                            }
                        }));
                    }
                }
            }
            Some(CallKind::ServerStream) => {
                if self.stream.is_some() {
                    refuse(&mut self.peripheral, ErrorCode::Busy);
                } else {
                    let items = self.dispatch.server_stream(&name, data);
                    // With a deadline the producer sees it and is stopped there.
                    let items = match deadline {
                        Some(at) => Box::pin(super::deadline::BoundedStream::new(at, items)),
                        None => items,
                    };
                    self.stream = Some(ActiveStream { tid, name, items });
                }
            }
            Some(CallKind::BidiStream) => {
                if self.stream.is_some() {
                    refuse(&mut self.peripheral, ErrorCode::Busy);
                } else {
                    self.open_bidi(tid, name, deadline);
                }
            }
            Some(CallKind::ClientStream) => {
                let upload = if self.uploads.contains_key(&name) {
                    self.uploads.get_mut(&name)
                } else {
                    Some(self.start_upload(name.clone()))
                };
                let accepted = match upload.and_then(|u| u.items.as_ref()) {
                    Some(items) => items.try_send(data).is_ok(),
                    // The handler already failed: drop the item; STREAM_END_C2P gets the error.
                    None => true,
                };
                if accepted {
                    let _ = self.peripheral.ack(tid);
                } else {
                    refuse(&mut self.peripheral, ErrorCode::Busy);
                }
            }
        }
    }

    fn on_done(&mut self, done: Done) {
        let now = self.now;
        if let Done::Unary { tid, .. } = &done
            && let Some(i) = self.cancels.iter().position(|(t, _)| t == tid)
        {
            self.cancels.swap_remove(i);
        }
        match done {
            Done::Cancelled => {}
            Done::Unary {
                tid,
                name,
                result: Ok(data),
            } => self.ready.push_back(Ready::Response { tid, name, data }),
            Done::Unary {
                tid,
                name,
                result: Err(status),
            } => {
                // The central only gets the code: the reason is for the server's log.
                tracing::warn!(peer = %self.peer, "{name} failed: {status}");
                let _ = self.peripheral.respond_error(now, tid, status.code);
            }
            Done::Upload {
                name,
                result: Ok(data),
                ..
            } => {
                self.uploads.remove(&name);
                self.ready.push_back(Ready::Upload { name, data });
            }
            Done::Upload {
                name,
                end_tid,
                result: Err(status),
            } => {
                tracing::warn!(peer = %self.peer, "{name} (upload) failed: {status}");
                match end_tid {
                    Some(tid) => {
                        self.uploads.remove(&name);
                        let _ = self.peripheral.report_error(now, tid, status.code);
                    }
                    // Failed before the central ended the stream: answer its STREAM_END_C2P.
                    None => {
                        if let Some(u) = self.uploads.get_mut(&name) {
                            u.items = None;
                            u.failed = Some(status.code);
                        }
                    }
                }
            }
        }
        self.flush_ready();
    }

    /// The central cancelled request `tid` (the cancel extension): its unary handler or its
    /// stream's producer is dropped, and what waits to be sent for it goes.
    fn on_cancelled(&mut self, tid: u8) {
        if self.stream.as_ref().is_some_and(|s| s.tid == tid) {
            self.stream = None;
        }
        self.stream_over(tid);
        if let Some(i) = self.cancels.iter().position(|(t, _)| *t == tid) {
            self.cancels.swap_remove(i).1.abort();
        }
        self.ready.retain(|r| {
            !matches!(r,
                Ready::Response { tid: t, .. }
                | Ready::StreamItem { tid: t, .. }
                | Ready::StreamEnd { tid: t } if *t == tid)
        });
    }

    fn on_stream_item(&mut self, item: Option<Result<Vec<u8>, Status>>) {
        let Some(stream) = self.stream.as_ref() else {
            return;
        };
        let (tid, name) = (stream.tid, stream.name.clone());
        match item {
            Some(Ok(data)) => self.ready.push_back(Ready::StreamItem { tid, name, data }),
            Some(Err(status)) => {
                self.stream = None;
                self.stream_over(tid);
                let _ = self.peripheral.respond_error(self.now, tid, status.code);
            }
            None => {
                self.stream = None;
                self.bidi = None;
                self.ready.push_back(Ready::StreamEnd { tid });
            }
        }
        self.flush_ready();
    }

    /// Hands waiting output to the peripheral while its outbox has room.
    fn flush_ready(&mut self) {
        let now = self.now;
        if let Some(Ready::StreamItem { tid, name, data }) = self.uncredited.take() {
            match self.peripheral.send_stream_item(now, tid, &name, &data) {
                Err(SendError::NoCredit | SendError::OutboxFull { .. }) => {
                    self.uncredited = Some(Ready::StreamItem { tid, name, data });
                }
                Err(e) => tracing::debug!(peer = %self.peer, "could not send: {e}"),
                Ok(()) => {}
            }
        }
        while let Some(item) = self.ready.pop_front() {
            if self.uncredited.is_some() && matches!(item, Ready::StreamEnd { .. }) {
                // The end follows the stream's last item.
                self.ready.push_front(item);
                return;
            }
            let result = match &item {
                Ready::Response { tid, name, data } => {
                    self.peripheral.respond(now, *tid, name, data)
                }
                Ready::Upload { name, data } => self.peripheral.respond_upload(now, name, data),
                Ready::StreamItem { tid, name, data } => {
                    self.peripheral.send_stream_item(now, *tid, name, data)
                }
                Ready::StreamEnd { tid } => self.peripheral.end_stream(now, *tid),
            };
            match result {
                Err(SendError::OutboxFull { .. }) => {
                    self.ready.push_front(item);
                    return;
                }
                // Waits for the central's credit aside, so other answers go on.
                Err(SendError::NoCredit) => self.uncredited = Some(item),
                Err(SendError::StreamLimit) => {
                    if let Ready::StreamItem { tid, .. } = item {
                        self.stream = None;
                        self.bidi = None;
                        let _ = self
                            .peripheral
                            .respond_error(now, tid, ErrorCode::StreamLimit);
                        self.ready.retain(|r| !matches!(r, Ready::StreamItem { tid: t, .. } | Ready::StreamEnd { tid: t } if *t == tid));
                    }
                }
                // A cancelled request's answer (the handler ran on) is refused here too.
                Err(e) => tracing::debug!(peer = %self.peer, "could not send: {e}"),
                Ok(()) => {}
            }
        }
    }
}

async fn next_item(stream: &mut Option<ActiveStream>) -> Option<Result<Vec<u8>, Status>> {
    match stream {
        Some(s) => s.items.next().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::super::{Server, ServerConfig};
    use super::*;
    use crate::link::Link as _;

    /// A service without commands: enough to build a connection.
    struct Nothing;

    impl Dispatch for Nothing {
        fn kind(&self, _: &str) -> Option<CallKind> {
            None
        }
        fn unary(&self, _: &str, _: Bytes) -> BoxFuture<Result<Vec<u8>, Status>> {
            Box::pin(async { Err(Status::new(ErrorCode::UnknownCommand, "none")) })
        }
        fn server_stream(&self, _: &str, _: Bytes) -> BoxStream<Result<Vec<u8>, Status>> {
            Box::pin(futures_util::stream::empty())
        }
        fn client_stream(
            &self,
            _: &str,
            _: BoxStream<Bytes>,
        ) -> BoxFuture<Result<Vec<u8>, Status>> {
            Box::pin(async { Err(Status::new(ErrorCode::UnknownCommand, "none")) })
        }
    }

    /// A connection's future holds its state once: the connection, the link's halves and the
    /// stop receiver, then the loop's own locals and the wait. As an async fn, `run` kept its
    /// moved arguments twice (a WebSocket connection's future: 1,376 B, now 944).
    #[test]
    fn connection_future_holds_the_state_once() {
        let server = Server::new(
            Nothing,
            ServerConfig {
                identity: Some([3; 32]),
                ..Default::default()
            },
        )
        .unwrap();
        let (link, _peer) = crate::link::mem::pair(247);
        let (_stop_tx, stop) = watch::channel(false);
        let (tx, rx) = crate::link::mem::pair(247).0.split();
        let arguments = std::mem::size_of::<Connection>()
            + std::mem::size_of_val(&tx)
            + std::mem::size_of_val(&rx)
            + std::mem::size_of_val(&stop);
        // The driver's timer registers with the runtime's clock.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _runtime = rt.enter();
        let ticket = server.admission.admit(None, "mem", false).unwrap();
        let future = server.connection(link, "mem".into(), ticket, stop).unwrap();
        let size = std::mem::size_of_val(&future);
        println!("connection {arguments} B of arguments, future {size} B");
        // The driver's state and the wait's futures (the link's flush and receive, the timer,
        // the handlers' and the stream's) take 688 B over the arguments here; holding the
        // arguments twice would add all of them again.
        assert!(
            size < arguments + 700,
            "{size} B future for {arguments} B of arguments"
        );
    }
}
