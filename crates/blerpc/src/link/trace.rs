//! The PDU trace: [`Traced`] wraps any [`Link`] and logs every PDU it carries (direction, length,
//! the first 48 bytes in hex) at `trace` level, target `blerpc::pdu`, with the peer's id;
//! [`TracedAcceptor`] does it for every link an [`Acceptor`] accepts. The links that
//! [`connect`](super::connect) opens and [`listen`](super::listen) accepts are traced.
//!
//! A disabled level costs one check per PDU (`tracing`'s cached interest); turn the trace on
//! with a subscriber filter such as `blerpc::pdu=trace` (`blerpc -v` does).
//!
//! ```
//! use blerpc::link::trace::Traced;
//! use blerpc::link::{Link, LinkRx, LinkTx, mem};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), blerpc::link::LinkError> {
//! let (a, b) = mem::pair(247);
//! let (mut tx, _rx) = Traced::new(a).split();
//! let (_tx, mut rx) = Traced::new(b).split();
//! tx.queue(&[0x00, 0x01, 0x02])?; // logged: "→   3 B 000102"
//! tx.flush().await?;
//! assert_eq!(rx.recv().await?, Some(&[0x00, 0x01, 0x02][..])); // logged: "←   3 B 000102"
//! # Ok(())
//! # }
//! ```

use std::future::Future;

use blerpc_proto::connection::SetupPipelining;

use super::{Acceptor, Link, LinkError, LinkRx, LinkTx};

/// How many bytes of a PDU the trace shows.
const SHOWN: usize = 48;

/// A link that logs every PDU (direction, length, hex) at `trace` level, target `blerpc::pdu`.
#[derive(Debug)]
pub struct Traced<L> {
    inner: L,
}

impl<L: Link> Traced<L> {
    /// Wraps `inner`.
    pub fn new(inner: L) -> Self {
        Traced { inner }
    }

    /// The wrapped link.
    pub fn get_ref(&self) -> &L {
        &self.inner
    }
}

impl<L: Link> Link for Traced<L> {
    type Tx = TracedTx<L::Tx>;
    type Rx = TracedRx<L::Rx>;
    fn att_mtu(&self) -> usize {
        self.inner.att_mtu()
    }
    fn long_containers(&self) -> bool {
        self.inner.long_containers()
    }
    fn peer_id(&self) -> String {
        self.inner.peer_id()
    }
    fn peer_ip(&self) -> Option<std::net::IpAddr> {
        self.inner.peer_ip()
    }
    fn setup_pipelining(&self) -> SetupPipelining {
        self.inner.setup_pipelining()
    }
    fn link_report(&self) -> Option<super::LinkProbe> {
        self.inner.link_report()
    }
    fn split(self) -> (Self::Tx, Self::Rx) {
        let peer = self.inner.peer_id();
        let (tx, rx) = self.inner.split();
        (
            TracedTx {
                inner: tx,
                peer: peer.clone(),
            },
            TracedRx { inner: rx, peer },
        )
    }
}

/// The transmit half of a [`Traced`] link.
#[derive(Debug)]
pub struct TracedTx<T> {
    inner: T,
    peer: String,
}

/// The receive half of a [`Traced`] link.
#[derive(Debug)]
pub struct TracedRx<R> {
    inner: R,
    peer: String,
}

/// The first [`SHOWN`] bytes of `pdu` in hex, with `…` when there are more.
fn hex_prefix(pdu: &[u8]) -> String {
    let head = crate::known_keys::to_hex(pdu.get(..SHOWN).unwrap_or(pdu));
    if pdu.len() > SHOWN {
        format!("{head}…")
    } else {
        head
    }
}

impl<T: LinkTx> LinkTx for TracedTx<T> {
    fn queue(&mut self, pdu: &[u8]) -> Result<(), LinkError> {
        tracing::trace!(target: "blerpc::pdu", peer = %self.peer, "→ {:3} B {}", pdu.len(), hex_prefix(pdu));
        self.inner.queue(pdu)
    }
    fn queue_with(
        &mut self,
        len: usize,
        scratch: &mut Vec<u8>,
        fill: impl FnOnce(&mut [u8]) -> Option<usize>,
    ) -> Result<Option<usize>, LinkError> {
        // The inner link's own path (a stream link fills its send queue in place), traced.
        let peer = &self.peer;
        self.inner.queue_with(len, scratch, |out| {
            let n = fill(out)?;
            tracing::trace!(target: "blerpc::pdu", peer = %peer, "→ {:3} B {}", n, hex_prefix(out.get(..n).unwrap_or_default()));
            Some(n)
        })
    }
    fn is_full(&self) -> bool {
        self.inner.is_full()
    }
    fn has_pending(&self) -> bool {
        self.inner.has_pending()
    }
    fn flush(&mut self) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.inner.flush()
    }
    fn close(&mut self) -> impl Future<Output = Result<(), LinkError>> + Send {
        self.inner.close()
    }
    fn release_memory(&mut self) {
        self.inner.release_memory();
    }
}

impl<R: LinkRx> LinkRx for TracedRx<R> {
    async fn recv(&mut self) -> Result<Option<&[u8]>, LinkError> {
        let r = self.inner.recv().await;
        if let Ok(Some(pdu)) = &r {
            tracing::trace!(target: "blerpc::pdu", peer = %self.peer, "← {:3} B {}", pdu.len(), hex_prefix(pdu));
        }
        r
    }
    fn set_max_container(&mut self, len: usize) {
        self.inner.set_max_container(len);
    }
    fn release_memory(&mut self) {
        self.inner.release_memory();
    }
    fn poll_timeout(&self) -> Option<tokio::time::Instant> {
        self.inner.poll_timeout()
    }
    fn handle_timeout(&mut self, now: tokio::time::Instant) -> Result<(), LinkError> {
        self.inner.handle_timeout(now)
    }
}

/// An acceptor whose links are [`Traced`].
#[derive(Debug)]
pub struct TracedAcceptor<A>(pub A);

impl<A: Acceptor> Acceptor for TracedAcceptor<A> {
    type Link = Traced<A::Link>;
    async fn accept(&mut self) -> std::io::Result<Traced<A::Link>> {
        self.0.accept().await.map(Traced::new)
    }
    fn set_guard(&mut self, guard: std::sync::Arc<super::guard::AddressGuard>) -> bool {
        self.0.set_guard(guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_shows_48_bytes_then_an_ellipsis() {
        assert_eq!(hex_prefix(&[]), "");
        assert_eq!(hex_prefix(&[0x00, 0xab, 0xff]), "00abff");
        let long: Vec<u8> = (0..49).collect();
        let shown = hex_prefix(&long);
        assert_eq!(shown.chars().count(), 2 * SHOWN + 1);
        assert!(
            shown.starts_with("000102") && shown.ends_with("2f…"),
            "{shown}"
        );
        assert_eq!(hex_prefix(&long[..48]).len(), 96);
    }
}
