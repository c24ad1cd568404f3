//! The client (central): connects over any [`Link`], runs the setup sequence and the key exchange,
//! and makes unary calls and streams in both directions.
//!
//! One task owns the connection: it drives the sans-IO [`Central`] and `select!`s over the link's
//! receive half, flushing its transmit half, the next protocol timeout, and commands from
//! [`Client`] handles. Handles are cheap to clone and can be used from many tasks at once.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use blerpc_proto::connection::{
    CallError, CallId, CallKind, Central, CentralConfig, CloseReason, ConfigError, Pinning,
    SetupPipelining,
};
use blerpc_proto::crypto::DefaultProvider;
pub use blerpc_proto::handshake::TofuOutcome;
use blerpc_proto::wire::capabilities::{Capabilities, LargeLimits};
use rand_core::OsRng;
use tokio::sync::{mpsc, oneshot};

mod task;

use crate::clock::Clock;
use crate::known_keys::{KnownKeysFile, to_hex};
use crate::link::{Link, LinkError};
use task::{Sinks, Task};

/// Calls in flight on one connection at most (the central's reassembly slots).
pub const MAX_CALLS_IN_FLIGHT: usize = 4;

pub(crate) type HostCentral =
    Central<DefaultProvider, OsRng, Vec<u8>, Vec<u8>, MAX_CALLS_IN_FLIGHT>;

/// Errors of the client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The link failed (its message is part of this one; not also the `source`).
    #[error("link error: {0}")]
    Link(LinkError),
    /// Connection setup failed (capabilities, key exchange, encryption requirement).
    #[error("connection setup failed: {0}")]
    Setup(CloseReason),
    /// The peripheral's identity key was refused.
    #[error("peripheral identity refused: {0}")]
    Identity(IdentityError),
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

/// Why a [`PinPolicy::KnownKeys`] client refused the peripheral's identity.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// A different key is pinned for this device: it was re-keyed, or this is not the device
    /// (a man in the middle).
    #[error(
        "{device} presented key {} but {} is pinned in {}",
        to_hex(presented),
        to_hex(pinned),
        store.display()
    )]
    Changed {
        /// The device id (the link's peer id).
        device: String,
        /// The key it presented.
        presented: [u8; 32],
        /// The key pinned for it.
        pinned: [u8; 32],
        /// The known-keys file.
        store: std::path::PathBuf,
    },
    /// The known-keys file could not be read, parsed or written (the connection is refused:
    /// fail-closed).
    #[error("cannot use the known-keys store: {0}")]
    Store(crate::known_keys::KnownKeysError),
}

impl From<LinkError> for Error {
    fn from(e: LinkError) -> Self {
        Error::Link(e)
    }
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
    /// With [`PinPolicy::KnownKeys`]: whether this connection pinned the identity
    /// ([`TofuOutcome::FirstUse`]) or found it pinned ([`TofuOutcome::Matched`]); `None` under
    /// the other policies.
    pub pinned: Option<TofuOutcome>,
}

pub(crate) enum Sink {
    Unary(oneshot::Sender<Result<Vec<u8>, Error>>),
    Stream(mpsc::Sender<Result<Vec<u8>, Error>>),
}

/// A command from a handle to the connection task. The large variants are boxed: the channel
/// allocates its slots 32 at a time, and every idle connection keeps one such block (16 bytes a
/// slot instead of 88).
pub(crate) enum Cmd {
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
pub(crate) enum Request {
    /// The protobuf data; the task frames it behind the command header (one copy).
    Data(Vec<u8>),
    /// The whole REQUEST command, the data encoded behind its header (`Client::call_message`):
    /// the call takes the buffer as it is.
    Framed(Vec<u8>),
}

pub(crate) struct Start {
    /// The command name (empty for a framed request, whose command carries it).
    name: String,
    request: Request,
    kind: CallKind,
    sink: Sink,
    /// Where the call id goes; `None` for unary calls, whose failure to start goes to the sink
    /// instead (one round trip through the task per call, not two).
    reply: Option<oneshot::Sender<Result<CallId, Error>>>,
}

pub(crate) struct Item {
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
            pinned: None,
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

    /// Completes once the connection has closed (the link failed or closed, or
    /// [`Client::close`]): what a holder of many connections (a gateway) waits on to notice a
    /// peripheral going away without polling.
    pub async fn closed(&self) {
        self.cmds.closed().await
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
