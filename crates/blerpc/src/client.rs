//! The client (central): connects over any [`Link`], runs the setup sequence and the key exchange,
//! and makes unary calls and streams in both directions.
//!
//! One task owns the connection: it drives the sans-IO [`Central`] and `select!`s over the link's
//! receive half, flushing its transmit half, the next protocol timeout, and commands from
//! [`Client`] handles. Handles are cheap to clone and can be used from many tasks at once.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use blerpc_proto::connection::{
    CallError, CallId, CallKind, Central, CentralConfig, CentralEvent, CloseReason, ConfigError,
    Pinning, SetupPipelining,
};
use blerpc_proto::crypto::DefaultProvider;
use blerpc_proto::handshake::{TofuError, tofu_verify};
use blerpc_proto::wire::capabilities::{Capabilities, LargeLimits};
use futures_util::FutureExt as _;
use rand_core::OsRng;
use tokio::sync::{mpsc, oneshot};

use crate::clock::{Clock, IdleRelease, Timer};
use crate::known_keys::{KnownKeysFile, to_hex};
use crate::link::{Link, LinkError, LinkRx, LinkTx};

/// Calls in flight on one connection at most (the central's reassembly slots).
pub const MAX_CALLS_IN_FLIGHT: usize = 4;

type HostCentral = Central<DefaultProvider, OsRng, Vec<u8>, Vec<u8>, MAX_CALLS_IN_FLIGHT>;

/// Errors of the client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The link failed.
    #[error("link error: {0}")]
    Link(#[from] LinkError),
    /// Connection setup failed (capabilities, key exchange, encryption requirement).
    #[error("connection setup failed: {0}")]
    Setup(CloseReason),
    /// The peripheral's identity key was refused.
    #[error("peripheral identity refused: {0}")]
    Identity(String),
    /// The call failed (timeout, an ERROR from the peripheral, BUSY, a local limit).
    #[error("{0}")]
    Call(CallError),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
    /// A server stream produced items faster than they were consumed.
    #[error("stream consumer too slow: more than {0} items buffered")]
    StreamOverflow(usize),
    /// A response did not decode (generated clients).
    #[error("response does not decode: {0}")]
    Decode(String),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(ConfigError),
}

impl Error {
    /// A decode error from any displayable cause (used by generated clients).
    pub fn decode(e: impl std::fmt::Display) -> Self {
        Error::Decode(e.to_string())
    }
}

/// How the client decides to trust the peripheral's identity key.
#[derive(Clone, Debug)]
pub enum PinPolicy {
    /// Trust on first use, pins kept in this file (the default, at
    /// [`KnownKeysFile::default_path`]). A different key later is refused.
    KnownKeys(KnownKeysFile),
    /// Accept only this Ed25519 public key.
    Trust([u8; 32]),
    /// Accept any key: an explicit opt-out, open to man-in-the-middle attacks.
    NoPin,
}

/// The runtime's outbox limit: one 16 MiB message plus the core's default 128 KiB.
pub(crate) const LARGE_OUTBOX_BYTES: usize =
    blerpc_proto::connection::DEFAULT_MAX_LARGE_MESSAGE_LEN + 128 * 1024;

/// Configuration of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The protocol configuration. `att_mtu` is taken from the link; `pinning` from
    /// [`ClientConfig::pinning`]; `setup_pipelining` from [`ClientConfig::setup_pipelining`]. Unlike the core's default, the large-message extension is on
    /// (`central.large_messages`): with a server that announces it too, requests (up to the
    /// server's limit and `central.max_outbox_bytes`, 16 MiB + 128 KiB by default) and responses
    /// (up to `central.max_response_len`, 16 MiB) may exceed 65,535 bytes; with any other
    /// peripheral the classic limits apply and larger requests fail with
    /// [`CallError::RequestTooLarge`].
    pub central: CentralConfig,
    /// Identity policy. Default: trust on first use in the default known-keys file.
    pub pinning: PinPolicy,
    /// Which setup requests go out without waiting for the previous reply. Default `None`:
    /// the link's [`Link::setup_pipelining`] ([`SetupPipelining::KeyExchange`] on stream links,
    /// two round trips fewer than the reference centrals' order; [`SetupPipelining::Requests`]
    /// on BLE). `Some(SetupPipelining::Off)` gives the reference order.
    pub setup_pipelining: Option<SetupPipelining>,
    /// The key pins are stored under; default: the link's peer id.
    pub device_id: Option<String>,
    /// Items a server stream buffers before the consumer must catch up. Default 1,024.
    pub stream_buffer: usize,
    /// Commands from handles waiting for the connection task. Default 64.
    pub command_buffer: usize,
    /// Buffers (the protocol's reassembly and outbox buffers, the connection task's transmit
    /// buffer) are released after the connection has been idle this long. Default 1 s.
    pub idle_release: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            central: CentralConfig {
                large_messages: true,
                long_containers: true,
                max_outbox_bytes: LARGE_OUTBOX_BYTES,
                ..CentralConfig::default()
            },
            pinning: PinPolicy::KnownKeys(KnownKeysFile::new(KnownKeysFile::default_path())),
            setup_pipelining: None,
            device_id: None,
            stream_buffer: 1024,
            command_buffer: 64,
            idle_release: Duration::from_secs(1),
        }
    }
}

/// What setup established.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    /// `true` when calls are end-to-end encrypted.
    pub encrypted: bool,
    /// The peripheral's identity key (when encrypted).
    pub peer_identity: Option<[u8; 32]>,
    /// The peripheral's CAPABILITIES.
    pub capabilities: Option<Capabilities>,
    /// The peripheral's TIMEOUT value (ms).
    pub peer_timeout_ms: u16,
    /// The peripheral's limits when the large-message extension is in force (both sides
    /// announced it); `None` means the classic 65,535-byte limits.
    pub large_messages: Option<LargeLimits>,
    /// `true` when the long-container extension is in force (both sides announced it: 16 KiB
    /// containers on a stream link, see [`Link::long_containers`]).
    pub long_containers: bool,
    /// The link's ATT MTU.
    pub att_mtu: usize,
    /// The link's peer id.
    pub peer_id: String,
}

enum Sink {
    Unary(oneshot::Sender<Result<Vec<u8>, Error>>),
    Stream(mpsc::Sender<Result<Vec<u8>, Error>>),
}

/// A command from a handle to the connection task. The large variants are boxed: the channel
/// allocates its slots 32 at a time, and every idle connection keeps one such block (16 bytes a
/// slot instead of 88: about 2.3 KB less per connection).
enum Cmd {
    Start(Box<Start>),
    Item(Box<Item>),
    Finish {
        call: CallId,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    Cancel {
        call: CallId,
    },
    /// A unary call's future was dropped: cancel the calls whose receiver is gone.
    Reap,
    Close {
        reply: oneshot::Sender<()>,
    },
}

/// A handle to a connection. Clone it freely; the connection closes when the last handle is
/// dropped or [`Client::close`] is called.
#[derive(Clone, Debug)]
pub struct Client {
    cmds: mpsc::Sender<Cmd>,
    info: Arc<ConnectionInfo>,
    stream_buffer: usize,
}

const _: () = assert!(
    std::mem::size_of::<Cmd>() <= 16,
    "keep Cmd small: box large variants"
);

/// A call's request as handed to the connection task.
enum Request {
    /// The protobuf data; the task frames it behind the command header (one copy).
    Data(Vec<u8>),
    /// The whole REQUEST command, the data encoded behind its header (`Client::call_message`):
    /// the call takes the buffer as it is.
    Framed(Vec<u8>),
}

struct Start {
    /// The command name (empty for a framed request, whose command carries it).
    name: String,
    request: Request,
    kind: CallKind,
    sink: Sink,
    /// Where the call id goes; `None` for unary calls, whose failure to start goes to the sink
    /// instead (one round trip through the task per call, not two).
    reply: Option<oneshot::Sender<Result<CallId, Error>>>,
}

struct Item {
    call: CallId,
    data: Vec<u8>,
    reply: oneshot::Sender<Result<(), Error>>,
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cmd")
    }
}

impl Client {
    /// Connects over `link`: runs TIMEOUT, CAPABILITIES and the key exchange, and returns once
    /// calls can be made.
    pub async fn connect<L: Link>(link: L, config: ClientConfig) -> Result<Client, Error> {
        let mut central_config = config.central;
        central_config.att_mtu = link.att_mtu();
        // Long containers only where the link carries them (never BLE).
        central_config.long_containers &= link.long_containers();
        central_config.setup_pipelining = config
            .setup_pipelining
            .unwrap_or_else(|| link.setup_pipelining());
        central_config.pinning = match &config.pinning {
            PinPolicy::KnownKeys(_) => Pinning::Decide,
            PinPolicy::Trust(key) => Pinning::Expect(*key),
            PinPolicy::NoPin => Pinning::Disabled,
        };
        let peer_id = link.peer_id();
        let device_id = config.device_id.clone().unwrap_or_else(|| peer_id.clone());
        let clock = Clock::new();
        let central = HostCentral::new(
            central_config,
            DefaultProvider::default(),
            OsRng,
            clock.now(),
        )
        .map_err(Error::Config)?;
        let (cmd_tx, cmd_rx) = mpsc::channel(config.command_buffer.max(1));
        let (ready_tx, ready_rx) = oneshot::channel();
        let task = Task {
            central,
            clock,
            cmds: cmd_rx,
            sinks: Sinks::default(),
            blocked: VecDeque::new(),
            pinning: config.pinning,
            device_id,
            ready: Some(ready_tx),
            identity_error: None,
            idle_release: config.idle_release,
            att_mtu: link.att_mtu(),
            peer_id: peer_id.clone(),
        };
        let (tx, rx) = link.split();
        tokio::spawn(task.run(tx, rx));
        let info = ready_rx.await.map_err(|_| Error::Closed)??;
        Ok(Client {
            cmds: cmd_tx,
            info: Arc::new(info),
            stream_buffer: config.stream_buffer.max(1),
        })
    }

    /// What setup established.
    pub fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    async fn start(
        &self,
        name: &str,
        request: Request,
        kind: CallKind,
        sink: Sink,
    ) -> Result<CallId, Error> {
        let (reply, rx) = oneshot::channel();
        let cmd = Cmd::Start(Box::new(Start {
            name: name.to_string(),
            request,
            kind,
            sink,
            reply: Some(reply),
        }));
        self.cmds.send(cmd).await.map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// A unary call: sends `request` (protobuf bytes) to command `name` and returns the
    /// response's protobuf bytes.
    pub async fn call(&self, name: &str, request: Vec<u8>) -> Result<Vec<u8>, Error> {
        self.unary(name.to_string(), Request::Data(request)).await
    }

    /// A unary call with a protobuf message: encodes `request` straight behind the command
    /// header, so the connection takes the buffer as it is (one copy of the request fewer than
    /// [`Client::call`] with the encoded bytes; the generated clients use this). Returns the
    /// response's protobuf bytes.
    pub async fn call_message(
        &self,
        name: &str,
        request: &impl prost::Message,
    ) -> Result<Vec<u8>, Error> {
        self.unary(String::new(), Request::Framed(frame(name, request)?))
            .await
    }

    async fn unary(&self, name: String, request: Request) -> Result<Vec<u8>, Error> {
        let (tx, rx) = oneshot::channel();
        let cmd = Cmd::Start(Box::new(Start {
            name,
            request,
            kind: CallKind::Unary,
            sink: Sink::Unary(tx),
            reply: None,
        }));
        self.cmds.send(cmd).await.map_err(|_| Error::Closed)?;
        // A failure to start arrives here like a response. If this future is dropped, the task
        // cancels the call once it sees the receiver gone.
        let guard = ReapOnDrop {
            cmds: &self.cmds,
            armed: true,
        };
        let result = rx.await.map_err(|_| Error::Closed)?;
        guard.disarm();
        result
    }

    /// A peripheral→central stream: sends `request`, then yields each response until the
    /// peripheral ends the stream. Dropping the stream cancels the call.
    pub async fn server_stream(
        &self,
        name: &str,
        request: Vec<u8>,
    ) -> Result<ResponseStream, Error> {
        let (tx, rx) = mpsc::channel(self.stream_buffer);
        let call = self
            .start(
                name,
                Request::Data(request),
                CallKind::ServerStream,
                Sink::Stream(tx),
            )
            .await?;
        Ok(self.response_stream(rx, call))
    }

    /// [`Client::server_stream`] with a protobuf message, encoded straight behind the command
    /// header as [`Client::call_message`] does.
    pub async fn server_stream_message(
        &self,
        name: &str,
        request: &impl prost::Message,
    ) -> Result<ResponseStream, Error> {
        let (tx, rx) = mpsc::channel(self.stream_buffer);
        let request = Request::Framed(frame(name, request)?);
        let call = self
            .start("", request, CallKind::ServerStream, Sink::Stream(tx))
            .await?;
        Ok(self.response_stream(rx, call))
    }

    fn response_stream(
        &self,
        rx: mpsc::Receiver<Result<Vec<u8>, Error>>,
        call: CallId,
    ) -> ResponseStream {
        ResponseStream {
            rx,
            guard: CancelOnDrop {
                cmds: self.cmds.clone(),
                call: Some(call),
            },
        }
    }

    /// A central→peripheral stream: returns an [`Upload`] to send items on and finish.
    pub async fn client_stream(&self, name: &str) -> Result<Upload, Error> {
        let (tx, rx) = oneshot::channel();
        let call = self
            .start(
                name,
                Request::Data(Vec::new()),
                CallKind::ClientStream,
                Sink::Unary(tx),
            )
            .await?;
        Ok(Upload {
            cmds: self.cmds.clone(),
            call,
            response: Some(rx),
            guard: CancelOnDrop {
                cmds: self.cmds.clone(),
                call: Some(call),
            },
        })
    }

    /// Closes the connection (every call in flight fails with [`Error::Closed`]).
    pub async fn close(&self) {
        let (reply, rx) = oneshot::channel();
        if self.cmds.send(Cmd::Close { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// `true` once the connection has closed.
    pub fn is_closed(&self) -> bool {
        self.cmds.is_closed()
    }
}

/// Cancels a call if the future or stream waiting for it is dropped.
#[derive(Debug)]
struct CancelOnDrop {
    cmds: mpsc::Sender<Cmd>,
    call: Option<CallId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            // Best effort: if the channel is full the call simply times out in the core.
            let _ = self.cmds.try_send(Cmd::Cancel { call });
        }
    }
}

/// Asks the task to cancel unary calls nobody waits for, if the call's future is dropped.
#[derive(Debug)]
struct ReapOnDrop<'a> {
    cmds: &'a mpsc::Sender<Cmd>,
    armed: bool,
}

impl ReapOnDrop<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for ReapOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            // Best effort, as for `CancelOnDrop`: the next reap or the call's deadline ends it.
            let _ = self.cmds.try_send(Cmd::Reap);
        }
    }
}

/// `request` encoded straight behind `name`'s REQUEST command header (the form
/// `Central::start_call_framed` takes): one buffer of exactly the command's length, the data
/// copied once.
fn frame(name: &str, request: &impl prost::Message) -> Result<Vec<u8>, Error> {
    use blerpc_proto::wire::command::{Command, CommandType};
    let data_len = request.encoded_len();
    // The connection's own checks, made before anything is allocated.
    if name.is_empty() || name.len() > blerpc_proto::wire::command::MAX_NAME_LEN {
        return Err(Error::Call(CallError::InvalidName));
    }
    if data_len > blerpc_proto::wire::command::MAX_LARGE_DATA_LEN {
        return Err(Error::Call(CallError::DataTooLong { len: data_len }));
    }
    let header_len = Command::header_len_large(name.len(), data_len);
    // One allocation of the whole command: the header written in place, the data appended.
    let mut command = Vec::with_capacity(header_len.saturating_add(data_len));
    command.resize(header_len, 0);
    Command::emit_header_large(CommandType::Request, name, data_len, &mut command)
        .map_err(|_| Error::Call(CallError::InvalidName))?;
    Ok(crate::__private::encode_into(request, command))
}

/// The responses of a peripheral→central stream ([`Client::server_stream`]).
#[derive(Debug)]
pub struct ResponseStream {
    rx: mpsc::Receiver<Result<Vec<u8>, Error>>,
    guard: CancelOnDrop,
}

impl futures_core::Stream for ResponseStream {
    type Item = Result<Vec<u8>, Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let poll = self.rx.poll_recv(cx);
        if let Poll::Ready(None) = poll {
            // Ended by the peripheral: nothing to cancel.
            self.guard.call = None;
        }
        poll
    }
}

/// An open central→peripheral stream ([`Client::client_stream`]).
#[derive(Debug)]
pub struct Upload {
    cmds: mpsc::Sender<Cmd>,
    call: CallId,
    response: Option<oneshot::Receiver<Result<Vec<u8>, Error>>>,
    guard: CancelOnDrop,
}

impl Upload {
    /// Sends one item (protobuf bytes). Waits while the link is congested.
    pub async fn send(&mut self, item: Vec<u8>) -> Result<(), Error> {
        let (reply, rx) = oneshot::channel();
        let cmd = Cmd::Item(Box::new(Item {
            call: self.call,
            data: item,
            reply,
        }));
        self.cmds.send(cmd).await.map_err(|_| Error::Closed)?;
        match rx.await.map_err(|_| Error::Closed)? {
            Ok(()) => Ok(()),
            // The call already failed (e.g. the peripheral refused an item): report why.
            Err(Error::Call(CallError::UnknownCall)) => Err(self.failure().await),
            Err(e) => Err(e),
        }
    }

    async fn failure(&mut self) -> Error {
        match self.response.take() {
            Some(rx) => match rx.await {
                Ok(Err(e)) => e,
                _ => Error::Closed,
            },
            None => Error::Closed,
        }
    }

    /// Ends the stream and returns the peripheral's final response.
    pub async fn finish(mut self) -> Result<Vec<u8>, Error> {
        let (reply, rx) = oneshot::channel();
        let cmd = Cmd::Finish {
            call: self.call,
            reply,
        };
        self.cmds.send(cmd).await.map_err(|_| Error::Closed)?;
        if let Err(e) = rx.await.map_err(|_| Error::Closed)? {
            return Err(match e {
                Error::Call(CallError::UnknownCall) => self.failure().await,
                e => e,
            });
        }
        let response = self.response.take().ok_or(Error::Closed)?;
        let result = response.await.map_err(|_| Error::Closed)?;
        self.guard.call = None;
        result
    }
}

/// Writes the connection task makes at once per turn of its loop before it lets its other work
/// (received PDUs, commands, timers) have a turn.
const WRITE_ROUNDS: usize = 8;

/// Hashes a [`CallId`] with one multiplication instead of SipHash (about 150 instructions per
/// call fewer). Call ids are a counter the connection assigns itself, never a peer's value, so
/// there is no flooding to defend against; the odd multiplier keeps consecutive ids in distinct
/// buckets and spreads them over the top bits hashbrown uses as tags.
#[derive(Default)]
struct CallIdHasher(u64);

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
type Sinks = HashMap<CallId, Sink, std::hash::BuildHasherDefault<CallIdHasher>>;

/// The connection task.
struct Task {
    central: HostCentral,
    clock: Clock,
    cmds: mpsc::Receiver<Cmd>,
    sinks: Sinks,
    blocked: VecDeque<Cmd>,
    pinning: PinPolicy,
    device_id: String,
    ready: Option<oneshot::Sender<Result<ConnectionInfo, Error>>>,
    identity_error: Option<String>,
    idle_release: Duration,
    att_mtu: usize,
    peer_id: String,
}

impl Task {
    /// The connection's future. Not an async fn: an async fn keeps its moved arguments twice in
    /// its future (the argument and the local it is moved into), which held the 3.9 KB task
    /// state twice in every idle connection's task; an `async move` block uses its captures in
    /// place.
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn would hold the task state twice"
    )]
    fn run<Tx: LinkTx, Rx: LinkRx>(
        mut self,
        mut tx: Tx,
        mut rx: Rx,
    ) -> impl Future<Output = ()> + Send + 'static {
        async move {
            // The transmit buffer (one PDU); given back while the connection is idle.
            let mut buf = Vec::new();
            let mut idle = IdleRelease::new(self.idle_release);
            let mut timer = Timer::new();
            let mut fresh: Option<tokio::time::Instant> = None;
            loop {
                self.drain_events();
                self.retry_blocked();
                // One clock read per turn of the loop: the one the last branch made (nothing
                // between it and here waits or runs user code), or a fresh one.
                let tnow = fresh.take().unwrap_or_else(tokio::time::Instant::now);
                let now = self.clock.at(tnow);
                // Move what the protocol wants to send into the link's queue and write it at once
                // rather than on the next turn of the loop: a stream link almost always takes the
                // bytes straight away. While a write finishes at once, refill and write again
                // (bounded by WRITE_ROUNDS); the loop always ends with a refill, so whatever is left
                // sits in the link's queue for the `flush` branch below, which is cancel-safe.
                let mut rounds = 0;
                loop {
                    while !tx.is_full() {
                        // Each PDU written where the link queues it (no copy on stream links),
                        // with room for what is queued: a long container (long-container
                        // extension) only when a long message is waiting.
                        let len = self.central.transmit_len().max(4);
                        let central = &mut self.central;
                        match tx.queue_with(len, &mut buf, |out| central.poll_transmit(now, out)) {
                            Ok(Some(_)) => {}
                            Ok(None) => break,
                            Err(e) => {
                                self.fail_all(Error::Link(e));
                                return;
                            }
                        }
                    }
                    if !tx.has_pending() || rounds == WRITE_ROUNDS {
                        break;
                    }
                    rounds += 1;
                    match tx.flush().now_or_never() {
                        Some(Ok(())) => {}
                        Some(Err(e)) => {
                            self.fail_all(Error::Link(e));
                            return;
                        }
                        None => break,
                    }
                }
                if self.central.is_closed() && !tx.has_pending() {
                    self.fail_all(Error::Closed);
                    let _ = tx.close().await;
                    return;
                }
                // Give buffers back once the connection has been idle for a while.
                if idle.update(self.sinks.is_empty() && !tx.has_pending(), tnow) {
                    self.central.release_memory();
                    rx.release_memory();
                    tx.release_memory();
                }
                if idle.released() {
                    buf = Vec::new();
                }
                let protocol_deadline = self.central.poll_timeout().map(|t| self.clock.to_tokio(t));
                let idle_deadline = idle.deadline();
                timer.set(
                    [protocol_deadline, idle_deadline]
                        .into_iter()
                        .flatten()
                        .min(),
                );
                tokio::select! {
                    flushed = tx.flush(), if tx.has_pending() => {
                        if let Err(e) = flushed {
                            self.fail_all(Error::Link(e));
                            return;
                        }
                    }
                    pdu = rx.recv() => match pdu {
                        Ok(Some(pdu)) => {
                            let t = tokio::time::Instant::now();
                            fresh = Some(t);
                            // Events are drained every iteration, so the queue has room.
                            let _ = self.central.handle_input(self.clock.at(t), pdu);
                        }
                        Ok(None) => {
                            self.fail_all(Error::Closed);
                            return;
                        }
                        Err(e) => {
                            self.fail_all(Error::Link(e));
                            return;
                        }
                    },
                    () = timer.fired(), if timer.is_armed() => {
                        self.central.handle_timeout(self.clock.now());
                    }
                    cmd = self.cmds.recv(), if self.blocked.is_empty() => match cmd {
                        Some(Cmd::Close { reply }) => {
                            self.central.close(self.clock.now());
                            self.drain_events();
                            let _ = tx.close().await;
                            let _ = reply.send(());
                            self.fail_all(Error::Closed);
                            return;
                        }
                        Some(cmd) => {
                            let t = tokio::time::Instant::now();
                            fresh = Some(t);
                            self.apply(self.clock.at(t), cmd);
                        }
                        None => {
                            // Every handle is gone.
                            self.central.close(self.clock.now());
                            let _ = tx.close().await;
                            return;
                        }
                    },
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
                self.central.accept_identity(now);
            }
            Err(TofuError::Mismatch { pinned, presented }) => {
                self.identity_error = Some(format!(
                    "{} presented key {} but {} is pinned in {}; if the device was re-keyed, remove \
                     its entry or connect with the new key trusted explicitly",
                    self.device_id,
                    to_hex(&presented),
                    to_hex(&pinned),
                    store.path().display()
                ));
                self.central.reject_identity(now);
            }
            Err(TofuError::Store(e)) => {
                self.identity_error = Some(format!("cannot use the known-keys store: {e}"));
                self.central.reject_identity(now);
            }
            Err(e) => {
                self.identity_error = Some(e.to_string());
                self.central.reject_identity(now);
            }
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
    use super::*;

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
            idle_release: Duration::from_secs(1),
            att_mtu: 247,
            peer_id: String::new(),
        };
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
