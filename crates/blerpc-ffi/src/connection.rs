//! [`connect`] and the [`Connection`] it gives: every method forwards to the runtime's
//! [`Client`], whose connection task (on this crate's [runtime](crate::runtime)) drives the
//! core's call table.
//!
//! Calls are polled on the caller's thread (UniFFI's tokio compatibility layer): when the
//! foreign task is cancelled, UniFFI drops the call's future and the client cancels the call
//! (its slot and any late answer are released); the connection stays usable. Where the
//! foreign side does not drop the future (Swift), each operation has a variant that takes a
//! [`CancelToken`](crate::CancelToken) (in [`cancel`](crate::cancel)) and ends it the same way.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use blerpc::Client;
use blerpc::client::TofuOutcome;
use blerpc::known_keys::to_hex;
use blerpc::link::connect::connect as connect_url;
use blerpc::link::url::LinkUrl;

use crate::cancel::CancelToken;
use crate::stream::{BidiStream, ResponseStream, Upload};
use crate::{BlerpcError, ConnectOptions, code};

/// Connects to the peripheral at `url` (`tcp://HOST:PORT`, `tls://HOST:PORT`,
/// `ws://HOST:PORT/PATH`, `wss://…`) and runs setup: TIMEOUT, CAPABILITIES and the key
/// exchange, with the identity check `options` ask for. Returns once calls can be made.
///
/// The link and the connection's task run on this crate's own runtime; cancelling the
/// foreign task that awaits this stops the attempt.
#[uniffi::export(async_runtime = "tokio")]
pub async fn connect(url: String, options: ConnectOptions) -> Result<Arc<Connection>, BlerpcError> {
    open_url(url, options).await
}

/// [`connect`]'s work.
pub(crate) async fn open_url(
    url: String,
    options: ConnectOptions,
) -> Result<Arc<Connection>, BlerpcError> {
    let link_url: LinkUrl = url
        .parse()
        .map_err(|e| BlerpcError::invalid(format!("{e}")))?;
    let resolved = options.resolve()?;
    open(&url, resolved.timeout, async move {
        connect_url(&link_url, &resolved.link, resolved.config).await
    })
    .await
}

/// Runs `attempt` (a link's opening and setup) on this crate's runtime, where the connection's
/// task then lives, within `timeout`; `target` names the peer in errors.
pub(crate) async fn open<E>(
    target: &str,
    timeout: Duration,
    attempt: impl Future<Output = Result<Client, E>> + Send + 'static,
) -> Result<Arc<Connection>, BlerpcError>
where
    E: Into<BlerpcError> + Send + 'static,
{
    let attempt = crate::runtime()?.spawn(tokio::time::timeout(timeout, attempt));
    let client = AbortOnDrop(attempt)
        .await
        .map_err(|e| {
            BlerpcError::connection(code::LINK_FAILED, format!("connecting to {target}: {e}"))
        })?
        .map_err(|_| BlerpcError::Setup {
            code: code::SETUP_TIMEOUT.to_string(),
            detail: format!(
                "no connection to {target} within {} ms (connect_timeout_ms)",
                timeout.as_millis()
            ),
        })?
        .map_err(Into::into)?;
    Ok(Arc::new(Connection { client }))
}

/// A task on the runtime that is aborted if whoever awaits it goes away.
pub(crate) struct AbortOnDrop<T>(pub(crate) tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A connection to one peripheral. Calls may run concurrently: up to the core's four in
/// flight (a fifth at once fails with `TOO_MANY_CALLS`), one stream at a time
/// (`STREAM_ACTIVE`), as bleRPC has it. The connection closes on
/// [`Connection::disconnect`], when the peripheral goes away, or when the object is freed.
#[derive(Debug, uniffi::Object)]
pub struct Connection {
    client: Client,
}

/// Whether trust on first use pinned the peripheral's key on this connection or found it
/// pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, uniffi::Enum)]
pub enum Pinned {
    /// No key was pinned for the device: this one now is.
    FirstUse,
    /// The key is the one pinned for the device.
    Matched,
}

/// What setup established, as the runtime reports it.
#[derive(Clone, Debug, PartialEq, Eq, uniffi::Record)]
pub struct ConnectionInfo {
    /// `true` when calls are end-to-end encrypted.
    pub encrypted: bool,
    /// The peripheral's Ed25519 identity key, 64 hex digits (when encrypted).
    pub peer_identity: Option<String>,
    /// With trust on first use: whether this connection pinned the key or found it pinned.
    pub pinned: Option<Pinned>,
    /// The link's name for the peer (its URL, `tcp://HOST:PORT`); known-keys pins are kept
    /// under it unless `device_id` was given.
    pub peer_id: String,
    /// The link's ATT MTU (containers are at most 3 bytes shorter).
    pub att_mtu: u32,
    /// The peripheral's TIMEOUT value in milliseconds.
    pub peer_timeout_ms: u16,
    /// The largest request the peripheral accepts, in bytes on the wire (after encryption).
    pub max_request_len: Option<u32>,
    /// The largest response the peripheral sends, in bytes on the wire.
    pub max_response_len: Option<u32>,
    /// `true` when the large-message extension is in force (messages over 65,535 bytes).
    pub large_messages: bool,
    /// `true` when the long-container extension is in force (16 KiB containers).
    pub long_containers: bool,
}

#[uniffi::export(async_runtime = "tokio")]
impl Connection {
    /// A unary call: sends `request` (the request message's protobuf bytes) to `command`
    /// (the rpc's wire name, e.g. `echo`) and returns the response's protobuf bytes. With
    /// `deadline_ms`, the call fails with `TIMEOUT` if its answer has not come that many
    /// milliseconds from now (without it, the protocol's 5 s call timeout applies).
    pub async fn call(
        &self,
        command: String,
        request: Vec<u8>,
        deadline_ms: Option<u32>,
    ) -> Result<Vec<u8>, BlerpcError> {
        self.unary(command, request, deadline_ms).await
    }

    /// A peripheral→central stream: sends `request` to `command` and returns the stream of
    /// its responses.
    pub async fn server_stream(
        &self,
        command: String,
        request: Vec<u8>,
    ) -> Result<Arc<ResponseStream>, BlerpcError> {
        self.open_stream(command, request, Arc::default()).await
    }

    /// A central→peripheral stream to `command`: send its items, then finish it for the
    /// peripheral's response.
    pub async fn client_stream(&self, command: String) -> Result<Arc<Upload>, BlerpcError> {
        self.open_upload(command, Arc::default()).await
    }

    /// A stream both ways to `command` (the streams extension: without it in force the call
    /// fails with `CALL_FAILED`): send items and finish this side's half while reading
    /// the peripheral's.
    pub async fn bidi_stream(&self, command: String) -> Result<Arc<BidiStream>, BlerpcError> {
        self.open_bidi(command, Arc::default()).await
    }

    /// Closes the connection: calls in flight fail with `CLOSED`, and so does every later one.
    /// Returns once it is closed ([`Connection::is_closed`] is then `true`).
    pub async fn disconnect(&self) {
        self.client.close().await;
        self.client.closed().await
    }

    /// Returns once the connection has closed: by [`Connection::disconnect`], by the
    /// peripheral, or because the link was lost.
    pub async fn wait_closed(&self) {
        self.client.closed().await
    }

    /// The peripheral's diagnostics (`docs/protocol.md` "Diagnostics": the link as the
    /// peripheral sees it, uptime, version, counters, memory marks) as JSON: each field its
    /// value or `{"unavailable": "why"}`. A peripheral that does not announce the extension
    /// is not asked: every field says so.
    pub async fn diagnostics(&self) -> Result<String, BlerpcError> {
        let d = self.client.diagnostics().await?;
        serde_json::to_string(&d)
            .map_err(|e| BlerpcError::invalid(format!("the diagnostics as JSON: {e}")))
    }
}

impl Connection {
    /// The runtime's client under this connection (a report runs its calls on it).
    #[cfg_attr(not(feature = "report"), allow(dead_code))]
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// [`Connection::call`]'s work.
    pub(crate) async fn unary(
        &self,
        command: String,
        request: Vec<u8>,
        deadline_ms: Option<u32>,
    ) -> Result<Vec<u8>, BlerpcError> {
        let result = match deadline_ms {
            Some(ms) => {
                let deadline = tokio::time::Instant::now() + Duration::from_millis(u64::from(ms));
                self.client.call_until(&command, request, deadline).await
            }
            None => self.client.call(&command, request).await,
        };
        Ok(result?)
    }

    /// Opens a server stream that `cancel` (kept by the stream) cancels.
    pub(crate) async fn open_stream(
        &self,
        command: String,
        request: Vec<u8>,
        cancel: Arc<CancelToken>,
    ) -> Result<Arc<ResponseStream>, BlerpcError> {
        let stream = cancel
            .guard(async { Ok(self.client.server_stream(&command, request).await?) })
            .await?;
        Ok(Arc::new(ResponseStream::new(stream, cancel)))
    }

    /// Opens a bidirectional stream that `cancel` (kept by the stream) cancels.
    pub(crate) async fn open_bidi(
        &self,
        command: String,
        cancel: Arc<CancelToken>,
    ) -> Result<Arc<BidiStream>, BlerpcError> {
        let stream = cancel
            .guard(async { Ok(self.client.bidi_stream(&command).await?) })
            .await?;
        Ok(Arc::new(BidiStream::new(stream, cancel)))
    }

    /// Opens an upload that `cancel` (kept by the upload) cancels.
    pub(crate) async fn open_upload(
        &self,
        command: String,
        cancel: Arc<CancelToken>,
    ) -> Result<Arc<Upload>, BlerpcError> {
        let upload = cancel
            .guard(async { Ok(self.client.client_stream(&command).await?) })
            .await?;
        Ok(Arc::new(Upload::new(upload, cancel)))
    }
}

#[uniffi::export]
impl Connection {
    /// What setup established.
    pub fn info(&self) -> ConnectionInfo {
        let info = self.client.info();
        let (max_request_len, max_response_len) = match (&info.large_messages, &info.capabilities) {
            (Some(large), _) => (Some(large.max_request), Some(large.max_response)),
            (None, Some(caps)) => (
                Some(u32::from(caps.max_request)),
                Some(u32::from(caps.max_response)),
            ),
            (None, None) => (None, None),
        };
        ConnectionInfo {
            encrypted: info.encrypted,
            peer_identity: info.peer_identity.as_ref().map(|k| to_hex(k)),
            pinned: info.pinned.and_then(|p| match p {
                TofuOutcome::FirstUse => Some(Pinned::FirstUse),
                TofuOutcome::Matched => Some(Pinned::Matched),
                _ => None,
            }),
            peer_id: info.peer_id.clone(),
            att_mtu: u32::try_from(info.att_mtu).unwrap_or(u32::MAX),
            peer_timeout_ms: info.peer_timeout_ms,
            max_request_len,
            max_response_len,
            large_messages: info.large_messages.is_some(),
            long_containers: info.long_containers,
        }
    }

    /// `true` once the connection has closed (either side closed it, or the link was lost).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}
