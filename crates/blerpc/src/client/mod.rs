//! The client (central): connects over any [`Link`], runs the setup sequence and the key exchange,
//! and makes unary calls and streams in both directions.
//!
//! One task owns the connection: it drives the core's sans-IO [`CallTable`] (the protocol's
//! `Central` and every call's bookkeeping, shared with the browser central and the bindings) and
//! `select!`s over the link's receive half, flushing its transmit half, the next protocol
//! timeout, and commands from [`Client`] handles. Handles are cheap to clone and can be used from
//! many tasks at once.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use blerpc_proto::connection::{CallError, CallKind, CentralConfig, ConfigError, SetupPipelining};
use blerpc_proto::crypto::DefaultProvider;
pub use blerpc_proto::handshake::TofuOutcome;
use blerpc_proto::table::{CallTable, Request, Ticket, Trust};
pub use blerpc_proto::table::{CentralError, IdentityError};
use blerpc_proto::wire::capabilities::{Capabilities, LargeLimits};
use rand_core::OsRng;
use tokio::sync::{mpsc, oneshot};

mod diagnostics;
mod task;

use crate::clock::Clock;
use crate::key_store::{KeyStore, PinStore};
use crate::known_keys::KnownKeysFile;
use crate::link::{Link, LinkError};
use task::{Out, Reply, Sink, Task, Tokio};

/// Calls in flight on one connection unless configured otherwise (the core's
/// `CentralConfig::max_calls_in_flight` default, and the call table's reassembly slots).
pub const DEFAULT_CALLS_IN_FLIGHT: usize = 4;

/// The most calls in flight a connection can be configured to keep
/// (`ClientConfig::central.max_calls_in_flight`). A connection configured above
/// [`DEFAULT_CALLS_IN_FLIGHT`] runs a call table of this many slots, which costs it more memory
/// idle (`docs/benchmarks/ble.md` "Calls in flight"); one at or below it keeps the smaller table.
pub const MAX_CALLS_IN_FLIGHT: usize = 8;

/// The core's call table as the tokio client runs it, with `N` call slots.
pub(crate) type HostTable<const N: usize = DEFAULT_CALLS_IN_FLIGHT> =
    CallTable<DefaultProvider, OsRng, Tokio, N>;

/// Errors of the client.
///
/// What the connection itself reports (setup, identity, a call's failure, closing, a stream
/// reader falling behind, the link lost under calls) is [`Error::Central`]: the core's
/// [`CentralError`], with the same texts and [codes](CentralError::code) every bleRPC central
/// (the browser's, the bindings') reports. The rest is this runtime's own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The link failed while connecting (its message is part of this one; not also the
    /// `source`). A link lost under calls is [`CentralError::Link`].
    #[error("link error: {0}")]
    Link(LinkError),
    /// What the connection reports: setup, identity, the call, closing, overflow.
    #[error(transparent)]
    Central(CentralError),
    /// A response did not decode (generated clients).
    #[error("response does not decode: {0}")]
    Decode(String),
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(ConfigError),
}

impl From<LinkError> for Error {
    fn from(e: LinkError) -> Self {
        Error::Link(e)
    }
}

impl From<CentralError> for Error {
    fn from(e: CentralError) -> Self {
        Error::Central(e)
    }
}

impl Error {
    /// A decode error from any displayable cause (used by generated clients).
    pub fn decode(e: impl std::fmt::Display) -> Self {
        Error::Decode(e.to_string())
    }

    /// The connection is closed.
    pub const CLOSED: Error = Error::Central(CentralError::Closed);

    /// The core's call error, when the call itself failed (a timeout, the peripheral's ERROR,
    /// BUSY, a local limit).
    pub fn call_error(&self) -> Option<CallError> {
        match self {
            Error::Central(e) => e.call_error(),
            _ => None,
        }
    }

    /// `true` when the connection or its link is gone (closed by either side, or lost).
    pub fn is_disconnected(&self) -> bool {
        matches!(
            self,
            Error::Link(_)
                | Error::Central(
                    CentralError::Closed
                        | CentralError::Link(_)
                        | CentralError::Call(CallError::Closed | CallError::NotReady)
                )
        )
    }
}

/// How the client decides to trust the peripheral's identity key.
#[derive(Clone, Debug)]
pub enum PinPolicy {
    /// Trust on first use, pins kept in this file (the default, at
    /// [`KnownKeysFile::default_path`]). A different key later is refused.
    KnownKeys(KnownKeysFile),
    /// Trust on first use, pins kept in a store the application provides (the bindings'
    /// foreign key store): the same decisions, another place to keep them.
    Store(Arc<dyn KeyStore>),
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
    /// Items a server stream buffers before the consumer must catch up. With the streams
    /// extension (a `blerpc` server) the peripheral waits for the consumer (the central's
    /// window, `central.stream_window`, is at most this); without it a stream whose consumer
    /// falls further behind ends with [`CentralError::StreamOverflow`]. Default 1,024.
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
                cancel: true,
                deadline: true,
                streams: true,
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
    /// With [`PinPolicy::KnownKeys`] or [`PinPolicy::Store`]: whether this connection pinned the identity
    /// ([`TofuOutcome::FirstUse`]) or found it pinned ([`TofuOutcome::Matched`]); `None` under
    /// the other policies.
    pub pinned: Option<TofuOutcome>,
}

/// A command from a handle to the connection task. The large variants are boxed: the channel
/// allocates its slots 32 at a time, and every idle connection keeps one such block (16 bytes a
/// slot instead of 88).
pub(crate) enum Cmd {
    Start(Box<Start>),
    Item(Box<Item>),
    Finish(Box<Finish>),
    Cancel {
        call: Ticket,
    },
    /// A unary call's future was dropped: cancel the calls whose receiver is gone.
    Reap,
    /// A stream's reader made room: the task's next turn grants the peripheral credit for it
    /// (the streams extension).
    Room,
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

/// One item of a stream's channel.
type StreamItem = Result<Vec<u8>, Error>;

pub(crate) struct Start {
    /// The command name (empty for a framed request, whose command carries it).
    name: String,
    /// The protobuf data ([`Request::Data`]), or the whole REQUEST command with the data encoded
    /// behind its header ([`Request::Framed`], `Client::call_message`): the call takes that
    /// buffer as it is.
    request: Request,
    kind: CallKind,
    /// Where the results go; unary calls get no ticket back (a failure to start goes to the
    /// sink: one round trip through the task per call, not two).
    sink: Sink,
    /// The caller's deadline for the whole call, kept by the connection's one timer.
    deadline: Option<tokio::time::Instant>,
}

pub(crate) struct Finish {
    call: Ticket,
    reply: Reply,
}

pub(crate) struct Item {
    call: Ticket,
    data: Vec<u8>,
    reply: Reply,
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
        // A stream's window never exceeds what its reader buffers (the streams extension).
        let buffer = u16::try_from(config.stream_buffer.max(1)).unwrap_or(u16::MAX);
        central_config.stream_window = central_config.stream_window.clamp(1, buffer);
        central_config.setup_pipelining = config
            .setup_pipelining
            .unwrap_or_else(|| link.setup_pipelining());
        let peer_id = link.peer_id();
        let first_use = |store| Trust::FirstUse {
            store,
            device_id: config.device_id.clone().unwrap_or_else(|| peer_id.clone()),
        };
        let trust = match config.pinning {
            PinPolicy::KnownKeys(file) => first_use(PinStore::File(file)),
            PinPolicy::Store(app) => first_use(PinStore::App(app)),
            PinPolicy::Trust(key) => Trust::Key(key),
            PinPolicy::NoPin => Trust::Anyone,
        };
        let shell = TaskConfig {
            command_buffer: config.command_buffer,
            idle_release: config.idle_release,
            peer_id,
        };
        // The smaller table unless more calls in flight are asked for (the core refuses more
        // than the table's slots).
        let (cmd_tx, ready_rx) = if central_config.max_calls_in_flight <= DEFAULT_CALLS_IN_FLIGHT {
            spawn_task::<DEFAULT_CALLS_IN_FLIGHT, L>(link, central_config, trust, shell)?
        } else {
            spawn_task::<MAX_CALLS_IN_FLIGHT, L>(link, central_config, trust, shell)?
        };
        let info = ready_rx.await.map_err(|_| Error::CLOSED)??;
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

    /// Starts a stream or an upload and waits for its ticket (or its failure to start).
    async fn start(
        &self,
        name: &str,
        request: Request,
        kind: CallKind,
        out: Out,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Ticket, Error> {
        let (reply, rx) = oneshot::channel();
        let cmd = Cmd::Start(Box::new(Start {
            name: name.to_string(),
            request,
            kind,
            sink: Sink {
                out,
                started: Some(reply),
            },
            deadline,
        }));
        self.cmds.send(cmd).await.map_err(|_| Error::CLOSED)?;
        // Dropped before it started (a timeout around it): the task reaps the abandoned call,
        // so it does not hold its slot and the stream lock.
        let guard = ReapOnDrop {
            cmds: &self.cmds,
            armed: true,
        };
        let result = rx.await.map_err(|_| Error::CLOSED)?;
        guard.disarm();
        result
    }

    /// A unary call: sends `request` (protobuf bytes) to command `name` and returns the
    /// response's protobuf bytes.
    pub async fn call(&self, name: &str, request: Vec<u8>) -> Result<Vec<u8>, Error> {
        self.unary(name.to_string(), Request::Data(request), None)
            .await
    }

    /// A unary call, as [`Client::call`], that ends by `deadline`: if its answer has not come
    /// by then, it fails with the core's timeout ([`Error::call_error`] is
    /// `Some(CallError::Timeout)`), whether it was still waiting to start or in flight. The
    /// connection's one timer keeps the deadline (no timer per call, as a
    /// `tokio::time::timeout` around [`Client::call`] would register).
    pub async fn call_until(
        &self,
        name: &str,
        request: Vec<u8>,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<u8>, Error> {
        self.unary(name.to_string(), Request::Data(request), Some(deadline))
            .await
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
        self.unary(String::new(), Request::Framed(frame(name, request)?), None)
            .await
    }

    async fn unary(
        &self,
        name: String,
        request: Request,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Vec<u8>, Error> {
        let (tx, rx) = oneshot::channel();
        let cmd = Cmd::Start(Box::new(Start {
            name,
            request,
            kind: CallKind::Unary,
            sink: Sink {
                out: Out::One(tx),
                started: None,
            },
            deadline,
        }));
        self.cmds.send(cmd).await.map_err(|_| Error::CLOSED)?;
        // A failure to start arrives here like a response. If this future is dropped, the task
        // cancels the call once it sees the receiver gone.
        let guard = ReapOnDrop {
            cmds: &self.cmds,
            armed: true,
        };
        let result = rx.await.map_err(|_| Error::CLOSED)?;
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
        self.open_server_stream(name, request, None).await
    }

    /// [`Client::server_stream`] that ends by `deadline`: the stream fails with the core's
    /// timeout if it has not ended by then. With the deadline extension in force the deadline
    /// travels with the request, and the peripheral's producer sees it and stops there.
    pub async fn server_stream_until(
        &self,
        name: &str,
        request: Vec<u8>,
        deadline: tokio::time::Instant,
    ) -> Result<ResponseStream, Error> {
        self.open_server_stream(name, request, Some(deadline)).await
    }

    async fn open_server_stream(
        &self,
        name: &str,
        request: Vec<u8>,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<ResponseStream, Error> {
        let (tx, rx) = self.stream_channel();
        let call = self
            .start(
                name,
                Request::Data(request),
                CallKind::ServerStream,
                Out::Stream(tx),
                deadline,
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
        let (tx, rx) = self.stream_channel();
        let request = Request::Framed(frame(name, request)?);
        let call = self
            .start("", request, CallKind::ServerStream, Out::Stream(tx), None)
            .await?;
        Ok(self.response_stream(rx, call))
    }

    /// A stream's channel: `stream_buffer` items and one slot more for the error that ends an
    /// overflowing stream.
    fn stream_channel(&self) -> (mpsc::Sender<StreamItem>, mpsc::Receiver<StreamItem>) {
        mpsc::channel(self.stream_buffer.saturating_add(1))
    }

    fn response_stream(
        &self,
        rx: mpsc::Receiver<Result<Vec<u8>, Error>>,
        call: Ticket,
    ) -> ResponseStream {
        ResponseStream {
            rx,
            taken: 0,
            guard: CancelOnDrop {
                cmds: self.cmds.clone(),
                call: Some(call),
            },
        }
    }

    /// A bidirectional stream (`rpc Chat(stream A) returns (stream B)`): items go both ways
    /// at once. [`BidiStream::send`] sends one (waiting while the peripheral has granted no
    /// room for more: the streams extension's flow control), [`BidiStream::finish`] ends this
    /// side's half, and the peripheral's items are the stream's items until it ends the call.
    /// Needs a peripheral that agreed to the streams extension (a `blerpc` server does);
    /// dropping the stream cancels the call.
    pub async fn bidi_stream(&self, name: &str) -> Result<BidiStream, Error> {
        let (tx, rx) = self.stream_channel();
        let call = self
            .start(
                name,
                Request::Data(Vec::new()),
                CallKind::BidiStream,
                Out::Stream(tx),
                None,
            )
            .await?;
        Ok(BidiStream {
            items: self.response_stream(rx, call),
            sender: BidiSender {
                cmds: self.cmds.clone(),
                call,
            },
        })
    }

    /// A central→peripheral stream: returns an [`Upload`] to send items on and finish.
    pub async fn client_stream(&self, name: &str) -> Result<Upload, Error> {
        let (tx, rx) = oneshot::channel();
        let call = self
            .start(
                name,
                Request::Data(Vec::new()),
                CallKind::ClientStream,
                Out::One(tx),
                None,
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

    /// Closes the connection (every call in flight fails with [`CentralError::Closed`]).
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

    /// Completes once the connection has closed (the link failed or closed, or
    /// [`Client::close`]): what a holder of many connections (a gateway) waits on to notice a
    /// peripheral going away without polling.
    pub async fn closed(&self) {
        self.cmds.closed().await
    }
}

/// What the connection task takes from [`ClientConfig`] besides the core's configuration.
struct TaskConfig {
    command_buffer: usize,
    idle_release: Duration,
    peer_id: String,
}

/// A started connection task: its command sender and where setup's outcome comes.
type Started = (
    mpsc::Sender<Cmd>,
    oneshot::Receiver<Result<ConnectionInfo, Error>>,
);

/// Starts the connection task on `link` with a call table of `N` slots.
fn spawn_task<const N: usize, L: Link>(
    link: L,
    central_config: blerpc_proto::connection::CentralConfig,
    trust: Trust<PinStore>,
    shell: TaskConfig,
) -> Result<Started, Error> {
    let clock = Clock::new();
    let table = HostTable::<N>::new(
        central_config,
        DefaultProvider::default(),
        OsRng,
        clock.now(),
        trust,
    )
    .map_err(Error::Config)?;
    let (cmd_tx, cmd_rx) = mpsc::channel(shell.command_buffer.max(1));
    let (ready_tx, ready_rx) = oneshot::channel();
    let task = Task {
        table,
        clock,
        cmds: cmd_rx,
        ready: Some(ready_tx),
        idle_release: shell.idle_release,
        att_mtu: link.att_mtu(),
        peer_id: shell.peer_id,
    };
    let (tx, rx) = link.split();
    tokio::spawn(task.run(tx, rx));
    Ok((cmd_tx, ready_rx))
}

/// Cancels a call if the future or stream waiting for it is dropped.
#[derive(Debug)]
struct CancelOnDrop {
    cmds: mpsc::Sender<Cmd>,
    call: Option<Ticket>,
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
    let refused = |e| Error::Central(CentralError::Call(e));
    if name.is_empty() || name.len() > blerpc_proto::wire::command::MAX_NAME_LEN {
        return Err(refused(CallError::InvalidName));
    }
    if data_len > blerpc_proto::wire::command::MAX_LARGE_DATA_LEN {
        return Err(refused(CallError::DataTooLong { len: data_len }));
    }
    let header_len = Command::header_len_large(name.len(), data_len);
    // One allocation of the whole command: the header written in place, the data appended.
    let mut command = Vec::with_capacity(header_len.saturating_add(data_len));
    command.resize(header_len, 0);
    Command::emit_header_large(CommandType::Request, name, data_len, &mut command)
        .map_err(|_| refused(CallError::InvalidName))?;
    Ok(crate::__private::encode_into(request, command))
}

/// Items a stream's reader takes before it tells the connection task it made room (and when it
/// has taken all there were): the task then grants the peripheral credit for them (the streams
/// extension), as soon as that is worth a CREDIT.
const ROOM_NUDGE: u32 = 8;

/// The responses of a peripheral→central stream ([`Client::server_stream`]).
#[derive(Debug)]
pub struct ResponseStream {
    rx: mpsc::Receiver<Result<Vec<u8>, Error>>,
    /// Items taken since the task was last told.
    taken: u32,
    guard: CancelOnDrop,
}

impl ResponseStream {
    /// Tells the task the reader made room. Best effort: a full command channel means the
    /// task has turns coming, and each turn grants what room there is.
    fn nudge(&mut self) {
        if self.guard.cmds.try_send(Cmd::Room).is_ok() {
            self.taken = 0;
        }
    }
}

impl futures_core::Stream for ResponseStream {
    type Item = Result<Vec<u8>, Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let poll = self.rx.poll_recv(cx);
        match &poll {
            Poll::Ready(Some(_)) => {
                self.taken += 1;
                if self.taken >= ROOM_NUDGE {
                    self.nudge();
                }
            }
            // Ended by the peripheral: nothing to cancel.
            Poll::Ready(None) => self.guard.call = None,
            // All taken: the peripheral may be waiting for this room.
            Poll::Pending if self.taken > 0 => self.nudge(),
            Poll::Pending => {}
        }
        poll
    }
}

/// An open bidirectional stream ([`Client::bidi_stream`]): send items and finish this side's
/// half; the peripheral's items are this stream's items.
#[derive(Debug)]
pub struct BidiStream {
    items: ResponseStream,
    sender: BidiSender,
}

impl BidiStream {
    /// Sends one item (protobuf bytes). Waits while the link is congested or the peripheral
    /// has granted no room for another item.
    pub async fn send(&self, item: Vec<u8>) -> Result<(), Error> {
        self.sender.send(item).await
    }

    /// Ends this side's half (no more items); the peripheral's items keep coming until it ends
    /// the call.
    pub async fn finish(&self) -> Result<(), Error> {
        self.sender.finish().await
    }

    /// A handle that sends on this stream from elsewhere (another task) while this one reads.
    pub fn sender(&self) -> BidiSender {
        self.sender.clone()
    }
}

/// Sends on a [`BidiStream`] ([`BidiStream::sender`]).
#[derive(Clone, Debug)]
pub struct BidiSender {
    cmds: mpsc::Sender<Cmd>,
    call: Ticket,
}

impl BidiSender {
    /// As [`BidiStream::send`].
    pub async fn send(&self, item: Vec<u8>) -> Result<(), Error> {
        queue_item(&self.cmds, self.call, item).await
    }

    /// As [`BidiStream::finish`].
    pub async fn finish(&self) -> Result<(), Error> {
        queue_finish(&self.cmds, self.call).await
    }
}

/// Sends one item of stream `call` (an upload's or a bidirectional stream's) through the
/// connection task; completes once it is queued for the link.
async fn queue_item(cmds: &mpsc::Sender<Cmd>, call: Ticket, data: Vec<u8>) -> Result<(), Error> {
    let (reply, rx) = oneshot::channel();
    let cmd = Cmd::Item(Box::new(Item {
        call,
        data,
        reply: Reply(reply),
    }));
    cmds.send(cmd).await.map_err(|_| Error::CLOSED)?;
    rx.await.map_err(|_| Error::CLOSED)?
}

/// Ends this side of stream `call` (STREAM_END_C2P); completes once it is queued for the link.
async fn queue_finish(cmds: &mpsc::Sender<Cmd>, call: Ticket) -> Result<(), Error> {
    let (reply, rx) = oneshot::channel();
    let cmd = Cmd::Finish(Box::new(Finish {
        call,
        reply: Reply(reply),
    }));
    cmds.send(cmd).await.map_err(|_| Error::CLOSED)?;
    rx.await.map_err(|_| Error::CLOSED)?
}

impl futures_core::Stream for BidiStream {
    type Item = Result<Vec<u8>, Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Pin::new(&mut self.items).poll_next(cx)
    }
}

/// An open central→peripheral stream ([`Client::client_stream`]).
#[derive(Debug)]
pub struct Upload {
    cmds: mpsc::Sender<Cmd>,
    call: Ticket,
    response: Option<oneshot::Receiver<Result<Vec<u8>, Error>>>,
    guard: CancelOnDrop,
}

impl Upload {
    /// Sends one item (protobuf bytes). Waits while the link is congested.
    pub async fn send(&mut self, item: Vec<u8>) -> Result<(), Error> {
        match queue_item(&self.cmds, self.call, item).await {
            Ok(()) => Ok(()),
            // The call already failed (e.g. the peripheral refused an item): report why.
            Err(e) if e.call_error() == Some(CallError::UnknownCall) => Err(self.failure().await),
            Err(e) => Err(e),
        }
    }

    async fn failure(&mut self) -> Error {
        match self.response.take() {
            Some(rx) => match rx.await {
                Ok(Err(e)) => e,
                _ => Error::CLOSED,
            },
            None => Error::CLOSED,
        }
    }

    /// Ends the stream and returns the peripheral's final response.
    pub async fn finish(mut self) -> Result<Vec<u8>, Error> {
        if let Err(e) = queue_finish(&self.cmds, self.call).await {
            return Err(if e.call_error() == Some(CallError::UnknownCall) {
                self.failure().await
            } else {
                e
            });
        }
        let response = self.response.take().ok_or(Error::CLOSED)?;
        let result = response.await.map_err(|_| Error::CLOSED)?;
        self.guard.call = None;
        result
    }
}
