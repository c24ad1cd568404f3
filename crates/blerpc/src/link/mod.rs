//! Links: the transports a bleRPC connection runs over.
//!
//! A link carries **PDUs**: one container per PDU, exactly as on BLE (one GATT write or
//! notification). Every transport implements [`Link`], which splits into a transmit half and a
//! receive half so that one task can wait on both at once:
//!
//! - [`LinkTx::queue`] appends a PDU to the link's send queue without blocking;
//!   [`LinkTx::flush`] writes the queue out and is **cancel-safe** (progress is kept if the future
//!   is dropped), and [`LinkTx::is_full`] tells the caller to flush before queueing more — the
//!   link's flow control (a TCP socket buffer, BLE write-without-response credits, a channel's
//!   capacity) reaches the protocol through it.
//! - [`LinkRx::recv`] returns the next PDU, borrowed from the link's buffer, and is cancel-safe.
//!
//! Transports: [`mem`] (in-memory, for tests and in-process use); TCP, TLS, WebSocket, serial and
//! BLE are added behind features.
//!
//! By URL ([`url::LinkUrl`]: `tcp://`, `tls://`, `ws://`, `wss://`, `serial://`, `ble://`):
//! [`connect`] opens a link and sets up a [`Client`](crate::Client) on it, [`listen`] binds a
//! listener and serves a [`Server`](crate::Server) on it; both [`trace`] every PDU.

#[cfg(any(feature = "ble-gatt", feature = "ble-peripheral"))]
pub mod ble;
pub mod connect;
pub mod guard;
#[cfg(any(feature = "tls", feature = "ws"))]
pub(crate) mod handshakes;
pub mod listen;
#[cfg(feature = "tcp")]
pub mod listener;
#[cfg(feature = "local-ca")]
pub mod local_ca;
pub mod mem;
#[cfg(all(unix, feature = "serial"))]
pub mod pty;
mod queue;
#[cfg(feature = "serial")]
pub mod serial;
#[cfg(feature = "tcp")]
pub mod tcp;
#[cfg(feature = "tls")]
pub mod tls;
pub mod trace;
pub mod url;
#[cfg(feature = "ws")]
pub mod ws;

use std::future::Future;

use blerpc_proto::connection::SetupPipelining;

pub use queue::SendQueue;

/// A link failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The peer closed the link.
    #[error("link closed by the peer")]
    Closed,
    /// A PDU larger than the link's MTU allows was queued.
    #[error("PDU of {len} bytes exceeds the link's {max}-byte limit")]
    TooLarge {
        /// The PDU's length.
        len: usize,
        /// The largest PDU the link carries (`att_mtu - 3`).
        max: usize,
    },
    /// The peer sent bytes that are not a valid frame for this link (e.g. a TCP stream that does
    /// not start with a container header, a serial frame with a bad CRC).
    #[error("malformed frame: {0}")]
    Framing(String),
    /// An I/O error from the transport. (Its message is part of this one, so it is not also
    /// the `source`: a report walking the chain prints it once.)
    #[error("I/O error: {0}")]
    Io(std::io::Error),
    /// Any other transport error (TLS, WebSocket, BLE stack), as text.
    #[error("{0}")]
    Transport(String),
    /// The peer began a container and did not finish it in time
    /// ([`TcpOptions::container_timeout`](tcp::TcpOptions::container_timeout)).
    #[error("the peer began a container and sent only {received} bytes of it within {after:?}")]
    ContainerTimeout {
        /// The deadline.
        after: std::time::Duration,
        /// Bytes of the container received.
        received: usize,
    },
}

impl From<std::io::Error> for LinkError {
    fn from(e: std::io::Error) -> Self {
        LinkError::Io(e)
    }
}

/// A bidirectional link to one peer.
pub trait Link: Send + 'static {
    /// The transmit half.
    type Tx: LinkTx;
    /// The receive half.
    type Rx: LinkRx;
    /// The ATT MTU of the link: PDUs are at most `att_mtu - 3` bytes. BLE links report the
    /// negotiated MTU; stream links use a configured value (247 by default).
    fn att_mtu(&self) -> usize;
    /// `true` when the link carries containers of up to 16 KiB whatever its ATT MTU, so the
    /// connection may announce the long-container extension (`docs/protocol.md`). Stream links
    /// (TCP, TLS, WebSocket) return their [`TcpOptions::long_containers`](tcp::TcpOptions)
    /// option; BLE and serial links keep the default `false`.
    fn long_containers(&self) -> bool {
        false
    }
    /// How a [`Client`](crate::Client) on this link pipelines its setup requests unless
    /// [`ClientConfig::setup_pipelining`](crate::ClientConfig::setup_pipelining) says otherwise.
    /// The default, [`SetupPipelining::KeyExchange`] (TIMEOUT, CAPABILITIES and the key
    /// exchange's step 1 in one flight: two round trips fewer), suits links whose peers are
    /// `blerpc` servers (TCP, TLS, WebSocket, serial, memory); BLE links return
    /// [`SetupPipelining::Requests`] (TIMEOUT and CAPABILITIES together), which any peripheral
    /// answering control requests in order accepts, as the reference firmware does.
    fn setup_pipelining(&self) -> SetupPipelining {
        SetupPipelining::KeyExchange
    }
    /// A stable identifier of the peer, used as the key for identity pinning (e.g.
    /// `tcp://127.0.0.1:9000`, a BLE address).
    fn peer_id(&self) -> String;
    /// The peer's IP address on IP links (TCP, TLS, WebSocket), for per-address limits; `None`
    /// elsewhere (the default).
    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        None
    }
    /// Reads the link-layer parameters as they are at the time of the call, for the
    /// diagnostics extension (`docs/protocol.md` "Diagnostics"): a BLE link gives what its
    /// stack reports; `None` (the default) for a link without a BLE link layer.
    fn link_report(&self) -> Option<LinkProbe> {
        None
    }
    /// Splits the link into its halves.
    fn split(self) -> (Self::Tx, Self::Rx);
}

pub use blerpc_proto::wire::diagnostics::LinkFields;

/// Reads a link's [`LinkFields`] as they are now (a connection's parameters change: an interval
/// update, a PHY update).
pub type LinkProbe = std::sync::Arc<dyn Fn() -> LinkFields + Send + Sync>;

/// The transmit half of a [`Link`].
pub trait LinkTx: Send + 'static {
    /// Appends one PDU to the send queue. Never blocks; fails only if the PDU is larger than the
    /// link carries or the link is closed.
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError>;
    /// Appends the PDU `fill` writes, without a copy where the link can: `fill` gets a buffer
    /// of `len` bytes and returns the PDU's length, or `None` when it has nothing to send (then
    /// nothing is queued). Returns the PDU's length. Stream links (TCP, TLS) hand `fill` the
    /// free end of their send queue; the default writes into `scratch` (grown to `len`, kept by
    /// the caller between PDUs) and calls [`LinkTx::queue`].
    fn queue_with(
        &mut self,
        len: usize,
        scratch: &mut Vec<u8>,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, LinkError> {
        if scratch.len() < len {
            scratch.resize(len, 0);
        }
        let Some(n) = scratch.get_mut(..len).and_then(fill) else {
            return Ok(None);
        };
        self.queue(scratch.get(..n).unwrap_or(&[]))?;
        Ok(Some(n))
    }
    /// `true` when the queue is at its limit: [`LinkTx::flush`] before queueing more.
    fn is_full(&self) -> bool;
    /// `true` when PDUs are queued and not yet handed to the transport.
    fn has_pending(&self) -> bool;
    /// Writes the queued PDUs out. Cancel-safe: if the future is dropped, what was written stays
    /// written and the rest stays queued.
    fn flush(&mut self) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// Flushes and closes the link.
    fn close(&mut self) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// Gives back memory the send queue grew to (it keeps its capacity between messages), when
    /// nothing is queued. The connection tasks call it once the connection has been idle for
    /// their idle-release time. The default does nothing.
    fn release_memory(&mut self) {}
}

/// The receive half of a [`Link`].
pub trait LinkRx: Send + 'static {
    /// The next PDU, or `Ok(None)` once the peer has closed the link. Cancel-safe.
    fn recv(&mut self) -> impl Future<Output = Result<Option<&[u8]>, LinkError>> + Send;
    /// Accept containers of at most `len` bytes from now on (never more than the link carries):
    /// a server lowers it until the connection may use long containers, so a stranger's long
    /// container fails the link at its header instead of being buffered. The default does
    /// nothing (datagram links receive whole PDUs of the link's own size).
    fn set_max_container(&mut self, len: usize) {
        let _ = len;
    }
    /// Gives back memory the link grew under load (e.g. a read buffer enlarged for long
    /// messages), keeping any received bytes. The connection tasks call it once the connection
    /// has been idle for their idle-release time. The default does nothing.
    fn release_memory(&mut self) {}
    /// When the link itself next needs a turn (a keepalive ping, a pong's deadline), if ever.
    /// A connection has one timer: the client's and the server's tasks arm it for the earliest
    /// of this and the protocol's deadlines, then call [`LinkRx::handle_timeout`]. Code that
    /// drives a link's halves itself must do the same. The default: never.
    fn poll_timeout(&self) -> Option<tokio::time::Instant> {
        None
    }
    /// The connection's timer fired at `now` (for this link's [`LinkRx::poll_timeout`] or for
    /// another deadline: a link checks `now` itself). An error fails the link, e.g. a peer that
    /// did not answer a keepalive ping. The default does nothing.
    fn handle_timeout(&mut self, now: tokio::time::Instant) -> Result<(), LinkError> {
        let _ = now;
        Ok(())
    }
}

/// Produces incoming connections (a TCP listener, a WebSocket listener, ...).
pub trait Acceptor: Send + 'static {
    /// The link of an accepted connection.
    type Link: Link;
    /// Waits for the next connection. Errors on one connection (a failed TLS handshake) should
    /// be logged and skipped by the acceptor; an error returned here stops the server.
    fn accept(&mut self) -> impl Future<Output = std::io::Result<Self::Link>> + Send;
    /// Has the acceptor enforce the server's per-address policy itself, before any handshake
    /// (the TCP, TLS and WebSocket acceptors do, and drop penalized addresses in the kernel on
    /// Linux); `true` if it does, so the server does not count those connections twice. The
    /// default ignores it and returns `false`: the server then applies the guard to each link
    /// it accepts.
    fn set_guard(&mut self, guard: std::sync::Arc<guard::AddressGuard>) -> bool {
        let _ = guard;
        false
    }
}

/// The ATT MTU stream links (TCP, TLS, WebSocket, serial) use unless configured: the value the
/// reference firmware and centrals negotiate on BLE.
pub const DEFAULT_STREAM_ATT_MTU: usize = 247;
