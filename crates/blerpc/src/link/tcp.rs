//! The TCP link: containers back to back on a TCP stream, exactly as they travel on BLE, with no
//! extra framing.
//!
//! ```text
//! stream:  [container][container][container]...
//! FIRST      (flags bits 7-6 = 0b00): [tid][seq][flags][total_length u16][payload_len][payload]  6 + payload_len
//! LARGE FIRST (0b00, flags bit 0):    [tid][seq][flags][total_length u32][payload_len][payload]  8 + payload_len
//! any other  (0b01, 0b10, 0b11):      [tid][seq][flags][payload_len][payload]                    4 + payload_len
//! LONG (FIRST / SUBSEQUENT, flags bit 1): the same with payload_len a u16 LE     7, 9 or 5 + payload_len
//! ```
//!
//! A container is self-delimiting: the receiver reads its header to learn its length (`6 +
//! payload_len` for FIRST, `8 + payload_len` for the large-message extension's LARGE FIRST,
//! `4 + payload_len` otherwise, `payload_len` at byte 5, 7 or 3; the core's
//! [`Container::peek_len`]) and hands exactly that many bytes to the protocol as one PDU. The link MTU is configured
//! ([`TcpOptions::att_mtu`], 247 like BLE by default); both ends must agree on it.
//!
//! **Long containers.** With [`TcpOptions::long_containers`] (the default) the link carries
//! containers of up to 16 KiB whatever the MTU, and the connection announces the long-container
//! extension (`docs/protocol.md`); they are sent only once both peers announced it.
//!
//! **Errors.** A container longer than [`TcpOptions::max_container`] breaks the link contract (the protocol never
//! emits one): the receiver fails with [`LinkError::Framing`] and the connection ends, because a
//! byte stream cannot resynchronise. The same happens when the peer closes the stream inside a
//! container. A close between containers is the normal end: [`LinkRx::recv`] returns `Ok(None)`.
//! On the sending side [`LinkTx::queue`] refuses a PDU that is not exactly one container, since it
//! would desynchronise the peer.
//!
//! **Buffers and backpressure.** The receive half owns one read buffer of
//! [`TcpOptions::read_buffer_size`] bytes (at least one container; allocated when bytes arrive,
//! dropped when an idle connection has nothing buffered) and returns slices of it, so
//! many containers arriving in one read cost one system call and a container split over many
//! reads is reassembled in place. A read that fills at least half of the buffer doubles it, up
//! to [`TcpOptions::max_read_buffer_size`], so a long message is read in a few large pieces; it
//! goes back to its first size on [`LinkRx::release_memory`] (an idle connection). The transmit
//! half appends queued containers to one write buffer; [`LinkTx::is_full`] turns true at [`TcpOptions::send_queue_limit`] bytes, which is how a full
//! socket buffer slows the protocol down. Both `flush` and `recv` are cancel-safe: their progress
//! lives in these buffers, never in the future.
//!
//! **Peer ids** are `tcp://IP:PORT` of the remote socket (`tcp://[::1]:9000` for IPv6).
//!
//! [`TcpAcceptor`] is the server side; [`connect`] the client side. The framing halves
//! [`StreamTx`] and [`StreamRx`] are generic over the byte stream and are reused by the TLS link.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use blerpc_proto::wire::container::{
    ATT_OVERHEAD, Container, HEADER_LEN, LARGE_FIRST_HEADER_LEN, MAX_LONG_CONTAINER_LEN,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};

use super::guard::AddressGuard;
use super::listener::{self, GuardedListener};
use super::{DEFAULT_STREAM_ATT_MTU, Link, LinkError, LinkRx, LinkTx};
use crate::metrics::Metrics;

/// Options of the TCP link (also used by the TLS and WebSocket links that run over TCP).
#[derive(Clone, Debug)]
pub struct TcpOptions {
    /// The link's ATT MTU: containers are at most `att_mtu - 3` bytes. Default 247, as on BLE.
    pub att_mtu: usize,
    /// Sets `TCP_NODELAY` (disables Nagle's algorithm). Default `true`: a request is usually a
    /// single small write that must not wait for the previous segment's ACK.
    pub nodelay: bool,
    /// Bytes queued for sending before [`LinkTx::is_full`] reports full, which is also the
    /// largest single write. Default 128 KiB (a 64 KiB message with its container headers goes
    /// out in one write, in classic or long containers). The queue's memory is given back when the connection is idle
    /// ([`LinkTx::release_memory`]).
    pub send_queue_limit: usize,
    /// The receive buffer per connection, in bytes (raised to one container if smaller),
    /// allocated when the first bytes arrive and given back when the connection is idle with
    /// nothing buffered (a silent or idle TCP/TLS connection holds none). Default 4 KiB. Also
    /// the WebSocket read buffer.
    pub read_buffer_size: usize,
    /// TCP and TLS: the receive buffer doubles, up to this many bytes, each time a read fills
    /// it (long messages then take a few large reads instead of many small ones), and goes back
    /// to `read_buffer_size` when the connection has been idle (see
    /// [`LinkRx::release_memory`]). Default 64 KiB; at most `read_buffer_size` turns growth off.
    pub max_read_buffer_size: usize,
    /// Acceptors only: set `SO_REUSEPORT` so several processes (or listeners) can bind the same
    /// address and the kernel spreads connections over them. Default `false`. Unix only; an
    /// error elsewhere.
    pub reuse_port: bool,
    /// Bounds connecting (TCP connect plus the TLS / WebSocket handshake) on the client, and each
    /// TLS / WebSocket handshake on acceptors. Default 10 s.
    pub handshake_timeout: Duration,
    /// Acceptors only: each handshake's deadline is `handshake_timeout` less a random part of
    /// up to this share of it (clamped to 0–0.9), so silent sockets opened in one burst are not
    /// all dropped in one instant (as the server's setup deadline,
    /// [`ServerConfig::setup_deadline_spread`](crate::ServerConfig::setup_deadline_spread)).
    /// Default 0.2: between 8 and 10 s.
    pub handshake_timeout_spread: f64,
    /// Acceptors only: TLS / WebSocket handshakes in progress at once. When all are taken, a
    /// newcomer drops one in progress (the oldest of the address holding the most) once the
    /// oldest has run for `handshake_evict_after` (a silent socket cannot hold a slot against
    /// newcomers); until then newcomers wait in the listen backlog. Default 256.
    pub max_handshakes: usize,
    /// Acceptors only: how long the oldest handshake is safe from being dropped for a newcomer
    /// when every slot is taken (newcomers wait in the listen backlog meanwhile). Default 0:
    /// one goes at once, the oldest of the address holding the most slots, so a lone client's
    /// handshake survives a flood from a few addresses (measured in `blerpc-bench hostile`:
    /// a 50 ms grace made legitimate WS and TLS calls wait up to 38 ms behind silent sockets;
    /// dropping the globally oldest lost one legitimate TLS call in 880).
    pub handshake_evict_after: Duration,
    /// Acceptors only: TLS / WebSocket handshakes in progress at once from one IP address; a
    /// connection beyond it is closed at once. Default `None` (no limit: the oldest-first
    /// eviction at `max_handshakes` already keeps silent sockets from holding the slots, and
    /// clients behind one NAT or a load test share an address).
    pub max_handshakes_per_address: Option<usize>,
    /// Once the peer has begun a container, the rest of it must arrive within this time, or the
    /// link fails with [`LinkError::ContainerTimeout`] (a peer that stops mid-container cannot
    /// hold the connection's buffer forever). Applies to TCP and TLS; the WebSocket link's
    /// messages are bounded by its handshake and the connection's setup deadline. Default 10 s.
    pub container_timeout: Duration,
    /// TCP keepalive: after this long without traffic the kernel probes the peer every 10 s (or
    /// every this long, if shorter) and closes the connection after 6 unanswered probes, so a
    /// peer that vanished (power loss, a dropped NAT mapping, a cut link) is detected while the
    /// connection is idle. `None`: off. Default 60 s.
    pub keepalive: Option<Duration>,
    /// Where acceptors count and log the handshakes they refuse, drop or time out (share the
    /// server's [`Metrics`]). Default `None`: logged at debug level only.
    pub metrics: Option<std::sync::Arc<Metrics>>,
    /// Acceptors only: the listen backlog (connections the kernel completes before they are
    /// accepted; capped by `net.core.somaxconn`). Default 1,024. Raise it for connection storms.
    pub listen_backlog: u32,
    /// Carry long containers (up to [`MAX_LONG_CONTAINER_LEN`] = 16 KiB, whatever `att_mtu`)
    /// and let the connection announce the long-container extension (`docs/protocol.md`): a
    /// 64 KiB message then takes 5 containers instead of ~270. It is
    /// used only when both peers announce it, so a peer without it sees classic containers.
    /// Default `true`. The read buffer still starts at `read_buffer_size` and grows to a long
    /// container only when one arrives.
    pub long_containers: bool,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            att_mtu: DEFAULT_STREAM_ATT_MTU,
            nodelay: true,
            send_queue_limit: 128 * 1024,
            read_buffer_size: 4 * 1024,
            max_read_buffer_size: 64 * 1024,
            reuse_port: false,
            handshake_timeout: Duration::from_secs(10),
            handshake_timeout_spread: 0.2,
            max_handshakes: 256,
            handshake_evict_after: Duration::ZERO,
            max_handshakes_per_address: None,
            container_timeout: Duration::from_secs(10),
            keepalive: Some(Duration::from_secs(60)),
            metrics: None,
            listen_backlog: 1024,
            long_containers: true,
        }
    }
}

impl TcpOptions {
    /// The largest container the link carries: `att_mtu - 3`, or 16 KiB with
    /// [`TcpOptions::long_containers`] (the long-container extension).
    pub fn max_container(&self) -> usize {
        let classic = self.classic_max_container();
        if self.long_containers {
            classic.max(MAX_LONG_CONTAINER_LEN)
        } else {
            classic
        }
    }

    /// The largest classic container: `att_mtu - 3` (what the buffers start with).
    pub(crate) fn classic_max_container(&self) -> usize {
        self.att_mtu.saturating_sub(ATT_OVERHEAD)
    }
}

/// Checks that `pdu` is exactly one container of at most `max` bytes (what a stream link can
/// carry without desynchronising the peer).
pub(crate) fn check_pdu(pdu: &[u8], max: usize) -> Result<(), LinkError> {
    if pdu.len() > max {
        return Err(LinkError::TooLarge {
            len: pdu.len(),
            max,
        });
    }
    match Container::peek_len(pdu) {
        Some(len) if len == pdu.len() => Ok(()),
        Some(len) => Err(LinkError::Framing(format!(
            "a {}-byte PDU whose header declares a {len}-byte container cannot be sent on a stream link",
            pdu.len()
        ))),
        None => Err(LinkError::Framing(format!(
            "a {}-byte PDU is shorter than a container header",
            pdu.len()
        ))),
    }
}

/// Connects to a bleRPC server over TCP. Bounded by [`TcpOptions::handshake_timeout`].
pub async fn connect(addr: impl ToSocketAddrs, options: &TcpOptions) -> Result<TcpLink, LinkError> {
    let stream = timed(options.handshake_timeout, "TCP connect", async {
        Ok(TcpStream::connect(addr).await?)
    })
    .await?;
    set_keepalive(&stream, options);
    Ok(TcpLink::from_stream(stream, options)?)
}

/// Turns on TCP keepalive as [`TcpOptions::keepalive`] says (a failure is logged: the connection
/// still works, only a vanished peer is noticed later).
pub(crate) fn set_keepalive(stream: &TcpStream, options: &TcpOptions) {
    let Some(idle) = options.keepalive else {
        return;
    };
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval(KEEPALIVE_INTERVAL.min(idle));
    #[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
    let keepalive = keepalive.with_retries(KEEPALIVE_RETRIES);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive) {
        tracing::debug!("TCP keepalive: {e}");
    }
}

/// The stack buffer the first bytes after an idle period are read into, before the read buffer
/// is allocated: a small request's container fits in it whole.
const FIRST_READ: usize = 64;

/// Keepalive probes' interval once the idle time has passed.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered keepalive probes before the kernel closes the connection.
#[cfg(any(target_os = "linux", target_os = "android", target_vendor = "apple"))]
const KEEPALIVE_RETRIES: u32 = 6;

/// Runs `fut` with a deadline; a timeout becomes an `Io(TimedOut)` error naming `what`.
pub(crate) async fn timed<T>(
    limit: Duration,
    what: &str,
    fut: impl Future<Output = Result<T, LinkError>>,
) -> Result<T, LinkError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(LinkError::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what} timed out after {limit:?}"),
        ))),
    }
}

/// A TCP connection carrying bleRPC containers.
#[derive(Debug)]
pub struct TcpLink {
    stream: TcpStream,
    peer: SocketAddr,
    options: TcpOptions,
}

impl TcpLink {
    /// Wraps a connected stream (setting `TCP_NODELAY` as configured).
    pub fn from_stream(stream: TcpStream, options: &TcpOptions) -> io::Result<TcpLink> {
        stream.set_nodelay(options.nodelay)?;
        let peer = stream.peer_addr()?;
        Ok(TcpLink {
            stream,
            peer,
            options: options.clone(),
        })
    }

    /// The remote address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }
}

impl Link for TcpLink {
    type Tx = StreamTx<OwnedWriteHalf>;
    type Rx = StreamRx<OwnedReadHalf>;
    fn att_mtu(&self) -> usize {
        self.options.att_mtu
    }
    fn long_containers(&self) -> bool {
        self.options.long_containers
    }
    fn peer_id(&self) -> String {
        format!("tcp://{}", self.peer)
    }
    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        Some(self.peer.ip())
    }
    fn split(self) -> (Self::Tx, Self::Rx) {
        let (r, w) = self.stream.into_split();
        halves(r, w, &self.options)
    }
}

/// The framing halves over any byte stream's read and write halves (what the TCP and TLS links
/// split into; usable over a Unix socket or a pipe): containers back to back, each read whole
/// before [`LinkRx::recv`] returns it, within the options' limits and container deadline.
///
/// ```
/// use blerpc::link::{LinkRx as _, tcp::{TcpOptions, halves}};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // A TIMEOUT request and a CAPABILITIES request, back to back in one read.
/// let bytes: &[u8] = &[0x00, 0x00, 0xc4, 0x00, 0x01, 0x00, 0xd0, 0x00];
/// let (_tx, mut rx) = halves(bytes, tokio::io::sink(), &TcpOptions::default());
/// assert_eq!(rx.recv().await.unwrap(), Some(&[0x00, 0x00, 0xc4, 0x00][..]));
/// assert_eq!(rx.recv().await.unwrap(), Some(&[0x01, 0x00, 0xd0, 0x00][..]));
/// assert_eq!(rx.recv().await.unwrap(), None);
/// # });
/// ```
pub fn halves<R, W>(r: R, w: W, options: &TcpOptions) -> (StreamTx<W>, StreamRx<R>) {
    let max = options.max_container();
    // A long container grows the buffer when it arrives; idle connections keep the small one.
    let base = options
        .read_buffer_size
        .max(options.classic_max_container())
        .max(LARGE_FIRST_HEADER_LEN + 1);
    (
        StreamTx {
            io: w,
            buf: Vec::new(),
            filled: 0,
            sent: 0,
            limit: options.send_queue_limit.max(1),
            max,
            state: TxState::Open,
        },
        StreamRx {
            io: r,
            // Allocated when the first bytes arrive (see `recv`).
            buf: Box::default(),
            base,
            grow_to: options.max_read_buffer_size.max(base).max(max),
            start: 0,
            end: 0,
            returned: 0,
            max,
            limit: max,
            container_timeout: options.container_timeout,
            partial_since: None,
            eof: false,
        },
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxState {
    Open,
    /// `close` was called or a write failed.
    Closed,
}

/// The transmit half of a stream link (TCP, TLS): queued containers are appended to one write
/// buffer and written out back to back.
#[derive(Debug)]
pub struct StreamTx<W> {
    io: W,
    /// The send queue: `buf[sent..filled]` waits to be written. Its length is kept between
    /// messages (only `filled` moves), so [`LinkTx::queue_with`] can hand out its free end
    /// without zeroing it first.
    buf: Vec<u8>,
    /// Bytes of `buf` queued.
    filled: usize,
    /// Bytes of `buf` already written.
    sent: usize,
    limit: usize,
    max: usize,
    state: TxState,
}

impl<W> StreamTx<W> {
    /// Checks the link is open, empties the queue if all of it was written, and makes room for
    /// `len` more bytes; the free end `buf[filled..filled + len]`.
    fn reserve(&mut self, len: usize) -> Result<&mut [u8], LinkError> {
        if self.state == TxState::Closed {
            return Err(LinkError::Closed);
        }
        if self.sent == self.filled {
            self.filled = 0;
            self.sent = 0;
        }
        let end = self.filled.saturating_add(len);
        if self.buf.len() < end {
            self.buf.resize(end, 0);
        }
        Ok(self.buf.get_mut(self.filled..end).unwrap_or_default())
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> LinkTx for StreamTx<W> {
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        check_pdu(pdu, self.max)?;
        self.reserve(0)?;
        // Up to a 16 KiB container: appended by the core's `Buffer::try_extend`, which avoids
        // the slow `rep movsb` case of one large `memcpy`.
        self.buf.truncate(self.filled);
        blerpc_proto::buf::Buffer::try_extend(&mut self.buf, pdu).map_err(|e| {
            LinkError::Transport(format!("cannot queue a {}-byte container: {e}", pdu.len()))
        })?;
        self.filled += pdu.len();
        Ok(())
    }
    fn queue_with(
        &mut self,
        len: usize,
        _scratch: &mut Vec<u8>,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, LinkError> {
        let max = self.max;
        let free = self.reserve(len)?;
        let Some(n) = fill(free) else {
            return Ok(None);
        };
        check_pdu(free.get(..n).unwrap_or(&[]), max)?;
        self.filled += n;
        Ok(Some(n))
    }
    fn is_full(&self) -> bool {
        self.filled - self.sent >= self.limit
    }
    fn has_pending(&self) -> bool {
        self.sent < self.filled
    }
    async fn flush(&mut self) -> Result<(), LinkError> {
        while let Some(rest) = self
            .buf
            .get(self.sent..self.filled)
            .filter(|r| !r.is_empty())
        {
            // One `write` at a time: each is cancel-safe, and `sent` records what it wrote.
            match self.io.write(rest).await {
                Ok(0) => {
                    self.state = TxState::Closed;
                    return Err(LinkError::Closed);
                }
                Ok(n) => self.sent += n,
                Err(e) => {
                    self.state = TxState::Closed;
                    return Err(broken_pipe_is_closed(e));
                }
            }
        }
        self.filled = 0;
        self.sent = 0;
        // TLS holds records until flushed; a no-op on TCP.
        self.io.flush().await.map_err(|e| {
            self.state = TxState::Closed;
            broken_pipe_is_closed(e)
        })
    }
    async fn close(&mut self) -> Result<(), LinkError> {
        let flushed = if self.state == TxState::Open {
            self.flush().await
        } else {
            Ok(())
        };
        self.state = TxState::Closed;
        // FIN (and TLS close_notify); the peer's `recv` returns `Ok(None)`.
        let _ = self.io.shutdown().await;
        flushed
    }
    fn release_memory(&mut self) {
        if !self.has_pending() {
            self.buf = Vec::new();
            self.filled = 0;
            self.sent = 0;
        }
    }
}

fn broken_pipe_is_closed(e: io::Error) -> LinkError {
    match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => LinkError::Closed,
        _ => LinkError::Io(e),
    }
}

/// The receive half of a stream link (TCP, TLS): reads into one buffer and returns one container
/// at a time as a slice of it.
#[derive(Debug)]
pub struct StreamRx<R> {
    io: R,
    buf: Box<[u8]>,
    /// The buffer's size when idle.
    base: usize,
    /// The largest the buffer grows to.
    grow_to: usize,
    /// Unconsumed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Length of the container the last `recv` returned; consumed at the next call.
    returned: usize,
    /// The longest container accepted now ([`LinkRx::set_max_container`]), at most `limit`.
    max: usize,
    /// The longest container the link carries.
    limit: usize,
    container_timeout: Duration,
    /// When the link began waiting for the rest of a container.
    partial_since: Option<tokio::time::Instant>,
    eof: bool,
}

impl<R: AsyncRead + Unpin + Send + 'static> LinkRx for StreamRx<R> {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        self.start += std::mem::take(&mut self.returned);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        loop {
            let pending = self.buf.get(self.start..self.end).unwrap_or(&[]);
            if let Some(len) = Container::peek_len(pending) {
                if len > self.max {
                    let why = if self.max < self.limit {
                        "; long containers only once the connection allows them"
                    } else {
                        ""
                    };
                    return Err(LinkError::Framing(format!(
                        "the peer sent a {len}-byte container; this link accepts at most {} \
                         (ATT MTU {}){why}",
                        self.max,
                        self.max + ATT_OVERHEAD
                    )));
                }
                if pending.len() >= len {
                    self.returned = len;
                    self.partial_since = None;
                    return Ok(self.buf.get(self.start..self.start + len));
                }
                if len > self.buf.len() {
                    // A long container larger than the buffer starts a long message: grow to
                    // the largest size at once (it covers `max`, so the container fits) and read
                    // the rest in large pieces; an idle release shrinks it again.
                    self.resize(self.grow_to.max(len));
                }
            }
            if self.eof {
                return if self.start == self.end {
                    Ok(None)
                } else {
                    Err(LinkError::Framing(format!(
                        "the peer closed the stream inside a container ({} bytes received)",
                        self.end - self.start
                    )))
                };
            }
            if self.buf.is_empty() {
                // No buffer while nothing is buffered (a new or idle connection): wait for the
                // first bytes in a small one here, so a silent or idle connection holds no
                // read buffer; the real one is allocated when they arrive. (`start == end`, so
                // no container deadline runs yet.)
                let mut first = [0u8; FIRST_READ];
                match self.io.read(&mut first).await {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        let n = n.min(FIRST_READ);
                        self.buf = vec![0; self.base.max(n)].into_boxed_slice();
                        if let (Some(dst), Some(src)) = (self.buf.get_mut(..n), first.get(..n)) {
                            dst.copy_from_slice(src);
                        }
                        self.start = 0;
                        self.end = n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => self.eof = true,
                    Err(e) if e.kind() == io::ErrorKind::ConnectionReset => self.eof = true,
                    Err(e) => return Err(LinkError::Io(e)),
                }
                continue;
            }
            if self.end == self.buf.len() {
                // The buffer holds at least one whole container, so moving the partial one to
                // the front always makes room.
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let Some(space) = self.buf.get_mut(self.end..) else {
                return Err(LinkError::Framing("receive buffer overrun".into()));
            };
            let offered = space.len();
            // Part of a container is here: the rest has until the container deadline, counted
            // from the first wait for it (kept across cancelled calls).
            let deadline = (self.start < self.end).then(|| {
                *self
                    .partial_since
                    .get_or_insert_with(tokio::time::Instant::now)
                    + self.container_timeout
            });
            // `read` is cancel-safe: if this future is dropped, no bytes were taken.
            let read = match deadline {
                Some(at) => match tokio::time::timeout_at(at, self.io.read(space)).await {
                    Ok(read) => read,
                    Err(_) => {
                        return Err(LinkError::ContainerTimeout {
                            after: self.container_timeout,
                            received: self.end - self.start,
                        });
                    }
                },
                None => self.io.read(space).await,
            };
            match read {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.end += n;
                    // A read that filled at least half of the buffer: more is likely waiting,
                    // so read in larger pieces from now on (until the next idle release). A
                    // read that only filled a small tail left after earlier containers does not
                    // count; the buffer is compacted instead.
                    if n == offered
                        && offered * 2 >= self.buf.len()
                        && self.buf.len() < self.grow_to
                    {
                        self.resize(self.buf.len().saturating_mul(2).min(self.grow_to));
                    }
                }
                // A TLS peer that closes without close_notify; containers are self-delimiting,
                // so a truncation is still caught above.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => self.eof = true,
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => self.eof = true,
                Err(e) => return Err(LinkError::Io(e)),
            }
        }
    }

    fn set_max_container(&mut self, len: usize) {
        self.max = len.max(HEADER_LEN).min(self.limit);
    }

    fn release_memory(&mut self) {
        // The slice the last `recv` returned is no longer borrowed.
        self.start += std::mem::take(&mut self.returned);
        // Only when the received bytes leave room in the small buffer (they always do between
        // messages): a full buffer would read nothing.
        if self.start == self.end {
            // Nothing buffered: no buffer until the next bytes arrive.
            self.buf = Box::default();
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() > self.base && self.end - self.start < self.base {
            self.resize(self.base);
        }
    }
}

impl<R> StreamRx<R> {
    /// Moves the unconsumed bytes into a new buffer of `size` bytes (at least what they need).
    fn resize(&mut self, size: usize) {
        let pending = self.buf.get(self.start..self.end).unwrap_or(&[]);
        // Up to a whole grown buffer into a fresh allocation: the copy that can be slow, made
        // by the core's `Buffer::try_extend`.
        let len = size.max(pending.len());
        let mut buf = crate::copy_message_into(pending, len);
        buf.resize(len, 0);
        let buf = buf.into_boxed_slice();
        self.end = pending.len();
        self.start = 0;
        self.buf = buf;
    }

    /// The receive buffer's current size: 0 until the first bytes arrive and again once an idle
    /// release found nothing buffered; grows under load (see
    /// [`TcpOptions::max_read_buffer_size`]).
    pub fn buffer_size(&self) -> usize {
        self.buf.len()
    }
}

/// Accepts bleRPC connections over TCP: the server side of the TCP link.
#[derive(Debug)]
pub struct TcpAcceptor {
    listener: GuardedListener,
    options: TcpOptions,
}

impl TcpAcceptor {
    /// Binds `addr` (port 0 picks a free port; see [`TcpAcceptor::local_addr`]).
    pub async fn bind(addr: impl ToSocketAddrs, options: TcpOptions) -> io::Result<TcpAcceptor> {
        Ok(TcpAcceptor {
            listener: listener::bind(addr, &options).await?,
            options,
        })
    }

    /// Uses an already bound listener.
    pub fn from_listener(listener: TcpListener, options: TcpOptions) -> TcpAcceptor {
        TcpAcceptor {
            listener: GuardedListener::new(listener),
            options,
        }
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

impl crate::link::Acceptor for TcpAcceptor {
    type Link = TcpLink;
    async fn accept(&mut self) -> io::Result<TcpLink> {
        loop {
            let (stream, addr) = self.listener.accept(&self.options).await;
            match TcpLink::from_stream(stream, &self.options) {
                Ok(link) => return Ok(link),
                Err(e) => tracing::debug!(%addr, "accepted connection unusable: {e}"),
            }
        }
    }
    fn set_guard(&mut self, guard: std::sync::Arc<AddressGuard>) -> bool {
        self.listener.set_guard(guard);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_long_container_grows_the_read_buffer_and_idle_shrinks_it() {
        let (mut a, b) = tokio::io::duplex(1 << 20);
        let options = TcpOptions::default();
        let (_tx, mut rx) = halves(b, tokio::io::sink(), &options);
        assert_eq!(rx.buffer_size(), 0, "no buffer before the first bytes");
        // A 16,384-byte LONG SUBSEQUENT, then a small one.
        let mut long = vec![9u8, 1, 0x42, 0xfb, 0x3f];
        long.extend(std::iter::repeat_n(0xab, 16_379));
        let small = [9u8, 2, 0x40, 2, 1, 2];
        a.write_all(&long).await.unwrap_or_else(|e| panic!("{e}"));
        a.write_all(&small).await.unwrap_or_else(|e| panic!("{e}"));
        let got = rx.recv().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, Some(&long[..]));
        assert!(rx.buffer_size() >= 16_384);
        let got = rx.recv().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, Some(&small[..]));
        rx.release_memory();
        assert_eq!(rx.buffer_size(), 0, "idle with nothing buffered: no buffer");
        // Part of a container buffered: the release keeps the small buffer for it.
        a.write_all(&small[..3])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let partial = tokio::time::timeout(Duration::from_millis(50), rx.recv()).await;
        assert!(partial.is_err(), "half a container is not returned");
        rx.release_memory();
        assert_eq!(rx.buffer_size(), 4 * 1024);
        a.write_all(&small[3..])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let got = rx.recv().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, Some(&small[..]));
        // One byte over the link's maximum: a framing error, not a hang.
        let mut over = vec![9u8, 3, 0x42, 0xfc, 0x3f];
        over.extend(std::iter::repeat_n(0, 16_380));
        a.write_all(&over).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(rx.recv().await, Err(LinkError::Framing(_))));
        // Without long containers, a LONG header over att_mtu - 3 is refused the same way.
        let (mut a, b) = tokio::io::duplex(1 << 20);
        let classic = TcpOptions {
            long_containers: false,
            ..TcpOptions::default()
        };
        let (_tx, mut rx) = halves(b, tokio::io::sink(), &classic);
        a.write_all(&long).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(rx.recv().await, Err(LinkError::Framing(_))));
    }

    #[tokio::test]
    async fn the_send_queue_gives_its_memory_back_when_released() {
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let (mut tx, _rx) = halves(tokio::io::empty(), a, &TcpOptions::default());
        let pdu = [7u8, 0, 0x40, 240]
            .into_iter()
            .chain([1u8; 240])
            .collect::<Vec<u8>>();
        while !tx.is_full() {
            tx.queue(&pdu).unwrap_or_else(|e| panic!("{e}"));
        }
        // Nothing is released while bytes are queued.
        tx.release_memory();
        assert!(tx.has_pending());
        assert!(tx.buf.capacity() >= 64 * 1024);
        tx.flush().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(tx.buf.capacity() >= 64 * 1024, "kept between messages");
        tx.release_memory();
        assert_eq!(tx.buf.capacity(), 0);
        let mut got = vec![0u8; 64 * 1024];
        tokio::io::AsyncReadExt::read_exact(&mut b, &mut got)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.get(..244), Some(&pdu[..]));
        // Still usable afterwards.
        tx.queue(&pdu).unwrap_or_else(|e| panic!("{e}"));
        assert!(tx.has_pending());
    }

    #[tokio::test]
    async fn queue_with_writes_into_the_send_queue_in_order_with_queue() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let (mut tx, _rx) = halves(tokio::io::empty(), a, &TcpOptions::default());
        let mut scratch = Vec::new();
        // A CONTROL container copied in, then a SUBSEQUENT one written in place.
        tx.queue(&[9, 0, 0xD4, 1, 2])
            .unwrap_or_else(|e| panic!("{e}"));
        let n = tx.queue_with(16, &mut scratch, |out| {
            assert_eq!(out.len(), 16);
            out.get_mut(..6)?
                .copy_from_slice(&[3, 1, 0x40, 2, 0xAA, 0xBB]);
            Some(6)
        });
        assert_eq!(n.unwrap_or_else(|e| panic!("{e}")), Some(6));
        // Nothing to send: nothing queued.
        let none = tx.queue_with(16, &mut scratch, |_| None);
        assert_eq!(none.unwrap_or_else(|e| panic!("{e}")), None);
        // A PDU whose header disagrees with its length is refused and not queued.
        let bad = tx.queue_with(16, &mut scratch, |out| {
            out.get_mut(..5)?.copy_from_slice(&[3, 2, 0x40, 9, 0xAA]);
            Some(5)
        });
        assert!(matches!(bad, Err(LinkError::Framing(_))));
        // Longer than the link carries: refused before it is queued.
        let max = tx.max;
        let long = tx.queue_with(max + 1, &mut scratch, |out| Some(out.len()));
        assert!(matches!(long, Err(LinkError::TooLarge { .. })));
        assert!(
            scratch.is_empty(),
            "stream links never use the scratch buffer"
        );
        tx.flush().await.unwrap_or_else(|e| panic!("{e}"));
        let mut got = [0u8; 11];
        tokio::io::AsyncReadExt::read_exact(&mut b, &mut got)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, [9, 0, 0xD4, 1, 2, 3, 1, 0x40, 2, 0xAA, 0xBB]);
        // After the flush the queue starts over at the front of the kept buffer.
        tx.queue_with(8, &mut scratch, |out| {
            out.get_mut(..4)?.copy_from_slice(&[4, 0, 0xD4, 0]);
            Some(4)
        })
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((tx.sent, tx.filled), (0, 4));
        tx.close().await.unwrap_or_else(|e| panic!("{e}"));
        let closed = tx.queue_with(8, &mut scratch, |_| Some(4));
        assert!(matches!(closed, Err(LinkError::Closed)));
        let mut tail = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut b, &mut tail)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tail, [4, 0, 0xD4, 0]);
    }

    #[test]
    fn the_default_queue_with_goes_through_the_scratch_buffer() {
        /// A link that records what `queue` got.
        struct Recorder(Vec<Vec<u8>>);
        impl LinkTx for Recorder {
            fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
                self.0.push(pdu.to_vec());
                Ok(())
            }
            fn is_full(&self) -> bool {
                false
            }
            fn has_pending(&self) -> bool {
                !self.0.is_empty()
            }
            async fn flush(&mut self) -> Result<(), LinkError> {
                Ok(())
            }
            async fn close(&mut self) -> Result<(), LinkError> {
                Ok(())
            }
        }
        let mut link = Recorder(Vec::new());
        let mut scratch = Vec::new();
        let n = link.queue_with(10, &mut scratch, |out| {
            assert_eq!(out.len(), 10);
            out.get_mut(..3)?.copy_from_slice(&[1, 2, 3]);
            Some(3)
        });
        assert_eq!(n.unwrap_or_else(|e| panic!("{e}")), Some(3));
        assert_eq!(scratch.len(), 10, "kept for the next PDU");
        let none = link.queue_with(4, &mut scratch, |_| None);
        assert_eq!(none.unwrap_or_else(|e| panic!("{e}")), None);
        assert_eq!(link.0, [vec![1, 2, 3]]);
    }

    #[test]
    fn only_whole_containers_are_queued() {
        assert!(check_pdu(&[9, 0, 0xD4, 1, 2], 244).is_ok());
        assert!(matches!(
            check_pdu(&[9, 0, 0xD4, 1, 2, 3], 244),
            Err(LinkError::Framing(_))
        ));
        assert!(matches!(
            check_pdu(&[9, 0, 0x00, 0, 0], 244),
            Err(LinkError::Framing(_))
        ));
        assert!(matches!(
            check_pdu(&[0; 245], 244),
            Err(LinkError::TooLarge { len: 245, max: 244 })
        ));
    }
}
