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
//! connection is idle, through proxies too. The receive half sends the ping (it is the half
//! that is always waiting); the timer is armed once and re-armed only when it fires.
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
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Bytes, Message};

use super::tcp::{self, TcpOptions, check_pdu};
use super::url::LinkUrl;
use super::{Link, LinkError, LinkRx, LinkTx};

/// Options of the WebSocket link.
#[derive(Clone, Debug)]
pub struct WsOptions {
    /// MTU, `TCP_NODELAY`, queue limit, buffer size, handshake limits (see [`TcpOptions`]).
    pub tcp: TcpOptions,
    /// Acceptors only: the request path clients must use (e.g. `/blerpc`); others get 404.
    /// Default: any path.
    pub path: Option<String>,
    /// After this long without a frame from the peer, send a WebSocket ping; `None`: never.
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
    match &parsed {
        LinkUrl::Ws { secure: false, .. } => {}
        LinkUrl::Ws { secure: true, .. } => {
            return Err(LinkError::Transport(format!(
                "`{url}` needs TLS: use ws::connect_tls (feature `tls`)"
            )));
        }
        _ => return Err(LinkError::Transport(format!("`{url}` is not a ws:// URL"))),
    }
    tcp::timed(options.tcp.handshake_timeout, "WebSocket connect", async {
        let stream = TcpStream::connect(parsed.authority()).await?;
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
    let LinkUrl::Ws { secure, host, .. } = &parsed else {
        return Err(LinkError::Transport(format!(
            "`{url}` is not a ws:// or wss:// URL"
        )));
    };
    tcp::timed(options.tcp.handshake_timeout, "WebSocket connect", async {
        let stream = TcpStream::connect(parsed.authority()).await?;
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

type SharedSink<S> = Arc<Mutex<SplitSink<WebSocketStream<S>, Message>>>;

/// The sink, locked only inside a poll (never across an await).
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
    let (sink, stream) = ws.split();
    let sink = Arc::new(Mutex::new(sink));
    let max = options.max_container();
    (
        WsTx {
            sink: sink.clone(),
            queue: VecDeque::new(),
            queued: 0,
            limit: options.send_queue_limit.max(1),
            max,
            closed: false,
        },
        WsRx {
            stream,
            current: Bytes::new(),
            max,
            limit: max,
            done: false,
            keepalive: keepalive.map(|(interval, timeout)| {
                Box::new(Keepalive {
                    sink,
                    interval,
                    timeout,
                    timer: None,
                    last_heard: Instant::now(),
                    ping_sent: None,
                    flushing: false,
                })
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
    /// Shared with the receive half, which sends the keepalive pings.
    sink: SharedSink<S>,
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
        !self.queue.is_empty()
    }
    async fn flush(&mut self) -> Result<(), LinkError> {
        let result = async {
            while !self.queue.is_empty() {
                // Wait for room, then hand the message over with no await in between: a
                // message leaves the queue only once the sink holds it (cancel-safe).
                std::future::poll_fn(|cx| lock(&self.sink).poll_ready_unpin(cx))
                    .await
                    .map_err(ws_error)?;
                if let Some(pdu) = self.queue.pop_front() {
                    self.queued -= pdu.len();
                    lock(&self.sink)
                        .start_send_unpin(Message::Binary(pdu))
                        .map_err(ws_error)?;
                }
            }
            std::future::poll_fn(|cx| lock(&self.sink).poll_flush_unpin(cx))
                .await
                .map_err(ws_error)
        }
        .await;
        if result.is_err() {
            self.closed = true;
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
        let _ = std::future::poll_fn(|cx| lock(&self.sink).poll_close_unpin(cx)).await;
        flushed
    }
}

/// The receive half of a [`WsLink`] (or of [`server_halves`] over another stream).
#[derive(Debug)]
pub struct WsRx<S = WsStream> {
    stream: SplitStream<WebSocketStream<S>>,
    current: Bytes,
    /// The longest container accepted now ([`LinkRx::set_max_container`]), at most `limit`.
    max: usize,
    limit: usize,
    done: bool,
    /// Boxed: most of a connection's life it only waits.
    keepalive: Option<Box<Keepalive<S>>>,
}

/// The receive half's pings (see the [module docs](self)).
struct Keepalive<S> {
    sink: SharedSink<S>,
    interval: Duration,
    timeout: Duration,
    /// Armed at the first wait; re-armed only when it fires.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// When the last frame (of any kind) came from the peer.
    last_heard: Instant,
    /// The ping in flight, if any.
    ping_sent: Option<Instant>,
    /// A ping is in the sink and not yet flushed.
    flushing: bool,
}

impl<S> std::fmt::Debug for Keepalive<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keepalive")
            .field("interval", &self.interval)
            .field("timeout", &self.timeout)
            .field("ping_sent", &self.ping_sent)
            .finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Keepalive<S> {
    /// Runs until the peer is declared gone (a ping unanswered past the deadline) or the sink
    /// fails; never returns `Ok`. Cancel-safe: its state lives in `self`.
    async fn run(&mut self) -> LinkError {
        loop {
            let first = self.last_heard + self.interval;
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(first)));
            let flushing = self.flushing;
            let sink = &self.sink;
            tokio::select! {
                biased;
                r = std::future::poll_fn(|cx| lock(sink).poll_flush_unpin(cx)), if flushing => {
                    if let Err(e) = r {
                        return ws_error(e);
                    }
                    self.flushing = false;
                }
                () = timer.as_mut() => {
                    if let Some(e) = self.on_timer() {
                        return e;
                    }
                }
            }
        }
    }

    /// The timer fired: declare the peer gone, send a ping, or wait some more.
    fn on_timer(&mut self) -> Option<LinkError> {
        let now = Instant::now();
        let next = match self.ping_sent {
            Some(at) if self.last_heard <= at => {
                if now >= at + self.timeout {
                    return Some(LinkError::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "WebSocket peer silent: no frame within {:?} of a ping",
                            self.timeout
                        ),
                    )));
                }
                at + self.timeout
            }
            _ if now < self.last_heard + self.interval => {
                self.ping_sent = None;
                self.last_heard + self.interval
            }
            _ => {
                // Only if the sink takes it at once: a full sink means data is flowing, or the
                // peer is stuck, which the deadline then catches.
                let mut cx = Context::from_waker(std::task::Waker::noop());
                let mut sink = lock(&self.sink);
                if let Poll::Ready(Ok(())) = sink.poll_ready_unpin(&mut cx)
                    && sink.start_send_unpin(Message::Ping(Bytes::new())).is_ok()
                {
                    self.flushing = true;
                }
                self.ping_sent = Some(now);
                now + self.timeout
            }
        };
        if let Some(t) = &mut self.timer {
            t.as_mut().reset(next);
        }
        None
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> LinkRx for WsRx<S> {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        // Release the last message so tungstenite can reuse its read buffer in place.
        self.current = Bytes::new();
        while !self.done {
            // `StreamExt::next` is cancel-safe: tungstenite keeps partial frames in its buffer.
            let next = match &mut self.keepalive {
                None => self.stream.next().await,
                Some(k) => {
                    let stream = &mut self.stream;
                    tokio::select! {
                        biased;
                        next = stream.next() => {
                            k.last_heard = Instant::now();
                            next
                        }
                        e = k.run() => {
                            self.done = true;
                            return Err(e);
                        }
                    }
                }
            };
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
                    if tcp::container_len(&pdu) != Some(pdu.len()) {
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
                    let drain = async { while let Some(Ok(_)) = self.stream.next().await {} };
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
                    break;
                }
            }
        }
        self.done = true;
        Ok(None)
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
    listener: super::listener::Listener,
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
