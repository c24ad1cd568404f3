//! The TLS and WebSocket acceptors' handshakes in progress: run concurrently, each within
//! [`TcpOptions::handshake_timeout`] (less a random part of up to
//! [`TcpOptions::handshake_timeout_spread`] of it), at most [`TcpOptions::max_handshakes`] at once and
//! [`TcpOptions::max_handshakes_per_address`] per IP address. When every slot is taken, a
//! newcomer drops a handshake in progress once the oldest has run for
//! [`TcpOptions::handshake_evict_after`]: the oldest one of the address holding the most slots,
//! so silent sockets cannot hold the slots against newcomers, and a flood from a few addresses
//! cannot push out a lone client's handshake; one beyond its address's limit is closed at
//! once.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};

use rand_core::{OsRng, RngCore as _};
use tokio::net::TcpStream;
use tokio::task::{AbortHandle, Id, JoinSet};
use tokio::time::Instant;

use super::LinkError;
use super::listener::{GuardedListener, report};
use super::tcp::{TcpOptions, timed};
use crate::metrics::Reason;

/// Handshakes in progress (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct Handshakes<L> {
    tasks: JoinSet<Option<L>>,
    /// Oldest first, with when each started; entries of finished tasks are skipped when met.
    order: VecDeque<(Id, AbortHandle, Instant)>,
    /// The address of each task in progress.
    addr: HashMap<Id, SocketAddr>,
    per_address: HashMap<IpAddr, usize>,
}

impl<L: Send + 'static> Handshakes<L> {
    pub(crate) fn new() -> Self {
        Handshakes {
            tasks: JoinSet::new(),
            order: VecDeque::new(),
            addr: HashMap::new(),
            per_address: HashMap::new(),
        }
    }

    /// Handshakes in progress.
    pub(crate) fn len(&self) -> usize {
        self.addr.len()
    }

    /// Accepts connections and runs their handshakes until one succeeds; failures are counted
    /// and logged ([`TcpOptions::metrics`]) and skipped. Cancel-safe: handshakes in progress
    /// stay here.
    pub(crate) async fn next<F, Fut>(
        &mut self,
        listener: &mut GuardedListener,
        options: &TcpOptions,
        handshake: F,
    ) -> L
    where
        F: Fn(TcpStream, SocketAddr) -> Fut,
        Fut: Future<Output = Result<L, LinkError>> + Send + 'static,
    {
        loop {
            // With every slot taken, accept again once the oldest handshake may be dropped.
            let full = self.len() >= options.max_handshakes.max(1);
            let evictable = self
                .oldest_start()
                .map(|t| t + options.handshake_evict_after);
            let wait_until = if full { evictable } else { None };
            let can_accept = !full || wait_until.is_some_and(|t| t <= Instant::now());
            tokio::select! {
                biased;
                Some(done) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    let (id, link) = match done {
                        Ok((id, link)) => (id, link),
                        Err(e) => (e.id(), None),
                    };
                    self.forget(id);
                    if let Some(link) = link {
                        return link;
                    }
                }
                (stream, addr) = listener.accept(options), if can_accept => {
                    let guard = listener.guard().cloned();
                    self.start(stream, addr, options, guard, &handshake);
                }
                () = tokio::time::sleep_until(wait_until.unwrap_or_else(Instant::now)),
                    if !can_accept && wait_until.is_some() => {}
            }
        }
    }

    /// When the oldest handshake in progress started.
    fn oldest_start(&mut self) -> Option<Instant> {
        while let Some((id, _, started)) = self.order.front() {
            if self.addr.contains_key(id) {
                return Some(*started);
            }
            self.order.pop_front();
        }
        None
    }

    fn start<F, Fut>(
        &mut self,
        stream: TcpStream,
        addr: SocketAddr,
        options: &TcpOptions,
        guard: Option<std::sync::Arc<super::guard::AddressGuard>>,
        handshake: &F,
    ) where
        F: Fn(TcpStream, SocketAddr) -> Fut,
        Fut: Future<Output = Result<L, LinkError>> + Send + 'static,
    {
        let ip = addr.ip();
        let peer = addr.to_string();
        let here = self.per_address.get(&ip).copied().unwrap_or(0);
        if options
            .max_handshakes_per_address
            .is_some_and(|max| here >= max.max(1))
        {
            report(
                options.metrics.as_deref(),
                Reason::HandshakeAddressLimit,
                &peer,
            );
            return; // dropping the stream closes it
        }
        while self.len() >= options.max_handshakes.max(1) {
            let Some((id, handle)) = self.victim() else {
                break;
            };
            if let Some(old) = self.addr.get(&id).copied() {
                handle.abort();
                self.forget(id);
                report(
                    options.metrics.as_deref(),
                    Reason::HandshakeEvicted,
                    &old.to_string(),
                );
                if let Some(guard) = &guard {
                    guard.closed(
                        old.ip(),
                        Reason::HandshakeEvicted,
                        std::time::Instant::now(),
                    );
                }
            }
        }
        let fut = handshake(stream, addr);
        let limit = crate::clock::spread_deadline(
            options.handshake_timeout,
            options.handshake_timeout_spread,
            OsRng.next_u32(),
        );
        let metrics = options.metrics.clone();
        let handle = self.tasks.spawn(async move {
            match timed(limit, "handshake", fut).await {
                Ok(link) => Some(link),
                Err(e) => {
                    let timed_out = matches!(&e, LinkError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut);
                    let reason = if timed_out {
                        Reason::HandshakeTimeout
                    } else {
                        Reason::HandshakeFailed
                    };
                    tracing::debug!(%peer, "handshake failed: {e}");
                    report(metrics.as_deref(), reason, &peer);
                    if let Some(guard) = guard {
                        guard.closed(ip, reason, std::time::Instant::now());
                    }
                    None
                }
            }
        });
        let id = handle.id();
        self.order.push_back((id, handle, Instant::now()));
        self.addr.insert(id, addr);
        *self.per_address.entry(ip).or_insert(0) += 1;
        // Keep the order queue from growing with finished entries.
        if self.order.len() > 2 * self.len() + 16 {
            let live = &self.addr;
            self.order.retain(|(id, _, _)| live.contains_key(id));
        }
    }

    /// The handshake to drop for a newcomer: the oldest of the address holding the most slots
    /// (a flood from a few addresses cannot push out a lone client's handshake), taken out of
    /// the order queue.
    fn victim(&mut self) -> Option<(Id, AbortHandle)> {
        let (&busiest, _) = self.per_address.iter().max_by_key(|(_, n)| **n)?;
        let addr = &self.addr;
        let at = self
            .order
            .iter()
            .position(|(id, _, _)| addr.get(id).is_some_and(|a| a.ip() == busiest))?;
        self.order.remove(at).map(|(id, handle, _)| (id, handle))
    }

    fn forget(&mut self, id: Id) {
        if let Some(addr) = self.addr.remove(&id) {
            let ip = addr.ip();
            if let Some(n) = self.per_address.get_mut(&ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.per_address.remove(&ip);
                }
            }
        }
    }
}
