//! The HTTP listener, hardened as the device port is: every connection must send a complete
//! request head within [`HttpLimits::header_timeout`] (from when it connects, and from the end
//! of each answer while it is kept alive), at most [`HttpLimits::max_connections`] are open at
//! once and [`HttpLimits::max_per_address`] from one IP address, a head is at most
//! [`HttpLimits::max_head_bytes`]; what is refused or timed out is
//! counted in `/metrics` (`blerpc_gateway_http_*`). Plain HTTP and HTTPS share the loop.
//!
//! Each address's connection rate is guarded as the device listeners' is, by the runtime's
//! [`AddressGuard`] on a [`GuardedListener`] ([`HttpLimits::guard`]): a connection beyond its
//! address's rate penalizes the address, and a penalized address's connections are closed at
//! accept, before hyper sees them (on Linux its connection attempts are dropped in the
//! kernel). A connection that ends in a protocol error (a head too large or malformed, no
//! complete head in time, a body too large or too slow: 431, 400, 413, 408; a failed TLS
//! handshake) is an offence, costing its address [`GuardConfig::offence_cost`] tokens more.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use blerpc::link::guard::{AddressGuard, GuardConfig, Refusal};
use blerpc::link::listener::{Accepted, GuardedListener};
use blerpc::link::tcp::TcpOptions;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use super::self_wake::SelfWoken;
use super::trim::{self, Closed};
use crate::GatewayConfig;
use crate::metrics::GatewayMetrics;

/// The HTTP listener's limits (from [`GatewayConfig`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HttpLimits {
    /// A connection must send a complete request head within this: from when it connects, and
    /// from the end of each answer while it is kept alive (idle). Default 10 s.
    pub header_timeout: Duration,
    /// Connections open at once; more are closed at accept. Default 10,000.
    pub max_connections: usize,
    /// Connections one IP address may hold open; more are closed at accept. Default 1,000.
    pub max_per_address: usize,
    /// A TLS handshake must finish within this. 10 s.
    pub tls_handshake_timeout: Duration,
    /// A request head's bytes at most (hyper's read buffer); a longer head is answered 431 and
    /// the connection closed. 32 KiB: hyper parses the whole head again at each read, so its
    /// default (about 400 KiB) let one client cost milliseconds of CPU per request.
    pub max_head_bytes: usize,
    /// Each address's connection rate, the cost of its protocol errors and its penalty
    /// ([`GatewayConfig::http_guard`]).
    pub guard: GuardConfig,
}

impl HttpLimits {
    /// The limits `config` sets.
    pub fn of(config: &GatewayConfig) -> HttpLimits {
        HttpLimits {
            header_timeout: config.http_header_timeout,
            max_connections: config.max_http_connections,
            max_per_address: config.max_http_connections_per_address,
            tls_handshake_timeout: Duration::from_secs(10),
            max_head_bytes: 32 << 10,
            guard: config.http_guard,
        }
    }
}

/// What the listener serves, one clone per connection: a tower service of hyper's requests (an
/// axum [`Router`](axum::Router), or the API with its hot path in front, [`HotPath`](super::HotPath)).
pub trait HttpService:
    tower::Service<
        axum::extract::Request<hyper::body::Incoming>,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
        Future: Send + 'static,
    > + Clone
    + Send
    + 'static
{
}

impl<S> HttpService for S where
    S: tower::Service<
            axum::extract::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + 'static
{
}

/// Connections open, in all and per address.
#[derive(Debug, Default)]
struct Open {
    by_address: Mutex<HashMap<IpAddr, usize>>,
    total: std::sync::atomic::AtomicUsize,
    /// Closed since the allocator last gave memory back ([`trim`]).
    closed: Arc<Closed>,
}

/// One admitted connection: counted until dropped.
struct Admitted {
    open: Arc<Open>,
    ip: IpAddr,
    metrics: GatewayMetrics,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.open
            .total
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let mut by = self
            .open
            .by_address
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = by.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                by.remove(&self.ip);
            }
        }
        self.metrics.http_connection_delta(-1);
        self.open.closed.one();
    }
}

impl Open {
    /// Admits a connection from `ip` within `limits`, or says which limit refused it.
    fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        limits: &HttpLimits,
        metrics: &GatewayMetrics,
    ) -> Result<Admitted, &'static str> {
        use std::sync::atomic::Ordering;
        let mut by = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
        if self.total.load(Ordering::Relaxed) >= limits.max_connections {
            return Err("connections");
        }
        let n = by.entry(ip).or_insert(0);
        if *n >= limits.max_per_address {
            return Err("per_address");
        }
        *n += 1;
        self.total.fetch_add(1, Ordering::Relaxed);
        metrics.http_connection_delta(1);
        Ok(Admitted {
            open: self.clone(),
            ip,
            metrics: metrics.clone(),
        })
    }
}

/// Serves `router` on `listener` (HTTPS with `tls`) within `limits` until `shutdown`
/// completes; connections open then finish on their own.
pub async fn serve(
    router: impl HttpService,
    listener: TcpListener,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    limits: HttpLimits,
    metrics: GatewayMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let acceptor = tls.map(|config| {
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let open = Arc::new(Open::default());
    // Gives back what a burst of closed connections freed; ends with the listener.
    let _trimming = AbortOnDrop(tokio::spawn(trim::run(open.closed.clone())));
    let guard = AddressGuard::new(limits.guard);
    let mut listener = GuardedListener::new(listener);
    listener.set_guard(guard.clone());
    // Small answers go out at once (without it, a relayed container can wait for a delayed
    // ACK).
    let tcp_options = TcpOptions {
        nodelay: true,
        ..TcpOptions::default()
    };
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept_next(&tcp_options) => match accepted {
                Accepted::Admitted(tcp, peer) => (tcp, peer),
                Accepted::Refused(why, peer) => {
                    refused(&metrics, &limits.guard, why, peer);
                    continue;
                }
            },
        };
        let admitted = match open.admit(peer.ip(), &limits, &metrics) {
            Ok(a) => a,
            Err(reason) => {
                metrics.http_refused(reason);
                drop(tcp);
                continue;
            }
        };
        let service = router.clone();
        let metrics = metrics.clone();
        let guard = guard.clone();
        // A task per connection, sized for its own kind: a plain connection's task does not
        // carry room for a TLS session and its handshake.
        match acceptor.clone() {
            None => {
                tokio::spawn(async move {
                    let _admitted = admitted;
                    SelfWoken::new(connection(tcp, service, peer, limits, &metrics, &guard)).await;
                });
            }
            Some(acceptor) => {
                tokio::spawn(async move {
                    let _admitted = admitted;
                    let handshake =
                        tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(tcp));
                    match handshake.await {
                        Ok(Ok(tls)) => {
                            let served = connection(tls, service, peer, limits, &metrics, &guard);
                            SelfWoken::new(served).await;
                        }
                        Ok(Err(e)) => {
                            offence(&guard, &metrics, peer);
                            tracing::debug!(%peer, "TLS handshake failed: {e}");
                        }
                        Err(_) => {
                            offence(&guard, &metrics, peer);
                            metrics.http_timeout("tls_handshake");
                            tracing::debug!(%peer, "TLS handshake timed out");
                        }
                    }
                });
            }
        }
    }
}

/// A task aborted when the listener that started it returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Counts a connection the guard refused, and the penalty a `Rate` refusal imposed.
fn refused(metrics: &GatewayMetrics, guard: &GuardConfig, why: Refusal, peer: SocketAddr) {
    match why {
        Refusal::Rate => {
            metrics.http_refused("rate");
            if !guard.penalty.is_zero() {
                metrics.http_penalty("rate", peer.ip());
            }
        }
        Refusal::Penalized => metrics.http_refused("penalized"),
    }
}

/// Charges `peer`'s address an offence in `guard`, counting the penalty it may impose.
fn offence(guard: &AddressGuard, metrics: &GatewayMetrics, peer: SocketAddr) {
    if guard.offence(peer.ip(), Instant::now()) {
        metrics.http_penalty("offences", peer.ip());
    }
}

/// Whether an answer with `status` ends its request for cause: a body too large or too slow.
fn is_offence(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
    )
}

/// One connection, as its answers are checked: whether a request has been answered (a head
/// timeout after one is an idle kept connection, not an offence), and where offences go.
struct Watch {
    answered: AtomicBool,
    guard: Arc<AddressGuard>,
    metrics: GatewayMetrics,
    peer: SocketAddr,
}

/// Serves one connection's requests (HTTP/1.1, upgrades for the relay); its protocol errors
/// are offences of its address in `guard`.
async fn connection<I, S>(
    io: I,
    service: S,
    peer: SocketAddr,
    limits: HttpLimits,
    metrics: &GatewayMetrics,
    guard: &Arc<AddressGuard>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: HttpService,
{
    // What each request's answer is checked against, shared: one reference count per request.
    let watch = Arc::new(Watch {
        answered: AtomicBool::new(false),
        guard: guard.clone(),
        metrics: metrics.clone(),
        peer,
    });
    let hyper_service = {
        let watch = watch.clone();
        hyper::service::service_fn(move |request| {
            // A clone of the router is one reference count.
            let answer = service.clone().call(request);
            let watch = watch.clone();
            async move {
                let response = answer.await;
                if let Ok(r) = &response
                    && is_offence(r.status())
                {
                    offence(&watch.guard, &watch.metrics, watch.peer);
                }
                watch.answered.store(true, Ordering::Relaxed);
                response
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_head_bytes);
    if let Err(e) = builder
        .serve_connection(TokioIo::new(io), hyper_service)
        .with_upgrades()
        .await
    {
        if e.is_timeout() {
            metrics.http_timeout("head");
        }
        // A head too large or malformed (hyper answered 431 or 400), or none in time.
        let first_head_late = e.is_timeout() && !watch.answered.load(Ordering::Relaxed);
        if e.is_parse() || e.is_parse_too_large() || first_head_late {
            offence(guard, metrics, peer);
        }
        tracing::debug!(%peer, "HTTP connection ended: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_too_large_or_too_slow_is_an_offence_other_answers_are_not() {
        assert!(is_offence(StatusCode::PAYLOAD_TOO_LARGE));
        assert!(is_offence(StatusCode::REQUEST_TIMEOUT));
        for ok in [
            StatusCode::OK,
            StatusCode::BAD_REQUEST,
            StatusCode::UNAUTHORIZED,
            StatusCode::NOT_FOUND,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::GATEWAY_TIMEOUT,
        ] {
            assert!(!is_offence(ok), "{ok}");
        }
    }
}
