//! The WebSocket link: one binary message per container ([tokio-tungstenite]), over TCP
//! (`ws://`) or, with the `tls` feature, over TLS (`wss://`, configured with the TLS link's
//! `TlsClientConfig` / `TlsServerConfig`: see `connect_tls` and `WsAcceptor::bind_tls`).
//!
//! ```text
//! WebSocket message (binary, opcode 0x2) = exactly one container, at most att_mtu - 3 bytes
//! ```
//!
//! **Errors.** A text message, a binary message that is not exactly one container, or a message
//! longer than `att_mtu - 3` fails [`LinkRx::recv`] with [`LinkError::Framing`] (the peer broke
//! the link contract). A close frame, or the TCP connection ending, is the normal end:
//! `Ok(None)`.
//!
//! **Pings.** tungstenite answers a ping with a pong by itself, and writes that pong out on the
//! next read. [`LinkRx::recv`] reads continuously (the runtime always waits on it), so pongs go
//! out even when the link has nothing to send and the transmit half is never flushed. Each end
//! also pings a quiet peer ([`WsOptions::ping_interval`], 60 s) and fails the link when nothing
//! comes back within [`WsOptions::pong_timeout`] (30 s), so a vanished peer is found while the
//! connection is idle, through proxies too. The check runs once per interval: a ping goes out
//! after one to two intervals without a frame. The keepalive has no timer of its own: the
//! receive half gives its next check as [`LinkRx::poll_timeout`], the connection's one timer
//! (a [`Client`](crate::Client)'s or a [`Server`](crate::Server)'s) serves it with the
//! protocol's deadlines and calls [`LinkRx::handle_timeout`], which queues the ping for the
//! transmit half to flush. Halves driven by other code ping only if it does the same.
//!
//! **Memory.** tungstenite's defaults (128 KiB read buffer, allocated and zero-filled per
//! connection; 64 MiB messages) suit few busy connections. This link uses
//! [`TcpOptions::read_buffer_size`] (4 KiB by default) for the read buffer and as the write batch,
//! and caps messages and frames at one container, so a peer cannot make a connection buffer more
//! than that (`tests/ws.rs`, `idle_connection_memory`, counts the heap of idle connections).
//!
//! **Path.** Any request path is accepted unless [`WsOptions::path`] requires one (others get
//! 404). **Peer ids:** `ws://HOST:PORT/PATH` (or `wss://`) as dialled on the client; the remote
//! socket address and the request path on the server.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use blerpc_proto::wire::container::Container;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Bytes, Message};

use super::tcp::{self, TcpOptions, check_pdu};
use super::url::{LinkUrl, authority};
use super::{Link, LinkError, LinkRx, LinkTx};

/// Options of the WebSocket link.
#[derive(Clone, Debug)]
pub struct WsOptions {
    /// MTU, `TCP_NODELAY`, queue limit, buffer size, handshake limits (see [`TcpOptions`]).
    pub tcp: TcpOptions,
    /// Acceptors only: the request path clients must use (e.g. `/blerpc`); others get 404.
    /// Default: any path.
    pub path: Option<String>,
    /// How often to check for a quiet peer: one that sent no frame for a whole interval gets a
    /// WebSocket ping (so a ping follows one to two intervals of silence); `None`: never.
    /// Unlike TCP keepalive ([`TcpOptions::keepalive`], which also applies), a ping crosses
    /// proxies and load balancers and reaches the peer itself. Default 60 s.
    pub ping_interval: Option<Duration>,
    /// A ping not followed by any frame from the peer within this time fails the link
    /// ([`LinkError::Io`] with `TimedOut`: the peer is gone). Default 30 s.
    pub pong_timeout: Duration,
    /// Clients only: more headers for the upgrade request, e.g. `("Authorization", "Bearer
    /// …")` for a device gateway's relayed link. Default none.
    pub headers: Vec<(String, String)>,
}

impl Default for WsOptions {
    fn default() -> Self {
        WsOptions {
            tcp: TcpOptions::default(),
            path: None,
            ping_interval: Some(Duration::from_secs(60)),
            pong_timeout: Duration::from_secs(30),
            headers: Vec::new(),
        }
    }
}

impl WsOptions {
    fn keepalive(&self) -> Option<(Duration, Duration)> {
        self.ping_interval
            .map(|i| (i.max(Duration::from_millis(10)), self.pong_timeout))
    }

    fn ws_config(&self) -> WebSocketConfig {
        let max = self.tcp.max_container();
        // Buffers sized for classic containers: they grow for a long one when it arrives, so
        // idle connections stay small.
        let buffer = self
            .tcp
            .read_buffer_size
            .max(self.tcp.classic_max_container())
            .max(64);
        WebSocketConfig::default()
            .read_buffer_size(buffer)
            .write_buffer_size(buffer)
            .max_message_size(Some(max))
            .max_frame_size(Some(max))
    }
}

/// The byte stream under the WebSocket: plain TCP or TLS.
#[derive(Debug)]
pub enum WsStream {
    /// `ws://`.
    Plain(TcpStream),
    /// `wss://`.
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl AsyncRead for WsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WsStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            WsStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WsStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            WsStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WsStream::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            WsStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WsStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            WsStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

fn ws_error(e: tungstenite::Error) -> LinkError {
    use tungstenite::Error as E;
    match e {
        E::ConnectionClosed | E::AlreadyClosed => LinkError::Closed,
        E::Io(e) => LinkError::Io(e),
        E::Capacity(e) => LinkError::Framing(format!("WebSocket message too large: {e}")),
        e => LinkError::Transport(format!("WebSocket: {e}")),
    }
}

fn url_error(e: impl std::fmt::Display) -> LinkError {
    LinkError::Transport(e.to_string())
}

/// Connects to `ws://HOST:PORT/PATH`. For `wss://` use `connect_tls` (feature `tls`).
/// Bounded by [`TcpOptions::handshake_timeout`].
pub async fn connect(url: &str, options: &WsOptions) -> Result<WsLink, LinkError> {
    let parsed: LinkUrl = url.parse().map_err(url_error)?;
    let authority = match &parsed {
        LinkUrl::Ws {
            secure: false,
            host,
            port,
            ..
        } => authority(host, *port),
        LinkUrl::Ws { secure: true, .. } => {
            return Err(LinkError::Transport(format!(
                "`{url}` needs TLS: use ws::connect_tls (feature `tls`)"
            )));
        }
        _ => return Err(LinkError::Transport(format!("`{url}` is not a ws:// URL"))),
    };
    tcp::timed(options.tcp.handshake_timeout, "WebSocket connect", async {
        let stream = TcpStream::connect(authority).await?;
        stream.set_nodelay(options.tcp.nodelay)?;
        client_handshake(&parsed, WsStream::Plain(stream), options).await
    })
    .await
}

/// Connects to `wss://HOST:PORT/PATH` (or `ws://`, then without TLS), verifying the server with
/// `tls`. Bounded by [`TcpOptions::handshake_timeout`].
#[cfg(feature = "tls")]
pub async fn connect_tls(
    url: &str,
    tls: &super::tls::TlsClientConfig,
    options: &WsOptions,
) -> Result<WsLink, LinkError> {
    let parsed: LinkUrl = url.parse().map_err(url_error)?;
    let LinkUrl::Ws {
        secure, host, port, ..
    } = &parsed
    else {
        return Err(LinkError::Transport(format!(
            "`{url}` is not a ws:// or wss:// URL"
        )));
    };
    tcp::timed(options.tcp.handshake_timeout, "WebSocket connect", async {
        let stream = TcpStream::connect(authority(host, *port)).await?;
        stream.set_nodelay(options.tcp.nodelay)?;
        let stream = if *secure {
            WsStream::Tls(Box::new(tokio_rustls::TlsStream::Client(
                tls.handshake(host, stream).await?,
            )))
        } else {
            WsStream::Plain(stream)
        };
        client_handshake(&parsed, stream, options).await
    })
    .await
}

async fn client_handshake(
    url: &LinkUrl,
    stream: WsStream,
    options: &WsOptions,
) -> Result<WsLink, LinkError> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
    let peer = url.to_string();
    let mut request = peer.as_str().into_client_request().map_err(url_error)?;
    for (name, value) in &options.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(url_error)?;
        let value = HeaderValue::from_str(value).map_err(url_error)?;
        request.headers_mut().append(name, value);
    }
    let (ws, _response) =
        tokio_tungstenite::client_async_with_config(request, stream, Some(options.ws_config()))
            .await
            .map_err(|e| LinkError::Transport(format!("WebSocket handshake with {peer}: {e}")))?;
    Ok(WsLink {
        ws,
        peer,
        keepalive: options.keepalive(),
        options: options.tcp.clone(),
    })
}

/// Wraps a TCP stream on which the client side of the WebSocket upgrade (`GET` with
/// `Upgrade: websocket`, answered `101 Switching Protocols`) has already been done by the caller,
/// e.g. a load generator that binds its own source address and times the upgrade itself. The
/// server must not have sent anything after the response header. `peer` is the link's peer id
/// (the `ws://HOST:PORT/PATH` that was dialled).
pub async fn client_from_upgraded(stream: TcpStream, peer: String, options: &WsOptions) -> WsLink {
    let ws = WebSocketStream::from_raw_socket(
        WsStream::Plain(stream),
        tungstenite::protocol::Role::Client,
        Some(options.ws_config()),
    )
    .await;
    WsLink {
        ws,
        peer,
        keepalive: options.keepalive(),
        options: options.tcp.clone(),
    }
}

/// A WebSocket connection carrying bleRPC containers.
#[derive(Debug)]
pub struct WsLink {
    ws: WebSocketStream<WsStream>,
    peer: String,
    options: TcpOptions,
    /// The ping interval and the pong deadline.
    keepalive: Option<(Duration, Duration)>,
}

impl WsLink {
    /// The WebSocket stream.
    pub fn get_ref(&self) -> &WebSocketStream<WsStream> {
        &self.ws
    }
}

impl Link for WsLink {
    type Tx = WsTx;
    type Rx = WsRx;
    fn att_mtu(&self) -> usize {
        self.options.att_mtu
    }
    fn long_containers(&self) -> bool {
        self.options.long_containers
    }
    fn peer_id(&self) -> String {
        self.peer.clone()
    }
    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        let tcp = match self.ws.get_ref() {
            WsStream::Plain(s) => s,
            #[cfg(feature = "tls")]
            WsStream::Tls(s) => s.get_ref().0,
        };
        tcp.peer_addr().ok().map(|a| a.ip())
    }
    fn split(self) -> (WsTx, WsRx) {
        split_ws(self.ws, &self.options, self.keepalive)
    }
}

/// The WebSocket both halves use, locked only inside a poll (never across an await):
/// tokio-tungstenite keeps the reader's and the writer's wakers apart, so the halves may also
/// live in different tasks. One allocation per connection, as `StreamExt::split`'s lock was.
struct Shared<S> {
    ws: Mutex<WebSocketStream<S>>,
    /// The receive half queued a keepalive ping that is not flushed yet: the transmit half has
    /// work ([`LinkTx::has_pending`]).
    ping_unflushed: AtomicBool,
}

impl<S> std::fmt::Debug for Shared<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("ping_unflushed", &self.ping_unflushed)
            .finish_non_exhaustive()
    }
}

/// `d` in whole milliseconds, at least 1, at most `u32::MAX`.
fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX).max(1)
}

/// The stream, locked only inside a poll (never across an await).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn split_ws<S>(
    ws: WebSocketStream<S>,
    options: &TcpOptions,
    keepalive: Option<(Duration, Duration)>,
) -> (WsTx<S>, WsRx<S>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let shared = Arc::new(Shared {
        ws: Mutex::new(ws),
        ping_unflushed: AtomicBool::new(false),
    });
    let max = options.max_container();
    (
        WsTx {
            shared: shared.clone(),
            queue: VecDeque::new(),
            queued: 0,
            limit: options.send_queue_limit.max(1),
            max,
            closed: false,
        },
        WsRx {
            shared,
            current: Bytes::new(),
            max,
            limit: max,
            done: false,
            keepalive: keepalive.map(|(interval, timeout)| Keepalive {
                interval_ms: millis(interval),
                timeout_ms: millis(timeout),
                due: Instant::now() + interval,
                heard: false,
                pinged: false,
            }),
        },
    )
}

/// The link's halves over any byte stream on which the server side of the WebSocket upgrade
/// has already been done (an HTTP server that upgraded the connection itself, a Unix socket, a
/// test's in-memory pipe): one binary message per container, with the options' limits.
///
/// ```
/// use blerpc::link::{LinkRx as _, ws::{WsOptions, server_halves}};
/// use tokio::io::AsyncWriteExt as _;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let (mut client, server) = tokio::io::duplex(1024);
/// let (_tx, mut rx) = server_halves(server, &WsOptions::default()).await;
/// // A masked binary frame (mask 0) holding a TIMEOUT request.
/// client.write_all(&[0x82, 0x84, 0, 0, 0, 0, 0x00, 0x00, 0xc4, 0x00]).await.unwrap();
/// assert_eq!(rx.recv().await.unwrap(), Some(&[0x00, 0x00, 0xc4, 0x00][..]));
/// # });
/// ```
pub async fn server_halves<S>(stream: S, options: &WsOptions) -> (WsTx<S>, WsRx<S>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let ws = WebSocketStream::from_raw_socket(
        stream,
        tungstenite::protocol::Role::Server,
        Some(options.ws_config()),
    )
    .await;
    split_ws(ws, &options.tcp, options.keepalive())
}

/// The transmit half of a [`WsLink`] (or of [`server_halves`] over another stream).
#[derive(Debug)]
pub struct WsTx<S = WsStream> {
    /// Shared with the receive half, which queues the keepalive pings.
    shared: Arc<Shared<S>>,
    queue: VecDeque<Bytes>,
    /// Bytes in `queue`.
    queued: usize,
    limit: usize,
    max: usize,
    closed: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> LinkTx for WsTx<S> {
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        check_pdu(pdu, self.max)?;
        if self.closed {
            return Err(LinkError::Closed);
        }
        self.queued += pdu.len();
        self.queue.push_back(Bytes::copy_from_slice(pdu));
        Ok(())
    }
    fn is_full(&self) -> bool {
        self.queued >= self.limit
    }
    fn has_pending(&self) -> bool {
        !self.queue.is_empty() || self.shared.ping_unflushed.load(Ordering::Relaxed)
    }
    async fn flush(&mut self) -> Result<(), LinkError> {
        let ws = &self.shared.ws;
        let result = async {
            while !self.queue.is_empty() {
                // Wait for room, then hand the message over with no await in between: a
                // message leaves the queue only once the stream holds it (cancel-safe).
                std::future::poll_fn(|cx| lock(ws).poll_ready_unpin(cx))
                    .await
                    .map_err(ws_error)?;
                if let Some(pdu) = self.queue.pop_front() {
                    self.queued -= pdu.len();
                    lock(ws)
                        .start_send_unpin(Message::Binary(pdu))
                        .map_err(ws_error)?;
                }
            }
            std::future::poll_fn(|cx| lock(ws).poll_flush_unpin(cx))
                .await
                .map_err(ws_error)
        }
        .await;
        match result {
            Ok(()) => self.shared.ping_unflushed.store(false, Ordering::Relaxed),
            Err(_) => self.closed = true,
        }
        result
    }
    async fn close(&mut self) -> Result<(), LinkError> {
        let flushed = if self.closed {
            Ok(())
        } else {
            self.flush().await
        };
        self.closed = true;
        // Sends a close frame; the peer's `recv` returns `Ok(None)`.
        let _ = std::future::poll_fn(|cx| lock(&self.shared.ws).poll_close_unpin(cx)).await;
        flushed
    }
}

/// The receive half of a [`WsLink`] (or of [`server_halves`] over another stream).
#[derive(Debug)]
pub struct WsRx<S = WsStream> {
    shared: Arc<Shared<S>>,
    current: Bytes,
    /// The longest container accepted now ([`LinkRx::set_max_container`]), at most `limit`.
    max: usize,
    limit: usize,
    done: bool,
    keepalive: Option<Keepalive>,
}

/// The receive half's pings (see the [module docs](self)): a deadline the connection's one
/// timer serves ([`LinkRx::poll_timeout`]), no timer of its own.
#[derive(Debug)]
struct Keepalive {
    /// Milliseconds (at most 49 days): every idle connection holds this.
    interval_ms: u32,
    timeout_ms: u32,
    /// The next check: the end of a quiet interval, or a ping's deadline.
    due: Instant,
    /// A frame (of any kind) came from the peer since the last check.
    heard: bool,
    /// The check at `due` is a ping's deadline.
    pinged: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> WsRx<S> {
    async fn next(&self) -> Option<Result<Message, tungstenite::Error>> {
        std::future::poll_fn(|cx| lock(&self.shared.ws).poll_next_unpin(cx)).await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> LinkRx for WsRx<S> {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        // Release the last message so tungstenite can reuse its read buffer in place.
        self.current = Bytes::new();
        while !self.done {
            // Cancel-safe: tungstenite keeps partial frames in its buffer.
            let next = self.next().await;
            if let Some(k) = &mut self.keepalive {
                k.heard = true;
            }
            let message = match next {
                None => break,
                Some(Ok(m)) => m,
                Some(Err(tungstenite::Error::Protocol(
                    tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
                ))) => break,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(ws_error(e));
                }
            };
            match message {
                Message::Binary(pdu) => {
                    if pdu.len() > self.max {
                        self.done = true;
                        return Err(LinkError::Framing(format!(
                            "a {}-byte WebSocket message; this link carries at most {}",
                            pdu.len(),
                            self.max
                        )));
                    }
                    if Container::peek_len(&pdu) != Some(pdu.len()) {
                        self.done = true;
                        return Err(LinkError::Framing(format!(
                            "a {}-byte WebSocket message that is not exactly one container",
                            pdu.len()
                        )));
                    }
                    self.current = pdu;
                    return Ok(Some(&self.current));
                }
                Message::Text(_) => {
                    self.done = true;
                    return Err(LinkError::Framing(
                        "a WebSocket text message; bleRPC uses binary messages only".into(),
                    ));
                }
                // Pongs to pings are queued by tungstenite and written by the next read.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
                Message::Close(_) => {
                    // One more read writes our close reply out (server side), or sees the
                    // server close the TCP connection (client side); bounded either way.
                    // Boxed: inline, its timer would sit in every waiting `recv`'s state.
                    let drain = async { while let Some(Ok(_)) = self.next().await {} };
                    let _ = Box::pin(tokio::time::timeout(Duration::from_secs(1), drain)).await;
                    break;
                }
            }
        }
        self.done = true;
        Ok(None)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.keepalive
            .as_ref()
            .filter(|_| !self.done)
            .map(|k| k.due)
    }

    /// At the end of a quiet interval: sends a ping (if the stream takes it at once: a full
    /// stream means data is flowing, or the peer is stuck, which the deadline then catches). At
    /// a ping's deadline with nothing heard since: fails with `TimedOut`.
    fn handle_timeout(&mut self, now: Instant) -> Result<(), LinkError> {
        let Some(k) = &mut self.keepalive else {
            return Ok(());
        };
        if self.done || now < k.due {
            return Ok(());
        }
        if std::mem::take(&mut k.heard) {
            k.pinged = false;
            k.due = now + Duration::from_millis(k.interval_ms.into());
            return Ok(());
        }
        if k.pinged {
            self.done = true;
            return Err(LinkError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "WebSocket peer silent: no frame within {} ms of a ping",
                    k.timeout_ms
                ),
            )));
        }
        // The transmit half flushes it (it is in the same task on a client or a server).
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut ws = lock(&self.shared.ws);
        if let Poll::Ready(Ok(())) = ws.poll_ready_unpin(&mut cx)
            && ws.start_send_unpin(Message::Ping(Bytes::new())).is_ok()
        {
            self.shared.ping_unflushed.store(true, Ordering::Relaxed);
        }
        k.pinged = true;
        k.due = now + Duration::from_millis(k.timeout_ms.into());
        Ok(())
    }

    fn set_max_container(&mut self, len: usize) {
        self.max = len.min(self.limit);
    }
}

/// Accepts bleRPC connections over WebSocket (`ws://`, or `wss://` with
/// `WsAcceptor::bind_tls`, feature `tls`). Handshakes run concurrently (at most
/// [`TcpOptions::max_handshakes`], each within [`TcpOptions::handshake_timeout`]); a failed one is
/// logged at debug level and skipped.
#[derive(Debug)]
pub struct WsAcceptor {
    listener: super::listener::GuardedListener,
    options: WsOptions,
    #[cfg(feature = "tls")]
    tls: Option<super::tls::TlsServerConfig>,
    pending: super::handshakes::Handshakes<WsLink>,
}

impl WsAcceptor {
    /// Binds `addr` for `ws://` (port 0 picks a free port; see [`WsAcceptor::local_addr`]).
    pub async fn bind(addr: impl ToSocketAddrs, options: WsOptions) -> io::Result<WsAcceptor> {
        Ok(WsAcceptor {
            listener: super::listener::bind(addr, &options.tcp).await?,
            options,
            #[cfg(feature = "tls")]
            tls: None,
            pending: super::handshakes::Handshakes::new(),
        })
    }

    /// Binds `addr` for `wss://`.
    #[cfg(feature = "tls")]
    pub async fn bind_tls(
        addr: impl ToSocketAddrs,
        tls: super::tls::TlsServerConfig,
        options: WsOptions,
    ) -> io::Result<WsAcceptor> {
        let mut acceptor = Self::bind(addr, options).await?;
        acceptor.tls = Some(tls);
        Ok(acceptor)
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// The server side of one connection: TLS (for `wss`), then the WebSocket upgrade.
async fn server_handshake(
    stream: TcpStream,
    addr: SocketAddr,
    options: WsOptions,
    #[cfg(feature = "tls")] tls: Option<tokio_rustls::TlsAcceptor>,
) -> Result<WsLink, LinkError> {
    #[cfg(feature = "tls")]
    let (stream, scheme) = match tls {
        Some(tls) => {
            let s = tls
                .accept(stream)
                .await
                .map_err(|e| super::tls::handshake_error(&addr.to_string(), e))?;
            (
                WsStream::Tls(Box::new(tokio_rustls::TlsStream::Server(s))),
                "wss",
            )
        }
        None => (WsStream::Plain(stream), "ws"),
    };
    #[cfg(not(feature = "tls"))]
    let (stream, scheme) = (WsStream::Plain(stream), "ws");
    let mut path = String::new();
    let required = options.path.as_deref();
    #[allow(clippy::result_large_err)] // the callback's signature is tungstenite's
    let check_path = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        let requested = request.uri().path();
        if required.is_some_and(|p| p != requested) {
            let mut refusal = ErrorResponse::new(Some("no bleRPC endpoint at this path".into()));
            *refusal.status_mut() = tungstenite::http::StatusCode::NOT_FOUND;
            return Err(refusal);
        }
        path = request
            .uri()
            .path_and_query()
            .map_or_else(|| "/".to_string(), |p| p.to_string());
        Ok(response)
    };
    let ws = tokio_tungstenite::accept_hdr_async_with_config(
        stream,
        check_path,
        Some(options.ws_config()),
    )
    .await
    .map_err(|e| LinkError::Transport(format!("WebSocket handshake with {addr}: {e}")))?;
    Ok(WsLink {
        ws,
        peer: format!("{scheme}://{addr}{path}"),
        keepalive: options.keepalive(),
        options: options.tcp,
    })
}

impl crate::link::Acceptor for WsAcceptor {
    type Link = WsLink;
    fn set_guard(&mut self, guard: std::sync::Arc<crate::link::guard::AddressGuard>) -> bool {
        self.listener.set_guard(guard);
        true
    }
    async fn accept(&mut self) -> io::Result<WsLink> {
        let options = &self.options;
        #[cfg(feature = "tls")]
        let tls = self.tls.as_ref().map(|t| t.acceptor());
        Ok(self
            .pending
            .next(&mut self.listener, &options.tcp, |stream, addr| {
                server_handshake(
                    stream,
                    addr,
                    options.clone(),
                    #[cfg(feature = "tls")]
                    tls.clone(),
                )
            })
            .await)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failed unwrap is a failed test
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    type Pipe = tokio::io::DuplexStream;

    /// A server's halves over an in-memory pipe, pinging every 200 ms with a 300 ms pong
    /// deadline: the client's end of the pipe, the halves, and when they were made.
    async fn pinging_halves() -> (Pipe, WsTx<Pipe>, WsRx<Pipe>, Instant) {
        let options = WsOptions {
            ping_interval: Some(Duration::from_millis(200)),
            pong_timeout: Duration::from_millis(300),
            ..Default::default()
        };
        let (peer, server) = tokio::io::duplex(1024);
        let t0 = Instant::now();
        let (tx, rx) = server_halves(server, &options).await;
        (peer, tx, rx, t0)
    }

    /// Reads the frame the transmit half flushed: an empty ping.
    async fn read_ping(peer: &mut Pipe) {
        let mut frame = [0u8; 2];
        peer.read_exact(&mut frame).await.unwrap();
        assert_eq!(frame, [0x89, 0x00], "an empty ping");
    }

    /// The keepalive as the connection's timer drives it: a check per interval, a ping queued
    /// for the transmit half, the link failed a pong timeout after an unanswered ping.
    #[tokio::test(start_paused = true)]
    async fn keepalive_pings_a_quiet_peer_and_fails_the_link_when_nothing_answers() {
        let ms = Duration::from_millis;
        let (mut peer, mut tx, mut rx, t0) = pinging_halves().await;
        assert_eq!(rx.poll_timeout(), Some(t0 + ms(200)));
        // Early: nothing to do.
        rx.handle_timeout(t0 + ms(100)).unwrap();
        assert!(!tx.has_pending());
        // The peer spoke in the first interval (a masked empty pong): no ping, next check later.
        peer.write_all(&[0x8a, 0x80, 0, 0, 0, 0]).await.unwrap();
        peer.write_all(&[0x82, 0x84, 0, 0, 0, 0, 0x00, 0x00, 0xc4, 0x00])
            .await
            .unwrap();
        assert_eq!(
            rx.recv().await.unwrap(),
            Some(&[0x00, 0x00, 0xc4, 0x00][..])
        );
        rx.handle_timeout(t0 + ms(200)).unwrap();
        assert!(!tx.has_pending());
        assert_eq!(rx.poll_timeout(), Some(t0 + ms(400)));
        // A quiet interval: a ping, flushed by the transmit half.
        rx.handle_timeout(t0 + ms(400)).unwrap();
        assert!(tx.has_pending());
        tx.flush().await.unwrap();
        assert!(!tx.has_pending());
        read_ping(&mut peer).await;
        assert_eq!(rx.poll_timeout(), Some(t0 + ms(700)));
        // No answer within the pong timeout: the peer is gone.
        match rx.handle_timeout(t0 + ms(700)) {
            Err(LinkError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}"),
            other => panic!("expected a keepalive timeout, got {other:?}"),
        }
        assert_eq!(rx.poll_timeout(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answered_ping_keeps_the_link() {
        let ms = Duration::from_millis;
        let (mut peer, mut tx, mut rx, t0) = pinging_halves().await;
        rx.handle_timeout(t0 + ms(200)).unwrap();
        tx.flush().await.unwrap();
        read_ping(&mut peer).await;
        // The pong arrives; the receive half sees it while waiting for a container.
        peer.write_all(&[0x8a, 0x80, 0, 0, 0, 0]).await.unwrap();
        let waiting = tokio::time::timeout(ms(50), rx.recv()).await;
        assert!(waiting.is_err(), "no container came: {waiting:?}");
        rx.handle_timeout(t0 + ms(500)).unwrap();
        assert!(
            !tx.has_pending(),
            "heard from the peer: no ping this interval"
        );
        assert_eq!(rx.poll_timeout(), Some(t0 + ms(700)));
    }
}
