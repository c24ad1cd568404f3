//! The client's connection task: the core's call table ([`CallTable`](blerpc_proto::table::CallTable))
//! on the shared [`Driver`], commands from the [`Client`](super::Client) handles, and the
//! channels each call's results go to.
//!
//! Everything a central decides (calls in flight, operations waiting for outbox room, trust on
//! first use, a stream reader falling behind, the errors a caller sees) is the table's; this task
//! only moves bytes, time and commands to it and delivers into tokio channels.

use std::future::Future;
use std::time::Duration;

use blerpc_proto::Instant;
use blerpc_proto::table::{
    CallSink, CentralError, Delivery, LinkFailure, LinkFailureKind, OpReply, Shell, TableEvent,
    Ticket,
};
use tokio::sync::{mpsc, oneshot};

use super::{Cmd, ConnectionInfo, Error, HostTable, Start};
use crate::clock::Clock;
use crate::driver::{Driver, Protocol, Turn};
use crate::key_store::PinStore;
use crate::known_keys::to_hex;
use crate::link::{LinkError, LinkRx, LinkTx};

/// The tokio shell's types for the call table.
pub(crate) struct Tokio;

impl Shell for Tokio {
    type Sink = Sink;
    type Reply = Reply;
    type Store = PinStore;
}

/// Where a call's results go.
pub(crate) struct Sink {
    pub(super) out: Out,
    /// Where the ticket goes once the call started (streams and uploads, whose handles need
    /// it); a call that fails to start reports there instead of to `out`.
    pub(super) started: Option<oneshot::Sender<Result<Ticket, Error>>>,
}

/// A call's result channel.
pub(crate) enum Out {
    /// A unary call's or an upload's response.
    One(oneshot::Sender<Result<Vec<u8>, Error>>),
    /// A peripheral→central stream's items. The channel holds one slot more than the stream
    /// buffer: the last one is kept for the error that ends an overflowing stream.
    Stream(mpsc::Sender<Result<Vec<u8>, Error>>),
}

impl CallSink for Sink {
    fn started(&mut self, ticket: Ticket) {
        if let Some(started) = self.started.take() {
            let _ = started.send(Ok(ticket));
        }
    }
    fn response(self, data: &[u8]) {
        let data = crate::copy_message(data);
        match self.out {
            Out::One(tx) => {
                let _ = tx.send(Ok(data));
            }
            Out::Stream(tx) => {
                let _ = tx.try_send(Ok(data));
            }
        }
    }
    fn item(&mut self, data: &[u8]) -> Delivery {
        let Out::Stream(tx) = &self.out else {
            return Delivery::Gone;
        };
        if tx.is_closed() {
            return Delivery::Gone;
        }
        // The last slot is the error's.
        if tx.capacity() <= 1 {
            return Delivery::Full {
                limit: tx.max_capacity().saturating_sub(1),
            };
        }
        match tx.try_send(Ok(crate::copy_message(data))) {
            Ok(()) => Delivery::Taken,
            Err(mpsc::error::TrySendError::Full(_)) => Delivery::Full {
                limit: tx.max_capacity().saturating_sub(1),
            },
            Err(mpsc::error::TrySendError::Closed(_)) => Delivery::Gone,
        }
    }
    fn end(self) {}
    fn fail(self, error: CentralError) {
        let error = Error::from(error);
        if let Some(started) = self.started {
            let _ = started.send(Err(error));
            return;
        }
        match self.out {
            Out::One(tx) => {
                let _ = tx.send(Err(error));
            }
            Out::Stream(tx) => {
                let _ = tx.try_send(Err(error));
            }
        }
    }
    fn is_abandoned(&self) -> bool {
        match &self.out {
            Out::One(tx) => tx.is_closed(),
            Out::Stream(tx) => tx.is_closed(),
        }
    }
    fn room(&self) -> Option<usize> {
        match &self.out {
            // The last slot is the error's.
            Out::Stream(tx) => Some(tx.capacity().saturating_sub(1)),
            Out::One(_) => None,
        }
    }
}

/// Where an upload item's or finish's outcome goes.
pub(crate) struct Reply(pub(super) oneshot::Sender<Result<(), Error>>);

impl OpReply for Reply {
    fn done(self, result: Result<(), CentralError>) {
        let _ = self.0.send(result.map_err(Error::from));
    }
}

/// The connection task's state, its call table of `N` slots.
pub(super) struct Task<const N: usize = { super::DEFAULT_CALLS_IN_FLIGHT }> {
    pub(super) table: HostTable<N>,
    pub(super) clock: Clock,
    pub(super) cmds: mpsc::Receiver<Cmd>,
    pub(super) ready: Option<oneshot::Sender<Result<ConnectionInfo, Error>>>,
    pub(super) idle_release: Duration,
    pub(super) att_mtu: usize,
    pub(super) peer_id: String,
}

impl<const N: usize> Protocol for Task<N> {
    fn transmit_len(&self) -> usize {
        self.table.transmit_len()
    }
    fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        self.table.poll_transmit(now, out)
    }
    fn handle_input(&mut self, now: Instant, pdu: &[u8]) {
        self.table.handle_input(now, pdu);
        self.poll_events();
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.table.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.table.handle_timeout(now);
    }
    fn release_memory(&mut self) {
        self.table.release_memory();
    }
}

impl<const N: usize> Task<N> {
    /// The connection's future. Not an async fn: an async fn keeps its moved arguments twice in
    /// its future (the argument and the local it is moved into), which held the task state twice
    /// in every idle connection's task; an `async move` block uses its captures in place.
    pub(super) fn run<Tx: LinkTx, Rx: LinkRx>(
        mut self,
        tx: Tx,
        rx: Rx,
    ) -> impl Future<Output = ()> + Send + 'static {
        // Built outside the async block, which then holds it once (moving the link's halves in
        // there would keep their slots too).
        let mut d = Driver::new(tx, rx, self.clock, self.idle_release);
        async move {
            loop {
                self.poll_events();
                let (t, now) = d.now();
                if let Err(e) = d.drive_transmit(&mut self, now) {
                    self.link_lost(now, e);
                    return;
                }
                if self.table.is_closed() && !d.tx.has_pending() {
                    self.poll_events();
                    self.refuse_ready(Error::from(CentralError::Closed));
                    d.close().await;
                    return;
                }
                let idle = self.table.is_idle();
                d.drive_idle(&mut self, idle, t);
                if let Err(e) = d.drive_timer(&self) {
                    self.link_lost(now, e);
                    return;
                }
                let waiting = self.table.has_waiting();
                let cmds = &mut self.cmds;
                let work = move || async move {
                    if waiting {
                        // Commands wait until the table's waiting operations are in the core,
                        // which bounds the table's queue by the command channel.
                        std::future::pending().await
                    } else {
                        cmds.recv().await
                    }
                };
                let turn = d.turn(work).await;
                match turn {
                    Err(e) => {
                        let now = d.now().1;
                        self.link_lost(now, e);
                        return;
                    }
                    Ok(Turn::Flushed) => {}
                    Ok(Turn::Input(pdu, now)) => {
                        let len = pdu.len();
                        self.handle_input(now, pdu);
                        match d.recv_buffered(&mut self, now, len) {
                            Ok(true) => {}
                            Ok(false) => {
                                self.link_lost(now, LinkError::Closed);
                                return;
                            }
                            Err(e) => {
                                self.link_lost(now, e);
                                return;
                            }
                        }
                    }
                    Ok(Turn::PeerClosed) => {
                        self.link_lost(d.now().1, LinkError::Closed);
                        return;
                    }
                    Ok(Turn::Timer(now)) => self.table.handle_timeout(now),
                    Ok(Turn::Work(Some(Cmd::Close { reply }))) => {
                        self.table.close(d.now().1);
                        self.poll_events();
                        d.close().await;
                        let _ = reply.send(());
                        return;
                    }
                    Ok(Turn::Work(Some(cmd))) => self.apply(d.now().1, cmd),
                    Ok(Turn::Work(None)) => {
                        // Every handle is gone.
                        self.table.close(d.now().1);
                        d.close().await;
                        return;
                    }
                }
            }
        }
    }

    fn apply(&mut self, now: Instant, cmd: Cmd) {
        match cmd {
            Cmd::Start(start) => {
                let Start {
                    name,
                    request,
                    kind,
                    sink,
                    deadline,
                } = *start;
                let deadline = deadline.map(|d| self.clock.at(d));
                if let Err((e, sink)) = self.table.start(now, &name, request, kind, deadline, sink)
                {
                    sink.fail(e);
                }
            }
            Cmd::Item(item) => self.table.send_item(now, item.call, item.data, item.reply),
            Cmd::Finish(finish) => self.table.finish(now, finish.call, finish.reply),
            Cmd::Cancel { call } => self.table.cancel(call),
            Cmd::Reap => self.table.reap(),
            // The turn's transmit grants the room (`CallTable::poll_transmit`).
            Cmd::Room => {}
            Cmd::Close { reply } => {
                let _ = reply.send(());
            }
        }
    }

    /// The table's connection events: setup's outcome for [`Client::connect`](super::Client::connect),
    /// the identity decision and diagnostics for the trace.
    fn poll_events(&mut self) {
        while let Some(event) = self.table.poll_event() {
            match event {
                TableEvent::Connected { encrypted } => {
                    let central = self.table.central();
                    let info = ConnectionInfo {
                        encrypted,
                        peer_identity: central.peer_identity(),
                        capabilities: central.capabilities(),
                        peer_timeout_ms: central.peer_timeout_ms(),
                        large_messages: central.large_messages(),
                        long_containers: central.long_containers(),
                        att_mtu: self.att_mtu,
                        peer_id: self.peer_id.clone(),
                        pinned: self.table.pinned(),
                    };
                    if let Some(ready) = self.ready.take() {
                        let _ = ready.send(Ok(info));
                    }
                }
                TableEvent::IdentityAccepted { identity, outcome } => {
                    tracing::info!(peer = %self.peer_id, ?outcome, "peripheral identity {}", to_hex(&identity));
                }
                TableEvent::SetupFailed(e) => self.refuse_ready(Error::from(e)),
                TableEvent::Closed(e) => {
                    tracing::debug!(peer = %self.peer_id, "connection closed: {e}");
                }
                TableEvent::Warning(w) => tracing::debug!(peer = %self.peer_id, "dropped: {w:?}"),
                _ => {}
            }
        }
    }

    /// Setup did not finish: [`Client::connect`](super::Client::connect) returns `error`.
    fn refuse_ready(&mut self, error: Error) {
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Err(error));
        }
    }

    /// The link failed or closed: a connect in progress gets the link's own error, every call
    /// the table's [`CentralError::Link`].
    fn link_lost(&mut self, now: Instant, e: LinkError) {
        let kind = match &e {
            LinkError::Closed => LinkFailureKind::Closed,
            LinkError::Framing(_) | LinkError::TooLarge { .. } => LinkFailureKind::Framing,
            _ => LinkFailureKind::Failed,
        };
        // "The link closed" says all a peer's close says.
        let message = match &e {
            LinkError::Closed => String::new(),
            e => e.to_string(),
        };
        let failure = LinkFailure::new(kind, message);
        self.refuse_ready(Error::Link(e));
        self.table.handle_link_lost(now, failure);
        self.poll_events();
    }
}

#[cfg(test)]
mod tests {
    use blerpc_proto::connection::CentralConfig;
    use blerpc_proto::crypto::DefaultProvider;
    use blerpc_proto::table::Trust;
    use rand_core::OsRng;

    use super::*;
    use crate::link::Link as _;

    /// The task's future holds the task state once (an async fn would hold it twice).
    #[test]
    fn task_future_holds_the_state_once() {
        let (link, _peer) = crate::link::mem::pair(247);
        let (_cmds, cmd_rx) = mpsc::channel(1);
        let clock = Clock::new();
        let table = HostTable::<{ crate::client::DEFAULT_CALLS_IN_FLIGHT }>::new(
            CentralConfig::default(),
            DefaultProvider::default(),
            OsRng,
            clock.now(),
            Trust::Anyone,
        )
        .unwrap();
        let task = Task {
            table,
            clock,
            cmds: cmd_rx,
            ready: None,
            idle_release: Duration::from_secs(1),
            att_mtu: 247,
            peer_id: String::new(),
        };
        // The driver's timer registers with the runtime's clock.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _runtime = rt.enter();
        let state = std::mem::size_of::<Task>();
        // The larger table a connection configured for more calls in flight runs.
        let larger = std::mem::size_of::<Task<{ crate::client::MAX_CALLS_IN_FLIGHT }>>();
        println!("task state with the larger call table {larger} B");
        assert!(larger > state);
        let (tx, rx) = link.split();
        let halves = std::mem::size_of_val(&tx) + std::mem::size_of_val(&rx);
        let future = task.run(tx, rx);
        let size = std::mem::size_of_val(&future);
        println!("task state {state} B, link halves {halves} B, future {size} B");
        assert!(
            size < 2 * state,
            "{size} B future for a {state} B task state"
        );
    }

    /// A stream's channel keeps its last slot for the error that ends an overflowing stream.
    #[test]
    fn an_overflowing_stream_gets_its_error_after_its_items() {
        let (tx, mut rx) = mpsc::channel(3);
        let mut sink = Sink {
            out: Out::Stream(tx),
            started: None,
        };
        assert_eq!(sink.item(b"a"), Delivery::Taken);
        assert_eq!(sink.item(b"b"), Delivery::Taken);
        assert_eq!(sink.item(b"c"), Delivery::Full { limit: 2 });
        sink.fail(CentralError::StreamOverflow { limit: 2 });
        assert_eq!(rx.try_recv().unwrap().unwrap(), b"a");
        assert_eq!(rx.try_recv().unwrap().unwrap(), b"b");
        let e = rx.try_recv().unwrap().unwrap_err();
        assert!(
            matches!(e, Error::Central(CentralError::StreamOverflow { limit: 2 })),
            "{e}"
        );
        assert!(rx.try_recv().is_err(), "the stream ends there");
    }
}
