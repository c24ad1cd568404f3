//! The client's connection task: the [`Central`] on the shared [`Driver`], commands from the
//! [`Client`](super::Client) handles, each call's result channel, and the identity decision
//! against the known-keys store.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::time::Duration;

use blerpc_proto::Instant;
use blerpc_proto::connection::{CallError, CallId, CentralEvent, CloseReason};
use blerpc_proto::handshake::{TofuError, TofuOutcome, tofu_verify};
use tokio::sync::{mpsc, oneshot};

use super::{
    Cmd, ConnectionInfo, Error, HostCentral, IdentityError, PinPolicy, Request, Sink, Start,
};
use crate::clock::Clock;
use crate::driver::{Driver, Protocol, Turn};
use crate::known_keys::to_hex;
use crate::link::{LinkError, LinkRx, LinkTx};
#[cfg(doc)]
use blerpc_proto::connection::Central;

/// Hashes a [`CallId`] with one multiplication instead of SipHash. Call ids are a counter the connection assigns itself, never a peer's value, so
/// there is no flooding to defend against; the odd multiplier keeps consecutive ids in distinct
/// buckets and spreads them over the top bits hashbrown uses as tags.
#[derive(Default)]
pub(super) struct CallIdHasher(u64);

const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

impl std::hash::Hasher for CallIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(FIBONACCI);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(FIBONACCI);
    }
}

/// The calls' result channels by call id.
pub(super) type Sinks = HashMap<CallId, Sink, std::hash::BuildHasherDefault<CallIdHasher>>;

/// The connection task.
/// The connection task's state.
pub(super) struct Task {
    pub(super) central: HostCentral,
    pub(super) clock: Clock,
    pub(super) cmds: mpsc::Receiver<Cmd>,
    pub(super) sinks: Sinks,
    pub(super) blocked: VecDeque<Cmd>,
    pub(super) pinning: PinPolicy,
    pub(super) device_id: String,
    pub(super) ready: Option<oneshot::Sender<Result<ConnectionInfo, Error>>>,
    pub(super) identity_error: Option<IdentityError>,
    /// What the known-keys store said of the identity (KnownKeys pinning only).
    pub(super) pinned: Option<TofuOutcome>,
    pub(super) idle_release: Duration,
    pub(super) att_mtu: usize,
    pub(super) peer_id: String,
}

impl Protocol for Task {
    fn transmit_len(&self) -> usize {
        self.central.transmit_len()
    }
    fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        self.central.poll_transmit(now, out)
    }
    fn handle_input(&mut self, now: Instant, pdu: &[u8]) {
        // Events are drained after every input, so the queue has room.
        let _ = self.central.handle_input(now, pdu);
        self.drain_events();
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.central.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.central.handle_timeout(now);
    }
    fn release_memory(&mut self) {
        self.central.release_memory();
    }
}

impl Task {
    /// The connection's future. Not an async fn: an async fn keeps its moved arguments twice in
    /// its future (the argument and the local it is moved into), which held the 3.9 KB task
    /// state twice in every idle connection's task; an `async move` block uses its captures in
    /// place.
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
                self.drain_events();
                self.retry_blocked();
                let (t, now) = d.now();
                if let Err(e) = d.drive_transmit(&mut self, now) {
                    self.fail_all(Error::Link(e));
                    return;
                }
                if self.central.is_closed() && !d.tx.has_pending() {
                    self.fail_all(Error::Closed);
                    d.close().await;
                    return;
                }
                let idle = self.sinks.is_empty();
                d.drive_idle(&mut self, idle, t);
                if let Err(e) = d.drive_timer(&self) {
                    self.fail_all(Error::Link(e));
                    return;
                }
                let blocked = !self.blocked.is_empty();
                let cmds = &mut self.cmds;
                let work = move || async move {
                    if blocked {
                        // Commands wait until the outbox has room for the blocked one.
                        std::future::pending().await
                    } else {
                        cmds.recv().await
                    }
                };
                let turn = d.turn(work).await;
                match turn {
                    Err(e) => {
                        self.fail_all(Error::Link(e));
                        return;
                    }
                    Ok(Turn::Flushed) => {}
                    Ok(Turn::Input(pdu, now)) => {
                        let len = pdu.len();
                        self.handle_input(now, pdu);
                        match d.recv_buffered(&mut self, now, len) {
                            Ok(true) => {}
                            Ok(false) => {
                                self.fail_all(Error::Closed);
                                return;
                            }
                            Err(e) => {
                                self.fail_all(Error::Link(e));
                                return;
                            }
                        }
                    }
                    Ok(Turn::PeerClosed) => {
                        self.fail_all(Error::Closed);
                        return;
                    }
                    Ok(Turn::Timer(now)) => self.central.handle_timeout(now),
                    Ok(Turn::Work(Some(Cmd::Close { reply }))) => {
                        self.central.close(d.now().1);
                        self.drain_events();
                        d.close().await;
                        let _ = reply.send(());
                        self.fail_all(Error::Closed);
                        return;
                    }
                    Ok(Turn::Work(Some(cmd))) => self.apply(d.now().1, cmd),
                    Ok(Turn::Work(None)) => {
                        // Every handle is gone.
                        self.central.close(d.now().1);
                        d.close().await;
                        return;
                    }
                }
            }
        }
    }

    fn apply(&mut self, now: blerpc_proto::Instant, cmd: Cmd) {
        match cmd {
            Cmd::Start(mut start) => {
                let result = match &mut start.request {
                    Request::Data(data) => {
                        self.central.start_call(now, &start.name, data, start.kind)
                    }
                    Request::Framed(command) => {
                        self.central.start_call_framed(now, command, start.kind)
                    }
                };
                match result {
                    Ok(id) => {
                        let Start { sink, reply, .. } = *start;
                        self.sinks.insert(id, sink);
                        if let Some(reply) = reply {
                            let _ = reply.send(Ok(id));
                        }
                    }
                    Err(CallError::OutboxFull { .. }) => {
                        self.blocked.push_back(Cmd::Start(start));
                    }
                    Err(e) => {
                        let e = self.call_error(e);
                        let Start { sink, reply, .. } = *start;
                        match (reply, sink) {
                            (Some(reply), _) => {
                                let _ = reply.send(Err(e));
                            }
                            (None, Sink::Unary(tx)) => {
                                let _ = tx.send(Err(e));
                            }
                            (None, Sink::Stream(tx)) => {
                                let _ = tx.try_send(Err(e));
                            }
                        }
                    }
                }
            }
            Cmd::Item(item) => match self.central.send_stream_item(now, item.call, &item.data) {
                Ok(()) => {
                    let _ = item.reply.send(Ok(()));
                }
                Err(CallError::OutboxFull { .. }) => {
                    self.blocked.push_back(Cmd::Item(item));
                }
                Err(e) => {
                    let _ = item.reply.send(Err(self.call_error(e)));
                }
            },
            Cmd::Finish { call, reply } => match self.central.finish_stream(now, call) {
                Ok(()) => {
                    let _ = reply.send(Ok(()));
                }
                Err(CallError::OutboxFull { .. }) => {
                    self.blocked.push_back(Cmd::Finish { call, reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(self.call_error(e)));
                }
            },
            Cmd::Cancel { call } => {
                let _ = self.central.cancel(call);
                self.sinks.remove(&call);
            }
            Cmd::Reap => {
                let gone: Vec<CallId> = self
                    .sinks
                    .iter()
                    .filter(|(_, sink)| matches!(sink, Sink::Unary(tx) if tx.is_closed()))
                    .map(|(id, _)| *id)
                    .collect();
                for id in gone {
                    let _ = self.central.cancel(id);
                    self.sinks.remove(&id);
                }
                self.blocked.retain(|cmd| {
                    !matches!(cmd, Cmd::Start(start) if matches!(&start.sink, Sink::Unary(tx) if tx.is_closed()))
                });
            }
            Cmd::Close { reply } => {
                let _ = reply.send(());
            }
        }
    }

    fn call_error(&self, e: CallError) -> Error {
        if self.central.is_closed() {
            Error::Closed
        } else {
            Error::Call(e)
        }
    }

    /// Re-applies commands that waited for outbox space, in order, while there is room.
    fn retry_blocked(&mut self) {
        if self.blocked.is_empty() {
            return;
        }
        let now = self.clock.now();
        while let Some(cmd) = self.blocked.pop_front() {
            let before = self.blocked.len();
            self.apply(now, cmd);
            if self.blocked.len() > before {
                // Still no room: it went back to the end; move it to the front to keep order.
                if let Some(cmd) = self.blocked.pop_back() {
                    self.blocked.push_front(cmd);
                }
                return;
            }
        }
    }

    fn drain_events(&mut self) {
        loop {
            let mut identity = None;
            let Some(event) = self.central.poll_event() else {
                return;
            };
            match event {
                CentralEvent::Connected { encrypted } => {
                    let info = ConnectionInfo {
                        encrypted,
                        peer_identity: self.central.peer_identity(),
                        capabilities: self.central.capabilities(),
                        peer_timeout_ms: self.central.peer_timeout_ms(),
                        large_messages: self.central.large_messages(),
                        long_containers: self.central.long_containers(),
                        att_mtu: self.att_mtu,
                        peer_id: self.peer_id.clone(),
                        pinned: self.pinned,
                    };
                    if let Some(ready) = self.ready.take() {
                        let _ = ready.send(Ok(info));
                    }
                }
                CentralEvent::IdentityPresented { identity: key } => identity = Some(key),
                CentralEvent::Response { call, data } => {
                    let data = blerpc_proto::buf::to_vec_bytes(data);
                    match self.sinks.remove(&call) {
                        Some(Sink::Unary(tx)) => {
                            let _ = tx.send(Ok(data));
                        }
                        Some(Sink::Stream(tx)) => {
                            let _ = tx.try_send(Ok(data));
                        }
                        None => {}
                    }
                }
                CentralEvent::StreamItem { call, data } => {
                    let data = blerpc_proto::buf::to_vec_bytes(data);
                    if let Some(Sink::Stream(tx)) = self.sinks.get(&call) {
                        let capacity = tx.max_capacity();
                        match tx.try_send(Ok(data)) {
                            Ok(()) => {}
                            Err(mpsc::error::TrySendError::Full(_)) => {
                                let _ = tx.try_send(Err(Error::StreamOverflow(capacity)));
                                self.sinks.remove(&call);
                                let _ = self.central.cancel(call);
                            }
                            Err(mpsc::error::TrySendError::Closed(_)) => {
                                self.sinks.remove(&call);
                                let _ = self.central.cancel(call);
                            }
                        }
                    }
                }
                CentralEvent::StreamEnd { call } => {
                    self.sinks.remove(&call);
                }
                CentralEvent::CallFailed { call, error } => {
                    let error = if error == CallError::Closed {
                        Error::Closed
                    } else {
                        Error::Call(error)
                    };
                    match self.sinks.remove(&call) {
                        Some(Sink::Unary(tx)) => {
                            let _ = tx.send(Err(error));
                        }
                        Some(Sink::Stream(tx)) => {
                            let _ = tx.try_send(Err(error));
                        }
                        None => {}
                    }
                }
                CentralEvent::Closed { reason } => {
                    if let Some(ready) = self.ready.take() {
                        let error = match (reason, self.identity_error.take()) {
                            (CloseReason::IdentityRejected, Some(detail)) => {
                                Error::Identity(detail)
                            }
                            _ => Error::Setup(reason),
                        };
                        let _ = ready.send(Err(error));
                    }
                }
                CentralEvent::Warning(w) => tracing::debug!(peer = %self.peer_id, "dropped: {w:?}"),
                _ => {}
            }
            if let Some(key) = identity {
                self.decide_identity(key);
            }
        }
    }

    fn decide_identity(&mut self, key: [u8; 32]) {
        let now = self.clock.now();
        let PinPolicy::KnownKeys(store) = &mut self.pinning else {
            // The core decides for Trust and NoPin; nothing else reaches here.
            self.central.reject_identity(now);
            return;
        };
        match tofu_verify(store, &self.device_id, &key) {
            Ok(outcome) => {
                tracing::info!(device = %self.device_id, ?outcome, "peripheral identity {}", to_hex(&key));
                self.pinned = Some(outcome);
                self.central.accept_identity(now);
            }
            Err(TofuError::Mismatch { pinned, presented }) => {
                self.identity_error = Some(IdentityError::Changed {
                    device: self.device_id.clone(),
                    presented,
                    pinned,
                    store: store.path().to_owned(),
                });
                self.central.reject_identity(now);
            }
            Err(TofuError::Store(e)) => {
                self.identity_error = Some(IdentityError::Store(e));
                self.central.reject_identity(now);
            }
            Err(_) => self.central.reject_identity(now),
        }
    }

    fn fail_all(&mut self, error: Error) {
        // The link error's own text: it is wrapped in `Error::Link` again below.
        let text = match &error {
            Error::Link(inner) => inner.to_string(),
            other => other.to_string(),
        };
        if let Some(ready) = self.ready.take() {
            let _ = ready.send(Err(error));
            return;
        }
        for (_, sink) in self.sinks.drain() {
            // Every call gets its own copy: a link error becomes its text (`io::Error` does
            // not clone); the other variants are copied as they are.
            let e = match &error {
                Error::Closed => Error::Closed,
                Error::Setup(r) => Error::Setup(*r),
                Error::Call(c) => Error::Call(*c),
                _ => Error::Link(LinkError::Transport(text.clone())),
            };
            match sink {
                Sink::Unary(tx) => {
                    let _ = tx.send(Err(e));
                }
                Sink::Stream(tx) => {
                    let _ = tx.try_send(Err(e));
                }
            }
        }
        for cmd in self.blocked.drain(..) {
            match cmd {
                Cmd::Start(start) => match (start.reply, start.sink) {
                    (Some(reply), _) => {
                        let _ = reply.send(Err(Error::Closed));
                    }
                    (None, Sink::Unary(tx)) => {
                        let _ = tx.send(Err(Error::Closed));
                    }
                    (None, Sink::Stream(tx)) => {
                        let _ = tx.try_send(Err(Error::Closed));
                    }
                },
                Cmd::Item(item) => {
                    let _ = item.reply.send(Err(Error::Closed));
                }
                Cmd::Finish { reply, .. } => {
                    let _ = reply.send(Err(Error::Closed));
                }
                Cmd::Cancel { .. } | Cmd::Reap => {}
                Cmd::Close { reply } => {
                    let _ = reply.send(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use blerpc_proto::connection::CentralConfig;
    use blerpc_proto::crypto::DefaultProvider;
    use rand_core::OsRng;

    use super::*;
    use crate::link::Link as _;

    /// Consecutive call ids fill distinct buckets and every tag value, and the map works.
    #[test]
    fn call_id_hashes_spread_consecutive_ids() {
        use std::hash::BuildHasher as _;
        let build = std::hash::BuildHasherDefault::<CallIdHasher>::default();
        let hashes: Vec<u64> = (0..4096u32).map(|n| build.hash_one(CallId(n))).collect();
        // Distinct in the low bits that pick a bucket in a 4,096-bucket table...
        let mut low: Vec<u64> = hashes.iter().map(|h| h & 4095).collect();
        low.sort_unstable();
        low.dedup();
        assert_eq!(low.len(), 4096);
        // ...and using all 128 values of the 7-bit tag hashbrown takes from the top.
        let mut tags: Vec<u64> = hashes.iter().map(|h| h >> 57).collect();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), 128);
        let mut sinks = Sinks::default();
        for n in 0..1000 {
            let (tx, _rx) = oneshot::channel();
            sinks.insert(CallId(n), Sink::Unary(tx));
        }
        assert!((0..1000).all(|n| sinks.remove(&CallId(n)).is_some()));
        assert!(sinks.is_empty());
    }

    /// The task's future holds the task state once (an async fn would hold it twice).
    #[test]
    fn task_future_holds_the_state_once() {
        let (link, _peer) = crate::link::mem::pair(247);
        let (_cmds, cmd_rx) = mpsc::channel(1);
        let clock = Clock::new();
        let central = HostCentral::new(
            CentralConfig::default(),
            DefaultProvider::default(),
            OsRng,
            clock.now(),
        )
        .unwrap();
        let task = Task {
            central,
            clock,
            cmds: cmd_rx,
            sinks: Sinks::default(),
            blocked: VecDeque::new(),
            pinning: PinPolicy::NoPin,
            device_id: String::new(),
            ready: None,
            identity_error: None,
            pinned: None,
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
}
